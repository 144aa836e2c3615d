//! What a store's test crate provides for the suite's concurrency, audit and error checks,
//! beside the set-up steps of [`super::ConformanceDatabase`]: a transaction of another session
//! held open, the record of an outbox row's state changes, and inbox rows written by hand in
//! any state.

use async_trait::async_trait;
use uuid::Uuid;

use crate::intake::Consumption;

/// An open transaction of another session (a slow application writer, an operator's edit);
/// dropping it without [`OpenTransaction::commit`] rolls it back.
#[async_trait]
pub trait OpenTransaction: Send {
    async fn commit(self: Box<Self>);
}

/// One insert or state change of an outbox row, recorded by the database as it was written
/// (a trigger). Times are microseconds since the epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxTransition {
    pub id: Uuid,
    /// `None` for the insert.
    pub from: Option<String>,
    pub to: String,
    pub old_updated_at: Option<i64>,
    pub new_updated_at: i64,
    pub old_claimed_at: Option<i64>,
    pub new_claimed_at: Option<i64>,
    pub new_claim_token: Option<Uuid>,
    pub new_lease_expires_at: Option<i64>,
    /// When the statement that made the change started, and the database clock when the
    /// change was recorded: a value "from the statement's clock" lies between the two.
    pub statement_at: i64,
    pub recorded_at: i64,
}

/// An inbox row written by hand, in any state (default table names): `scheduled_at` and
/// `created_at` that far in the past, a claim token and a lease (now + `lease_ms`, negative:
/// expired) when given.
#[derive(Clone, Debug)]
pub struct InboxFixture {
    pub id: Uuid,
    pub source: String,
    pub idempotency_key: String,
    pub consumption: Consumption,
    pub state: &'static str,
    pub scheduled_ago_ms: i64,
    pub created_ago_ms: i64,
    pub claim: Option<(Uuid, i64)>,
}

impl InboxFixture {
    /// A row of `source` in `state`, created and due `ago_ms` ago; `processing` rows carry a
    /// claim whose lease expired a day ago.
    pub fn old(
        source: &str,
        key: &str,
        consumption: Consumption,
        state: &'static str,
        ago_ms: i64,
    ) -> Self {
        Self {
            id: Uuid::now_v7(),
            source: source.to_owned(),
            idempotency_key: key.to_owned(),
            consumption,
            state,
            scheduled_ago_ms: ago_ms,
            created_ago_ms: ago_ms,
            claim: (state == "processing").then(|| (Uuid::new_v4(), -86_400_000)),
        }
    }
}
