//! `OutboxStore` on MySQL / MariaDB (outbox.md §5, §7, §9, §12). MySQL has no
//! `UPDATE ... RETURNING`, so the claim and every fenced batch write are a short transaction
//! of a locking read and one UPDATE of exactly the rows it locked (`MysqlStore::read_then_write`);
//! batches travel as one JSON array (`JSON_TABLE`), so a batch of any size is the same two
//! statements. Claim tokens are random UUIDs made here, one per row.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Row, TxOpts, Value};
use queuebox_store::{
    Claim, ClaimToken, ClaimedRow, OutboxStore, PendingStats, RowId, RunStart, StoreError,
    TerminalWrite,
};
use uuid::Uuid;

use crate::sql::Stmt;
use crate::store::MysqlStore;
use crate::values::{Reader, claims_json, json, millis};

/// Outcome codes of `finish.sql`, which maps them to state literals (SCH-9).
const OUTCOME_SENT: i32 = 0;
const OUTCOME_RETRY: i32 = 1;
const OUTCOME_DEAD: i32 = 2;

/// The claims of a fence read's rows (id, token).
pub(crate) fn fenced_claims(rows: &[Row], during: &'static str) -> Result<Vec<Claim>, StoreError> {
    rows.iter()
        .map(|row| {
            let r = Reader { row, during };
            Ok(Claim {
                id: RowId(r.uuid(0)?),
                token: ClaimToken(r.uuid(1)?),
            })
        })
        .collect()
}

/// The JSON of `finish.sql` for the writes whose claims held; a claim given twice keeps its
/// first write (the UPDATE would otherwise pick one of them at random).
fn finish_json(writes: &[TerminalWrite], held: &HashSet<Claim>) -> serde_json::Value {
    let mut seen = HashSet::with_capacity(writes.len());
    let mut out = Vec::with_capacity(writes.len());
    for write in writes {
        let claim = write.claim();
        if !held.contains(&claim) || !seen.insert(claim) {
            continue;
        }
        let (outcome, attempt, delay_ms, error) = match write {
            TerminalWrite::Sent { .. } => (OUTCOME_SENT, None, None, None),
            TerminalWrite::Retry {
                attempt,
                delay,
                error,
                ..
            } => (
                OUTCOME_RETRY,
                Some(*attempt),
                Some(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)),
                Some(error.as_str()),
            ),
            // No error: the statement keeps the row's last_error.
            TerminalWrite::Hold { attempt, delay, .. } => (
                OUTCOME_RETRY,
                Some(*attempt),
                Some(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)),
                None,
            ),
            TerminalWrite::Dead { attempt, error, .. } => {
                (OUTCOME_DEAD, Some(*attempt), None, Some(error.as_str()))
            }
        };
        out.push(serde_json::json!({
            "id": claim.id.0.hyphenated().to_string(),
            "token": claim.token.0.hyphenated().to_string(),
            "outcome": outcome,
            "attempt": attempt,
            "delay_ms": delay_ms,
            "error": error,
        }));
    }
    serde_json::Value::Array(out)
}

impl MysqlStore {
    /// A fenced batch write: `fence` locks the claims that still hold, `write` changes exactly
    /// those (its JSON built by `values` from them); the answer is the claims written.
    pub(crate) async fn fenced_write(
        &self,
        during: &'static str,
        fence: &Stmt,
        claims: &[Claim],
        write: &Stmt,
        values: impl FnOnce(&[Claim]) -> Vec<(&'static str, Value)>,
    ) -> Result<Vec<Claim>, StoreError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let read = [("claims", json(&claims_json(claims)))];
        let done = self
            .read_then_write(during, (fence, &read), write, |rows| {
                let held = fenced_claims(&rows, during)?;
                if held.is_empty() {
                    return Ok(None);
                }
                let values = values(&held);
                Ok(Some((held, values)))
            })
            .await?;
        Ok(done.map(|(held, _)| held).unwrap_or_default())
    }
}

