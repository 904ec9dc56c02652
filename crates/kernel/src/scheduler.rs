//! The scheduler of one node: job buffers A and B, a timer queue for delayed
//! signals, and a deadline queue for bounded-delay signals.
//!
//! Order of execution, fully determined by the calls made on it:
//! 1. any signal in job buffer A (FIFO);
//! 2. a bounded-delay signal whose deadline (in executed signals) has come;
//! 3. the next signal in job buffer B (FIFO);
//! 4. when both buffers are empty, the earliest bounded-delay signal.
//!
//! Delayed signals move into job buffer B when the host advances the clock past
//! their due time (ties broken by the order they were sent). Signals addressed to
//! another node are queued for the host (`take_remote`).

use crate::{Block, BlockRef, Ctx, Envelope, NodeId, Outgoing, Priority, Timing};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Why `deliver` refused a signal from outside the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliverError {
    /// The B job buffer is at its bound: the host must push back on the sender.
    Overloaded,
    /// No block is registered at the address.
    UnknownBlock(BlockRef),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedulerStats {
    pub executed: u64,
    pub executed_a: u64,
    pub executed_bounded: u64,
    pub delayed_fired: u64,
    pub max_job_b_len: usize,
    pub unknown_dropped: u64,
}

struct Timer<S> {
    due_ns: u64,
    seq: u64,
    env: Envelope<S>,
}
impl<S> PartialEq for Timer<S> {
    fn eq(&self, o: &Self) -> bool {
        (self.due_ns, self.seq) == (o.due_ns, o.seq)
    }
}
impl<S> Eq for Timer<S> {}
impl<S> PartialOrd for Timer<S> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<S> Ord for Timer<S> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.due_ns, self.seq).cmp(&(o.due_ns, o.seq))
    }
}

struct BoundedJob<S> {
    deadline: u64,
    seq: u64,
    env: Envelope<S>,
}
impl<S> PartialEq for BoundedJob<S> {
    fn eq(&self, o: &Self) -> bool {
        (self.deadline, self.seq) == (o.deadline, o.seq)
    }
}
impl<S> Eq for BoundedJob<S> {}
impl<S> PartialOrd for BoundedJob<S> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<S> Ord for BoundedJob<S> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(o.deadline, o.seq))
    }
}

type BoxedBlock<S> = Box<dyn Block<S> + Send>;

/// Runs the blocks of one node.
pub struct Scheduler<S> {
    node: NodeId,
    /// blocks[block_no][instance]
    blocks: Vec<Vec<Option<BoxedBlock<S>>>>,
    job_a: VecDeque<Envelope<S>>,
    job_b: VecDeque<Envelope<S>>,
    job_b_bound: usize,
    timers: BinaryHeap<Reverse<Timer<S>>>,
    bounded: BinaryHeap<Reverse<BoundedJob<S>>>,
    remote: Vec<Envelope<S>>,
    now_ns: u64,
    seq: u64,
    out: Vec<Outgoing<S>>,
    stats: SchedulerStats,
}

