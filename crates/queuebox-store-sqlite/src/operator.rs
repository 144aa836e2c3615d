//! `OperatorStore` on SQLite (operations.md §6, the admin API): list, show, replay, requeue,
//! delete and counts, each a statement of `queries/operator/`; bulk operations run in chunks
//! (ADM-9), each chunk one `BEGIN IMMEDIATE` transaction with the state guard in the write.

use async_trait::async_trait;
use queuebox_store::{
    Consumption, DeleteOutcome, FinishedInboxState, FinishedOutboxState, InboxFilter, InboxMessage,
    InboxState, InboxSummary, ListCursor, OperatorStore, OutboxFilter, OutboxMessage, OutboxState,
    OutboxSummary, Page, PageRequest, StateCounts, StoreAction, StoreError, run_in_chunks,
};
use rusqlite::types::ToSql;
use rusqlite::{Row, named_params};
use uuid::Uuid;

use crate::rows::{opt_time_at, time_at, uuid};
use crate::store::SqliteStore;
use crate::time::{text_for_after, text_for_before};

/// A JSON array of texts, for an `IN (SELECT value FROM json_each(:x))` filter.
fn json_list<T: ToString>(items: &Option<Vec<T>>) -> Option<String> {
    items.as_ref().map(|items| {
        serde_json::Value::Array(
            items
                .iter()
                .map(|i| serde_json::Value::String(i.to_string()))
                .collect(),
        )
        .to_string()
    })
}

/// The filter parameters shared by the outbox statements (ADM-13).
#[derive(Clone)]
struct OutboxParams {
    ids: Option<String>,
    topics: Option<String>,
    key: Option<String>,
    created_after: Option<String>,
    created_before: Option<String>,
    error_contains: Option<String>,
}

impl OutboxParams {
    fn new(f: &OutboxFilter) -> Self {
        Self {
            ids: json_list(&f.ids),
            topics: json_list(&f.topics),
            key: f.key.clone(),
            created_after: f.created_after.map(text_for_after),
            created_before: f.created_before.map(text_for_before),
            error_contains: f.error_contains.clone(),
        }
    }

    fn named(&self) -> Vec<(&'static str, &dyn ToSql)> {
        vec![
            (":ids", &self.ids),
            (":topics", &self.topics),
            (":key", &self.key),
            (":created_after", &self.created_after),
            (":created_before", &self.created_before),
            (":error_contains", &self.error_contains),
        ]
    }
}

/// The filter parameters shared by the inbox statements (ADM-21).
#[derive(Clone)]
struct InboxParams {
    ids: Option<String>,
    sources: Option<String>,
    consumption: Option<i64>,
    event_type: Option<String>,
    aggregate_id: Option<String>,
    idempotency_key: Option<String>,
    created_after: Option<String>,
    created_before: Option<String>,
    error_contains: Option<String>,
}

impl InboxParams {
    fn new(f: &InboxFilter) -> Self {
        Self {
            ids: json_list(&f.ids),
            sources: json_list(&f.sources),
            consumption: f.consumption.map(|c| match c {
                Consumption::Push => 0,
                Consumption::Pull => 1,
            }),
            event_type: f.event_type.clone(),
            aggregate_id: f.aggregate_id.clone(),
            idempotency_key: f.idempotency_key.clone(),
            created_after: f.created_after.map(text_for_after),
            created_before: f.created_before.map(text_for_before),
            error_contains: f.error_contains.clone(),
        }
    }

    fn named(&self) -> Vec<(&'static str, &dyn ToSql)> {
        vec![
            (":ids", &self.ids),
            (":sources", &self.sources),
            (":consumption", &self.consumption),
            (":event_type", &self.event_type),
            (":aggregate_id", &self.aggregate_id),
            (":idempotency_key", &self.idempotency_key),
            (":created_after", &self.created_after),
            (":created_before", &self.created_before),
            (":error_contains", &self.error_contains),
        ]
    }
}

