//! The batching rules of the intake against an in-memory store (the PostgreSQL behaviour is in
//! `tests/inbox_intake.rs`).

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use queuebox_store::{Schedule, StoreAction, StoreError};
use uuid::Uuid;

use super::*;

const TELL: WhenRefused = WhenRefused::TellTheSender;

/// Remembers the batches it was given; the first `gated` calls wait for `gate`.
#[derive(Default)]
struct Memory {
    keys: Mutex<HashSet<(String, String)>>,
    stored: Mutex<Vec<NewInboxRow>>,
    batches: Mutex<Vec<usize>>,
    gate: Notify,
    gated: Mutex<usize>,
    fail: Mutex<bool>,
}

#[async_trait]
impl IntakeStore for Memory {
    async fn insert_batch(&self, rows: &[NewInboxRow]) -> Result<Vec<InsertOutcome>, StoreError> {
        self.batches.lock().unwrap().push(rows.len());
        let wait = {
            let mut gated = self.gated.lock().unwrap();
            let wait = *gated > 0;
            *gated = gated.saturating_sub(1);
            wait
        };
        if wait {
            self.gate.notified().await;
        }
        // As PostgreSQL's jsonb: a `\u0000` in a JSON string is refused, and the whole batch
        // with it.
        if rows
            .iter()
            .any(|r| r.payload.contains("\\u0000") || r.headers.contains("\\u0000"))
        {
            return Err(StoreError::DataRejected {
                action: StoreAction::UseDatabase,
                during: "storing inbox rows",
                reason: "unsupported Unicode escape sequence".into(),
            });
        }
        if rows.iter().any(|r| r.source == "refuses-everything") {
            return Err(StoreError::DataRejected {
                action: StoreAction::UseDatabase,
                during: "storing inbox rows",
                reason: "value too long for type character varying(128)".into(),
            });
        }
        if *self.fail.lock().unwrap() {
            return Err(StoreError::Database {
                action: StoreAction::UseDatabase,
                during: "storing inbox rows",
                reason: "password=hunter2 connection reset".into(),
            });
        }
        let mut keys = self.keys.lock().unwrap();
        Ok(rows
            .iter()
            .map(|r| {
                if keys.insert((r.source.clone(), r.idempotency_key.clone())) {
                    self.stored.lock().unwrap().push(r.clone());
                    InsertOutcome::Stored(r.id)
                } else {
                    InsertOutcome::Duplicate
                }
            })
            .collect())
    }
}

fn row(key: &str, consumption: Consumption) -> NewInboxRow {
    NewInboxRow {
        raw_body: None,
        id: Uuid::now_v7(),
        source: "orders".into(),
        idempotency_key: key.into(),
        aggregate_id: None,
        event_type: None,
        payload: "{}".into(),
        headers: "{}".into(),
        consumption,
        correlation_id: None,
        schedule: Schedule::AfterReceipt {
            delay: Duration::ZERO,
        },
        state: StoredState::Pending,
        last_error: None,
    }
}

struct Started {
    handle: WriterHandle,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), EngineError>>,
    metrics: Metrics,
    wake: Arc<Notify>,
}

fn start(store: Arc<Memory>, settings: WriterSettings) -> Started {
    let metrics = Metrics::new("test");
    let wake = Arc::new(Notify::new());
    let intake = IntakeWriter::new(store, settings, metrics.clone(), Arc::clone(&wake));
    let handle = intake.handle();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(intake.run(cancel.clone()));
    Started {
        handle,
        cancel,
        task,
        metrics,
        wake,
    }
}

/// Starts a writer whose first batch (the row `k0` alone, sent by the returned task) waits in
/// the store until `store.gate` is notified, so the rows queued meanwhile wait behind it.
async fn start_with_the_first_batch_held(
    store: &Arc<Memory>,
    settings: WriterSettings,
) -> (Started, Vec<tokio::task::JoinHandle<IntakeOutcome>>) {
    *store.gated.lock().unwrap() = 1;
    let s = start(Arc::clone(store), settings);
    let first = send_all(&s.handle, ["k0".to_owned()]);
    wait_until("the first batch", || {
        store.batches.lock().unwrap().len() == 1
    })
    .await;
    (s, first)
}

/// Spawns one `store` call per key.
fn send_all(
    handle: &WriterHandle,
    keys: impl IntoIterator<Item = String>,
) -> Vec<tokio::task::JoinHandle<IntakeOutcome>> {
    keys.into_iter()
        .map(|key| {
            let handle = handle.clone();
            tokio::spawn(async move { handle.store(row(&key, Consumption::Pull)).await })
        })
        .collect()
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..400 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{what} did not happen");
}

