//! The destination contract (architecture.md, rule 1): what the engine hands a destination
//! connector, the one `Outcome` it answers, and the connector's life (its kind, its readiness
//! components, `close` at shutdown). Connectors translate; retry and dead-letter decisions stay
//! in the engine.

use std::fmt;
use std::time::Duration;

use uuid::Uuid;

use crate::readiness::ReadinessComponent;

/// `type` of a destination (CFG-84), also the `destination_type` metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DestinationType {
    Http,
    Rabbitmq,
    Kafka,
    Nats,
    Log,
}

impl DestinationType {
    /// Every value, in the order of the metric catalogue.
    pub const ALL: &'static [Self] = &[
        Self::Http,
        Self::Rabbitmq,
        Self::Kafka,
        Self::Nats,
        Self::Log,
    ];

    /// The configuration's `type` word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Rabbitmq => "rabbitmq",
            Self::Kafka => "kafka",
            Self::Nats => "nats",
            Self::Log => "log",
        }
    }
}

impl fmt::Display for DestinationType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    /// The JSON body to send (DST-7): the stored payload, or the output of the route and
    /// destination transforms.
    pub payload: String,
    /// The row's payload as stored, when a transform replaced `payload`; `None` when `payload`
    /// is the stored one. Templates read it through [`OutgoingMessage::template_payload`] (TRF-8, DST-15).
    pub stored_payload: Option<String>,
}

impl OutgoingMessage {
    /// The payload as stored, before any route or destination transform: what
    /// `{{ payload.… }}` placeholders read (TRF-8, TRF-33).
    pub fn template_payload(&self) -> &str {
        self.stored_payload.as_deref().unwrap_or(&self.payload)
    }
}

/// The result of one publish (DST-3). Nothing else leaves a destination.
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

/// A destination connector: one per configured destination. `publish` never touches the
/// database and never decides a retry; several publishes may run at once (up to
/// `outbox.concurrency`), each answered with its own outcome.
#[async_trait::async_trait]
pub trait Destination: Send + Sync {
    /// `destinations.<name>`: the name in metrics and log lines.
    fn name(&self) -> &str;

    fn kind(&self) -> DestinationType;

    async fn publish(&self, message: &OutgoingMessage) -> Outcome;

    /// One readiness component per connection the destination keeps (a broker connection is
    /// `<type>.<name>`); none for a destination that holds no connection between publishes.
    fn readiness(&self) -> Vec<ReadinessComponent>;

    /// At shutdown, after the last publish returned: flush what the connector buffers and close
    /// its connections. Publishing after `close` is a defect of the caller.
    async fn close(&self);
}

impl fmt::Debug for dyn Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Destination")
            .field("name", &self.name())
            .field("kind", &self.kind())
            .finish_non_exhaustive()
    }
}
