//! The operator statements' parameters: the filters in the order `operator_sql.rs` binds
//! them, the state codes the files map to literals (SCH-9), and the keyset page.

use std::time::SystemTime;

use queuebox_store::{
    Consumption, InboxFilter, InboxState, ListCursor, OutboxFilter, OutboxState, Page, PageRequest,
};
use tokio_postgres::types::ToSql;
use uuid::Uuid;

pub(crate) type Param<'a> = &'a (dyn ToSql + Sync);

/// The codes the statements map to state literals (SCH-9), by the order of the states.
pub(crate) fn outbox_code(state: OutboxState) -> i32 {
    match state {
        OutboxState::Pending => 0,
        OutboxState::Processing => 1,
        OutboxState::Sent => 2,
        OutboxState::Dead => 3,
    }
}

pub(crate) fn inbox_code(state: InboxState) -> i32 {
    match state {
        InboxState::Pending => 0,
        InboxState::Processing => 1,
        InboxState::Processed => 2,
        InboxState::Dead => 3,
    }
}

/// The outbox filter as the statements' parameters, in `OUTBOX_FILTER` order.
pub(crate) struct OutboxParams<'a> {
    ids: Option<&'a [Uuid]>,
    topics: Option<&'a [String]>,
    key: Option<&'a str>,
    created_after: Option<SystemTime>,
    created_before: Option<SystemTime>,
    error_contains: Option<&'a str>,
}

impl<'a> OutboxParams<'a> {
    pub(crate) fn new(f: &'a OutboxFilter) -> Self {
        Self {
            ids: f.ids.as_deref(),
            topics: f.topics.as_deref(),
            key: f.key.as_deref(),
            created_after: f.created_after,
            created_before: f.created_before,
            error_contains: f.error_contains.as_deref(),
        }
    }

    pub(crate) fn refs(&self) -> [Param<'_>; 6] {
        [
            &self.ids,
            &self.topics,
            &self.key,
            &self.created_after,
            &self.created_before,
            &self.error_contains,
        ]
    }
}

/// The inbox filter as the statements' parameters, in `INBOX_FILTER` order.
pub(crate) struct InboxParams<'a> {
    ids: Option<&'a [Uuid]>,
    sources: Option<&'a [String]>,
    consumption: Option<i32>,
    event_type: Option<&'a str>,
    aggregate_id: Option<&'a str>,
    idempotency_key: Option<&'a str>,
    created_after: Option<SystemTime>,
    created_before: Option<SystemTime>,
    error_contains: Option<&'a str>,
}

impl<'a> InboxParams<'a> {
    pub(crate) fn new(f: &'a InboxFilter) -> Self {
        Self {
            ids: f.ids.as_deref(),
            sources: f.sources.as_deref(),
            consumption: f.consumption.map(|c| match c {
                Consumption::Push => 0,
                Consumption::Pull => 1,
            }),
            event_type: f.event_type.as_deref(),
            aggregate_id: f.aggregate_id.as_deref(),
            idempotency_key: f.idempotency_key.as_deref(),
            created_after: f.created_after,
            created_before: f.created_before,
            error_contains: f.error_contains.as_deref(),
        }
    }

    pub(crate) fn refs(&self) -> [Param<'_>; 9] {
        [
            &self.ids,
            &self.sources,
            &self.consumption,
            &self.event_type,
            &self.aggregate_id,
            &self.idempotency_key,
            &self.created_after,
            &self.created_before,
            &self.error_contains,
        ]
    }
}

/// The parameters of a list page: the cursor (both NULL on the first page) and one row more
/// than the page, which tells whether another page follows.
pub(crate) fn page_params(page: &PageRequest) -> (Option<SystemTime>, Option<Uuid>, i64) {
    (
        page.after.map(|c| c.created_at),
        page.after.map(|c| c.id),
        i64::from(page.limit) + 1,
    )
}

/// Keeps `limit` items; the cursor of the last one when more followed.
pub(crate) fn into_page<T>(
    mut items: Vec<T>,
    limit: u32,
    cursor: impl Fn(&T) -> ListCursor,
) -> Page<T> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let more = items.len() > limit;
    items.truncate(limit);
    let next = if more { items.last().map(cursor) } else { None };
    Page { items, next }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let last = into_page(vec![3, 2], 2, cursor);
        assert_eq!(last.next, None);
        let page = PageRequest {
            after: Some(cursor(&7)),
            limit: 50,
        };
        assert_eq!(page_params(&page), (Some(at), Some(Uuid::from_u128(7)), 51));
    }
}
