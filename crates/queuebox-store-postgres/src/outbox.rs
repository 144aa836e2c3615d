//! `OutboxStore` on PostgreSQL (outbox.md §5, §7, §9, §12): each method is one statement of
//! `queries/outbox/`, prepared once per pooled connection. Batches travel as parallel arrays
//! (`unnest`), so a batch of any size is one round trip and one statement, and the database
//! answers which claims it actually wrote.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::Object;
use queuebox_store::{
    Claim, ClaimToken, ClaimedRow, OutboxStore, PendingStats, RowId, RunStart, StoreAction,
    StoreError, TerminalWrite,
};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use crate::replan::Planning;
use crate::store::PgStore;

/// Outcome codes of `finish.sql`, which maps them to state literals (SCH-9).
const OUTCOME_SENT: i32 = 0;
const OUTCOME_RETRY: i32 = 1;
const OUTCOME_DEAD: i32 = 2;

/// Milliseconds for an `INTERVAL` parameter. A duration past `i64::MAX` ms cannot come from
/// the configuration; saturating lets PostgreSQL refuse it as out of range instead of wrapping.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The arrays of a fenced batch: ids and tokens, in the same order.
pub(crate) fn claim_arrays(claims: &[Claim]) -> (Vec<Uuid>, Vec<Uuid>) {
    claims.iter().map(|c| (c.id.0, c.token.0)).unzip()
}

/// The arrays of `finish.sql`: id, token, outcome, attempt, delay ms, error. A claim given
/// twice keeps its first write: the UPDATE would otherwise pick one of them at random.
struct FinishArrays {
    ids: Vec<Uuid>,
    tokens: Vec<Uuid>,
    outcomes: Vec<i32>,
    attempts: Vec<Option<i32>>,
    delays: Vec<Option<i64>>,
    errors: Vec<Option<String>>,
}

impl FinishArrays {
    fn new(writes: &[TerminalWrite]) -> Self {
        let mut seen = HashSet::with_capacity(writes.len());
        let mut arrays = Self {
            ids: Vec::with_capacity(writes.len()),
            tokens: Vec::with_capacity(writes.len()),
            outcomes: Vec::with_capacity(writes.len()),
            attempts: Vec::with_capacity(writes.len()),
            delays: Vec::with_capacity(writes.len()),
            errors: Vec::with_capacity(writes.len()),
        };
        for write in writes {
            let claim = write.claim();
            if !seen.insert(claim) {
                continue;
            }
            let (outcome, attempt, delay, error) = match write {
                TerminalWrite::Sent { .. } => (OUTCOME_SENT, None, None, None),
                TerminalWrite::Retry {
                    attempt,
                    delay,
                    error,
                    ..
                } => (
                    OUTCOME_RETRY,
                    Some(*attempt),
                    Some(millis(*delay)),
                    Some(error.clone()),
                ),
                // No error: the statement keeps the row's last_error.
                TerminalWrite::Hold { attempt, delay, .. } => {
                    (OUTCOME_RETRY, Some(*attempt), Some(millis(*delay)), None)
                }
                TerminalWrite::Dead { attempt, error, .. } => {
                    (OUTCOME_DEAD, Some(*attempt), None, Some(error.clone()))
                }
            };
            arrays.ids.push(claim.id.0);
            arrays.tokens.push(claim.token.0);
            arrays.outcomes.push(outcome);
            arrays.attempts.push(attempt);
            arrays.delays.push(delay);
            arrays.errors.push(error);
        }
        arrays
    }
}

