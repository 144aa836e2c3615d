//! The store-independent tests, written once and run by every store crate against its real
//! database (architecture.md rule 2). Each function takes a factory that gives it a fresh,
//! empty namespace of its own, and panics on a failed expectation.
//!
//! The outbox and inbox checks need a few set-up and inspection steps that are no part of any
//! store trait (inserting rows as an application would, reading a row back, a pull claim by
//! hand, moving a row's times into the past); each store's test crate provides them
//! through [`ConformanceDatabase`] in its own SQL.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use async_trait::async_trait;
use queuebox_core::TableLayout;
use uuid::Uuid;

use crate::outbox::Claim;
use crate::store::Store;

mod cases;
mod errors;
mod fixtures;
mod inbox_insert;
mod inbox_lifecycle;
mod inbox_support;
mod operator_gauges;
mod operator_inbox;
mod operator_outbox;
mod outbox_claim;
mod outbox_lifecycle;
mod outbox_load;
mod outbox_recovery;
mod outbox_runs;
mod outbox_writes;
mod relay_claim;
mod relay_load;
mod relay_locks;
mod relay_writes;
mod retention;
mod retention_safety;
mod schema;

pub use cases::{Case, run};
use errors::*;
pub use fixtures::{InboxFixture, OpenTransaction, OutboxTransition};
use inbox_insert::*;
use inbox_lifecycle::*;
use operator_gauges::*;
use operator_inbox::*;
use operator_outbox::*;
use outbox_claim::*;
use outbox_lifecycle::*;
use outbox_load::*;
use outbox_recovery::*;
use outbox_runs::*;
use outbox_writes::*;
use relay_claim::*;
use relay_load::*;
use relay_locks::*;
use relay_writes::*;
use retention::*;
use retention_safety::*;
use schema::*;

/// One outbox row as an application inserts it (OUT-4). `scheduled_in_ms` is added to the
/// insert time; rows of one [`ConformanceDatabase::insert_outbox`] call share that time, so
/// equal offsets give equal `scheduled_at` and `sequence` decides between them.
#[derive(Clone, Debug)]
pub struct NewOutboxRow {
    pub id: Uuid,
    pub topic: String,
    pub key: Option<String>,
    /// JSON text.
    pub payload: String,
    /// JSON object text.
    pub headers: String,
    pub aggregate_type: Option<String>,
    pub max_attempts: i32,
    pub scheduled_in_ms: i64,
}

impl NewOutboxRow {
    /// A due row with no key, `{"n":1}` as payload and no headers.
    pub fn new(topic: &str) -> Self {
        Self {
            id: Uuid::new_v4(),
            topic: topic.to_owned(),
            key: None,
            payload: r#"{"n":1}"#.to_owned(),
            headers: "{}".to_owned(),
            aggregate_type: None,
            max_attempts: 5,
            scheduled_in_ms: 0,
        }
    }

    pub fn key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }

    pub fn scheduled_in_ms(mut self, ms: i64) -> Self {
        self.scheduled_in_ms = ms;
        self
    }
}

/// Every column of one outbox row as stored. Times are microseconds since the Unix epoch, and
/// `read_at` is the database clock at the read, so checks can bound a write's time. JSON
/// columns are the database's text of them.
#[derive(Clone, Debug, PartialEq)]
pub struct OutboxSnapshot {
    pub id: Uuid,
    pub topic: String,
    pub key: Option<String>,
    pub payload: String,
    pub headers: String,
    pub aggregate_type: Option<String>,
    pub state: String,
    pub attempt: i32,
    pub max_attempts: i32,
    pub scheduled_at: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub claimed_at: Option<i64>,
    pub claim_token: Option<Uuid>,
    pub lease_expires_at: Option<i64>,
    pub last_error: Option<String>,
    pub sequence: i64,
    pub read_at: i64,
}

