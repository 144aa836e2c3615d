//! `IntakeStore`, `RelayStore` and `RetentionStore` on MySQL / MariaDB (inbox.md §9, §11;
//! operations.md §7). The batched insert is one statement over a JSON array and a read-back of
//! the stored ids (no RETURNING on MySQL); the relay claim runs under the named claim lock
//! (GET_LOCK, RLY-6) as a short transaction of a locking read and one UPDATE; the forward is a
//! transaction of the outbox insert and the fenced mark; retention deletes in short
//! transactions of a locking read of the victims and one DELETE.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, TxOpts, Value};
use queuebox_store::{
    Claim, ClaimToken, ForwardedRow, InboxBacklog, InsertOutcome, IntakeStore, NewInboxRow,
    RelayRow, RelayStore, RetentionRule, RetentionStore, RowId, Schedule, SourceBacklog,
    StoreAction, StoreError, StoredState,
};
use uuid::Uuid;

use crate::classify;
use crate::sql::Stmt;
use crate::store::MysqlStore;
use crate::values::{Reader, claims_json, id, ids_json, json, millis, text};

/// RLY-4: the candidate bound of a relay claim, min(max(3 × limit, 50), 500). Every aggregate
/// seen among the candidates has its oldest due row among them, so the bound never breaks
/// the aggregate order; it only keeps one claim from reading the whole backlog.
fn candidate_bound(limit: u32) -> i64 {
    (3 * i64::from(limit)).clamp(50, 500)
}

/// The JSON array of `insert.sql`, one object per input row.
fn insert_json(rows: &[NewInboxRow]) -> serde_json::Value {
    serde_json::Value::Array(
        rows.iter()
            .map(|row| {
                // The statement computes scheduled_at from the database clock (INB-44); only
                // the publish time and the delay travel. A dead row is due at its receipt
                // (INB-45).
                let (publish, delay) = match row.schedule {
                    _ if row.state == StoredState::Dead => (None, Duration::ZERO),
                    Schedule::AfterReceipt { delay } => (None, delay),
                    Schedule::AfterPublish {
                        publish_epoch_ms,
                        delay,
                    } => (Some(publish_epoch_ms), delay),
                };
                serde_json::json!({
                    "id": row.id.hyphenated().to_string(),
                    "source": row.source,
                    "idempotency_key": row.idempotency_key,
                    "aggregate_id": row.aggregate_id,
                    "event_type": row.event_type,
                    "payload": row.payload,
                    "headers": row.headers,
                    "consumption": row.consumption.as_str(),
                    "correlation_id": row.correlation_id,
                    "publish_ms": publish,
                    "delay_ms": i64::try_from(delay.as_millis()).unwrap_or(i64::MAX),
                    "state": match row.state {
                        StoredState::Pending => "pending",
                        StoredState::Dead => "dead",
                    },
                    "last_error": row.last_error,
                })
            })
            .collect(),
    )
}

/// One answer per input row, in input order: an id the read-back found was stored; any other
/// row met an existing pair (or an earlier row of the batch with the same pair). `take` makes
/// sure an id given twice is answered stored once.
fn outcomes(rows: &[NewInboxRow], mut stored: HashSet<Uuid>) -> Vec<InsertOutcome> {
    rows.iter()
        .map(|row| {
            if stored.take(&row.id).is_some() {
                InsertOutcome::Stored(row.id)
            } else {
                InsertOutcome::Duplicate
            }
        })
        .collect()
}

/// The candidates a claim keeps (RLY-3/4): in their order, the first row per aggregate (a
/// NULL aggregate row is its own group), at most `limit`.
fn firsts_per_aggregate(candidates: Vec<RelayRow>, limit: u32) -> Vec<RelayRow> {
    let mut seen = HashSet::new();
    let mut kept = Vec::new();
    for row in candidates {
        if kept.len() >= limit as usize {
            break;
        }
        match &row.aggregate_id {
            Some(aggregate) if !seen.insert(aggregate.clone()) => continue,
            _ => kept.push(row),
        }
    }
    kept
}

fn relay_row(row: &mysql_async::Row, token: Uuid) -> Result<RelayRow, StoreError> {
    let r = Reader {
        row,
        during: "claiming inbox rows",
    };
    Ok(RelayRow {
        claim: Claim {
            id: RowId(r.uuid(0)?),
            token: ClaimToken(token),
        },
        source: r.get(1)?,
        idempotency_key: r.get(2)?,
        aggregate_id: r.get(3)?,
        event_type: r.get(4)?,
        payload: r.get(5)?,
        headers: r.get(6)?,
        correlation_id: r.get(7)?,
    })
}

