//! The SQLite store, the embedded default (issue 12): one connection on a thread of its own, so
//! no SQLite call blocks the async runtime; WAL journal mode and the busy timeout (schema.md
//! SCH-8, config.md CFG-42); the bundled migrations of schema.md §5.4 with their history, the
//! write lock as the migration lock, and the schema guard (§9–§11); the outbox statements of
//! the poller, the inbox, relay, retention and operator statements, each a file of `queries/`
//! run in a `BEGIN IMMEDIATE` transaction (outbox.md OUT-17, inbox.md RLY-6).
//!
//! SQLite has one writer at a time for the whole file, so several QueueBox processes (and an
//! application) may share one file on one host: they take turns, which is slow, not wrong.

mod classify;
mod guard;
mod inbox;
mod migrate;
mod operator;
mod outbox;
mod rows;
mod sql;
mod store;
mod time;
mod worker;

use std::sync::Arc;

use queuebox_core::database::DatabaseConfig;
use queuebox_store::{Store, StoreError};

pub use sql::{bundled_sql, checksum};
pub use store::SqliteStore;

/// The SQLite store as the binary holds it: the file opened (waiting up to
/// `database.startupTimeoutMs` when it cannot be), behind the store traits.
pub async fn connect(db: &DatabaseConfig) -> Result<Arc<dyn Store>, StoreError> {
    Ok(Arc::new(SqliteStore::connect(db).await?))
}
