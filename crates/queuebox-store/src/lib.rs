//! Store traits shared by every database (PostgreSQL now; SQLite, MySQL, SQL Server later), the
//! database-independent parts of `queuebox migrate` and of the schema guard, and the error type.
//!
//! A store implements [`SchemaStore`]; it gets the migration procedure (schema.md SCH-47..57)
//! and the guard's rules (SCH-60..63) from here by implementing the small backend traits
//! [`MigrationBackend`] / [`MigrationSession`] and [`SchemaDialect`], so every database follows
//! one order of steps and prints the same messages.

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod error;
pub mod guard;
pub mod inbox;
pub mod migrate;
pub mod outbox;
pub mod store;
pub mod versions;

pub use error::{StoreAction, StoreError};
pub use guard::{
    ColumnFix, SchemaDialect, SchemaFacts, SchemaProblem, TableFacts, TableKind, evaluate_schema,
};
pub use inbox::{
    Consumption, ForwardedRow, InboxStore, InsertOutcome, NewInboxRow, RelayRow, RetentionRule,
    Schedule, StoredState,
};
pub use migrate::{MigrationBackend, MigrationSession, MigrationState, run_migrate};
pub use outbox::{Claim, ClaimedRow, OutboxStore, PendingStats, TerminalWrite};
pub use store::SchemaStore;
pub use versions::{
    BUNDLED_VERSIONS, BundledVersion, HIGHEST_VERSION, HistoryKind, HistoryRow, MigrateReport,
    MigrateRequest, NOTIFY_OBJECT_NAME, SCHEMA_HISTORY_TABLE,
};