impl MysqlStore {
    /// The claim transaction, on the connection that holds the claim lock.
    async fn relay_claim_locked(
        &self,
        conn: &mut Conn,
        limit: u32,
        lease: Duration,
        sources: &[String],
    ) -> Result<Vec<RelayRow>, StoreError> {
        const DURING: &str = "claiming inbox rows";
        let read = [
            ("sources", crate::values::list(Some(sources))),
            ("cand_limit", Value::from(candidate_bound(limit))),
        ];
        let done = self
            .read_then_write_on(
                conn,
                DURING,
                (&self.sql.inbox_claim_select, &read),
                &self.sql.inbox_claim_update,
                |rows| {
                    let candidates = rows
                        .iter()
                        .map(|row| relay_row(row, Uuid::new_v4()))
                        .collect::<Result<Vec<_>, _>>()?;
                    let kept = firsts_per_aggregate(candidates, limit);
                    if kept.is_empty() {
                        return Ok(None);
                    }
                    let claims: Vec<Claim> = kept.iter().map(|r| r.claim).collect();
                    let values = vec![
                        ("claims", json(&claims_json(&claims))),
                        ("lease_ms", millis(lease)),
                    ];
                    Ok(Some((kept, values)))
                },
            )
            .await?;
        match done {
            None => Ok(Vec::new()),
            Some((kept, changed)) if changed == kept.len() as u64 => Ok(kept),
            Some((kept, changed)) => Err(StoreError::Database {
                action: StoreAction::UseDatabase,
                during: DURING,
                reason: format!("the claim locked {} rows but changed {changed}", kept.len()),
            }),
        }
    }

    /// A locking read of ids, then one write of those ids (a retention batch, a reclaim): the
    /// rows the write changed.
    pub(crate) async fn retention_batch(
        &self,
        during: &'static str,
        select: &Stmt,
        values: &[(&str, Value)],
        delete: &Stmt,
    ) -> Result<u64, StoreError> {
        let done = self
            .read_then_write(during, (select, values), delete, |rows| {
                let ids = rows
                    .iter()
                    .map(|row| Reader { row, during }.uuid(0))
                    .collect::<Result<Vec<_>, _>>()?;
                if ids.is_empty() {
                    return Ok(None);
                }
                Ok(Some(((), vec![("ids", json(&ids_json(&ids)))])))
            })
            .await?;
        Ok(done.map(|(_, n)| n).unwrap_or(0))
    }
}

#[async_trait]
impl IntakeStore for MysqlStore {
    async fn insert_batch(&self, rows: &[NewInboxRow]) -> Result<Vec<InsertOutcome>, StoreError> {
        const DURING: &str = "storing inbox rows";
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn(DURING).await?;
        let fail = self.fail(DURING);
        let raw: Vec<(Uuid, &[u8])> = rows
            .iter()
            .filter_map(|r| Some((r.id, r.raw_body.as_deref()?)))
            .collect();
        if raw.is_empty() {
            let stored = self.insert_rows(&mut conn, rows).await.map_err(&fail)?;
            return Ok(outcomes(rows, stored));
        }
        // storeRawBody: the insert and the bodies of the rows it stored in one transaction.
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .map_err(&fail)?;
        let stored = self.insert_rows(&mut tx, rows).await.map_err(&fail)?;
        let update = &self.sql.inbox_store_raw_body;
        for (row, body) in raw.iter().filter(|(row, _)| stored.contains(row)) {
            tx.exec_drop(
                &update.sql,
                update.params(&[("id", id(*row)), ("raw_body", Value::Bytes(body.to_vec()))]),
            )
            .await
            .map_err(&fail)?;
        }
        tx.commit().await.map_err(&fail)?;
        Ok(outcomes(rows, stored))
    }
}

impl MysqlStore {
    /// insert.sql, then stored.sql on the same connection: the ids of `rows` now stored.
    async fn insert_rows(
        &self,
        q: &mut impl Queryable,
        rows: &[NewInboxRow],
    ) -> Result<HashSet<Uuid>, mysql_async::Error> {
        let insert = &self.sql.inbox_insert;
        q.exec_drop(
            &insert.sql,
            insert.params(&[("rows", json(&insert_json(rows)))]),
        )
        .await?;
        let stored = &self.sql.inbox_stored;
        let found: Vec<String> = q
            .exec(
                &stored.sql,
                stored.params(&[("ids", json(&ids_json(rows.iter().map(|r| &r.id))))]),
            )
            .await?;
        Ok(found
            .iter()
            .filter_map(|text| Uuid::parse_str(text).ok())
            .collect())
    }
}

