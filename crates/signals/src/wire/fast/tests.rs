use super::*;
use crate::wire::{decode_generic, encode_generic};
use crate::*;

/// postcard's bytes for `e`: what the fast paths must match.
fn generic(e: &Envelope) -> Vec<u8> {
    let mut out = Vec::new();
    encode_generic(e, &mut out);
    out
}

/// The fast encoder's bytes for `e`, or None if it declines. It must append
/// to what the buffer holds, and write nothing when it declines.
fn fast_bytes(e: &Envelope) -> Option<Vec<u8>> {
    let mut out = vec![0xAA];
    if !try_encode(e, &mut out) {
        assert_eq!(out, [0xAA], "declined after writing");
        return None;
    }
    assert_eq!(out[0], 0xAA, "overwrote the buffer");
    Some(out.split_off(1))
}

fn env(ops: Vec<KeyOp>, exec: ExecType) -> Envelope {
    Envelope {
        from: BlockRef::new(300, block::API, 0),
        to: BlockRef::new(1, block::TC, 3),
        prio: Priority::B,
        signal: Signal::TcKeyReq(Box::new(TcKeyReq { txn: u64::MAX - 5, exec, ops })),
    }
}

fn conf(results: Vec<OpResult>, outcome: TxnOutcome, txn: u64, prio: Priority) -> Envelope {
    Envelope {
        from: BlockRef::new(1, block::TC, 1),
        to: BlockRef::new(u16::MAX, block::API, 0),
        prio,
        signal: Signal::TcKeyConf(Box::new(TcKeyConf { txn, outcome, results, gci: txn.wrapping_mul(3) })),
    }
}

/// Every variant of everything a TC_KEYREQ carries, at awkward sizes.
fn every_kind_of_op() -> Vec<KeyOp> {
    let dt =
        DateTime { date: Date { year: 2026, month: 11, day: 23 }, hour: 23, minute: 59, second: 58, micro: 999_999 };
    let all_values = vec![
        Value::Null,
        Value::Int(i64::MIN),
        Value::Int(-1),
        Value::Int(i64::MAX),
        Value::UInt(u64::MAX),
        Value::UInt(0),
        Value::Float(-1.5),
        Value::Double(f64::MAX),
        Value::Decimal(Decimal { mantissa: i128::MIN, scale: 38 }),
        Value::Decimal(Decimal { mantissa: i128::MAX, scale: 0 }),
        Value::Decimal(Decimal { mantissa: -12345, scale: 2 }),
        Value::Bytes(Vec::new()),
        Value::Bytes((0..300).map(|i| i as u8).collect()),
        Value::Date(Date { year: u16::MAX, month: 255, day: 0 }),
        Value::Time(-86_400_000_000),
        Value::DateTime(dt),
    ];
    let mut ops = vec![KeyOp::read(7, vec![Value::Int(42)])];
    let mut w = KeyOp::write(
        u32::MAX,
        all_values.clone(),
        all_values.iter().cloned().enumerate().map(|(i, v)| (i as u16 * 1000, v)).collect(),
    );
    w.increments = vec![(3, Value::Int(-7)), (u16::MAX, Value::Double(0.5))];
    w.partition = Some(u32::MAX);
    w.table_version = 1 << 20;
    w.abort_on_error = false;
    ops.push(w);
    let mut u = KeyOp::update(1, vec![], vec![]);
    u.key = KeyAccess::Unique { index: 300, values: all_values };
    u.lock = LockMode::Shared;
    u.wait = LockWait::NoWait;
    u.projection = vec![0, 127, 128, u16::MAX];
    ops.push(u);
    ops.push(KeyOp::insert(2, vec![Value::str("k")], vec![(1, Value::Null)]));
    let mut r = KeyOp::read(4, vec![Value::Int(-3)]);
    r.lock = LockMode::Exclusive;
    r.wait = LockWait::SkipLocked;
    ops.push(r);
    let mut d = KeyOp::delete(3, vec![Value::UInt(9)]);
    d.partition = Some(0);
    ops.push(d);
    ops
}