fn claimed_row(row: &Row, token: Uuid) -> Result<ClaimedRow, StoreError> {
    let r = Reader {
        row,
        during: "claiming outbox rows",
    };
    Ok(ClaimedRow {
        claim: Claim {
            id: RowId(r.uuid(0)?),
            token: ClaimToken(token),
        },
        topic: r.get(1)?,
        key: r.get(2)?,
        payload: r.get(3)?,
        headers: r.get(4)?,
        aggregate_type: r.get(5)?,
        attempt: r.get(6)?,
        max_attempts: r.get(7)?,
        sequence: r.get(8)?,
    })
}

#[async_trait]
impl OutboxStore for MysqlStore {
    async fn claim(&self, limit: u32, lease: Duration) -> Result<Vec<ClaimedRow>, StoreError> {
        const DURING: &str = "claiming outbox rows";
        if limit == 0 {
            return Ok(Vec::new());
        }
        let read = [("limit", Value::from(limit))];
        let done = self
            .read_then_write(
                DURING,
                (&self.sql.outbox_claim_select, &read),
                &self.sql.outbox_claim_update,
                |rows| {
                    let claimed = rows
                        .iter()
                        .map(|row| claimed_row(row, Uuid::new_v4()))
                        .collect::<Result<Vec<_>, _>>()?;
                    if claimed.is_empty() {
                        return Ok(None);
                    }
                    let claims: Vec<Claim> = claimed.iter().map(|c| c.claim).collect();
                    let values = vec![
                        ("claims", json(&claims_json(&claims))),
                        ("lease_ms", millis(lease)),
                    ];
                    Ok(Some((claimed, values)))
                },
            )
            .await?;
        match done {
            None => Ok(Vec::new()),
            Some((claimed, changed)) if changed == claimed.len() as u64 => Ok(claimed),
            // The rows were locked since the read, so this cannot happen; if it did, the
            // transaction has committed rows this answer would not name, and their leases
            // bring them back.
            Some((claimed, changed)) => Err(StoreError::Database {
                action: queuebox_store::StoreAction::UseDatabase,
                during: DURING,
                reason: format!(
                    "the claim locked {} rows but changed {changed}",
                    claimed.len()
                ),
            }),
        }
    }

    async fn claim_run(
        &self,
        runs: &[RunStart],
        lease: Duration,
    ) -> Result<Vec<ClaimedRow>, StoreError> {
        const DURING: &str = "claiming a run of outbox rows";
        let runs: Vec<RunStart> = runs.iter().copied().filter(|r| r.limit > 0).collect();
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let fail = self.fail(DURING);
        let mut conn = self.conn(DURING).await?;
        // An error drops the transaction, which rolls it back.
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .map_err(&fail)?;
        let afters: Vec<Claim> = runs.iter().map(|r| r.after).collect();
        let fence = &self.sql.outbox_run_fence;
        let held: Vec<Row> = tx
            .exec(
                &fence.sql,
                fence.params(&[("claims", json(&claims_json(&afters)))]),
            )
            .await
            .map_err(&fail)?;
        let mut claimed = Vec::new();
        for row in &held {
            let r = Reader {
                row,
                during: DURING,
            };
            let id = RowId(r.uuid(0)?);
            let key: String = r.get(1)?;
            let seq: i64 = r.get(2)?;
            let Some(run) = runs.iter().find(|run| run.after.id == id) else {
                continue;
            };
            let next = &self.sql.outbox_run_next;
            let rows: Vec<Row> = tx
                .exec(
                    &next.sql,
                    next.params(&[
                        ("key", Value::from(key)),
                        ("seq", Value::from(seq)),
                        ("limit", Value::from(run.limit)),
                    ]),
                )
                .await
                .map_err(&fail)?;
            // A run never skips a row: it ends before the first row that is not due.
            for row in &rows {
                let due: i64 = Reader {
                    row,
                    during: DURING,
                }
                .get(9)?;
                if due == 0 {
                    break;
                }
                claimed.push(claimed_row(row, Uuid::new_v4())?);
            }
        }
        if claimed.is_empty() {
            tx.commit().await.map_err(&fail)?;
            return Ok(Vec::new());
        }
        let claims: Vec<Claim> = claimed.iter().map(|c| c.claim).collect();
        let update = &self.sql.outbox_claim_update;
        tx.exec_drop(
            &update.sql,
            update.params(&[
                ("claims", json(&claims_json(&claims))),
                ("lease_ms", millis(lease)),
            ]),
        )
        .await
        .map_err(&fail)?;
        let changed = tx.affected_rows();
        if changed != claimed.len() as u64 {
            // The rows are locked since the read, so this cannot happen; rolled back if it did.
            return Err(StoreError::Database {
                action: queuebox_store::StoreAction::UseDatabase,
                during: DURING,
                reason: format!(
                    "the run claim locked {} rows but changed {changed}",
                    claimed.len()
                ),
            });
        }
        tx.commit().await.map_err(&fail)?;
        Ok(claimed)
    }

