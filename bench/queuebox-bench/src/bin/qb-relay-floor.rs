//! `qb-relay-floor`: the SQL floor of the inbox relay. Runs QueueBox's own relay statements
//! (`RelayStore::relay_claim` of `inbox.relay.batchSize` rows, then `relay_forward` for each
//! claimed row, one after the other: one transaction per forwarded row, as the relay does)
//! through the PostgreSQL store (`queuebox_store_postgres::connect`), built from the same configuration file as the
//! measured QueueBox, until a claim returns nothing. The outbox row is built as the relay builds
//! it (`render_topic`, `identity_headers`, a v7 id). No renewal, reclaim or gauge queries, no
//! outbox poller. Prints `rows=<n> seconds=<s> claims=<k>` on standard output.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use queuebox_bench::load_config_file;
use queuebox_engine::relay::{identity_headers, render_topic};
use queuebox_store::ForwardedRow;
use uuid::Uuid;

#[derive(Parser)]
#[command(about = "SQL floor of the QueueBox inbox relay")]
struct Args {
    /// The QueueBox configuration file (database, sources and inbox.relay are used).
    #[arg(long)]
    config: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = load_config_file(&args.config, &std::env::current_dir()?)?;
    let relay = &config.inbox.relay;
    let batch = relay.batch_size;
    let lease = Duration::from_millis(relay.claim_timeout_ms);
    let max_attempts = i32::try_from(relay.max_attempts)?;
    let mut sources: Vec<String> = config.sources.keys().cloned().collect();
    sources.sort_unstable();
    let store = queuebox_store_postgres::connect(&config.database)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;

    let started = Instant::now();
    let (mut rows, mut claims, mut lost) = (0u64, 0u64, 0u64);
    loop {
        let claimed = store
            .relay_claim(batch, lease, &sources)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        claims += 1;
        if claimed.is_empty() {
            break;
        }
        for row in claimed {
            let source = config
                .sources
                .get(&row.source)
                .ok_or_else(|| anyhow::anyhow!("row of unknown source {}", row.source))?;
            let topic = render_topic(&source.topic, &row.source, row.event_type.as_deref())
                .map_err(|e| anyhow::anyhow!("topic: {e}"))?;
            let headers = identity_headers(&row).map_err(|e| anyhow::anyhow!("{e}"))?;
            let forwarded = ForwardedRow {
                id: Uuid::now_v7(),
                topic,
                key: row.aggregate_id.clone(),
                payload: row.payload.clone(),
                headers,
                max_attempts,
            };
            if store
                .relay_forward(row.claim, &forwarded)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?
            {
                rows += 1;
            } else {
                lost += 1;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    if lost > 0 {
        anyhow::bail!("{lost} forwards lost their fence; the floor is not valid");
    }
    println!("rows={rows} seconds={seconds:.6} claims={claims}");
    Ok(())
}
