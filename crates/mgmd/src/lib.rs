//! NorrDB's management server and what talks to it.
//!
//! * [`config`]: the one-file cluster configuration (TOML), validated.
//! * [`protocol`]: the messages between mgmd and its peers (data nodes, SQL
//!   nodes, API clients, `norr mgm`), framed and checksummed.
//! * [`server`]: `norr mgmd`: serves the configuration, hands out API node
//!   ids, keeps every node's latest report, arbitrates, and relays
//!   management commands.
//! * [`command_auth`]: with a cluster secret, commands that change the
//!   cluster (stop, start, restart) need the proof of it.
//! * [`session_auth`]: with a cluster secret, a node proves it before mgmd
//!   gives it a session (a node id, the configuration, a say in arbitration).
//! * [`session`]: the node side: fetch the configuration, report, take
//!   commands, ask for arbitration; reconnects in the background, so a
//!   running cluster does not depend on mgmd.
//!
//! Blocking std networking (no async runtime): mgmd serves a handful of
//! long-lived connections, and the session runs beside any runtime.

pub mod command_auth;
pub mod config;
pub mod protocol;
pub mod server;
pub mod session;
pub mod session_auth;
