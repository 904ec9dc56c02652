use super::*;
use norr_kernel::{BlockRef, Priority, Scheduler};
use norr_signals::block;

const NODE: u16 = 1;
const TESTER: u16 = 30;

/// Sends a script of FS requests one at a time; records replies with the
/// virtual time they arrived.
struct Tester {
    script: Vec<FsOp>,
    replies: Arc<Mutex<Vec<(u64, FsSignal)>>>,
    handle: u32,
    pipelined: bool,
}

impl Tester {
    fn send_next(&mut self, ctx: &mut Ctx<'_, Signal>) {
        if self.script.is_empty() {
            return;
        }
        let mut op = self.script.remove(0);
        if let FsOp::Write { file, .. } | FsOp::Read { file, .. } | FsOp::Sync { file } | FsOp::Close { file } = &mut op
        {
            *file = self.handle;
        }
        let req_id = 100 - self.script.len() as u64;
        ctx.send(BlockRef::new(NODE, block::FS, 0), Signal::Fs(Box::new(FsSignal::Req { req_id, op })));
    }
}

impl Block<Signal> for Tester {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        match env.signal {
            Signal::Fs(f) => {
                if let FsSignal::Conf { result: FsResult::Opened { file, .. }, .. } = &*f {
                    self.handle = *file;
                }
                self.replies.lock().unwrap().push((ctx.now_ns(), *f));
                if !self.pipelined {
                    self.send_next(ctx);
                }
            }
            _ => {
                if self.pipelined {
                    while !self.script.is_empty() {
                        self.send_next(ctx);
                    }
                } else {
                    self.send_next(ctx);
                }
            }
        }
    }
}

/// Run `script` against `disk` through the FS block until idle.
fn run(disk: &SharedDisk, script: Vec<FsOp>, pipelined: bool, handle: u32) -> Vec<(u64, FsSignal)> {
    let replies = Arc::new(Mutex::new(Vec::new()));
    let mut s: Scheduler<Signal> = Scheduler::new(NODE, 1024);
    s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk.clone())));
    s.add_block(TESTER, 0, Box::new(Tester { script, replies: replies.clone(), handle, pipelined }));
    let me = BlockRef::new(NODE, TESTER, 0);
    s.deliver(Envelope { from: me, to: me, prio: Priority::B, signal: Signal::ApiFailReq { api_node: 0 } }).unwrap();
    loop {
        s.run_until_idle(10_000);
        match s.next_timer_ns() {
            Some(t) => s.advance_to(t),
            None => break,
        }
    }
    let r = replies.lock().unwrap().clone();
    r
}

fn ok(r: &(u64, FsSignal)) -> &FsResult {
    match &r.1 {
        FsSignal::Conf { result, .. } => result,
        other => panic!("{other:?}"),
    }
}

fn disk(seed: u64, faults: DiskFaults) -> SharedDisk {
    SimDisk::shared(Rng::new(seed), faults)
}

#[test]
fn ops_round_trip_with_latency_and_in_order_replies() {
    let mut faults = DiskFaults::none();
    faults.latency_min_ns = 1_000;
    faults.latency_max_ns = 900_000;
    let d = disk(1, faults);
    let script = vec![
        FsOp::Open { path: "lcp/1/0/3.data".into(), create: true, truncate: false },
        FsOp::Write { file: 0, offset: 0, data: vec![1; 1000], sync: false },
        FsOp::Write { file: 0, offset: 1000, data: vec![2; 10], sync: false },
        FsOp::Read { file: 0, offset: 995, len: 100 },
        FsOp::Sync { file: 0 },
        FsOp::List { dir: "lcp/1".into() },
        FsOp::Rename { from: "lcp/1/0/3.data".into(), to: "lcp/1/0/4.data".into() },
        FsOp::List { dir: "lcp/1/0".into() },
        FsOp::Open { path: "a/../b".into(), create: true, truncate: false },
        FsOp::Close { file: 0 },
        FsOp::Read { file: 0, offset: 0, len: 1 },
    ];
    let r = run(&d, script, false, 0);
    assert_eq!(r.len(), 11);
    assert!(matches!(ok(&r[0]), FsResult::Opened { size: 0, .. }));
    assert_eq!(ok(&r[3]), &FsResult::Read { data: [vec![1; 5], vec![2; 10]].concat() });
    assert_eq!(ok(&r[5]), &FsResult::Listed { names: vec!["0".into()] });
    assert_eq!(ok(&r[7]), &FsResult::Listed { names: vec!["4.data".into()] });
    assert!(matches!(&r[8].1, FsSignal::Ref { error, .. } if error.kind == FsErrorKind::BadPath));
    assert!(matches!(&r[10].1, FsSignal::Ref { error, .. } if error.kind == FsErrorKind::BadHandle));
    // Replies took virtual time.
    assert!(r[0].0 >= 1_000 && r.windows(2).all(|w| w[0].0 <= w[1].0));
    assert_eq!(d.lock().unwrap().durable("lcp/1/0/4.data").unwrap().len(), 1010);

    // Pipelined requests on one file: replies keep the request order.
    let d = disk(2, DiskFaults { latency_min_ns: 1, latency_max_ns: 5_000_000, ..DiskFaults::none() });
    let mut script = vec![FsOp::Open { path: "f".into(), create: true, truncate: false }];
    let r = run(&d, script.clone(), false, 0);
    let FsResult::Opened { file, .. } = ok(&r[0]) else { panic!() };
    script =
        (0..50).map(|i| FsOp::Write { file: *file, offset: i * 10, data: vec![i as u8; 10], sync: false }).collect();
    // A new block life: handles are per life, so reopen within the same run instead.
    let mut s2 = vec![FsOp::Open { path: "f".into(), create: false, truncate: false }];
    s2.extend(script);
    let replies = run(&d, s2, true, 1);
    let ids: Vec<u64> = replies
        .iter()
        .map(|(_, s)| match s {
            FsSignal::Conf { req_id, .. } | FsSignal::Ref { req_id, .. } => *req_id,
            _ => 0,
        })
        .collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted, "replies on one file come in request order");
}

