//! `qb-pull-floor`: the per-row transaction floor of `bench/pull.sh`. Marks every claimed pull
//! row of a schema `processed` the way a client's handler transaction does (BEGIN, the contract's
//! fenced `complete` statement, COMMIT), on `--concurrency` connections, each taking its own
//! share of the rows, with no claim, no pool, no renewal and no handler. Prints
//! `rows= seconds=`: what the database allows for one transaction per row on this machine.

use std::time::Instant;

use clap::Parser;
use queuebox_inbox::sql::Statements;
use queuebox_inbox::{Dialect, Schema};
use uuid::Uuid;

#[derive(Parser)]
#[command(about = "Per-row transaction floor of bench/pull.sh")]
struct Args {
    /// PostgreSQL URL; its `options=-c search_path=…` selects the schema holding `inbox`.
    #[arg(long)]
    url: String,
    /// The token every row was claimed with (the driver sets it on every row).
    #[arg(long)]
    token: Uuid,
    /// Connections, each marking its share of the rows one transaction at a time.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config: tokio_postgres::Config = args.url.parse()?;
    let complete = Statements::render(Dialect::Postgresql, &Schema::default())?.complete;
    let mut clients = Vec::with_capacity(args.concurrency);
    for _ in 0..args.concurrency.max(1) {
        let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
        tokio::spawn(connection);
        clients.push(client);
    }
    let ids: Vec<Uuid> = clients[0]
        .query(
            "SELECT id FROM inbox WHERE state = 'processing' ORDER BY created_at, id",
            &[],
        )
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let shares = clients.len();
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(shares);
    for (n, client) in clients.into_iter().enumerate() {
        let mine: Vec<Uuid> = ids.iter().skip(n).step_by(shares).copied().collect();
        let complete = complete.clone();
        let token = args.token;
        tasks.push(tokio::spawn(async move {
            let statement = client.prepare(&complete).await?;
            for id in mine {
                client.batch_execute("BEGIN").await?;
                let marked = client.execute(&statement, &[&id, &token]).await?;
                anyhow::ensure!(marked == 1, "row {id} was not marked");
                client.batch_execute("COMMIT").await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    println!(
        "rows={} seconds={:.6}",
        ids.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
