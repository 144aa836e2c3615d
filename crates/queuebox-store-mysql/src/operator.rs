//! `OperatorStore` on MySQL / MariaDB (operations.md §6): lists and shows are one statement of
//! `queries/operator/`; a bulk operation repeats its chunk through [`run_in_chunks`], each chunk
//! a short transaction of a locking read (`FOR UPDATE SKIP LOCKED`, at most the chunk size) and
//! one write of exactly those ids, since MySQL has no LIMIT in an IN subquery.

use async_trait::async_trait;
use mysql_async::{Row, Value};
use queuebox_store::{
    Consumption, DeleteOutcome, FinishedInboxState, FinishedOutboxState, InboxFilter, InboxMessage,
    InboxState, InboxSummary, ListCursor, OperatorStore, OutboxFilter, OutboxMessage, OutboxState,
    OutboxStore, OutboxSummary, Page, PageRequest, RelayStore, StateCounts, StoreAction,
    StoreError, run_in_chunks,
};
use uuid::Uuid;

use crate::sql::Stmt;
use crate::store::MysqlStore;
use crate::values::{Reader, id, ids_json, json, list, micros, text};

/// The codes the statements map to state literals (SCH-9), by the order of the states.
fn outbox_code(state: OutboxState) -> Value {
    Value::from(match state {
        OutboxState::Pending => 0,
        OutboxState::Processing => 1,
        OutboxState::Sent => 2,
        OutboxState::Dead => 3,
    })
}

fn inbox_code(state: InboxState) -> Value {
    Value::from(match state {
        InboxState::Pending => 0,
        InboxState::Processing => 1,
        InboxState::Processed => 2,
        InboxState::Dead => 3,
    })
}

fn time(at: Option<std::time::SystemTime>) -> Value {
    at.map_or(Value::NULL, |t| Value::from(micros(t)))
}

fn id_list(ids: Option<&[Uuid]>) -> Value {
    match ids {
        None => Value::NULL,
        Some(ids) => json(&ids_json(ids)),
    }
}

/// The outbox filter as named values (ADM-13).
fn outbox_filter(f: &OutboxFilter) -> Vec<(&'static str, Value)> {
    vec![
        ("ids", id_list(f.ids.as_deref())),
        ("topics", list(f.topics.as_deref())),
        ("key", text(f.key.as_deref())),
        ("created_after", time(f.created_after)),
        ("created_before", time(f.created_before)),
        ("error_contains", text(f.error_contains.as_deref())),
    ]
}

/// The inbox filter as named values (ADM-21).
fn inbox_filter(f: &InboxFilter) -> Vec<(&'static str, Value)> {
    vec![
        ("ids", id_list(f.ids.as_deref())),
        ("sources", list(f.sources.as_deref())),
        (
            "consumption",
            f.consumption.map_or(Value::NULL, |c| {
                Value::from(match c {
                    Consumption::Push => 0,
                    Consumption::Pull => 1,
                })
            }),
        ),
        ("event_type", text(f.event_type.as_deref())),
        ("aggregate_id", text(f.aggregate_id.as_deref())),
        ("idempotency_key", text(f.idempotency_key.as_deref())),
        ("created_after", time(f.created_after)),
        ("created_before", time(f.created_before)),
        ("error_contains", text(f.error_contains.as_deref())),
    ]
}

/// The cursor values of a list page and one row more than the page, which tells whether
/// another page follows.
fn page_values(page: &PageRequest) -> [(&'static str, Value); 3] {
    [
        ("after_created_at", time(page.after.map(|c| c.created_at))),
        ("after_id", page.after.map_or(Value::NULL, |c| id(c.id))),
        ("limit", Value::from(u64::from(page.limit) + 1)),
    ]
}

/// Keeps `limit` items; the cursor of the last one when more followed.
fn into_page<T>(mut items: Vec<T>, limit: u32, cursor: impl Fn(&T) -> ListCursor) -> Page<T> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let more = items.len() > limit;
    items.truncate(limit);
    let next = if more { items.last().map(cursor) } else { None };
    Page { items, next }
}

fn unknown(during: &'static str, what: String) -> StoreError {
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
    parse(text).ok_or_else(|| unknown(during, format!("a row holds the unknown state {text}")))
}

fn outbox_summary(r: &Reader<'_>) -> Result<OutboxSummary, StoreError> {
    let text: String = r.get(4)?;
    Ok(OutboxSummary {
        id: r.uuid(0)?,
        topic: r.get(1)?,
        key: r.get(2)?,
        aggregate_type: r.get(3)?,
        state: state(r.during, &text, OutboxState::parse)?,
        attempt: r.get(5)?,
        max_attempts: r.get(6)?,
        scheduled_at: r.time(7)?,
        created_at: r.time(8)?,
        updated_at: r.time(9)?,
        last_error: r.get(10)?,
    })
}

