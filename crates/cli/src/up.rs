//! `norr up`: a local cluster on loopback, in this process.

use crate::config::KnobArgs;
use anyhow::Context;
use norr_runtime::{start_data_node, DataNodeConfig};
use std::net::{Ipv4Addr, SocketAddr};

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Port of the first data node's native protocol listener (on 127.0.0.1).
    #[arg(long, default_value_t = 2202, value_name = "PORT")]
    pub port_base: u16,
    /// Port of the SQL node's MySQL protocol listener (on 127.0.0.1).
    #[arg(long, default_value_t = 3306, value_name = "PORT")]
    pub sql_port: u16,
    #[command(flatten)]
    pub knobs: KnobArgs,
}

pub fn run(a: UpArgs) -> anyhow::Result<()> {
    let knobs = a.knobs.load()?;
    let native = SocketAddr::from((Ipv4Addr::LOCALHOST, a.port_base));
    let cfg = DataNodeConfig {
        node_id: 1,
        listen: native,
        knobs,
    };
    let node = start_data_node(cfg).with_context(|| {
        format!("cannot start the data node on {native} (port taken? choose another with --port-base)")
    })?;

    // WIRING(sqld): once norr_sql exposes `SqldArgs` and `run_sqld`, start the
    // SQL node here on its own thread, e.g.
    //     let sql = SocketAddr::from((Ipv4Addr::LOCALHOST, a.sql_port));
    //     let args = SqldArgs { listen: sql.to_string(), data_node: node.local_addr().to_string(), .. };
    //     std::thread::spawn(move || norr_sql::run_sqld(args));
    // and print the `mysql` line below unconditionally.
    let sql_wired = false;

    println!("NorrDB local cluster is up:");
    println!("  data node 1   native protocol  {}", node.local_addr());
    if sql_wired {
        println!("  SQL node      MySQL protocol   127.0.0.1:{}", a.sql_port);
        println!();
        println!("Connect with:   mysql -h127.0.0.1 -P{} -uroot", a.sql_port);
    } else {
        println!("  SQL node      not started: `norr sqld` is not wired into `norr up` yet");
        println!("                (it will listen on 127.0.0.1:{})", a.sql_port);
    }
    println!("Native clients: norr_client connecting to {}", node.local_addr());
    println!("Press Ctrl-C to stop.");

    let stopper = node.stopper();
    ctrlc::set_handler(move || stopper.stop()).context("cannot install the Ctrl-C handler")?;
    node.join().context("data node failed")?;
    println!("NorrDB local cluster stopped.");
    Ok(())
}
