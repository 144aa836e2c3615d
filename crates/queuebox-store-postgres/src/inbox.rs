//! `IntakeStore`, `RelayStore` and `RetentionStore` on PostgreSQL (inbox.md §9, §11;
//! operations.md §7): each method is one
//! statement of `queries/inbox/` or `queries/retention/`, prepared once per pooled connection,
//! except the relay claim (claim lock + claim) and the forward (outbox insert + fenced mark),
//! which are short transactions of two. Batches travel as parallel arrays (`unnest`), as in
//! `outbox.rs`, so a batch of any size is one round trip and one statement.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use queuebox_store::{
    Claim, ClaimToken, ForwardedRow, InboxBacklog, InsertOutcome, IntakeStore, NewInboxRow,
    RelayRow, RelayStore, RetentionRule, RetentionStore, RowId, Schedule, SourceBacklog,
    StoreError, StoredState,
};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::outbox::{claim_arrays, millis};
use crate::store::PgStore;

/// RLY-4: the candidate bound of a relay claim, min(max(3 × limit, 50), 500). Every aggregate
/// seen among the candidates has its oldest due row among them, so the bound never breaks
/// the aggregate order; it only keeps one claim from reading the whole backlog.
fn candidate_bound(limit: u32) -> i64 {
    (3 * i64::from(limit)).clamp(50, 500)
}

/// The parallel arrays of `insert.sql`, one entry per input row.
struct InsertArrays<'a> {
    ids: Vec<Uuid>,
    sources: Vec<&'a str>,
    keys: Vec<&'a str>,
    aggregates: Vec<Option<&'a str>>,
    event_types: Vec<Option<&'a str>>,
    payloads: Vec<&'a str>,
    headers: Vec<&'a str>,
    consumptions: Vec<&'static str>,
    correlations: Vec<Option<&'a str>>,
    publish_ms: Vec<Option<i64>>,
    delay_ms: Vec<i64>,
    states: Vec<&'static str>,
    last_errors: Vec<Option<&'a str>>,
}

impl<'a> InsertArrays<'a> {
    fn new(rows: &'a [NewInboxRow]) -> Self {
        let mut a = Self {
            ids: Vec::with_capacity(rows.len()),
            sources: Vec::with_capacity(rows.len()),
            keys: Vec::with_capacity(rows.len()),
            aggregates: Vec::with_capacity(rows.len()),
            event_types: Vec::with_capacity(rows.len()),
            payloads: Vec::with_capacity(rows.len()),
            headers: Vec::with_capacity(rows.len()),
            consumptions: Vec::with_capacity(rows.len()),
            correlations: Vec::with_capacity(rows.len()),
            publish_ms: Vec::with_capacity(rows.len()),
            delay_ms: Vec::with_capacity(rows.len()),
            states: Vec::with_capacity(rows.len()),
            last_errors: Vec::with_capacity(rows.len()),
        };
        for row in rows {
            // The statement computes scheduled_at from the database clock (INB-44); only the
            // publish time and the delay travel.
            let (publish, delay) = match row.schedule {
                // A dead row is due at its receipt (INB-45).
                _ if row.state == StoredState::Dead => (None, Duration::ZERO),
                Schedule::AfterReceipt { delay } => (None, delay),
                Schedule::AfterPublish {
                    publish_epoch_ms,
                    delay,
                } => (Some(publish_epoch_ms), delay),
            };
            a.ids.push(row.id);
            a.sources.push(&row.source);
            a.keys.push(&row.idempotency_key);
            a.aggregates.push(row.aggregate_id.as_deref());
            a.event_types.push(row.event_type.as_deref());
            a.payloads.push(&row.payload);
            a.headers.push(&row.headers);
            a.consumptions.push(row.consumption.as_str());
            a.correlations.push(row.correlation_id.as_deref());
            a.publish_ms.push(publish);
            a.delay_ms.push(millis(delay));
            a.states.push(match row.state {
                StoredState::Pending => "pending",
                StoredState::Dead => "dead",
            });
            a.last_errors.push(row.last_error.as_deref());
        }
        a
    }
}

