//! `qb-pull-rust`: the Rust worker of `bench/pull.sh`. Runs a `queuebox-inbox` pull worker
//! (feature `postgres`, the crate's normal path: claim, then each row's no-op handler in its own
//! transaction with the `processed` mark) for one source until SIGTERM or SIGINT. Prints `ready`
//! once its pool holds a live connection, so the driver can read the idle RSS.

use clap::Parser;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use queuebox_inbox::{PgConnectionSource, Worker, WorkerOptions, handler_fn};
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};

#[derive(Parser)]
#[command(about = "Rust pull worker of bench/pull.sh")]
struct Args {
    /// PostgreSQL URL; its `options=-c search_path=…` selects the schema holding `inbox`.
    #[arg(long)]
    url: String,
    /// The pull source.
    #[arg(long, default_value = "bench")]
    source: String,
    /// `WorkerOptions::batch_size`.
    #[arg(long, default_value_t = 50)]
    batch: u32,
    /// `WorkerOptions::max_concurrency`.
    #[arg(long, default_value_t = 1)]
    concurrency: u32,
    /// `WorkerOptions::poll_interval`, in milliseconds.
    #[arg(long, default_value_t = 100)]
    poll_ms: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config: tokio_postgres::Config = args.url.parse()?;
    let manager = Manager::from_config(
        config,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    // The claim, each handler transaction and each renewal borrow a connection.
    let pool = Pool::builder(manager)
        .max_size(args.concurrency as usize + 2)
        .build()?;
    drop(pool.get().await?);
    let mut options = WorkerOptions::new(args.source.clone());
    options.batch_size = args.batch;
    options.max_concurrency = args.concurrency;
    options.poll_interval = Duration::from_millis(args.poll_ms);
    options.shutdown_grace = Duration::from_secs(5);
    let worker = Worker::new(PgConnectionSource::new(pool), options)?;
    let stopper = worker.clone();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        stopper.stop();
    });
    println!("ready");
    worker
        .run(handler_fn(|_message, _tx, _cancel| {
            Box::pin(async { Ok(()) })
        }))
        .await;
    Ok(())
}