#[async_trait]
impl RelayStore for MysqlStore {
    async fn relay_claim(
        &self,
        limit: u32,
        lease: Duration,
        sources: &[String],
    ) -> Result<Vec<RelayRow>, StoreError> {
        const DURING: &str = "claiming inbox rows";
        if limit == 0 || sources.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.conn(DURING).await?;
        let fail = self.fail(DURING);
        let name = [("name", Value::from(self.relay_lock_name.as_str()))];
        let lock = &self.sql.inbox_claim_lock;
        let got: Option<Option<i64>> = conn
            .exec_first(&lock.sql, lock.params(&name))
            .await
            .map_err(&fail)?;
        if got.flatten() != Some(1) {
            return Err(StoreError::Transient {
                action: StoreAction::UseDatabase,
                during: DURING,
                reason: format!(
                    "GET_LOCK did not acquire the relay claim lock {} within 10 s",
                    self.relay_lock_name
                ),
            });
        }
        let claimed = self
            .relay_claim_locked(&mut conn, limit, lease, sources)
            .await;
        // The lock must not stay with a pooled connection: release it, or close the
        // connection, which releases it too.
        let unlock = &self.sql.inbox_claim_unlock;
        if let Err(err) = conn.exec_drop(&unlock.sql, unlock.params(&name)).await {
            tracing::debug!(reason = %classify::reason(&err, &self.password), "releasing the relay claim lock; closing its connection instead");
            let _ = conn.disconnect().await;
        }
        claimed
    }

    async fn relay_renew(
        &self,
        claims: &[Claim],
        lease: Duration,
    ) -> Result<Vec<Claim>, StoreError> {
        self.fenced_write(
            "renewing inbox leases",
            &self.sql.inbox_fence,
            claims,
            &self.sql.inbox_renew,
            |held| {
                vec![
                    ("claims", json(&claims_json(held))),
                    ("lease_ms", millis(lease)),
                ]
            },
        )
        .await
    }

    async fn relay_forward(&self, claim: Claim, row: &ForwardedRow) -> Result<bool, StoreError> {
        const DURING: &str = "forwarding an inbox row";
        let mut conn = self.conn(DURING).await?;
        let fail = self.fail(DURING);
        // RLY-13: the outbox insert and the fenced mark commit or roll back together; an error
        // before the commit drops the transaction, which rolls it back.
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .map_err(&fail)?;
        let insert = &self.sql.inbox_forward_insert;
        tx.exec_drop(
            &insert.sql,
            insert.params(&[
                ("id", id(row.id)),
                ("topic", Value::from(row.topic.as_str())),
                ("key", text(row.key.as_deref())),
                ("payload", Value::from(row.payload.as_str())),
                ("headers", Value::from(row.headers.as_str())),
                ("max_attempts", Value::from(row.max_attempts)),
            ]),
        )
        .await
        .map_err(&fail)?;
        let mark = &self.sql.inbox_forward_mark;
        tx.exec_drop(
            &mark.sql,
            mark.params(&[("id", id(claim.id.0)), ("token", id(claim.token.0))]),
        )
        .await
        .map_err(&fail)?;
        if tx.affected_rows() == 0 {
            tx.rollback().await.map_err(&fail)?;
            return Ok(false);
        }
        tx.commit().await.map_err(&fail)?;
        Ok(true)
    }

    async fn relay_dead(&self, claim: Claim, error: &str) -> Result<bool, StoreError> {
        let n = self
            .execute(
                "marking an inbox row dead",
                &self.sql.inbox_dead,
                &[
                    ("id", id(claim.id.0)),
                    ("token", id(claim.token.0)),
                    ("error", Value::from(error)),
                ],
            )
            .await?;
        Ok(n > 0)
    }

    async fn relay_release(
        &self,
        claims: &[Claim],
        error: Option<&str>,
    ) -> Result<Vec<Claim>, StoreError> {
        self.fenced_write(
            "releasing inbox rows",
            &self.sql.inbox_fence,
            claims,
            &self.sql.inbox_release,
            |held| vec![("claims", json(&claims_json(held))), ("error", text(error))],
        )
        .await
    }

    async fn relay_reclaim_expired(&self) -> Result<u64, StoreError> {
        self.retention_batch(
            "reclaiming expired inbox leases",
            &self.sql.inbox_reclaim_select,
            &[],
            &self.sql.inbox_reclaim,
        )
        .await
    }

    async fn inbox_oldest_pending_age(&self) -> Result<f64, StoreError> {
        const DURING: &str = "reading the oldest pending inbox age";
        let rows = self
            .rows(DURING, &self.sql.inbox_oldest_pending_age, &[])
            .await?;
        // The query has no FROM of its own, so it always answers one row.
        match rows.first() {
            Some(row) => Reader {
                row,
                during: DURING,
            }
            .get(0),
            None => Ok(0.0),
        }
    }

