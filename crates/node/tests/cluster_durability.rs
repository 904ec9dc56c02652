//! Durable cluster nodes (`durable::build_durable_observed`) on the
//! simulator's disks, in the cluster kit: global checkpoints across every
//! node, the master failing, system restarts after every node was killed
//! (unsynced writes lost, partly kept or torn), node restarts from files.
//!
//! After every system restart exactly the transactions whose GCI is at
//! most the restart GCI are there, whole, on every replica; and the restart
//! GCI is the highest one a restorable node's system file recorded.

mod common;

use common::*;
use norr_durability::sysfile::{NodeRestartState, SysFileStore, PATHS};
use norr_kernel::BlockRef;
use norr_kernel::NodeId;
use norr_knobs::Knobs;
use norr_node::durable::build_durable_observed;
use norr_node::testkit::ClusterKit;
use norr_signals::{block, DictReq, ExecType, KeyOp, Signal, TableDef, TcKeyReq, TxnOutcome, Value};
use norr_sim::disk::{CrashMode, DiskFaults, SharedDisk, SimDataDir, SimDisk, SimFsBlock};
use norr_sim::rng::Rng;
use std::collections::BTreeMap;

fn dknobs() -> Knobs {
    Knobs { gcp_interval_ms: 20, redo_files: 2, redo_file_bytes: 4 << 20, ..knobs() }
}

struct Cluster {
    kit: ClusterKit,
    disks: BTreeMap<NodeId, SharedDisk>,
}

impl Cluster {
    fn start(groups: Vec<Vec<NodeId>>, seed: u64) -> Cluster {
        Cluster::start_with_latency(groups, seed, |_| 2_000_000)
    }

    /// `spread(n)`: node `n`'s disk takes 20 us plus up to this many ns.
    fn start_with_latency(groups: Vec<Vec<NodeId>>, seed: u64, spread: impl Fn(NodeId) -> u64) -> Cluster {
        Cluster::start_with_knobs(groups, seed, spread, dknobs())
    }

    fn start_with_knobs(groups: Vec<Vec<NodeId>>, seed: u64, spread: impl Fn(NodeId) -> u64, knobs: Knobs) -> Cluster {
        let mut rng = Rng::new(seed ^ 0xD15C);
        let mut disks = BTreeMap::new();
        for (i, n) in groups.iter().flatten().enumerate() {
            let faults = DiskFaults {
                latency_min_ns: 20_000,
                latency_max_ns: 20_000 + rng.range(0, spread(*n)),
                crash_mode: if (seed + i as u64).is_multiple_of(2) { CrashMode::Prefix } else { CrashMode::Subset },
                torn_write_p: 0.5,
                ..DiskFaults::none()
            };
            disks.insert(*n, SimDisk::shared(rng.fork(), faults));
        }
        let for_build = disks.clone();
        let kit = ClusterKit::start_with(groups, knobs, seed, move |topo, knobs, observers| {
            let disk = for_build[&topo.node].clone();
            let (mut s, _report) =
                build_durable_observed(topo.node, Some(topo), knobs, &SimDataDir(disk.clone()), observers)
                    .unwrap_or_else(|e| panic!("node {} restart: {e}", topo.node));
            s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk)));
            s
        });
        Cluster { kit, disks }
    }

    /// (last complete GCI, restorable) in `n`'s system file, as its disk
    /// holds it durably (what a restart after a crash reads).
    fn recorded(&self, n: NodeId) -> (u64, bool) {
        let d = self.disks[&n].lock().unwrap();
        let l = SysFileStore::load(d.durable(PATHS[0]), d.durable(PATHS[1])).expect("a valid copy");
        match l.sysfile {
            None => (0, true),
            Some(s) => {
                let own = s.nodes.iter().find(|i| i.node == n).map_or(NodeRestartState::Started, |i| i.state);
                (s.last_complete_gci, own == NodeRestartState::Started)
            }
        }
    }

    /// Kill -9 `n`: its memory and its disk's unsynced writes are gone.
    fn kill(&mut self, n: NodeId) {
        self.kit.crash(n);
        self.disks[&n].lock().unwrap().crash();
    }

    fn nodes(&self) -> Vec<NodeId> {
        self.disks.keys().copied().collect()
    }

    /// Start every node again (a system restart) and wait until all are
    /// started, a node the master finds behind the restart GCI included: it
    /// restarts at once and copies (a node restart).
    fn restart_all(&mut self) {
        for n in self.nodes() {
            self.kit.boot(n);
        }
        for n in self.nodes() {
            self.kit.wait_until_started(n);
        }
        self.kit.advance(300_000_000);
        for n in self.nodes() {
            self.kit.wait_until_started(n);
        }
        self.kit.run();
    }
}

/// The restart GCI as the rows `got` show it (at least `lo`): the newest
/// GCI of a commit that is there (GCI 0: unknown, not counted). Every
/// commit up to it must be there, none after it.
fn restart_gci_of(got: &[i64], committed: &BTreeMap<i64, u64>, lo: u64, what: &str) -> u64 {
    let restart =
        committed.iter().filter(|(i, g)| **g > 0 && got.contains(i)).map(|(_, g)| *g).max().unwrap_or(0).max(lo);
    let want: Vec<i64> = committed.iter().filter(|(_, g)| **g <= restart).map(|(i, _)| *i).collect();
    assert_eq!(got, want, "{what}: restart GCI {restart}");
    restart
}

/// A transaction of two rows (2i, 2i + 1) with value i, through `via`; its
/// GCI if it committed.
fn write_pair(kit: &mut ClusterKit, via: NodeId, t: &TableDef, i: i64) -> Option<u64> {
    let h = kit.handle();
    let ops = (0..2).map(|j| KeyOp::write(t.id, vec![Value::Int(2 * i + j)], vec![(1, Value::Int(i))])).collect();
    match txn(kit, via, h, ops, ExecType::Commit) {
        Signal::TcKeyConf(c) if c.outcome == TxnOutcome::Committed => Some(c.gci),
        Signal::TcKeyRef(r) if r.error.code.is_temporary() => None,
        other => panic!("write of pair {i} answered {other:?}"),
    }
}

/// `n` transactions of `write_pair`, each through a node of `vias` drawn
/// at random, up to 1 ms apart; the committed ones with their GCIs.
fn write_pairs(
    c: &mut Cluster,
    rng: &mut Rng,
    t: &TableDef,
    committed: &mut BTreeMap<i64, u64>,
    next: &mut i64,
    vias: &[NodeId],
    n: u64,
) {
    for _ in 0..n {
        let via = vias[rng.range(0, vias.len() as u64 - 1) as usize];
        if let Some(g) = write_pair(&mut c.kit, via, t, *next) {
            committed.insert(*next, g);
        }
        *next += 1;
        c.kit.advance(rng.range(0, 1_000_000));
    }
}

