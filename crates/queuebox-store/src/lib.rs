//! Store traits shared by every database (PostgreSQL now; SQLite, MySQL, SQL Server later), the
//! database-independent parts of `queuebox migrate` and of the schema guard, and the error type.
//!
//! A database implements one part trait per engine part ([`OutboxStore`] for the poller,
//! [`IntakeStore`] for the sources' intake, [`RelayStore`] for the push relay,
//! [`RetentionStore`] for retention), [`SchemaStore`] for start-up and the umbrella [`Store`]
//! that the binary holds. It gets the migration procedure (schema.md SCH-47..57) and the guard's
//! rules (SCH-60..63) from here by implementing the small backend traits [`MigrationBackend`] /
//! [`MigrationSession`] and [`SchemaDialect`], so every database follows one order of steps and
//! prints the same messages.

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod error;
pub mod guard;
pub mod intake;
pub mod migrate;
pub mod operator;
pub mod outbox;
pub mod relay;
pub mod retention;
pub mod store;
pub mod versions;

pub use queuebox_core::{ClaimToken, RowId};

pub use error::{StoreAction, StoreError, StoreErrorKind};
pub use guard::{
    ColumnFix, SchemaDialect, SchemaFacts, SchemaProblem, TableFacts, evaluate_schema,
};
pub use intake::{Consumption, InsertOutcome, IntakeStore, NewInboxRow, Schedule};
pub use migrate::{MigrationBackend, MigrationSession, MigrationState, run_migrate};
pub use operator::{
    DeleteOutcome, FinishedInboxState, FinishedOutboxState, InboxFilter, InboxMessage, InboxState,
    InboxSummary, ListCursor, OPERATOR_CHUNK, OperatorStore, OutboxFilter, OutboxMessage,
    OutboxState, OutboxSummary, Page, PageRequest, StateCount, StateCounts, run_in_chunks,
};
pub use outbox::{Claim, ClaimedRow, OutboxStore, PendingStats, TerminalWrite};
pub use relay::{ForwardedRow, RelayRow, RelayStore};
pub use retention::{RetentionRule, RetentionStore};
pub use store::{PoolStatus, SchemaStore, Store};
pub use versions::{
    BUNDLED_VERSIONS, BundledVersion, HIGHEST_VERSION, HistoryKind, HistoryRow, MigrateReport,
    MigrateRequest, NOTIFY_OBJECT_NAME, SCHEMA_HISTORY_TABLE,
};
