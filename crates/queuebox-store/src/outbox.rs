//! `OutboxStore`: the row statements of the outbox poller (outbox.md §5, §7, §9, §12): claim,
//! renew, the terminal writes, release and reclaim, each fenced as OUT-41 says, and the pending
//! gauges. Every method writes its whole batch atomically, in one round trip where the database
//! allows (one statement on PostgreSQL; a short transaction where a database has no
//! `UPDATE ... RETURNING`).

use std::time::Duration;

use async_trait::async_trait;
pub use queuebox_core::{ClaimToken, RowId};

use crate::error::StoreError;

/// The fencing identity of one claim: the row id and the token the claim wrote (OUT-41), as
/// distinct types so the two cannot be swapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Claim {
    pub id: RowId,
    pub token: ClaimToken,
}

/// One row as the claim returned it (OUT-16).
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedRow {
    pub claim: Claim,
    pub topic: String,
    /// NULL and empty both come back as `None` (outbox.md §1, "Key").
    pub key: Option<String>,
    /// The payload text as the database returned it (OUT-25); unchecked.
    pub payload: String,
    /// The `headers` column as JSON text; unchecked (OUT-7 is the engine's).
    pub headers: String,
    pub aggregate_type: Option<String>,
    pub attempt: i32,
    pub max_attempts: i32,
    pub sequence: i64,
}

/// The write that ends a claim (SCH-15). The engine decides which; the store only writes it,
/// fenced.
#[derive(Clone, Debug, PartialEq)]
pub enum TerminalWrite {
    /// `processing` → `sent`.
    Sent { claim: Claim },
    /// A failed delivery with deliveries left: `pending`, `attempt` = the given value,
    /// `scheduled_at` = database clock + `delay`, `last_error` = `error` (already redacted).
    Retry {
        claim: Claim,
        attempt: i32,
        delay: Duration,
        error: String,
    },
    /// Held back by the destination guard before its publish (issue 15 item 6): `pending`,
    /// `attempt` = the given value (the claim's, unchanged), `scheduled_at` = database clock +
    /// `delay`, and `last_error` kept: a hold is no failure, so the row still shows its last
    /// real one (SCH-15); the hold shows in `queuebox_outbox_destination_held_total`.
    Hold {
        claim: Claim,
        attempt: i32,
        delay: Duration,
    },
    /// `dead`, with `attempt` = the given value (raised by a failed last delivery, unchanged for
    /// no route / invalid row / transform `Dead`) and `last_error` = `error`.
    Dead {
        claim: Claim,
        attempt: i32,
        error: String,
    },
}

impl TerminalWrite {
    pub fn claim(&self) -> Claim {
        match self {
            Self::Sent { claim }
            | Self::Retry { claim, .. }
            | Self::Hold { claim, .. }
            | Self::Dead { claim, .. } => *claim,
        }
    }
}

/// One run to extend (OUT-13a): the held row the run follows, and how many more rows of its key
/// the run may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunStart {
    pub after: Claim,
    pub limit: u32,
}

/// The pending gauges (MET catalogue): rows in `pending`, and the age by the database clock of
/// the oldest due one (0 when none is due); and the operator gauges read with them: the age of
/// the oldest `pending` row by `created_at`, due or not (0 when none), and rows in `dead`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PendingStats {
    pub pending: i64,
    pub oldest_due_age_seconds: f64,
    pub oldest_created_age_seconds: f64,
    pub dead: i64,
}

/// The outbox statements of one database. Every fenced method returns the claims it actually
/// wrote; a claim missing from the answer lost its fence (a stale token, another owner, or an
/// expired lease), and the caller counts it in `queuebox_claims_lost_total`.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// OUT-11..17: claims at most `limit` due, eligible rows (head-of-key rule, at most one row
    /// per key, keyless rows freely) in `scheduled_at`, `sequence` order, with a lease of
    /// `lease` from the database clock and a new token per row. Atomic: concurrent claimers never
    /// take the same row or two rows of one key.
    async fn claim(&self, limit: u32, lease: Duration) -> Result<Vec<ClaimedRow>, StoreError>;

    /// OUT-13a, the run claim: for each `after` that still holds (the fence of OUT-41) and has a
    /// key, claims up to `limit` further rows of that key, the `pending` rows that follow it in
    /// `sequence` order, ending before the first row that is not due (or not `pending`). A run
    /// never skips a row: the rows it takes are consecutive in the key. Leases and tokens as
    /// OUT-16. The answer is grouped by key, each key in `sequence` order. Atomic; no other
    /// claimer can take these rows meanwhile, because the held row keeps them from being the
    /// head of their key (OUT-13).
    async fn claim_run(
        &self,
        runs: &[RunStart],
        lease: Duration,
    ) -> Result<Vec<ClaimedRow>, StoreError>;

    /// OUT-40/41: extends the lease of every claim still held; returns those renewed.
    async fn renew(&self, claims: &[Claim], lease: Duration) -> Result<Vec<Claim>, StoreError>;

    /// OUT-28/31/41: the terminal writes of several rows, atomically; returns the claims
    /// written.
    async fn finish(&self, writes: &[TerminalWrite]) -> Result<Vec<Claim>, StoreError>;

    /// OUT-58 step 2: back to `pending`, fenced, `attempt`, `scheduled_at` and `last_error`
    /// unchanged; returns the claims released.
    async fn release(&self, claims: &[Claim]) -> Result<Vec<Claim>, StoreError>;

    /// OUT-46: every `processing` row whose lease expired goes back to `pending`; returns how
    /// many.
    async fn reclaim_expired(&self) -> Result<u64, StoreError>;

    /// The two pending gauges, read together.
    async fn pending_stats(&self) -> Result<PendingStats, StoreError>;
}
