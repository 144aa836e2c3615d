//! The traits a database implements as a whole: `SchemaStore` (migrate, guard, readiness), which
//! the binary calls at start and in `queuebox migrate`, and `Store`, the umbrella over every
//! part, which the binary holds as one `Arc<dyn Store>` and hands each engine part as the
//! narrow trait it needs (`Arc<dyn Store>` upcasts to `Arc<dyn OutboxStore>` and the others).

use async_trait::async_trait;

use crate::error::StoreError;
use crate::guard::SchemaNeeds;
use crate::intake::IntakeStore;
use crate::operator::OperatorStore;
use crate::outbox::OutboxStore;
use crate::relay::RelayStore;
use crate::retention::RetentionStore;
use crate::versions::{MigrateReport, MigrateRequest};

/// What every database store does for its schema.
#[async_trait]
pub trait SchemaStore: Send + Sync {
    /// The whole `queuebox migrate` procedure (schema.md SCH-47..57, SCH-25), logging its
    /// messages. Most stores implement it with [`crate::run_migrate`].
    async fn migrate(&self, request: &MigrateRequest) -> Result<MigrateReport, StoreError>;

    /// The start-up schema guard (SCH-60..63) for the store's mapped names and what the
    /// configuration needs beyond them (the notify trigger, `raw_body`). Fails with
    /// [`StoreError::SchemaMismatch`] listing every problem.
    async fn check_schema(&self, needs: &SchemaNeeds) -> Result<(), StoreError>;

    /// A bounded round trip, for readiness.
    async fn ping(&self) -> Result<(), StoreError>;
}

/// The connection pool's state for the `queuebox_db_pool_*` gauges (MET catalogue). A store
/// without a pool (one SQLite connection) answers its one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStatus {
    /// Connections lent out now.
    pub active: u64,
    /// Open connections waiting in the pool.
    pub idle: u64,
    /// `database.poolSize`.
    pub max: u64,
    /// Callers waiting for a connection.
    pub pending: u64,
}

/// One database, whole: every part the engine and the binary use. A store crate implements each
/// part trait and this one; the binary chooses the store by `database.type` in one place.
#[async_trait]
pub trait Store:
    SchemaStore + OutboxStore + IntakeStore + RelayStore + RetentionStore + OperatorStore
{
    /// The pool gauges, read without a round trip (a scrape never queries anything, MET-6).
    fn pool_status(&self) -> PoolStatus;

    /// Closes the pool (OPS-28 phase 9): connections lent out close when given back, and every
    /// later call fails at once.
    async fn close(&self);
}