/// Every pair id present (both rows, checked whole), read through `via`.
fn present(kit: &mut ClusterKit, via: NodeId, t: &TableDef, upto: i64) -> Vec<i64> {
    let mut v = Vec::new();
    for i in 0..upto {
        let a = read(kit, via, t, 2 * i);
        let b = read(kit, via, t, 2 * i + 1);
        assert_eq!(a, b, "half of transaction {i} present");
        if let Some(x) = a {
            assert_eq!(x, i);
            v.push(i);
        }
    }
    v
}

/// Every node holds the same rows.
fn replicas_agree(kit: &mut ClusterKit, nodes: &[NodeId], t: &TableDef, groups: &[Vec<NodeId>]) {
    for g in groups {
        let live: Vec<NodeId> = g.iter().copied().filter(|n| nodes.contains(n)).collect();
        let first = checksums(kit, live[0], t);
        for n in &live[1..] {
            assert_eq!(checksums(kit, *n, t), first, "replicas {} and {n} differ", live[0]);
        }
    }
}

/// Kill every node (at slightly different moments), start them all again,
/// and check the restart GCI and the rows. Returns the restart GCI;
/// `committed` keeps only what survived.
fn kill_all_and_restart(
    c: &mut Cluster,
    rng: &mut Rng,
    t: &TableDef,
    committed: &mut BTreeMap<i64, u64>,
    groups: &[Vec<NodeId>],
    what: &str,
) -> u64 {
    let mut order = c.nodes();
    rng.shuffle(&mut order);
    // Transactions in flight when the nodes die: their outcome is unknown
    // unless the answer came first; after the restart each is whole or gone.
    let base = committed.keys().next_back().map_or(0, |k| k + 1) + 1000;
    let mut inflight: BTreeMap<u64, i64> = BTreeMap::new();
    for j in 0..rng.range(0, 6) as i64 {
        let h = c.kit.handle();
        let via = order[j as usize % order.len()];
        let ops = (0..2)
            .map(|k| KeyOp::write(t.id, vec![Value::Int(2 * (base + j) + k)], vec![(1, Value::Int(base + j))]))
            .collect();
        let req = TcKeyReq { txn: h, exec: ExecType::Commit, ops };
        c.kit.send_from_api(API, BlockRef::new(via, block::TC, 0), Signal::TcKeyReq(Box::new(req)));
        inflight.insert(h, base + j);
    }
    for n in &order {
        c.kit.advance(rng.range(0, 3_000_000));
        c.kill(*n);
    }
    for a in c.kit.take_inbox(API) {
        if let Signal::TcKeyConf(conf) = a {
            if let (TxnOutcome::Committed, Some(i)) = (conf.outcome, inflight.remove(&conf.txn)) {
                committed.insert(i, conf.gci);
            }
        }
    }
    let maybe: Vec<i64> = inflight.into_values().collect();
    // The restart GCI is at least the highest one a node of every group
    // recorded exactly, among nodes whose files are a complete copy. It may
    // be higher: a node that missed the record of a GCI rolls forward to it
    // from its REDO log, and so does one whose log holds the save of a GCI
    // no node recorded yet, if a node of every group holds that save (its
    // transactions are whole there). Whatever it is, the rows must be
    // exactly the commits up to it.
    let rec: BTreeMap<NodeId, (u64, bool)> = c.nodes().into_iter().map(|n| (n, c.recorded(n))).collect();
    let mut candidates: Vec<u64> = rec.values().filter(|(_, ok)| *ok).map(|(g, _)| *g).collect();
    candidates.sort_unstable();
    let lo = candidates
        .iter()
        .rev()
        .copied()
        .find(|gci| groups.iter().all(|g| g.iter().any(|n| rec[n] == (*gci, true))))
        .unwrap_or(0);
    c.kit.cluster().system_restart_gci.clear();
    c.restart_all();
    let upto = committed.keys().next_back().map_or(0, |k| k + 1).max(base + 6);
    let mut got = present(&mut c.kit, order[0], t, upto);
    // An unanswered transaction that survived belongs to a complete GCI:
    // it is kept from now on (GCI 0: at most any later restart GCI).
    for i in &maybe {
        if got.contains(i) {
            committed.insert(*i, 0);
        }
    }
    got.retain(|i| !maybe.contains(i) || committed.contains_key(i));
    let expect = restart_gci_of(&got, committed, lo, &format!("{what} (recorded {rec:?})"));
    // Each node that restarted told its host (and so the operator's log)
    // one GCI, not the lower one a rolled-forward node restored. The rows
    // show the newest GCI with a commit in it; the told one may be later
    // by GCIs without any, never by one with a commit (that commit is
    // missing: `restart_gci_of` checked every commit up to `expect`).
    let told = c.kit.cluster().system_restart_gci.clone();
    let first = told.values().next().copied();
    assert!(
        first.is_some_and(|t| t >= expect && told.values().all(|g| *g == t)),
        "{what}: restart GCI {expect} by the rows, told {told:?}"
    );
    let told_gci = first.unwrap_or(expect);
    let skipped: Vec<(&i64, &u64)> = committed.iter().filter(|(_, g)| **g > expect && **g <= told_gci).collect();
    assert!(skipped.is_empty(), "{what}: told GCI {told_gci} but commits of GCIs up to it are missing: {skipped:?}");
    let nodes = c.nodes();
    replicas_agree(&mut c.kit, &nodes, t, groups);
    committed.retain(|_, g| *g <= expect);
    expect
}

#[test]
fn gcps_run_across_every_node_and_every_node_records_them() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    let mut c = Cluster::start(groups, 3);
    let t = create_table(&mut c.kit, 2, "t", 8);
    let mut top = 0;
    for i in 0..40 {
        let g = write_pair(&mut c.kit, 1 + (i % 4) as NodeId, &t, i).expect("commit");
        top = top.max(g);
    }
    c.kit.advance(5 * 20_000_000);
    for n in c.nodes() {
        let (g, ok) = c.recorded(n);
        assert!(ok, "node {n} started with the cluster: its files are a complete copy");
        assert!(g >= top, "node {n} recorded GCI {g}, commits went up to {top}");
    }
}