fn inbox_summary(r: &Reader<'_>) -> Result<InboxSummary, StoreError> {
    let consumption: String = r.get(5)?;
    let text: String = r.get(6)?;
    Ok(InboxSummary {
        id: r.uuid(0)?,
        source: r.get(1)?,
        idempotency_key: r.get(2)?,
        aggregate_id: r.get(3)?,
        event_type: r.get(4)?,
        consumption: match consumption.as_str() {
            "push" => Consumption::Push,
            "pull" => Consumption::Pull,
            other => {
                return Err(unknown(
                    r.during,
                    format!("a row holds the unknown consumption {other}"),
                ));
            }
        },
        state: state(r.during, &text, InboxState::parse)?,
        attempt: r.get(7)?,
        correlation_id: r.get(8)?,
        scheduled_at: r.time(9)?,
        created_at: r.time(10)?,
        processed_at: r.opt_time(11)?,
        last_error: r.get(12)?,
    })
}

impl MysqlStore {
    /// One chunk of a bulk operation: the locking read of at most `chunk` ids, then the write
    /// of those ids; the rows the write changed.
    async fn chunk(
        &self,
        during: &'static str,
        select: &Stmt,
        mut values: Vec<(&'static str, Value)>,
        chunk: u32,
        write: &Stmt,
    ) -> Result<u64, StoreError> {
        values.push(("chunk", Value::from(chunk)));
        let done = self
            .read_then_write(during, (select, &values), write, |rows| {
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

    /// A guarded single delete; when it removed nothing, the row's state tells why.
    async fn delete_one(
        &self,
        during: &'static str,
        delete: &Stmt,
        state_of: &Stmt,
        row: Uuid,
    ) -> Result<DeleteOutcome, StoreError> {
        let values = [("id", id(row))];
        if self.execute(during, delete, &values).await? > 0 {
            return Ok(DeleteOutcome::Deleted);
        }
        let rows = self.rows(during, state_of, &values).await?;
        Ok(if rows.is_empty() {
            DeleteOutcome::NotFound
        } else {
            DeleteOutcome::NotDeletable
        })
    }

    /// (group, state, n) rows of a `*_counts.sql`; a NULL group is the total of a state.
    async fn group_counts<S: Ord + Copy>(
        &self,
        during: &'static str,
        stmt: &Stmt,
        parse: impl Fn(&str) -> Option<S>,
    ) -> Result<Vec<(Option<String>, S, u64)>, StoreError> {
        let rows = self.rows(during, stmt, &[]).await?;
        rows.iter()
            .map(|row| {
                let r = Reader { row, during };
                let text: String = r.get(1)?;
                let n: i64 = r.get(2)?;
                Ok((
                    r.get(0)?,
                    state(during, &text, &parse)?,
                    u64::try_from(n).unwrap_or(0),
                ))
            })
            .collect()
    }
}

fn rows_to<T>(
    rows: &[Row],
    during: &'static str,
    f: impl Fn(&Reader<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    rows.iter().map(|row| f(&Reader { row, during })).collect()
}

#[async_trait]
impl OperatorStore for MysqlStore {
    async fn list_outbox(
        &self,
        state: OutboxState,
        filter: &OutboxFilter,
        page: PageRequest,
    ) -> Result<Page<OutboxSummary>, StoreError> {
        const DURING: &str = "listing outbox rows";
        let mut values = vec![("state", outbox_code(state))];
        values.extend(outbox_filter(filter));
        values.extend(page_values(&page));
        let rows = self.rows(DURING, &self.sql.outbox_list, &values).await?;
        let items = rows_to(&rows, DURING, outbox_summary)?;
        Ok(into_page(items, page.limit, |s| ListCursor {
            created_at: s.created_at,
            id: s.id,
        }))
    }

    async fn show_outbox(&self, row: Uuid) -> Result<Option<OutboxMessage>, StoreError> {
        const DURING: &str = "reading an outbox row";
        let rows = self
            .rows(DURING, &self.sql.outbox_show, &[("id", id(row))])
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let r = Reader {
            row,
            during: DURING,
        };
        Ok(Some(OutboxMessage {
            summary: outbox_summary(&r)?,
            sequence: r.get(11)?,
            claimed_at: r.opt_time(12)?,
            lease_expires_at: r.opt_time(13)?,
            headers: r.get(14)?,
            payload: r.get(15)?,
        }))
    }

    async fn replay_outbox(
        &self,
        filter: &OutboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError> {
        run_in_chunks(limit, |chunk| {
            self.chunk(
                "replaying outbox rows",
                &self.sql.outbox_replay_select,
                outbox_filter(filter),
                chunk,
                &self.sql.outbox_replay,
            )
        })
        .await
    }

    async fn delete_outbox_row(&self, row: Uuid) -> Result<DeleteOutcome, StoreError> {
        self.delete_one(
            "deleting an outbox row",
            &self.sql.outbox_delete_one,
            &self.sql.outbox_state_of,
            row,
        )
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
        run_in_chunks(limit, |chunk| {
            let mut values = vec![("state", code.clone())];
            values.extend(outbox_filter(filter));
            self.chunk(
                "deleting outbox rows",
                &self.sql.outbox_delete_select,
                values,
                chunk,
                &self.sql.outbox_delete_ids,
            )
        })
        .await
    }

    async fn outbox_counts(&self) -> Result<StateCounts<OutboxState>, StoreError> {
        let counts = self
            .group_counts(
                "counting outbox rows",
                &self.sql.outbox_counts,
                OutboxState::parse,
            )
            .await?;
        let pending = self.pending_stats().await?;
        Ok(StateCounts::from_rows(
            OutboxState::ALL,
            counts,
            pending.oldest_due_age_seconds,
        ))
    }

    async fn outbox_topics(&self) -> Result<Vec<String>, StoreError> {
        const DURING: &str = "reading the outbox topics";
        let rows = self.rows(DURING, &self.sql.outbox_topics, &[]).await?;
        let mut topics = rows_to(&rows, DURING, |r| r.get::<String>(0))?;
        topics.sort();
        Ok(topics)
    }

    async fn list_inbox(
        &self,
        state: InboxState,
        filter: &InboxFilter,
        page: PageRequest,
    ) -> Result<Page<InboxSummary>, StoreError> {
        const DURING: &str = "listing inbox rows";
        let mut values = vec![("state", inbox_code(state))];
        values.extend(inbox_filter(filter));
        values.extend(page_values(&page));
        let rows = self.rows(DURING, &self.sql.inbox_list, &values).await?;
        let items = rows_to(&rows, DURING, inbox_summary)?;
        Ok(into_page(items, page.limit, |s| ListCursor {
            created_at: s.created_at,
            id: s.id,
        }))
    }

    async fn show_inbox(&self, row: Uuid) -> Result<Option<InboxMessage>, StoreError> {
        const DURING: &str = "reading an inbox row";
        let rows = self
            .rows(DURING, &self.sql.inbox_show, &[("id", id(row))])
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let r = Reader {
            row,
            during: DURING,
        };
        Ok(Some(InboxMessage {
            summary: inbox_summary(&r)?,
            claimed_at: r.opt_time(13)?,
            lease_expires_at: r.opt_time(14)?,
            headers: r.get(15)?,
            payload: r.get(16)?,
        }))
    }

    async fn requeue_inbox(
        &self,
        filter: &InboxFilter,
        limit: Option<u64>,
    ) -> Result<u64, StoreError> {
        run_in_chunks(limit, |chunk| {
            self.chunk(
                "requeueing inbox rows",
                &self.sql.inbox_requeue_select,
                inbox_filter(filter),
                chunk,
                &self.sql.inbox_requeue,
            )
        })
        .await
    }

    async fn delete_inbox_row(&self, row: Uuid) -> Result<DeleteOutcome, StoreError> {
        self.delete_one(
            "deleting an inbox row",
            &self.sql.inbox_delete_one,
            &self.sql.inbox_state_of,
            row,
        )
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
        run_in_chunks(limit, |chunk| {
            let mut values = vec![("state", code.clone())];
            values.extend(inbox_filter(filter));
            self.chunk(
                "deleting inbox rows",
                &self.sql.inbox_delete_select,
                values,
                chunk,
                &self.sql.inbox_delete_ids,
            )
        })
        .await
    }

    async fn inbox_counts(&self) -> Result<StateCounts<InboxState>, StoreError> {
        let counts = self
            .group_counts(
                "counting inbox rows",
                &self.sql.inbox_counts,
                InboxState::parse,
            )
            .await?;
        let age = self.inbox_oldest_pending_age().await?;
        Ok(StateCounts::from_rows(InboxState::ALL, counts, age))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    #[test]
    fn adm_11_a_page_knows_whether_another_follows() {
        let at = SystemTime::UNIX_EPOCH;
        let cursor = |n: &u128| ListCursor {
            created_at: at,
            id: Uuid::from_u128(*n),
        };
        let full = into_page(vec![3, 2, 1], 2, cursor);
        assert_eq!(full.items, vec![3, 2]);
        assert_eq!(full.next, Some(cursor(&2)));
        assert_eq!(into_page(vec![3, 2], 2, cursor).next, None);
    }

    #[test]
    fn adm_13_an_empty_list_filter_is_an_empty_array_never_null() {
        let f = OutboxFilter {
            topics: Some(vec![]),
            ..OutboxFilter::default()
        };
        let values = outbox_filter(&f);
        assert_eq!(values[0].1, Value::NULL);
        assert_eq!(values[1].1, Value::from("[]"));
    }
}
