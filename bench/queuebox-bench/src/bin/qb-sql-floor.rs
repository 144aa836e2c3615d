//! `qb-sql-floor`: the SQL floor of the outbox drain. Runs QueueBox's own claim and mark
//! statements (`OutboxStore::claim` + `finish` with `Sent` for every row) through
//! the PostgreSQL store (`queuebox_store_postgres::connect`), built from the same configuration file as the measured
//! QueueBox, in a loop until a claim returns nothing: one claimer, claim then mark, strictly one
//! after the other, no delivery. Prints `rows=<n> seconds=<s> claims=<k>` on standard output.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use queuebox_bench::load_config_file;
use queuebox_store::TerminalWrite;

#[derive(Parser)]
#[command(about = "SQL floor of the QueueBox outbox drain")]
struct Args {
    /// The QueueBox configuration file (database and outbox.batchSize are used).
    #[arg(long)]
    config: PathBuf,
    /// Marks each claim's rows in statements of at most this many rows, one after the other
    /// (0: all of a claim's rows in one statement, as the documented floor does). QueueBox's
    /// writer marks what finished while its previous write ran, so its statements are smaller
    /// than a claim; this shows what that costs the database.
    #[arg(long, default_value_t = 0)]
    mark_batch: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = load_config_file(&args.config, &std::env::current_dir()?)?;
    let batch = config.outbox.batch_size;
    let lease = Duration::from_millis(config.outbox.claim_timeout_ms);
    let store = queuebox_store_postgres::connect(&config.database)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;

    let started = Instant::now();
    let (mut rows, mut claims, mut lost) = (0u64, 0u64, 0usize);
    loop {
        let claimed = store
            .claim(batch, lease)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        claims += 1;
        if claimed.is_empty() {
            break;
        }
        let writes: Vec<TerminalWrite> = claimed
            .iter()
            .map(|row| TerminalWrite::Sent { claim: row.claim })
            .collect();
        let chunk = if args.mark_batch == 0 {
            writes.len()
        } else {
            args.mark_batch
        };
        for part in writes.chunks(chunk) {
            let written = store
                .finish(part)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            lost += part.len() - written.len();
            rows += written.len() as u64;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    if lost > 0 {
        anyhow::bail!("{lost} marks lost their fence; the floor is not valid");
    }
    println!("rows={rows} seconds={seconds:.6} claims={claims}");
    Ok(())
}