impl<S> Scheduler<S> {
    /// `job_b_bound`: most signals the B buffer holds before `deliver` refuses
    /// external input (internal sends are never refused: a block that sends has
    /// already committed to the work).
    pub fn new(node: NodeId, job_b_bound: usize) -> Self {
        assert!(job_b_bound > 0);
        Scheduler {
            node,
            blocks: Vec::new(),
            job_a: VecDeque::new(),
            job_b: VecDeque::new(),
            job_b_bound,
            timers: BinaryHeap::new(),
            bounded: BinaryHeap::new(),
            remote: Vec::new(),
            now_ns: 0,
            seq: 0,
            out: Vec::new(),
            stats: SchedulerStats::default(),
        }
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Register a block instance. Panics if the address is taken (a wiring bug).
    pub fn add_block(&mut self, block: u16, instance: u16, b: BoxedBlock<S>) {
        let bi = block as usize;
        if self.blocks.len() <= bi {
            self.blocks.resize_with(bi + 1, Vec::new);
        }
        let v = &mut self.blocks[bi];
        let ii = instance as usize;
        if v.len() <= ii {
            v.resize_with(ii + 1, || None);
        }
        assert!(v[ii].is_none(), "block {block}/{instance} registered twice");
        v[ii] = Some(b);
    }

    pub fn has_block(&self, r: BlockRef) -> bool {
        r.node == self.node
            && self.blocks.get(r.block as usize).and_then(|v| v.get(r.instance as usize)).is_some_and(|b| b.is_some())
    }

    /// How many instances of `block` are registered, numbered from 0 (hosts
    /// fan API_FAILREQ out to every TC, and tell clients how many TCs there are).
    pub fn instances(&self, block: u16) -> u16 {
        self.blocks.get(block as usize).map_or(0, |v| v.iter().take_while(|b| b.is_some()).count() as u16)
    }

    /// Mutable access to a registered block (hosts use it for inspection in tests).
    pub fn block_mut(&mut self, block: u16, instance: u16) -> Option<&mut BoxedBlock<S>> {
        self.blocks.get_mut(block as usize)?.get_mut(instance as usize)?.as_mut()
    }

    /// Hand a signal from outside (network, another thread) to this node.
    pub fn deliver(&mut self, env: Envelope<S>) -> Result<(), DeliverError> {
        if !self.has_block(env.to) {
            return Err(DeliverError::UnknownBlock(env.to));
        }
        match env.prio {
            Priority::A => self.job_a.push_back(env),
            Priority::B => {
                if self.job_b.len() >= self.job_b_bound {
                    return Err(DeliverError::Overloaded);
                }
                self.job_b.push_back(env);
                self.stats.max_job_b_len = self.stats.max_job_b_len.max(self.job_b.len());
            }
        }
        Ok(())
    }

    /// Current time as the host set it.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Move the clock forward (never backward) and queue delayed signals now due.
    pub fn advance_to(&mut self, now_ns: u64) {
        if now_ns > self.now_ns {
            self.now_ns = now_ns;
        }
        while let Some(Reverse(t)) = self.timers.peek() {
            if t.due_ns > self.now_ns {
                break;
            }
            let Reverse(t) = self.timers.pop().expect("peeked");
            self.stats.delayed_fired += 1;
            self.job_b.push_back(t.env);
        }
    }

    /// Due time of the earliest pending delayed signal.
    pub fn next_timer_ns(&self) -> Option<u64> {
        self.timers.peek().map(|Reverse(t)| t.due_ns)
    }

    /// True if a signal is ready to run now.
    pub fn has_ready(&self) -> bool {
        !self.job_a.is_empty() || !self.job_b.is_empty() || !self.bounded.is_empty()
    }

    pub fn job_b_len(&self) -> usize {
        self.job_b.len()
    }

    /// Signals addressed to other nodes, in send order.
    pub fn take_remote(&mut self) -> Vec<Envelope<S>> {
        std::mem::take(&mut self.remote)
    }

    /// Same as `take_remote` but appends into a caller-owned buffer (no allocation).
    pub fn drain_remote_into(&mut self, out: &mut Vec<Envelope<S>>) {
        out.append(&mut self.remote);
    }

    pub fn stats(&self) -> &SchedulerStats {
        &self.stats
    }

    fn pick(&mut self) -> Option<Envelope<S>> {
        if let Some(e) = self.job_a.pop_front() {
            self.stats.executed_a += 1;
            return Some(e);
        }
        if let Some(Reverse(b)) = self.bounded.peek() {
            if b.deadline <= self.stats.executed || self.job_b.is_empty() {
                let Reverse(b) = self.bounded.pop().expect("peeked");
                self.stats.executed_bounded += 1;
                return Some(b.env);
            }
        }
        self.job_b.pop_front()
    }

    /// Execute one ready signal. Returns false if nothing was ready.
    pub fn run_one(&mut self) -> bool {
        let Some(env) = self.pick() else { return false };
        self.stats.executed += 1;
        let to = env.to;
        let slot = self
            .blocks
            .get_mut(to.block as usize)
            .and_then(|v| v.get_mut(to.instance as usize))
            .and_then(|b| b.as_mut());
        let Some(block) = slot else {
            // Only reachable for locally sent signals to an unregistered block.
            self.stats.unknown_dropped += 1;
            debug_assert!(false, "signal to unknown local block {to}");
            return true;
        };
        let mut out = std::mem::take(&mut self.out);
        {
            let mut ctx = Ctx { now_ns: self.now_ns, self_ref: to, out: &mut out };
            block.on_signal(env, &mut ctx);
        }
        for o in out.drain(..) {
            self.route(o);
        }
        self.out = out;
        true
    }

    /// Run until no signal is ready or `max` signals ran. Returns how many ran.
    pub fn run_until_idle(&mut self, max: usize) -> usize {
        let mut n = 0;
        while n < max && self.run_one() {
            n += 1;
        }
        n
    }

    fn route(&mut self, o: Outgoing<S>) {
        self.seq += 1;
        let seq = self.seq;
        match o.timing {
            Timing::Now => {
                if o.env.to.node != self.node {
                    self.remote.push(o.env);
                } else {
                    match o.env.prio {
                        Priority::A => self.job_a.push_back(o.env),
                        Priority::B => self.job_b.push_back(o.env),
                    }
                }
            }
            Timing::Delayed { delay_ns } => {
                let due_ns = self.now_ns.saturating_add(delay_ns);
                self.timers.push(Reverse(Timer { due_ns, seq, env: o.env }));
            }
            Timing::Bounded { max_signals } => {
                let deadline = self.stats.executed + max_signals as u64;
                self.bounded.push(Reverse(BoundedJob { deadline, seq, env: o.env }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    enum Sig {
        Ping(u32),
        Spawn { n: u32 },
        Later(u32),
        Bounded(u32),
        Remote(u32),
    }

    struct Recorder {
        log: std::sync::Arc<std::sync::Mutex<Vec<(u64, Sig)>>>,
    }

    impl Block<Sig> for Recorder {
        fn on_signal(&mut self, env: Envelope<Sig>, ctx: &mut Ctx<'_, Sig>) {
            self.log.lock().unwrap().push((ctx.now_ns(), env.signal.clone()));
            let me = ctx.self_ref();
            if let Sig::Spawn { n } = env.signal {
                for i in 0..n {
                    ctx.send(me, Sig::Ping(i));
                }
                ctx.send_bounded(me, Sig::Bounded(0), 2);
                ctx.send_delayed(me, Sig::Later(1), 1000);
                ctx.send_delayed(me, Sig::Later(0), 500);
                ctx.send_prio(me, Sig::Ping(99), Priority::A);
                ctx.send(BlockRef::new(7, 1, 0), Sig::Remote(5));
            }
        }
    }

    /// What the recorder block saw: (time, signal).
    type Seen = std::sync::Arc<std::sync::Mutex<Vec<(u64, Sig)>>>;

    fn setup() -> (Scheduler<Sig>, Seen) {
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut s = Scheduler::new(1, 4);
        s.add_block(1, 0, Box::new(Recorder { log: log.clone() }));
        (s, log)
    }

    #[test]
    fn priorities_bounded_delayed_and_remote() {
        let (mut s, log) = setup();
        let me = BlockRef::new(1, 1, 0);
        s.deliver(Envelope { from: me, to: me, prio: Priority::B, signal: Sig::Spawn { n: 5 } }).unwrap();
        s.run_until_idle(100);
        let got: Vec<Sig> = log.lock().unwrap().iter().map(|(_, s)| s.clone()).collect();
        // Spawn ran as signal #1. A runs first (#2), then B pings until the bounded
        // signal's deadline (1 + 2 = executed count 3) comes: it runs as #4.
        assert_eq!(
            got,
            vec![
                Sig::Spawn { n: 5 },
                Sig::Ping(99),
                Sig::Ping(0),
                Sig::Bounded(0),
                Sig::Ping(1),
                Sig::Ping(2),
                Sig::Ping(3),
                Sig::Ping(4)
            ]
        );
        assert_eq!(s.take_remote().len(), 1);
        assert_eq!(s.next_timer_ns(), Some(500));
        s.advance_to(600);
        s.run_until_idle(100);
        s.advance_to(2000);
        s.run_until_idle(100);
        let tail: Vec<(u64, Sig)> = log.lock().unwrap()[8..].to_vec();
        assert_eq!(tail, vec![(600, Sig::Later(0)), (2000, Sig::Later(1))]);
        assert!(!s.has_ready());
    }

    #[test]
    fn external_input_is_bounded() {
        let (mut s, _log) = setup();
        let me = BlockRef::new(1, 1, 0);
        for i in 0..4 {
            s.deliver(Envelope { from: me, to: me, prio: Priority::B, signal: Sig::Ping(i) }).unwrap();
        }
        let e = s.deliver(Envelope { from: me, to: me, prio: Priority::B, signal: Sig::Ping(9) });
        assert_eq!(e, Err(DeliverError::Overloaded));
        // A is never refused.
        s.deliver(Envelope { from: me, to: me, prio: Priority::A, signal: Sig::Ping(10) }).unwrap();
        let bad = BlockRef::new(1, 9, 0);
        assert_eq!(
            s.deliver(Envelope { from: me, to: bad, prio: Priority::B, signal: Sig::Ping(1) }),
            Err(DeliverError::UnknownBlock(bad))
        );
        assert_eq!(s.run_until_idle(100), 5);
    }

    #[test]
    fn bounded_runs_when_idle() {
        struct B;
        impl Block<Sig> for B {
            fn on_signal(&mut self, env: Envelope<Sig>, ctx: &mut Ctx<'_, Sig>) {
                if let Sig::Ping(0) = env.signal {
                    let me = ctx.self_ref();
                    ctx.send_bounded(me, Sig::Bounded(1), 1000);
                }
            }
        }
        let mut s: Scheduler<Sig> = Scheduler::new(1, 8);
        s.add_block(2, 0, Box::new(B));
        let me = BlockRef::new(1, 2, 0);
        s.deliver(Envelope { from: me, to: me, prio: Priority::B, signal: Sig::Ping(0) }).unwrap();
        assert_eq!(s.run_until_idle(10), 2);
        assert_eq!(s.stats().executed_bounded, 1);
    }
}