fn outbox_code(state: OutboxState) -> i64 {
    match state {
        OutboxState::Pending => 0,
        OutboxState::Processing => 1,
        OutboxState::Sent => 2,
        OutboxState::Dead => 3,
    }
}

fn inbox_code(state: InboxState) -> i64 {
    match state {
        InboxState::Pending => 0,
        InboxState::Processing => 1,
        InboxState::Processed => 2,
        InboxState::Dead => 3,
    }
}

fn unknown(index: usize, what: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, what.into())
}

fn parsed<S>(
    row: &Row<'_>,
    index: usize,
    parse: impl Fn(&str) -> Option<S>,
) -> rusqlite::Result<S> {
    let text: String = row.get(index)?;
    parse(&text).ok_or_else(|| unknown(index, format!("a row holds the unknown value {text}")))
}

fn consumption(row: &Row<'_>, index: usize) -> rusqlite::Result<Consumption> {
    parsed(row, index, |t| match t {
        "push" => Some(Consumption::Push),
        "pull" => Some(Consumption::Pull),
        _ => None,
    })
}

/// Columns 0..=10 of `outbox_list.sql` and `outbox_show.sql`.
fn outbox_summary(r: &Row<'_>) -> rusqlite::Result<OutboxSummary> {
    Ok(OutboxSummary {
        id: uuid(r, 0)?,
        topic: r.get(1)?,
        key: r.get(2)?,
        aggregate_type: r.get(3)?,
        state: parsed(r, 4, OutboxState::parse)?,
        attempt: r.get(5)?,
        max_attempts: r.get(6)?,
        scheduled_at: time_at(r, 7)?,
        created_at: time_at(r, 8)?,
        updated_at: time_at(r, 9)?,
        last_error: r.get(10)?,
    })
}

/// Columns 0..=12 of `inbox_list.sql` and `inbox_show.sql`.
fn inbox_summary(r: &Row<'_>) -> rusqlite::Result<InboxSummary> {
    Ok(InboxSummary {
        id: uuid(r, 0)?,
        source: r.get(1)?,
        idempotency_key: r.get(2)?,
        aggregate_id: r.get(3)?,
        event_type: r.get(4)?,
        consumption: consumption(r, 5)?,
        state: parsed(r, 6, InboxState::parse)?,
        attempt: r.get(7)?,
        correlation_id: r.get(8)?,
        scheduled_at: time_at(r, 9)?,
        created_at: time_at(r, 10)?,
        processed_at: opt_time_at(r, 11)?,
        last_error: r.get(12)?,
    })
}

/// Keeps `limit` items; the cursor of the last one when more followed.
fn into_page<T>(mut items: Vec<T>, limit: u32, cursor: impl Fn(&T) -> ListCursor) -> Page<T> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let more = items.len() > limit;
    items.truncate(limit);
    let next = if more { items.last().map(cursor) } else { None };
    Page { items, next }
}

/// The cursor's parameters; one row more than the page, to know whether another follows.
fn page_params(page: &PageRequest) -> (Option<String>, Option<String>, i64) {
    (
        page.after.map(|c| text_for_after(c.created_at)),
        page.after.map(|c| c.id.to_string()),
        i64::from(page.limit) + 1,
    )
}

fn delete_outcome(state: Option<String>, deleted: usize) -> DeleteOutcome {
    match (deleted, state) {
        (n, _) if n > 0 => DeleteOutcome::Deleted,
        (_, None) => DeleteOutcome::NotFound,
        (_, Some(_)) => DeleteOutcome::NotDeletable,
    }
}

/// (group, state, n) rows of a `*_counts.sql`; a NULL group is the total of a state.
fn counts<S: Ord + Copy>(
    conn: &rusqlite::Connection,
    sql: &str,
    parse: fn(&str) -> Option<S>,
) -> rusqlite::Result<Vec<(Option<String>, S, u64)>> {
    conn.prepare_cached(sql)?
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                parsed(r, 1, parse)?,
                u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
            ))
        })?
        .collect()
}