/// Every column of one inbox row as stored, with times and `read_at` as in [`OutboxSnapshot`].
#[derive(Clone, Debug, PartialEq)]
pub struct InboxSnapshot {
    pub id: Uuid,
    pub source: String,
    pub idempotency_key: String,
    pub aggregate_id: Option<String>,
    pub event_type: Option<String>,
    pub payload: String,
    pub headers: String,
    pub state: String,
    pub consumption: String,
    pub attempt: i32,
    pub scheduled_at: i64,
    pub created_at: i64,
    pub processed_at: Option<i64>,
    pub claimed_at: Option<i64>,
    pub claim_token: Option<Uuid>,
    pub lease_expires_at: Option<i64>,
    pub correlation_id: Option<String>,
    pub last_error: Option<String>,
    pub read_at: i64,
}

/// One empty test namespace (schema, database or file) of one store.
#[async_trait]
pub trait ConformanceDatabase: Send + Sync {
    /// A store on this namespace that uses these table and column names; each call opens a
    /// store of its own (a replica), with its own connections.
    async fn store(&self, layout: TableLayout) -> Box<dyn Store>;

    /// Test set-up only: drops a column behind QueueBox's back (default table names).
    async fn drop_column(&self, table: &str, column: &str);

    /// Test set-up only: creates the outbox table with the layout's names, as an operator does
    /// for renamed names (schema.md SCH-39).
    async fn create_outbox_by_hand(&self, layout: &TableLayout);

    /// Test set-up only: inserts the rows in slice order, in one transaction, so `sequence`
    /// follows the slice.
    async fn insert_outbox(&self, layout: &TableLayout, rows: &[NewOutboxRow]);

    /// Test set-up only: the application's minimal INSERT (SCH-28: `topic` and a payload of
    /// `{}`, default table names) in its own transaction; the database's error text when it
    /// refuses the row.
    async fn insert_minimal_outbox(&self, topic: &str) -> Result<(), String>;

    /// Test inspection: one row as stored. Panics when it does not exist.
    async fn outbox_row(&self, layout: &TableLayout, id: Uuid) -> OutboxSnapshot;

    /// Test inspection: the number of rows in each state.
    async fn outbox_states(&self, layout: &TableLayout) -> BTreeMap<String, i64>;

    /// Test set-up only: creates the inbox table with the layout's names, as an operator does
    /// for renamed names (schema.md SCH-39).
    async fn create_inbox_by_hand(&self, layout: &TableLayout);

    /// Test inspection: one inbox row as stored. Panics when it does not exist.
    async fn inbox_row(&self, layout: &TableLayout, id: Uuid) -> InboxSnapshot;

    /// Test inspection: the ids of every inbox row, sorted.
    async fn inbox_ids(&self, layout: &TableLayout) -> Vec<Uuid>;

    /// Test inspection: the ids of every outbox row, sorted.
    async fn outbox_ids(&self, layout: &TableLayout) -> Vec<Uuid>;

    /// Test set-up only: moves the inbox row's `scheduled_at` and `created_at` `ms` into the
    /// past.
    async fn backdate_inbox(&self, layout: &TableLayout, id: Uuid, ms: i64);

    /// Test set-up only: moves the outbox row's `scheduled_at`, `created_at` and `updated_at`
    /// `ms` into the past.
    async fn backdate_outbox(&self, layout: &TableLayout, id: Uuid, ms: i64);

    /// Test set-up only: the claim of a pull worker (pull.md) on one row, whatever its
    /// `consumption`: `processing`, a new token, `claimed_at` = now, lease = now + `lease_ms`
    /// (negative: already expired).
    async fn claim_by_hand(&self, layout: &TableLayout, id: Uuid, lease_ms: i64);

    /// Test set-up only: another session inserts the row (default names) in a transaction it
    /// keeps open until the answer is committed, as a slow application writer does.
    async fn insert_outbox_uncommitted(&self, row: &NewOutboxRow) -> Box<dyn OpenTransaction>;

