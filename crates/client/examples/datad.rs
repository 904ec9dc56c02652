//! A data node (runtime event loop + TC/LQH/DICT blocks) with default knobs,
//! for benchmarks and examples when the `norr datad` binary is not at hand:
//! `cargo run --release -p norr-client --example datad -- 127.0.0.1:2202`.

fn main() -> std::io::Result<()> {
    let listen = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:2202".to_string());
    let knobs = norr_knobs::Knobs::default();
    let cfg = norr_runtime::DataNodeConfig {
        node_id: 1,
        listen: listen.parse().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{e}")))?,
        knobs: knobs.clone(),
        cluster: None,
    };
    let node = norr_runtime::start_data_node_with(
        cfg,
        norr_runtime::RuntimeOptions::default(),
        norr_txn::build_data_node(1, &knobs),
    )?;
    eprintln!("datad example: listening on {}", node.local_addr());
    node.join()
}
