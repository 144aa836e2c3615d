//! Store traits shared by every database (PostgreSQL now; SQLite, MySQL, SQL Server later), the
//! database-independent parts of `queuebox migrate` and of the schema guard, and the error type.
//!
//! A database implements one part trait per engine part ([`OutboxStore`] for the poller,
//! [`IntakeStore`] for the sources' intake, [`RelayStore`] for the push relay,
//! [`RetentionStore`] for retention), [`SchemaStore`] for start-up and the umbrella [`Store`]
//! that the binary holds. It gets the migration procedure (schema.md SCH-47..57) and the guard's
//! rules (SCH-60..63) from here by implementing the small backend traits [`MigrationBackend`] /
//! [`MigrationSession`] and [`SchemaDialect`], so every database follows one order of steps and
//! prints the same messages. [`OperatorStore`] serves the admin API.
//!
//! # Adding a store
//!
//! 1. A crate `queuebox-store-<db>` that implements every part trait and [`Store`] on one
//!    handle, and a `connect(&DatabaseConfig) -> Result<Arc<dyn Store>, StoreError>` that the
//!    binary's `wiring.rs` calls from its one `match` on `database.type`. It depends on
//!    `queuebox-core` and this crate only, never on the config crate: the connection target is
//!    `queuebox_core::database::DatabaseTarget`.
//! 2. Its SQL in files, one statement per file, in the grammar of
//!    `queuebox_core::sql_template` (`"{name}"` identifiers inside the dialect's quotes, `:name`
//!    parameters, a first comment line stating locking and isolation), rendered once per store.
//!    States are literals in the files (SCH-9). A part may need a short transaction where the
//!    database has no `UPDATE ... RETURNING`: the traits promise atomicity and one round trip
//!    per batch where the database allows, never a statement count.
//! 3. Every driver error classified into a [`StoreErrorKind`] (lock conflicts and timeouts
//!    transient, lost connections outages, refused data rejected), with tests that provoke them
//!    on the real server.
//! 4. The conformance suite, in its test crate: a [`conformance::ConformanceFactory`] and
//!    [`conformance::ConformanceDatabase`] (the set-up and inspection steps in the database's
//!    own SQL), then `queuebox_store::conformance_tests!(MyFactory);`, which generates one test
//!    per case. A store is done when all of them pass.

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
pub mod wait;

pub use queuebox_core::{ClaimToken, RowId};

pub use error::{StoreAction, StoreError, StoreErrorKind};
pub use guard::{
    ColumnFix, RAW_BODY_COLUMN, SchemaDialect, SchemaFacts, SchemaNeeds, SchemaProblem, TableFacts,
    evaluate_schema,
};
pub use intake::{Consumption, InsertOutcome, IntakeStore, NewInboxRow, Schedule, StoredState};
pub use migrate::{MigrationBackend, MigrationSession, MigrationState, run_migrate};
pub use operator::{
    DeleteOutcome, FinishedInboxState, FinishedOutboxState, InboxFilter, InboxMessage, InboxState,
    InboxSummary, ListCursor, OPERATOR_CHUNK, OperatorStore, OutboxFilter, OutboxMessage,
    OutboxState, OutboxSummary, Page, PageRequest, StateCount, StateCounts, run_in_chunks,
};
pub use outbox::{Claim, ClaimedRow, OutboxStore, PendingStats, RunStart, TerminalWrite};
pub use relay::{ForwardedRow, InboxBacklog, RelayRow, RelayStore, SourceBacklog};
pub use retention::{RetentionRule, RetentionStore};
pub use store::{PoolStatus, SchemaStore, Store};
pub use versions::{
    BUNDLED_VERSIONS, BundledVersion, HIGHEST_VERSION, HistoryKind, HistoryRow, MigrateReport,
    MigrateRequest, NOTIFY_OBJECT_NAME, RAW_BODY_VERSION, SCHEMA_HISTORY_TABLE,
};
pub use wait::{Attempt, wait_for_database};
