//! Named crash points (MySQL's `ERROR_INJECT_CRASH`, seed 000): places in the
//! durability protocols where a test can make the node die, to check that
//! recovery copes with a crash exactly there.
//!
//! The registry is off by default and costs one branch per point. A state
//! machine never aborts by itself: `crash_point!` tells its caller "crash
//! here" (as `RedoIo::Crash` and friends), and the host (simulator, or a
//! test) crashes the node. Every point is listed in [`ALL`], so a test can arm
//! each in turn.

use std::collections::BTreeMap;

/// Every crash point's name. Names say where: "<area>: <step>".
pub mod points {
    pub const REDO_AFTER_WRITE_BEFORE_SYNC: &str = "redo: page write done, before its sync";
    pub const REDO_AFTER_SYNC_BEFORE_CONF: &str = "redo: flush synced, before reporting the GCI durable";
    pub const REDO_BEFORE_INVALIDATE: &str = "redo: resumed after restart, before invalidating stale pages";
    pub const LCP_AFTER_DATA_BEFORE_SYNC: &str = "lcp: data file written, before its sync";
    pub const LCP_AFTER_DATA_SYNC_BEFORE_CONTROL: &str = "lcp: data file synced, before the control file";
    pub const LCP_AFTER_CONTROL_BEFORE_DELETE: &str = "lcp: control file written, before deleting obsolete files";
    pub const LCP_ROUND_BEFORE_SYSFILE: &str =
        "lcp: every partition checkpointed, before the system file records the round";
    pub const LCP_RECORDED_BEFORE_RELEASE: &str = "lcp: system file records the round, before the REDO log is released";
    pub const SYSFILE_BEFORE_WRITE: &str = "sysfile: before writing the copy";
    pub const SYSFILE_AFTER_WRITE: &str = "sysfile: copy written, before reporting";
    pub const SCHEMA_AFTER_TMP_BEFORE_RENAME: &str = "schema: new schema file written, before the rename";
    pub const DICT_PENDING_BEFORE_STORAGE: &str =
        "dict: every schema file holds the change as pending, before any storage makes it";
    pub const DICT_MADE_BEFORE_SCHEMA_WRITE: &str =
        "dict: every block made the change, before the schema file commits it";
    pub const DICT_WRITTEN_BEFORE_ANSWER: &str = "dict: the schema file commits the change, before the client hears";
    /// A fault, not a crash (in [`super::FAULTS`], not [`super::ALL`]): the
    /// LQH finds no REDO room for a TRUNCATE's reset record, as when its log
    /// broke or the reserve for reset records ran out, and refuses it.
    pub const LQH_TRUNCATE_NO_REDO_ROOM: &str = "lqh: no REDO room for a TRUNCATE (fault: the LQH refuses it)";
}

/// All crash points, for tests that crash at each in turn.
pub const ALL: &[&str] = &[
    points::REDO_AFTER_WRITE_BEFORE_SYNC,
    points::REDO_AFTER_SYNC_BEFORE_CONF,
    points::REDO_BEFORE_INVALIDATE,
    points::LCP_AFTER_DATA_BEFORE_SYNC,
    points::LCP_AFTER_DATA_SYNC_BEFORE_CONTROL,
    points::LCP_AFTER_CONTROL_BEFORE_DELETE,
    points::LCP_ROUND_BEFORE_SYSFILE,
    points::LCP_RECORDED_BEFORE_RELEASE,
    points::SYSFILE_BEFORE_WRITE,
    points::SYSFILE_AFTER_WRITE,
    points::SCHEMA_AFTER_TMP_BEFORE_RENAME,
    points::DICT_PENDING_BEFORE_STORAGE,
    points::DICT_MADE_BEFORE_SCHEMA_WRITE,
    points::DICT_WRITTEN_BEFORE_ANSWER,
];

/// Fault points: where the caller, instead of crashing, takes the failure
/// path it would take for a real fault (armed and counted the same way).
pub const FAULTS: &[&str] = &[points::LQH_TRUNCATE_NO_REDO_ROOM];

/// Which points are armed, and after how many passes each fires.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashPoints {
    /// name -> passes left before it fires (0: fires on the next pass).
    armed: BTreeMap<&'static str, u32>,
    /// Points that fired, in order.
    fired: Vec<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no crash point is named {0:?} (see norr_durability::crash::ALL)")]
pub struct UnknownCrashPoint(pub String);

impl CrashPoints {
    /// Nothing armed (production).
    pub fn off() -> CrashPoints {
        CrashPoints::default()
    }

    /// Fire `name` on its `(skip + 1)`-th pass. Once fired a point disarms.
    pub fn arm(&mut self, name: &str, skip: u32) -> Result<(), UnknownCrashPoint> {
        let Some(&n) = ALL.iter().chain(FAULTS).find(|&&p| p == name) else {
            return Err(UnknownCrashPoint(name.to_string()));
        };
        self.armed.insert(n, skip);
        Ok(())
    }

    pub fn is_off(&self) -> bool {
        self.armed.is_empty()
    }

    /// Points that fired so far, in order.
    pub fn fired(&self) -> &[&'static str] {
        &self.fired
    }

    /// Pass a point: true if the node must crash here. Use `crash_point!`.
    pub fn hit(&mut self, name: &'static str) -> bool {
        debug_assert!(
            ALL.contains(&name) || FAULTS.contains(&name),
            "crash point {name:?} missing from crash::ALL and crash::FAULTS"
        );
        if self.armed.is_empty() {
            return false;
        }
        match self.armed.get_mut(name) {
            None => false,
            Some(0) => {
                self.armed.remove(name);
                self.fired.push(name);
                true
            }
            Some(n) => {
                *n -= 1;
                false
            }
        }
    }
}

/// `crash_point!(crash_points, points::NAME)`: true if the node must crash
/// at this point (the caller stops and reports it; it never aborts itself).
#[macro_export]
macro_rules! crash_point {
    ($cp:expr, $name:expr) => {
        $cp.hit($name)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_by_default_and_fires_once_after_skips() {
        let mut c = CrashPoints::off();
        assert!(!crash_point!(c, points::REDO_AFTER_WRITE_BEFORE_SYNC));
        c.arm(points::REDO_AFTER_WRITE_BEFORE_SYNC, 2).unwrap();
        let hits: Vec<bool> = (0..5).map(|_| crash_point!(c, points::REDO_AFTER_WRITE_BEFORE_SYNC)).collect();
        assert_eq!(hits, [false, false, true, false, false]);
        assert_eq!(c.fired(), &[points::REDO_AFTER_WRITE_BEFORE_SYNC]);
        assert!(c.arm("no such point", 0).is_err());
        let mut names: Vec<&str> = ALL.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len(), "crash point names are unique");
    }
}
