//! The bench report: text and JSON.

use super::{BenchArgs, MemoryFigures, OpMix, ThreadStats};
use hdrhistogram::Histogram;
use std::fmt::Write;
use std::time::Duration;

/// Latency percentiles of batch round trips, in microseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    pub batches: u64,
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        Latency {
            batches: h.len(),
            p50_us: h.value_at_quantile(0.50),
            p95_us: h.value_at_quantile(0.95),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            mean_us: h.mean(),
        }
    }
    fn json(&self) -> String {
        format!(
            "{{\"batches\":{},\"p50_us\":{},\"p95_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{},\"mean_us\":{:.1}}}",
            self.batches, self.p50_us, self.p95_us, self.p99_us, self.p999_us, self.max_us, self.mean_us
        )
    }
}

#[derive(Debug, Clone, Default)]
pub struct BenchReport {
    pub addr: String,
    pub threads: usize,
    pub inflight: usize,
    pub batch: usize,
    pub record_size: usize,
    pub keys: u64,
    pub mix: String,
    pub duration_s: f64,
    pub ops: u64,
    pub ops_per_s: f64,
    pub batches_per_s: f64,
    pub latency: Latency,
    /// Per kind with any batches: (name, ops/s, latency).
    pub per_kind: Vec<(String, f64, Latency)>,
    pub op_misses: u64,
    pub temporary_errors: u64,
    pub permanent_errors: u64,
    pub first_error: Option<String>,
    pub memory: Option<MemoryFigures>,
}

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

impl BenchReport {
    pub(crate) fn new(args: &BenchArgs, memory: Option<MemoryFigures>) -> BenchReport {
        let mix = OpMix::ALL
            .iter()
            .filter(|k| args.mix.weights[**k as usize] > 0)
            .map(|k| format!("{}={}", k.name(), args.mix.weights[*k as usize]))
            .collect::<Vec<_>>()
            .join(",");
        BenchReport {
            addr: args.addr.clone(),
            threads: args.threads,
            inflight: args.inflight,
            batch: args.batch,
            record_size: args.record_size,
            keys: args.keys,
            mix,
            memory,
            ..Default::default()
        }
    }

    pub(crate) fn finish(&mut self, st: &ThreadStats, duration: Duration) {
        let secs = duration.as_secs_f64();
        self.duration_s = secs;
        self.ops = st.ops.iter().sum();
        self.ops_per_s = self.ops as f64 / secs;
        self.batches_per_s = st.batches.iter().sum::<u64>() as f64 / secs;
        self.latency = Latency::of(&st.all);
        for k in OpMix::ALL {
            let i = k as usize;
            if st.batches[i] > 0 {
                self.per_kind.push((k.name().to_string(), st.ops[i] as f64 / secs, Latency::of(&st.hist[i])));
            }
        }
        self.op_misses = st.op_misses;
        self.temporary_errors = st.temporary_errors;
        self.permanent_errors = st.permanent_errors;
        self.first_error = st.first_error.clone();
    }

    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "norr bench: {} threads x {} in flight, batch {}, record {} B, {} keys, mix {}, {:.1}s",
            self.threads, self.inflight, self.batch, self.record_size, self.keys, self.mix, self.duration_s
        );
        if let Some(m) = &self.memory {
            let _ = writeln!(
                o,
                "load: {} rows; node memory used {} -> {} bytes; overhead per row: {}",
                m.rows_loaded,
                m.used_before_bytes,
                m.used_after_bytes,
                m.overhead_per_row_bytes().map_or("n/a".to_string(), |b| format!("{b:.1} bytes"))
            );
        }
        if self.duration_s > 0.0 {
            let l = &self.latency;
            let _ = writeln!(o, "throughput: {:.0} ops/s ({:.0} batches/s)", self.ops_per_s, self.batches_per_s);
            let _ = writeln!(
                o,
                "latency per batch (us): p50 {} p95 {} p99 {} p99.9 {} max {} mean {:.1}",
                l.p50_us, l.p95_us, l.p99_us, l.p999_us, l.max_us, l.mean_us
            );
            if self.per_kind.len() > 1 {
                for (k, ops, l) in &self.per_kind {
                    let _ = writeln!(
                        o,
                        "  {k:<6} {ops:>12.0} ops/s  p50 {} p99 {} p99.9 {} us",
                        l.p50_us, l.p99_us, l.p999_us
                    );
                }
            }
            let _ = writeln!(
                o,
                "errors: {} temporary, {} permanent, {} per-operation misses{}",
                self.temporary_errors,
                self.permanent_errors,
                self.op_misses,
                self.first_error.as_deref().map_or(String::new(), |e| format!(" (first: {e})"))
            );
        }
        o
    }

    pub fn to_json(&self) -> String {
        let mut o = String::from("{");
        let _ = write!(
            o,
            "\"addr\":{},\"threads\":{},\"inflight\":{},\"batch\":{},\"record_size\":{},\"keys\":{},\"mix\":{},",
            json_str(&self.addr),
            self.threads,
            self.inflight,
            self.batch,
            self.record_size,
            self.keys,
            json_str(&self.mix)
        );
        let _ = write!(
            o,
            "\"duration_s\":{:.3},\"ops\":{},\"ops_per_s\":{:.1},\"batches_per_s\":{:.1},\"latency\":{},",
            self.duration_s,
            self.ops,
            self.ops_per_s,
            self.batches_per_s,
            self.latency.json()
        );
        o.push_str("\"per_kind\":{");
        for (i, (k, ops, l)) in self.per_kind.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            let _ = write!(o, "{}:{{\"ops_per_s\":{:.1},\"latency\":{}}}", json_str(k), ops, l.json());
        }
        let _ = write!(
            o,
            "}},\"op_misses\":{},\"temporary_errors\":{},\"permanent_errors\":{},\"first_error\":{},",
            self.op_misses,
            self.temporary_errors,
            self.permanent_errors,
            self.first_error.as_deref().map_or("null".to_string(), json_str)
        );
        match &self.memory {
            Some(m) => {
                let _ = write!(
                    o,
                    "\"memory\":{{\"rows_loaded\":{},\"used_before_bytes\":{},\"used_after_bytes\":{},\"payload_bytes\":{},\"overhead_per_row_bytes\":{}}}",
                    m.rows_loaded,
                    m.used_before_bytes,
                    m.used_after_bytes,
                    m.payload_bytes,
                    m.overhead_per_row_bytes().map_or("null".to_string(), |b| format!("{b:.1}"))
                );
            }
            None => o.push_str("\"memory\":null"),
        }
        o.push('}');
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn json_escapes() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
