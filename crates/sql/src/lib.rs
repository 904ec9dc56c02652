//! `norr sqld`: a stateless SQL front end speaking the MySQL protocol on top of
//! the native client API. See DESIGN.md for the module owners and contracts.

pub mod engine;
pub mod idle_spin;
pub mod off_thread;
pub mod protocol;
pub mod server;
pub mod session_registry;
pub mod types;
