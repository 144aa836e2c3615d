//! `IntakeStore`, `RelayStore` and `RetentionStore` on SQLite (inbox.md §9, §11; operations.md
//! §7): each method is one statement of `queries/inbox/` or `queries/retention/` in a
//! `BEGIN IMMEDIATE` transaction, except the forward (fenced mark + outbox insert), a short
//! transaction of two. Batches travel as one JSON array.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use queuebox_store::{
    Claim, ForwardedRow, InboxBacklog, InsertOutcome, IntakeStore, NewInboxRow, RelayRow,
    RelayStore, RetentionRule, RetentionStore, Schedule, SourceBacklog, StoreAction, StoreError,
    StoredState,
};
use rusqlite::named_params;
use uuid::Uuid;

use crate::rows::{self, claims_json, millis, unique_id_parts, written};
use crate::store::SqliteStore;

/// RLY-4: the candidate bound of a relay claim, min(max(3 × limit, 50), 500).
fn candidate_bound(limit: u32) -> i64 {
    (3 * i64::from(limit)).clamp(50, 500)
}

/// The JSON array of `insert.sql`, one object per input row.
fn insert_json(rows: &[NewInboxRow]) -> String {
    let items = rows
        .iter()
        .map(|row| {
            // The statement computes scheduled_at from the database clock (INB-44); only the
            // publish time and the delay travel. A dead row is due at its receipt (INB-45).
            let (publish, delay) = match row.schedule {
                _ if row.state == StoredState::Dead => (None, Duration::ZERO),
                Schedule::AfterReceipt { delay } => (None, delay),
                Schedule::AfterPublish {
                    publish_epoch_ms,
                    delay,
                } => (Some(publish_epoch_ms), delay),
            };
            serde_json::json!({
                "id": row.id.to_string(),
                "source": row.source,
                "idempotency_key": row.idempotency_key,
                "aggregate_id": row.aggregate_id,
                "event_type": row.event_type,
                "payload": row.payload,
                "headers": row.headers,
                "consumption": row.consumption.as_str(),
                "correlation_id": row.correlation_id,
                "publish_ms": publish,
                "delay_ms": millis(delay),
                "state": match row.state {
                    StoredState::Pending => "pending",
                    StoredState::Dead => "dead",
                },
                "last_error": row.last_error,
            })
        })
        .collect();
    serde_json::Value::Array(items).to_string()
}

#[async_trait]
impl IntakeStore for SqliteStore {
    async fn insert_batch(&self, rows: &[NewInboxRow]) -> Result<Vec<InsertOutcome>, StoreError> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let json = insert_json(rows);
        let raw: Vec<(Uuid, Vec<u8>)> = rows
            .iter()
            .filter_map(|r| Some((r.id, r.raw_body.clone()?)))
            .collect();
        let mut stored: HashSet<Uuid> = self
            .write("storing received messages", move |tx, sql| {
                let stored: HashSet<Uuid> = tx
                    .prepare_cached(&sql.inbox_insert)?
                    .query_map(named_params! {":rows": json}, |r| rows::uuid(r, 0))?
                    .collect::<rusqlite::Result<_>>()?;
                // storeRawBody: the bodies of the rows just stored, in the same transaction.
                for (id, body) in raw.iter().filter(|(id, _)| stored.contains(id)) {
                    tx.prepare_cached(&sql.inbox_store_raw_body)?
                        .execute(named_params! {
                            ":id": id.to_string(),
                            ":raw_body": body,
                        })?;
                }
                Ok(stored)
            })
            .await?;
        // An id the insert returned was stored; any other row met an existing pair. `remove`
        // answers an id given twice as stored once.
        Ok(rows
            .iter()
            .map(|row| {
                if stored.remove(&row.id) {
                    InsertOutcome::Stored(row.id)
                } else {
                    InsertOutcome::Duplicate
                }
            })
            .collect())
    }
}

