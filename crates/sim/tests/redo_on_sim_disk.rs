//! The REDO writer (norr-durability) driven through the simulated disk's FS
//! block by signals, with disk latency and crashes at random moments: every
//! GCI the writer reported durable is read back whole after the crash. This
//! is the shape of phase 2's LQH glue: poll_io -> FS request, FS reply ->
//! on_io_done.

use norr_durability::redo::{self, LoggedRecord, RedoGeometry, RedoIo, RedoOp, RedoPart, RedoReader, RedoRecord};
use norr_kernel::{Block, BlockRef, Ctx, Envelope, Priority, Scheduler};
use norr_signals::fs::{FsOp, FsResult, FsSignal};
use norr_signals::{block, Signal, Value};
use norr_sim::disk::{CrashMode, DiskFaults, SharedDisk, SimDisk, SimFsBlock};
use norr_sim::rng::Rng;
use std::sync::{Arc, Mutex};

const NODE: u16 = 1;
const DRIVER: u16 = 30;
const PART: u32 = 0;

fn geo() -> RedoGeometry {
    RedoGeometry { files: 3, file_bytes: 64 * 1024, page_bytes: 1024 }
}

/// What the driver reports to the test.
#[derive(Default)]
struct Shared {
    appended: Vec<LoggedRecord>,
    durable_gci: u64,
    /// Records below this GCI were released (a checkpoint covers them).
    released: u64,
}

/// Owns the RedoPart; opens the files, then appends a transaction per tick
/// and flushes a GCI every few ticks.
struct Driver {
    part: Option<RedoPart>,
    handles: Vec<u32>,
    rng: Rng,
    gci: u64,
    tick: u64,
    io_busy: bool,
    shared: Arc<Mutex<Shared>>,
}

const TICK: u64 = 100_000;

impl Driver {
    fn fs(&self, ctx: &mut Ctx<'_, Signal>, req_id: u64, op: FsOp) {
        ctx.send(BlockRef::new(NODE, block::FS, 0), Signal::Fs(Box::new(FsSignal::Req { req_id, op })));
    }

    fn pump(&mut self, ctx: &mut Ctx<'_, Signal>) {
        if self.io_busy {
            return;
        }
        let Some(part) = self.part.as_mut() else { return };
        match part.poll_io() {
            Some(RedoIo::Write { io_id, file_no, offset, data }) => {
                self.io_busy = true;
                let file = self.handles[file_no as usize];
                self.fs(ctx, io_id, FsOp::Write { file, offset, data, sync: false });
            }
            Some(RedoIo::Sync { io_id, file_no }) => {
                self.io_busy = true;
                let file = self.handles[file_no as usize];
                self.fs(ctx, io_id, FsOp::Sync { file });
            }
            Some(RedoIo::Crash(p)) => panic!("no crash point armed, got {p}"),
            None => {}
        }
    }
}

impl Block<Signal> for Driver {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        match env.signal {
            Signal::Fs(f) => match *f {
                // Opening: req ids 1_000_000 + file number.
                FsSignal::Conf { req_id, result: FsResult::Opened { file, .. } } if req_id >= 1_000_000 => {
                    self.handles.push(file);
                    let n = self.handles.len() as u32;
                    if n < geo().files {
                        self.fs(
                            ctx,
                            1_000_000 + n as u64,
                            FsOp::Open { path: redo::file_path(PART, n), create: true, truncate: false },
                        );
                    } else {
                        self.part = Some(RedoPart::create(PART, geo(), 1 << 20));
                        let me = ctx.self_ref();
                        ctx.send_delayed(me, Signal::ApiFailReq { api_node: 0 }, TICK);
                    }
                }
                FsSignal::Conf { req_id, .. } => {
                    self.io_busy = false;
                    let part = self.part.as_mut().expect("running");
                    if let Some(g) = part.on_io_done(req_id, Ok(())).expect("in order") {
                        self.shared.lock().unwrap().durable_gci = g;
                    }
                    self.pump(ctx);
                }
                FsSignal::Ref { error, .. } => panic!("FS error {error}"),
                FsSignal::Req { .. } => unreachable!(),
            },
            _ if self.part.is_none() => {
                self.fs(ctx, 1_000_000, FsOp::Open { path: redo::file_path(PART, 0), create: true, truncate: false });
            }
            _ => {
                // A tick: one transaction, sometimes a GCP flush.
                self.tick += 1;
                let n = 1 + self.rng.below(3);
                let recs: Vec<RedoRecord> = (0..n)
                    .map(|i| RedoRecord {
                        op: RedoOp::Put,
                        table: 1,
                        partition: 0,
                        values: vec![
                            Value::UInt(self.tick * 10 + i),
                            Value::Bytes(vec![3; self.rng.below(700) as usize]),
                        ],
                    })
                    .collect();
                let part = self.part.as_mut().expect("running");
                if part.append(self.gci, &recs).is_ok() {
                    let mut s = self.shared.lock().unwrap();
                    s.appended.extend(recs.into_iter().map(|record| LoggedRecord { gci: self.gci, record }));
                }
                if self.rng.below(5) == 0 {
                    part.flush_up_to(self.gci).expect("room for a marker");
                    self.gci += 1;
                }
                // A checkpoint now and then frees the tail.
                let durable = self.shared.lock().unwrap().durable_gci;
                if part.fill_ratio() > 0.5 && durable > 2 {
                    part.release_before(durable - 1);
                    self.shared.lock().unwrap().released = durable - 1;
                }
                let me = ctx.self_ref();
                ctx.send_delayed(me, Signal::ApiFailReq { api_node: 0 }, TICK);
                self.pump(ctx);
            }
        }
    }
}