/// 300 operations cycling through `every_kind_of_op`: the operation count
/// and table ids take multi-byte varints.
fn many_ops() -> Vec<KeyOp> {
    let kinds = every_kind_of_op();
    (0..300)
        .map(|i| {
            let mut op = kinds[i % kinds.len()].clone();
            op.table = (i as u32).wrapping_mul(1_000_003);
            op.abort_on_error = i % 2 == 0;
            op
        })
        .collect()
}

/// Rows holding every kind of value (the keys of `every_kind_of_op`), a
/// write acknowledgement and an empty row.
fn every_kind_of_result() -> Vec<OpResult> {
    let rows = every_kind_of_op().into_iter().map(|op| match op.key {
        KeyAccess::Primary(v) | KeyAccess::Unique { values: v, .. } => OpResult::Ok(Some(v)),
    });
    let mut all: Vec<OpResult> = rows.collect();
    all.push(OpResult::Ok(None));
    all.push(OpResult::Ok(Some(Vec::new())));
    all
}

fn an_error() -> OpResult {
    OpResult::Err(NodeError::new(ErrorCode::NoSuchRow))
}

/// Both decoded to the same message (compared by encoding: a damaged
/// float may be a NaN), or both refused.
fn same(a: &Result<Envelope, WireError>, b: &Result<Envelope, WireError>) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x.prio == y.prio && generic(x) == generic(y),
        (Err(_), Err(_)) => true,
        _ => false,
    }
}

/// The fast decoder's answer for `b`, or the generic one's if it declines.
fn fast(b: &[u8]) -> Result<Envelope, WireError> {
    try_decode(b).unwrap_or_else(|| decode_generic(b))
}

#[test]
fn decodes_key_reqs() {
    for exec in [ExecType::NoCommit, ExecType::Commit, ExecType::Rollback] {
        for ops in [Vec::new(), vec![KeyOp::read(1, vec![Value::Int(1)])], every_kind_of_op(), many_ops()] {
            let e = env(ops, exec);
            let got = try_decode(&generic(&e)).expect("a TC_KEYREQ").expect("decodes");
            assert_eq!(got.signal, e.signal);
            assert_eq!((got.from, got.to, got.prio), (e.from, e.to, e.prio));
        }
    }
    let mut a = env(vec![], ExecType::Commit);
    a.prio = Priority::A;
    assert_eq!(try_decode(&generic(&a)).unwrap().unwrap().prio, Priority::A);
}

#[test]
fn decodes_key_confs() {
    let many: Vec<OpResult> = every_kind_of_result().into_iter().cycle().take(300).collect();
    for outcome in [TxnOutcome::Open, TxnOutcome::Committed, TxnOutcome::RolledBack] {
        for results in [Vec::new(), vec![OpResult::Ok(None)], every_kind_of_result(), many.clone()] {
            for (prio, txn) in [(Priority::A, 0), (Priority::B, u64::MAX)] {
                let e = conf(results.clone(), outcome, txn, prio);
                let got = try_decode(&generic(&e)).expect("a TC_KEYCONF").expect("decodes");
                assert_eq!(got.signal, e.signal);
                assert_eq!((got.from, got.to, got.prio), (e.from, e.to, e.prio));
            }
        }
    }
}

/// Other signals, and answers carrying an error, go to the generic decoder.
#[test]
fn others_go_to_the_generic_decoder() {
    let e = Envelope {
        from: BlockRef::new(300, block::API, 0),
        to: BlockRef::new(1, block::TC, 0),
        prio: Priority::B,
        signal: Signal::ScanNextReq(ScanNextReq { txn: 1, scan_id: 2, close: false }),
    };
    assert!(try_decode(&generic(&e)).is_none());
    for results in [vec![an_error()], vec![OpResult::Ok(None), an_error(), OpResult::Ok(Some(vec![Value::Int(1)]))]] {
        let e = conf(results, TxnOutcome::Open, 9, Priority::B);
        let b = generic(&e);
        assert!(try_decode(&b).is_none());
        assert_eq!(crate::wire::decode(&b).unwrap().signal, e.signal);
    }
}

