//! `OutboxStore` on SQLite (outbox.md §5, §7, §9, §12): each method is one statement of
//! `queries/outbox/` in a `BEGIN IMMEDIATE` transaction (OUT-17). Batches travel as one JSON
//! array (`json_each`), so a batch of any size is one statement; the database answers which
//! rows it actually wrote.

use std::time::Duration;

use async_trait::async_trait;
use queuebox_store::{
    Claim, ClaimedRow, OutboxStore, PendingStats, RunStart, StoreAction, StoreError, TerminalWrite,
};
use rusqlite::named_params;
use uuid::Uuid;

use crate::rows::{self, claims_json, millis, unique_id_parts, written};
use crate::store::SqliteStore;

/// Outcome codes of `finish.sql`, which maps them to state literals (SCH-9).
const OUTCOME_SENT: i32 = 0;
const OUTCOME_RETRY: i32 = 1;
const OUTCOME_DEAD: i32 = 2;

fn finish_json(writes: &[TerminalWrite]) -> String {
    let items = writes
        .iter()
        .map(|write| {
            let claim = write.claim();
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
                    Some(error),
                ),
                // No error: the statement keeps the row's last_error.
                TerminalWrite::Hold { attempt, delay, .. } => {
                    (OUTCOME_RETRY, Some(*attempt), Some(millis(*delay)), None)
                }
                TerminalWrite::Dead { attempt, error, .. } => {
                    (OUTCOME_DEAD, Some(*attempt), None, Some(error))
                }
            };
            serde_json::json!({
                "id": claim.id.0.to_string(),
                "token": claim.token.0.to_string(),
                "outcome": outcome,
                "attempt": attempt,
                "delay_ms": delay,
                "error": error,
            })
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}

/// One row of a claim's RETURNING, in the column order of `claim.sql` and `claim_run.sql`.
fn claimed_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ClaimedRow> {
    Ok(ClaimedRow {
        claim: rows::claim(rows::uuid(r, 0)?, rows::uuid(r, 1)?),
        topic: r.get(2)?,
        key: r.get(3)?,
        payload: r.get(4)?,
        headers: r.get(5)?,
        aggregate_type: r.get(6)?,
        attempt: r.get(7)?,
        max_attempts: r.get(8)?,
        sequence: r.get(9)?,
    })
}

