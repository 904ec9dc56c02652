//! SHOW ENGINE {NDBCLUSTER | NDB} {STATUS | MUTEX}: the cluster as this SQL
//! node sees it, one row per data node link, as NDB's SQL nodes answer it.
//! Any other engine is not in this server (1286, as MySQL for an engine it
//! does not have).

use crate::engine::ddl::is_cluster_engine;
use crate::engine::Engine;
use crate::types::{ColumnMeta, QueryOutput, SqlError};
use norr_signals::Value;

pub fn show(e: &Engine, engine: &str, mutex: bool) -> Result<QueryOutput, SqlError> {
    if !is_cluster_engine(engine) {
        return Err(SqlError::new(1286, "42000", format!("Unknown storage engine '{engine}'")));
    }
    let columns: std::sync::Arc<[ColumnMeta]> =
        ["Type", "Name", "Status"].iter().map(|n| crate::engine::infoschema::col_s("", n)).collect::<Vec<_>>().into();
    if mutex {
        // No mutex statistics are kept (NDB answers an empty set too).
        return Ok(QueryOutput::Rows { columns, rows: Vec::new() });
    }
    let nodes = e.client().data_node_status();
    let ready = nodes.iter().filter(|n| n.connected).count();
    let row = |name: String, status: String| vec![Value::str("ndbcluster"), Value::str(&name), Value::str(&status)];
    let mut rows = vec![row(
        "connection".into(),
        format!("number_of_data_nodes={}, number_of_ready_data_nodes={ready}", nodes.len()),
    )];
    for n in &nodes {
        let id = n.node_id.map_or_else(|| "unknown".to_string(), |i| i.to_string());
        rows.push(row(
            format!("data_node_{id}"),
            format!("address={}, connected={}", n.address, if n.connected { "yes" } else { "no" }),
        ));
    }
    Ok(QueryOutput::Rows { columns, rows })
}