/// Truncations, every single-byte change and trailing bytes of `b`: the fast
/// decoder agrees with postcard (both accept with the same value, or both
/// refuse), and never panics.
fn agrees_with_postcard_on_damage_to(b: &[u8]) {
    for n in 0..b.len() {
        assert!(fast(&b[..n]).is_err(), "truncated to {n} bytes");
        assert!(same(&fast(&b[..n]), &decode_generic(&b[..n])));
    }
    let mut longer = b.to_vec();
    longer.push(0);
    assert!(fast(&longer).is_err(), "trailing byte");
    let mut m = b.to_vec();
    for i in 0..b.len() {
        for x in [0x00, 0x01, 0x02, 0x03, 0x7f, 0x80, 0xff, b[i] ^ 0x80, b[i].wrapping_add(1)] {
            m[i] = x;
            assert!(same(&fast(&m), &decode_generic(&m)), "byte {i} set to {x:#x}");
        }
        m[i] = b[i];
    }
}

/// A wait policy this version does not know is refused by both decoders.
#[test]
fn unknown_lock_wait_is_refused() {
    let mut r = KeyOp::read(5, vec![Value::Int(1)]);
    r.lock = LockMode::Shared;
    r.wait = LockWait::SkipLocked;
    let mut b = generic(&env(vec![r], ExecType::NoCommit));
    // The op: table 5, version 0, kind Read (0), lock Shared (1), wait 2.
    let at = b.windows(5).position(|w| w == [5, 0, 0, 1, 2]).expect("the op's head") + 4;
    for x in [3u8, 0x7f] {
        b[at] = x;
        assert!(fast(&b).is_err(), "wait {x}");
        assert!(decode_generic(&b).is_err(), "wait {x}");
    }
}

#[test]
fn key_req_agrees_with_postcard_on_damaged_frames() {
    agrees_with_postcard_on_damage_to(&generic(&env(every_kind_of_op(), ExecType::Commit)));
}

#[test]
fn key_conf_agrees_with_postcard_on_damaged_frames() {
    let rows = every_kind_of_result();
    agrees_with_postcard_on_damage_to(&generic(&conf(rows, TxnOutcome::Committed, 1 << 40, Priority::B)));
    // With an error result: damage may turn it into a row, or a row into one.
    let mixed = vec![OpResult::Ok(Some(vec![Value::UInt(7), Value::str("ab")])), an_error(), OpResult::Ok(None)];
    agrees_with_postcard_on_damage_to(&generic(&conf(mixed, TxnOutcome::Open, 3, Priority::A)));
}

/// The fast TC_KEYREQ encoder writes postcard's bytes exactly.
#[test]
fn key_req_encoding_is_postcards() {
    for exec in [ExecType::NoCommit, ExecType::Commit, ExecType::Rollback] {
        for ops in [Vec::new(), vec![KeyOp::read(1, vec![Value::Int(1)])], every_kind_of_op(), many_ops()] {
            for (prio, txn) in [(Priority::A, 0), (Priority::B, 127), (Priority::B, 128), (Priority::B, u64::MAX)] {
                let mut e = env(ops.clone(), exec);
                e.prio = prio;
                let Signal::TcKeyReq(req) = &mut e.signal else { unreachable!() };
                req.txn = txn;
                let fast = fast_bytes(&e).expect("a TC_KEYREQ is always encoded by hand");
                assert_eq!(fast, generic(&e), "{exec:?} {} ops, txn {txn}", ops.len());
            }
        }
    }
    // Every sender and receiver id width.
    for id in [0, 127, 128, 16_383, 16_384, u16::MAX] {
        let mut e = env(vec![KeyOp::delete(id as u32, vec![Value::Null])], ExecType::Commit);
        e.from = BlockRef::new(id, block::API, id);
        e.to = BlockRef::new(id, block::TC, id);
        assert_eq!(fast_bytes(&e).unwrap(), generic(&e), "id {id}");
    }
}