#[test]
fn killing_every_node_keeps_exactly_the_complete_gcis() {
    let groups = vec![vec![1, 2]];
    let mut lost_some = 0;
    // Three restarts each: rows a restart replayed from the REDO log must
    // survive the next ones (seed 6 lost half a transaction there: replayed
    // rows were left out of the next checkpoints); and a survivor must not
    // carry out a request of a master that left (seed 32 hung). 40 seeds
    // (NORR_TEST_SEEDS runs more).
    let seeds: u64 = std::env::var("NORR_TEST_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
    for seed in 0..seeds {
        let mut rng = Rng::new(seed);
        let mut c = Cluster::start(groups.clone(), seed);
        let t = create_table(&mut c.kit, 1, "t", 4);
        let mut committed: BTreeMap<i64, u64> = BTreeMap::new();
        let mut next = 0i64;
        for round in 0..3 {
            for _ in 0..rng.range(20, 120) {
                let via = 1 + rng.range(0, 1) as NodeId;
                if let Some(g) = write_pair(&mut c.kit, via, &t, next) {
                    committed.insert(next, g);
                }
                next += 1;
                c.kit.advance(rng.range(0, 3_000_000));
            }
            let before = committed.len();
            let r = kill_all_and_restart(
                &mut c,
                &mut rng,
                &t,
                &mut committed,
                &groups,
                &format!("seed {seed} round {round}"),
            );
            assert!(r > 0, "seed {seed}: no GCI ever completed");
            lost_some += usize::from(committed.len() < before);
            // Ids are not reused: a transaction lost at this restart that
            // came back at a later one would show.
            next = next.max(committed.keys().next_back().map_or(0, |k| k + 1));
        }
    }
    assert!(lost_some > 0, "no restart lost a non-durable tail: the test saw no crash mid-GCP");
}

#[test]
fn the_master_failing_mid_gcp_is_taken_over_and_nothing_complete_is_lost() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    for seed in 0..4u64 {
        let mut rng = Rng::new(100 + seed);
        let mut c = Cluster::start(groups.clone(), 100 + seed);
        let t = create_table(&mut c.kit, 2, "t", 8);
        let mut committed: BTreeMap<i64, u64> = BTreeMap::new();
        let mut next = 0i64;
        let mut write = |c: &mut Cluster, rng: &mut Rng, committed: &mut BTreeMap<i64, u64>, n: u64| {
            for _ in 0..n {
                let via = 2 + rng.range(0, 2) as NodeId;
                if let Some(g) = write_pair(&mut c.kit, via, &t, next) {
                    committed.insert(next, g);
                }
                next += 1;
            }
        };
        write(&mut c, &mut rng, &mut committed, 30);
        // The master (node 1, the president) dies at a random moment of a
        // round: every step of it is a few hops of up to 0.5 ms.
        c.kit.advance(rng.range(0, 20_000_000));
        let before = *committed.values().max().unwrap();
        assert_eq!(c.kit.membership().unwrap().president, 1);
        c.kill(1);
        c.kit.wait_for("the survivors to exclude node 1", |k| k.membership().is_some_and(|m| !m.contains(1)));
        write(&mut c, &mut rng, &mut committed, 30);
        let after = *committed.values().max().unwrap();
        assert!(after > before, "seed {seed}: GCIs advance under the new master ({before} -> {after})");
        c.kit.advance(5 * 20_000_000);
        for n in [2, 3, 4] {
            let (g, _) = c.recorded(n);
            assert!(g >= after, "seed {seed}: node {n} recorded GCI {g}, commits went up to {after}");
        }
        kill_all_and_restart(&mut c, &mut rng, &t, &mut committed, &groups, &format!("seed {seed}"));
    }
}

#[test]
fn a_node_restarts_from_its_files_under_writes_and_copies() {
    let groups = vec![vec![1, 2]];
    for seed in 0..3u64 {
        let mut rng = Rng::new(200 + seed);
        let mut c = Cluster::start(groups.clone(), 200 + seed);
        let t = create_table(&mut c.kit, 1, "t", 4);
        let mut committed: BTreeMap<i64, u64> = BTreeMap::new();
        let mut next = 0i64;
        for _ in 0..40 {
            if let Some(g) = write_pair(&mut c.kit, 1 + rng.range(0, 1) as NodeId, &t, next) {
                committed.insert(next, g);
            }
            next += 1;
            c.kit.advance(rng.range(0, 2_000_000));
        }
        c.kill(2);
        c.kit.wait_for("node 1 to exclude node 2", |k| k.membership().is_some_and(|m| !m.contains(2)));
        // Rows node 2's files know, then change while it is down: deletes
        // (must not come back) and new rows.
        for i in 0..5 {
            let h = c.kit.handle();
            let ops = (0..2).map(|j| KeyOp::delete(t.id, vec![Value::Int(2 * i + j)])).collect();
            match txn(&mut c.kit, 1, h, ops, ExecType::Commit) {
                Signal::TcKeyConf(x) if x.outcome == TxnOutcome::Committed => {
                    committed.remove(&i);
                }
                other => panic!("delete answered {other:?}"),
            }
        }
        c.kit.boot(2);
        // Writes go on while node 2 restores its files, joins and copies.
        for _ in 0..60 {
            if let Some(g) = write_pair(&mut c.kit, 1, &t, next) {
                committed.insert(next, g);
            }
            next += 1;
            c.kit.advance(rng.range(0, 1_000_000));
        }
        c.kit.wait_until_started(2);
        // Node 2 copied: its files are not a complete copy (its REDO lacks
        // the copied rows) until a local checkpoint round that started
        // after the copy is recorded; until then a system restart takes
        // node 1's files and copies to node 2 again. Checked as the copy
        // ends: a round may complete during the reads below (when depends
        // on where the copy fell in the round cycle).
        assert!(!c.recorded(2).1, "seed {seed}: node 2's files claim a complete copy");
        c.kit.run();
        replicas_agree(&mut c.kit, &[1, 2], &t, &groups);
        let upto = next;
        let got = present(&mut c.kit, 2, &t, upto);
        assert_eq!(got, committed.keys().copied().collect::<Vec<_>>(), "seed {seed}");
        c.kit.advance(3 * 20_000_000);
        kill_all_and_restart(&mut c, &mut rng, &t, &mut committed, &groups, &format!("seed {seed}"));
    }
}

#[test]
fn commit_disk_answers_once_every_node_recorded_the_gci() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    let mut c = Cluster::start(groups, 9);
    let t = create_table(&mut c.kit, 1, "t", 8);
    let mut ahead_of_disk = 0;
    for i in 0..20i64 {
        let via = 1 + (i % 4) as NodeId;
        let exec = if i % 2 == 0 { ExecType::CommitDisk } else { ExecType::Commit };
        let h = c.kit.handle();
        let ops = vec![KeyOp::write(t.id, vec![Value::Int(i)], vec![(1, Value::Int(i))])];
        let conf = committed(txn(&mut c.kit, via, h, ops, exec));
        let lowest = c.nodes().iter().map(|n| c.recorded(*n).0).min().unwrap();
        if exec == ExecType::CommitDisk {
            assert!(lowest >= conf.gci, "a disk commit of GCI {} answered with GCI {lowest} on some disk", conf.gci);
        } else {
            ahead_of_disk += usize::from(lowest < conf.gci);
        }
    }
    // Plain commits are answered at once (network durable): before their GCI
    // is on disk, which is what CommitDisk waits for.
    assert!(ahead_of_disk > 5, "{ahead_of_disk}");
}

/// The tables in node `n`'s schema file (what a restart of `n` reads).
fn tables_on_disk(c: &Cluster, n: NodeId) -> Vec<String> {
    let d = c.disks[&n].lock().unwrap();
    let Some(bytes) = d.contents(norr_durability::schema::SCHEMA_FILE) else { return Vec::new() };
    let snap = norr_durability::schema::SchemaSnapshot::decode(bytes, "schema").expect("a valid schema file");
    snap.tables.values().map(|t| t.name.clone()).collect()
}

