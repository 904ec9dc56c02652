//! Direct checks of ordered-index scans through the host's admin connection
//! (no concurrency): what the model workload's index-scan checker relies on.

use norr_signals::*;
use norr_sim::host::{random_knobs, Host, NetParams};
use norr_sim::rng::Rng;
use norr_sim::workload::{admin_commit, create_table, int_table, NoObserver};

fn host(partitions: u32) -> (Host, TableId, IndexId) {
    let mut rng = Rng::new(1);
    let knobs = norr_knobs::Knobs::default();
    let _ = random_knobs;
    let net = NetParams::random(&mut rng);
    let node = norr_sim::real_node(norr_sim::host::DATA_NODE, &knobs);
    let mut h = Host::new(rng, node, knobs, net);
    let mut def = int_table("t", &["v"], true, partitions);
    def.indexes.push(IndexDef {
        id: 0,
        name: "v_idx".into(),
        columns: vec![1],
        unique: false,
        kind: IndexKind::Ordered,
    });
    let def = create_table(&mut h, def).unwrap();
    let ix = def.index_by_name("v_idx").unwrap().id;
    for k in 0..7i64 {
        admin_commit(
            &mut h,
            10 + k as u64,
            vec![KeyOp::insert(def.id, vec![Value::Int(k)], vec![(1, Value::Int(100 + k * 10))])],
        )
        .unwrap();
    }
    (h, def.id, ix)
}

fn scan(h: &mut Host, table: TableId, ix: IndexId, desc: bool, batch: u32, low: Bound, high: Bound) -> Vec<i64> {
    let mut spec = ScanSpec::full(table);
    spec.index = Some(ix);
    spec.range = Some(ScanRange { low, high });
    spec.descending = desc;
    spec.batch_rows = batch;
    spec.projection = vec![1];
    let mut sig = Signal::ScanTabReq(Box::new(ScanTabReq { txn: 0, scan_id: 1, standalone: true, spec }));
    let mut out = Vec::new();
    loop {
        match h.admin_request(sig, &mut NoObserver).unwrap() {
            Signal::ScanTabConf(c) => {
                out.extend(c.rows.iter().map(|r| r[0].as_i64().unwrap()));
                if c.done {
                    return out;
                }
            }
            other => panic!("{other:?}"),
        }
        sig = Signal::ScanNextReq(ScanNextReq { txn: 0, scan_id: 1, close: false });
    }
}

#[test]
fn ordered_index_scans_all_directions_and_batches() {
    for parts in [1, 3] {
        let (mut h, t, ix) = host(parts);
        let all: Vec<i64> = (0..7).map(|k| 100 + k * 10).collect();
        for batch in [1, 2, 3, 100] {
            let asc = scan(&mut h, t, ix, false, batch, Bound::unbounded(), Bound::unbounded());
            assert_eq!(asc, all, "ascending, {parts} partitions, batch {batch}");
            let desc = scan(&mut h, t, ix, true, batch, Bound::unbounded(), Bound::unbounded());
            let mut rev = all.clone();
            rev.reverse();
            assert_eq!(desc, rev, "descending, {parts} partitions, batch {batch}");
            let d2 = scan(
                &mut h,
                t,
                ix,
                true,
                batch,
                Bound::inclusive(vec![Value::Int(120)]),
                Bound::exclusive(vec![Value::Int(150)]),
            );
            assert_eq!(d2, vec![140, 130, 120], "descending [120, 150), {parts} partitions, batch {batch}");
        }
    }
}

/// Open a scan, take one batch, run `between`, then read the rest.
fn scan_with_change(
    h: &mut Host,
    table: TableId,
    ix: IndexId,
    desc: bool,
    batch: u32,
    between: impl FnOnce(&mut Host),
) -> Vec<i64> {
    let mut spec = ScanSpec::full(table);
    spec.index = Some(ix);
    spec.range = Some(ScanRange { low: Bound::unbounded(), high: Bound::unbounded() });
    spec.descending = desc;
    spec.batch_rows = batch;
    spec.projection = vec![1];
    let mut sig = Signal::ScanTabReq(Box::new(ScanTabReq { txn: 0, scan_id: 2, standalone: true, spec }));
    let mut out = Vec::new();
    let mut between = Some(between);
    loop {
        match h.admin_request(sig, &mut NoObserver).unwrap() {
            Signal::ScanTabConf(c) => {
                out.extend(c.rows.iter().map(|r| r[0].as_i64().unwrap()));
                if c.done {
                    return out;
                }
            }
            other => panic!("{other:?}"),
        }
        if let Some(f) = between.take() {
            f(h);
        }
        sig = Signal::ScanNextReq(ScanNextReq { txn: 0, scan_id: 2, close: false });
    }
}

/// The row a scan stopped at changes (moves in the index or goes away)
/// before the next batch: the scan must go on with the rows after it.
#[test]
fn index_scan_resumes_after_its_last_row_changed() {
    for desc in [false, true] {
        for change in ["update", "delete"] {
            let (mut h, t, ix) = host(1);
            // Ascending stops at 110 (key 1), descending at 150 (key 5).
            let last_key = if desc { 5 } else { 1 };
            let got = scan_with_change(&mut h, t, ix, desc, 2, |h| {
                let op = if change == "update" {
                    KeyOp::update(t, vec![Value::Int(last_key)], vec![(1, Value::Int(if desc { 1 } else { 999 }))])
                } else {
                    KeyOp::delete(t, vec![Value::Int(last_key)])
                };
                admin_commit(h, 99, vec![op]).unwrap();
            });
            let want: Vec<i64> =
                if desc { vec![160, 150, 140, 130, 120, 110, 100] } else { vec![100, 110, 120, 130, 140, 150, 160] };
            // The moved row may or may not be met again at its new place.
            let got_core: Vec<i64> = got.iter().copied().filter(|v| *v != 1 && *v != 999).collect();
            assert_eq!(got_core, want, "desc={desc} {change}: got {got:?}");
        }
    }
}

/// Any one row changes between two batches, several partitions, several batch
/// sizes: every row that did not change is returned, in order.
#[test]
fn index_scan_survives_any_single_change() {
    let mut failures = Vec::new();
    for parts in [1, 2, 3] {
        for desc in [false, true] {
            for batch in [1, 2, 3] {
                for key in 0..7i64 {
                    for change in 0..3 {
                        let (mut h, t, ix) = host(parts);
                        let got = scan_with_change(&mut h, t, ix, desc, batch, |h| {
                            let op = match change {
                                0 => KeyOp::update(t, vec![Value::Int(key)], vec![(1, Value::Int(1))]),
                                1 => KeyOp::update(t, vec![Value::Int(key)], vec![(1, Value::Int(999))]),
                                _ => KeyOp::delete(t, vec![Value::Int(key)]),
                            };
                            admin_commit(h, 99, vec![op]).unwrap();
                        });
                        let changed = 100 + key * 10;
                        let mut want: Vec<i64> = (0..7).map(|k| 100 + k * 10).filter(|v| *v != changed).collect();
                        if desc {
                            want.reverse();
                        }
                        let core: Vec<i64> =
                            got.iter().copied().filter(|v| *v != 1 && *v != 999 && *v != changed).collect();
                        if core != want {
                            failures.push(format!(
                                "parts={parts} desc={desc} batch={batch} key={key} change={change}: got {got:?}"
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} cases lose rows:\n{}", failures.len(), failures.join("\n"));
}
