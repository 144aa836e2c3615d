//! `OperatorStore`: what an operator does to the rows of both tables (operations.md §6, the
//! admin API): list by state with filters and a keyset cursor, show one row, replay outbox rows
//! (outbox.md OUT-48..52), requeue dead inbox rows (inbox.md §12, RLY-17/18), delete one row or
//! many, and count rows per state. The admin API turns requests into these calls; this trait
//! never sees HTTP, and resolves no destination (ADM-13 resolves it into topics first).

use std::future::Future;
use std::time::SystemTime;

use async_trait::async_trait;
use uuid::Uuid;

use crate::error::StoreError;
use crate::intake::Consumption;

/// A bulk operation works in chunks of at most this many rows, each its own short transaction
/// with the state guard repeated, so it never holds a long lock (ADM-9).
pub const OPERATOR_CHUNK: u32 = 500;

/// The states of an outbox row (outbox.md §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OutboxState {
    Pending,
    Processing,
    Sent,
    Dead,
}

/// The states of an inbox row (inbox.md §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InboxState {
    Pending,
    Processing,
    Processed,
    Dead,
}

macro_rules! state_names {
    ($ty:ident { $($variant:ident => $name:literal,)+ }) => {
        impl $ty {
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The literal the column holds.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }

            /// The state of a column value; `None` for a value QueueBox never writes.
            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($name => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

state_names!(OutboxState {
    Pending => "pending",
    Processing => "processing",
    Sent => "sent",
    Dead => "dead",
});

state_names!(InboxState {
    Pending => "pending",
    Processing => "processing",
    Processed => "processed",
    Dead => "dead",
});

/// The outbox states a bulk delete may take (ADM-20).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishedOutboxState {
    Sent,
    Dead,
}

/// The inbox states a bulk delete may take (ADM-24).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishedInboxState {
    Processed,
    Dead,
}

/// Which outbox rows an operation touches (ADM-13); every given filter combines with AND. A
/// list filter of `Some(empty)` matches nothing, never everything (a destination that routes
/// no topic). The API decides which filters an operation accepts (replay takes no `key` or
/// `error_contains`); the store applies every one it is given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutboxFilter {
    pub ids: Option<Vec<Uuid>>,
    /// `topic`, `topics` and `destination`, intersected by the caller.
    pub topics: Option<Vec<String>>,
    pub key: Option<String>,
    /// `created_at > value` (strict).
    pub created_after: Option<SystemTime>,
    /// `created_at < value` (strict).
    pub created_before: Option<SystemTime>,
    /// A case-sensitive substring of `last_error`, matched literally (no wildcards).
    pub error_contains: Option<String>,
}

/// Which inbox rows an operation touches (ADM-21), with the rules of [`OutboxFilter`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InboxFilter {
    pub ids: Option<Vec<Uuid>>,
    /// `source` and `sources`, intersected by the caller.
    pub sources: Option<Vec<String>>,
    pub consumption: Option<Consumption>,
    pub event_type: Option<String>,
    pub aggregate_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub created_after: Option<SystemTime>,
    pub created_before: Option<SystemTime>,
    pub error_contains: Option<String>,
}

/// Where a list page ends: the last row's `created_at` and `id` (ADM-11). The next page holds
/// the rows after it in `(created_at DESC, id DESC)` order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListCursor {
    pub created_at: SystemTime,
    pub id: Uuid,
}

/// One page of a list: at most `limit` rows after `after`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRequest {
    pub after: Option<ListCursor>,
    pub limit: u32,
}

/// A list page, newest first; `next` is `None` on the last page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<ListCursor>,
}

/// An outbox row in a list (ADM-16 "in list"): no payload, no headers, never `claim_token`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxSummary {
    pub id: Uuid,
    pub topic: String,
    /// NULL and empty both come back as `None`.
    pub key: Option<String>,
    pub aggregate_type: Option<String>,
    pub state: OutboxState,
    pub attempt: i32,
    pub max_attempts: i32,
    pub scheduled_at: SystemTime,
    pub created_at: SystemTime,
    pub updated_at: SystemTime,
    pub last_error: Option<String>,
}

/// One outbox row shown whole (ADM-16 "in show"), still without `claim_token` (ADM-12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxMessage {
    pub summary: OutboxSummary,
    pub sequence: i64,
    pub claimed_at: Option<SystemTime>,
    pub lease_expires_at: Option<SystemTime>,
    /// JSON object text.
    pub headers: String,
    /// JSON text.
    pub payload: String,
}

