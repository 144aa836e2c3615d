//! The SQLite adapter (feature `sqlite`): rusqlite with the bundled SQLite, one new connection
//! per request on a database file. Every connection has `busy_timeout = 10000` and the file runs
//! in WAL journal mode (pull.md §5.4); `begin` is `BEGIN IMMEDIATE` (PULL-28). rusqlite blocks,
//! so every call runs on tokio's blocking pool, never on a runtime worker thread.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::types::{Value, ValueRef};

use crate::db::{Connection, ConnectionSource, DbError, Purpose, SqlRow, SqlValue};
use crate::sqltime;

/// The busy timeout of every connection (PULL-18, PULL-58): a claim waits this long for the
/// write lock, then fails transiently.
const BUSY_TIMEOUT: Duration = Duration::from_millis(10_000);

/// Opens a new connection to one database file on each call (PULL-34). Opening a SQLite
/// connection is cheap, and a connection is never shared between the claim, the handler
/// transaction, renewals and failure writes.
#[derive(Debug, Clone)]
pub struct SqliteConnectionSource {
    path: PathBuf,
}

impl SqliteConnectionSource {
    /// A source for the database file at `path` (which must exist and hold the inbox table).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }
}

#[async_trait]
impl ConnectionSource for SqliteConnectionSource {
    async fn connect(&self, _purpose: Purpose) -> Result<Box<dyn Connection>, DbError> {
        let path = self.path.clone();
        let conn = tokio::task::spawn_blocking(move || open(path)).await??;
        Ok(Box::new(SqliteConnection { conn: Some(conn) }))
    }
}

fn open(path: PathBuf) -> Result<rusqlite::Connection, rusqlite::Error> {
    // No create flag: a wrong path is an error, not a new empty database.
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
        | rusqlite::OpenFlags::SQLITE_OPEN_URI
        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = rusqlite::Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // WAL is a property of the file: set it only when it is not set yet, because the switch
    // needs the database to itself.
    let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    Ok(conn)
}

/// Closing a rusqlite connection rolls back its open transaction (PULL-73).
struct SqliteConnection {
    /// `None` only while a call runs on the blocking pool.
    conn: Option<rusqlite::Connection>,
}

impl SqliteConnection {
    /// Runs `f` on the blocking pool with the connection. If the caller's future is dropped
    /// meanwhile, the connection closes on that thread when `f` ends (rolling back).
    async fn with<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    ) -> Result<T, DbError> {
        let conn = self
            .conn
            .take()
            .ok_or("the SQLite connection was lost by an interrupted call")?;
        let (conn, result) = tokio::task::spawn_blocking(move || {
            let result = f(&conn);
            (conn, result)
        })
        .await?;
        self.conn = Some(conn);
        Ok(result?)
    }
}

fn to_value(v: &SqlValue) -> Value {
    match v {
        SqlValue::Null => Value::Null,
        SqlValue::Text(t) => Value::Text(t.clone()),
        SqlValue::Int(i) => Value::Integer(*i),
        SqlValue::Bool(b) => Value::Integer(i64::from(*b)),
        // Lower-case hyphenated text (PULL-6).
        SqlValue::Uuid(u) => Value::Text(u.to_string()),
        SqlValue::Json(j) => Value::Text(j.to_string()),
        SqlValue::Timestamp(t) => Value::Text(sqltime::format_utc(*t)),
    }
}

fn from_value(v: ValueRef<'_>) -> SqlValue {
    match v {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(i) => SqlValue::Int(i),
        ValueRef::Real(f) => SqlValue::Text(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => {
            SqlValue::Text(String::from_utf8_lossy(t).into_owned())
        }
    }
}

#[async_trait]
impl Connection for SqliteConnection {
    async fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, DbError> {
        let (sql, values) = (
            sql.to_owned(),
            params.iter().map(to_value).collect::<Vec<_>>(),
        );
        self.with(move |c| {
            let mut stmt = c.prepare(&sql)?;
            // Stepped to the end, so a statement that returns rows (a PRAGMA, `RETURNING`) runs
            // here too; the count is the rows it changed (0 for a read).
            let readonly = stmt.readonly();
            let mut rows = stmt.query(rusqlite::params_from_iter(values))?;
            while rows.next()?.is_some() {}
            drop(rows);
            Ok(if readonly { 0 } else { c.changes() })
        })
        .await
    }

    async fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, DbError> {
        let (sql, values) = (
            sql.to_owned(),
            params.iter().map(to_value).collect::<Vec<_>>(),
        );
        self.with(move |c| {
            let mut stmt = c.prepare(&sql)?;
            let width = stmt.column_count();
            let mut rows = stmt.query(rusqlite::params_from_iter(values))?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push(
                    (0..width)
                        .map(|i| row.get_ref(i).map(from_value))
                        .collect::<Result<_, _>>()?,
                );
            }
            Ok(out)
        })
        .await
    }

    async fn begin(&mut self) -> Result<(), DbError> {
        // The write lock from the start, so the snapshot is never stale at Complete (PULL-28).
        self.with(|c| c.execute_batch("BEGIN IMMEDIATE")).await
    }

    async fn commit(&mut self) -> Result<(), DbError> {
        self.with(|c| c.execute_batch("COMMIT")).await
    }

    async fn rollback(&mut self) -> Result<(), DbError> {
        self.with(|c| c.execute_batch("ROLLBACK")).await
    }
}
