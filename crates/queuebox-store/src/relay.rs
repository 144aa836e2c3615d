//! `RelayStore`: the push relay's statements (inbox.md §11): claim, renew, forward, dead,
//! release and reclaim, each fenced by the claim token (RLY-7..13), and the oldest-pending gauge.

use std::time::Duration;

use async_trait::async_trait;
use uuid::Uuid;

use crate::error::StoreError;
use crate::outbox::Claim;

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

/// The relay side of a store. Every fenced method writes only rows whose claim (id and token)
/// still holds; a claim missing from an answer lost its fence.
#[async_trait]
pub trait RelayStore: Send + Sync {
    /// RLY-2..6: at most `limit` due push rows of `sources`, one per aggregate, none of a busy
    /// aggregate, claimed atomically under the per-table claim lock (a transaction-scoped lock
    /// on PostgreSQL, a named lock or `BEGIN IMMEDIATE` elsewhere), so two relays never claim
    /// rows of one aggregate.
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

    /// The operator gauges of the inbox: `pending` rows (push and pull, due or not) per source
    /// with the age of each source's oldest by `created_at`, and the `dead` rows.
    async fn inbox_backlog(&self) -> Result<InboxBacklog, StoreError>;
}

/// `pending` inbox rows of one source, and the age by the database clock of its oldest by
/// `created_at`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceBacklog {
    pub source: String,
    pub pending: i64,
    pub oldest_created_age_seconds: f64,
}

/// The answer of [`RelayStore::inbox_backlog`]; sources without pending rows are left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InboxBacklog {
    pub sources: Vec<SourceBacklog>,
    pub dead: i64,
}

impl InboxBacklog {
    /// Pending rows of every source.
    pub fn pending(&self) -> i64 {
        self.sources.iter().map(|s| s.pending).sum()
    }

    /// The age of the oldest pending row of any source (0 when none).
    pub fn oldest_created_age_seconds(&self) -> f64 {
        self.sources
            .iter()
            .map(|s| s.oldest_created_age_seconds)
            .fold(0.0, f64::max)
    }
}
