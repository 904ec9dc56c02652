//! Every tunable of NorrDB in one place: its default, its allowed range and a
//! "stress" value the simulator uses to shake out edge cases (tiny buffers, short
//! time-outs). Add new knobs here, never as constants scattered in blocks.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Knobs {
    /// Memory for table rows and indexes; inserts beyond it fail with "table is full".
    pub data_memory_bytes: u64,
    /// A transaction waiting this long for a row lock is aborted with the
    /// retriable error 266 (breaks deadlocks).
    pub lock_wait_timeout_ms: u64,
    /// A transaction with no request for this long is aborted (frees its locks
    /// when a client vanished without closing the connection).
    pub txn_inactive_timeout_ms: u64,
    /// TC (transaction coordinator) instances per data node, all on the node's
    /// one thread today. Clients start each transaction on the instance its
    /// first operation's partition maps to (`partition % tc_instances`), so
    /// with more than one the coordinator choice is partition-aware, as it is
    /// across data nodes. Limits below marked "in a TC" are per instance.
    pub tc_instances: u16,
    /// Most concurrently open transactions in a TC.
    pub max_transactions: u32,
    /// Most operations in one transaction.
    pub max_ops_per_txn: u32,
    /// Most concurrently open scans in a TC.
    pub max_scans: u32,
    /// Rows a partition scan examines per step before yielding to other signals.
    pub scan_examine_per_step: u32,
    /// Default number of partitions of a new table. Two per LQH instance
    /// (the data node runs one): every partition of a table adds a scan per
    /// unpruned range query, and more partitions than LQH instances buy no
    /// parallelism; 8 cost datad 1.27x the instructions of 2 per sysbench
    /// read/write transaction (bench/RESULTS.md). NDB likewise sizes the
    /// default from its LDM threads and data nodes.
    pub default_partitions: u32,
    /// Bound of the B job buffer for signals arriving from the network.
    pub job_buffer_bound: usize,
    /// Largest frame accepted from the network.
    pub max_frame_bytes: usize,
    /// Hard bound of a connection's unsent reply bytes: a client whose replies
    /// reach it is disconnected. With `send_buffer_pause_bytes` below it, only
    /// the replies to requests accepted before the pause can get there (a
    /// pipelined batch of requests for very large rows); a slow reader is
    /// paused, not disconnected.
    pub max_send_buffer_bytes: usize,
    /// Adaptive send: the longest a small message may wait to be coalesced with
    /// others before it is sent anyway.
    pub max_send_delay_us: u64,
    /// Most API (client) connections.
    pub max_api_connections: u32,
    /// When the data node's event loop runs out of work it keeps polling the
    /// network (without sleeping) for this long before it blocks, so a request
    /// arriving soon after does not pay the CPU's wake-up latency (tens of
    /// microseconds on an idle machine). Bounded: an idle node sleeps after
    /// at most this long; 0 disables spinning. Like RonDB's SpinMethod/spin time.
    /// Only while socket connections exist: with in-process links alone the
    /// API node spins for replies instead (see the runtime's `poll_events`).
    pub idle_spin_us: u64,
    // --- cluster (membership, failure detection, distribution) ---
    /// Data nodes send each other a heartbeat this often (any signal counts as
    /// one). With `missed_heartbeats` this bounds how long a hung node (SIGSTOP,
    /// a stalled machine) stays a member: interval x missed. A crashed node is
    /// noticed sooner, when its connections break.
    pub heartbeat_interval_ms: u64,
    /// A node that sends nothing for this many heartbeat intervals is declared
    /// failed by the node-failure protocol.
    pub missed_heartbeats: u32,
    /// Longest wait for the arbitrator (mgmd) when a node failure leaves the
    /// survivors unable to know they are the only half left; without an
    /// answer they shut down rather than risk two halves taking writes.
    pub arbitration_timeout_ms: u64,
    /// At a cluster start, wait this long for every configured data node
    /// before starting with those present (one per node group at least).
    pub start_partial_timeout_ms: u64,
    /// Default for tables that do not say: committed reads may use any
    /// replica (read-backup, `COMMENT="NDB_TABLE=READ_BACKUP=1"`); a commit
    /// is then acknowledged only once every replica released its locks.
    pub read_backup: bool,
    // --- durability ---
    /// A global checkpoint (every node's REDO flushed to disk up to a new
    /// GCI) is started this often; it bounds what a whole-cluster crash loses.
    pub gcp_interval_ms: u64,
    /// A commit that waits for disk (`norr_commit_wait = 'disk'`,
    /// `ExecType::CommitDisk`) waits at most this long for its global
    /// checkpoint; then it is answered with error 4279: committed in memory
    /// on every replica, disk durability not confirmed. A few GCP intervals
    /// by default; keep it well above `gcp_interval_ms`.
    pub commit_disk_timeout_ms: u64,
    /// Files per REDO log part (one part per LDM), used as one ring.
    /// Log space per part = redo_files x redo_file_bytes; when it is full,
    /// commits get the temporary error 410 until a local checkpoint frees
    /// the log's tail.
    pub redo_files: u32,
    /// Size of each REDO log file (pre-allocated; a multiple of 32 KiB).
    pub redo_file_bytes: u64,
    /// Memory for REDO pages waiting to be written, per log part; beyond it
    /// commits get the temporary error 1221 (the disk is behind).
    pub redo_buffer_bytes: u64,
    /// A restore reads at most this many checkpoints of a partition: every
    /// part of a partition is written in full at least once in this many
    /// partial local checkpoints.
    pub lcp_max_chain: u32,
    /// Pause between the end of one local checkpoint round and the start of
    /// the next (rounds run continuously; a round that finds nothing changed
    /// writes nothing). With REDO fill above 25 % the next round starts at once.
    pub lcp_min_gap_ms: u64,
    /// Rows a local checkpoint scan takes per slice (one signal; transactions
    /// run between slices).
    pub lcp_slice_rows: u32,
    /// Delay between checkpoint slices while the REDO log is below 25 % full.
    /// It halves past 25 %, quarters past 40 % and is zero past 60 % (RonDB's
    /// EnableRedoControl): checkpoints speed up as the log fills, so that
    /// they free the log faster than writes fill it.
    pub lcp_slice_delay_us: u64,
    /// Back-pressure on slow readers: once a connection has this many unsent
    /// reply bytes, the node stops reading that connection's requests until
    /// the client has read its buffer down to half of it (TCP then stops the
    /// client's sends). Other connections are served as before. With it, the
    /// unsent bytes of a connection stay below this plus the replies to one
    /// round's requests (the node reads a connection again only once its
    /// earlier requests left the job buffer), not `max_send_buffer_bytes`.
    pub send_buffer_pause_bytes: usize,
    /// A connection that completed the handshake must send its first request
    /// within this long, else the node closes it, so connections that say
    /// Hello and then nothing cannot hold API node ids (and with them
    /// `max_api_connections`) for long. Clients connect when they have work
    /// (a client idle longer before its first request is refused its
    /// connection and must connect again).
    pub api_first_request_timeout_ms: u64,
    /// Of `max_api_connections`, slots that only API nodes declaring
    /// themselves SQL nodes or management servers (the handshake's
    /// `ApiKind`) may take: native API clients get at most
    /// `max_api_connections - reserved_api_connections`, so a client that
    /// leaks connections cannot lock the SQL nodes out. The kind is declared,
    /// not authenticated: this guards against careless clients, not hostile ones.
    pub reserved_api_connections: u32,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            data_memory_bytes: 1 << 30,
            lock_wait_timeout_ms: 1_200,
            txn_inactive_timeout_ms: 60_000,
            tc_instances: 1,
            max_transactions: 16_384,
            max_ops_per_txn: 1_000_000,
            max_scans: 4_096,
            scan_examine_per_step: 512,
            default_partitions: 2,
            job_buffer_bound: 1 << 20,
            max_frame_bytes: 64 << 20,
            max_send_buffer_bytes: 256 << 20,
            max_send_delay_us: 20,
            max_api_connections: 1_024,
            idle_spin_us: 50,
            heartbeat_interval_ms: 200,
            missed_heartbeats: 4,
            arbitration_timeout_ms: 3_000,
            start_partial_timeout_ms: 30_000,
            read_backup: false,
            gcp_interval_ms: 2_000,
            commit_disk_timeout_ms: 10_000,
            redo_files: 4,
            redo_file_bytes: 64 << 20,
            redo_buffer_bytes: 32 << 20,
            lcp_max_chain: 8,
            lcp_min_gap_ms: 200,
            lcp_slice_rows: 256,
            lcp_slice_delay_us: 500,
            send_buffer_pause_bytes: 4 << 20,
            api_first_request_timeout_ms: 30_000,
            reserved_api_connections: 32,
        }
    }
}

