//! The driver-neutral connection contract of PULL-73: run a statement with parameters (rows or
//! affected count), begin, commit, roll back, release. Adapters (features `postgres`, `sqlite`,
//! `mysql`) are thin.

use std::error::Error;
use std::time::SystemTime;

use async_trait::async_trait;
use uuid::Uuid;

/// An error from a driver, kept as the original error so its cause chain can be rendered.
pub type DbError = Box<dyn Error + Send + Sync + 'static>;

/// A parameter or column value.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Null,
    Text(String),
    Int(i64),
    Bool(bool),
    Uuid(Uuid),
    Json(serde_json::Value),
    Timestamp(SystemTime),
}

impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        Self::Text(v.to_owned())
    }
}
impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        Self::Text(v)
    }
}
impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}
impl From<i32> for SqlValue {
    fn from(v: i32) -> Self {
        Self::Int(i64::from(v))
    }
}
impl From<bool> for SqlValue {
    fn from(v: bool) -> Self {
        Self::Bool(v)
    }
}
impl From<Uuid> for SqlValue {
    fn from(v: Uuid) -> Self {
        Self::Uuid(v)
    }
}
impl From<serde_json::Value> for SqlValue {
    fn from(v: serde_json::Value) -> Self {
        Self::Json(v)
    }
}
impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// One result row, columns in select order.
pub type SqlRow = Vec<SqlValue>;

/// Why the worker asks for a connection; lets a test source fail one kind only (PULL-C24, C27).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Claim,
    Renew,
    Handler,
    Failure,
}

/// A connection lent by a [`ConnectionSource`]. Dropping it releases it; dropping it with an
/// open transaction must roll that transaction back (PULL-73).
#[async_trait]
pub trait Connection: Send {
    /// Runs a statement and returns the affected-row count (rows matched, PULL-10).
    async fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, DbError>;
    /// Runs a statement and returns its rows.
    async fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, DbError>;
    async fn begin(&mut self) -> Result<(), DbError>;
    async fn commit(&mut self) -> Result<(), DbError>;
    async fn rollback(&mut self) -> Result<(), DbError>;
    /// Asks that releasing this connection close it instead of returning it to a pool. The
    /// MySQL claim calls it after a failure while it may hold the per-source named lock, which
    /// only the end of the session releases then (PULL-20). The default does nothing.
    fn close_on_release(&mut self) {}
}

/// Opens or lends a new connection on each call; never a single shared connection, because the
/// renewal and the failure writes need their own (PULL-34).
#[async_trait]
pub trait ConnectionSource: Send + Sync + 'static {
    async fn connect(&self, purpose: Purpose) -> Result<Box<dyn Connection>, DbError>;
}

/// The handler's view of its transaction: it can only run statements (PULL-35, PULL-73). The
/// worker owns begin, commit and rollback.
pub struct HandlerTx {
    pub(crate) conn: Box<dyn Connection>,
}

impl HandlerTx {
    /// Runs a statement in the handler transaction, in the driver's parameter style (`$1` on
    /// PostgreSQL, `?` on MySQL/MariaDB and SQLite).
    pub async fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, DbError> {
        self.conn.execute(sql, params).await
    }

    /// Runs a query in the handler transaction.
    pub async fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, DbError> {
        self.conn.query(sql, params).await
    }
}
