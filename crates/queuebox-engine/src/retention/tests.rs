//! The run and schedule rules of retention against an in-memory count of deletable rows (the
//! PostgreSQL DELETEs are in `tests/retention_delete.rs`).

use std::sync::Mutex;

use async_trait::async_trait;
use queuebox_store::{StoreAction, StoreError};
use tokio::sync::Notify;

use super::*;

/// `eligible` deletable rows; records each DELETE's batch; after `gate_after` DELETEs each one
/// waits for `gate`.
#[derive(Default)]
struct Rows {
    eligible: Mutex<u64>,
    deletes: Mutex<Vec<RetentionRule>>,
    gate_after: Mutex<Option<usize>>,
    gate: Notify,
    entered: Notify,
    fail: Mutex<bool>,
}

#[async_trait]
impl RetentionStore for Rows {
    async fn retention_delete(&self, rule: RetentionRule, batch: u32) -> Result<u64, StoreError> {
        let n = {
            let mut deletes = self.deletes.lock().unwrap();
            deletes.push(rule);
            deletes.len()
        };
        if self
            .gate_after
            .lock()
            .unwrap()
            .is_some_and(|after| n > after)
        {
            self.entered.notify_one();
            self.gate.notified().await;
        }
        if *self.fail.lock().unwrap() {
            return Err(StoreError::Database {
                action: StoreAction::UseDatabase,
                during: "deleting old rows",
                reason: "timeout".into(),
            });
        }
        let mut eligible = self.eligible.lock().unwrap();
        let deleted = (*eligible).min(u64::from(batch));
        *eligible -= deleted;
        Ok(deleted)
    }
}

const INBOX_RULE: RetentionRule = RetentionRule::InboxOlderThan(Duration::from_secs(60));

fn inbox_only(batch: u32, interval: Duration) -> RetentionSettings {
    RetentionSettings {
        outbox: None,
        inbox: Some(TableRetention {
            rule: INBOX_RULE,
            cleanup_interval: interval,
            batch,
        }),
    }
}

fn start(
    rows: &Arc<Rows>,
    settings: RetentionSettings,
) -> (
    Metrics,
    CancellationToken,
    tokio::task::JoinHandle<Result<(), EngineError>>,
) {
    let metrics = Metrics::new("test");
    let retention = Retention::new(Arc::clone(rows) as _, settings, metrics.clone());
    let cancel = CancellationToken::new();
    let task = tokio::spawn(retention.run(cancel.clone()));
    (metrics, cancel, task)
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
async fn ret_6_a_run_repeats_deletes_until_one_removes_fewer_than_the_batch() {
    let rows = Arc::new(Rows::default());
    *rows.eligible.lock().unwrap() = 25;
    let (metrics, cancel, task) = start(&rows, inbox_only(10, Duration::from_secs(3600)));
    wait_until("the first run", || {
        metrics.cleanup_duration(Table::Inbox).count() == 1
    })
    .await;
    assert_eq!(rows.deletes.lock().unwrap().len(), 3, "10 + 10 + 5");
    assert_eq!(metrics.cleanup_messages_deleted(Table::Inbox).get(), 25);
    assert_eq!(metrics.cleanup_messages_deleted(Table::Outbox).get(), 0);
    cancel.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn ret_7_the_next_run_starts_one_interval_after_the_previous_ended() {
    let rows = Arc::new(Rows::default());
    let (metrics, cancel, task) = start(&rows, inbox_only(10, Duration::from_millis(50)));
    wait_until("three runs", || {
        metrics.cleanup_duration(Table::Inbox).count() >= 3
    })
    .await;
    cancel.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn ops_26_phase_7_a_stop_ends_the_run_between_two_deletes() {
    let rows = Arc::new(Rows::default());
    *rows.eligible.lock().unwrap() = 1000;
    *rows.gate_after.lock().unwrap() = Some(1);
    let (metrics, cancel, task) = start(&rows, inbox_only(10, Duration::from_secs(3600)));
    rows.entered.notified().await;
    // The second DELETE is running: the stop lets it finish and starts no third one.
    cancel.cancel();
    rows.gate.notify_one();
    task.await.unwrap().unwrap();
    assert_eq!(rows.deletes.lock().unwrap().len(), 2);
    assert_eq!(metrics.cleanup_messages_deleted(Table::Inbox).get(), 20);
    assert_eq!(metrics.cleanup_duration(Table::Inbox).count(), 1);
}

#[tokio::test]
async fn ret_9_a_failing_delete_ends_the_run_and_still_records_its_end() {
    let rows = Arc::new(Rows::default());
    *rows.fail.lock().unwrap() = true;
    let (metrics, cancel, task) = start(&rows, inbox_only(10, Duration::from_secs(3600)));
    wait_until("the first run", || {
        metrics.cleanup_duration(Table::Inbox).count() == 1
    })
    .await;
    assert_eq!(
        rows.deletes.lock().unwrap().len(),
        1,
        "no retry before the interval"
    );
    assert!(
        metrics
            .render()
            .contains("queuebox_cleanup_last_run_timestamp")
    );
    cancel.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn both_tables_are_cleaned_with_their_own_rule() {
    let rows = Arc::new(Rows::default());
    let outbox_rule = RetentionRule::OutboxKeepNewest(5);
    let settings = RetentionSettings {
        outbox: Some(TableRetention {
            rule: outbox_rule,
            cleanup_interval: Duration::from_secs(3600),
            batch: 10,
        }),
        ..inbox_only(10, Duration::from_secs(3600))
    };
    let (metrics, cancel, task) = start(&rows, settings);
    wait_until("both runs", || {
        metrics.cleanup_duration(Table::Inbox).count() == 1
            && metrics.cleanup_duration(Table::Outbox).count() == 1
    })
    .await;
    let deletes = rows.deletes.lock().unwrap().clone();
    assert!(deletes.contains(&outbox_rule) && deletes.contains(&INBOX_RULE));
    cancel.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_rule_of_the_other_table_or_a_zero_batch_is_refused() {
    let rows = Arc::new(Rows::default());
    let mut wrong = inbox_only(10, Duration::from_secs(1));
    wrong.inbox.as_mut().unwrap().rule = RetentionRule::OutboxKeepNewest(1);
    let (_, _, task) = start(&rows, wrong);
    assert!(matches!(
        task.await.unwrap(),
        Err(EngineError::BadSetting {
            setting: "retention.inbox.policy",
            ..
        })
    ));
    let (_, _, task) = start(&rows, inbox_only(0, Duration::from_secs(1)));
    assert!(task.await.unwrap().is_err());
    assert!(rows.deletes.lock().unwrap().is_empty());
}
