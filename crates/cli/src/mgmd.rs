//! `norr mgmd`: the management server process.

use anyhow::Context;
use norr_mgmd::config::{ApiAuth, ClusterConfig, EXAMPLE_CONFIG};
use norr_mgmd::server::Mgmd;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  norr mgmd --example-config > cluster.toml   # a commented cluster file to start from
  norr mgmd --config cluster.toml             # serve it on the mgmd entry's host:port
  norr mgmd --config cluster.toml --check     # validate and print the effective file
  norr mgmd --config cluster.toml --node-id 50  # the second mgmd of the file

Data nodes, SQL nodes and clients then start with --mgm HOST:PORT and fetch
the configuration; `norr mgm show` lists the cluster. A running cluster keeps
serving while mgmd is down: only starting nodes and arbitration need it.

With a cluster secret ([cluster] secret, or api_auth = \"secret\" and the
secret from --secret-file / NORR_CLUSTER_SECRET) mgmd runs stop, start and
restart only for a client that proves the secret (`norr mgm --secret-file`);
each refusal is logged with the client's address. show and status stay open,
and mgmd never hands the secret out.")]
pub struct MgmdArgs {
    /// The cluster configuration file (TOML): nodes, replicas, data node
    /// knobs. Refused with every problem named if anything in it is wrong.
    #[arg(long, short = 'f', value_name = "FILE.toml", required_unless_present = "example_config")]
    pub config: Option<PathBuf>,
    /// Which mgmd entry of the file this process is (default: the first).
    #[arg(long, value_name = "N")]
    pub node_id: Option<u16>,
    /// Print a commented example cluster file and exit.
    #[arg(long)]
    pub example_config: bool,
    /// Validate the file, print it in full (every knob, resolved data
    /// directories) and exit.
    #[arg(long)]
    pub check: bool,
    /// File holding the cluster secret (NORR_CLUSTER_SECRET otherwise), for
    /// a file that says api_auth = "secret" but does not hold the secret:
    /// mgmd needs it to check management commands.
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
}

pub fn run(a: MgmdArgs) -> anyhow::Result<()> {
    if a.example_config {
        print!("{EXAMPLE_CONFIG}");
        return Ok(());
    }
    let path = a.config.context("--config FILE is required")?;
    let mut config = ClusterConfig::load(&path)?;
    if a.check {
        print!("{}", config.to_toml());
        eprintln!("norr mgmd: {} is valid (digest {:#018x})", path.display(), config.digest());
        return Ok(());
    }
    // The file's secret, else (for api_auth = "secret" or "account") the one given.
    let given = crate::secret::from_flag_or_env(a.secret_file.as_deref())?;
    if let Some(s) = given.filter(|_| config.api_auth.requires_secret()) {
        if config.secret.as_ref().is_some_and(|f| *f != s) {
            anyhow::bail!("{} holds a cluster secret, and another one was given: pass one of them", path.display());
        }
        config.secret = Some(s);
    }
    if config.api_auth == ApiAuth::Off && config.secret.is_some() {
        eprintln!(
            "norr mgmd: warning: the cluster file says api_auth = \"off\": management commands are not checked \
             against the secret (anyone who reaches mgmd's port may stop the cluster)"
        );
    }
    let name = config.name.clone();
    let groups = config.node_groups();
    let data_nodes = config.data_nodes().count();
    let digest = config.digest();
    let mgmd = Mgmd::start(config, a.node_id, None)?;
    eprintln!(
        "norr mgmd: node {} of cluster \"{name}\" listening on {} ({data_nodes} data node{} in {} node group{}, \
         config digest {digest:#018x}; management commands {}; Ctrl-C stops it)",
        mgmd.node_id(),
        mgmd.local_addr(),
        if data_nodes == 1 { "" } else { "s" },
        groups.len(),
        if groups.len() == 1 { "" } else { "s" },
        if mgmd.commands_need_secret() { "need the cluster secret" } else { "are open" },
    );
    let stopper = mgmd.stopper();
    ctrlc::set_handler(move || stopper.stop()).context("cannot install the Ctrl-C handler")?;
    mgmd.join();
    eprintln!("norr mgmd: stopped");
    Ok(())
}