/// A DDL is answered only once every node's schema file holds it, not only
/// the master's: whichever node restarts the cluster has the schema every
/// client was told about. Through every node (the others pass DDL on to
/// the master).
#[test]
fn every_node_has_the_schema_on_disk_when_a_ddl_is_answered() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    let mut c = Cluster::start(groups, 13);
    let mut names = Vec::new();
    for i in 0..8u16 {
        let via = 1 + i % 4;
        let name = format!("t{i}");
        create_table(&mut c.kit, via, &name, 4);
        names.push(name);
        for n in c.nodes() {
            let on_disk = tables_on_disk(&c, n);
            for t in &names {
                assert!(on_disk.contains(t), "table {t} answered (via node {via}) but not in node {n}'s schema file");
            }
        }
    }
    for (i, name) in names.iter().enumerate().step_by(2) {
        let via = 1 + (i % 4) as NodeId;
        let req = norr_signals::DictReq { req_id: 9, op: norr_signals::DictOp::DropTable { name: name.clone() } };
        match c.kit.ask(BlockRef::new(via, block::DICT, 0), Signal::DictReq(Box::new(req))) {
            Some(Signal::DictConf(_)) => {}
            other => panic!("drop of {name} answered {other:?}"),
        }
        for n in c.nodes() {
            assert!(!tables_on_disk(&c, n).contains(name), "{name} dropped but still in node {n}'s schema file");
        }
    }
}

/// A coordinator dies with transactions in their commit phase while a
/// global checkpoint round waits for it. Its transactions are taken over by
/// the president's TC and committed with the GCI it gave them; the GCP
/// master must not save that GCI before (a taken-over commit would be a
/// REDO record after the GCI's flush: the chaos test stopped a node on that
/// assertion, and the cluster with it). Every acknowledged transaction
/// survives a later system restart.
#[test]
fn a_coordinator_dying_mid_commit_holds_the_gcp_until_its_transactions_are_taken_over() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    // 60 seeds: without the hold, a handful of them hit the race.
    // NORR_TEST_SEEDS runs more.
    let seeds: u64 = std::env::var("NORR_TEST_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    for seed in 0..seeds {
        let mut rng = Rng::new(300 + seed);
        let mut c = Cluster::start(groups.clone(), 300 + seed);
        let t = create_table(&mut c.kit, 2, "t", 8);
        let mut committed: BTreeMap<i64, u64> = BTreeMap::new();
        for i in 0..10 {
            if let Some(g) = write_pair(&mut c.kit, 3, &t, i) {
                committed.insert(i, g);
            }
        }
        // A stream of transactions through node 3's TC (pairs span both
        // node groups), none awaited, while time runs in small steps; node
        // 3 dies at a random moment among them.
        let mut inflight: BTreeMap<u64, i64> = BTreeMap::new();
        let kill_after = rng.range(5, 60);
        let mut next = 10i64;
        for _ in 0..=kill_after {
            for _ in 0..6 {
                let h = c.kit.handle();
                let ops = (0..2)
                    .map(|j| KeyOp::write(t.id, vec![Value::Int(2 * next + j)], vec![(1, Value::Int(next))]))
                    .collect();
                let req = TcKeyReq { txn: h, exec: ExecType::Commit, ops };
                c.kit.send_from_api(API, BlockRef::new(3, block::TC, 0), Signal::TcKeyReq(Box::new(req)));
                inflight.insert(h, next);
                next += 1;
            }
            c.kit.advance(rng.range(20_000, 400_000));
        }
        c.kill(3);
        c.kit.wait_for("the survivors to exclude node 3", |k| k.membership().is_some_and(|m| !m.contains(3)));
        // Rounds go on under the take-over: several GCP intervals.
        c.kit.advance(10 * 20_000_000);
        for a in c.kit.take_inbox(API) {
            if let Signal::TcKeyConf(conf) = a {
                if let (TxnOutcome::Committed, Some(i)) = (conf.outcome, inflight.remove(&conf.txn)) {
                    committed.insert(i, conf.gci);
                }
            }
        }
        let after = committed.values().copied().max().unwrap_or(0);
        for n in [1, 2, 4] {
            let (g, _) = c.recorded(n);
            assert!(g >= after, "seed {seed}: node {n} recorded GCI {g}, acknowledged commits went up to {after}");
        }
        // The unanswered ones are whole or gone; the acknowledged ones all
        // there after every node is killed and restarted.
        let kept = c.nodes().into_iter().filter(|n| *n != 3).collect::<Vec<_>>();
        let upto = next;
        let got = present(&mut c.kit, 1, &t, upto);
        for i in committed.keys() {
            assert!(got.contains(i), "seed {seed}: acknowledged transaction {i} missing before the restart");
        }
        replicas_agree(&mut c.kit, &kept, &t, &groups);
        // Node 3 stays down: its files are behind, the restart below copies
        // to it. (Restarting it here first would leave node group [3, 4]
        // without a complete copy on disk until node 3's next local
        // checkpoint: a whole-cluster crash in that window cannot restart,
        // a known gap, see the durability issue's note.)
        let mut committed_all = committed.clone();
        for i in got {
            committed_all.entry(i).or_insert(0);
        }
        kill_all_and_restart(&mut c, &mut rng, &t, &mut committed_all, &groups, &format!("seed {seed}"));
    }
}

/// Each node tells its host what its files restore to (`norr mgm show`'s
/// restart GCI): the GCI its system file records, and whether the files
/// are a complete copy; a node restarted by copying says it needs a copy
/// until a local checkpoint covers the copied rows.
#[test]
fn each_node_reports_what_its_files_restore_to() {
    let groups = vec![vec![1, 2]];
    let mut c = Cluster::start(groups, 31);
    let t = create_table(&mut c.kit, 1, "t", 4);
    let mut top = 0;
    for i in 0..20 {
        top = top.max(write_pair(&mut c.kit, 1 + (i % 2) as NodeId, &t, i).expect("commit"));
    }
    c.kit.advance(5 * 20_000_000);
    for n in c.nodes() {
        let (g, complete) = c.kit.durable_gci(n).expect("reported");
        assert!(complete, "node {n}");
        assert!(g >= top, "node {n} reports GCI {g}, commits went up to {top}");
        // Reported once its system file holds it (a later write may be on
        // its way).
        assert!(g <= c.recorded(n).0, "node {n} reports {g}, its file holds {:?}", c.recorded(n));
    }
    c.kill(2);
    c.kit.wait_for("node 1 to exclude node 2", |k| k.membership().is_some_and(|m| !m.contains(2)));
    for i in 20..30 {
        write_pair(&mut c.kit, 1, &t, i).expect("commit");
    }
    c.kit.boot(2);
    c.kit.wait_until_started(2);
    c.kit.wait_for("node 2 to report that its files need a copy", |k| k.durable_gci(2).is_some_and(|d| !d.1));
    c.kit.wait_for("node 2's files to be a complete copy again", |k| k.durable_gci(2).is_some_and(|d| d.1));
    assert!(c.recorded(2).1, "node 2's file says complete too");
}

