//! QueueBox pull-worker client (spec/pull.md): claims `consumption = 'pull'` inbox rows, runs the
//! application's handler in a transaction, and completes, retries or dead-letters each row under
//! the claim-token fence.
//!
//! The core depends on no database driver (PULL-73); enable a feature for an adapter: `postgres`
//! (deadpool-postgres, `PgConnectionSource`), `sqlite` (rusqlite with the bundled SQLite,
//! `SqliteConnectionSource`) or `mysql` (mysql_async, `MysqlConnectionSource`).

mod batch;
mod claim;
mod db;
mod message;
#[cfg(feature = "mysql")]
mod mysql;
mod options;
#[cfg(feature = "postgres")]
mod postgres;
mod process;
pub mod redact;
mod retry;
pub mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
mod sqltime;
mod task;
mod worker;

use std::error::Error;

pub use db::{Connection, ConnectionSource, DbError, HandlerTx, Purpose, SqlRow, SqlValue};
pub use message::InboxMessage;
#[cfg(feature = "mysql")]
pub use mysql::MysqlConnectionSource;
pub use options::{Dialect, OptionsError, Schema, WorkerOptions, is_plain_identifier};
#[cfg(feature = "postgres")]
pub use postgres::PgConnectionSource;
pub use retry::{DefaultRetryPolicy, FailureAction, RetryPolicy};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteConnectionSource;
pub use tokio_util::sync::CancellationToken;
pub use worker::{
    BatchHandler, BoxFuture, Handler, HandlerResult, Worker, batch_handler_fn, handler_fn,
};

/// The error text of PULL-63, redacted (PULL-65): what reaches `last_error` and log lines.
pub fn redacted(error: &(dyn Error + Send + Sync + 'static)) -> String {
    redact::redacted_error_text(error)
}
