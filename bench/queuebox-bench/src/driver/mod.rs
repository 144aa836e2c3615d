//! The outbox benchmark driver (`qb-bench`): runs the phases in a fixed order (SQL floor, drain
//! with the default concurrency, drain with a high concurrency, SQL floor again, steady), each
//! in a fresh schema, and returns what they measured. Schemas are dropped however it ends.

mod config;
mod pg;
mod phases;
mod procs;
mod results;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

pub use pg::Schemas;
pub use results::{Drain, Floor, Outcome, RunInfo, Steady};

use crate::procfs;

/// Everything the driver needs; `qb-bench` fills it from its arguments.
#[derive(Clone, Debug)]
pub struct Options {
    /// The PostgreSQL server and database, e.g. `postgres://postgres@127.0.0.1:5432/test`.
    pub server_url: String,
    /// The release `queuebox` binary.
    pub queuebox: PathBuf,
    /// Where `qb-receiver` and `qb-sql-floor` are.
    pub bin_dir: PathBuf,
    /// Configuration files, logs and receiver records.
    pub work_dir: PathBuf,
    /// Schema names start with it, e.g. `qb_bench_1234`.
    pub prefix: String,
    pub rows: u64,
    pub batch_size: u32,
    /// The second drain's `outbox.concurrency`.
    pub high_concurrency: u32,
    pub steady_rate: u64,
    pub steady_seconds: u64,
    pub steady_tick_ms: u64,
    /// Rows of the hot-key phase (one key); 0 skips it.
    pub hot_rows: u64,
    /// Run the steady producer a second time with `capture.mode: notify`, `pollIntervalMs` 5000.
    pub steady_notify: bool,
    /// The same rate again in small ticks (`rate × fine_tick_ms / 1000` rows every
    /// `fine_tick_ms`), polling and (with `steady_notify`) notify: a steady producer rather than
    /// bursts of a tenth of a second. 0 skips it.
    pub fine_tick_ms: u64,
}

/// Wall clock, µs since the epoch: the same clock as the receiver's and the database's.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

fn say(what: &str) {
    eprintln!("qb-bench: {what} (load {})", procfs::loadavg());
}

/// Runs every phase. The caller drops `schemas` afterwards, also after an error.
pub async fn run(
    opts: &Options,
    schemas: &Schemas,
    commit: String,
    date: String,
) -> anyhow::Result<Outcome> {
    let client = pg::connect(&opts.server_url).await?;
    let server = pg::server_facts(&client).await?;
    drop(client);
    let load_start = procfs::loadavg();

    use phases::{Capture, Rows};
    let n = opts.rows;
    say("SQL floor, first run");
    let mut floors = vec![phases::floor(opts, schemas, "floor1", Rows::Spread, n).await?];
    say("drain, default concurrency");
    let (default_drain, payload_bytes) =
        phases::drain(opts, schemas, "drain_default", None, Rows::Spread, n).await?;
    say(&format!("drain, concurrency {}", opts.high_concurrency));
    let high = Some(opts.high_concurrency);
    let (high_drain, _) = phases::drain(opts, schemas, "drain_high", high, Rows::Spread, n).await?;
    say("SQL floor, second run");
    floors.push(phases::floor(opts, schemas, "floor2", Rows::Spread, n).await?);
    say("steady producer");
    let tick = opts.steady_tick_ms;
    let steady = phases::steady(opts, schemas, "steady", Capture::default(), tick).await?;
    let notify = Capture {
        poll_interval_ms: Some(5000),
        notify: true,
    };
    let steady_notify = if opts.steady_notify {
        say("steady producer, capture.mode notify, pollIntervalMs 5000");
        Some(phases::steady(opts, schemas, "steady_notify", notify, tick).await?)
    } else {
        None
    };
    let mut fine = Vec::new();
    if opts.fine_tick_ms > 0 {
        let tick = opts.fine_tick_ms;
        say(&format!("steady producer in {tick} ms ticks, polling"));
        fine.push(phases::steady(opts, schemas, "fine", Capture::default(), tick).await?);
        if opts.steady_notify {
            say(&format!("steady producer in {tick} ms ticks, notify"));
            fine.push(phases::steady(opts, schemas, "fine_notify", notify, tick).await?);
        }
    }
    let hot = if opts.hot_rows > 0 {
        let h = opts.hot_rows;
        say(&format!("hot key: SQL floor of {h} rows of one key"));
        let floor = phases::floor(opts, schemas, "hot_floor", Rows::HotKey, h).await?;
        say(&format!("hot key: drain of {h} rows of one key"));
        let (drain, _) = phases::drain(opts, schemas, "hot_drain", None, Rows::HotKey, h).await?;
        Some((drain, floor))
    } else {
        None
    };
    say("done");

    Ok(Outcome {
        info: RunInfo {
            date,
            commit,
            machine: procfs::machine(),
            server,
            load_start,
            load_end: procfs::loadavg(),
            rows: opts.rows,
            batch_size: opts.batch_size,
            payload_bytes,
        },
        floors,
        drains: vec![default_drain, high_drain],
        steady,
        steady_notify,
        fine,
        hot,
    })
}
