//! The three phases: a drain of pending rows by a running QueueBox, the SQL floor on the same
//! rows, and the steady producer. Each runs in a schema of its own, which the caller drops.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use queuebox_config::Config;
use tokio::process::Command;
use tokio_postgres::Client;

use super::config::{self, Shape};
use super::pg::{self, Schemas};
use super::procs::{self, QueueBox, Receiver};
use super::results::{Drain, Floor, Steady};
use super::{Options, now_us};
use crate::procfs::{self, Memory};
use crate::stats::{self, percentile_cont};

/// How long QueueBox sits with an empty outbox before its idle RSS is read.
const SETTLE: Duration = Duration::from_secs(3);
/// How often the driver looks at progress.
const POLL: Duration = Duration::from_millis(50);
/// A phase fails when no row arrives for this long.
const STALL: Duration = Duration::from_secs(120);

/// A phase's schema, configuration file and client.
struct Place {
    schema: String,
    client: Client,
    config_path: PathBuf,
    config: Config,
}

async fn place(
    opts: &Options,
    schemas: &Schemas,
    name: &str,
    shape: Shape,
) -> anyhow::Result<Place> {
    let schema = format!("{}_{name}", opts.prefix);
    let client = schemas.create(&schema).await?;
    let url = pg::queuebox_url(&opts.server_url, &schema);
    let config_path = opts.work_dir.join(format!("{name}.yml"));
    std::fs::write(&config_path, config::yaml(&url, shape))?;
    let config = crate::load_config_file(&config_path, &opts.work_dir)
        .context("the generated configuration is invalid")?;
    let log = opts.work_dir.join(format!("{name}-migrate.log"));
    procs::migrate(&opts.queuebox, &config_path, &log).await?;
    Ok(Place {
        schema,
        client,
        config_path,
        config,
    })
}

/// How the measured QueueBox finds new rows.
#[derive(Clone, Copy, Debug, Default)]
pub struct Capture {
    pub poll_interval_ms: Option<u64>,
    pub notify: bool,
}

/// Which rows a drain or floor inserts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// [`pg::INSERT_ROWS`]: 1,000 keys and keyless rows.
    Spread,
    /// Every row under one key.
    HotKey,
}

impl Rows {
    fn sql(self) -> String {
        match self {
            Rows::Spread => pg::INSERT_ROWS.to_owned(),
            Rows::HotKey => pg::hot_rows_sql(),
        }
    }
}

/// A QueueBox delivering to a receiver, settled with an empty outbox.
struct Running {
    place: Place,
    receiver: Receiver,
    queuebox: QueueBox,
    idle: Memory,
    cpu_start: f64,
}

async fn start(
    opts: &Options,
    schemas: &Schemas,
    name: &str,
    concurrency: Option<u32>,
    capture: Capture,
) -> anyhow::Result<Running> {
    let receiver = Receiver::start(&opts.bin_dir, &opts.work_dir, name).await?;
    let shape = Shape {
        batch_size: opts.batch_size,
        concurrency,
        receiver_port: Some(receiver.port),
        poll_interval_ms: capture.poll_interval_ms,
        notify: capture.notify,
    };
    let place = place(opts, schemas, name, shape).await?;
    let log = opts.work_dir.join(format!("{name}-queuebox.log"));
    let queuebox = QueueBox::start(&opts.queuebox, &place.config_path, &log).await?;
    tokio::time::sleep(SETTLE).await;
    let idle = queuebox.memory()?;
    let cpu_start = queuebox.cpu_seconds();
    Ok(Running {
        place,
        receiver,
        queuebox,
        idle,
        cpu_start,
    })
}

