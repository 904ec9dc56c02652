//! The NorrDB kernel: blocks, block references, signal envelopes, the `Ctx`
//! through which a block reaches the outside world, and the scheduler that runs
//! blocks.
//!
//! A block is a deterministic state machine: it sees time only through
//! `Ctx::now_ns`, sends only through `Ctx`, and never blocks, spawns threads or
//! performs IO. The scheduler is equally deterministic: the same initial state and
//! the same sequence of `deliver` / `advance_to` calls execute the same signals in
//! the same order. That is what lets the production runtime (real clock, sockets)
//! and the simulator (virtual clock, simulated network) host the same blocks.
//!
//! The kernel is generic over the signal payload type `S` so that it does not
//! depend on the signal catalogue (`norr-signals` depends on the kernel).

mod block_ref;
pub mod counters;
pub mod fxhash;
mod scheduler;

pub use block_ref::{BlockNo, BlockRef, NodeId};
pub use scheduler::{DeliverError, Scheduler, SchedulerStats};

/// Job buffer a signal is queued in. A runs before B (management, urgent
/// protocol steps); B is normal traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    A,
    B,
}

/// A signal on its way: sender, receiver, priority and payload.
#[derive(Debug, Clone)]
pub struct Envelope<S> {
    pub from: BlockRef,
    pub to: BlockRef,
    pub prio: Priority,
    pub signal: S,
}

/// A block: a state machine driven by signals.
pub trait Block<S> {
    /// Handle one signal. Must not block, read the wall clock, spawn threads or do
    /// IO: everything external goes through `ctx`.
    fn on_signal(&mut self, env: Envelope<S>, ctx: &mut Ctx<'_, S>);
}

/// What a block may do while handling a signal. Collects outgoing signals; the
/// scheduler routes them after `on_signal` returns.
pub struct Ctx<'a, S> {
    pub(crate) now_ns: u64,
    pub(crate) self_ref: BlockRef,
    pub(crate) out: &'a mut Vec<Outgoing<S>>,
}

/// A signal a block asked to send, with its timing class.
#[derive(Debug)]
pub(crate) struct Outgoing<S> {
    pub env: Envelope<S>,
    pub timing: Timing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timing {
    Now,
    /// Deliver once the clock reaches now + delay.
    Delayed {
        delay_ns: u64,
    },
    /// Run after at most `max_signals` other signals of this node.
    Bounded {
        max_signals: u32,
    },
}

impl<'a, S> Ctx<'a, S> {
    /// Virtual or real time in nanoseconds, as the host says. Monotonic.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// This block's own reference.
    pub fn self_ref(&self) -> BlockRef {
        self.self_ref
    }

    /// Send on priority B.
    pub fn send(&mut self, to: BlockRef, signal: S) {
        self.send_prio(to, signal, Priority::B)
    }

    pub fn send_prio(&mut self, to: BlockRef, signal: S, prio: Priority) {
        let env = Envelope { from: self.self_ref, to, prio, signal };
        self.out.push(Outgoing { env, timing: Timing::Now });
    }

    /// Deliver to `to` (normally a local block) once `delay_ns` have passed.
    pub fn send_delayed(&mut self, to: BlockRef, signal: S, delay_ns: u64) {
        let env = Envelope { from: self.self_ref, to, prio: Priority::B, signal };
        self.out.push(Outgoing { env, timing: Timing::Delayed { delay_ns } });
    }

    /// Run after at most `max_signals` other signals of this node, however busy
    /// the B job buffer is (keeps background work such as checkpoints in pace).
    pub fn send_bounded(&mut self, to: BlockRef, signal: S, max_signals: u32) {
        let env = Envelope { from: self.self_ref, to, prio: Priority::B, signal };
        self.out.push(Outgoing { env, timing: Timing::Bounded { max_signals } });
    }
}
