//! The driver's PostgreSQL side: one schema per phase (created, tracked, always dropped), the
//! QueueBox URL that lands in it, the benchmark rows, and the read-backs after a phase.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Context as _;
use tokio_postgres::{Client, NoTls};
use uuid::Uuid;

/// Connects and drives the connection on its own task.
pub async fn connect(url: &str) -> anyhow::Result<Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .with_context(|| format!("connecting to {url} (is PostgreSQL up? scripts/services.sh)"))?;
    tokio::spawn(connection);
    Ok(client)
}

/// A QueueBox `database.url` whose `search_path` is `schema` (configuration.md: QueueBox uses
/// the first schema of `search_path`).
pub fn queuebox_url(server: &str, schema: &str) -> String {
    let separator = if server.contains('?') { '&' } else { '?' };
    format!("{server}{separator}sslmode=disable&options=-c%20search_path%3D{schema}")
}

/// The schemas this run created, so every exit path can drop them.
pub struct Schemas {
    server: String,
    created: Mutex<Vec<String>>,
}

impl Schemas {
    pub fn new(server: &str) -> Self {
        Self {
            server: server.to_owned(),
            created: Mutex::new(Vec::new()),
        }
    }

    /// Creates `name` afresh and returns a client whose `search_path` is it.
    pub async fn create(&self, name: &str) -> anyhow::Result<Client> {
        let client = connect(&self.server).await?;
        self.created
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(name.to_owned());
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}; SET search_path = {name}"
            ))
            .await
            .with_context(|| format!("creating schema {name}"))?;
        Ok(client)
    }

    /// Drops one schema this run created.
    pub async fn drop(&self, client: &Client, name: &str) -> anyhow::Result<()> {
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
            .await
            .with_context(|| format!("dropping schema {name}"))?;
        self.created
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|n| n != name);
        Ok(())
    }

    /// Drops every schema created so far; failures are printed, never raised.
    pub async fn drop_all(&self) {
        let names = std::mem::take(&mut *self.created.lock().unwrap_or_else(|p| p.into_inner()));
        if names.is_empty() {
            return;
        }
        match connect(&self.server).await {
            Ok(client) => {
                for name in names {
                    if let Err(e) = client
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                        .await
                    {
                        eprintln!("qb-bench: could not drop schema {name}: {e}");
                    }
                }
            }
            Err(e) => eprintln!("qb-bench: could not drop schemas {names:?}: {e:#}"),
        }
    }
}

/// Rows `from..=to` in one statement: topic `bench.order.created`; every tenth row (i % 10 =
/// 0) has a NULL key, the others take `k0`..`k999` round robin; a JSON payload of about 200
/// bytes; `created_at` = `clock_timestamp()` of the row (scheduled_at keeps its default, the
/// statement's `now()`).
pub const INSERT_ROWS: &str = "\
INSERT INTO outbox (topic, key, payload, created_at)
SELECT 'bench.order.created',
       CASE WHEN i % 10 = 0 THEN NULL ELSE 'k' || ((i - i / 10) % 1000) END,
       jsonb_build_object(
           'orderId', i,
           'customerId', 'customer-' || (i % 5000),
           'status', 'created',
           'currency', 'EUR',
           'amountCents', (i * 7919) % 100000,
           'lineCount', 1 + i % 7,
           'channel', 'web',
           'note', repeat('x', 44)),
       clock_timestamp()
FROM generate_series($1::int8, $2::int8) AS g(i)";

/// The hot-key phase's rows: [`INSERT_ROWS`] with every row under the one key `hot`.
pub fn hot_rows_sql() -> String {
    INSERT_ROWS.replace(
        "CASE WHEN i % 10 = 0 THEN NULL ELSE 'k' || ((i - i / 10) % 1000) END",
        "'hot'",
    )
}

