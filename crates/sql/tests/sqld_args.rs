//! `norr sqld`'s data node options: one address, a cluster's list, or mgmd.

use clap::Parser;
use norr_sql::server::SqldArgs;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    sqld: SqldArgs,
}

fn parse(args: &[&str]) -> Result<SqldArgs, clap::Error> {
    Cli::try_parse_from(std::iter::once("sqld").chain(args.iter().copied())).map(|c| c.sqld)
}

#[test]
fn data_nodes_come_from_the_command_line_or_from_mgmd() {
    let a = parse(&[]).unwrap();
    assert_eq!((a.data_node.as_str(), a.mgm), ("127.0.0.1:2202", None));
    let a = parse(&["--data-node", "10.0.0.1:2202,10.0.0.2:2202"]).unwrap();
    assert_eq!(a.data_node, "10.0.0.1:2202,10.0.0.2:2202");
    let a = parse(&["--mgm", "10.0.0.9:1186"]).unwrap();
    assert_eq!(a.mgm.as_deref(), Some("10.0.0.9:1186"));
    // Both at once is refused rather than one silently ignored.
    let e = parse(&["--mgm", "10.0.0.9:1186", "--data-node", "10.0.0.1:2202"]).expect_err("refused");
    assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{e}");
}
