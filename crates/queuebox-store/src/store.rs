//! `SchemaStore`: the schema side of a store (migrate, guard, readiness), which the binary
//! calls at start and in `queuebox migrate`. The engine's row traits come with the next stage.

use async_trait::async_trait;

use crate::error::StoreError;
use crate::versions::{MigrateReport, MigrateRequest};

/// What every database store does for its schema.
#[async_trait]
pub trait SchemaStore: Send + Sync {
    /// The whole `queuebox migrate` procedure (schema.md SCH-47..57, SCH-25), logging its
    /// messages. Most stores implement it with [`crate::run_migrate`].
    async fn migrate(&self, request: &MigrateRequest) -> Result<MigrateReport, StoreError>;

    /// The start-up schema guard (SCH-60..63) for the store's mapped names; `notify` is
    /// `outbox.capture.mode: notify`. Fails with [`StoreError::SchemaMismatch`] listing every
    /// problem.
    async fn check_schema(&self, notify: bool) -> Result<(), StoreError>;

    /// A bounded round trip, for readiness.
    async fn ping(&self) -> Result<(), StoreError>;
}
