//! Command-line arguments of `norr bench`.

use anyhow::{bail, Context};
use std::time::Duration;

/// `norr bench`: native-API load generator (flexAsynch style).
///
/// Each thread opens its own connection and keeps `--inflight` transactions in
/// flight; each transaction is one batch of `--batch` primary-key operations
/// committed in one round trip.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Data node address (host:port). Several, comma separated: every data
    /// node of a cluster; each connection then reaches all of them, and a
    /// transaction starts on the node of its first operation's primary
    /// replica (the run waits until every node is connected).
    #[arg(long, default_value = "127.0.0.1:2202")]
    pub addr: String,
    /// Client threads; each owns one connection.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Transactions in flight per thread.
    #[arg(long, default_value_t = 8)]
    pub inflight: usize,
    /// Operations per batch (one round trip each).
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Bytes of the value column of each row.
    #[arg(long = "record-size", default_value_t = 100)]
    pub record_size: usize,
    /// Number of keys (rows loaded with --load). Reads, updates and deletes pick keys
    /// uniformly below it; each in-flight transaction owns a disjoint share (no lock conflicts).
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// Operation mix by weight, e.g. `read=80,update=20` (kinds: read, insert, update, delete).
    #[arg(long, default_value = "read=100", value_parser = Mix::parse)]
    pub mix: Mix,
    /// Measured run time (e.g. 10s, 500ms, 2m); 0 = load only.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Unmeasured run time before the measurement starts.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Table to use (columns: k BIGINT primary key, v VARBINARY(record-size)).
    #[arg(long, default_value = "norr_bench")]
    pub table: String,
    /// Drop, create and load the table first (also measures memory per row).
    #[arg(long)]
    pub load: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Client side of low-latency runs: after sending a batch, keep polling
    /// for its reply this long before sleeping (`ConnectOptions::reply_spin`;
    /// 0 = never spin).
    #[arg(long = "reply-spin-us", default_value_t = 0)]
    pub reply_spin_us: u64,
}

impl BenchArgs {
    /// Defaults as on the command line, for `addr`.
    pub fn new(addr: impl Into<String>) -> BenchArgs {
        BenchArgs {
            addr: addr.into(),
            threads: 1,
            inflight: 8,
            batch: 64,
            record_size: 100,
            keys: 100_000,
            mix: Mix::parse("read=100").expect("valid default"),
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(2),
            table: "norr_bench".to_string(),
            load: false,
            json: false,
            reply_spin_us: 0,
        }
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        if self.threads == 0 || self.threads > 1024 {
            bail!("--threads must be 1..=1024");
        }
        if self.inflight == 0 || self.inflight > 4096 {
            bail!("--inflight must be 1..=4096");
        }
        if self.batch == 0 || self.batch > norr_signals::MAX_OPS_PER_BATCH {
            bail!("--batch must be 1..={}", norr_signals::MAX_OPS_PER_BATCH);
        }
        if self.keys == 0 || self.keys > (1 << 31) {
            bail!("--keys must be 1..=2^31");
        }
        if self.keys < (self.threads * self.inflight) as u64 {
            bail!("--keys must be at least --threads x --inflight (each worker owns a share of the keys)");
        }
        crate::DataNodeAddr::parse_list(&self.addr).map_err(|e| anyhow::anyhow!("--addr: {e}"))?;
        if self.record_size > 65_535 {
            bail!("--record-size must be at most 65535 (VARBINARY)");
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpMix {
    Read = 0,
    Insert = 1,
    Update = 2,
    Delete = 3,
}

impl OpMix {
    pub const ALL: [OpMix; 4] = [OpMix::Read, OpMix::Insert, OpMix::Update, OpMix::Delete];
    pub fn name(self) -> &'static str {
        match self {
            OpMix::Read => "read",
            OpMix::Insert => "insert",
            OpMix::Update => "update",
            OpMix::Delete => "delete",
        }
    }
}

/// Weights of the operation kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix {
    pub weights: [u32; 4],
}

impl Mix {
    /// `read=80,update=20`; a bare kind means weight 1.
    pub fn parse(s: &str) -> Result<Mix, String> {
        let mut weights = [0u32; 4];
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, w) = match part.split_once('=') {
                Some((n, w)) => (n.trim(), w.trim().parse::<u32>().map_err(|e| format!("weight of {n}: {e}"))?),
                None => (part, 1),
            };
            let kind = OpMix::ALL
                .into_iter()
                .find(|k| k.name() == name)
                .ok_or_else(|| format!("unknown operation kind {name:?} (read, insert, update, delete)"))?;
            weights[kind as usize] += w;
        }
        if weights.iter().all(|w| *w == 0) {
            return Err("the mix has no operations".to_string());
        }
        Ok(Mix { weights })
    }

    /// The kind for a random number `r`.
    pub fn pick(&self, r: u64) -> OpMix {
        let total: u64 = self.weights.iter().map(|w| *w as u64).sum();
        let mut x = r % total;
        for k in OpMix::ALL {
            let w = self.weights[k as usize] as u64;
            if x < w {
                return k;
            }
            x -= w;
        }
        unreachable!("x < total")
    }
}

/// `10s`, `500ms`, `2m`, `1.5s`, `100us`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().with_context(|| format!("bad duration {s:?}")).map_err(|e| e.to_string())?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1e3,
        "us" => n / 1e6,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        u => return Err(format!("unknown duration unit {u:?} in {s:?}")),
    };
    if !(0.0..=1e7).contains(&secs) {
        return Err(format!("duration {s:?} out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    #[test]
    fn parse_args() {
        let c = Cli::try_parse_from([
            "bench",
            "--threads",
            "2",
            "--mix",
            "read=80,update=20",
            "--duration",
            "500ms",
            "--load",
            "--json",
        ])
        .unwrap();
        assert_eq!(c.bench.threads, 2);
        assert_eq!(c.bench.mix.weights, [80, 0, 20, 0]);
        assert_eq!(c.bench.duration, Duration::from_millis(500));
        assert!(c.bench.load && c.bench.json);
        assert!(Cli::try_parse_from(["bench", "--mix", "scan=1"]).is_err());
        c.bench.validate().unwrap();
        let d = Cli::try_parse_from(["bench"]).unwrap().bench;
        let n = BenchArgs::new("127.0.0.1:2202");
        assert_eq!((d.threads, d.inflight, d.batch, d.keys, d.mix), (n.threads, n.inflight, n.batch, n.keys, n.mix));
    }

    #[test]
    fn mix_pick_follows_weights() {
        let m = Mix::parse("read=3,delete").unwrap();
        let picks: Vec<_> = (0..4).map(|r| m.pick(r)).collect();
        assert_eq!(picks, vec![OpMix::Read, OpMix::Read, OpMix::Read, OpMix::Delete]);
        assert!(Mix::parse("read=0").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("5 parsecs").is_err());
    }
}
