//! The batch handler example: every message of one claim in one transaction, completed together.
use std::error::Error;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use queuebox_inbox::{BatchHandler, PgConnectionSource, Worker, WorkerOptions, batch_handler_fn};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres:test@127.0.0.1:5432/postgres".to_owned());
    let config: tokio_postgres::Config = url.parse()?;
    let manager = Manager::from_config(
        config,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager).max_size(8).build()?;
    let mut options = WorkerOptions::new("orders");
    options.batch_size = 100; // up to 100 messages per handler call and per transaction
    let worker = Worker::new(PgConnectionSource::new(pool), options)?;
    let stopper = worker.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stopper.stop();
    });
    worker.run_batched(batch_handler()).await;
    Ok(())
}

/// The application's work for a whole batch: one row per message, in the one transaction that
/// also marks every message `processed`. An error fails every message of the batch.
pub fn batch_handler() -> impl BatchHandler {
    batch_handler_fn(|messages, tx, _cancel| {
        Box::pin(async move {
            for message in messages {
                tx.execute(
                    "INSERT INTO app_rows (message_id, note) VALUES ($1, $2)",
                    &[message.id.into(), message.idempotency_key.clone().into()],
                )
                .await?;
            }
            Ok(())
        })
    })
}
