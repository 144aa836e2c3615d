//! What each phase measured, as the report prints it.

use crate::procfs::{Machine, Memory};
use crate::stats::Latency;

/// The run as a whole.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub date: String,
    pub commit: String,
    pub machine: Machine,
    pub server: Vec<(String, String)>,
    pub load_start: String,
    pub load_end: String,
    pub rows: u64,
    pub batch_size: u32,
    pub payload_bytes: f64,
}

/// One drain of `rows` pending rows by a running QueueBox.
#[derive(Clone, Debug)]
pub struct Drain {
    pub concurrency: u32,
    pub concurrency_is_default: bool,
    pub rows: u64,
    /// The one INSERT … SELECT of every row.
    pub insert_ms: f64,
    /// From the INSERT's commit to the last row's first receipt.
    pub drain_s: f64,
    /// From the first receipt to the last.
    pub first_to_last_s: f64,
    /// From the INSERT's commit until no row was pending or processing (polled every 50 ms).
    pub marked_s: f64,
    pub latency: Latency,
    pub idle: Memory,
    pub end: Memory,
    pub cpu_s: f64,
    pub states: String,
    pub complaints: usize,
    /// Scans of `idx_outbox_pending`: about one per claim statement.
    pub index_scans: i64,
    /// Rows per claim: "p10 / p50 / p90 / mean (claims)" ([`crate::driver`]'s `claim_sizes`).
    pub claim_sizes: String,
    pub load_before: String,
    pub load_after: String,
}

impl Drain {
    pub fn msgs_per_s(&self) -> f64 {
        self.latency.delivered as f64 / self.drain_s
    }
}

/// One SQL floor run.
#[derive(Clone, Debug)]
pub struct Floor {
    pub rows: u64,
    pub seconds: f64,
    pub claims: u64,
    /// Scans of `idx_outbox_pending`: about one per claim statement.
    pub index_scans: i64,
    pub load_before: String,
    pub load_after: String,
}

impl Floor {
    pub fn rows_per_s(&self) -> f64 {
        self.rows as f64 / self.seconds
    }
}

/// The steady producer phase.
#[derive(Clone, Debug)]
pub struct Steady {
    pub target_rate: u64,
    pub tick_ms: u64,
    pub rows_per_tick: u64,
    pub seconds: u64,
    pub rows: u64,
    /// Rows over the time from the first INSERT's start to the last one's end.
    pub achieved_rate: f64,
    /// INSERTs that took longer than one tick.
    pub late_inserts: u64,
    pub insert_p99_ms: f64,
    pub concurrency: u32,
    pub poll_interval_ms: u64,
    /// `polling` or `notify` (`outbox.capture.mode`).
    pub capture: &'static str,
    pub latency: Latency,
    pub idle: Memory,
    pub end: Memory,
    pub cpu_s: f64,
    pub states: String,
    pub complaints: usize,
    pub load_before: String,
    pub load_after: String,
}

/// Everything, in run order.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub info: RunInfo,
    pub floors: Vec<Floor>,
    pub drains: Vec<Drain>,
    pub steady: Steady,
    /// The same producer with `capture.mode: notify` and `pollIntervalMs` 5000.
    pub steady_notify: Option<Steady>,
    /// The same rate in small ticks: polling, then notify (`Options::fine_tick_ms`).
    pub fine: Vec<Steady>,
    /// One key's backlog: the drain and the SQL floor of the same rows (issue 16 item 4).
    pub hot: Option<(Drain, Floor)>,
}