/// Every node dies while the system file writes of a GCP's record step are
/// under way: node group 0 (slow disks) has not recorded GCI g, group 1
/// (fast disks) has. g is complete (every node saved its REDO up to it
/// before any recorded it, and commits of it were acknowledged): the
/// system restart goes to g, and the nodes of group 0 roll their files
/// forward to it from their REDO logs (there is no node of that group to
/// copy from). Without that no GCI was held by a node of every group and
/// the cluster could not start at all.
#[test]
fn a_crash_between_the_groups_records_of_a_gci_restarts_to_it() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    let mut split_seen = 0;
    for seed in 0..6u64 {
        let mut rng = Rng::new(500 + seed);
        let mut c =
            Cluster::start_with_latency(groups.clone(), 500 + seed, |n| if n <= 2 { 3_000_000 } else { 10_000 });
        let t = create_table(&mut c.kit, 2, "t", 8);
        let mut committed: BTreeMap<i64, u64> = BTreeMap::new();
        let mut next = 0i64;
        let mut split = None;
        // Write, and look in 50 us steps for the moment group 1 recorded a
        // GCI group 0 has not.
        for _ in 0..2000 {
            if let Some(g) = write_pair(&mut c.kit, 1 + rng.range(0, 3) as NodeId, &t, next) {
                committed.insert(next, g);
            }
            next += 1;
            for _ in 0..40 {
                c.kit.advance(50_000);
                let rec: Vec<u64> = [1, 2, 3, 4].iter().map(|n| c.recorded(*n).0).collect();
                if rec[2].min(rec[3]) > rec[0].max(rec[1]) {
                    split = Some(rec);
                    break;
                }
            }
            if split.is_some() {
                break;
            }
        }
        let Some(rec) = split else { continue };
        split_seen += 1;
        // Group 0 dies first: its system file writes in flight are lost.
        for n in [1, 2, 3, 4] {
            c.kill(n);
        }
        let after: Vec<(u64, bool)> = [1, 2, 3, 4].iter().map(|n| c.recorded(*n)).collect();
        let restart = after[2].0.min(after[3].0);
        assert!(
            after[0].0.max(after[1].0) < restart,
            "seed {seed}: the split held through the kill ({rec:?} -> {after:?})"
        );
        c.kit.cluster().system_restart_gci.clear();
        c.restart_all();
        let got = present(&mut c.kit, 3, &t, next);
        let told = c.kit.cluster().system_restart_gci.clone();
        assert_eq!(told, [1, 2, 3, 4].map(|n| (n, restart)).into(), "seed {seed}: every node told its host");
        let want: Vec<i64> = committed.iter().filter(|(_, g)| **g <= restart).map(|(i, _)| *i).collect();
        assert_eq!(got, want, "seed {seed}: restart GCI {restart}, recorded {after:?}");
        assert!(want.iter().any(|i| committed[i] == restart), "seed {seed}: no commit of GCI {restart} to keep");
        let nodes = c.nodes();
        replicas_agree(&mut c.kit, &nodes, &t, &groups);
        for n in [1, 2] {
            let counters = c.kit.cluster().block_counters(n, block::CKPT, 0);
            let rolled = counters.iter().find(|(k, _)| k == "ckpt: rolled forward at a system restart");
            assert_eq!(rolled.map(|(_, v)| *v), Some(1), "seed {seed}: node {n} rolled forward ({counters:?})");
        }
        // The rolled-forward nodes record the cluster's GCIs again.
        c.kit.advance(5 * 20_000_000);
        for n in [1, 2] {
            let (g, complete) = c.recorded(n);
            assert!(g > restart && complete, "seed {seed}: node {n} recorded ({g}, {complete}) after the restart");
        }
    }
    assert!(split_seen >= 3, "only {split_seen} of 6 seeds found group 1 ahead of group 0");
}

/// A node that restarted by copying has no complete copy on disk until a
/// local checkpoint covers the copied rows. When its partner (the only
/// node of the group with one) dies in that window, the cluster goes on
/// serving from memory, but it must not record GCIs on the other groups'
/// nodes that this group could not restore: it records them only on the
/// copying node (for its checkpoint's sake) until that node's files are
/// complete. A crash of every node in the window restarts to the last GCI
/// recorded before the partner died (before: "system restart impossible",
/// the cluster stayed down); a crash after the window to a GCI after it.
#[test]
fn a_copied_node_whose_partner_dies_before_its_checkpoint_keeps_the_cluster_restartable() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    for seed in 0..4u64 {
        let mut rng = Rng::new(700 + seed);
        let mut c = Cluster::start(groups.clone(), 700 + seed);
        let t = create_table(&mut c.kit, 2, "t", 8);
        let mut committed: BTreeMap<i64, u64> = BTreeMap::new();
        let mut next = 0i64;
        write_pairs(&mut c, &mut rng, &t, &mut committed, &mut next, &[1, 2, 3, 4], 30);
        c.kill(2);
        c.kit.wait_for("the others to exclude node 2", |k| k.membership().is_some_and(|m| !m.contains(2)));
        write_pairs(&mut c, &mut rng, &t, &mut committed, &mut next, &[1, 3, 4], 10);
        let before = c.recorded(2).0;
        c.kit.boot(2);
        c.kit.wait_until_started(2);
        // Its first system file write of this life says it is copying.
        let mut waited = 0;
        while c.recorded(2).0 == before && waited < 100 {
            c.kit.advance(1_000_000);
            waited += 1;
        }
        assert!(!c.recorded(2).1, "seed {seed}: node 2 copied, its files are not a complete copy yet");
        c.kill(1);
        c.kit.wait_for("the others to exclude node 1", |k| k.membership().is_some_and(|m| !m.contains(1)));
        let partner_recorded = c.recorded(1).0;
        // The window: node 2 alone holds group 0, with no complete copy on disk.
        write_pairs(&mut c, &mut rng, &t, &mut committed, &mut next, &[2, 3, 4], 30);
        c.kit.advance(5 * 20_000_000);
        let after_window = if seed % 2 == 1 {
            // Let node 2's checkpoint cover its rows: GCIs are recorded
            // everywhere again.
            let mut waited = 0;
            while !c.recorded(2).1 && waited < 200 {
                c.kit.advance(20_000_000);
                waited += 1;
            }
            assert!(c.recorded(2).1, "seed {seed}: node 2's files never became a complete copy");
            write_pairs(&mut c, &mut rng, &t, &mut committed, &mut next, &[2, 3, 4], 10);
            c.kit.advance(5 * 20_000_000);
            let g = c.recorded(3).0;
            assert!(g > partner_recorded + 1, "seed {seed}: GCIs recorded again after the window ({g})");
            Some(g)
        } else {
            for n in [3, 4] {
                let (g, _) = c.recorded(n);
                assert!(
                    g <= partner_recorded + 1,
                    "seed {seed}: node {n} recorded GCI {g} while group 0's files could restore {partner_recorded} at most"
                );
            }
            None
        };
        for n in [2, 3, 4] {
            c.kill(n);
        }
        c.restart_all();
        let got = present(&mut c.kit, 3, &t, next);
        restart_gci_of(&got, &committed, 0, &format!("seed {seed}"));
        let lost: Vec<i64> =
            committed.iter().filter(|(i, c)| **c <= partner_recorded && !got.contains(i)).map(|(i, _)| *i).collect();
        assert!(lost.is_empty(), "seed {seed}: commits of GCIs up to {partner_recorded} lost: {lost:?}");
        if let Some(g) = after_window {
            let lost: Vec<i64> =
                committed.iter().filter(|(i, c)| **c <= g && !got.contains(i)).map(|(i, _)| *i).collect();
            assert!(lost.is_empty(), "seed {seed}: commits of GCIs up to {g}, recorded everywhere, lost: {lost:?}");
        }
        let nodes = c.nodes();
        replicas_agree(&mut c.kit, &nodes, &t, &groups);
    }
}