/// One answer per input row, in input order: an id the insert returned was stored; any other
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

fn relay_row(row: &Row) -> Result<RelayRow, tokio_postgres::Error> {
    Ok(RelayRow {
        claim: Claim {
            id: RowId(row.try_get("id")?),
            token: ClaimToken(row.try_get("claim_token")?),
        },
        source: row.try_get("source")?,
        idempotency_key: row.try_get("idempotency_key")?,
        aggregate_id: row.try_get("aggregate_id")?,
        event_type: row.try_get("event_type")?,
        payload: row.try_get("payload")?,
        headers: row.try_get("headers")?,
        correlation_id: row.try_get("correlation_id")?,
    })
}

impl PgStore {
    /// Runs one row-count statement on one pooled connection.
    pub(crate) async fn execute(
        &self,
        during: &'static str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let client = self.client(during).await?;
        let fail = self.pg_fail(during);
        let statement = client.prepare_cached(sql).await.map_err(&fail)?;
        client.execute(&statement, params).await.map_err(&fail)
    }
}

impl PgStore {
    /// The insert, then the raw bodies of the rows it stored (storeRawBody), in one
    /// transaction: a row is never stored without the body its source keeps.
    async fn insert_with_raw_bodies(
        &self,
        rows: &[NewInboxRow],
        a: &InsertArrays<'_>,
    ) -> Result<Vec<InsertOutcome>, StoreError> {
        const DURING: &str = "storing inbox rows";
        let mut client = self.client(DURING).await?;
        let fail = self.pg_fail(DURING);
        let tx = client.transaction().await.map_err(&fail)?;
        let insert = tx
            .prepare_cached(&self.inbox_sql.insert)
            .await
            .map_err(&fail)?;
        let returned = tx
            .query(
                &insert,
                &[
                    &a.ids,
                    &a.sources,
                    &a.keys,
                    &a.aggregates,
                    &a.event_types,
                    &a.payloads,
                    &a.headers,
                    &a.consumptions,
                    &a.correlations,
                    &a.publish_ms,
                    &a.delay_ms,
                    &a.states,
                    &a.last_errors,
                ],
            )
            .await
            .map_err(&fail)?;
        let stored = returned
            .iter()
            .map(|row| row.try_get::<_, Uuid>(0))
            .collect::<Result<HashSet<_>, _>>()
            .map_err(&fail)?;
        let (ids, bodies): (Vec<Uuid>, Vec<&[u8]>) = rows
            .iter()
            .filter(|r| stored.contains(&r.id))
            .filter_map(|r| Some((r.id, r.raw_body.as_deref()?)))
            .unzip();
        if !ids.is_empty() {
            let update = tx
                .prepare_cached(&self.inbox_sql.store_raw_body)
                .await
                .map_err(&fail)?;
            tx.execute(&update, &[&ids, &bodies]).await.map_err(&fail)?;
        }
        tx.commit().await.map_err(&fail)?;
        Ok(outcomes(rows, stored))
    }
}

#[async_trait]
impl IntakeStore for PgStore {
    async fn insert_batch(&self, rows: &[NewInboxRow]) -> Result<Vec<InsertOutcome>, StoreError> {
        const DURING: &str = "storing inbox rows";
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let a = InsertArrays::new(rows);
        if rows.iter().any(|r| r.raw_body.is_some()) {
            return self.insert_with_raw_bodies(rows, &a).await;
        }
        let returned = self
            .rows(
                DURING,
                &self.inbox_sql.insert,
                &[
                    &a.ids,
                    &a.sources,
                    &a.keys,
                    &a.aggregates,
                    &a.event_types,
                    &a.payloads,
                    &a.headers,
                    &a.consumptions,
                    &a.correlations,
                    &a.publish_ms,
                    &a.delay_ms,
                    &a.states,
                    &a.last_errors,
                ],
            )
            .await?;
        let stored = returned
            .iter()
            .map(|row| row.try_get::<_, Uuid>(0))
            .collect::<Result<HashSet<_>, _>>()
            .map_err(self.pg_fail(DURING))?;
        Ok(outcomes(rows, stored))
    }
}

