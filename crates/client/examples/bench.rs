//! `norr bench` as a standalone binary (same arguments), for scripts that run
//! before the `norr` binary has the subcommand: `cargo run --release -p
//! norr-client --example bench -- --help`.

use clap::Parser;

#[derive(Parser)]
#[command(name = "norr-bench", about = "Native-API load generator (flexAsynch style)")]
struct Cli {
    #[command(flatten)]
    bench: norr_client::bench::BenchArgs,
}

fn main() -> anyhow::Result<()> {
    norr_client::bench::run_bench(Cli::parse().bench)
}