impl SqliteStore {
    /// One fenced write per part of `claims` (one part unless a row is named twice); answers
    /// the claims written.
    async fn fenced_claims(
        &self,
        during: &'static str,
        claims: &[Claim],
        statement: fn(&crate::sql::Statements) -> &str,
        lease_ms: Option<i64>,
    ) -> Result<Vec<Claim>, StoreError> {
        let parts = unique_id_parts(claims, |c| *c);
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        self.write(during, move |tx, sql| {
            let mut done = Vec::new();
            for part in parts {
                let mut stmt = tx.prepare_cached(statement(sql))?;
                let json = claims_json(&part);
                let ids = match lease_ms {
                    Some(ms) => stmt
                        .query_map(named_params! {":claims": json, ":lease_ms": ms}, |r| {
                            rows::uuid(r, 0)
                        })?
                        .collect::<rusqlite::Result<Vec<Uuid>>>()?,
                    None => stmt
                        .query_map(named_params! {":claims": json}, |r| rows::uuid(r, 0))?
                        .collect::<rusqlite::Result<Vec<Uuid>>>()?,
                };
                done.extend(written(&part, &ids));
            }
            Ok(done)
        })
        .await
    }
}

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn claim(&self, limit: u32, lease: Duration) -> Result<Vec<ClaimedRow>, StoreError> {
        let lease_ms = millis(lease);
        let mut claimed = self
            .write("claiming outbox rows", move |tx, sql| {
                let mut stmt = tx.prepare_cached(&sql.outbox_claim)?;
                let rows = stmt.query_map(
                    named_params! {":limit": limit, ":lease_ms": lease_ms},
                    |r| Ok((r.get::<_, String>(10)?, claimed_row(r)?)),
                )?;
                rows.collect::<rusqlite::Result<Vec<(String, ClaimedRow)>>>()
            })
            .await?;
        // RETURNING has no order: the claim's order is (scheduled_at, sequence) (OUT-15).
        claimed.sort_by(|a, b| (&a.0, a.1.sequence).cmp(&(&b.0, b.1.sequence)));
        Ok(claimed.into_iter().map(|(_, row)| row).collect())
    }

    async fn claim_run(
        &self,
        runs: &[RunStart],
        lease: Duration,
    ) -> Result<Vec<ClaimedRow>, StoreError> {
        let lease_ms = millis(lease);
        let runs: Vec<RunStart> = runs.iter().copied().filter(|r| r.limit > 0).collect();
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let mut claimed = self
            .write("claiming a run of outbox rows", move |tx, sql| {
                let mut stmt = tx.prepare_cached(&sql.outbox_claim_run)?;
                let mut all = Vec::new();
                for run in runs {
                    let rows = stmt.query_map(
                        named_params! {
                            ":id": run.after.id.0.to_string(),
                            ":token": run.after.token.0.to_string(),
                            ":limit": run.limit,
                            ":lease_ms": lease_ms,
                        },
                        claimed_row,
                    )?;
                    for row in rows {
                        all.push(row?);
                    }
                }
                Ok(all)
            })
            .await?;
        // RETURNING has no order: a run's order is its key's sequence (OUT-13a).
        claimed.sort_by(|a, b| (&a.key, a.sequence).cmp(&(&b.key, b.sequence)));
        Ok(claimed)
    }

    async fn renew(&self, claims: &[Claim], lease: Duration) -> Result<Vec<Claim>, StoreError> {
        self.fenced_claims(
            "renewing outbox leases",
            claims,
            |sql| &sql.outbox_renew,
            Some(millis(lease)),
        )
        .await
    }

    async fn finish(&self, writes: &[TerminalWrite]) -> Result<Vec<Claim>, StoreError> {
        let parts = unique_id_parts(writes, TerminalWrite::claim);
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        self.write("writing delivery outcomes", move |tx, sql| {
            let mut done = Vec::new();
            for part in parts {
                let ids = tx
                    .prepare_cached(&sql.outbox_finish)?
                    .query_map(named_params! {":writes": finish_json(&part)}, |r| {
                        rows::uuid(r, 0)
                    })?
                    .collect::<rusqlite::Result<Vec<Uuid>>>()?;
                let claims: Vec<Claim> = part.iter().map(TerminalWrite::claim).collect();
                done.extend(written(&claims, &ids));
            }
            Ok(done)
        })
        .await
    }

    async fn release(&self, claims: &[Claim]) -> Result<Vec<Claim>, StoreError> {
        self.fenced_claims(
            "releasing outbox claims",
            claims,
            |sql| &sql.outbox_release,
            None,
        )
        .await
    }

    async fn reclaim_expired(&self) -> Result<u64, StoreError> {
        self.write("reclaiming expired outbox leases", |tx, sql| {
            tx.prepare_cached(&sql.outbox_reclaim)?
                .execute([])
                .map(|n| n as u64)
        })
        .await
    }

    async fn pending_stats(&self) -> Result<PendingStats, StoreError> {
        self.read(
            StoreAction::UseDatabase,
            "reading the pending gauges",
            |conn, sql| {
                conn.prepare_cached(&sql.outbox_pending_stats)?
                    .query_row([], |r| {
                        Ok(PendingStats {
                            pending: r.get(0)?,
                            oldest_due_age_seconds: r.get(1)?,
                            oldest_created_age_seconds: r.get(2)?,
                            dead: r.get(3)?,
                        })
                    })
            },
        )
        .await
    }
}
