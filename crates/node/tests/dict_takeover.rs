//! DDL while the DICT master dies. The master pushes a change to every
//! node's LQH, then TC and DIH, then to the other DICTs; killed midway it
//! leaves some blocks changed and others not. Whichever DICT becomes master
//! must end the change the same way everywhere: after the take-over every
//! node serves the table as the dictionary describes it (writes planned
//! against the dictionary's version commit through every node, replicas
//! agree), later DDL works (no table or index id is handed out twice), and
//! a further master change finds the same schema.

mod common;

use common::*;
use norr_kernel::{BlockRef, NodeId};
use norr_node::testkit::ClusterKit;
use norr_signals::schema::IndexKind;
use norr_signals::{block, DictOp, DictReq, DictResult, Signal, TableDef};
use norr_sim::rng::Rng;
use norr_txn::testkit::index_def;

/// The API node the DDL under test comes from (answers are kept apart from
/// the kit's own requests).
const DDL_API: NodeId = 101;

/// Every replica of each group holds the same rows of `t`.
fn replicas_agree(kit: &mut ClusterKit, groups: &[Vec<NodeId>], t: &TableDef) {
    for g in groups {
        let live: Vec<NodeId> = g.iter().copied().filter(|n| kit.is_alive(*n)).collect();
        let sums: Vec<_> = live.iter().map(|n| checksums(kit, *n, t)).collect();
        for (n, s) in live.iter().zip(&sums).skip(1) {
            assert_eq!(*s, sums[0], "table {}: node {n} differs from node {}", t.name, live[0]);
        }
    }
}

#[test]
fn a_ddl_whose_master_dies_midway_ends_the_same_on_every_node() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    let mut answers = std::collections::BTreeMap::<String, u32>::new();
    let mut rolled_forward = 0u32;
    for seed in 0..32u64 {
        let mut rng = Rng::new(4100 + seed);
        let mut kit = ClusterKit::start(groups.clone(), knobs(), 4100 + seed);
        assert_eq!(kit.membership().expect("settled").president, 1);
        let base = create_table(&mut kit, 3, "base", 8);
        put_versioned(&mut kit, 3, &base, 0..24, 1);

        // How long a DDL takes here: the crash falls anywhere in it.
        let t0 = kit.now_ns();
        let calib = create_table(&mut kit, 3, "calib", 4);
        let took = kit.now_ns() - t0;
        let kind = seed % 4;
        let op = the_ddl(kind, &base);
        let req = DictReq { req_id: 9, op };
        kit.send_from_api(DDL_API, BlockRef::new(3, block::DICT, 0), Signal::DictReq(Box::new(req)));
        kit.advance(rng.range(0, took));
        kit.fail_nodes(&[1]);
        // The client hears a definite answer: the DDL was done (before the
        // crash, finished by the new master, or passed on to it again).
        let answer = kit.next_answers(DDL_API).pop().expect("an answer");
        assert!(matches!(answer, Signal::DictConf(_)), "seed {seed}: the DDL of kind {kind} answered {answer:?}");
        let counters = kit.cluster().block_counters(2, block::DICT, 0);
        let how = if counters.iter().any(|(k, v)| k == "dict: a new master finished the old master's change" && *v > 0)
        {
            rolled_forward += 1;
            "finished by the new master"
        } else if kit
            .cluster()
            .block_counters(3, block::DICT, 0)
            .iter()
            .any(|(k, v)| k == "dict: requests passed on again after their master failed" && *v > 0)
        {
            "passed on again"
        } else {
            "done before the crash"
        };
        *answers.entry(how.to_string()).or_default() += 1;
        let now = get_table(&mut kit, 4, if kind == 0 { "t" } else { "base" });
        match kind {
            0 => assert!(now.is_some(), "seed {seed}: CREATE answered, no table"),
            1 => assert!(now.is_none(), "seed {seed}: DROP answered, table there"),
            2 => assert!(now.is_some_and(|d| d.index_by_name("iv").is_some()), "seed {seed}: CREATE INDEX answered"),
            _ => assert!(now.is_some_and(|d| d.columns.len() == 3), "seed {seed}: ALTER answered"),
        }

        // Every survivor serves the table as the dictionary has it.
        let t = the_table_after(&mut kit, 2, kind);
        for (i, via) in [2, 3, 4].into_iter().enumerate() {
            put_versioned(&mut kit, via, &t, 0..24, 10 + i as i64);
        }
        replicas_agree(&mut kit, &groups, &t);
        // New ids are new: a table and an index made now work everywhere.
        let after = create_table(&mut kit, 4, "after", 8);
        assert!(after.id > t.id.max(calib.id), "seed {seed}: table id {} handed out again", after.id);
        let r = dict(
            &mut kit,
            4,
            DictOp::CreateIndex { table: "after".into(), index: index_def("av", &[1], false, IndexKind::Ordered) },
        );
        let after = match r {
            Ok(DictResult::Table(d)) => d,
            other => panic!("seed {seed}: create index on after: {other:?}"),
        };
        for via in [2, 3, 4] {
            put_versioned(&mut kit, via, &after, 0..8, 1);
        }

        // The failed node comes back and takes the schema; then the master
        // fails again and the next one (node 3, the oldest) has the same.
        kit.restart(1);
        let t = get_table(&mut kit, 1, &t.name).expect("the table");
        put_versioned(&mut kit, 1, &t, 0..24, 20);
        kit.fail_nodes(&[2]);
        assert_eq!(kit.membership().expect("settled").president, 3, "seed {seed}");
        let t3 = get_table(&mut kit, 4, &t.name).expect("the table at the next master");
        assert_eq!(t3, t, "seed {seed}: the next master's definition");
        for via in [1, 3, 4] {
            put_versioned(&mut kit, via, &t3, 0..24, 30);
        }
        replicas_agree(&mut kit, &groups, &t3);
        let last = create_table(&mut kit, 1, "last", 4);
        assert!(last.id > after.id, "seed {seed}: table id {} handed out again", last.id);
        put_versioned(&mut kit, 1, &last, 0..8, 1);
    }
    // The crash points spread over the whole DDL: some changes were
    // finished by the new master, some ended before the crash.
    assert!(rolled_forward >= 4, "only {rolled_forward} of 32 DDLs were finished by the new master ({answers:?})");
    assert!(answers.len() == 3, "every end of a DDL was seen: {answers:?}");
}