#[async_trait]
impl OperatorStore for SqliteStore {
    async fn list_outbox(
        &self,
        state: OutboxState,
        filter: &OutboxFilter,
        page: PageRequest,
    ) -> Result<Page<OutboxSummary>, StoreError> {
        let f = OutboxParams::new(filter);
        let code = outbox_code(state);
        let (after_at, after_id, limit) = page_params(&page);
        let items = self
            .read(
                StoreAction::UseDatabase,
                "listing outbox rows",
                move |conn, sql| {
                    let mut params = vec![(":state", &code as &dyn ToSql)];
                    params.extend(f.named());
                    params.extend([
                        (":after_created_at", &after_at as &dyn ToSql),
                        (":after_id", &after_id),
                        (":limit", &limit),
                    ]);
                    conn.prepare_cached(&sql.outbox_list)?
                        .query_map(params.as_slice(), outbox_summary)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                },
            )
            .await?;
        Ok(into_page(items, page.limit, |s| ListCursor {
            created_at: s.created_at,
            id: s.id,
        }))
    }

    async fn show_outbox(&self, id: Uuid) -> Result<Option<OutboxMessage>, StoreError> {
        self.read(
            StoreAction::UseDatabase,
            "reading an outbox row",
            move |conn, sql| {
                let mut stmt = conn.prepare_cached(&sql.outbox_show)?;
                let mut rows = stmt.query_map(named_params! {":id": id.to_string()}, |r| {
                    Ok(OutboxMessage {
                        summary: outbox_summary(r)?,
                        sequence: r.get(11)?,
                        claimed_at: opt_time_at(r, 12)?,
                        lease_expires_at: opt_time_at(r, 13)?,
                        headers: r.get(14)?,
                        payload: r.get(15)?,
                    })
                })?;
                rows.next().transpose()
            },
        )
        .await
    }

