//! System variables NorrDB knows (clients read them, and tools set them to
//! their defaults) but does not act on: setting one to a value that asks
//! for a behaviour NorrDB lacks is refused with an error that says so,
//! instead of being stored and silently ignored. Setting the value NorrDB
//! already behaves as is accepted.

use crate::types::SqlError;
use norr_signals::Value;

/// A variable NorrDB does not act on: the only values it may take, and
/// what a different value would ask for.
struct Inert {
    name: &'static str,
    /// Accepted values, upper case ("0"/"1" for booleans).
    accepted: &'static [&'static str],
    /// What NorrDB lacks, for the error message.
    lacks: &'static str,
}

const INERT: &[Inert] = &[
    Inert { name: "default_week_format", accepted: &["0"], lacks: "a default WEEK() mode other than 0" },
    Inert { name: "event_scheduler", accepted: &["OFF", "DISABLED"], lacks: "events (there is no event scheduler)" },
    Inert { name: "general_log", accepted: &["0"], lacks: "the general query log" },
    Inert { name: "init_connect", accepted: &[""], lacks: "statements run at every connection (init_connect)" },
    Inert { name: "max_join_size", accepted: &["18446744073709551615"], lacks: "a limit on join size" },
    Inert { name: "max_user_connections", accepted: &["0"], lacks: "per-account connection limits" },
    Inert { name: "query_cache_size", accepted: &["0"], lacks: "a query cache" },
    Inert { name: "query_cache_type", accepted: &["OFF", "0"], lacks: "a query cache" },
    Inert { name: "read_only", accepted: &["0"], lacks: "a read-only server (writes are not refused)" },
    Inert { name: "sql_auto_is_null", accepted: &["0"], lacks: "sql_auto_is_null" },
    Inert { name: "sql_big_selects", accepted: &["1"], lacks: "a limit on join size" },
    Inert {
        name: "sql_require_primary_key",
        accepted: &["0"],
        lacks: "refusing tables without a primary key (every table has one, hidden if need be)",
    },
    Inert { name: "sql_safe_updates", accepted: &["0"], lacks: "safe-updates mode" },
    Inert { name: "super_read_only", accepted: &["0"], lacks: "a read-only server (writes are not refused)" },
    Inert { name: "updatable_views_with_limit", accepted: &["YES", "1"], lacks: "updatable_views_with_limit = NO" },
];

/// Refuses `name = value` (already normalised) when it asks for a
/// behaviour NorrDB does not have.
pub fn check(name: &str, value: &Value) -> Result<(), SqlError> {
    if name == "require_secure_transport" && !is(value, "0") {
        // MySQL's own refusal when the server has no TLS.
        return Err(SqlError::new(
            3579,
            "HY000",
            "No secure transports (SSL or Shared Memory) are configured, unable to set \
             --require_secure_transport=ON.",
        ));
    }
    if matches!(name, "default_storage_engine" | "default_tmp_storage_engine") {
        let engine = crate::engine::catalog::value_text(value);
        if !crate::engine::ddl::is_cluster_engine(&engine) {
            // As MySQL for an engine it does not have.
            return Err(SqlError::new(1286, "42000", format!("Unknown storage engine '{engine}'")));
        }
    }
    let Some(i) = INERT.iter().find(|i| i.name == name) else { return Ok(()) };
    if i.accepted.iter().any(|a| is(value, a)) {
        return Ok(());
    }
    Err(SqlError::unsupported(format!(
        "SET {name} = {}: NorrDB has no {}",
        crate::engine::catalog::value_text(value),
        i.lacks
    )))
}

fn is(v: &Value, text: &str) -> bool {
    crate::engine::catalog::value_text(v).eq_ignore_ascii_case(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_other_values_are_refused_by_name() {
        check("read_only", &Value::Int(0)).unwrap();
        let e = check("read_only", &Value::Int(1)).unwrap_err();
        assert_eq!(e.code, 1235);
        assert!(e.message.contains("read_only"), "{}", e.message);
        check("event_scheduler", &Value::str("off")).unwrap();
        assert_eq!(check("event_scheduler", &Value::str("ON")).unwrap_err().code, 1235);
        check("init_connect", &Value::str("")).unwrap();
        assert_eq!(check("init_connect", &Value::str("SET NAMES utf8mb4")).unwrap_err().code, 1235);
        assert_eq!(check("require_secure_transport", &Value::Int(1)).unwrap_err().code, 3579);
        check("require_secure_transport", &Value::Int(0)).unwrap();
        // Variables NorrDB acts on are not this module's.
        check("max_connections", &Value::Int(5)).unwrap();
    }
}