/// Inserts rows `from..=to` in one statement (autocommit); returns the elapsed time in ms.
pub async fn insert_rows(client: &Client, from: i64, to: i64) -> anyhow::Result<f64> {
    let started = Instant::now();
    client
        .execute(INSERT_ROWS, &[&from, &to])
        .await
        .context("inserting the benchmark rows")?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Inserts rows `from..=to` with the statement given and runs `ANALYZE outbox` in the same
/// transaction, so the rows and their statistics become visible at the same commit (this
/// server runs with autovacuum off, and without statistics the claim's plan scans every
/// pending row: see bench/README.md).
pub async fn insert_analyzed(
    client: &mut Client,
    sql: &str,
    from: i64,
    to: i64,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let tx = client.transaction().await?;
    tx.execute(sql, &[&from, &to])
        .await
        .context("inserting the benchmark rows")?;
    tx.batch_execute("ANALYZE outbox").await?;
    tx.commit().await?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Scans of `idx_outbox_pending` so far: the claim's plan (with statistics) starts exactly one
/// per claim, and the pending gauge one per refresh, so this counts claim statements. Read
/// after the claiming process exited (statistics are flushed when a session ends).
pub async fn pending_index_scans(client: &Client) -> anyhow::Result<i64> {
    let row = client
        .query_one(
            "SELECT COALESCE(sum(idx_scan), 0)::int8 FROM pg_stat_user_indexes \
             WHERE schemaname = current_schema() AND indexrelname = 'idx_outbox_pending'",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

/// The claim sizes: the claim writes one `claimed_at` for all the rows it takes, so the rows per
/// distinct `claimed_at` are the rows per claim. "p10 / p50 / p90 / mean (claims)".
pub async fn claim_sizes(client: &Client) -> anyhow::Result<String> {
    let row = client
        .query_one(
            "SELECT count(*)::int8, \
                    COALESCE(percentile_disc(0.1) WITHIN GROUP (ORDER BY n), 0)::int8, \
                    COALESCE(percentile_disc(0.5) WITHIN GROUP (ORDER BY n), 0)::int8, \
                    COALESCE(percentile_disc(0.9) WITHIN GROUP (ORDER BY n), 0)::int8, \
                    COALESCE(avg(n), 0)::float8 \
             FROM (SELECT count(*) AS n FROM outbox WHERE claimed_at IS NOT NULL \
                   GROUP BY claimed_at) c",
            &[],
        )
        .await?;
    Ok(format!(
        "{} / {} / {} / {:.1} ({} claims)",
        row.get::<_, i64>(1),
        row.get::<_, i64>(2),
        row.get::<_, i64>(3),
        row.get::<_, f64>(4),
        row.get::<_, i64>(0)
    ))
}

/// Rows not yet in a final state.
pub async fn unfinished(client: &Client) -> anyhow::Result<i64> {
    let row = client
        .query_one(
            "SELECT count(*) FROM outbox WHERE state IN ('pending', 'processing')",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

/// Row id → `created_at` in µs since the epoch.
pub async fn created_us(client: &Client) -> anyhow::Result<HashMap<Uuid, i64>> {
    let rows = client
        .query(
            "SELECT id, (extract(epoch FROM created_at) * 1000000)::int8 FROM outbox",
            &[],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// `state=count` pairs, e.g. `sent=100000`.
pub async fn state_counts(client: &Client) -> anyhow::Result<String> {
    let rows = client
        .query(
            "SELECT state::text, count(*) FROM outbox GROUP BY state ORDER BY state",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| format!("{}={}", r.get::<_, String>(0), r.get::<_, i64>(1)))
        .collect::<Vec<_>>()
        .join(", "))
}

/// Mean payload size in bytes, as JSON text.
pub async fn payload_bytes(client: &Client) -> anyhow::Result<f64> {
    let row = client
        .query_one(
            "SELECT COALESCE(avg(octet_length(payload::text)), 0)::float8 FROM outbox",
            &[],
        )
        .await?;
    Ok(row.get(0))
}

/// Server version and the settings that matter to these figures.
pub async fn server_facts(client: &Client) -> anyhow::Result<Vec<(String, String)>> {
    let mut facts = Vec::new();
    for name in [
        "server_version",
        "shared_buffers",
        "synchronous_commit",
        "fsync",
        "wal_level",
        "autovacuum",
        "max_connections",
    ] {
        let row = client
            .query_one("SELECT current_setting($1)", &[&name])
            .await?;
        facts.push((name.to_owned(), row.get(0)));
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_sets_the_search_path() {
        assert_eq!(
            queuebox_url("postgres://u@h:5432/test", "s1"),
            "postgres://u@h:5432/test?sslmode=disable&options=-c%20search_path%3Ds1"
        );
        assert!(queuebox_url("postgres://u@h/test?x=1", "s").contains("?x=1&sslmode"));
    }
}
