//! Statements that must hold a thread for long without a chance to yield
//! run beside the session threads, not on them.
//!
//! Long loops over rows yield every few milliseconds (`engine::exec::Turn`),
//! but the parse of a huge statement text (the probes of issue 22 send
//! 100,000-term expressions; a parse like that takes hundreds of
//! milliseconds) is one call that cannot. While a session thread is inside
//! it, the tasks queued behind it wait, and if it is the only awake thread
//! no socket is read at all (tokio polls its sockets between tasks). Such a
//! statement is run under `block_in_place`: the runtime hands this thread's
//! queue to a fresh thread, and the statement finishes on this one.
//! Ordinary statements never pay for that thread switch.

use std::future::Future;

/// Statement texts at least this long run off the session threads (MySQL
/// clients' statements are far shorter; a text this long takes a parse of
/// milliseconds or more).
pub const TEXT_BYTES: usize = 16 << 10;

/// Whether a statement of `text` runs off the session threads: a long text,
/// on a work-stealing runtime (`block_in_place` needs one; tests on a
/// current-thread runtime run it where they are).
pub fn wanted(text: &str) -> bool {
    text.len() >= TEXT_BYTES
        && tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// Runs `fut` to its end on this thread while the runtime carries on with
/// the other sessions on others. Only when `wanted` said so.
pub fn run<F: Future>(fut: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(fut))
}
