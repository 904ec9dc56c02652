//! The FS block inside a running data node: requests from a block, through
//! the IO thread, completions back through the event loop.

use norr_kernel::{Block, BlockRef, Ctx, Envelope, Priority, Scheduler};
use norr_knobs::Knobs;
use norr_runtime::{start_data_node_with, DataNodeConfig, RuntimeOptions};
use norr_signals::fs::{FsOp, FsResult, FsSignal};
use norr_signals::{block, Signal};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NODE: u16 = 1;
const TESTER: u16 = 30;

/// Runs a fixed script of FS requests, one at a time, recording replies.
struct Tester {
    script: Vec<FsOp>,
    replies: Arc<Mutex<Vec<FsSignal>>>,
    handle: u32,
}

impl Tester {
    fn next(&mut self, ctx: &mut Ctx<'_, Signal>) {
        if self.script.is_empty() {
            return;
        }
        let mut op = self.script.remove(0);
        match &mut op {
            FsOp::Write { file, .. } | FsOp::Read { file, .. } | FsOp::Sync { file } | FsOp::Close { file } => {
                *file = self.handle
            }
            _ => {}
        }
        let req_id = self.replies.lock().unwrap().len() as u64;
        ctx.send(BlockRef::new(NODE, block::FS, 0), Signal::Fs(Box::new(FsSignal::Req { req_id, op })));
    }
}

impl Block<Signal> for Tester {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        if let Signal::Fs(f) = env.signal {
            if let FsSignal::Conf { result: FsResult::Opened { file, .. }, .. } = &*f {
                self.handle = *file;
            }
            self.replies.lock().unwrap().push(*f);
        }
        self.next(ctx);
    }
}

#[test]
fn fs_requests_complete_through_the_event_loop() {
    let dir = std::env::temp_dir().join(format!("norr-fs-block-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let lock = norr_runtime::fs::open_data_dir(&dir, NODE).unwrap();
    let replies = Arc::new(Mutex::new(Vec::new()));
    let script = vec![
        FsOp::Open { path: "redo/part-0/file-0".into(), create: true, truncate: false },
        FsOp::Write { file: 0, offset: 0, data: vec![9; 70_000], sync: false },
        FsOp::Sync { file: 0 },
        FsOp::Read { file: 0, offset: 69_990, len: 100 },
        FsOp::List { dir: "redo/part-0".into() },
        FsOp::Open { path: "../escape".into(), create: true, truncate: false },
        FsOp::Close { file: 0 },
    ];
    let n = script.len();
    let knobs = Knobs::default();
    let mut sched = Scheduler::new(NODE, knobs.job_buffer_bound);
    sched.add_block(TESTER, 0, Box::new(Tester { script, replies: replies.clone(), handle: 0 }));
    let me = BlockRef::new(NODE, TESTER, 0);
    // Kick the tester off with a signal of its own (any signal starts the script).
    sched
        .deliver(Envelope { from: me, to: me, prio: Priority::B, signal: Signal::ApiFailReq { api_node: 0 } })
        .unwrap();
    let cfg = DataNodeConfig { node_id: NODE, listen: "127.0.0.1:0".parse().unwrap(), knobs, cluster: None };
    let opts = RuntimeOptions { data_dir: Some(lock.path().to_path_buf()), ..RuntimeOptions::default() };
    let node = start_data_node_with(cfg, opts, sched).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while replies.lock().unwrap().len() < n {
        assert!(Instant::now() < deadline, "FS replies: {:?}", replies.lock().unwrap());
        std::thread::sleep(Duration::from_millis(2));
    }
    node.shutdown();
    node.join().unwrap();
    let r = replies.lock().unwrap();
    assert!(matches!(r[0], FsSignal::Conf { req_id: 0, result: FsResult::Opened { size: 0, .. } }), "{:?}", r[0]);
    assert_eq!(r[1], FsSignal::Conf { req_id: 1, result: FsResult::Written });
    assert_eq!(r[2], FsSignal::Conf { req_id: 2, result: FsResult::Synced });
    assert_eq!(r[3], FsSignal::Conf { req_id: 3, result: FsResult::Read { data: vec![9; 10] } });
    assert_eq!(r[4], FsSignal::Conf { req_id: 4, result: FsResult::Listed { names: vec!["file-0".into()] } });
    assert!(
        matches!(&r[5], FsSignal::Ref { req_id: 5, error } if error.kind == norr_signals::fs::FsErrorKind::BadPath)
    );
    assert_eq!(r[6], FsSignal::Conf { req_id: 6, result: FsResult::Closed });
    assert_eq!(std::fs::metadata(dir.join("redo/part-0/file-0")).unwrap().len(), 70_000);
    drop(lock);
    let _ = std::fs::remove_dir_all(&dir);
}
