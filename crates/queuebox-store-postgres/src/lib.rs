//! The PostgreSQL store: connection pool, waiting for the database at start, the bundled
//! migrations with their history and lock, the start-up schema guard, the notify objects and the
//! `notify` capture listener (outbox.md OUT-57)
//! (schema.md §1, §4, §5.1, §9–§11), the outbox statements of the poller (outbox.md §5, §7,
//! §9, §12), and the inbox, relay and retention statements (inbox.md §9, §11; operations.md §7).

mod classify;
mod connect;
mod dialect;
mod guard;
mod inbox;
mod inbox_sql;
mod listen;
mod migrate;
mod operator;
mod operator_params;
mod operator_sql;
mod outbox;
mod outbox_sql;
mod redact;
mod render;
mod replan;
mod sql;
mod store;
mod tls;

use std::sync::Arc;

use queuebox_core::database::DatabaseConfig;
use queuebox_store::{Store, StoreError};

pub use listen::{ListenerHealth, OutboxListener};
pub use sql::{MIGRATION_LOCK_KEY, bundled_sql, checksum};
pub use store::PgStore;

/// The PostgreSQL store as the binary holds it: connected (waiting for the database up to
/// `database.startupTimeoutMs`), behind the store traits.
pub async fn connect(db: &DatabaseConfig) -> Result<Arc<dyn Store>, StoreError> {
    Ok(Arc::new(PgStore::connect(db).await?))
}