/// Waits until the receiver counted `expected` requests and no row is pending or processing;
/// returns the time (µs) the last condition held.
async fn wait_done(run: &Running, expected: u64) -> anyhow::Result<i64> {
    let (mut seen, mut since) = (0, Instant::now());
    loop {
        let n = run.receiver.count().await?;
        if n >= expected {
            break;
        }
        if n > seen {
            (seen, since) = (n, Instant::now());
        } else if since.elapsed() > STALL {
            bail!("stalled: {n} of {expected} rows delivered, none for {STALL:?}");
        }
        tokio::time::sleep(POLL).await;
    }
    let started = Instant::now();
    loop {
        if pg::unfinished(&run.place.client).await? == 0 {
            return Ok(now_us());
        }
        if started.elapsed() > STALL {
            bail!("rows still pending or processing {STALL:?} after the last delivery");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// What is read after the work: peak memory and CPU, then a clean stop of both processes.
struct Ended {
    end: Memory,
    cpu_s: f64,
    complaints: usize,
    latency: stats::Latency,
    states: String,
    index_scans: i64,
    claim_sizes: String,
}

async fn end(run: Running) -> anyhow::Result<(Ended, Place)> {
    let end = run.queuebox.memory()?;
    let cpu_s = run.queuebox.cpu_seconds() - run.cpu_start;
    let complaints = run.queuebox.complaints();
    run.queuebox.stop().await?;
    let receipts = run.receiver.finish().await?;
    let created = pg::created_us(&run.place.client).await?;
    let ended = Ended {
        end,
        cpu_s,
        complaints,
        latency: stats::latency(&created, &receipts),
        states: pg::state_counts(&run.place.client).await?,
        index_scans: pg::pending_index_scans(&run.place.client).await?,
        claim_sizes: pg::claim_sizes(&run.place.client).await?,
    };
    Ok((ended, run.place))
}

/// Drain `count` pending rows, inserted in one statement into a running QueueBox.
pub async fn drain(
    opts: &Options,
    schemas: &Schemas,
    name: &str,
    concurrency: Option<u32>,
    which: Rows,
    count: u64,
) -> anyhow::Result<(Drain, f64)> {
    let run = start(opts, schemas, name, concurrency, Capture::default()).await?;
    let load_before = procfs::loadavg();
    let rows = count as i64;
    let mut run = run;
    let insert_ms = pg::insert_analyzed(&mut run.place.client, &which.sql(), 1, rows).await?;
    let committed_us = now_us();
    let marked_us = wait_done(&run, count).await?;
    let load_after = procfs::loadavg();
    let payload = pg::payload_bytes(&run.place.client).await?;
    let (idle, concurrency_used) = (run.idle, run.place.config.outbox.concurrency);
    let (ended, place) = end(run).await?;
    schemas.drop(&place.client, &place.schema).await?;
    let l = &ended.latency;
    let drain = Drain {
        concurrency: concurrency_used,
        concurrency_is_default: concurrency.is_none(),
        rows: count,
        insert_ms,
        drain_s: (l.last_receipt_us - committed_us) as f64 / 1e6,
        first_to_last_s: (l.last_receipt_us - l.first_receipt_us) as f64 / 1e6,
        marked_s: (marked_us - committed_us) as f64 / 1e6,
        latency: ended.latency.clone(),
        idle,
        end: ended.end,
        cpu_s: ended.cpu_s,
        states: ended.states,
        complaints: ended.complaints,
        index_scans: ended.index_scans,
        claim_sizes: ended.claim_sizes,
        load_before,
        load_after,
    };
    Ok((drain, payload))
}

/// The SQL floor: `qb-sql-floor` on the same rows, same batch size.
pub async fn floor(
    opts: &Options,
    schemas: &Schemas,
    name: &str,
    which: Rows,
    count: u64,
) -> anyhow::Result<Floor> {
    let shape = Shape {
        batch_size: opts.batch_size,
        concurrency: None,
        receiver_port: None,
        poll_interval_ms: None,
        notify: false,
    };
    let mut place = place(opts, schemas, name, shape).await?;
    pg::insert_analyzed(&mut place.client, &which.sql(), 1, count as i64).await?;
    let load_before = procfs::loadavg();
    let output = Command::new(opts.bin_dir.join("qb-sql-floor"))
        .arg("--config")
        .arg(&place.config_path)
        .kill_on_drop(true)
        .output()
        .await
        .context("running qb-sql-floor")?;
    let load_after = procfs::loadavg();
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "qb-sql-floor failed ({}): {}{}",
            output.status,
            stdout,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let field = |name: &str| -> anyhow::Result<String> {
        stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .map(str::to_owned)
            .with_context(|| format!("qb-sql-floor printed {stdout:?}"))
    };
    let mut floor = Floor {
        rows: field("rows")?.parse()?,
        seconds: field("seconds")?.parse()?,
        claims: field("claims")?.parse()?,
        index_scans: 0,
        load_before,
        load_after,
    };
    let states = pg::state_counts(&place.client).await?;
    let index_scans = pg::pending_index_scans(&place.client).await?;
    schemas.drop(&place.client, &place.schema).await?;
    floor.index_scans = index_scans;
    if floor.rows != count {
        bail!(
            "the floor marked {} of {} rows ({states})",
            floor.rows,
            count
        );
    }
    Ok(floor)
}

/// The steady producer: `rate` rows/s as one INSERT of `rate × tick_ms / 1000` rows every
/// `tick_ms`, into a running QueueBox with the default concurrency and the given capture.
pub async fn steady(
    opts: &Options,
    schemas: &Schemas,
    name: &str,
    capture: Capture,
    tick_ms: u64,
) -> anyhow::Result<Steady> {
    let run = start(opts, schemas, name, None, capture).await?;
    let load_before = procfs::loadavg();
    let per_tick = opts.steady_rate * tick_ms / 1000;
    let ticks = opts.steady_seconds * 1000 / tick_ms;
    let mut ticker = tokio::time::interval(Duration::from_millis(tick_ms));
    let mut insert_ms = Vec::with_capacity(ticks as usize);
    let mut next = 1i64;
    let started = Instant::now();
    for _ in 0..ticks {
        ticker.tick().await;
        let last = next + per_tick as i64 - 1;
        insert_ms.push(pg::insert_rows(&run.place.client, next, last).await?);
        next = last + 1;
    }
    let produced_s = started.elapsed().as_secs_f64();
    let rows = per_tick * ticks;
    wait_done(&run, rows).await?;
    let load_after = procfs::loadavg();
    let (idle, concurrency, poll_ms) = (
        run.idle,
        run.place.config.outbox.concurrency,
        run.place.config.outbox.poll_interval_ms,
    );
    let (ended, place) = end(run).await?;
    schemas.drop(&place.client, &place.schema).await?;
    let late_inserts = insert_ms.iter().filter(|ms| **ms > tick_ms as f64).count() as u64;
    insert_ms.sort_by(f64::total_cmp);
    Ok(Steady {
        target_rate: opts.steady_rate,
        tick_ms,
        rows_per_tick: per_tick,
        seconds: opts.steady_seconds,
        rows,
        achieved_rate: rows as f64 / produced_s,
        late_inserts,
        insert_p99_ms: percentile_cont(&insert_ms, 0.99).unwrap_or(0.0),
        concurrency,
        poll_interval_ms: poll_ms,
        capture: if capture.notify { "notify" } else { "polling" },
        latency: ended.latency,
        idle,
        end: ended.end,
        cpu_s: ended.cpu_s,
        states: ended.states,
        complaints: ended.complaints,
        load_before,
        load_after,
    })
}