/// The same window, with two checkpoint rounds of the copied node in it:
/// one round begins just before its partner dies (no GCI completes in
/// between), and the next begins in the window. No GCI completes there
/// (the copied node's group has no complete copy on disk), so both rounds
/// begin at the same GCI; the second continues the first's chain. (Seen
/// in the real-process chaos test: LQH asserted that a round begins after
/// the one before and aborted the group's last node.)
#[test]
fn a_copied_node_alone_in_its_group_checkpoints_twice_from_one_gci() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    let lcp_counter = |c: &mut Cluster, name: &str| -> u64 {
        let counters = c.kit.cluster().block_counters(2, block::CKPT, 0);
        counters.iter().find(|(k, _)| k == name).map_or(0, |(_, v)| *v)
    };
    for seed in 0..4u64 {
        let mut rng = Rng::new(800 + seed);
        let mut c = Cluster::start(groups.clone(), 800 + seed);
        let t = create_table(&mut c.kit, 2, "t", 8);
        let mut committed: BTreeMap<i64, u64> = BTreeMap::new();
        let mut next = 0i64;
        write_pairs(&mut c, &mut rng, &t, &mut committed, &mut next, &[1, 2, 3, 4], 20);
        c.kill(2);
        c.kit.wait_for("the others to exclude node 2", |k| k.membership().is_some_and(|m| !m.contains(2)));
        write_pairs(&mut c, &mut rng, &t, &mut committed, &mut next, &[1, 3, 4], 20);
        c.kit.boot(2);
        c.kit.wait_until_started(2);
        // A round of node 2 begins; its partner dies before a GCI completes.
        let started = lcp_counter(&mut c, "ckpt: lcp rounds started");
        let mut waited = 0;
        while lcp_counter(&mut c, "ckpt: lcp rounds started") == started {
            assert!(waited < 20_000, "seed {seed}: node 2 began no checkpoint round");
            c.kit.advance(20_000);
            waited += 1;
        }
        let complete = lcp_counter(&mut c, "ckpt: complete gci");
        c.kill(1);
        c.kit.wait_for("the others to exclude node 1", |k| k.membership().is_some_and(|m| !m.contains(1)));
        write_pairs(&mut c, &mut rng, &t, &mut committed, &mut next, &[2, 3, 4], 20);
        let mut waited = 0;
        while !c.recorded(2).1 {
            assert!(waited < 400, "seed {seed}: node 2's files never became a complete copy");
            assert!(c.kit.is_alive(2), "seed {seed}: node 2 died in the window");
            c.kit.advance(20_000_000);
            waited += 1;
        }
        let rounds = lcp_counter(&mut c, "ckpt: lcp rounds started") - started;
        assert!(rounds >= 2, "seed {seed}: {rounds} rounds from GCI {complete} until node 2's files were complete");
        write_pairs(&mut c, &mut rng, &t, &mut committed, &mut next, &[2, 3, 4], 20);
        c.kit.advance(5 * 20_000_000);
        let recorded = c.recorded(3).0;
        for n in [2, 3, 4] {
            c.kill(n);
        }
        c.restart_all();
        let got = present(&mut c.kit, 3, &t, next);
        restart_gci_of(&got, &committed, 0, &format!("seed {seed}"));
        let lost: Vec<i64> =
            committed.iter().filter(|(i, g)| **g <= recorded && !got.contains(i)).map(|(i, _)| *i).collect();
        assert!(lost.is_empty(), "seed {seed}: commits of GCIs up to {recorded}, recorded everywhere, lost: {lost:?}");
        let nodes = c.nodes();
        replicas_agree(&mut c.kit, &nodes, &t, &groups);
    }
}

/// A DDL cut short by a crash of every node (a power cut), at any point of
/// it: after the system restart every node has the same schema, done or
/// undone as a whole. Writes planned against the dictionary's version of
/// the table commit through every node, the replicas agree, the rows
/// written before are there, and later DDL gets fresh ids.
#[test]
fn a_ddl_cut_by_a_crash_of_every_node_is_done_or_undone_everywhere() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    let mut outcomes = BTreeMap::<String, u32>::new();
    for seed in 0..24u64 {
        let mut rng = Rng::new(4700 + seed);
        let mut c = Cluster::start(groups.clone(), 4700 + seed);
        let base = create_table(&mut c.kit, 3, "base", 8);
        put_versioned(&mut c.kit, 3, &base, 0..24, 1);
        // Durable everywhere before the DDL.
        c.kit.advance(5 * 20_000_000);
        let t0 = c.kit.now_ns();
        let calib = create_table(&mut c.kit, 3, "calib", 4);
        let took = c.kit.now_ns() - t0;
        let kind = seed % 4;
        let req = DictReq { req_id: 9, op: the_ddl(kind, &base) };
        c.kit.send_from_api(API, BlockRef::new(3, block::DICT, 0), Signal::DictReq(Box::new(req)));
        c.kit.advance(rng.range(0, took * 3 / 2));
        let answered = c.kit.take_inbox(API).iter().any(|s| matches!(s, Signal::DictConf(_)));
        for n in [1, 2, 3, 4] {
            c.kill(n);
        }
        c.restart_all();
        let name = if kind == 0 { "t" } else { "base" };
        let now = get_table(&mut c.kit, 4, name);
        let done = match kind {
            0 => now.is_some(),
            1 => now.is_none(),
            2 => now.as_ref().is_some_and(|d| d.index_by_name("iv").is_some()),
            _ => now.as_ref().is_some_and(|d| d.columns.len() == 3),
        };
        if answered {
            assert!(done, "seed {seed}: the DDL of kind {kind} was answered and is gone after the restart");
        }
        *outcomes
            .entry(format!("{} {}", if answered { "answered" } else { "cut" }, if done { "done" } else { "undone" }))
            .or_default() += 1;
        // The rows written before the DDL are there (unless it dropped them).
        if kind != 1 || !done {
            let b = get_table(&mut c.kit, 2, "base").expect("base");
            for k in [0, 11, 23] {
                assert_eq!(read(&mut c.kit, 2, &b, k), Some(1), "seed {seed}: row {k} of base");
            }
        }
        let t = the_table_after(&mut c.kit, 2, kind);
        for via in [1, 2, 3, 4] {
            put_versioned(&mut c.kit, via, &t, 0..24, 10 + via as i64);
        }
        let nodes = c.nodes();
        replicas_agree(&mut c.kit, &nodes, &t, &groups);
        let after = create_table(&mut c.kit, 4, "after", 8);
        assert!(after.id > t.id.max(calib.id), "seed {seed}: table id {} handed out again", after.id);
        for via in [1, 2, 3, 4] {
            put_versioned(&mut c.kit, via, &after, 0..8, 1);
        }
        replicas_agree(&mut c.kit, &nodes, &after, &groups);
    }
    eprintln!("outcomes: {outcomes:?}");
    assert!(outcomes.len() >= 3, "the cuts fell at too few points: {outcomes:?}");
}

