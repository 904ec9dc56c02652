//! Fuzzing of what a data node reads first from a stranger (issue 22):
//! frames (`FrameDecoder`) and the handshake (`decode_hello`), with proptest.
//!
//! * Frames: any byte stream, cut into any pieces, fed through `push` or
//!   `append_target`, gives exactly the frames (and the first error) that a
//!   one-pass reference parser finds in the whole stream; valid frames come
//!   back as they were sent.
//! * Hello: every Hello round-trips; damaged Hellos and random bytes are an
//!   error or a Hello, never a panic.
//! * The checked-in corpus (`corpus/frames/*.bin`: streams of frames,
//!   including bad checksums, oversized lengths and a handshake) is a base for
//!   damage and cutting.
//!
//! Tiers as in `norr_signals::wire`'s suite: 1,000 cases per property in
//! `cargo test -p norr-transport fuzz` (seconds), `NORR_FUZZ_CASES=N` for
//! the long mode (run counts in bench/RESULTS.md); failures are saved under
//! `proptest-regressions/`; `NORR_FUZZ_WRITE_CORPUS=1` writes
//! `corpus_streams()` into the corpus.

use crate::frame::{encode_frame, FrameDecoder, FrameError, FRAME_HEADER_BYTES};
use crate::handshake::{decode_hello, encode_hello, ApiKind, Hello};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::Config;

fn config() -> Config {
    let cases = std::env::var("NORR_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    Config::with_cases(cases)
}

/// Frames of `bytes` as one pass over the whole stream finds them: the
/// complete frames before the first error, and that error (None: the stream
/// ends in an incomplete frame or cleanly).
fn reference(bytes: &[u8], max: usize) -> (Vec<Vec<u8>>, Option<FrameError>) {
    let mut frames = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= FRAME_HEADER_BYTES {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if len > max {
            return (frames, Some(FrameError::TooLarge { len, max }));
        }
        if bytes.len() - at - FRAME_HEADER_BYTES < len {
            break;
        }
        let expected = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
        let payload = &bytes[at + FRAME_HEADER_BYTES..at + FRAME_HEADER_BYTES + len];
        let actual = crc32c::crc32c(payload);
        if actual != expected {
            return (frames, Some(FrameError::BadChecksum { expected, actual }));
        }
        frames.push(payload.to_vec());
        at += FRAME_HEADER_BYTES + len;
    }
    (frames, None)
}

/// Feed `bytes` in pieces of the sizes `cuts` (cycled), through `push` or
/// `append_target` as `via_target` says (cycled), taking frames as they
/// complete, until the first error.
fn incremental(bytes: &[u8], max: usize, cuts: &[usize], via_target: &[bool]) -> (Vec<Vec<u8>>, Option<FrameError>) {
    let mut d = FrameDecoder::new(max);
    let mut frames = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < bytes.len() {
        let n = cuts[i % cuts.len()].clamp(1, bytes.len() - at);
        let piece = &bytes[at..at + n];
        if via_target[i % via_target.len()] {
            d.append_target(n).extend_from_slice(piece);
        } else {
            d.push(piece);
        }
        at += n;
        i += 1;
        loop {
            match d.next_frame() {
                Ok(Some(f)) => {
                    assert!(f.len() <= max, "a frame over the limit came out");
                    frames.push(f.to_vec());
                }
                Ok(None) => break,
                Err(e) => return (frames, Some(e)),
            }
        }
    }
    (frames, None)
}

fn stream_of(payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut w = Vec::new();
    for p in payloads {
        encode_frame(p, &mut w);
    }
    w
}

#[derive(Debug, Clone)]
enum Damage {
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    Cut(usize),
    /// A length field of a huge value at a position.
    HugeLength(usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        3 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Damage::Set(i, b)),
        1 => (any::<usize>(), vec(any::<u8>(), 1..9)).prop_map(|(i, b)| Damage::Insert(i, b)),
        1 => (any::<usize>(), 1usize..9).prop_map(|(i, n)| Damage::Remove(i, n)),
        1 => any::<usize>().prop_map(Damage::Cut),
        1 => any::<usize>().prop_map(Damage::HugeLength),
    ]
}

