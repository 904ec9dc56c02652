//! The MySQL client/server protocol of `norr sqld`.
//!
//! Crate choice: the server crates `opensrv-mysql` 0.7 (last release 2024-02)
//! and `msql-srv` 0.11 (2023-12) are not maintained any more, lack
//! `caching_sha2_password` and have no COM_STMT_SEND_LONG_DATA / PS type-list
//! handling of the kind we need, so fixing them would mean forking. Instead we
//! use `mysql_common` (the actively released codec under `mysql_async`, the
//! client our tests run) for what is client-shaped or security-relevant: the
//! capability constants, the HandshakeResponse41 parser and the scramble
//! algorithms of both auth plugins (the same code the Rust client computes
//! with). The server state machine and the server-side packets (greeting,
//! OK/ERR/EOF, column definitions, text/binary rows, parameter decoding) are
//! ours: they are small, and we need them bounds-checked against hostile
//! input (mysql_common's binary value decoder panics on unknown types).
//!
//! Layout: `packet` (framing, 16 MiB split/join, max_allowed_packet),
//! `codec` (server packets, bounds-checked reader), `auth` (greeting and
//! plugins), `value` (text/binary rendering of values), `params` (binary
//! parameter decoding), `tls` (certificates and the TLS upgrade), `conn` (the
//! per-connection state machine).

pub mod auth;
pub mod codec;
pub mod conn;
pub mod packet;
pub mod params;
pub mod tls;
pub mod value;
