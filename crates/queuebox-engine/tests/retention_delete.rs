//! Retention against the real PostgreSQL store (operations.md §7): old `processed`/`dead` inbox
//! rows and old `sent`/`dead` outbox rows go in batches, `pending`/`processing` rows and recent
//! rows stay, and a stop ends a run between two DELETEs.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use queuebox_engine::EngineError;
use queuebox_engine::retention::{Retention, RetentionSettings, TableRetention};
use queuebox_store::{RetentionRule, Store, StoreError};
use queuebox_telemetry::{Metrics, Table};
use support::{Hooked, InboxHooks, TestDb};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(10);
const HOUR: Duration = Duration::from_secs(3600);

/// In front of the real store: counts its DELETEs; with `cancel_after`, it cancels `cancel`
/// once that many DELETEs have returned (a stop request that arrives during a run).
struct Counting {
    deletes: AtomicUsize,
    cancel_after: Option<(usize, CancellationToken)>,
}

#[async_trait]
impl InboxHooks for Counting {
    async fn retention_delete(
        &self,
        store: &dyn Store,
        rule: RetentionRule,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let deleted = store.retention_delete(rule, batch).await;
        let n = self.deletes.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some((after, cancel)) = &self.cancel_after
            && n >= *after
        {
            cancel.cancel();
        }
        deleted
    }
}

/// Inserts `n` inbox rows in `state`, received `age_s` seconds ago.
async fn inbox_rows(db: &TestDb, state: &str, n: usize, age_s: f64) {
    for _ in 0..n {
        let processing = state == "processing";
        db.admin
            .execute(
                "INSERT INTO inbox (id, source, idempotency_key, payload, state, created_at, \
                 claim_token, lease_expires_at) \
                 VALUES ($1, 'partner', $2, '{}'::jsonb, $3, now() - $4::float8 * interval '1 second', \
                 CASE WHEN $5 THEN gen_random_uuid() END, CASE WHEN $5 THEN now() + interval '1 hour' END)",
                &[
                    &Uuid::now_v7(),
                    &Uuid::new_v4().to_string(),
                    &state,
                    &age_s,
                    &processing,
                ],
            )
            .await
            .expect("insert an inbox row");
    }
}

/// Inserts `n` outbox rows in `state`, last changed `age_s` seconds ago.
async fn outbox_rows(db: &TestDb, state: &str, n: usize, age_s: f64) {
    for _ in 0..n {
        db.admin
            .execute(
                "INSERT INTO outbox (id, topic, payload, state, created_at, updated_at) \
                 VALUES ($1, 't', '{}'::jsonb, $2, now() - $3::float8 * interval '1 second', \
                 now() - $3::float8 * interval '1 second')",
                &[&Uuid::now_v7(), &state, &age_s],
            )
            .await
            .expect("insert an outbox row");
    }
}