/// The fast TC_KEYCONF encoder writes postcard's bytes exactly.
#[test]
fn key_conf_encoding_is_postcards() {
    let many: Vec<OpResult> = every_kind_of_result().into_iter().cycle().take(300).collect();
    for outcome in [TxnOutcome::Open, TxnOutcome::Committed, TxnOutcome::RolledBack] {
        for results in [Vec::new(), vec![OpResult::Ok(None)], every_kind_of_result(), many.clone()] {
            for (prio, txn) in [(Priority::A, 0), (Priority::B, u64::MAX)] {
                let e = conf(results.clone(), outcome, txn, prio);
                let fast = fast_bytes(&e).expect("no error results");
                assert_eq!(fast, generic(&e), "{outcome:?} {} results", results.len());
            }
        }
    }
    // An error result (or another signal) is left to the generic encoder.
    let e = conf(vec![OpResult::Ok(None), an_error()], TxnOutcome::Open, 1, Priority::B);
    assert!(fast_bytes(&e).is_none());
    let scan = Envelope { signal: Signal::ScanNextReq(ScanNextReq { txn: 1, scan_id: 2, close: true }), ..e };
    assert!(fast_bytes(&scan).is_none());
}

/// `head` followed by random tails (from `seed`): the fast decoder agrees
/// with postcard and never panics.
fn random_tails_after(head: &[u8], seed: u64) {
    let mut x = seed;
    let mut g = Vec::new();
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        g.clear();
        g.extend_from_slice(head);
        let len = (x % 48) as usize;
        let mut y = x;
        for _ in 0..len {
            y = y.rotate_left(9).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            g.push((y >> 56) as u8);
        }
        assert!(same(&fast(&g), &decode_generic(&g)), "{g:?}");
    }
}

#[test]
fn garbage_and_huge_lengths_are_errors() {
    // A plausible header (TC_KEYREQ to TC) then random bytes.
    let head = generic(&env(vec![], ExecType::Commit));
    assert_eq!(head[8], 0, "the signal variant follows 8 header bytes");
    random_tails_after(&head[..9], 0x2545_f491_4f6c_dd1d);
    // A batch claiming u64::MAX operations, and a value claiming 2^62
    // bytes: refused without reserving memory for them.
    let mut b = generic(&env(vec![], ExecType::Commit));
    b.pop();
    b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    assert!(fast(&b).is_err());
    let mut b = generic(&env(vec![KeyOp::read(1, vec![Value::Bytes(vec![1])])], ExecType::Commit));
    let at = b.iter().rposition(|&v| v == 6).expect("Bytes variant");
    b.truncate(at + 1);
    b.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]);
    assert!(fast(&b).is_err());
}

#[test]
fn key_conf_garbage_and_huge_lengths_are_errors() {
    // The header of a TC_KEYCONF (txn 0, Open, no results, GCI 0: the last
    // four bytes), then random bytes; then also after a valid txn and
    // outcome, and inside a first row.
    let empty = generic(&conf(vec![], TxnOutcome::Open, 0, Priority::B));
    let head = &empty[..empty.len() - 4];
    assert_eq!(head[head.len() - 1], 1, "TC_KEYCONF's variant ends the header");
    random_tails_after(head, 0x9e37_79b9_7f4a_7c15);
    let mut h = head.to_vec();
    h.extend_from_slice(&[5, 1]);
    random_tails_after(&h, 0x1234_5678_9abc_def1);
    h.extend_from_slice(&[1, 0, 1]); // one result: Ok(Some(row))
    random_tails_after(&h, 0x0f0f_1e1e_2d2d_3c3c);
    // An answer claiming u64::MAX results, and a row claiming 2^62 values:
    // refused without reserving memory for them.
    let mut b = head.to_vec();
    b.extend_from_slice(&[0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    assert!(try_decode(&b).expect("a TC_KEYCONF").is_err());
    let mut b = h.clone();
    b.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]);
    assert!(try_decode(&b).expect("a TC_KEYCONF").is_err());
    // A result that is neither Ok nor Err.
    let mut b = head.to_vec();
    b.extend_from_slice(&[0, 0, 1, 2, 0]);
    assert!(try_decode(&b).expect("a TC_KEYCONF").is_err());
    assert!(decode_generic(&b).is_err());
}
