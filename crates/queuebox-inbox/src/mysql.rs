//! The MySQL 8 / MariaDB adapter (feature `mysql`): a mysql_async pool as the connection source.
//! Every connection has `CLIENT_FOUND_ROWS`, so an UPDATE reports the rows its fence matched
//! (PULL-10), and `time_zone = '+00:00'` (schema.md SCH-8). A connection released inside a
//! transaction, or after a failed claim (which may hold the named lock), is closed instead of
//! going back to the pool (PULL-20, PULL-73).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Params, Pool, Row, Value};

use crate::db::{Connection, ConnectionSource, DbError, Purpose, SqlRow, SqlValue};
use crate::sqltime;

/// Lends pooled connections; each call takes its own connection (PULL-34).
#[derive(Clone)]
pub struct MysqlConnectionSource {
    pool: Pool,
}

impl MysqlConnectionSource {
    /// A pool for `opts` (for example `mysql_async::Opts::from_url("mysql://…")`), with
    /// `CLIENT_FOUND_ROWS` and UTC added whatever the options say: the fence counts need them.
    pub fn new(opts: impl Into<Opts>) -> Self {
        let opts: Opts = opts.into();
        let mut setup = opts.setup().to_vec();
        setup.push("SET time_zone = '+00:00'".to_owned());
        let opts = OptsBuilder::from_opts(opts)
            .client_found_rows(true)
            .setup(setup);
        Self {
            pool: Pool::new(opts),
        }
    }

    /// Parses a `mysql://user:password@host:port/database` URL.
    pub fn from_url(url: &str) -> Result<Self, DbError> {
        Ok(Self::new(Opts::from_url(url)?))
    }

    /// The pool, e.g. to disconnect it at the end of the program.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}

#[async_trait]
impl ConnectionSource for MysqlConnectionSource {
    async fn connect(&self, _purpose: Purpose) -> Result<Box<dyn Connection>, DbError> {
        let conn = self.pool.get_conn().await?;
        Ok(Box::new(MysqlConnection {
            conn: Some(conn),
            in_tx: false,
            close: false,
        }))
    }
}

struct MysqlConnection {
    conn: Option<Conn>,
    in_tx: bool,
    close: bool,
}

impl MysqlConnection {
    fn conn(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("the connection is present until drop")
    }

    async fn run(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>, DbError> {
        let conn = self.conn();
        let rows = if params.is_empty() {
            // Text protocol: statements such as SET TRANSACTION cannot be prepared.
            conn.query(sql).await?
        } else {
            let values = params.iter().map(to_value).collect();
            conn.exec(sql, Params::Positional(values)).await?
        };
        Ok(rows)
    }
}

impl Drop for MysqlConnection {
    fn drop(&mut self) {
        if (self.in_tx || self.close)
            && let Some(conn) = self.conn.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            // Ending the session rolls the transaction back and releases any named lock.
            runtime.spawn(async move {
                let _ = conn.disconnect().await;
            });
        }
    }
}

#[async_trait]
impl Connection for MysqlConnection {
    async fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, DbError> {
        self.run(sql, params).await?;
        Ok(self.conn().affected_rows())
    }

    async fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, DbError> {
        let rows = self.run(sql, params).await?;
        Ok(rows
            .into_iter()
            .map(|row| row.unwrap().into_iter().map(from_value).collect())
            .collect())
    }

    async fn begin(&mut self) -> Result<(), DbError> {
        self.in_tx = true;
        self.conn().query_drop("START TRANSACTION").await?;
        Ok(())
    }

    async fn commit(&mut self) -> Result<(), DbError> {
        self.conn().query_drop("COMMIT").await?;
        self.in_tx = false;
        Ok(())
    }

    async fn rollback(&mut self) -> Result<(), DbError> {
        self.conn().query_drop("ROLLBACK").await?;
        self.in_tx = false;
        Ok(())
    }

    fn close_on_release(&mut self) {
        self.close = true;
    }
}

fn to_value(v: &SqlValue) -> Value {
    match v {
        SqlValue::Null => Value::NULL,
        SqlValue::Text(t) => Value::Bytes(t.clone().into_bytes()),
        SqlValue::Int(i) => Value::Int(*i),
        SqlValue::Bool(b) => Value::Int(i64::from(*b)),
        // CHAR(36), lower-case hyphenated (PULL-6).
        SqlValue::Uuid(u) => Value::Bytes(u.to_string().into_bytes()),
        SqlValue::Json(j) => Value::Bytes(j.to_string().into_bytes()),
        SqlValue::Timestamp(t) => datetime(*t),
    }
}

/// A `DATETIME(6)` in UTC.
fn datetime(t: SystemTime) -> Value {
    let text = sqltime::format_utc(t);
    let micros = t
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_micros();
    let n = |r: std::ops::Range<usize>| text[r].parse::<u16>().unwrap_or(0);
    Value::Date(
        n(0..4),
        n(5..7) as u8,
        n(8..10) as u8,
        n(11..13) as u8,
        n(14..16) as u8,
        n(17..19) as u8,
        micros,
    )
}

fn from_value(v: Value) -> SqlValue {
    match v {
        Value::NULL => SqlValue::Null,
        Value::Bytes(b) => SqlValue::Text(String::from_utf8_lossy(&b).into_owned()),
        Value::Int(i) => SqlValue::Int(i),
        Value::UInt(u) => i64::try_from(u).map_or(SqlValue::Text(u.to_string()), SqlValue::Int),
        Value::Float(f) => SqlValue::Text(f.to_string()),
        Value::Double(f) => SqlValue::Text(f.to_string()),
        Value::Date(y, mo, d, h, mi, s, us) => {
            let text = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z");
            sqltime::parse_utc(&text).map_or(SqlValue::Text(text), |t| {
                SqlValue::Timestamp(t + Duration::from_micros(u64::from(us)))
            })
        }
        other => SqlValue::Text(other.as_sql(true)),
    }
}