/// An inbox row in a list (ADM-21): no payload, no headers, never `claim_token`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxSummary {
    pub id: Uuid,
    pub source: String,
    pub idempotency_key: String,
    pub aggregate_id: Option<String>,
    pub event_type: Option<String>,
    pub consumption: Consumption,
    pub state: InboxState,
    pub attempt: i32,
    pub correlation_id: Option<String>,
    pub scheduled_at: SystemTime,
    pub created_at: SystemTime,
    pub processed_at: Option<SystemTime>,
    pub last_error: Option<String>,
}

/// One inbox row shown whole (ADM-22), without `claim_token`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxMessage {
    pub summary: InboxSummary,
    pub claimed_at: Option<SystemTime>,
    pub lease_expires_at: Option<SystemTime>,
    /// JSON object text.
    pub headers: String,
    /// JSON text.
    pub payload: String,
}

/// The answer of a single delete (ADM-19, ADM-23).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    NotFound,
    /// The row exists in a state that is never deleted (`pending`, `processing`).
    NotDeletable,
}

/// Rows of one group (a topic, a source) in one state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateCount<S> {
    pub group: String,
    pub state: S,
    pub count: u64,
}

/// Rows per state, rows per group in the states an operator acts on, and the age of the oldest
/// due pending row by the database clock (0 when none is due).
#[derive(Clone, Debug, PartialEq)]
pub struct StateCounts<S> {
    /// Every state of the table, in the order of the enum, with its row count (0 when it has
    /// none): exact, read from the state indexes, except the state named in `estimated`.
    pub states: Vec<(S, u64)>,
    /// The state whose total in `states` is an estimate, if any: on PostgreSQL the finished
    /// state (`sent`, `processed`), from the planner's row count of the table, since an exact
    /// count reads every such row, which is most of the table.
    pub estimated: Option<S>,
    /// Rows per group in `pending`, `processing` and `dead` only, ordered by group (byte order),
    /// then state (the order of the enum); a (group, state) without rows is left out. The
    /// finished state (`sent`, `processed`) is not counted per group: the group column is in
    /// no state index, so that count would read every finished row of the table, which is
    /// most of it.
    pub counts: Vec<StateCount<S>>,
    pub oldest_pending_age_seconds: f64,
}

impl<S: Copy + Ord> StateCounts<S> {
    /// The counts from the rows of a store's counts statement, in any order: a row without a
    /// group is the total of its state, a row with one a (group, state) count. Every total is
    /// exact; a store that estimates one sets `estimated` afterwards.
    pub fn from_rows(
        all: &[S],
        rows: impl IntoIterator<Item = (Option<String>, S, u64)>,
        oldest_pending_age_seconds: f64,
    ) -> Self {
        let mut states: Vec<(S, u64)> = all.iter().map(|s| (*s, 0)).collect();
        let mut counts = Vec::new();
        for (group, state, count) in rows {
            match group {
                None => {
                    if let Some(total) = states.iter_mut().find(|(s, _)| *s == state) {
                        total.1 += count;
                    }
                }
                Some(group) if count > 0 => counts.push(StateCount {
                    group,
                    state,
                    count,
                }),
                Some(_) => {}
            }
        }
        // The order of the trait, whatever the database's collation.
        counts.sort_by(|a, b| (&a.group, a.state).cmp(&(&b.group, b.state)));
        Self {
            states,
            estimated: None,
            counts,
            oldest_pending_age_seconds,
        }
    }

    /// The exact total of one state.
    pub fn total(&self, state: S) -> u64 {
        self.states
            .iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |(_, n)| *n)
    }
}

/// The operator side of a store. Each bulk operation takes its rows oldest first (outbox by
/// `sequence`, inbox by `created_at`, then `id`), in chunks of at most [`OPERATOR_CHUNK`] rows,
/// each chunk atomic and guarded by the state in the write itself, so a row that changed state
/// meanwhile is skipped and not counted; it stops at `limit` rows or when no matching row is
/// left, and answers how many rows it changed.
#[async_trait]
pub trait OperatorStore: Send + Sync {
    /// ADM-17: outbox rows in `state` that match, newest first.
    async fn list_outbox(
        &self,
        state: OutboxState,
        filter: &OutboxFilter,
        page: PageRequest,
    ) -> Result<Page<OutboxSummary>, StoreError>;

    /// ADM-18.
    async fn show_outbox(&self, id: Uuid) -> Result<Option<OutboxMessage>, StoreError>;

