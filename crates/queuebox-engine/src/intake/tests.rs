//! The intake contract end to end in memory: messages of any protocol through their source's
//! pipeline and the writer, receipts in submission order, and the counts of every outcome.
//! (The same against PostgreSQL, through the HTTP route and the binary, is in the integration
//! tests.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use queuebox_core::Consumption;
use queuebox_core::filter::{Filter, FilterRule, FilterTest};
use queuebox_core::inbox::{AttributeSteps, IntakeProtocol, SourceRules};
use queuebox_core::intake::{ProtocolAttributes, Refusal, StoredState};
use queuebox_core::jsonpath::JsonPath;
use queuebox_core::{HeaderName, Intake, ReceivedHeaders};
use queuebox_store::{InsertOutcome, IntakeStore, NewInboxRow, StoreError};
use queuebox_telemetry::InboxStatus;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::writer::{IntakeWriter, WriterSettings};
use super::*;

/// Stores rows in memory with the unique rule of INB-50; remembers the insert order.
#[derive(Default)]
struct Memory(Mutex<Vec<NewInboxRow>>);

#[async_trait]
impl IntakeStore for Memory {
    async fn insert_batch(&self, rows: &[NewInboxRow]) -> Result<Vec<InsertOutcome>, StoreError> {
        let mut stored = self.0.lock().unwrap();
        Ok(rows
            .iter()
            .map(|row| {
                let exists = stored
                    .iter()
                    .any(|r| r.source == row.source && r.idempotency_key == row.idempotency_key);
                if exists {
                    InsertOutcome::Duplicate
                } else {
                    stored.push(row.clone());
                    InsertOutcome::Stored(row.id)
                }
            })
            .collect())
    }
}

fn rules(source: &str, protocol: IntakeProtocol) -> SourceRules {
    SourceRules {
        source: SourceName::new(source),
        protocol,
        consumption: Consumption::Push,
        filter: Filter {
            require: vec![],
            exclude: vec![FilterRule {
                header: HeaderName::parse("x-test").unwrap(),
                test: FilterTest::Exists,
            }],
        },
        idempotency_key: AttributeSteps {
            header: None,
            paths: vec![JsonPath::parse("$.id").unwrap()],
        },
        aggregate_id: AttributeSteps::default(),
        event_type: AttributeSteps::default(),
        initial_delay: Duration::ZERO,
        scheduled_at_header: None,
        scheduled_at_path: Vec::new(),
    }
}

fn message(source: &str, headers: &[(&str, &str)], body: &str) -> ReceivedMessage {
    ReceivedMessage {
        source: SourceName::new(source),
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect::<ReceivedHeaders>(),
        body: body.as_bytes().to_vec(),
        protocol: ProtocolAttributes::default(),
    }
}

struct Running {
    intake: Arc<dyn Intake>,
    store: Arc<Memory>,
    metrics: Metrics,
    cancel: CancellationToken,
    writer: tokio::task::JoinHandle<Result<(), crate::EngineError>>,
}

fn start() -> Running {
    let store = Arc::new(Memory::default());
    let metrics = Metrics::new("test");
    let writer = IntakeWriter::new(
        store.clone(),
        WriterSettings::default(),
        metrics.clone(),
        Arc::new(Notify::new()),
    );
    let pipelines = vec![
        SourcePipeline::new(rules("hooks", IntakeProtocol::Http)).unwrap(),
        SourcePipeline::new(rules("queue", IntakeProtocol::Rabbitmq)).unwrap(),
    ];
    let intake = Arc::new(InboxIntake::new(
        pipelines,
        writer.handle(),
        metrics.clone(),
    ));
    let cancel = CancellationToken::new();
    let writer = tokio::spawn(writer.run(cancel.clone()));
    Running {
        intake,
        store,
        metrics,
        cancel,
        writer,
    }
}

/// The idempotency keys of the stored rows, in insert order.
fn stored_keys(r: &Running) -> Vec<String> {
    r.store
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|row| row.idempotency_key.clone())
        .collect()
}

#[tokio::test]
async fn inb_65_messages_submitted_in_order_are_stored_in_order_each_with_its_own_outcome() {
    let r = start();
    let mut receipts = Vec::new();
    for (i, body) in [
        r#"{"id":"a"}"#,
        "not json",
        r#"{"id":"b"}"#,
        r#"{"id":"a"}"#,
    ]
    .into_iter()
    .enumerate()
    {
        receipts.push(r.intake.submit(message("queue", &[], body), i).await);
    }
    let mut outcomes = Vec::new();
    for receipt in receipts {
        let settled = receipt.await;
        outcomes.push((settled.ack, settled.outcome));
    }
    assert!(matches!(
        outcomes[0],
        (
            0,
            IntakeOutcome::New {
                state: StoredState::Pending,
                ..
            }
        )
    ));
    assert!(matches!(
        outcomes[1],
        (
            1,
            IntakeOutcome::New {
                state: StoredState::Dead,
                ..
            }
        )
    ));
    assert!(matches!(
        outcomes[2],
        (
            2,
            IntakeOutcome::New {
                state: StoredState::Pending,
                ..
            }
        )
    ));
    assert_eq!(outcomes[3], (3, IntakeOutcome::Duplicate));
    let stored = stored_keys(&r);
    assert_eq!(stored[0], "a");
    assert!(
        stored[1].starts_with("sha256:"),
        "the digest of the non-JSON body"
    );
    assert_eq!(stored[2], "b");
    assert_eq!(r.metrics.inbox_messages(InboxStatus::New).get(), 2);
    assert_eq!(r.metrics.inbox_messages(InboxStatus::Duplicate).get(), 1);
    assert_eq!(
        r.metrics
            .inbox_rejections(RejectionReason::ExtractionFailed)
            .get(),
        1,
        "INB-55: the dead row counts as extraction_failed"
    );
    r.cancel.cancel();
}

