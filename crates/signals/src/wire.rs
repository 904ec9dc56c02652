//! Wire codec for signals crossing the network: a message is one signal with its
//! sender, receiver and priority, serialized with postcard. Framing (length,
//! checksum, size limit) is the transport's job; this layer only turns a frame
//! payload into a message and rejects anything malformed. TC_KEYREQ and
//! TC_KEYCONF, sent for every key-access batch, take a hand-written path
//! (`fast`) that produces and accepts exactly postcard's bytes.

mod fast;
#[cfg(test)]
mod fuzz;

use crate::{Envelope, Signal};
use norr_kernel::{BlockRef, Priority};
use serde::{Deserialize, Serialize};

/// Version of the message encoding; a peer with another version is refused at
/// connect time. 2: SCAN_TABCONF rows travel in `row_codec`'s layout.
/// 3: `ScanSpec::ordered` and `LqhScanReq::row_keys`.
/// 4: TC_SAVEPOINTREQ and `DictOp::AlterTable`.
/// 5: `DictOp::AlterTable::expect_version`.
/// 6: `KeyOp::wait`, `ScanSpec::wait`, `LqhScanReq::wait` (NOWAIT / SKIP
///    LOCKED) and `ErrorCode::LockNoWait`.
/// 7: data-node-to-data-node signals (`Signal::Cluster`, `Ckpt`, replication
///    in `InternalSignal`), `TcKeyConf::gci`, `TC_KEY_FAILCONF`,
///    `TableDef::options`.
/// 8: node restart delta copies: `CopyFragReq::since_gci`, `CopyRows`
///    first / last / GCIs / keys (rows and keys in `row_codec`'s layout),
///    `CopyRowsConf` and `CopyFragConf` figures, `DihStartReq` restored GCI
///    and kept tables.
/// 9: system restarts that roll nodes forward: `GcpStateConf::reachable`,
///    `GcpRestartGciReq`; `GcpRecordedRep`, `GcpFilesCompleteRep`;
///    `ClusterSignal::ServeLeaseRep`.
/// 10: `ClusterSignal::DictLeaveReq` (and the local-only
///    `DurabilityLostRep`, `ServeLeaseRevokedRep` before it).
/// 11: `LockWait::WaitMs` (a per-operation lock-wait time).
/// 12: `SchemaChange::TruncateTable` carries the table's new definition (a
///    TRUNCATE raises the table version); the local-only
///    `ClusterSignal::SystemRestartRep`; multi-range scans:
///    `ScanSpec::ranges`, `LqhScanReq::ranges`.
/// 13: pushed aggregates: `ScanSpec::aggregate`, `LqhScanReq::aggregate`
///    and the error codes `BadAggregate`, `AggregateTooManyGroups`,
///    `AggregateOverflow`.
pub const WIRE_VERSION: u16 = 13;

#[derive(Debug, Serialize, Deserialize)]
struct WireMsg<'a> {
    from: BlockRef,
    to: BlockRef,
    prio_a: bool,
    signal: std::borrow::Cow<'a, Signal>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("malformed message: {0}")]
    Malformed(String),
}

/// Append the encoding of `env` to `out`.
pub fn encode_into(env: &Envelope, out: &mut Vec<u8>) {
    if !fast::try_encode(env, out) {
        encode_generic(env, out);
    }
}

/// `encode_into` through serde, for every signal.
fn encode_generic(env: &Envelope, out: &mut Vec<u8>) {
    let msg = WireMsg {
        from: env.from,
        to: env.to,
        prio_a: env.prio == Priority::A,
        signal: std::borrow::Cow::Borrowed(&env.signal),
    };
    // Serialization into a Vec cannot fail for these types.
    let bytes = postcard::to_extend(&msg, std::mem::take(out)).expect("postcard encode to Vec");
    *out = bytes;
}

pub fn encode(env: &Envelope) -> Vec<u8> {
    let mut v = Vec::new();
    encode_into(env, &mut v);
    v
}

/// Decode one message; trailing bytes are an error.
pub fn decode(bytes: &[u8]) -> Result<Envelope, WireError> {
    if let Some(r) = fast::try_decode(bytes) {
        return r;
    }
    decode_generic(bytes)
}

/// `decode` through serde, for every signal.
fn decode_generic(bytes: &[u8]) -> Result<Envelope, WireError> {
    let (msg, rest): (WireMsg<'static>, &[u8]) =
        postcard::take_from_bytes(bytes).map_err(|e| WireError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(WireError::Malformed(format!("{} trailing bytes", rest.len())));
    }
    Ok(Envelope {
        from: msg.from,
        to: msg.to,
        prio: if msg.prio_a { Priority::A } else { Priority::B },
        signal: msg.signal.into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    #[test]
    fn roundtrip_and_garbage() {
        let env = Envelope {
            from: BlockRef::new(100, block::API, 0),
            to: BlockRef::new(1, block::TC, 0),
            prio: Priority::B,
            signal: Signal::TcKeyReq(Box::new(TcKeyReq {
                txn: 7,
                exec: ExecType::Commit,
                ops: vec![KeyOp::insert(3, vec![Value::Int(1)], vec![(1, Value::str("x"))])],
            })),
        };
        let b = encode(&env);
        let back = decode(&b).unwrap();
        assert_eq!(back.signal, env.signal);
        assert_eq!(back.to, env.to);
        // Every truncation is an error, never a panic.
        for n in 0..b.len() {
            assert!(decode(&b[..n]).is_err());
        }
        // Random garbage never panics.
        let mut x: u64 = 0x9e3779b97f4a7c15;
        for _ in 0..2000 {
            let len = (x % 64) as usize;
            let mut g = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                g.push(x as u8);
            }
            let _ = decode(&g);
        }
    }

    /// `Value::Bytes` is encoded as one byte buffer; for postcard that must be
    /// the same bytes as serde's default sequence of `u8`s (the wire format
    /// did not change when the faster encoding came in).
    #[test]
    fn bytes_values_keep_the_sequence_encoding() {
        for len in [0usize, 3, 127, 128, 300, 70_000] {
            let b: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let as_value = postcard::to_stdvec(&Value::Bytes(b.clone())).unwrap();
            let as_seq = postcard::to_stdvec(&b.iter().copied().collect::<std::collections::VecDeque<u8>>()).unwrap();
            assert_eq!(as_value[0], 6, "variant index of Bytes");
            assert_eq!(&as_value[1..], &as_seq[..], "len {len}");
            let back: Value = postcard::from_bytes(&as_value).unwrap();
            assert_eq!(back, Value::Bytes(b));
        }
    }
}
