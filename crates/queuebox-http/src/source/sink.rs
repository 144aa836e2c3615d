//! The write side of the HTTP source: where an accepted message goes to be stored. The binary
//! adapts the engine's write-combining batcher to [`IntakeSink`]; tests use an in-memory one.

use async_trait::async_trait;
use queuebox_store::{InsertOutcome, NewInboxRow};

/// Why a row was not stored. The sink has already logged the detail (redacted) and counted
/// `storage_failed`; the route only picks the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IntakeRefused {
    /// The insert failed for a reason other than the unique constraint: 500.
    #[error("the insert failed")]
    StorageFailed,
    /// The writer stopped taking rows because QueueBox is shutting down: 503.
    #[error("QueueBox is shutting down")]
    ShuttingDown,
}

/// Stores one inbox row, idempotently on (`source`, `idempotency_key`) (INB-50).
///
/// The future resolves only once the row's transaction committed (or failed): the route
/// answers 202 on [`InsertOutcome::Stored`] and nothing earlier (INB-9). The sink counts
/// `queuebox_inbox_messages_total{status}` and `storage_failed` rejections itself.
#[async_trait]
pub trait IntakeSink: Send + Sync {
    async fn store(&self, row: NewInboxRow) -> Result<InsertOutcome, IntakeRefused>;
}
