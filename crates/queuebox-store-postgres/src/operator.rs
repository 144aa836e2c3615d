//! `OperatorStore` on PostgreSQL (operations.md §6): each call is one statement of
//! `queries/operator/`; a bulk operation repeats its chunk statement through
//! [`run_in_chunks`], each chunk its own short transaction (autocommit).

use async_trait::async_trait;
use queuebox_store::{
    Consumption, DeleteOutcome, FinishedInboxState, FinishedOutboxState, InboxFilter, InboxMessage,
    InboxState, InboxSummary, ListCursor, OperatorStore, OutboxFilter, OutboxMessage, OutboxState,
    OutboxStore, OutboxSummary, Page, PageRequest, RelayStore, StateCounts, StoreAction,
    StoreError, run_in_chunks,
};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::operator_params::{
    InboxParams, OutboxParams, Param, inbox_code, into_page, outbox_code, page_params,
};
use crate::store::PgStore;

/// A failure to read what the database answered (a value of no known state, a type QueueBox
/// did not expect).
fn read_error(during: &'static str, what: String) -> StoreError {
    StoreError::Database {
        action: StoreAction::UseDatabase,
        during,
        reason: what,
    }
}

fn state<S>(
    during: &'static str,
    text: &str,
    parse: impl Fn(&str) -> Option<S>,
) -> Result<S, StoreError> {
    parse(text).ok_or_else(|| read_error(during, format!("a row holds the unknown state {text}")))
}

impl PgStore {
    fn outbox_summary(&self, during: &'static str, r: &Row) -> Result<OutboxSummary, StoreError> {
        let fail = self.pg_fail(during);
        let text: String = r.try_get("state").map_err(&fail)?;
        Ok(OutboxSummary {
            id: r.try_get("id").map_err(&fail)?,
            topic: r.try_get("topic").map_err(&fail)?,
            key: r.try_get("key").map_err(&fail)?,
            aggregate_type: r.try_get("aggregate_type").map_err(&fail)?,
            state: state(during, &text, OutboxState::parse)?,
            attempt: r.try_get("attempt").map_err(&fail)?,
            max_attempts: r.try_get("max_attempts").map_err(&fail)?,
            scheduled_at: r.try_get("scheduled_at").map_err(&fail)?,
            created_at: r.try_get("created_at").map_err(&fail)?,
            updated_at: r.try_get("updated_at").map_err(&fail)?,
            last_error: r.try_get("last_error").map_err(&fail)?,
        })
    }

    fn inbox_summary(&self, during: &'static str, r: &Row) -> Result<InboxSummary, StoreError> {
        let fail = self.pg_fail(during);
        let text: String = r.try_get("state").map_err(&fail)?;
        let consumption: String = r.try_get("consumption").map_err(&fail)?;
        Ok(InboxSummary {
            id: r.try_get("id").map_err(&fail)?,
            source: r.try_get("source").map_err(&fail)?,
            idempotency_key: r.try_get("idempotency_key").map_err(&fail)?,
            aggregate_id: r.try_get("aggregate_id").map_err(&fail)?,
            event_type: r.try_get("event_type").map_err(&fail)?,
            consumption: match consumption.as_str() {
                "push" => Consumption::Push,
                "pull" => Consumption::Pull,
                other => {
                    return Err(read_error(
                        during,
                        format!("a row holds the unknown consumption {other}"),
                    ));
                }
            },
            state: state(during, &text, InboxState::parse)?,
            attempt: r.try_get("attempt").map_err(&fail)?,
            correlation_id: r.try_get("correlation_id").map_err(&fail)?,
            scheduled_at: r.try_get("scheduled_at").map_err(&fail)?,
            created_at: r.try_get("created_at").map_err(&fail)?,
            processed_at: r.try_get("processed_at").map_err(&fail)?,
            last_error: r.try_get("last_error").map_err(&fail)?,
        })
    }

    /// The answer of a `*_delete_one.sql`: the rows deleted and the state the row had.
    async fn delete_one(
        &self,
        during: &'static str,
        sql: &str,
        id: Uuid,
    ) -> Result<DeleteOutcome, StoreError> {
        let rows = self.rows(during, sql, &[&id]).await?;
        let fail = self.pg_fail(during);
        let Some(row) = rows.first() else {
            return Ok(DeleteOutcome::NotFound);
        };
        let deleted: i64 = row.try_get("deleted").map_err(&fail)?;
        let state: Option<String> = row.try_get("state").map_err(&fail)?;
        Ok(match (deleted, state) {
            (n, _) if n > 0 => DeleteOutcome::Deleted,
            (_, None) => DeleteOutcome::NotFound,
            (_, Some(_)) => DeleteOutcome::NotDeletable,
        })
    }

