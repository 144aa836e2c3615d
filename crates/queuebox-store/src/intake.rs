//! `IntakeStore`: the batched idempotent insert of received messages into the inbox (inbox.md
//! §9), with one outcome per row. The sources' write-combining intake is its only caller.

use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

pub use queuebox_core::Consumption;
pub use queuebox_core::intake::StoredState;

use crate::error::StoreError;

/// How `scheduled_at` is computed from the receipt time (the database clock of the insert)
/// (inbox.md §7, CFG-65/71).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// receipt time + delay (`initialDelay`, possibly zero).
    AfterReceipt { delay: Duration },
    /// min(publish time, receipt time) + delay; the publish time in ms since 1970 (UTC).
    AfterPublish {
        publish_epoch_ms: i64,
        delay: Duration,
    },
}

/// One message to store (INB-49). QueueBox generates `id` (UUID v7, SCH-7).
#[derive(Clone, Debug, PartialEq)]
pub struct NewInboxRow {
    pub id: Uuid,
    pub source: String,
    pub idempotency_key: String,
    pub aggregate_id: Option<String>,
    pub event_type: Option<String>,
    /// JSON text.
    pub payload: String,
    /// A JSON object of name → string, as text.
    pub headers: String,
    pub consumption: Consumption,
    pub correlation_id: Option<String>,
    /// Ignored for a `dead` row, which is due at its receipt (INB-45).
    pub schedule: Schedule,
    /// `pending`, or `dead` for a broker message that cannot be used (INB-56, INB-58): such a
    /// row never exists as `pending`, so nothing can claim it.
    pub state: StoredState,
    /// `last_error` of a `dead` row; `None` for a `pending` one.
    pub last_error: Option<String>,
    /// The body bytes exactly as received, for a source with `storeRawBody: true`: written to
    /// the nullable `raw_body` column (migration `RAW_BODY_VERSION`); `None` writes nothing
    /// there, so a database without the column works for every other source.
    pub raw_body: Option<Vec<u8>>,
}

/// The answer for one row of a batched insert (INB-50).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertOutcome {
    /// Stored as `pending` with this id.
    Stored(Uuid),
    /// (`source`, `idempotency_key`) already existed, or an earlier row of the same batch had
    /// the same pair; nothing changed.
    Duplicate,
}

/// The intake side of a store: what a source's messages need to become inbox rows.
#[async_trait]
pub trait IntakeStore: Send + Sync {
    /// INB-49/50: stores the whole batch atomically (every row stored or duplicate, or nothing
    /// changed), in one round trip where the database allows (one statement on PostgreSQL, a
    /// short transaction where the database has no multi-row insert with per-row answers). The
    /// answer has one entry per input row, in input order; the first row of a repeated
    /// (`source`, `idempotency_key`) pair wins. A conflict on the pair is a duplicate, never an
    /// error.
    async fn insert_batch(&self, rows: &[NewInboxRow]) -> Result<Vec<InsertOutcome>, StoreError>;
}