    async fn renew(&self, claims: &[Claim], lease: Duration) -> Result<Vec<Claim>, StoreError> {
        self.fenced_write(
            "renewing outbox leases",
            &self.sql.outbox_fence,
            claims,
            &self.sql.outbox_renew,
            |held| {
                vec![
                    ("claims", json(&claims_json(held))),
                    ("lease_ms", millis(lease)),
                ]
            },
        )
        .await
    }

    async fn finish(&self, writes: &[TerminalWrite]) -> Result<Vec<Claim>, StoreError> {
        let claims: Vec<Claim> = writes.iter().map(TerminalWrite::claim).collect();
        self.fenced_write(
            "marking outbox rows",
            &self.sql.outbox_fence,
            &claims,
            &self.sql.outbox_finish,
            |held| {
                let held: HashSet<Claim> = held.iter().copied().collect();
                vec![("writes", json(&finish_json(writes, &held)))]
            },
        )
        .await
    }

    async fn release(&self, claims: &[Claim]) -> Result<Vec<Claim>, StoreError> {
        self.fenced_write(
            "releasing outbox rows",
            &self.sql.outbox_fence,
            claims,
            &self.sql.outbox_release,
            |held| vec![("claims", json(&claims_json(held)))],
        )
        .await
    }

    async fn reclaim_expired(&self) -> Result<u64, StoreError> {
        self.retention_batch(
            "reclaiming expired outbox leases",
            &self.sql.outbox_reclaim_select,
            &[],
            &self.sql.outbox_reclaim,
        )
        .await
    }

    async fn pending_stats(&self) -> Result<PendingStats, StoreError> {
        const DURING: &str = "reading the pending outbox gauges";
        let rows = self
            .rows(DURING, &self.sql.outbox_pending_stats, &[])
            .await?;
        // The query aggregates without GROUP BY, so it always answers one row.
        match rows.first() {
            Some(row) => {
                let r = Reader {
                    row,
                    during: DURING,
                };
                Ok(PendingStats {
                    pending: r.get(0)?,
                    oldest_due_age_seconds: r.get(1)?,
                    oldest_created_age_seconds: r.get(2)?,
                    dead: r.get(3)?,
                })
            }
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
    fn out_41_finish_json_keeps_held_claims_and_first_writes_only() {
        let writes = [
            TerminalWrite::Sent { claim: claim(1) },
            TerminalWrite::Retry {
                claim: claim(2),
                attempt: 3,
                delay: Duration::from_millis(1500),
                error: "boom".into(),
            },
            TerminalWrite::Dead {
                claim: claim(1),
                attempt: 1,
                error: "x".into(),
            },
            TerminalWrite::Sent { claim: claim(3) },
        ];
        let held: HashSet<Claim> = [claim(1), claim(2)].into();
        let j = finish_json(&writes, &held);
        let items = j.as_array().expect("array");
        assert_eq!(items.len(), 2);
        assert_eq!(items[0]["outcome"], OUTCOME_SENT);
        assert_eq!(items[1]["outcome"], OUTCOME_RETRY);
        assert_eq!(items[1]["delay_ms"], 1500);
        assert_eq!(items[1]["error"], "boom");
        assert!(items[0]["error"].is_null());
    }
}
