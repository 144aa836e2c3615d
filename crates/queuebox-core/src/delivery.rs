//! What the engine hands a destination and what the destination answers: one outgoing
//! message, one `Outcome`. Connectors translate; retry and dead-letter decisions stay in the
//! engine (architecture.md, rule 1).

use std::time::Duration;

use uuid::Uuid;

/// One claimed outbox row, ready to publish.
#[derive(Clone, Debug, PartialEq)]
pub struct OutgoingMessage {
    /// The row id: sent as `X-Message-Id`, stable across attempts (DST-11).
    pub id: Uuid,
    pub topic: String,
    /// `None` when the row's key is NULL or empty.
    pub key: Option<String>,
    pub aggregate_type: Option<String>,
    /// Failed deliveries so far: `X-Attempt` (OUT-26).
    pub attempt: i32,
    /// The row's `headers`, already normalized to text values (OUT-7), in stored order.
    pub headers: Vec<(String, String)>,
    /// The JSON body to send (DST-7).
    pub payload: String,
}

/// The result of one publish (DST-3). Nothing else leaves a publisher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The destination accepted the message.
    Delivered,
    /// The destination refused it or did not confirm it. `reason` is already redacted;
    /// `retry_after` comes from an HTTP 429/503 `Retry-After` (DST-27).
    Failed {
        reason: String,
        retry_after: Option<Duration>,
    },
}

impl Outcome {
    pub fn failed(reason: impl Into<String>) -> Self {
        Self::Failed {
            reason: reason.into(),
            retry_after: None,
        }
    }
}

/// A destination connector. `publish` never touches the database and never decides a retry.
#[async_trait::async_trait]
pub trait Publisher: Send + Sync {
    /// The destination kind, for `queuebox_outbox_publish_duration_seconds{destination_type}`.
    fn kind(&self) -> &'static str;

    async fn publish(&self, message: &OutgoingMessage) -> Outcome;
}
