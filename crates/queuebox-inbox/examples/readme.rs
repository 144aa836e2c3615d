//! The README example: a pull worker whose handler inserts a row and returns.
use std::error::Error;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use queuebox_inbox::{Handler, PgConnectionSource, Worker, WorkerOptions, handler_fn};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres:test@127.0.0.1:5432/postgres".to_owned());
    let worker = build_worker(&url)?;
    let stopper = worker.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stopper.stop(); // finish in-flight messages within the shutdown grace, then return
    });
    worker.run(handler()).await;
    Ok(())
}

/// A worker for the pull source `orders`, on a connection pool.
pub fn build_worker(url: &str) -> Result<Worker, Box<dyn Error + Send + Sync>> {
    let config: tokio_postgres::Config = url.parse()?;
    let manager = Manager::from_config(
        config,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager).max_size(8).build()?;
    let options = WorkerOptions::new("orders");
    Ok(Worker::new(PgConnectionSource::new(pool), options)?)
}

/// The application's work: one row in the same transaction as the inbox row's `processed` mark.
pub fn handler() -> impl Handler {
    handler_fn(|message, tx, _cancel| {
        Box::pin(async move {
            tx.execute(
                "INSERT INTO app_rows (message_id, note) VALUES ($1, $2)",
                &[message.id.into(), message.idempotency_key.clone().into()],
            )
            .await?;
            Ok(())
        })
    })
}