#[tokio::test]
async fn inb_65_a_group_submitted_together_keeps_each_message_in_its_place_with_its_own_outcome() {
    let r = start();
    let group = [
        (message("queue", &[], r#"{"id":"a"}"#), 0),
        (message("queue", &[("x-test", "1")], r#"{"id":"f"}"#), 1),
        (message("queue", &[], "not json"), 2),
        (message("nobody", &[], r#"{"id":"n"}"#), 3),
        (message("queue", &[], r#"{"id":"b"}"#), 4),
        (message("queue", &[], r#"{"id":"a"}"#), 5),
    ];
    let receipts = r.intake.submit_all(group.into_iter().collect()).await;
    assert_eq!(receipts.len(), 6);
    let mut outcomes = Vec::new();
    for receipt in receipts {
        let settled = receipt.await;
        outcomes.push((settled.ack, settled.outcome));
    }
    let acks: Vec<i32> = outcomes.iter().map(|(ack, _)| *ack).collect();
    assert_eq!(
        acks,
        vec![0, 1, 2, 3, 4, 5],
        "receipts in the messages' order"
    );
    assert!(matches!(
        outcomes[0].1,
        IntakeOutcome::New {
            state: StoredState::Pending,
            ..
        }
    ));
    assert!(matches!(outcomes[1].1, IntakeOutcome::Filtered { .. }));
    assert!(matches!(
        outcomes[2].1,
        IntakeOutcome::New {
            state: StoredState::Dead,
            ..
        }
    ));
    assert!(
        matches!(outcomes[3].1, IntakeOutcome::StorageFailed { .. }),
        "a message of an unknown source is not stored, and not acknowledged"
    );
    assert!(matches!(
        outcomes[4].1,
        IntakeOutcome::New {
            state: StoredState::Pending,
            ..
        }
    ));
    assert_eq!(outcomes[5].1, IntakeOutcome::Duplicate);
    let stored = stored_keys(&r);
    assert_eq!(stored.len(), 3);
    assert_eq!(stored[0], "a");
    assert!(stored[1].starts_with("sha256:"));
    assert_eq!(stored[2], "b");
    assert_eq!(r.metrics.inbox_filtered("queue").get(), 1);
    r.cancel.cancel();
}

#[tokio::test]
async fn inb_30_and_inb_10_filtered_and_refused_messages_settle_at_once_and_are_counted() {
    let r = start();
    let filtered = r
        .intake
        .submit(message("hooks", &[("x-test", "1")], r#"{"id":"x"}"#), ())
        .await
        .await;
    assert!(matches!(filtered.outcome, IntakeOutcome::Filtered { .. }));
    assert!(
        filtered.outcome.is_settled(),
        "a broker acknowledges a filtered message"
    );
    let refused = r
        .intake
        .submit(message("hooks", &[], "[1,"), ())
        .await
        .await;
    assert_eq!(
        refused.outcome,
        IntakeOutcome::Refused(Refusal::InvalidJson)
    );
    assert_eq!(r.metrics.inbox_filtered("hooks").get(), 1);
    assert_eq!(
        r.metrics
            .inbox_rejections(RejectionReason::ExtractionFailed)
            .get(),
        1
    );
    assert!(r.store.0.lock().unwrap().is_empty());
    r.cancel.cancel();
}

#[tokio::test]
async fn a_message_of_an_unknown_source_is_a_storage_failure_and_is_not_acknowledged() {
    let r = start();
    let settled = r
        .intake
        .submit(message("nobody", &[], r#"{"id":"x"}"#), ())
        .await
        .await;
    assert!(matches!(
        settled.outcome,
        IntakeOutcome::StorageFailed { .. }
    ));
    assert!(!settled.outcome.is_settled());
    r.cancel.cancel();
}

#[tokio::test]
async fn after_the_writer_stopped_a_message_is_shutting_down_and_nothing_is_stored() {
    let r = start();
    r.cancel.cancel();
    r.writer.await.unwrap().unwrap();
    let settled = r
        .intake
        .submit(message("queue", &[], r#"{"id":"late"}"#), ())
        .await
        .await;
    assert_eq!(settled.outcome, IntakeOutcome::ShuttingDown);
    assert!(!settled.outcome.is_settled());
    assert!(r.store.0.lock().unwrap().is_empty());
}