fn write_then_crash(seed: u64, faults: DiskFaults) -> (Vec<u8>, DiskStats) {
    let d = disk(seed, faults);
    let script = vec![
        FsOp::Open { path: "redo/part-0/file-0".into(), create: true, truncate: false },
        FsOp::Write { file: 0, offset: 0, data: vec![1; 4096], sync: true },
        FsOp::Write { file: 0, offset: 4096, data: vec![2; 8192], sync: false },
        FsOp::Write { file: 0, offset: 12288, data: vec![3; 8192], sync: false },
    ];
    run(&d, script, false, 0);
    let mut g = d.lock().unwrap();
    g.crash();
    (g.contents("redo/part-0/file-0").unwrap().to_vec(), g.stats.clone())
}

#[test]
fn a_crash_keeps_synced_data_and_a_prefix_of_the_rest() {
    let mut outcomes = BTreeSet::new();
    for seed in 0..200 {
        let (c, stats) = write_then_crash(seed, DiskFaults { torn_write_p: 0.5, ..DiskFaults::none() });
        assert_eq!(&c[..4096], &[1; 4096][..], "synced data survives");
        // Prefix model: what follows is 2s then 3s, each possibly cut at a sector.
        let rest = &c[4096..];
        let twos = rest.iter().take_while(|&&b| b == 2).count();
        assert!(twos % SECTOR_BYTES == 0 && twos <= 8192);
        if twos < 8192 {
            assert!(rest[twos..].iter().all(|&b| b == 0), "nothing after a lost or torn write (seed {seed})");
        } else {
            let threes = rest[8192..].iter().take_while(|&&b| b == 3).count();
            assert!(threes % SECTOR_BYTES == 0 && rest[8192 + threes..].iter().all(|&b| b == 0));
        }
        assert_eq!(stats.crashes, 1);
        outcomes.insert(c.len());
    }
    assert!(outcomes.len() >= 5, "crashes keep different amounts: {outcomes:?}");
    // Determinism: the same seed, the same outcome.
    assert_eq!(write_then_crash(7, DiskFaults::none()).0, write_then_crash(7, DiskFaults::none()).0);
    // Subset mode may keep a later write without an earlier one.
    let holes = (0..200).any(|seed| {
        let (c, _) = write_then_crash(seed, DiskFaults { crash_mode: CrashMode::Subset, ..DiskFaults::none() });
        c.len() > 12288 && c[4096] == 0
    });
    assert!(holes, "subset crashes reorder");
}

#[test]
fn full_disk_read_errors_bit_flips_and_a_removed_directory() {
    let d = disk(3, DiskFaults { capacity_bytes: Some(10_000), ..DiskFaults::none() });
    let r = run(
        &d,
        vec![
            FsOp::Open { path: "x".into(), create: true, truncate: false },
            FsOp::Write { file: 0, offset: 0, data: vec![5; 8000], sync: true },
            FsOp::Write { file: 0, offset: 8000, data: vec![6; 4000], sync: true },
            FsOp::Write { file: 0, offset: 100, data: vec![7; 100], sync: true },
        ],
        false,
        0,
    );
    assert!(
        matches!(&r[2].1, FsSignal::Ref { error, .. } if error.kind == FsErrorKind::NoSpace && error.offset == Some(8000))
    );
    assert_eq!(ok(&r[3]), &FsResult::Written, "overwriting in place needs no space");
    assert_eq!(d.lock().unwrap().contents("x").unwrap().len(), 8000, "a refused write leaves nothing");

    let d = disk(4, DiskFaults { read_error_p: 1.0, ..DiskFaults::none() });
    let r = run(
        &d,
        vec![
            FsOp::Open { path: "x".into(), create: true, truncate: false },
            FsOp::Read { file: 0, offset: 0, len: 10 },
        ],
        false,
        0,
    );
    assert!(matches!(&r[1].1, FsSignal::Ref { error, .. } if error.kind == FsErrorKind::Io));

    let d = disk(5, DiskFaults::none());
    run(
        &d,
        vec![
            FsOp::Open { path: "y".into(), create: true, truncate: false },
            FsOp::Write { file: 0, offset: 0, data: vec![0; 64], sync: true },
        ],
        false,
        0,
    );
    let (path, at, bit) = d.lock().unwrap().flip_random_bit().unwrap();
    assert_eq!(path, "y");
    assert_eq!(d.lock().unwrap().durable("y").unwrap()[at as usize], 1 << bit);

    d.lock().unwrap().remove_data_dir();
    let r = run(&d, vec![FsOp::Open { path: "y".into(), create: true, truncate: false }], false, 0);
    assert!(matches!(&r[0].1, FsSignal::Ref { error, .. } if error.kind == FsErrorKind::DirectoryGone));
}

#[test]
fn random_faults_are_valid() {
    let mut rng = Rng::new(11);
    for _ in 0..100 {
        let f = DiskFaults::random(&mut rng);
        assert!(f.latency_min_ns <= f.latency_max_ns);
    }
}
