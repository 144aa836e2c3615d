//! `InboxStore`: the inbox statements (inbox.md §9, §11; operations.md retention): the batched
//! idempotent insert, the push relay's claim / renew / forward / dead / release / reclaim, the
//! oldest-pending gauge, and the retention deletes of both tables.

use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

pub use queuebox_core::intake::StoredState;

use crate::error::StoreError;
use crate::outbox::Claim;

/// `consumption` of a source, written on the row at receipt (INB-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Consumption {
    Push,
    Pull,
}

impl Consumption {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Push => "push",
            Self::Pull => "pull",
        }
    }
}

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

/// A push row as the relay claim returned it (RLY-5).
#[derive(Clone, Debug, PartialEq)]
pub struct RelayRow {
    pub claim: Claim,
    pub source: String,
    pub idempotency_key: String,
    pub aggregate_id: Option<String>,
    pub event_type: Option<String>,
    /// JSON text as stored.
    pub payload: String,
    /// The stored headers, JSON object text.
    pub headers: String,
    pub correlation_id: Option<String>,
}

/// The outbox row a forward creates (RLY-10).
#[derive(Clone, Debug, PartialEq)]
pub struct ForwardedRow {
    pub id: Uuid,
    pub topic: String,
    pub key: Option<String>,
    pub payload: String,
    /// JSON object text, identity headers already set (RLY-11).
    pub headers: String,
    pub max_attempts: i32,
}

/// Which rows one retention DELETE may remove (RET-*, CFG-83). Never `pending`/`processing`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetentionRule {
    /// Outbox `sent`/`dead` rows whose `updated_at` is older than this.
    OutboxOlderThan(Duration),
    /// Outbox: keep the newest `n` `sent` rows and, separately, the newest `n` `dead` rows.
    OutboxKeepNewest(u32),
    /// Inbox `processed`/`dead` rows whose `created_at` is older than this.
    InboxOlderThan(Duration),
}

#[async_trait]
pub trait InboxStore: Send + Sync {
    /// INB-49/50: one statement for the whole batch, in one transaction; the answer has one entry
    /// per input row, in input order. A conflict on (`source`, `idempotency_key`) is a duplicate,
    /// never an error.
    async fn insert_batch(&self, rows: &[NewInboxRow]) -> Result<Vec<InsertOutcome>, StoreError>;

    /// RLY-2..6: at most `limit` due push rows of `sources`, one per aggregate, none of a busy
    /// aggregate, under the per-table claim lock.
    async fn relay_claim(
        &self,
        limit: u32,
        lease: Duration,
        sources: &[String],
    ) -> Result<Vec<RelayRow>, StoreError>;

    /// RLY-7: renews the claims still held; returns those renewed.
    async fn relay_renew(
        &self,
        claims: &[Claim],
        lease: Duration,
    ) -> Result<Vec<Claim>, StoreError>;

    /// RLY-9 step 2: in one transaction, inserts `row` into the outbox and marks the inbox row
    /// `processed` under the fence. `Ok(false)` when the fence failed: everything rolled back.
    async fn relay_forward(&self, claim: Claim, row: &ForwardedRow) -> Result<bool, StoreError>;

    /// RLY-9 step 1: fenced `processing` → `dead` with `last_error`. `Ok(false)`: claim lost.
    async fn relay_dead(&self, claim: Claim, error: &str) -> Result<bool, StoreError>;

    /// RLY-12 (with an error text) and RLY-15 (without): fenced back to `pending`, `attempt`
    /// and `scheduled_at` unchanged; returns the claims released.
    async fn relay_release(
        &self,
        claims: &[Claim],
        error: Option<&str>,
    ) -> Result<Vec<Claim>, StoreError>;

    /// RLY-8: expired push leases back to `pending`; never touches pull rows.
    async fn relay_reclaim_expired(&self) -> Result<u64, StoreError>;

    /// RLY-16 / MET catalogue: seconds, by the database clock, since the oldest due `pending`
    /// inbox row (push and pull) became due (`now − scheduled_at`); 0 when there is none.
    async fn inbox_oldest_pending_age(&self) -> Result<f64, StoreError>;

    /// One retention DELETE of at most `batch` rows; returns how many it deleted. The caller
    /// repeats it until it deletes fewer than `batch`.
    async fn retention_delete(&self, rule: RetentionRule, batch: u32) -> Result<u64, StoreError>;
}