fn read_back(disk: &SimDisk, from: u64, to: u64) -> Vec<LoggedRecord> {
    let g = geo();
    let file = |f: u32| -> Vec<u8> {
        let mut b = disk.contents(&redo::file_path(PART, f)).unwrap_or(&[]).to_vec();
        b.resize(g.file_bytes as usize, 0);
        b
    };
    let firsts: Vec<(u32, Vec<u8>)> = (0..g.files).map(|f| (f, file(f)[..g.page_bytes as usize].to_vec())).collect();
    let head = redo::choose_head_file(&g, PART, &firsts)
        .unwrap()
        .map(|f| redo::scan_head_file(&g, PART, f, &file(f)).unwrap());
    let mut r = RedoReader::new(g, PART, head, from, to);
    let mut out = Vec::new();
    while let Some(rd) = r.next_read() {
        let bytes = file(rd.file_no);
        r.feed(rd, &bytes[rd.offset as usize..(rd.offset + rd.len as u64) as usize], &mut out)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    r.finish().unwrap_or_else(|e| panic!("{e}"));
    out
}

#[test]
fn durable_gcis_survive_crashes_of_the_simulated_disk() {
    let (mut checked, mut crashes_with_loss) = (0, 0);
    for seed in 0..30u64 {
        let mut rng = Rng::new(seed);
        let faults = DiskFaults {
            latency_min_ns: 10_000,
            latency_max_ns: 10_000 + rng.range(0, 2_000_000),
            crash_mode: if seed % 2 == 0 { CrashMode::Prefix } else { CrashMode::Subset },
            torn_write_p: 0.7,
            ..DiskFaults::none()
        };
        let disk: SharedDisk = SimDisk::shared(rng.fork(), faults);
        let shared = Arc::new(Mutex::new(Shared::default()));
        let mut s: Scheduler<Signal> = Scheduler::new(NODE, 1 << 16);
        s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk.clone())));
        let driver = Driver {
            part: None,
            handles: vec![],
            rng: rng.fork(),
            gci: 1,
            tick: 0,
            io_busy: false,
            shared: shared.clone(),
        };
        s.add_block(DRIVER, 0, Box::new(driver));
        let me = BlockRef::new(NODE, DRIVER, 0);
        s.deliver(Envelope { from: me, to: me, prio: Priority::B, signal: Signal::ApiFailReq { api_node: 0 } })
            .unwrap();
        // Run for a random stretch of virtual time, then crash mid-flight.
        let stop_at = rng.range(5, 400) * TICK;
        loop {
            s.run_until_idle(100_000);
            match s.next_timer_ns() {
                Some(t) if t <= stop_at => s.advance_to(t),
                _ => break,
            }
        }
        let mut d = disk.lock().unwrap();
        d.crash();
        let sh = shared.lock().unwrap();
        let from = sh.released.max(1);
        let got = read_back(&d, from, sh.durable_gci);
        let want: Vec<LoggedRecord> =
            sh.appended.iter().filter(|r| r.gci <= sh.durable_gci && r.gci >= from).cloned().collect();
        assert_eq!(got.len(), want.len(), "seed {seed}: durable GCI {}", sh.durable_gci);
        assert_eq!(got, want, "seed {seed}");
        checked += want.len();
        crashes_with_loss += usize::from(sh.appended.len() > want.len());
    }
    // The test did real work: records were read back, and crashes lost
    // records that were not durable yet.
    assert!(checked > 300, "{checked} records checked");
    assert!(crashes_with_loss > 10, "{crashes_with_loss}");
}