    async fn replay_outbox(
        &self,
        filter: &OutboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError> {
        let f = OutboxParams::new(filter);
        run_in_chunks(limit, |chunk| {
            let f = f.clone();
            self.write("replaying outbox rows", move |tx, sql| {
                let mut params = f.named();
                params.push((":chunk", &chunk));
                tx.prepare_cached(&sql.outbox_replay)?
                    .execute(params.as_slice())
                    .map(|n| n as u64)
            })
        })
        .await
    }

    async fn delete_outbox_row(&self, id: Uuid) -> Result<DeleteOutcome, StoreError> {
        self.write("deleting an outbox row", move |tx, sql| {
            let id = id.to_string();
            let state: Option<String> = tx
                .prepare_cached(&sql.outbox_state)?
                .query_map(named_params! {":id": id}, |r| r.get(0))?
                .next()
                .transpose()?;
            let deleted = tx
                .prepare_cached(&sql.outbox_delete_one)?
                .execute(named_params! {":id": id})?;
            Ok(delete_outcome(state, deleted))
        })
        .await
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
            let f = f.clone();
            self.write("deleting outbox rows", move |tx, sql| {
                let mut params = vec![(":state", &code as &dyn ToSql)];
                params.extend(f.named());
                params.push((":chunk", &chunk));
                tx.prepare_cached(&sql.outbox_delete)?
                    .execute(params.as_slice())
                    .map(|n| n as u64)
            })
        })
        .await
    }

    async fn outbox_counts(&self) -> Result<StateCounts<OutboxState>, StoreError> {
        let counts = self
            .read(
                StoreAction::UseDatabase,
                "counting outbox rows",
                |conn, sql| counts(conn, &sql.outbox_counts, OutboxState::parse),
            )
            .await?;
        let pending = queuebox_store::OutboxStore::pending_stats(self).await?;
        Ok(StateCounts::from_rows(
            OutboxState::ALL,
            counts,
            pending.oldest_due_age_seconds,
        ))
    }

    async fn outbox_topics(&self) -> Result<Vec<String>, StoreError> {
        self.read(
            StoreAction::UseDatabase,
            "reading the outbox topics",
            |conn, sql| {
                conn.prepare_cached(&sql.outbox_topics)?
                    .query_map([], |r| r.get(0))?
                    .collect()
            },
        )
        .await
    }

    async fn list_inbox(
        &self,
        state: InboxState,
        filter: &InboxFilter,
        page: PageRequest,
    ) -> Result<Page<InboxSummary>, StoreError> {
        let f = InboxParams::new(filter);
        let code = inbox_code(state);
        let (after_at, after_id, limit) = page_params(&page);
        let items = self
            .read(
                StoreAction::UseDatabase,
                "listing inbox rows",
                move |conn, sql| {
                    let mut params = vec![(":state", &code as &dyn ToSql)];
                    params.extend(f.named());
                    params.extend([
                        (":after_created_at", &after_at as &dyn ToSql),
                        (":after_id", &after_id),
                        (":limit", &limit),
                    ]);
                    conn.prepare_cached(&sql.inbox_list)?
                        .query_map(params.as_slice(), inbox_summary)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                },
            )
            .await?;
        Ok(into_page(items, page.limit, |s| ListCursor {
            created_at: s.created_at,
            id: s.id,
        }))
    }

    async fn show_inbox(&self, id: Uuid) -> Result<Option<InboxMessage>, StoreError> {
        self.read(
            StoreAction::UseDatabase,
            "reading an inbox row",
            move |conn, sql| {
                let mut stmt = conn.prepare_cached(&sql.inbox_show)?;
                let mut rows = stmt.query_map(named_params! {":id": id.to_string()}, |r| {
                    Ok(InboxMessage {
                        summary: inbox_summary(r)?,
                        claimed_at: opt_time_at(r, 13)?,
                        lease_expires_at: opt_time_at(r, 14)?,
                        headers: r.get(15)?,
                        payload: r.get(16)?,
                    })
                })?;
                rows.next().transpose()
            },
        )
        .await
    }

    async fn requeue_inbox(
        &self,
        filter: &InboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError> {
        let f = InboxParams::new(filter);
        run_in_chunks(limit, |chunk| {
            let f = f.clone();
            self.write("requeueing inbox rows", move |tx, sql| {
                let mut params = f.named();
                params.push((":chunk", &chunk));
                tx.prepare_cached(&sql.inbox_requeue)?
                    .execute(params.as_slice())
                    .map(|n| n as u64)
            })
        })
        .await
    }

    async fn delete_inbox_row(&self, id: Uuid) -> Result<DeleteOutcome, StoreError> {
        self.write("deleting an inbox row", move |tx, sql| {
            let id = id.to_string();
            let state: Option<String> = tx
                .prepare_cached(&sql.inbox_state)?
                .query_map(named_params! {":id": id}, |r| r.get(0))?
                .next()
                .transpose()?;
            let deleted = tx
                .prepare_cached(&sql.inbox_delete_one)?
                .execute(named_params! {":id": id})?;
            Ok(delete_outcome(state, deleted))
        })
        .await
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
            let f = f.clone();
            self.write("deleting inbox rows", move |tx, sql| {
                let mut params = vec![(":state", &code as &dyn ToSql)];
                params.extend(f.named());
                params.push((":chunk", &chunk));
                tx.prepare_cached(&sql.inbox_delete)?
                    .execute(params.as_slice())
                    .map(|n| n as u64)
            })
        })
        .await
    }

    async fn inbox_counts(&self) -> Result<StateCounts<InboxState>, StoreError> {
        let counts = self
            .read(
                StoreAction::UseDatabase,
                "counting inbox rows",
                |conn, sql| counts(conn, &sql.inbox_counts, InboxState::parse),
            )
            .await?;
        let age = queuebox_store::RelayStore::inbox_oldest_pending_age(self).await?;
        Ok(StateCounts::from_rows(InboxState::ALL, counts, age))
    }
}
