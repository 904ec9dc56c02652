//! Transport: frames, the connect handshake and the adaptive send policy, all
//! without IO so that the production runtime, the client and the simulator share
//! them.

pub mod account_auth;
pub mod account_book;
pub mod adaptive_send;
pub mod auth;
pub mod frame;
#[cfg(test)]
mod fuzz;
pub mod handshake;
pub mod local_pipe;
pub mod peer_handshake;

pub use adaptive_send::{AdaptiveSend, AdaptiveSendConfig, SendBuffer, SendBufferFull};
pub use frame::{encode_frame, encode_frame_with, FrameDecoder, FrameError, DEFAULT_MAX_FRAME_BYTES};