#[async_trait]
impl RelayStore for PgStore {
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
        let mut client = self.client(DURING).await?;
        let fail = self.pg_fail(DURING);
        // Dropping the transaction on an error rolls it back and so releases the claim lock.
        let tx = client.transaction().await.map_err(&fail)?;
        let lock = tx
            .prepare_cached(&self.inbox_sql.claim_lock)
            .await
            .map_err(&fail)?;
        tx.execute(&lock, &[&self.layout().inbox_table.as_str()])
            .await
            .map_err(&fail)?;
        let claim = tx
            .prepare_cached(&self.inbox_sql.claim)
            .await
            .map_err(&fail)?;
        let rows = tx
            .query(
                &claim,
                &[
                    &i64::from(limit),
                    &candidate_bound(limit),
                    &millis(lease),
                    &sources,
                ],
            )
            .await
            .map_err(&fail)?;
        let claimed = rows
            .iter()
            .map(relay_row)
            .collect::<Result<Vec<_>, _>>()
            .map_err(&fail)?;
        tx.commit().await.map_err(&fail)?;
        Ok(claimed)
    }

    async fn relay_renew(
        &self,
        claims: &[Claim],
        lease: Duration,
    ) -> Result<Vec<Claim>, StoreError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, tokens) = claim_arrays(claims);
        self.fenced(
            "renewing inbox leases",
            &self.inbox_sql.renew,
            &[&ids, &tokens, &millis(lease)],
        )
        .await
    }

    async fn relay_forward(&self, claim: Claim, row: &ForwardedRow) -> Result<bool, StoreError> {
        const DURING: &str = "forwarding an inbox row";
        let mut client = self.client(DURING).await?;
        let fail = self.pg_fail(DURING);
        // RLY-13: the outbox insert and the fenced mark commit or roll back together; an error
        // before the commit drops the transaction, which rolls it back.
        let tx = client.transaction().await.map_err(&fail)?;
        let insert = tx
            .prepare_cached(&self.inbox_sql.forward_insert)
            .await
            .map_err(&fail)?;
        tx.execute(
            &insert,
            &[
                &row.id,
                &row.topic,
                &row.key,
                &row.payload,
                &row.headers,
                &row.max_attempts,
            ],
        )
        .await
        .map_err(&fail)?;
        let mark = tx
            .prepare_cached(&self.inbox_sql.forward_mark)
            .await
            .map_err(&fail)?;
        let marked = tx
            .execute(&mark, &[&claim.id.0, &claim.token.0])
            .await
            .map_err(&fail)?;
        if marked == 0 {
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
                &self.inbox_sql.dead,
                &[&claim.id.0, &claim.token.0, &error],
            )
            .await?;
        Ok(n > 0)
    }

    async fn relay_release(
        &self,
        claims: &[Claim],
        error: Option<&str>,
    ) -> Result<Vec<Claim>, StoreError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, tokens) = claim_arrays(claims);
        self.fenced(
            "releasing inbox rows",
            &self.inbox_sql.release,
            &[&ids, &tokens, &error],
        )
        .await
    }

    async fn relay_reclaim_expired(&self) -> Result<u64, StoreError> {
        self.execute(
            "reclaiming expired inbox leases",
            &self.inbox_sql.reclaim,
            &[],
        )
        .await
    }

    async fn inbox_oldest_pending_age(&self) -> Result<f64, StoreError> {
        const DURING: &str = "reading the oldest pending inbox age";
        let rows = self
            .rows(DURING, &self.inbox_sql.oldest_pending_age, &[])
            .await?;
        // The query has no FROM of its own, so it always answers one row.
        match rows.first() {
            Some(row) => row.try_get(0).map_err(self.pg_fail(DURING)),
            None => Ok(0.0),
        }
    }

    async fn inbox_backlog(&self) -> Result<InboxBacklog, StoreError> {
        const DURING: &str = "reading the inbox backlog gauges";
        let rows = self.rows(DURING, &self.inbox_sql.backlog, &[]).await?;
        let mut backlog = InboxBacklog::default();
        for row in &rows {
            let read = || -> Result<(Option<String>, i64, f64), tokio_postgres::Error> {
                Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
            };
            match read().map_err(self.pg_fail(DURING))? {
                (None, dead, _) => backlog.dead = dead,
                (Some(source), pending, age) => backlog.sources.push(SourceBacklog {
                    source,
                    pending,
                    oldest_created_age_seconds: age,
                }),
            }
        }
        Ok(backlog)
    }
}