fn apply(b: &mut Vec<u8>, d: &Damage) {
    let pos = |i: usize, b: &Vec<u8>, extra: usize| if b.is_empty() { 0 } else { i % (b.len() + extra) };
    match d {
        Damage::Set(i, x) if !b.is_empty() => {
            let i = pos(*i, b, 0);
            b[i] = *x;
        }
        Damage::Insert(i, x) => {
            let i = pos(*i, b, 1);
            b.splice(i..i, x.iter().copied());
        }
        Damage::Remove(i, n) if !b.is_empty() => {
            let i = pos(*i, b, 0);
            let end = (i + n).min(b.len());
            b.drain(i..end);
        }
        Damage::Cut(i) => b.truncate(pos(*i, b, 1)),
        Damage::HugeLength(i) => {
            let i = pos(*i, b, 1);
            b.splice(i..i, u32::MAX.to_le_bytes());
        }
        _ => {}
    }
}

fn corpus_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/frames")
}

fn corpus() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir())
        .expect("corpus/frames exists")
        .map(|e| e.expect("corpus entry").path())
        // Names first: a `.tmp` file being written by `write_corpus_when_asked`
        // (run in parallel with this) is never read.
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .map(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).expect("file name").to_string();
            (name, std::fs::read(&p).expect("corpus file reads"))
        })
        .collect();
    out.sort();
    out
}

/// Largest frame the corpus streams are judged with.
const CORPUS_MAX_FRAME: usize = 4096;

/// What `NORR_FUZZ_WRITE_CORPUS=1` writes into `corpus/frames`: streams of
/// frames as a connection would carry them.
fn corpus_streams() -> Vec<(&'static str, Vec<u8>)> {
    let hello = |kind| encode_hello(&Hello::new("norr-client 0.1.0", kind));
    let mut bad_crc = stream_of(&[b"first".to_vec(), b"second".to_vec()]);
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0x40;
    let mut too_large = stream_of(&[b"ok".to_vec()]);
    too_large.extend_from_slice(&((CORPUS_MAX_FRAME as u32) + 1).to_le_bytes());
    too_large.extend_from_slice(&[0; 12]);
    let mut cut = stream_of(&[vec![7; 100], vec![8; 100]]);
    cut.truncate(150);
    vec![
        ("ok-empty-and-small-frames.bin", stream_of(&[vec![], b"a".to_vec(), vec![0; 9], (0..=255u8).collect()])),
        ("ok-hello-native-then-frames.bin", stream_of(&[hello(ApiKind::NativeClient), vec![1, 2, 3]])),
        ("ok-hello-sql-node.bin", stream_of(&[hello(ApiKind::SqlNode)])),
        ("ok-largest-frame.bin", stream_of(&[vec![0x5a; CORPUS_MAX_FRAME]])),
        ("ok-stream-cut-mid-frame.bin", cut),
        ("bad-checksum-second-frame.bin", bad_crc),
        ("bad-length-over-limit.bin", too_large),
        ("bad-length-u32-max.bin", u32::MAX.to_le_bytes().iter().chain(&[0u8; 8]).copied().collect()),
    ]
}

#[test]
fn write_corpus_when_asked() {
    if std::env::var_os("NORR_FUZZ_WRITE_CORPUS").is_none() {
        return;
    }
    std::fs::create_dir_all(corpus_dir()).unwrap();
    for (name, bytes) in corpus_streams() {
        // Written aside and renamed: the corpus tests running beside this
        // one never read a half-written file.
        let tmp = corpus_dir().join(format!("{name}.tmp"));
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, corpus_dir().join(name)).unwrap();
    }
}