    /// Test set-up only: another session sets the inbox row's `state` in a transaction it
    /// keeps open until the answer is committed (default names).
    async fn change_inbox_state_uncommitted(
        &self,
        id: Uuid,
        state: &str,
    ) -> Box<dyn OpenTransaction>;

    /// Test set-up only: from now on the database records every insert and state change of
    /// the outbox (default names), for [`ConformanceDatabase::outbox_transitions`].
    async fn audit_outbox_transitions(&self);

    /// Test inspection: what the audit recorded, in the order it happened.
    async fn outbox_transitions(&self) -> Vec<OutboxTransition>;

    /// Test set-up only: writes the inbox rows as given, in one transaction (default names).
    async fn insert_inbox_fixtures(&self, rows: &[InboxFixture]);

    /// Test set-up only: puts the claim's token on its inbox row with a lease of now +
    /// `lease_ms` (negative: expired), leaving the row's state alone.
    async fn set_inbox_claim(&self, claim: Claim, lease_ms: i64);

    /// Test set-up only: an application's own table, beside QueueBox's, with QueueBox's column
    /// names (`state`, `created_at`, `updated_at`), one old row in each of `processed`,
    /// `dead` and `sent`.
    async fn create_application_table(&self);

    /// Test inspection: the rows of that table in each state.
    async fn application_table_states(&self) -> BTreeMap<String, i64>;

    /// A store on this namespace whose statements wait at most about 100 ms for a lock another
    /// transaction holds (PostgreSQL `lock_timeout`, MySQL `innodb_lock_wait_timeout`, the
    /// SQLite busy timeout).
    async fn store_with_short_lock_wait(&self, layout: TableLayout) -> Box<dyn Store>;

    /// Test set-up only: another session takes a lock that keeps every claim of the outbox
    /// waiting (an exclusive table lock, or the write lock of the database file), in a
    /// transaction it holds until the answer is committed.
    async fn lock_outbox(&self) -> Box<dyn OpenTransaction>;

    /// The error of opening a store on a database nobody answers for (a closed port, a file
    /// in a folder that does not exist), within a short start-up timeout.
    async fn unreachable_store_error(&self) -> crate::error::StoreError;

    /// Removes the namespace, best effort.
    async fn cleanup(self: Box<Self>);
}

/// Makes a fresh namespace per test; `test_name` helps to find leftovers.
#[async_trait]
pub trait ConformanceFactory: Send + Sync {
    async fn fresh(&self, test_name: &str) -> Box<dyn ConformanceDatabase>;
}

/// Runs futures concurrently on the calling task and returns their outputs in order. The
/// suite stays free of a runtime dependency; the stores' I/O gives the interleaving.
pub(crate) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// A fresh namespace with the bundled migrations applied, and one outbox store on it.
pub(crate) async fn migrated(
    factory: &dyn ConformanceFactory,
    name: &str,
) -> (Box<dyn ConformanceDatabase>, Box<dyn Store>) {
    let db = factory.fresh(name).await;
    db.store(TableLayout::default())
        .await
        .migrate(&crate::versions::MigrateRequest::default())
        .await
        .expect("migrate");
    let store = db.store(TableLayout::default()).await;
    (db, store)
}

/// A fresh namespace with the bundled migrations applied, and one inbox store on it.
pub(crate) async fn inbox_migrated(
    factory: &dyn ConformanceFactory,
    name: &str,
) -> (Box<dyn ConformanceDatabase>, Box<dyn Store>) {
    let db = factory.fresh(name).await;
    db.store(TableLayout::default())
        .await
        .migrate(&crate::versions::MigrateRequest::default())
        .await
        .expect("migrate");
    let store = db.store(TableLayout::default()).await;
    (db, store)
}

/// A lease no test outlives.
pub(crate) const LONG_LEASE: std::time::Duration = std::time::Duration::from_secs(60);

/// The ids of claimed rows, in the order the claim returned them.
pub(crate) fn ids_of(rows: &[crate::outbox::ClaimedRow]) -> Vec<Uuid> {
    rows.iter().map(|r| r.claim.id.0).collect()
}
