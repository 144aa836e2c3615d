//! Builders and small steps shared by the inbox, relay and retention checks of the suite.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use uuid::Uuid;

use crate::intake::{Consumption, InsertOutcome, IntakeStore, NewInboxRow, Schedule, StoredState};
use crate::outbox::Claim;
use crate::relay::RelayRow;

/// A push message of `source` with this idempotency key: no aggregate, event type or
/// correlation id, `{"n":1}` as payload, no headers, due at receipt. The id is a UUID v7, as
/// QueueBox makes it (SCH-7).
pub fn message(source: &str, key: &str) -> NewInboxRow {
    NewInboxRow {
        raw_body: None,
        id: Uuid::now_v7(),
        source: source.to_owned(),
        idempotency_key: key.to_owned(),
        aggregate_id: None,
        event_type: None,
        payload: r#"{"n":1}"#.to_owned(),
        headers: "{}".to_owned(),
        consumption: Consumption::Push,
        correlation_id: None,
        schedule: Schedule::AfterReceipt {
            delay: Duration::ZERO,
        },
        state: StoredState::Pending,
        last_error: None,
    }
}

/// The row with this aggregate id.
pub(crate) fn of(mut row: NewInboxRow, aggregate: &str) -> NewInboxRow {
    row.aggregate_id = Some(aggregate.to_owned());
    row
}

/// The row as a pull source stores it.
pub(crate) fn pulled(mut row: NewInboxRow) -> NewInboxRow {
    row.consumption = Consumption::Pull;
    row
}

/// The row due `ms` after receipt.
pub(crate) fn delayed(mut row: NewInboxRow, ms: u64) -> NewInboxRow {
    row.schedule = Schedule::AfterReceipt {
        delay: Duration::from_millis(ms),
    };
    row
}

/// The row published `ms` ago with no delay, so it is due from then on (INB-42): distinct
/// publish times give distinct `scheduled_at` within one batch.
pub(crate) fn published_ago(mut row: NewInboxRow, ms: i64) -> NewInboxRow {
    row.schedule = Schedule::AfterPublish {
        publish_epoch_ms: now_ms() - ms,
        delay: Duration::ZERO,
    };
    row
}

/// Milliseconds since 1970 by this process's clock (the test database runs on the same
/// machine, or close enough for offsets of seconds).
pub(crate) fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

pub(crate) fn sources(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

pub(crate) fn relay_ids(rows: &[RelayRow]) -> Vec<Uuid> {
    rows.iter().map(|r| r.claim.id.0).collect()
}

/// The claim of `id` among the claimed rows.
pub(crate) fn relay_claim_of(rows: &[RelayRow], id: Uuid) -> Claim {
    rows.iter()
        .find(|r| r.claim.id.0 == id)
        .map(|r| r.claim)
        .unwrap_or_else(|| panic!("{id} was not claimed: {rows:?}"))
}

/// Stores the rows, expecting each to be new.
pub(crate) async fn store_all(store: &dyn IntakeStore, rows: &[NewInboxRow]) {
    let outcomes = store.insert_batch(rows).await.expect("insert");
    let expected: Vec<_> = rows.iter().map(|r| InsertOutcome::Stored(r.id)).collect();
    assert_eq!(outcomes, expected);
}

pub(crate) fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}
