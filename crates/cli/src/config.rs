//! Data node configuration from a TOML file of `norr_knobs::Knobs`, overridden
//! by command-line flags, then validated.

use anyhow::{bail, Context};
use norr_knobs::Knobs;
use std::path::PathBuf;

/// Knob flags shared by `norr datad` and `norr up`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KnobArgs {
    /// TOML file of data node knobs (`norr datad --print-config` prints every
    /// knob with its current value: a starting point). Flags override the file.
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Memory for rows and indexes (suffixes K, M, G, T: powers of 1024).
    /// Inserts beyond it fail with "table is full". Default 1G.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub data_memory: Option<u64>,
    /// A transaction waiting this long for a row lock is aborted with the
    /// retriable error 266 (breaks deadlocks). Default 1200.
    #[arg(long, value_name = "MS")]
    pub lock_wait_timeout_ms: Option<u64>,
    /// Most concurrent API (client and SQL node) connections. Default 1024.
    #[arg(long, value_name = "N")]
    pub max_api_connections: Option<u32>,
    /// Longest a small reply may wait to be sent together with others
    /// (adaptive send; 0 = never wait). Default 20.
    #[arg(long, value_name = "US")]
    pub max_send_delay_us: Option<u64>,
    /// When idle, keep polling the network this long before sleeping, so a
    /// request arriving soon after is not delayed by the CPU's wake-up
    /// latency (costs CPU while idle; 0 = never spin). Only while socket
    /// clients are connected: a node whose only client is `norr up`'s
    /// in-process SQL node does not spin. Default 50.
    #[arg(long, value_name = "US")]
    pub idle_spin_us: Option<u64>,
    /// Set any knob by its name in the config file, e.g.
    /// `--set txn_inactive_timeout_ms=30000` or `--set max_frame_bytes=16M`.
    /// May be repeated; wins over the file and the flags above.
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    pub set: Vec<String>,
}

pub use norr_knobs::parse_size;

fn int(v: u64) -> anyhow::Result<toml::Value> {
    Ok(toml::Value::Integer(i64::try_from(v).context("value too large")?))
}

impl KnobArgs {
    /// Any knob given on the command line (file, flag or `--set`).
    pub fn any_set(&self) -> bool {
        let KnobArgs {
            config,
            data_memory,
            lock_wait_timeout_ms,
            max_api_connections,
            max_send_delay_us,
            idle_spin_us,
            set,
        } = self;
        config.is_some()
            || data_memory.is_some()
            || lock_wait_timeout_ms.is_some()
            || max_api_connections.is_some()
            || max_send_delay_us.is_some()
            || idle_spin_us.is_some()
            || !set.is_empty()
    }

    /// File, then flags, then `--set`; validated.
    pub fn load(&self) -> anyhow::Result<Knobs> {
        let mut table = match &self.config {
            None => toml::Table::new(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read config file {}", path.display()))?;
                toml::from_str::<toml::Table>(&text)
                    .with_context(|| format!("config file {} is not valid TOML", path.display()))?
            }
        };
        let flags: [(&str, Option<u64>); 5] = [
            ("data_memory_bytes", self.data_memory),
            ("lock_wait_timeout_ms", self.lock_wait_timeout_ms),
            ("max_api_connections", self.max_api_connections.map(u64::from)),
            ("max_send_delay_us", self.max_send_delay_us),
            ("idle_spin_us", self.idle_spin_us),
        ];
        for (name, v) in flags {
            if let Some(v) = v {
                table.insert(name.to_string(), int(v)?);
            }
        }
        for kv in &self.set {
            let Some((k, v)) = kv.split_once('=') else {
                bail!("--set {kv}: expected KNOB=VALUE, e.g. --set lock_wait_timeout_ms=500");
            };
            let (k, v) = (k.trim(), v.trim());
            let value = if k.ends_with("_bytes") {
                int(parse_size(v).map_err(|e| anyhow::anyhow!("--set {k}: {e}"))?)?
            } else {
                let t: toml::Table =
                    toml::from_str(&format!("v = {v}")).with_context(|| format!("--set {k}: '{v}' is not a value"))?;
                t["v"].clone()
            };
            table.insert(k.to_string(), value);
        }
        // The same reading as a cluster file's [data] section: sizes ("1G")
        // for *_bytes knobs, every problem named.
        norr_mgmd::config::knobs_from_table(table)
            .map_err(|problems| anyhow::anyhow!("invalid configuration: {}", problems.join("; ")))
    }
}

/// The effective knobs as a TOML file.
pub fn knobs_to_toml(k: &Knobs) -> String {
    toml::to_string(k).expect("knobs serialize to TOML")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        // Defined (and tested) in norr_knobs; the flag parser is that function.
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn file_flags_and_set_layer_in_order() {
        let dir = std::env::temp_dir().join(format!("norr-cli-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("k.toml");
        std::fs::write(&f, "lock_wait_timeout_ms = 700\nmax_scans = 33\ndata_memory_bytes = \"2G\"\n").unwrap();
        let only_file = KnobArgs { config: Some(f.clone()), ..KnobArgs::default() }.load().unwrap();
        assert_eq!(only_file.data_memory_bytes, 2 << 30, "sizes are read in the file too");
        let a = KnobArgs {
            config: Some(f.clone()),
            data_memory: Some(64 << 20),
            set: vec!["max_scans=44".into(), "max_frame_bytes=2M".into()],
            ..KnobArgs::default()
        };
        let k = a.load().unwrap();
        assert_eq!(k.lock_wait_timeout_ms, 700);
        assert_eq!(k.max_scans, 44);
        assert_eq!(k.data_memory_bytes, 64 << 20);
        assert_eq!(k.max_frame_bytes, 2 << 20);
        assert_eq!(k.max_transactions, Knobs::default().max_transactions);

        // The printed config reads back to the same knobs.
        std::fs::write(&f, knobs_to_toml(&k)).unwrap();
        let back = KnobArgs { config: Some(f.clone()), ..KnobArgs::default() }.load().unwrap();
        assert_eq!(back, k);

        std::fs::write(&f, "no_such_knob = 1\n").unwrap();
        let e = KnobArgs { config: Some(f.clone()), ..KnobArgs::default() }.load().unwrap_err();
        assert!(format!("{e:#}").contains("no_such_knob"), "{e:#}");
        let e = KnobArgs { lock_wait_timeout_ms: Some(0), ..KnobArgs::default() }.load().unwrap_err();
        assert!(format!("{e:#}").contains("lock_wait_timeout_ms = 0 is out of range"), "{e:#}");
        let e = KnobArgs { set: vec!["nonsense".into()], ..KnobArgs::default() }.load().unwrap_err();
        assert!(format!("{e:#}").contains("KNOB=VALUE"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
