//! `qb-bench`: the outbox benchmark driver (bench/README.md). Runs the SQL floor, two drains,
//! the floor again and the steady producer against the local PostgreSQL, then writes the
//! outbox section of `--out` (docs/benchmarks.md). Interrupted or failed, it still kills its
//! children and drops its schemas.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context as _;
use clap::Parser;
use queuebox_bench::driver::{self, Options, Schemas};
use queuebox_bench::report;
use tokio::signal::unix::{SignalKind, signal};

#[derive(Parser)]
#[command(about = "QueueBox outbox benchmark: drain, SQL floor, steady producer")]
struct Args {
    /// The release `queuebox` binary.
    #[arg(long)]
    queuebox: PathBuf,
    /// The page whose outbox section is written.
    #[arg(long, default_value = "docs/benchmarks.md")]
    out: PathBuf,
    /// PostgreSQL server and database (trust authentication, no TLS).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/test")]
    pg_url: String,
    #[arg(long, default_value_t = 100_000)]
    rows: u64,
    #[arg(long, default_value_t = 100)]
    batch_size: u32,
    /// `outbox.concurrency` of the second drain (the first uses QueueBox's default).
    #[arg(long, default_value_t = 64)]
    high_concurrency: u32,
    #[arg(long, default_value_t = 1000)]
    steady_rate: u64,
    #[arg(long, default_value_t = 30)]
    steady_seconds: u64,
    #[arg(long, default_value_t = 100)]
    steady_tick_ms: u64,
    /// Rows of the hot-key phase: every row under one key, drained beside its SQL floor
    /// (0 skips the phase).
    #[arg(long, default_value_t = 20_000)]
    hot_rows: u64,
    /// Skip the second steady run (`capture.mode: notify`, `pollIntervalMs` 5000).
    #[arg(long)]
    no_notify: bool,
    /// The steady rate again in ticks of this many ms, polling and notify (0 skips them).
    #[arg(long, default_value_t = 10)]
    fine_tick_ms: u64,
    /// Where configuration files, logs and receiver records go (kept with --keep).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Keep the work directory also after a successful run (a failed one always keeps it).
    #[arg(long)]
    keep: bool,
}

fn text_of(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The commit, marked when the working tree differs from it.
fn commit() -> String {
    let Some(head) = text_of(Command::new("git").args(["rev-parse", "--short", "HEAD"])) else {
        return "unknown".to_owned();
    };
    let dirty =
        text_of(Command::new("git").args(["status", "--porcelain", "--untracked-files=no"]))
            .is_some_and(|s| !s.is_empty());
    if dirty {
        format!("`{head}` with uncommitted changes")
    } else {
        format!("`{head}`")
    }
}

async fn interrupted() -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let bin_dir = std::env::current_exe()?
        .parent()
        .context("qb-bench has no directory")?
        .to_owned();
    let pid = std::process::id();
    let work_dir = args
        .work_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("qb-bench-{pid}")));
    std::fs::create_dir_all(&work_dir)?;
    let opts = Options {
        server_url: args.pg_url.clone(),
        queuebox: std::fs::canonicalize(&args.queuebox)
            .with_context(|| format!("no queuebox binary at {}", args.queuebox.display()))?,
        bin_dir,
        work_dir: work_dir.clone(),
        prefix: format!("qb_bench_{pid}"),
        rows: args.rows,
        batch_size: args.batch_size,
        high_concurrency: args.high_concurrency,
        steady_rate: args.steady_rate,
        steady_seconds: args.steady_seconds,
        steady_tick_ms: args.steady_tick_ms,
        hot_rows: args.hot_rows,
        steady_notify: !args.no_notify,
        fine_tick_ms: args.fine_tick_ms,
    };
    let date = text_of(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M"]))
        .unwrap_or_else(|| "unknown date".to_owned());
    eprintln!("qb-bench: work directory {}", work_dir.display());

    let schemas = Schemas::new(&opts.server_url);
    let outcome = tokio::select! {
        outcome = driver::run(&opts, &schemas, commit(), date) => outcome,
        signal = interrupted() => {
            signal?;
            Err(anyhow::anyhow!("interrupted"))
        }
    };
    // The children were killed when the phase's future was dropped; the schemas go now.
    schemas.drop_all().await;
    // Logs stay for a failed run, so its cause can be read.
    if outcome.is_ok() && !args.keep {
        let _ = std::fs::remove_dir_all(&work_dir);
    } else {
        eprintln!("qb-bench: logs and records kept in {}", work_dir.display());
    }
    let outcome = outcome?;

    let section = report::render(&outcome);
    let page = std::fs::read_to_string(&args.out).ok();
    std::fs::write(&args.out, report::splice(page.as_deref(), &section))
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("{section}");
    eprintln!(
        "qb-bench: wrote the outbox section of {}",
        args.out.display()
    );
    Ok(())
}