impl PgStore {
    /// A driver error as the store error of its kind (`classify.rs`), redacted.
    pub(crate) fn pg_fail(
        &self,
        during: &'static str,
    ) -> impl Fn(tokio_postgres::Error) -> StoreError + '_ {
        move |e| self.pg_error(StoreAction::UseDatabase, during, &e)
    }

    pub(crate) async fn client(&self, during: &'static str) -> Result<Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| self.pool_error(StoreAction::UseDatabase, during, &e))
    }

    /// Runs one statement on one pooled connection and returns its rows.
    pub(crate) async fn rows(
        &self,
        during: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        self.query(Planning::Cached, during, sql, params).await
    }

    /// `rows`, with the statement prepared as `planning` says: `Replanned` for one that keeps a
    /// generic plan, whose prepared copy on the connection is made again every few seconds so the
    /// plan follows the table's size (`replan.rs`).
    async fn query(
        &self,
        planning: Planning,
        during: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.client(during).await?;
        let fail = self.pg_fail(during);
        let statement = match planning {
            Planning::Cached => client.prepare_cached(sql).await,
            Planning::Replanned => self.replanner.prepare(&client, during, sql).await,
        }
        .map_err(&fail)?;
        client.query(&statement, params).await.map_err(&fail)
    }

    /// The (id, token) answer of a fenced write, as claims.
    pub(crate) async fn fenced(
        &self,
        during: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Claim>, StoreError> {
        let rows = self.rows(during, sql, params).await?;
        self.claims_of(during, &rows)
    }

    fn claims_of(&self, during: &'static str, rows: &[Row]) -> Result<Vec<Claim>, StoreError> {
        rows.iter()
            .map(|row| {
                Ok(Claim {
                    id: RowId(row.try_get(0)?),
                    token: ClaimToken(row.try_get(1)?),
                })
            })
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(self.pg_fail(during))
    }
}

fn claimed_row(row: &Row) -> Result<ClaimedRow, tokio_postgres::Error> {
    Ok(ClaimedRow {
        claim: Claim {
            id: RowId(row.try_get("id")?),
            token: ClaimToken(row.try_get("claim_token")?),
        },
        topic: row.try_get("topic")?,
        key: row.try_get("key")?,
        payload: row.try_get("payload")?,
        headers: row.try_get("headers")?,
        aggregate_type: row.try_get("aggregate_type")?,
        attempt: row.try_get("attempt")?,
        max_attempts: row.try_get("max_attempts")?,
        sequence: row.try_get("sequence")?,
    })
}

#[async_trait]
impl OutboxStore for PgStore {
    async fn claim(&self, limit: u32, lease: Duration) -> Result<Vec<ClaimedRow>, StoreError> {
        const DURING: &str = "claiming outbox rows";
        if limit == 0 {
            return Ok(Vec::new());
        }
        let rows = self
            .rows(
                DURING,
                &self.outbox_sql.claim,
                &[&i64::from(limit), &millis(lease)],
            )
            .await?;
        rows.iter()
            .map(claimed_row)
            .collect::<Result<_, _>>()
            .map_err(self.pg_fail(DURING))
    }

    async fn claim_run(
        &self,
        runs: &[RunStart],
        lease: Duration,
    ) -> Result<Vec<ClaimedRow>, StoreError> {
        const DURING: &str = "claiming a run of outbox rows";
        let runs: Vec<&RunStart> = runs.iter().filter(|r| r.limit > 0).collect();
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Uuid> = runs.iter().map(|r| r.after.id.0).collect();
        let tokens: Vec<Uuid> = runs.iter().map(|r| r.after.token.0).collect();
        let limits: Vec<i64> = runs.iter().map(|r| i64::from(r.limit)).collect();
        let rows = self
            .rows(
                DURING,
                &self.outbox_sql.claim_run,
                &[&ids, &tokens, &limits, &millis(lease)],
            )
            .await?;
        rows.iter()
            .map(claimed_row)
            .collect::<Result<_, _>>()
            .map_err(self.pg_fail(DURING))
    }

