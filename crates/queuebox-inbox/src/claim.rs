//! Running the claim (one statement, SQLite's `BEGIN IMMEDIATE` transaction, or MySQL's locked
//! sequence) and turning its rows into messages (PULL-13, PULL-14, PULL-18, PULL-22).

use std::time::{Duration, SystemTime};

use uuid::Uuid;

use crate::db::{Connection, DbError, Purpose, SqlRow, SqlValue};
use crate::message::{InboxMessage, headers_from_json};
use crate::options::{Dialect, cand_limit};
use crate::sql::{MysqlClaim, Statement};
use crate::sqltime;
use crate::worker::Inner;

/// The client-side timeout of the claim call; never less than 30 s (PULL-20).
const CLAIM_TIMEOUT: Duration = Duration::from_secs(30);

/// A claimed row: the message plus what the worker needs but the handler must not see.
pub(crate) struct Claimed {
    pub message: InboxMessage,
    pub token: Uuid,
    pub scheduled_at: SystemTime,
    /// A payload column that held text that is not JSON (PULL-47).
    pub payload_invalid: bool,
}

#[derive(Debug, thiserror::Error)]
enum ClaimError {
    #[error("The claim did not finish within 30 s.")]
    Timeout,
    #[error("The claim returned an unexpected column {0}.")]
    Column(&'static str),
    /// The MySQL lock step returned 0 (timeout) or NULL (error) (pull.md §5.3, PULL-19).
    #[error("inbox pull claim: GET_LOCK did not acquire the per-source claim lock")]
    Lock,
}

/// One claim call on its own connection, committed before any handler starts (PULL-21).
pub(crate) async fn claim(inner: &Inner) -> Result<Vec<Claimed>, DbError> {
    // A fresh v4 token per call; every row of the call carries it (PULL-13).
    let token = Uuid::new_v4();
    let batch = inner.options.effective_batch();
    let canonical = [
        SqlValue::Text(inner.options.source.clone()),
        SqlValue::Int(i64::from(batch)),
        SqlValue::Int(inner.options.lease_ms()),
        SqlValue::Int(cand_limit(batch)),
        SqlValue::Uuid(token),
    ];
    let call = async {
        let mut conn = inner.source.connect(Purpose::Claim).await?;
        let st = &inner.statements;
        match (&st.mysql_claim, inner.options.dialect) {
            (Some(steps), _) => claim_mysql(&mut *conn, &st.claim, steps, &canonical).await,
            // The write lock for the whole statement; busy after the 10 s busy timeout fails the
            // claim, transiently (pull.md §5.4). Dropping the connection rolls back.
            (None, Dialect::Sqlite) => {
                conn.begin().await?;
                let rows = conn.query(&st.claim, &st.claim.bind(&canonical)).await?;
                conn.commit().await?;
                Ok(rows)
            }
            // One statement in autocommit: its own short READ COMMITTED transaction.
            (None, _) => conn.query(&st.claim, &st.claim.bind(&canonical)).await,
        }
    };
    let rows = tokio::time::timeout(CLAIM_TIMEOUT, call)
        .await
        .map_err(|_| Box::new(ClaimError::Timeout) as DbError)??;
    let mut claimed = rows
        .into_iter()
        .map(|row| decode(row, token))
        .collect::<Result<Vec<_>, _>>()?;
    // RETURNING has no order; claim order is (scheduled_at, created_at, id) (PULL-22).
    claimed.sort_by(|a, b| {
        (a.scheduled_at, a.message.created_at, a.message.id).cmp(&(
            b.scheduled_at,
            b.message.created_at,
            b.message.id,
        ))
    });
    Ok(claimed)
}

/// The seven steps of pull.md §5.3 on one connection. Once the lock is held, a failure marks
/// the connection to be closed on release, which releases the named lock (PULL-20).
async fn claim_mysql(
    conn: &mut dyn Connection,
    select: &Statement,
    steps: &MysqlClaim,
    canonical: &[SqlValue],
) -> Result<Vec<SqlRow>, DbError> {
    let locked = conn.query(&steps.lock, &steps.lock.bind(canonical)).await?;
    match locked.first().and_then(|row| row.first()) {
        Some(SqlValue::Int(1)) => {}
        _ => return Err(Box::new(ClaimError::Lock)),
    }
    let result = async {
        conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED", &[])
            .await?;
        conn.begin().await?;
        let ids: Vec<SqlValue> = conn
            .query(select, &select.bind(canonical))
            .await?
            .into_iter()
            .filter_map(|row| row.into_iter().next())
            .collect();
        let rows = if ids.is_empty() {
            Vec::new()
        } else {
            let (text, values) = steps.update.bind_ids(canonical, &ids);
            conn.execute(&text, &values).await?;
            let (text, values) = steps.fetch.bind_ids(canonical, &ids);
            conn.query(&text, &values).await?
        };
        conn.commit().await?;
        Ok::<_, DbError>(rows)
    }
    .await;
    let unlocked = match &result {
        Ok(_) => conn
            .query(&steps.unlock, &steps.unlock.bind(canonical))
            .await
            .map(drop),
        Err(_) => Ok(()),
    };
    if result.is_err() || unlocked.is_err() {
        conn.close_on_release();
    }
    let rows = result?;
    unlocked?;
    Ok(rows)
}

fn decode(row: Vec<SqlValue>, token: Uuid) -> Result<Claimed, DbError> {
    let mut it = row.into_iter();
    let mut next = || it.next().unwrap_or(SqlValue::Null);
    let err = |name| Box::new(ClaimError::Column(name)) as DbError;
    let id = match next() {
        SqlValue::Uuid(u) => u,
        SqlValue::Text(t) => Uuid::parse_str(&t).map_err(|_| err("id"))?,
        _ => return Err(err("id")),
    };
    let text = |v: SqlValue, name| match v {
        SqlValue::Text(t) => Ok(Some(t)),
        SqlValue::Null => Ok(None),
        _ => Err(err(name)),
    };
    let source = text(next(), "source")?.ok_or_else(|| err("source"))?;
    let idempotency_key = text(next(), "idempotency_key")?.ok_or_else(|| err("idempotency_key"))?;
    let aggregate_id = text(next(), "aggregate_id")?;
    let event_type = text(next(), "event_type")?;
    let (payload, payload_invalid) = match next() {
        SqlValue::Json(v) => (v, false),
        // A JSON text column is parsed (PULL-55); text that is not JSON is dead-lettered.
        SqlValue::Text(t) => match serde_json::from_str(&t) {
            Ok(v) => (v, false),
            Err(_) => (serde_json::Value::Null, true),
        },
        _ => return Err(err("payload")),
    };
    let attempt = match next() {
        SqlValue::Int(a) => i32::try_from(a).map_err(|_| err("attempt"))?,
        _ => return Err(err("attempt")),
    };
    let correlation_id = text(next(), "correlation_id")?;
    let headers = match next() {
        SqlValue::Json(v) => headers_from_json(Some(v)),
        SqlValue::Text(t) => headers_from_json(serde_json::from_str(&t).ok()),
        _ => headers_from_json(None),
    };
    // SQLite returns its times as text in the fixed form (PULL-6).
    let time = |v: SqlValue, name| match v {
        SqlValue::Timestamp(t) => Ok(t),
        SqlValue::Text(t) => sqltime::parse_utc(&t).ok_or_else(|| err(name)),
        _ => Err(err(name)),
    };
    let scheduled_at = time(next(), "scheduled_at")?;
    let created_at = time(next(), "created_at")?;
    Ok(Claimed {
        message: InboxMessage {
            id,
            source,
            idempotency_key,
            aggregate_id,
            event_type,
            payload,
            attempt,
            correlation_id,
            headers,
            created_at,
        },
        token,
        scheduled_at,
        payload_invalid,
    })
}