impl Knobs {
    /// Values that drive rare paths: small memory, short timeouts, small batches.
    pub fn stress() -> Knobs {
        Knobs {
            data_memory_bytes: 4 << 20,
            lock_wait_timeout_ms: 50,
            txn_inactive_timeout_ms: 2_000,
            tc_instances: 3,
            max_transactions: 64,
            max_ops_per_txn: 64,
            max_scans: 16,
            scan_examine_per_step: 3,
            default_partitions: 3,
            job_buffer_bound: 256,
            max_frame_bytes: 1 << 20,
            max_send_buffer_bytes: 1 << 20,
            max_send_delay_us: 200,
            max_api_connections: 64,
            idle_spin_us: 0,
            heartbeat_interval_ms: 20,
            missed_heartbeats: 2,
            arbitration_timeout_ms: 300,
            start_partial_timeout_ms: 2_000,
            read_backup: true,
            gcp_interval_ms: 20,
            commit_disk_timeout_ms: 200,
            redo_files: 2,
            redo_file_bytes: 4 << 20,
            redo_buffer_bytes: 1 << 20,
            lcp_max_chain: 2,
            lcp_min_gap_ms: 1,
            lcp_slice_rows: 3,
            lcp_slice_delay_us: 2_000,
            send_buffer_pause_bytes: 64 << 10,
            api_first_request_timeout_ms: 500,
            reserved_api_connections: 8,
        }
    }