/// AUTO_INCREMENT values are handed out by the master DICT. When it dies
/// with reservations in flight, the next master goes on from the highest
/// mark it holds: no value the old master handed out (a reservation its
/// client heard of) is handed out again.
#[test]
fn auto_increment_values_are_never_handed_out_twice_across_a_master_failure() {
    let groups = vec![vec![1, 2], vec![3, 4]];
    let mut overlaps = Vec::new();
    for seed in 0..24u64 {
        let mut rng = Rng::new(5100 + seed);
        let mut kit = ClusterKit::start(groups.clone(), knobs(), 5100 + seed);
        let t = create_table(&mut kit, 3, "ai", 4);
        // Reservations of 1,000 values through nodes 2, 3 and 4, a few at a
        // time; the master is killed in the middle of them.
        let mut handed: Vec<(u64, u64)> = Vec::new();
        let reserve = |kit: &mut ClusterKit, via: NodeId, req_id: u32| {
            let op = DictOp::NextAutoInc { table: t.id, count: 1000 };
            let req = DictReq { req_id, op };
            kit.send_from_api(DDL_API, BlockRef::new(via, block::DICT, 0), Signal::DictReq(Box::new(req)));
        };
        let crash_at = rng.range(5, 40);
        let mut sent = 0u32;
        for round in 0..50u32 {
            for via in [2, 3, 4] {
                reserve(&mut kit, via, round * 10 + via as u32);
                sent += 1;
            }
            kit.advance(rng.range(0, 300_000));
            if round == crash_at as u32 {
                kit.fail_nodes(&[1]);
            }
            for a in kit.take_inbox(DDL_API) {
                if let Signal::DictConf(c) = a {
                    if let DictResult::AutoInc { first } = c.result {
                        handed.push((first, first + 1000));
                    }
                }
            }
        }
        kit.run();
        for a in kit.take_inbox(DDL_API) {
            if let Signal::DictConf(c) = a {
                if let DictResult::AutoInc { first } = c.result {
                    handed.push((first, first + 1000));
                }
            }
        }
        assert!(handed.len() > sent as usize / 2, "seed {seed}: {} of {sent} reservations answered", handed.len());
        handed.sort();
        for w in handed.windows(2) {
            if w[0].1 > w[1].0 {
                overlaps.push((seed, w[0], w[1]));
            }
        }
    }
    assert!(overlaps.is_empty(), "values handed out twice: {overlaps:?}");
}
