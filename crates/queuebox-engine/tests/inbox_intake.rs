//! The write-combining intake against the real PostgreSQL store (inbox.md §9): concurrent rows
//! share transactions, every caller is answered only after its row is committed, and repeats
//! are duplicates.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use queuebox_core::intake::{IntakeOutcome, Refusal, StoredState};
use queuebox_engine::intake::refused::WhenRefused;
use queuebox_engine::intake::writer::{IntakeWriter, WriterHandle, WriterSettings};
use queuebox_store::{Consumption, InsertOutcome, NewInboxRow, Schedule, Store, StoreError};
use queuebox_telemetry::{InboxStatus, Metrics};
use support::{Hooked, InboxHooks, TestDb};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// In front of the real store: counts its `insert_batch` calls (each is one transaction).
struct Counting {
    batches: AtomicUsize,
    /// The size of every `insert_batch` call, in call order.
    sizes: std::sync::Mutex<Vec<usize>>,
    /// How long the first call waits before it writes, so that the rows sent meanwhile queue
    /// up and form one batch.
    hold_first: Duration,
}

#[async_trait]
impl InboxHooks for Counting {
    async fn insert_batch(
        &self,
        store: &dyn Store,
        rows: &[NewInboxRow],
    ) -> Result<Vec<InsertOutcome>, StoreError> {
        if self.batches.fetch_add(1, Ordering::SeqCst) == 0 {
            tokio::time::sleep(self.hold_first).await;
        }
        self.sizes.lock().unwrap().push(rows.len());
        store.insert_batch(rows).await
    }
}

fn row(key: &str) -> NewInboxRow {
    NewInboxRow {
        raw_body: None,
        id: Uuid::now_v7(),
        source: "orders".into(),
        idempotency_key: key.into(),
        aggregate_id: Some("order-1".into()),
        event_type: Some("order.created".into()),
        payload: r#"{"n":1}"#.into(),
        headers: r#"{"x-tenant":"acme"}"#.into(),
        consumption: Consumption::Push,
        correlation_id: None,
        schedule: Schedule::AfterReceipt {
            delay: Duration::ZERO,
        },
        state: StoredState::Pending,
        last_error: None,
    }
}

async fn rows_with_id(db: &TestDb, id: Uuid) -> i64 {
    db.admin
        .query_one("SELECT count(*) FROM inbox WHERE id = $1", &[&id])
        .await
        .expect("count inbox rows")
        .get(0)
}

struct Started {
    intake: WriterHandle,
    store: Arc<Hooked<Counting>>,
    metrics: Metrics,
    relay_wake: Arc<Notify>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), queuebox_engine::EngineError>>,
}

async fn start(db: &TestDb) -> Started {
    start_holding_first(db, Duration::ZERO).await
}