    /// Check ranges; the message names the knob and its allowed range.
    pub fn validate(&self) -> Result<(), String> {
        fn range<T: PartialOrd + std::fmt::Display>(name: &str, v: T, lo: T, hi: T) -> Result<(), String> {
            if v < lo || v > hi {
                return Err(format!("{name} = {v} is out of range {lo}..={hi}"));
            }
            Ok(())
        }
        range("data_memory_bytes", self.data_memory_bytes, 1 << 20, 1 << 44)?;
        range("lock_wait_timeout_ms", self.lock_wait_timeout_ms, 1, 3_600_000)?;
        range("txn_inactive_timeout_ms", self.txn_inactive_timeout_ms, 10, 86_400_000)?;
        range("tc_instances", self.tc_instances, 1, 64)?;
        range("max_transactions", self.max_transactions, 1, 1 << 24)?;
        range("max_ops_per_txn", self.max_ops_per_txn, 1, 1 << 30)?;
        range("max_scans", self.max_scans, 1, 1 << 20)?;
        range("scan_examine_per_step", self.scan_examine_per_step, 1, 1 << 20)?;
        range("default_partitions", self.default_partitions, 1, 1024)?;
        range("job_buffer_bound", self.job_buffer_bound, 16, 1 << 26)?;
        range("max_frame_bytes", self.max_frame_bytes, 4096, 1 << 30)?;
        range("max_send_buffer_bytes", self.max_send_buffer_bytes, 65536, 1 << 34)?;
        range("max_send_delay_us", self.max_send_delay_us, 0, 100_000)?;
        range("max_api_connections", self.max_api_connections, 1, 1 << 16)?;
        range("idle_spin_us", self.idle_spin_us, 0, 10_000)?;
        range("heartbeat_interval_ms", self.heartbeat_interval_ms, 10, 60_000)?;
        range("missed_heartbeats", self.missed_heartbeats, 2, 100)?;
        range("arbitration_timeout_ms", self.arbitration_timeout_ms, 100, 600_000)?;
        range("start_partial_timeout_ms", self.start_partial_timeout_ms, 0, 3_600_000)?;
        range("gcp_interval_ms", self.gcp_interval_ms, 10, 600_000)?;
        range("commit_disk_timeout_ms", self.commit_disk_timeout_ms, 10, 86_400_000)?;
        range("redo_files", self.redo_files, 2, 1024)?;
        range("redo_file_bytes", self.redo_file_bytes, 4 << 20, 16 << 30)?;
        if !self.redo_file_bytes.is_multiple_of(32 << 10) {
            return Err(format!(
                "redo_file_bytes = {} is not a multiple of 32K (the REDO page size)",
                self.redo_file_bytes
            ));
        }
        range("redo_buffer_bytes", self.redo_buffer_bytes, 1 << 20, 4 << 30)?;
        range("lcp_max_chain", self.lcp_max_chain, 2, 64)?;
        range("lcp_min_gap_ms", self.lcp_min_gap_ms, 0, 3_600_000)?;
        range("lcp_slice_rows", self.lcp_slice_rows, 1, 1 << 20)?;
        range("lcp_slice_delay_us", self.lcp_slice_delay_us, 0, 10_000_000)?;
        range("send_buffer_pause_bytes", self.send_buffer_pause_bytes, 4096, 1 << 34)?;
        if self.send_buffer_pause_bytes > self.max_send_buffer_bytes {
            return Err(format!(
                "send_buffer_pause_bytes = {} must not exceed max_send_buffer_bytes = {} (reading pauses before the hard bound)",
                self.send_buffer_pause_bytes, self.max_send_buffer_bytes
            ));
        }
        range("api_first_request_timeout_ms", self.api_first_request_timeout_ms, 10, 86_400_000)?;
        if self.reserved_api_connections >= self.max_api_connections {
            return Err(format!(
                "reserved_api_connections = {} must be below max_api_connections = {} (native clients need a slot too)",
                self.reserved_api_connections, self.max_api_connections
            ));
        }
        Ok(())
    }
}