/// `ok-*` streams hold no error (maybe a cut-off last frame), `bad-*` ones end
/// in one; the incremental decoder agrees with the reference on each.
#[test]
fn corpus_streams_decode_as_named() {
    let files = corpus();
    assert!(files.len() >= 8, "corpus/frames has {} files", files.len());
    for (name, bytes) in &files {
        let want = reference(bytes, CORPUS_MAX_FRAME);
        assert_eq!(want.1.is_none(), name.starts_with("ok-"), "{name}: {want:?}");
        for cut in [1, 3, 8, 9, 64, 4096] {
            assert_eq!(incremental(bytes, CORPUS_MAX_FRAME, &[cut], &[false, true]), want, "{name}, pieces of {cut}");
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// Valid frames come back as sent, however the stream is cut.
    #[test]
    fn frames_survive_any_cutting(
        payloads in vec(vec(any::<u8>(), 0..300), 0..16),
        cuts in vec(1usize..700, 1..16),
        via_target in vec(any::<bool>(), 1..4),
    ) {
        let bytes = stream_of(&payloads);
        prop_assert_eq!(incremental(&bytes, 300, &cuts, &via_target), (payloads, None));
    }

    /// Damaged streams: the incremental decoder finds what one pass over the
    /// whole stream finds (frames, then the first error), never panics, and
    /// never hands out a frame over the limit.
    #[test]
    fn damaged_streams_decode_like_one_pass(
        payloads in vec(vec(any::<u8>(), 0..200), 0..8),
        ds in vec(damage(), 1..5),
        max in 16usize..400,
        cuts in vec(1usize..500, 1..8),
        via_target in vec(any::<bool>(), 1..4),
    ) {
        let mut bytes = stream_of(&payloads);
        for d in &ds {
            apply(&mut bytes, d);
        }
        prop_assert_eq!(incremental(&bytes, max, &cuts, &via_target), reference(&bytes, max));
    }

    /// The corpus, damaged and cut.
    #[test]
    fn damaged_corpus_streams_decode_like_one_pass(
        pick in any::<prop::sample::Index>(),
        ds in vec(damage(), 0..5),
        cuts in vec(1usize..500, 1..8),
        via_target in vec(any::<bool>(), 1..4),
    ) {
        let files = corpus();
        let mut bytes = files[pick.index(files.len())].1.clone();
        for d in &ds {
            apply(&mut bytes, d);
        }
        let max = CORPUS_MAX_FRAME;
        prop_assert_eq!(incremental(&bytes, max, &cuts, &via_target), reference(&bytes, max));
    }

    /// Random bytes as a stream.
    #[test]
    fn random_streams_decode_like_one_pass(bytes in vec(any::<u8>(), 0..256), max in 0usize..64, cuts in vec(1usize..64, 1..8)) {
        prop_assert_eq!(incremental(&bytes, max, &cuts, &[false, true]), reference(&bytes, max));
    }

    /// Every Hello round-trips.
    #[test]
    fn hellos_round_trip(
        magic in prop_oneof![Just(crate::handshake::MAGIC), any::<u32>()],
        wire_version in any::<u16>(),
        name in vec(any::<char>(), 0..24),
        kind in prop::sample::select(vec![ApiKind::NativeClient, ApiKind::SqlNode, ApiKind::Management]),
        requested_api_node in prop::option::of(any::<u16>()),
    ) {
        let h = Hello { magic, wire_version, client_name: name.into_iter().collect(), kind, requested_api_node };
        let back = decode_hello(&encode_hello(&h));
        if magic == crate::handshake::MAGIC {
            prop_assert_eq!(back, Ok(h));
        } else {
            prop_assert!(back.is_err());
        }
    }

    /// Damaged Hellos and random bytes: an error or a Hello with our magic.
    #[test]
    fn damaged_hellos_never_panic(
        name in vec(any::<char>(), 0..24),
        ds in vec(damage(), 0..4),
        random in vec(any::<u8>(), 0..64),
    ) {
        let mut b = encode_hello(&Hello::new(name.into_iter().collect::<String>(), ApiKind::SqlNode));
        for d in &ds {
            apply(&mut b, d);
        }
        for input in [&b, &random] {
            if let Ok(h) = decode_hello(input) {
                prop_assert_eq!(h.magic, crate::handshake::MAGIC);
            }
        }
    }
    /// Damaged auth responses and random bytes: an error, or a response
    /// with our magic and nothing after it (which then fails to verify
    /// unless it is the original).
    #[test]
    fn damaged_auth_responses_never_panic(
        ds in vec(damage(), 0..4),
        random in vec(any::<u8>(), 0..300),
    ) {
        use crate::auth;
        let secret = auth::ClusterSecret::new(&"s".repeat(40)).unwrap();
        let ctx = auth::api_context(1, &Hello::new("f", ApiKind::NativeClient));
        let nonce = [3u8; auth::NONCE_BYTES];
        let good = auth::respond(&secret, &nonce, &ctx).unwrap();
        let mut b = auth::encode_auth_response(&good);
        for d in &ds {
            apply(&mut b, d);
        }
        for input in [&b, &random] {
            if let Ok(r) = auth::decode_auth_response(input) {
                prop_assert_eq!(r.magic, auth::AUTH_MAGIC);
                prop_assert_eq!(auth::verify(&secret, &nonce, &ctx, &r), r == good);
            }
        }
    }
}
