//! The source contract: a broker source connector (RabbitMQ, Kafka, NATS) runs as one task that
//! receives messages, submits them to the [`Intake`] and acknowledges each one from its
//! receipt, until it is told to stop (INB-53..75). The `http` source has no task of its own:
//! its requests arrive through the data-port server.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::intake::{Intake, SourceName};
use crate::readiness::ReadinessComponent;

/// The longest a stopping source spends finishing the messages in progress (INB-75).
pub const SOURCE_STOP_GRACE: Duration = Duration::from_secs(30);

/// A source that cannot run. `Display` is the reason, redacted, with the remedy where there is
/// one ("Create the queue, or set declareQueue: true").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("source {source_name}: {reason}")]
pub struct SourceError {
    pub source_name: SourceName,
    pub reason: String,
}

#[async_trait::async_trait]
pub trait Source: Send + Sync {
    fn name(&self) -> &SourceName;

    /// The source's readiness components (`rabbitmq.<source>`, `kafka.<source>`,
    /// `nats.<source>`): down while the connection is lost or the consumer is not running.
    fn readiness(&self) -> Vec<ReadinessComponent>;

    /// The start-up check of INB-74: a broker that cannot be reached is no error (the source
    /// keeps trying in `run`), but a missing queue or stream that the broker reports is, with
    /// its remedy, and stops the start.
    async fn prepare(&mut self) -> Result<(), SourceError>;

    /// Receives until `stop`, reconnecting by itself after a loss. Then, as INB-75 says: stops
    /// receiving, finishes the messages in progress with their acknowledgements for at most
    /// [`SOURCE_STOP_GRACE`], commits what the protocol commits (Kafka offsets), closes the
    /// connection, and returns. A message whose outcome is not known by then stays
    /// unacknowledged, so the broker delivers it again.
    async fn run(
        self: Box<Self>,
        intake: Arc<dyn Intake>,
        stop: CancellationToken,
    ) -> Result<(), SourceError>;
}