    /// OUT-48..52, ADM-15: matching `sent` and `dead` rows back to `pending` with `attempt` 0,
    /// `scheduled_at` and `updated_at` now, and no error, claim or lease; `id`, `sequence` and
    /// the message columns kept. `pending` and `processing` rows never move.
    async fn replay_outbox(
        &self,
        filter: &OutboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError>;

    /// ADM-19: deletes the row if it is `sent` or `dead`, guarded in the delete.
    async fn delete_outbox_row(&self, id: Uuid) -> Result<DeleteOutcome, StoreError>;

    /// ADM-20: deletes matching rows of `state`.
    async fn delete_outbox_rows(
        &self,
        state: FinishedOutboxState,
        filter: &OutboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError>;

    /// Outbox rows per state, per topic and live state, and the oldest due pending age.
    async fn outbox_counts(&self) -> Result<StateCounts<OutboxState>, StoreError>;

    /// Every distinct topic of the outbox, sorted, for resolving `destination` (ADM-13).
    async fn outbox_topics(&self) -> Result<Vec<String>, StoreError>;

    /// ADM-21: inbox rows in `state` that match, newest first.
    async fn list_inbox(
        &self,
        state: InboxState,
        filter: &InboxFilter,
        page: PageRequest,
    ) -> Result<Page<InboxSummary>, StoreError>;

    /// ADM-22.
    async fn show_inbox(&self, id: Uuid) -> Result<Option<InboxMessage>, StoreError>;

    /// RLY-17, ADM-25: matching `dead` rows back to `pending` with `attempt` 0, `scheduled_at`
    /// now, and no error, processed time, claim or lease; `id`, `source`, `idempotency_key`,
    /// `consumption`, payload and headers kept.
    async fn requeue_inbox(
        &self,
        filter: &InboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError>;

    /// ADM-23: deletes the row if it is `processed` or `dead`, guarded in the delete.
    async fn delete_inbox_row(&self, id: Uuid) -> Result<DeleteOutcome, StoreError>;

    /// ADM-24: deletes matching rows of `state`.
    async fn delete_inbox_rows(
        &self,
        state: FinishedInboxState,
        filter: &InboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError>;

    /// Inbox rows per state, per source and live state, and the oldest due pending age (push
    /// and pull).
    async fn inbox_counts(&self) -> Result<StateCounts<InboxState>, StoreError>;
}

/// Runs a bulk operation as ADM-9 says, for every store: `chunk(n)` changes at most `n`
/// matching rows in one short transaction and answers how many it changed. A chunk that
/// changes fewer than it may have found every matching row there was, so the run ends there,
/// or at `limit`.
pub async fn run_in_chunks<F, Fut>(limit: Option<u64>, mut chunk: F) -> Result<u64, StoreError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<u64, StoreError>>,
{
    let mut done = 0u64;
    loop {
        let size = match limit {
            Some(limit) => {
                let left = limit.saturating_sub(done);
                if left == 0 {
                    return Ok(done);
                }
                u32::try_from(left.min(u64::from(OPERATOR_CHUNK))).unwrap_or(OPERATOR_CHUNK)
            }
            None => OPERATOR_CHUNK,
        };
        let changed = chunk(size).await?;
        done += changed;
        if changed < u64::from(size) {
            return Ok(done);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A table of `rows` matching rows; records each chunk's size.
    async fn run(rows: u64, limit: Option<u64>) -> (u64, Vec<u32>) {
        let left = Mutex::new(rows);
        let sizes = Mutex::new(Vec::new());
        let done = run_in_chunks(limit, |size| {
            sizes.lock().unwrap().push(size);
            let mut left = left.lock().unwrap();
            let changed = (*left).min(u64::from(size));
            *left -= changed;
            std::future::ready(Ok(changed))
        })
        .await
        .unwrap();
        (done, sizes.into_inner().unwrap())
    }

    #[tokio::test]
    async fn adm_9_chunks_of_at_most_500_until_no_row_is_left() {
        assert_eq!(run(1_200, None).await, (1_200, vec![500, 500, 500]));
        assert_eq!(run(1_000, None).await, (1_000, vec![500, 500, 500]));
        assert_eq!(run(0, None).await, (0, vec![500]));
    }

    #[tokio::test]
    async fn adm_9_a_limit_bounds_the_run_and_the_last_chunk() {
        assert_eq!(run(1_200, Some(620)).await, (620, vec![500, 120]));
        assert_eq!(run(10, Some(620)).await, (10, vec![500]));
        assert_eq!(run(10, Some(0)).await, (0, vec![]));
    }

    #[test]
    fn state_names_round_trip() {
        for state in OutboxState::ALL {
            assert_eq!(OutboxState::parse(state.as_str()), Some(*state));
        }
        for state in InboxState::ALL {
            assert_eq!(InboxState::parse(state.as_str()), Some(*state));
        }
        assert_eq!(OutboxState::parse("processed"), None);
        assert_eq!(InboxState::parse("sent"), None);
    }
}