/// Rows per state of `table`, as `state:count` sorted by state.
async fn states(db: &TestDb, table: &str) -> Vec<(String, i64)> {
    db.admin
        .query(
            &format!("SELECT state, count(*) FROM {table} GROUP BY state ORDER BY state"),
            &[],
        )
        .await
        .expect("count rows")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

fn owned(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
    pairs.iter().map(|(s, n)| ((*s).to_owned(), *n)).collect()
}

fn start(
    store: Arc<Hooked<Counting>>,
    settings: RetentionSettings,
    cancel: CancellationToken,
) -> (Metrics, JoinHandle<Result<(), EngineError>>) {
    let metrics = Metrics::new("test");
    let retention = Retention::new(store, settings, metrics.clone());
    let task = tokio::spawn(retention.run(cancel));
    (metrics, task)
}

async fn wait_for_runs(metrics: &Metrics, tables: &[Table]) {
    let started = Instant::now();
    while !tables
        .iter()
        .all(|t| metrics.cleanup_duration(*t).count() >= 1)
    {
        assert!(started.elapsed() < LIMIT, "the first runs did not end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_2_to_6_old_finished_rows_of_both_tables_go_in_batches_and_others_stay() {
    let db = TestDb::new("retention").await;
    let two_hours = 7200.0;
    inbox_rows(&db, "processed", 4, two_hours).await;
    inbox_rows(&db, "dead", 3, two_hours).await;
    inbox_rows(&db, "pending", 2, two_hours).await;
    inbox_rows(&db, "processing", 1, two_hours).await;
    inbox_rows(&db, "processed", 2, 60.0).await;
    outbox_rows(&db, "sent", 5, two_hours).await;
    outbox_rows(&db, "dead", 1, two_hours).await;
    outbox_rows(&db, "pending", 2, two_hours).await;
    outbox_rows(&db, "processing", 1, two_hours).await;
    outbox_rows(&db, "sent", 1, 60.0).await;
    let store = Arc::new(Hooked {
        store: db.store().await,
        hooks: Counting {
            deletes: AtomicUsize::new(0),
            cancel_after: None,
        },
    });
    let table = |rule| {
        Some(TableRetention {
            rule,
            cleanup_interval: HOUR,
            batch: 3,
        })
    };
    let settings = RetentionSettings {
        outbox: table(RetentionRule::OutboxOlderThan(HOUR)),
        inbox: table(RetentionRule::InboxOlderThan(HOUR)),
    };
    let cancel = CancellationToken::new();
    let (metrics, task) = start(Arc::clone(&store), settings, cancel.clone());
    wait_for_runs(&metrics, &[Table::Inbox, Table::Outbox]).await;
    cancel.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(
        states(&db, "inbox").await,
        owned(&[("pending", 2), ("processed", 2), ("processing", 1)])
    );
    assert_eq!(
        states(&db, "outbox").await,
        owned(&[("pending", 2), ("processing", 1), ("sent", 1)])
    );
    assert_eq!(metrics.cleanup_messages_deleted(Table::Inbox).get(), 7);
    assert_eq!(metrics.cleanup_messages_deleted(Table::Outbox).get(), 6);
    // 7 inbox rows in batches of 3: 3 + 3 + 1; 6 outbox rows: 3 + 3 + 0.
    assert_eq!(store.hooks.deletes.load(Ordering::SeqCst), 6);
    assert!(
        metrics
            .render()
            .contains("queuebox_cleanup_last_run_timestamp{table=\"inbox\"}")
    );
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_5_count_keeps_the_newest_sent_and_dead_rows_separately() {
    let db = TestDb::new("retcount").await;
    outbox_rows(&db, "sent", 5, 10.0).await;
    outbox_rows(&db, "dead", 3, 10.0).await;
    outbox_rows(&db, "pending", 4, 10.0).await;
    let store = Arc::new(Hooked {
        store: db.store().await,
        hooks: Counting {
            deletes: AtomicUsize::new(0),
            cancel_after: None,
        },
    });
    let settings = RetentionSettings {
        outbox: Some(TableRetention {
            rule: RetentionRule::OutboxKeepNewest(2),
            cleanup_interval: HOUR,
            batch: 100,
        }),
        inbox: None,
    };
    let cancel = CancellationToken::new();
    let (metrics, task) = start(store, settings, cancel.clone());
    wait_for_runs(&metrics, &[Table::Outbox]).await;
    cancel.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(
        states(&db, "outbox").await,
        owned(&[("dead", 2), ("pending", 4), ("sent", 2)])
    );
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_26_phase_7_a_stop_during_a_run_ends_it_between_two_deletes() {
    let db = TestDb::new("retstop").await;
    inbox_rows(&db, "processed", 10, 7200.0).await;
    let cancel = CancellationToken::new();
    let store = Arc::new(Hooked {
        store: db.store().await,
        hooks: Counting {
            deletes: AtomicUsize::new(0),
            cancel_after: Some((1, cancel.clone())),
        },
    });
    let settings = RetentionSettings {
        outbox: None,
        inbox: Some(TableRetention {
            rule: RetentionRule::InboxOlderThan(HOUR),
            cleanup_interval: HOUR,
            batch: 3,
        }),
    };
    let (metrics, task) = start(Arc::clone(&store), settings, cancel);
    tokio::time::timeout(LIMIT, task)
        .await
        .expect("retention stops in time")
        .unwrap()
        .unwrap();
    assert_eq!(
        store.hooks.deletes.load(Ordering::SeqCst),
        1,
        "no DELETE after the stop"
    );
    assert_eq!(states(&db, "inbox").await, owned(&[("processed", 7)]));
    assert_eq!(metrics.cleanup_messages_deleted(Table::Inbox).get(), 3);
    assert_eq!(metrics.cleanup_duration(Table::Inbox).count(), 1);
    db.drop().await;
}