#[async_trait]
impl RetentionStore for PgStore {
    async fn retention_delete(&self, rule: RetentionRule, batch: u32) -> Result<u64, StoreError> {
        if batch == 0 {
            return Ok(0);
        }
        let batch = i64::from(batch);
        let sql = &self.inbox_sql;
        match rule {
            RetentionRule::OutboxOlderThan(age) => {
                self.execute(
                    "deleting old outbox rows",
                    &sql.retention_outbox_age,
                    &[&millis(age), &batch],
                )
                .await
            }
            RetentionRule::OutboxKeepNewest(keep) => {
                self.execute(
                    "deleting outbox rows beyond the newest",
                    &sql.retention_outbox_count,
                    &[&i64::from(keep), &batch],
                )
                .await
            }
            RetentionRule::InboxOlderThan(age) => {
                self.execute(
                    "deleting old inbox rows",
                    &sql.retention_inbox_age,
                    &[&millis(age), &batch],
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

    fn row(id: u128, key: &str, schedule: Schedule) -> NewInboxRow {
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
            schedule,
            state: StoredState::Pending,
            last_error: None,
        }
    }

    #[test]
    fn rly_4_candidate_bound() {
        assert_eq!(candidate_bound(1), 50);
        assert_eq!(candidate_bound(16), 50);
        assert_eq!(candidate_bound(17), 51);
        assert_eq!(candidate_bound(100), 300);
        assert_eq!(candidate_bound(167), 500);
        assert_eq!(candidate_bound(u32::MAX), 500);
    }

    #[test]
    fn inb_44_insert_arrays_carry_publish_time_and_delay() {
        let rows = [
            row(
                1,
                "a",
                Schedule::AfterReceipt {
                    delay: Duration::from_secs(30),
                },
            ),
            row(
                2,
                "b",
                Schedule::AfterPublish {
                    publish_epoch_ms: 1_790_000_000_000,
                    delay: Duration::ZERO,
                },
            ),
        ];
        let a = InsertArrays::new(&rows);
        assert_eq!(a.publish_ms, vec![None, Some(1_790_000_000_000)]);
        assert_eq!(a.delay_ms, vec![30_000, 0]);
        assert_eq!(a.consumptions, vec!["pull", "pull"]);
        assert_eq!(a.event_types, vec![Some("e"), Some("e")]);
        assert_eq!(a.aggregates, vec![None, None]);
    }

    #[test]
    fn inb_50_outcomes_follow_input_order() {
        let at = Schedule::AfterReceipt {
            delay: Duration::ZERO,
        };
        let rows = [row(1, "a", at), row(2, "a", at), row(3, "b", at)];
        let stored = HashSet::from([Uuid::from_u128(1), Uuid::from_u128(3)]);
        assert_eq!(
            outcomes(&rows, stored),
            vec![
                InsertOutcome::Stored(Uuid::from_u128(1)),
                InsertOutcome::Duplicate,
                InsertOutcome::Stored(Uuid::from_u128(3)),
            ]
        );
        let twice = [row(1, "a", at), row(1, "b", at)];
        let stored = HashSet::from([Uuid::from_u128(1)]);
        assert_eq!(
            outcomes(&twice, stored),
            vec![
                InsertOutcome::Stored(Uuid::from_u128(1)),
                InsertOutcome::Duplicate
            ]
        );
    }
}