    async fn inbox_backlog(&self) -> Result<InboxBacklog, StoreError> {
        const DURING: &str = "reading the inbox backlog gauges";
        let rows = self.rows(DURING, &self.sql.inbox_backlog, &[]).await?;
        let mut backlog = InboxBacklog::default();
        for row in &rows {
            let r = Reader {
                row,
                during: DURING,
            };
            match r.get::<Option<String>>(0)? {
                None => backlog.dead = r.get(1)?,
                Some(source) => backlog.sources.push(SourceBacklog {
                    source,
                    pending: r.get(1)?,
                    oldest_created_age_seconds: r.get(2)?,
                }),
            }
        }
        Ok(backlog)
    }
}

#[async_trait]
impl RetentionStore for MysqlStore {
    async fn retention_delete(&self, rule: RetentionRule, batch: u32) -> Result<u64, StoreError> {
        if batch == 0 {
            return Ok(0);
        }
        let batch = Value::from(batch);
        let sql = &self.sql;
        match rule {
            RetentionRule::OutboxOlderThan(age) => {
                self.retention_batch(
                    "deleting old outbox rows",
                    &sql.retention_outbox_age,
                    &[("max_age_ms", millis(age)), ("batch", batch)],
                    &sql.outbox_delete_ids,
                )
                .await
            }
            RetentionRule::OutboxKeepNewest(keep) => {
                self.retention_batch(
                    "deleting outbox rows beyond the newest",
                    &sql.retention_outbox_count,
                    &[("keep", Value::from(keep)), ("batch", batch)],
                    &sql.outbox_delete_ids,
                )
                .await
            }
            RetentionRule::InboxOlderThan(age) => {
                self.retention_batch(
                    "deleting old inbox rows",
                    &sql.retention_inbox_age,
                    &[("max_age_ms", millis(age)), ("batch", batch)],
                    &sql.inbox_delete_ids,
                )
                .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_store::Consumption;

    fn row(id: u128, key: &str) -> NewInboxRow {
        NewInboxRow {
            raw_body: None,
            id: Uuid::from_u128(id),
            source: "s".into(),
            idempotency_key: key.into(),
            aggregate_id: None,
            event_type: Some("e".into()),
            payload: "{}".into(),
            headers: "{}".into(),
            consumption: Consumption::Pull,
            correlation_id: None,
            schedule: Schedule::AfterPublish {
                publish_epoch_ms: 1_790_000_000_000,
                delay: Duration::from_secs(30),
            },
            state: StoredState::Pending,
            last_error: None,
        }
    }

    fn relay(n: u128, aggregate: Option<&str>) -> RelayRow {
        RelayRow {
            claim: Claim {
                id: RowId(Uuid::from_u128(n)),
                token: ClaimToken(Uuid::from_u128(n)),
            },
            source: "s".into(),
            idempotency_key: n.to_string(),
            aggregate_id: aggregate.map(str::to_owned),
            event_type: None,
            payload: "{}".into(),
            headers: "{}".into(),
            correlation_id: None,
        }
    }

    #[test]
    fn rly_4_candidate_bound() {
        assert_eq!(candidate_bound(1), 50);
        assert_eq!(candidate_bound(17), 51);
        assert_eq!(candidate_bound(u32::MAX), 500);
    }

    #[test]
    fn rly_3_first_row_per_aggregate_nulls_apart_at_most_limit() {
        let kept = firsts_per_aggregate(
            vec![
                relay(1, Some("a")),
                relay(2, None),
                relay(3, Some("a")),
                relay(4, None),
                relay(5, Some("b")),
                relay(6, Some("c")),
            ],
            4,
        );
        let ids: Vec<u128> = kept.iter().map(|r| r.claim.id.0.as_u128()).collect();
        assert_eq!(ids, vec![1, 2, 4, 5]);
    }

    #[test]
    fn inb_44_insert_json_carries_publish_time_and_delay() {
        let mut dead = row(2, "b");
        dead.state = StoredState::Dead;
        dead.last_error = Some("not JSON".into());
        let j = insert_json(&[row(1, "a"), dead]);
        assert_eq!(j[0]["publish_ms"], 1_790_000_000_000_i64);
        assert_eq!(j[0]["delay_ms"], 30_000);
        assert_eq!(j[0]["consumption"], "pull");
        assert!(j[0]["aggregate_id"].is_null());
        assert!(j[1]["publish_ms"].is_null(), "a dead row is due at receipt");
        assert_eq!(j[1]["delay_ms"], 0);
        assert_eq!(j[1]["state"], "dead");
    }

    #[test]
    fn inb_50_outcomes_follow_input_order() {
        let rows = [row(1, "a"), row(2, "a"), row(3, "b")];
        let stored = HashSet::from([Uuid::from_u128(1), Uuid::from_u128(3)]);
        assert_eq!(
            outcomes(&rows, stored),
            vec![
                InsertOutcome::Stored(Uuid::from_u128(1)),
                InsertOutcome::Duplicate,
                InsertOutcome::Stored(Uuid::from_u128(3)),
            ]
        );
    }
}