#[tokio::test]
async fn batching_gathers_rows_that_wait_during_a_store_call_into_one_batch_and_answers_after_it() {
    let store = Arc::new(Memory::default());
    let (s, first) = start_with_the_first_batch_held(&store, WriterSettings::default()).await;
    let rest = send_all(&s.handle, (1..20).map(|i| format!("k{i}")));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        first.iter().chain(&rest).all(|t| !t.is_finished()),
        "nobody is answered before the store call returned"
    );
    store.gate.notify_one();
    for task in first.into_iter().chain(rest) {
        assert!(matches!(task.await.unwrap(), IntakeOutcome::New { .. }));
    }
    assert_eq!(*store.batches.lock().unwrap(), vec![1, 19]);
    assert_eq!(s.metrics.inbox_messages(InboxStatus::New).get(), 20);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn batching_never_exceeds_max_batch() {
    let store = Arc::new(Memory::default());
    let settings = WriterSettings {
        max_batch: 4,
        queue: 64,
    };
    let (s, first) = start_with_the_first_batch_held(&store, settings).await;
    let rest = send_all(&s.handle, (1..11).map(|i| format!("k{i}")));
    tokio::time::sleep(Duration::from_millis(50)).await;
    store.gate.notify_one();
    for task in first.into_iter().chain(rest) {
        assert!(matches!(task.await.unwrap(), IntakeOutcome::New { .. }));
    }
    assert_eq!(*store.batches.lock().unwrap(), vec![1, 4, 4, 2]);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

/// INB-65: a poll's records, queued as one group, are one insert, even when the queue has
/// room for fewer rows than the group holds (here one place): queued row by row, the second row
/// would wait for room, the writer would take the first alone, and one poll would cost two
/// commits (as measured on the Kafka source before groups).
#[tokio::test]
async fn inb_65_a_group_is_stored_in_one_batch_and_takes_one_place_of_the_queue() {
    let store = Arc::new(Memory::default());
    let settings = WriterSettings {
        max_batch: 256,
        queue: 1,
    };
    let s = start(Arc::clone(&store), settings);
    for round in 0..5 {
        let rows = (0..100).map(|i| (row(&format!("r{round}-{i}"), Consumption::Pull), TELL));
        let answers = s.handle.queue_all(rows.collect()).await.unwrap();
        for answer in answers {
            assert!(matches!(answer.await.unwrap(), IntakeOutcome::New { .. }));
        }
    }
    let batches = store.batches.lock().unwrap().clone();
    assert_eq!(batches, vec![100; 5], "one insert per group");
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_group_that_fits_in_a_batch_is_not_split_by_the_rows_queued_before_it() {
    let store = Arc::new(Memory::default());
    let settings = WriterSettings {
        max_batch: 4,
        queue: 16,
    };
    let (s, first) = start_with_the_first_batch_held(&store, settings).await;
    // Queued while the first batch is with the store: two single rows, then a group of three
    // that would straddle a batch of four.
    let mut singles = Vec::new();
    for key in ["k1", "k2"] {
        singles.push(
            s.handle
                .queue(row(key, Consumption::Pull), TELL)
                .await
                .unwrap(),
        );
    }
    let group = s
        .handle
        .queue_all(
            ["g1", "g2", "g3"]
                .map(|k| (row(k, Consumption::Pull), TELL))
                .to_vec(),
        )
        .await
        .unwrap();
    store.gate.notify_one();
    for answer in singles.into_iter().chain(group) {
        assert!(matches!(answer.await.unwrap(), IntakeOutcome::New { .. }));
    }
    for task in first {
        assert!(matches!(task.await.unwrap(), IntakeOutcome::New { .. }));
    }
    assert_eq!(*store.batches.lock().unwrap(), vec![1, 2, 3]);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_group_larger_than_max_batch_is_stored_in_consecutive_batches_in_its_order() {
    let store = Arc::new(Memory::default());
    let settings = WriterSettings {
        max_batch: 4,
        queue: 8,
    };
    let s = start(Arc::clone(&store), settings);
    let keys: Vec<String> = (0..10).map(|i| format!("g{i}")).collect();
    let answers = s
        .handle
        .queue_all(
            keys.iter()
                .map(|k| (row(k, Consumption::Pull), TELL))
                .collect(),
        )
        .await
        .unwrap();
    assert_eq!(answers.len(), 10);
    for answer in answers {
        assert!(matches!(answer.await.unwrap(), IntakeOutcome::New { .. }));
    }
    assert_eq!(*store.batches.lock().unwrap(), vec![4, 4, 2]);
    let empty = s.handle.queue_all(Vec::new()).await.unwrap();
    assert!(empty.is_empty(), "an empty group queues nothing");
    assert_eq!(store.batches.lock().unwrap().len(), 3);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn inb_50_a_repeat_in_the_same_batch_or_later_is_a_duplicate_and_counted() {
    let store = Arc::new(Memory::default());
    let s = start(Arc::clone(&store), WriterSettings::default());
    let answers = send_all(&s.handle, ["a", "a", "b"].map(str::to_owned));
    let mut outcomes = Vec::new();
    for task in answers {
        outcomes.push(task.await.unwrap());
    }
    let duplicates = outcomes
        .iter()
        .filter(|o| **o == IntakeOutcome::Duplicate)
        .count();
    assert_eq!(duplicates, 1);
    assert_eq!(s.metrics.inbox_messages(InboxStatus::New).get(), 2);
    assert_eq!(s.metrics.inbox_messages(InboxStatus::Duplicate).get(), 1);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_storage_failure_answers_every_caller_of_the_batch_with_a_redacted_reason() {
    let store = Arc::new(Memory::default());
    *store.fail.lock().unwrap() = true;
    let (s, first) = start_with_the_first_batch_held(&store, WriterSettings::default()).await;
    let rest = send_all(&s.handle, ["k1", "k2"].map(str::to_owned));
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.gate.notify_one();
    for task in first.into_iter().chain(rest) {
        let IntakeOutcome::StorageFailed { reason } = task.await.unwrap() else {
            panic!("a storage failure");
        };
        assert!(!reason.contains("hunter2"), "{reason}");
    }
    let rejected = s.metrics.inbox_rejections(RejectionReason::StorageFailed);
    assert_eq!(rejected.get(), 3);
    assert_eq!(s.metrics.inbox_messages(InboxStatus::New).get(), 0);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn rly_14_a_stored_push_row_wakes_the_relay_and_a_pull_row_does_not() {
    let store = Arc::new(Memory::default());
    let s = start(Arc::clone(&store), WriterSettings::default());
    let stored = s.handle.store(row("pull", Consumption::Pull)).await;
    assert!(matches!(stored, IntakeOutcome::New { .. }));
    let woken = tokio::time::timeout(Duration::from_millis(50), s.wake.notified()).await;
    assert!(woken.is_err(), "a pull row does not wake the relay");
    let stored = s.handle.store(row("push", Consumption::Push)).await;
    assert!(matches!(stored, IntakeOutcome::New { .. }));
    let woken = tokio::time::timeout(Duration::from_millis(500), s.wake.notified()).await;
    assert!(woken.is_ok(), "a push row wakes the relay");
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_stores_the_queued_rows_then_refuses_new_ones() {
    let store = Arc::new(Memory::default());
    let (s, first) = start_with_the_first_batch_held(&store, WriterSettings::default()).await;
    let queued = send_all(&s.handle, ["k1", "k2"].map(str::to_owned));
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.cancel.cancel();
    store.gate.notify_one();
    for task in first.into_iter().chain(queued) {
        assert!(matches!(task.await.unwrap(), IntakeOutcome::New { .. }));
    }
    s.task.await.unwrap().unwrap();
    assert_eq!(
        s.handle.store(row("late", Consumption::Push)).await,
        IntakeOutcome::ShuttingDown
    );
    assert_eq!(store.keys.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn a_full_queue_makes_the_caller_wait_instead_of_dropping_the_row() {
    let store = Arc::new(Memory::default());
    let settings = WriterSettings {
        max_batch: 8,
        queue: 2,
    };
    let (s, first) = start_with_the_first_batch_held(&store, settings).await;
    let rest = send_all(&s.handle, (1..6).map(|i| format!("k{i}")));
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.gate.notify_one();
    for task in first.into_iter().chain(rest) {
        assert!(matches!(task.await.unwrap(), IntakeOutcome::New { .. }));
    }
    assert_eq!(store.keys.lock().unwrap().len(), 6);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_zero_max_batch_is_refused() {
    let store = Arc::new(Memory::default());
    let settings = WriterSettings {
        max_batch: 0,
        queue: 1,
    };
    let s = start(store, settings);
    assert!(matches!(
        s.task.await.unwrap(),
        Err(EngineError::BadSetting { .. })
    ));
}

#[tokio::test]
async fn store_wait_tells_how_long_a_batch_has_waited_for_the_store() {
    // Issue 17 defect 7: readiness reads this to report a stuck database.
    let store = Arc::new(Memory::default());
    *store.gated.lock().unwrap() = 1;
    let writer = IntakeWriter::new(
        Arc::clone(&store) as Arc<dyn IntakeStore>,
        WriterSettings::default(),
        Metrics::new("test"),
        Arc::new(Notify::new()),
    );
    let wait = writer.store_wait();
    let handle = writer.handle();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(writer.run(cancel.clone()));
    assert_eq!(wait.waiting_for(), None, "idle: no wait");
    let stored = send_all(&handle, ["k0".to_owned()]);
    wait_until("the gated batch", || {
        store.batches.lock().unwrap().len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    let waited = wait.waiting_for().expect("a batch is with the store");
    assert!(waited >= Duration::from_millis(50), "{waited:?}");
    store.gate.notify_one();
    for task in stored {
        assert!(matches!(task.await.unwrap(), IntakeOutcome::New { .. }));
    }
    assert_eq!(wait.waiting_for(), None, "answered: the wait ended");
    cancel.cancel();
    task.await.unwrap().unwrap();
}

/// A refused row of a broker message is stored dead in its place (INB-54: acknowledged only once
/// durable), the rows of its batch are stored as they were, and the refusal counts once.
#[tokio::test]
async fn a_refused_broker_row_is_stored_dead_and_the_rest_of_its_batch_as_it_was() {
    let store = Arc::new(Memory::default());
    let s = start(Arc::clone(&store), WriterSettings::default());
    let mut refused = row("k-nul", Consumption::Push);
    refused.payload = r#"{"id":"k-nul","note":"a\u0000b"}"#.into();
    let group = vec![
        (row("k-before", Consumption::Push), WhenRefused::StoreDead),
        (refused, WhenRefused::StoreDead),
        (row("k-after", Consumption::Push), WhenRefused::StoreDead),
    ];
    let answers = s.handle.queue_all(group).await.unwrap();
    let mut outcomes = Vec::new();
    for answer in answers {
        outcomes.push(answer.await.unwrap());
    }
    assert!(matches!(
        outcomes[0],
        IntakeOutcome::New {
            state: StoredState::Pending,
            ..
        }
    ));
    assert!(
        matches!(
            outcomes[1],
            IntakeOutcome::New {
                state: StoredState::Dead,
                ..
            }
        ),
        "{:?}",
        outcomes[1]
    );
    assert!(
        outcomes[1].is_settled(),
        "a broker acknowledges it: it is durable"
    );
    assert!(matches!(
        outcomes[2],
        IntakeOutcome::New {
            state: StoredState::Pending,
            ..
        }
    ));
    let stored = store.stored.lock().unwrap().clone();
    let keys: Vec<&str> = stored.iter().map(|r| r.idempotency_key.as_str()).collect();
    assert_eq!(
        keys,
        ["k-before", "k-nul", "k-after"],
        "in the batch's order"
    );
    let dead = &stored[1];
    assert_eq!(dead.state, StoredState::Dead);
    assert_eq!(dead.payload, "{\"id\":\"k-nul\",\"note\":\"a\u{FFFD}b\"}");
    let last_error = dead.last_error.as_deref().unwrap();
    assert!(
        last_error.starts_with("The database refused the message's data (")
            && last_error.contains("unsupported Unicode escape sequence"),
        "{last_error}"
    );
    assert_eq!(
        s.metrics
            .inbox_rejections(RejectionReason::StorageFailed)
            .get(),
        1
    );
    assert_eq!(s.metrics.inbox_messages(InboxStatus::New).get(), 2);
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_refused_http_row_tells_its_sender_and_stores_nothing() {
    let store = Arc::new(Memory::default());
    let s = start(Arc::clone(&store), WriterSettings::default());
    let mut refused = row("k-nul", Consumption::Push);
    refused.payload = r#"{"note":"\u0000"}"#.into();
    let outcome = s.handle.store(refused).await;
    assert!(
        matches!(
            outcome,
            IntakeOutcome::Refused(Refusal::DataRejected { .. })
        ),
        "{outcome:?}"
    );
    assert!(store.stored.lock().unwrap().is_empty());
    assert_eq!(
        s.metrics
            .inbox_rejections(RejectionReason::StorageFailed)
            .get(),
        1
    );
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}

/// When the dead row is refused too, the message is not stored and not settled: its broker
/// delivers it again, so it is never acknowledged unstored.
#[tokio::test]
async fn a_broker_row_whose_dead_row_is_refused_too_is_a_storage_failure() {
    let store = Arc::new(Memory::default());
    let s = start(Arc::clone(&store), WriterSettings::default());
    let mut refused = row("k", Consumption::Push);
    refused.source = "refuses-everything".into();
    let answer = s
        .handle
        .queue(refused, WhenRefused::StoreDead)
        .await
        .unwrap();
    let outcome = answer.await.unwrap();
    assert!(
        matches!(outcome, IntakeOutcome::StorageFailed { .. }),
        "{outcome:?}"
    );
    assert!(!outcome.is_settled());
    assert!(store.stored.lock().unwrap().is_empty());
    assert_eq!(
        store.batches.lock().unwrap().len(),
        2,
        "the row, then its dead row"
    );
    assert_eq!(
        s.metrics
            .inbox_rejections(RejectionReason::StorageFailed)
            .get(),
        1
    );
    s.cancel.cancel();
    s.task.await.unwrap().unwrap();
}
