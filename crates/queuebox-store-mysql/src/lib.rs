//! The MySQL 8 / MariaDB store (docs/mysql.md): connection pool, waiting for the database at
//! start, the session settings (schema.md SCH-8), the bundled migrations with their history and
//! the named migration lock, the start-up schema guard (schema.md §5.3, §9–§11), the outbox
//! statements of the poller (outbox.md §5, §7, §9, §12), the inbox, relay and retention
//! statements (inbox.md §9, §11; operations.md §7) and the operator statements. Every
//! statement is a file of `queries/`; where MySQL needs a short transaction instead of one
//! statement, the file says which lock it takes and why.

mod classify;
mod dialect;
mod guard;
mod inbox;
mod migrate;
mod operator;
mod outbox;
mod sql;
mod store;
mod values;

use std::sync::Arc;

use queuebox_core::database::DatabaseConfig;
use queuebox_store::{Store, StoreError};

pub use sql::{bundled_sql, checksum};
pub use store::MysqlStore;

/// The MySQL store as the binary holds it: connected (waiting for the database up to
/// `database.startupTimeoutMs`), behind the store traits.
pub async fn connect(db: &DatabaseConfig) -> Result<Arc<dyn Store>, StoreError> {
    Ok(Arc::new(MysqlStore::connect(db).await?))
}