#[async_trait]
impl RelayStore for SqliteStore {
    async fn relay_claim(
        &self,
        limit: u32,
        lease: Duration,
        sources: &[String],
    ) -> Result<Vec<RelayRow>, StoreError> {
        if sources.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let sources = serde_json::to_string(sources).unwrap_or_else(|_| "[]".to_owned());
        let lease_ms = millis(lease);
        let mut claimed = self
            .write("claiming inbox rows", move |tx, sql| {
                let mut stmt = tx.prepare_cached(&sql.inbox_claim)?;
                let rows = stmt.query_map(
                    named_params! {
                        ":limit": limit,
                        ":cand_limit": candidate_bound(limit),
                        ":lease_ms": lease_ms,
                        ":sources": sources,
                    },
                    |r| {
                        let row = RelayRow {
                            claim: rows::claim(rows::uuid(r, 0)?, rows::uuid(r, 1)?),
                            source: r.get(2)?,
                            idempotency_key: r.get(3)?,
                            aggregate_id: r.get(4)?,
                            event_type: r.get(5)?,
                            payload: r.get(6)?,
                            headers: r.get(7)?,
                            correlation_id: r.get(8)?,
                        };
                        Ok(((r.get::<_, String>(9)?, r.get::<_, String>(10)?), row))
                    },
                )?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        // RETURNING has no order: the relay's is (scheduled_at, created_at, id) (RLY-4).
        claimed.sort_by(|a, b| (&a.0, a.1.claim.id.0).cmp(&(&b.0, b.1.claim.id.0)));
        Ok(claimed.into_iter().map(|(_, row)| row).collect())
    }

    async fn relay_renew(
        &self,
        claims: &[Claim],
        lease: Duration,
    ) -> Result<Vec<Claim>, StoreError> {
        let parts = unique_id_parts(claims, |c| *c);
        let lease_ms = millis(lease);
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        self.write("renewing inbox leases", move |tx, sql| {
            let mut done = Vec::new();
            for part in parts {
                let ids = tx
                    .prepare_cached(&sql.inbox_renew)?
                    .query_map(
                        named_params! {":claims": claims_json(&part), ":lease_ms": lease_ms},
                        |r| rows::uuid(r, 0),
                    )?
                    .collect::<rusqlite::Result<Vec<Uuid>>>()?;
                done.extend(written(&part, &ids));
            }
            Ok(done)
        })
        .await
    }

    async fn relay_forward(&self, claim: Claim, row: &ForwardedRow) -> Result<bool, StoreError> {
        let row = row.clone();
        self.write_or_roll_back("forwarding an inbox row", move |tx, sql| {
            let marked = tx
                .prepare_cached(&sql.inbox_forward_mark)?
                .execute(named_params! {
                    ":id": claim.id.0.to_string(),
                    ":token": claim.token.0.to_string(),
                })?;
            if marked == 0 {
                // The claim was lost: nothing is inserted, nothing changes (RLY-13).
                return Ok((false, false));
            }
            tx.prepare_cached(&sql.inbox_forward_insert)?
                .execute(named_params! {
                    ":id": row.id.to_string(),
                    ":topic": row.topic,
                    ":key": row.key,
                    ":payload": row.payload,
                    ":headers": row.headers,
                    ":max_attempts": row.max_attempts,
                })?;
            Ok((true, true))
        })
        .await
    }

    async fn relay_dead(&self, claim: Claim, error: &str) -> Result<bool, StoreError> {
        let error = error.to_owned();
        self.write("dead-lettering an inbox row", move |tx, sql| {
            tx.prepare_cached(&sql.inbox_dead)?
                .execute(named_params! {
                    ":id": claim.id.0.to_string(),
                    ":token": claim.token.0.to_string(),
                    ":error": error,
                })
                .map(|n| n == 1)
        })
        .await
    }

    async fn relay_release(
        &self,
        claims: &[Claim],
        error: Option<&str>,
    ) -> Result<Vec<Claim>, StoreError> {
        let parts = unique_id_parts(claims, |c| *c);
        if parts.is_empty() {
            return Ok(Vec::new());
        }
        let error = error.map(str::to_owned);
        self.write("releasing inbox claims", move |tx, sql| {
            let mut done = Vec::new();
            for part in parts {
                let ids = tx
                    .prepare_cached(&sql.inbox_release)?
                    .query_map(
                        named_params! {":claims": claims_json(&part), ":error": error},
                        |r| rows::uuid(r, 0),
                    )?
                    .collect::<rusqlite::Result<Vec<Uuid>>>()?;
                done.extend(written(&part, &ids));
            }
            Ok(done)
        })
        .await
    }

    async fn relay_reclaim_expired(&self) -> Result<u64, StoreError> {
        self.write("reclaiming expired inbox leases", |tx, sql| {
            tx.prepare_cached(&sql.inbox_reclaim)?
                .execute([])
                .map(|n| n as u64)
        })
        .await
    }

    async fn inbox_oldest_pending_age(&self) -> Result<f64, StoreError> {
        self.read(
            StoreAction::UseDatabase,
            "reading the oldest pending inbox row",
            |conn, sql| {
                conn.prepare_cached(&sql.inbox_oldest_pending_age)?
                    .query_row([], |r| r.get(0))
            },
        )
        .await
    }

    async fn inbox_backlog(&self) -> Result<InboxBacklog, StoreError> {
        self.read(
            StoreAction::UseDatabase,
            "reading the inbox backlog gauges",
            |conn, sql| {
                let mut statement = conn.prepare_cached(&sql.inbox_backlog)?;
                let rows = statement.query_map([], |r| {
                    Ok((
                        r.get::<_, Option<String>>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, f64>(2)?,
                    ))
                })?;
                let mut backlog = InboxBacklog::default();
                for row in rows {
                    match row? {
                        (None, dead, _) => backlog.dead = dead,
                        (Some(source), pending, age) => backlog.sources.push(SourceBacklog {
                            source,
                            pending,
                            oldest_created_age_seconds: age,
                        }),
                    }
                }
                Ok(backlog)
            },
        )
        .await
    }
}

#[async_trait]
impl RetentionStore for SqliteStore {
    async fn retention_delete(&self, rule: RetentionRule, batch: u32) -> Result<u64, StoreError> {
        self.write("deleting old rows", move |tx, sql| {
            let deleted = match rule {
                RetentionRule::OutboxOlderThan(age) => tx
                    .prepare_cached(&sql.retention_outbox_age)?
                    .execute(named_params! {":max_age_ms": millis(age), ":batch": batch})?,
                RetentionRule::OutboxKeepNewest(keep) => tx
                    .prepare_cached(&sql.retention_outbox_count)?
                    .execute(named_params! {":keep": keep, ":batch": batch})?,
                RetentionRule::InboxOlderThan(age) => tx
                    .prepare_cached(&sql.retention_inbox_age)?
                    .execute(named_params! {":max_age_ms": millis(age), ":batch": batch})?,
            };
            Ok(deleted as u64)
        })
        .await
    }
}