/// A committed schema change is shown to clients only once its DDL is
/// answered, that is once every node's schema file holds it: until then a
/// crash of every node may still undo it, and rows written against it
/// would be lost. Node 4's disk is slow, so the master waits for it long
/// after it committed the change; readers asking meanwhile do not see it.
#[test]
fn a_table_is_shown_only_once_every_node_holds_it_on_disk() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    let mut c = Cluster::start_with_latency(groups, 47, |n| if n == 4 { 60_000_000 } else { 2_000_000 });
    let base = create_table(&mut c.kit, 3, "base", 4);
    let mut altered = base.clone();
    altered.columns.push(norr_signals::ColumnDef::new("w", int()));
    for (op, name) in [
        (the_ddl(0, &base), "t"),
        (the_ddl(2, &base), "base"),
        (
            norr_signals::DictOp::AlterTable {
                table: "base".into(),
                def: altered,
                sources: vec![
                    norr_signals::ColumnSource::Old(0),
                    norr_signals::ColumnSource::Old(1),
                    norr_signals::ColumnSource::Value(Value::Int(5)),
                ],
                expect_version: base.version + 1,
            },
            "base",
        ),
    ] {
        let before = get_table(&mut c.kit, 2, name);
        let req = DictReq { req_id: 5, op };
        c.kit.send_from_api(API, BlockRef::new(3, block::DICT, 0), Signal::DictReq(Box::new(req)));
        let mut polls = 0;
        let answer = loop {
            let got = c.kit.take_inbox(API);
            if let Some(a) = got.into_iter().next() {
                break a;
            }
            // Shown changed only once every node's schema file holds it
            // (the master answers then; its answer may still be on its way).
            let seen = get_table(&mut c.kit, 2, name);
            if seen != before {
                for n in [1, 2, 3, 4] {
                    let d = c.disks[&n].lock().unwrap();
                    let file = d.durable(norr_durability::schema::SCHEMA_FILE).expect("a schema file");
                    let snap = norr_durability::schema::SchemaSnapshot::decode(file, "schema").expect("valid");
                    let on_disk = snap.tables.values().find(|t| t.name == name).cloned();
                    assert_eq!(on_disk, seen, "{name} shown before node {n}'s schema file held it");
                }
            }
            polls += 1;
            assert!(polls < 10_000, "no answer");
        };
        let Signal::DictConf(conf) = answer else { panic!("{answer:?}") };
        let norr_signals::DictResult::Table(def) = conf.result else { panic!("{:?}", conf.result) };
        assert_eq!(get_table(&mut c.kit, 2, name), Some(def), "{name} after its DDL was answered");
        assert!(polls > 20, "the DDL took {polls} polls: node 4's slow disk should hold it longer");
    }
}

/// A system restart where the lowest node id was down before the others
/// stopped: its files are behind. Whatever it holds must not overwrite the
/// schema the others made meanwhile: a table created while it was down is
/// there after the restart with its rows, and AUTO_INCREMENT values handed
/// out meanwhile are not handed out again.
#[test]
fn a_node_behind_at_a_system_restart_does_not_impose_its_old_schema() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    for seed in 0..3u64 {
        let mut c = Cluster::start(groups.clone(), 5300 + seed);
        let base = create_table(&mut c.kit, 1, "base", 4);
        put_versioned(&mut c.kit, 2, &base, 0..8, 1);
        c.kit.advance(5 * 20_000_000);
        c.kill(1);
        c.kit.wait_for("the others to exclude node 1", |k| k.membership().is_some_and(|m| !m.contains(1)));
        let x = create_table(&mut c.kit, 3, "x", 4);
        put_versioned(&mut c.kit, 3, &x, 0..16, 7);
        let first = match dict(&mut c.kit, 4, norr_signals::DictOp::NextAutoInc { table: x.id, count: 100 }) {
            Ok(norr_signals::DictResult::AutoInc { first }) => first,
            other => panic!("{other:?}"),
        };
        let dropped = match dict(&mut c.kit, 3, norr_signals::DictOp::DropTable { name: "base".into() }) {
            Ok(_) => true,
            Err(e) => panic!("drop base: {e:?}"),
        };
        c.kit.advance(5 * 20_000_000);
        for n in [2, 3, 4] {
            c.kill(n);
        }
        c.restart_all();
        let got = get_table(&mut c.kit, 2, "x").unwrap_or_else(|| panic!("seed {seed}: table x lost"));
        assert_eq!(got, x, "seed {seed}");
        for k in 0..16 {
            assert_eq!(read(&mut c.kit, 1, &got, k), Some(7), "seed {seed}: row {k} of x");
        }
        assert_eq!(get_table(&mut c.kit, 4, "base").is_none(), dropped, "seed {seed}: base came back");
        let next = match dict(&mut c.kit, 1, norr_signals::DictOp::NextAutoInc { table: x.id, count: 1 }) {
            Ok(norr_signals::DictResult::AutoInc { first }) => first,
            other => panic!("{other:?}"),
        };
        assert!(next >= first + 100, "seed {seed}: value {next} handed out again (had {first}..{})", first + 100);
        let nodes = c.nodes();
        replicas_agree(&mut c.kit, &nodes, &got, &groups);
    }
}