    /// The rows of a `*_counts.sql`: (group, state, n), a NULL group being the total of a
    /// state, and the state whose total is an estimate, if any (column `estimated`).
    async fn group_counts<S: Ord + Copy>(
        &self,
        during: &'static str,
        sql: &str,
        group: &str,
        all: &[S],
        parse: impl Fn(&str) -> Option<S>,
    ) -> Result<StateCounts<S>, StoreError> {
        let fail = self.pg_fail(during);
        let rows = self.rows(during, sql, &[]).await?;
        let mut estimated = None;
        let mut counts = Vec::with_capacity(rows.len());
        for r in &rows {
            let text: String = r.try_get("state").map_err(&fail)?;
            let n: i64 = r.try_get("n").map_err(&fail)?;
            let state = state(during, &text, &parse)?;
            if r.try_get::<_, bool>("estimated").map_err(&fail)? {
                estimated = Some(state);
            }
            counts.push((
                r.try_get(group).map_err(&fail)?,
                state,
                u64::try_from(n).unwrap_or(0),
            ));
        }
        let mut counts = StateCounts::from_rows(all, counts, 0.0);
        counts.estimated = estimated;
        Ok(counts)
    }
}

#[async_trait]
impl OperatorStore for PgStore {
    async fn list_outbox(
        &self,
        state: OutboxState,
        filter: &OutboxFilter,
        page: PageRequest,
    ) -> Result<Page<OutboxSummary>, StoreError> {
        const DURING: &str = "listing outbox rows";
        let (code, f) = (outbox_code(state), OutboxParams::new(filter));
        let (after_at, after_id, limit) = page_params(&page);
        let mut params: Vec<Param<'_>> = vec![&code];
        params.extend(f.refs());
        params.extend([&after_at as Param<'_>, &after_id, &limit]);
        let rows = self
            .rows(DURING, &self.operator_sql.outbox_list, &params)
            .await?;
        let items = rows
            .iter()
            .map(|r| self.outbox_summary(DURING, r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page.limit, |s| ListCursor {
            created_at: s.created_at,
            id: s.id,
        }))
    }

    async fn show_outbox(&self, id: Uuid) -> Result<Option<OutboxMessage>, StoreError> {
        const DURING: &str = "reading an outbox row";
        let rows = self
            .rows(DURING, &self.operator_sql.outbox_show, &[&id])
            .await?;
        let Some(r) = rows.first() else {
            return Ok(None);
        };
        let fail = self.pg_fail(DURING);
        Ok(Some(OutboxMessage {
            summary: self.outbox_summary(DURING, r)?,
            sequence: r.try_get("sequence").map_err(&fail)?,
            claimed_at: r.try_get("claimed_at").map_err(&fail)?,
            lease_expires_at: r.try_get("lease_expires_at").map_err(&fail)?,
            headers: r.try_get("headers").map_err(&fail)?,
            payload: r.try_get("payload").map_err(&fail)?,
        }))
    }

    async fn replay_outbox(
        &self,
        filter: &OutboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError> {
        let f = OutboxParams::new(filter);
        run_in_chunks(limit, |chunk| {
            let f = &f;
            async move {
                let chunk = i64::from(chunk);
                let mut params: Vec<Param<'_>> = f.refs().to_vec();
                params.push(&chunk);
                let sql = &self.operator_sql.outbox_replay;
                self.execute("replaying outbox rows", sql, &params).await
            }
        })
        .await
    }

    async fn delete_outbox_row(&self, id: Uuid) -> Result<DeleteOutcome, StoreError> {
        let sql = &self.operator_sql.outbox_delete_one;
        self.delete_one("deleting an outbox row", sql, id).await
    }

    async fn delete_outbox_rows(
        &self,
        state: FinishedOutboxState,
        filter: &OutboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError> {
        let code = outbox_code(match state {
            FinishedOutboxState::Sent => OutboxState::Sent,
            FinishedOutboxState::Dead => OutboxState::Dead,
        });
        let f = OutboxParams::new(filter);
        run_in_chunks(limit, |chunk| {
            let f = &f;
            async move {
                let chunk = i64::from(chunk);
                let mut params: Vec<Param<'_>> = vec![&code];
                params.extend(f.refs());
                params.push(&chunk);
                let sql = &self.operator_sql.outbox_delete;
                self.execute("deleting outbox rows", sql, &params).await
            }
        })
        .await
    }

    async fn outbox_counts(&self) -> Result<StateCounts<OutboxState>, StoreError> {
        let sql = &self.operator_sql.outbox_counts;
        let (during, all) = ("counting outbox rows", OutboxState::ALL);
        let mut counts = self
            .group_counts(during, sql, "topic", all, OutboxState::parse)
            .await?;
        counts.oldest_pending_age_seconds = self.pending_stats().await?.oldest_due_age_seconds;
        Ok(counts)
    }

    async fn outbox_topics(&self) -> Result<Vec<String>, StoreError> {
        const DURING: &str = "reading the outbox topics";
        let rows = self
            .rows(DURING, &self.operator_sql.outbox_topics, &[])
            .await?;
        rows.iter()
            .map(|r| r.try_get("topic"))
            .collect::<Result<_, _>>()
            .map_err(self.pg_fail(DURING))
    }

    async fn list_inbox(
        &self,
        state: InboxState,
        filter: &InboxFilter,
        page: PageRequest,
    ) -> Result<Page<InboxSummary>, StoreError> {
        const DURING: &str = "listing inbox rows";
        let (code, f) = (inbox_code(state), InboxParams::new(filter));
        let (after_at, after_id, limit) = page_params(&page);
        let mut params: Vec<Param<'_>> = vec![&code];
        params.extend(f.refs());
        params.extend([&after_at as Param<'_>, &after_id, &limit]);
        let rows = self
            .rows(DURING, &self.operator_sql.inbox_list, &params)
            .await?;
        let items = rows
            .iter()
            .map(|r| self.inbox_summary(DURING, r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(into_page(items, page.limit, |s| ListCursor {
            created_at: s.created_at,
            id: s.id,
        }))
    }

    async fn show_inbox(&self, id: Uuid) -> Result<Option<InboxMessage>, StoreError> {
        const DURING: &str = "reading an inbox row";
        let rows = self
            .rows(DURING, &self.operator_sql.inbox_show, &[&id])
            .await?;
        let Some(r) = rows.first() else {
            return Ok(None);
        };
        let fail = self.pg_fail(DURING);
        Ok(Some(InboxMessage {
            summary: self.inbox_summary(DURING, r)?,
            claimed_at: r.try_get("claimed_at").map_err(&fail)?,
            lease_expires_at: r.try_get("lease_expires_at").map_err(&fail)?,
            headers: r.try_get("headers").map_err(&fail)?,
            payload: r.try_get("payload").map_err(&fail)?,
        }))
    }

    async fn requeue_inbox(
        &self,
        filter: &InboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError> {
        let f = InboxParams::new(filter);
        run_in_chunks(limit, |chunk| {
            let f = &f;
            async move {
                let chunk = i64::from(chunk);
                let mut params: Vec<Param<'_>> = f.refs().to_vec();
                params.push(&chunk);
                let sql = &self.operator_sql.inbox_requeue;
                self.execute("requeueing inbox rows", sql, &params).await
            }
        })
        .await
    }

    async fn delete_inbox_row(&self, id: Uuid) -> Result<DeleteOutcome, StoreError> {
        let sql = &self.operator_sql.inbox_delete_one;
        self.delete_one("deleting an inbox row", sql, id).await
    }

    async fn delete_inbox_rows(
        &self,
        state: FinishedInboxState,
        filter: &InboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError> {
        let code = inbox_code(match state {
            FinishedInboxState::Processed => InboxState::Processed,
            FinishedInboxState::Dead => InboxState::Dead,
        });
        let f = InboxParams::new(filter);
        run_in_chunks(limit, |chunk| {
            let f = &f;
            async move {
                let chunk = i64::from(chunk);
                let mut params: Vec<Param<'_>> = vec![&code];
                params.extend(f.refs());
                params.push(&chunk);
                let sql = &self.operator_sql.inbox_delete;
                self.execute("deleting inbox rows", sql, &params).await
            }
        })
        .await
    }

    async fn inbox_counts(&self) -> Result<StateCounts<InboxState>, StoreError> {
        let sql = &self.operator_sql.inbox_counts;
        let (during, all) = ("counting inbox rows", InboxState::ALL);
        let mut counts = self
            .group_counts(during, sql, "source", all, InboxState::parse)
            .await?;
        counts.oldest_pending_age_seconds = self.inbox_oldest_pending_age().await?;
        Ok(counts)
    }
}