/// Parse a size in bytes: "1073741824", "1G", "512M", "64KiB", "4k" (K, M, G,
/// T are powers of 1024; a trailing "B" or "iB" is allowed). Knobs whose
/// name ends in `_bytes` accept these in configuration files and flags.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let stripped = lower.trim_end_matches("ib").trim_end_matches('b');
    let (num, mult) = match stripped.chars().last() {
        Some('k') => (&stripped[..stripped.len() - 1], 1u64 << 10),
        Some('m') => (&stripped[..stripped.len() - 1], 1u64 << 20),
        Some('g') => (&stripped[..stripped.len() - 1], 1u64 << 30),
        Some('t') => (&stripped[..stripped.len() - 1], 1u64 << 40),
        _ => (stripped, 1),
    };
    let n: u64 = num.trim().parse().map_err(|_| format!("'{s}' is not a size (examples: 1073741824, 512M, 1G)"))?;
    n.checked_mul(mult).ok_or_else(|| format!("size '{s}' is too large"))
}

/// The shortest exact spelling of a size that `parse_size` reads back:
/// "1G" for 1073741824, "1536M", "4095" when no suffix divides it.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (unit, suffix) in UNITS {
        if bytes != 0 && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn defaults_and_stress_are_valid() {
        Knobs::default().validate().unwrap();
        Knobs::stress().validate().unwrap();
        let bad = Knobs { lock_wait_timeout_ms: 0, ..Knobs::default() };
        assert!(bad.validate().unwrap_err().contains("lock_wait_timeout_ms"));
        // The pause point of a send buffer lies below its hard bound.
        let bad = Knobs { send_buffer_pause_bytes: 2 << 20, max_send_buffer_bytes: 1 << 20, ..Knobs::default() };
        assert!(bad.validate().unwrap_err().contains("send_buffer_pause_bytes"));
        // Native clients always keep at least one slot.
        let bad = Knobs { reserved_api_connections: 8, max_api_connections: 8, ..Knobs::default() };
        assert!(bad.validate().unwrap_err().contains("reserved_api_connections"));
        Knobs { reserved_api_connections: 0, max_api_connections: 1, ..Knobs::default() }.validate().unwrap();
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("4kb"), Ok(4096));
        assert_eq!(parse_size("123"), Ok(123));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999T").is_err());
        for v in [0u64, 1, 1023, 1024, 1536 << 20, 1 << 30, 3 << 40, u64::MAX] {
            assert_eq!(parse_size(&format_size(v)), Ok(v), "{v}");
        }
        assert_eq!(format_size(1 << 30), "1G");
        assert_eq!(format_size(1536 << 20), "1536M");
        assert_eq!(format_size(4095), "4095");
    }
}
