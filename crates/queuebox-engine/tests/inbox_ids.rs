//! The engine side of the retention requirements, one test per id (operations.md RET-10),
//! against the real PostgreSQL store.

mod support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use queuebox_engine::retention::{Retention, RetentionSettings, TableRetention};
use queuebox_store::RetentionRule;
use queuebox_telemetry::{Metrics, Table};
use support::TestDb;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(5);
const HOUR: Duration = Duration::from_secs(3600);

/// Inserts `n` processed inbox rows received two hours ago.
async fn old_processed(db: &TestDb, n: usize) {
    for _ in 0..n {
        db.admin
            .execute(
                "INSERT INTO inbox (id, source, idempotency_key, payload, state, created_at) \
                 VALUES ($1, 'partner', $2, '{}'::jsonb, 'processed', now() - interval '2 hours')",
                &[&Uuid::now_v7(), &Uuid::new_v4().to_string()],
            )
            .await
            .expect("insert an inbox row");
    }
}

/// The value of `queuebox_cleanup_last_run_timestamp{table="…"}` in the exposition text.
fn last_run(metrics: &Metrics, table: &str) -> Option<f64> {
    let sample = format!("queuebox_cleanup_last_run_timestamp{{table=\"{table}\"}}");
    metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(sample.as_str())?.trim().parse().ok())
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

async fn wait_for_run(metrics: &Metrics, runs: u64) {
    let started = Instant::now();
    while metrics.cleanup_duration(Table::Inbox).count() < runs {
        assert!(started.elapsed() < LIMIT, "run {runs} did not end");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// RET-10: per run, `queuebox_cleanup_messages_deleted_total{table}` rises by the rows that run
/// deleted, `queuebox_cleanup_duration_seconds{table}` records one observation, and
/// `queuebox_cleanup_last_run_timestamp{table}` is set when the run ends, also after a failed
/// run. The other table's series do not move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_10_each_run_updates_deleted_duration_and_last_run_also_after_a_failure() {
    let db = TestDb::new("ret10").await;
    old_processed(&db, 5).await;
    let store = db.store().await;
    let settings = RetentionSettings {
        outbox: None,
        inbox: Some(TableRetention {
            rule: RetentionRule::InboxOlderThan(HOUR),
            cleanup_interval: Duration::from_millis(400),
            batch: 2,
        }),
    };
    let metrics = Metrics::new("test");
    let cancel = CancellationToken::new();
    assert_eq!(last_run(&metrics, "inbox").unwrap_or(0.0), 0.0);
    let before_first = now_s();
    let task = tokio::spawn(Retention::new(store, settings, metrics.clone()).run(cancel.clone()));

    // Run 1: 5 rows in DELETEs of 2 + 2 + 1.
    wait_for_run(&metrics, 1).await;
    let deleted = metrics.cleanup_messages_deleted(Table::Inbox);
    assert_eq!(deleted.get(), 5);
    let first = last_run(&metrics, "inbox").expect("the last-run gauge is exposed");
    assert!(
        first >= before_first - 1.0 && first <= now_s() + 1.0,
        "{first} is the end of run 1"
    );

    // Run 2: the counter rises by what this run deleted, the gauge moves on.
    old_processed(&db, 3).await;
    wait_for_run(&metrics, 2).await;
    assert_eq!(deleted.get(), 8, "5 + 3");
    let second = last_run(&metrics, "inbox").unwrap();
    assert!(second > first, "run 2 ended after run 1: {first} {second}");

    // Run 3 fails (the table is gone): no rows counted, but the duration and the last-run time
    // are recorded.
    db.admin
        .batch_execute("ALTER TABLE inbox RENAME TO inbox_away")
        .await
        .unwrap();
    let durations = metrics.cleanup_duration(Table::Inbox).count();
    wait_for_run(&metrics, durations + 1).await;
    let third = last_run(&metrics, "inbox").unwrap();
    assert!(third > second, "set after a failed run: {second} {third}");
    assert_eq!(
        deleted.get(),
        8,
        "a failed run deleted nothing it could count"
    );

    cancel.cancel();
    task.await.unwrap().unwrap();
    db.admin
        .batch_execute("ALTER TABLE inbox_away RENAME TO inbox")
        .await
        .unwrap();
    // The outbox was not cleaned: its series never moved.
    assert_eq!(metrics.cleanup_messages_deleted(Table::Outbox).get(), 0);
    assert_eq!(metrics.cleanup_duration(Table::Outbox).count(), 0);
    assert_eq!(last_run(&metrics, "outbox").unwrap_or(0.0), 0.0);
    db.drop().await;
}