/// A backup replica whose disk is slower than its primary's: its REDO
/// buffer and log fill first. Its writes must be refused at prepare (410 /
/// 1221, temporary: the client retries) like the primary's, not found to
/// have no room at commit, when the transaction is decided: that append
/// failing would break the node's log, and no later global checkpoint
/// could complete anywhere.
#[test]
fn a_backup_whose_redo_log_lags_refuses_writes_instead_of_failing_at_commit() {
    let groups = vec![vec![1, 2]];
    let knobs = Knobs { redo_buffer_bytes: 1 << 20, ..dknobs() };
    for seed in 0..3u64 {
        // Node 2's disk takes up to 400 ms per IO; node 1's up to 2 ms.
        let mut c = Cluster::start_with_knobs(
            groups.clone(),
            900 + seed,
            |n| if n == 2 { 400_000_000 } else { 2_000_000 },
            knobs.clone(),
        );
        // One partition: node 1 is its primary, node 2 its backup.
        let def = norr_txn::testkit::table_def("wide", 1, &[("v", norr_signals::ColumnType::Blob)]);
        let t = match dict(&mut c.kit, 1, norr_signals::DictOp::CreateTable(def)) {
            Ok(norr_signals::DictResult::Table(t)) => t,
            other => panic!("create table answered {other:?}"),
        };
        let (mut ok, mut refused, mut last_gci) = (0u64, 0u64, 0u64);
        for i in 0..400i64 {
            let h = c.kit.handle();
            let ops = (0..16)
                .map(|j| KeyOp::write(t.id, vec![Value::Int(16 * i + j)], vec![(1, Value::Bytes(vec![i as u8; 2000]))]))
                .collect();
            match txn(&mut c.kit, 1 + (i % 2) as NodeId, h, ops, ExecType::Commit) {
                Signal::TcKeyConf(k) if k.outcome == TxnOutcome::Committed => {
                    ok += 1;
                    last_gci = last_gci.max(k.gci);
                }
                Signal::TcKeyRef(r) if r.error.code.is_temporary() => refused += 1,
                other => panic!("seed {seed}: write {i} answered {other:?}"),
            }
        }
        for n in [1, 2] {
            let counters = c.kit.cluster().block_counters(n, block::LQH, 0);
            let broke = counters.iter().find(|(k, _)| k == "lqh: committed changes found no room in the redo log");
            assert!(broke.is_none_or(|(_, v)| *v == 0), "seed {seed}: node {n} failed to log a commit: {broke:?}");
        }
        assert!(refused > 0, "seed {seed}: node 2's log never filled ({ok} transactions committed)");
        assert!(ok > 0, "seed {seed}: nothing committed");
        // Global checkpoints go on: every committed GCI becomes durable
        // on both nodes.
        let mut waited = 0;
        while [1, 2].iter().any(|n| c.recorded(*n).0 < last_gci) {
            assert!(waited < 600, "seed {seed}: GCI {last_gci} never recorded: {:?}", [c.recorded(1), c.recorded(2)]);
            c.kit.advance(50_000_000);
            waited += 1;
        }
        replicas_agree(&mut c.kit, &[1, 2], &t, &groups);
    }
}

/// A node whose disk fails (every write refused) can no longer make
/// commits durable: it leaves the cluster, and the others go on completing
/// global checkpoints (before, one node's refused save stopped every later
/// GCP of the whole cluster). Once its disk works again it restarts from
/// its files, copies what it missed and holds the same rows as its partner.
#[test]
fn a_node_whose_disk_fails_leaves_and_the_others_keep_checkpointing() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    for seed in 0..3u64 {
        let mut rng = Rng::new(950 + seed);
        let mut c = Cluster::start(groups.clone(), 950 + seed);
        let t = create_table(&mut c.kit, 1, "t", 8);
        let mut committed: BTreeMap<i64, u64> = BTreeMap::new();
        let mut next = 0i64;
        write_pairs(&mut c, &mut rng, &t, &mut committed, &mut next, &[1, 2, 3, 4], 20);
        c.disks[&2].lock().unwrap().faults.write_error_p = 1.0;
        c.kit.wait_for("node 2 to leave for its failed disk", |k| {
            k.shutdowns(2).iter().any(|(r, _)| matches!(r, norr_signals::cluster::ShutdownReason::Fatal(_)))
        });
        c.disks[&2].lock().unwrap().faults.write_error_p = 0.0;
        write_pairs(&mut c, &mut rng, &t, &mut committed, &mut next, &[1, 3, 4], 20);
        // Every commit becomes durable on the survivors.
        let last = committed.values().copied().max().expect("commits");
        let mut waited = 0;
        while [1, 3, 4].iter().any(|n| c.recorded(*n).0 < last) {
            assert!(waited < 400, "seed {seed}: GCI {last} never recorded: {:?}", [1, 3, 4].map(|n| c.recorded(n)));
            c.kit.advance(20_000_000);
            waited += 1;
        }
        c.kit.wait_until_started(2);
        write_pairs(&mut c, &mut rng, &t, &mut committed, &mut next, &[1, 2, 3, 4], 10);
        let nodes = c.nodes();
        replicas_agree(&mut c.kit, &nodes, &t, &groups);
        let got = present(&mut c.kit, 2, &t, next);
        let want: Vec<i64> = committed.keys().copied().collect();
        assert_eq!(got, want, "seed {seed}: committed transactions missing");
    }
}

/// A node whose schema file cannot be written leaves the cluster instead of
/// confirming a DDL its files lack (before, it confirmed it, and a restart
/// of every node could have brought its old schema back). The DDL completes
/// on the others; once its disk works again the node restarts, takes the
/// schema from the master and serves the new table. (Global checkpoints are
/// rare here, so only the schema write meets the failed disk.)
#[test]
fn a_node_whose_schema_file_cannot_be_written_leaves_and_the_ddl_completes() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    for seed in 0..3u64 {
        let mut c = Cluster::start_with_knobs(
            groups.clone(),
            970 + seed,
            |_| 2_000_000,
            Knobs { gcp_interval_ms: 60_000, ..dknobs() },
        );
        let t = create_table(&mut c.kit, 1, "t", 8);
        put(&mut c.kit, 1, &t, 1, 10);
        c.disks[&3].lock().unwrap().faults.write_error_p = 1.0;
        let def = norr_txn::testkit::table_def("t2", 8, &[("v", int())]);
        let t2 = match dict(&mut c.kit, 1, norr_signals::DictOp::CreateTable(def)) {
            Ok(norr_signals::DictResult::Table(t2)) => t2,
            other => panic!("seed {seed}: create table answered {other:?}"),
        };
        let left = c.kit.shutdowns(3);
        assert!(
            left.iter().any(
                |(r, _)| matches!(r, norr_signals::cluster::ShutdownReason::Fatal(w) if w.contains("schema file"))
            ),
            "seed {seed}: node 3 did not leave for its schema file: {left:?}"
        );
        c.disks[&3].lock().unwrap().faults.write_error_p = 0.0;
        c.kit.wait_until_started(3);
        assert_eq!(get_table(&mut c.kit, 3, "t2").map(|d| d.id), Some(t2.id), "seed {seed}: t2 on node 3");
        put(&mut c.kit, 3, &t2, 5, 50);
        assert_eq!(read(&mut c.kit, 3, &t2, 5), Some(50));
        assert_eq!(read(&mut c.kit, 3, &t, 1), Some(10));
    }
}