    async fn renew(&self, claims: &[Claim], lease: Duration) -> Result<Vec<Claim>, StoreError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, tokens) = claim_arrays(claims);
        self.fenced(
            "renewing outbox leases",
            &self.outbox_sql.renew,
            &[&ids, &tokens, &millis(lease)],
        )
        .await
    }

    async fn finish(&self, writes: &[TerminalWrite]) -> Result<Vec<Claim>, StoreError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        const DURING: &str = "marking outbox rows";
        let a = FinishArrays::new(writes);
        // Once per batch of deliveries: it keeps a generic plan (finish.sql, replan.rs).
        let rows = self
            .query(
                Planning::Replanned,
                DURING,
                &self.outbox_sql.finish,
                &[
                    &a.ids,
                    &a.tokens,
                    &a.outcomes,
                    &a.attempts,
                    &a.delays,
                    &a.errors,
                ],
            )
            .await?;
        self.claims_of(DURING, &rows)
    }

    async fn release(&self, claims: &[Claim]) -> Result<Vec<Claim>, StoreError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, tokens) = claim_arrays(claims);
        self.fenced(
            "releasing outbox rows",
            &self.outbox_sql.release,
            &[&ids, &tokens],
        )
        .await
    }

    async fn reclaim_expired(&self) -> Result<u64, StoreError> {
        const DURING: &str = "reclaiming expired outbox leases";
        let client = self.client(DURING).await?;
        let fail = self.pg_fail(DURING);
        let statement = client
            .prepare_cached(&self.outbox_sql.reclaim)
            .await
            .map_err(&fail)?;
        client.execute(&statement, &[]).await.map_err(&fail)
    }

    async fn pending_stats(&self) -> Result<PendingStats, StoreError> {
        const DURING: &str = "reading the pending outbox gauges";
        let rows = self
            .rows(DURING, &self.outbox_sql.pending_stats, &[])
            .await?;
        let read = |row: &Row| -> Result<PendingStats, tokio_postgres::Error> {
            Ok(PendingStats {
                pending: row.try_get(0)?,
                oldest_due_age_seconds: row.try_get(1)?,
                oldest_created_age_seconds: row.try_get(2)?,
                dead: row.try_get(3)?,
            })
        };
        // The query aggregates without GROUP BY, so it always answers one row.
        match rows.first() {
            Some(row) => read(row).map_err(self.pg_fail(DURING)),
            None => Ok(PendingStats::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(n: u128) -> Claim {
        Claim {
            id: RowId(Uuid::from_u128(n)),
            token: ClaimToken(Uuid::from_u128(n + 1000)),
        }
    }

    #[test]
    fn out_31_finish_arrays_carry_each_outcome() {
        let a = FinishArrays::new(&[
            TerminalWrite::Sent { claim: claim(1) },
            TerminalWrite::Retry {
                claim: claim(2),
                attempt: 3,
                delay: Duration::from_millis(1500),
                error: "boom".into(),
            },
            TerminalWrite::Dead {
                claim: claim(3),
                attempt: 0,
                error: "no route".into(),
            },
        ]);
        assert_eq!(a.ids, vec![claim(1).id.0, claim(2).id.0, claim(3).id.0]);
        assert_eq!(a.tokens[1], claim(2).token.0);
        assert_eq!(a.outcomes, vec![OUTCOME_SENT, OUTCOME_RETRY, OUTCOME_DEAD]);
        assert_eq!(a.attempts, vec![None, Some(3), Some(0)]);
        assert_eq!(a.delays, vec![None, Some(1500), None]);
        assert_eq!(a.errors[0], None);
        assert_eq!(a.errors[2].as_deref(), Some("no route"));
    }

    #[test]
    fn out_41_a_claim_given_twice_keeps_its_first_write() {
        let a = FinishArrays::new(&[
            TerminalWrite::Sent { claim: claim(1) },
            TerminalWrite::Dead {
                claim: claim(1),
                attempt: 1,
                error: "x".into(),
            },
        ]);
        assert_eq!(a.outcomes, vec![OUTCOME_SENT]);
    }

    #[test]
    fn millis_saturates() {
        assert_eq!(millis(Duration::from_millis(300_000)), 300_000);
        assert_eq!(millis(Duration::MAX), i64::MAX);
    }
}