async fn start_holding_first(db: &TestDb, hold_first: Duration) -> Started {
    let store = Arc::new(Hooked {
        store: db.store().await,
        hooks: Counting {
            batches: AtomicUsize::new(0),
            sizes: std::sync::Mutex::new(Vec::new()),
            hold_first,
        },
    });
    let metrics = Metrics::new("test");
    let relay_wake = Arc::new(Notify::new());
    let intake = IntakeWriter::new(
        Arc::clone(&store) as _,
        WriterSettings {
            max_batch: 256,
            queue: 1024,
        },
        metrics.clone(),
        Arc::clone(&relay_wake),
    );
    let handle = intake.handle();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(intake.run(cancel.clone()));
    Started {
        intake: handle,
        store,
        metrics,
        relay_wake,
        cancel,
        task,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_rows_share_few_transactions_and_each_is_answered_after_its_commit() {
    let db = Arc::new(TestDb::new("intakebatch").await);
    let s = start(&db).await;
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let intake = s.intake.clone();
            let db = Arc::clone(&db);
            tokio::spawn(async move {
                let row = row(&format!("evt-{i}"));
                let id = row.id;
                let outcome = intake.store(row).await;
                assert_eq!(
                    outcome,
                    IntakeOutcome::New {
                        id,
                        state: StoredState::Pending
                    }
                );
                // Read through another connection at once: the answer came after the commit.
                assert_eq!(rows_with_id(&db, id).await, 1, "row {i} is visible");
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a caller does not panic");
    }
    let batches = s.store.hooks.batches.load(Ordering::SeqCst);
    assert!(batches <= 10, "50 rows took {batches} transactions");
    assert_eq!(s.metrics.inbox_messages(InboxStatus::New).get(), 50);
    let woken = tokio::time::timeout(Duration::from_secs(1), s.relay_wake.notified()).await;
    assert!(woken.is_ok(), "stored push rows wake the relay (RLY-14)");
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
    let db = Arc::into_inner(db).expect("no other owner");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_50_repeats_in_one_batch_and_later_are_duplicates_and_store_one_row() {
    let db = TestDb::new("intakedup").await;
    let s = start(&db).await;
    // Three at once (one or two batches), then one more after they committed.
    let (a, b, c) = tokio::join!(
        s.intake.store(row("same")),
        s.intake.store(row("same")),
        s.intake.store(row("other")),
    );
    let outcomes = [a, b, c];
    let duplicates = outcomes
        .iter()
        .filter(|o| **o == IntakeOutcome::Duplicate)
        .count();
    assert_eq!(duplicates, 1, "{outcomes:?}");
    let later = row("same");
    let later_id = later.id;
    assert_eq!(s.intake.store(later).await, IntakeOutcome::Duplicate);
    assert_eq!(rows_with_id(&db, later_id).await, 0);
    let stored: i64 = db
        .admin
        .query_one(
            "SELECT count(*) FROM inbox WHERE idempotency_key = 'same'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 1);
    assert_eq!(s.metrics.inbox_messages(InboxStatus::New).get(), 2);
    assert_eq!(s.metrics.inbox_messages(InboxStatus::Duplicate).get(), 2);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
    assert_eq!(
        s.intake.store(row("after-stop")).await,
        IntakeOutcome::ShuttingDown
    );
    db.drop().await;
}

/// A row whose data PostgreSQL refuses (`\u0000` in a JSON string: `jsonb` cannot hold it) fails
/// alone: the other rows of its batch are stored, one by one after the batch failed, and only its
/// sender gets the storage failure (INB-10's 500), never a row of another sender.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_the_database_refuses_fails_alone_and_its_batch_is_stored() {
    let db = TestDb::new("intakereject").await;
    let s = start_holding_first(&db, Duration::from_millis(300)).await;
    // The first row opens a held batch; the next ten, one of them refused, queue behind it.
    let first = {
        let intake = s.intake.clone();
        tokio::spawn(async move { intake.store(row("first")).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut poison = row("poison");
    poison.payload = r#"{"note":"a\u0000b"}"#.into();
    let mut rows: Vec<NewInboxRow> = (0..9).map(|i| row(&format!("good-{i}"))).collect();
    rows.insert(4, poison);
    let calls: Vec<_> = rows
        .into_iter()
        .map(|r| {
            let intake = s.intake.clone();
            let key = r.idempotency_key.clone();
            tokio::spawn(async move { (key, intake.store(r).await) })
        })
        .collect();
    assert!(matches!(first.await.unwrap(), IntakeOutcome::New { .. }));
    for call in calls {
        let (key, outcome) = call.await.unwrap();
        if key == "poison" {
            match outcome {
                // Issue 17 defect 7: refused for good (a 4xx), not a failure to retry.
                IntakeOutcome::Refused(Refusal::DataRejected { reason }) => {
                    assert!(
                        reason.contains("storing inbox rows")
                            && reason.contains("unsupported Unicode escape sequence"),
                        "{reason}"
                    )
                }
                other => panic!("the refused row: {other:?}"),
            }
        } else {
            assert!(
                matches!(outcome, IntakeOutcome::New { .. }),
                "{key}: {outcome:?}"
            );
        }
    }
    let sizes = s.store.hooks.sizes.lock().unwrap().clone();
    assert_eq!(sizes[0], 1, "{sizes:?}");
    assert_eq!(
        sizes[1], 10,
        "the ten queued rows formed one batch: {sizes:?}"
    );
    assert_eq!(&sizes[2..], &[1; 10], "then each row alone: {sizes:?}");
    let stored: i64 = db
        .admin
        .query_one("SELECT count(*) FROM inbox", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 10, "every row but the refused one");
    assert_eq!(s.metrics.inbox_messages(InboxStatus::New).get(), 10);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
    db.drop().await;
}

/// INB-54 with a row PostgreSQL refuses: a broker message may be acknowledged only once it is
/// durable, and one never acknowledged comes back for ever (a Kafka partition stops at it). So
/// a broker's refused row is stored `dead` in its place, with `\u0000` replaced by U+FFFD in its
/// JSON and its texts; the outcome is settled (acknowledged), and the rows of its group are
/// stored as they were. Before, the refusal itself counted as settled: the broker was
/// acknowledged and nothing was stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_54_a_broker_row_the_database_refuses_is_stored_dead_in_its_place() {
    let db = TestDb::new("intakerefuseddead").await;
    let s = start(&db).await;
    let mut poison = row("poison");
    poison.payload = r#"{"note":"a\u0000b","n":2}"#.into();
    poison.headers = r#"{"x-tenant":"ac\u0000me"}"#.into();
    poison.aggregate_id = Some("order\u{0}-2".into());
    let poison_id = poison.id;
    let group: Vec<(NewInboxRow, WhenRefused)> = [row("before"), poison, row("after")]
        .into_iter()
        .map(|r| (r, WhenRefused::StoreDead))
        .collect();
    let answers = s.intake.queue_all(group).await.unwrap();
    let mut outcomes = Vec::new();
    for answer in answers {
        outcomes.push(answer.await.unwrap());
    }
    assert!(
        outcomes.iter().all(IntakeOutcome::is_settled),
        "{outcomes:?}"
    );
    assert!(
        matches!(
            outcomes[1],
            IntakeOutcome::New {
                state: StoredState::Dead,
                id
            } if id == poison_id
        ),
        "{:?}",
        outcomes[1]
    );
    let dead = db
        .admin
        .query_one(
            "SELECT state, payload::text, headers->>'x-tenant', aggregate_id, last_error FROM inbox WHERE id = $1",
            &[&poison_id],
        )
        .await
        .unwrap();
    assert_eq!(dead.get::<_, String>(0), "dead");
    assert_eq!(
        dead.get::<_, String>(1),
        "{\"n\": 2, \"note\": \"a\u{FFFD}b\"}"
    );
    assert_eq!(dead.get::<_, String>(2), "ac\u{FFFD}me");
    assert_eq!(dead.get::<_, String>(3), "order\u{FFFD}-2");
    let last_error: String = dead.get(4);
    assert!(
        last_error.starts_with("The database refused the message's data (")
            && last_error.contains("(SQLSTATE 22")
            && last_error.ends_with("it was stored dead, with U+0000 replaced by U+FFFD."),
        "{last_error}"
    );
    let states: Vec<(String, String)> = db
        .admin
        .query(
            "SELECT idempotency_key, state FROM inbox ORDER BY idempotency_key",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        states,
        [
            ("after".to_owned(), "pending".to_owned()),
            ("before".to_owned(), "pending".to_owned()),
            ("poison".to_owned(), "dead".to_owned()),
        ]
    );
    // A redelivery of the same message is a duplicate of its dead row.
    let mut again = row("poison");
    again.payload = r#"{"note":"a\u0000b","n":2}"#.into();
    let answer = s.intake.queue(again, WhenRefused::StoreDead).await.unwrap();
    assert_eq!(answer.await.unwrap(), IntakeOutcome::Duplicate);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
    db.drop().await;
}
