//! The insert checks of the suite (inbox.md INB-2, INB-41..44, INB-49..51; schema.md SCH-21):
//! what one stored row holds, how duplicates are answered, and how `scheduled_at` is computed.

use std::time::Duration;

use queuebox_core::TableLayout;

use super::inbox_support::{
    delayed, json, message, of, pulled, relay_claim_of, sources, store_all,
};
use super::{ConformanceFactory, InboxSnapshot, LONG_LEASE, inbox_migrated};
use crate::intake::{Consumption, InsertOutcome, Schedule, StoredState};
use crate::relay::ForwardedRow;

/// The snapshot without its read time, for "nothing changed" comparisons.
fn unread(mut row: InboxSnapshot) -> InboxSnapshot {
    row.read_at = 0;
    row
}

/// INB-49: a stored row holds every column the message gave, `pending`, attempt 0, and the
/// database clock as `created_at` (= `scheduled_at` without a delay); NULL where it gave none.
pub(crate) async fn inb_49_insert_stores_every_column(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "inb49").await;
    let layout = TableLayout::default();
    let bare = message("webhooks", "k-0");
    store_all(&*store, std::slice::from_ref(&bare)).await;
    let first = db.inbox_row(&layout, bare.id).await;

    let mut full = of(message("orders", "k-1"), "order-7");
    full.event_type = Some("order.created".into());
    full.payload = r#"{"order": 7, "lines": [1, 2], "note": "ä"}"#.into();
    full.headers = r#"{"x-tenant": "acme", "content-type": "application/json"}"#.into();
    full.correlation_id = Some("c-9".into());
    store_all(&*store, std::slice::from_ref(&full)).await;
    let row = db.inbox_row(&layout, full.id).await;

    assert_eq!(row.id, full.id);
    assert_eq!(row.source, "orders");
    assert_eq!(row.idempotency_key, "k-1");
    assert_eq!(row.aggregate_id.as_deref(), Some("order-7"));
    assert_eq!(row.event_type.as_deref(), Some("order.created"));
    assert_eq!(json(&row.payload), json(&full.payload));
    assert_eq!(json(&row.headers), json(&full.headers));
    assert_eq!(row.correlation_id.as_deref(), Some("c-9"));
    assert_eq!(row.state, "pending");
    assert_eq!(row.consumption, "push");
    assert_eq!(row.attempt, 0);
    assert!(
        first.read_at <= row.created_at && row.created_at <= row.read_at,
        "created_at is not the database clock of the insert"
    );
    assert_eq!(row.scheduled_at, row.created_at);
    assert_eq!(row.processed_at, None);
    assert_eq!(row.claimed_at, None);
    assert_eq!(row.claim_token, None);
    assert_eq!(row.lease_expires_at, None);
    assert_eq!(row.last_error, None);

    assert_eq!(first.aggregate_id, None);
    assert_eq!(first.event_type, None);
    assert_eq!(first.correlation_id, None);
    assert_eq!(json(&first.headers), json("{}"));
    assert!(store.insert_batch(&[]).await.expect("insert").is_empty());
    db.cleanup().await;
}

/// INB-2: the `consumption` of the source is written on the row.
pub(crate) async fn inb_2_consumption_is_written(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "inb2").await;
    let layout = TableLayout::default();
    let push = message("s", "a");
    let pull = pulled(message("s", "b"));
    store_all(&*store, &[push.clone(), pull.clone()]).await;
    assert_eq!(db.inbox_row(&layout, push.id).await.consumption, "push");
    assert_eq!(db.inbox_row(&layout, pull.id).await.consumption, "pull");
    assert_eq!(pull.consumption, Consumption::Pull);
    db.cleanup().await;
}

/// INB-50: a repeat of a stored pair is a duplicate and changes nothing in the existing row,
/// whatever its state (pending, processing, processed, dead); a new pair in the same batch is
/// still stored.
pub(crate) async fn inb_50_duplicate_changes_nothing_whatever_the_state(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "inb50dup").await;
    let layout = TableLayout::default();
    let pending = pulled(message("s", "pending"));
    let processing = of(message("s", "processing"), "a");
    let processed = of(message("s", "processed"), "b");
    let dead = of(message("s", "dead"), "c");
    let originals = [pending, processing, processed, dead];
    store_all(&*store, &originals).await;
    let claimed = store
        .relay_claim(10, LONG_LEASE, &sources(&["s"]))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 3);
    let forward = ForwardedRow {
        id: uuid::Uuid::new_v4(),
        topic: "t".into(),
        key: Some("b".into()),
        payload: "{}".into(),
        headers: "{}".into(),
        max_attempts: 5,
    };
    let processed_claim = relay_claim_of(&claimed, originals[2].id);
    assert!(
        store
            .relay_forward(processed_claim, &forward)
            .await
            .expect("forward")
    );
    let dead_claim = relay_claim_of(&claimed, originals[3].id);
    assert!(
        store
            .relay_dead(dead_claim, "bad topic")
            .await
            .expect("dead")
    );

    let mut before = Vec::new();
    for row in &originals {
        before.push(unread(db.inbox_row(&layout, row.id).await));
    }
    let states: Vec<_> = before.iter().map(|r| r.state.as_str()).collect();
    assert_eq!(states, ["pending", "processing", "processed", "dead"]);

    let mut repeats: Vec<_> = originals
        .iter()
        .map(|row| {
            let mut repeat = delayed(of(message("s", &row.idempotency_key), "z"), 60_000);
            repeat.payload = r#"{"repeat":true}"#.into();
            repeat
        })
        .collect();
    let fresh = message("s", "fresh");
    repeats.push(fresh.clone());
    let outcomes = store.insert_batch(&repeats).await.expect("insert");
    let mut expected = vec![InsertOutcome::Duplicate; 4];
    expected.push(InsertOutcome::Stored(fresh.id));
    assert_eq!(outcomes, expected);
    for (row, old) in originals.iter().zip(&before) {
        assert_eq!(&unread(db.inbox_row(&layout, row.id).await), old);
    }
    let ids = db.inbox_ids(&layout).await;
    assert_eq!(ids.len(), 5, "a duplicate stored a row");
    db.cleanup().await;
}

/// INB-50: the pair is (`source`, `idempotency_key`): one key under two sources is two rows.
pub(crate) async fn inb_50_same_key_under_two_sources_is_two_rows(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "inb50src").await;
    let layout = TableLayout::default();
    let a = message("a", "k");
    let b = message("b", "k");
    store_all(&*store, std::slice::from_ref(&a)).await;
    store_all(&*store, std::slice::from_ref(&b)).await;
    assert_eq!(db.inbox_ids(&layout).await.len(), 2);
    db.cleanup().await;
}

/// INB-50: two rows of one batch with the same pair: the first is stored, the second is a
/// duplicate, and the stored row is the first one's.
pub(crate) async fn inb_50_duplicate_pair_within_one_batch(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "inb50batch").await;
    let layout = TableLayout::default();
    let mut first = message("s", "k");
    first.payload = r#"{"which":"first"}"#.into();
    let mut second = message("s", "k");
    second.payload = r#"{"which":"second"}"#.into();
    let other = message("s", "other");
    let outcomes = store
        .insert_batch(&[first.clone(), second.clone(), other.clone()])
        .await
        .expect("insert");
    assert_eq!(
        outcomes,
        vec![
            InsertOutcome::Stored(first.id),
            InsertOutcome::Duplicate,
            InsertOutcome::Stored(other.id),
        ]
    );
    let row = db.inbox_row(&layout, first.id).await;
    assert_eq!(json(&row.payload), json(&first.payload));
    assert_eq!(db.inbox_ids(&layout).await.len(), 2);
    db.cleanup().await;
}

/// INB-41/44: `AfterReceipt`: `scheduled_at` = receipt time (`created_at`) + the delay.
pub(crate) async fn inb_41_scheduled_at_after_receipt(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "inb41").await;
    let layout = TableLayout::default();
    let now = message("s", "now");
    let later = delayed(message("s", "later"), 30_000);
    store_all(&*store, &[now.clone(), later.clone()]).await;
    let a = db.inbox_row(&layout, now.id).await;
    let b = db.inbox_row(&layout, later.id).await;
    assert_eq!(a.scheduled_at, a.created_at);
    assert_eq!(b.scheduled_at - b.created_at, 30_000_000);
    db.cleanup().await;
}

/// INB-42/44: `AfterPublish`: `scheduled_at` = min(publish time, receipt time) + delay, so a
/// past publish time counts to the millisecond and a future one never lengthens the hold.
pub(crate) async fn inb_42_scheduled_at_after_publish_takes_the_earlier_time(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "inb42").await;
    let layout = TableLayout::default();
    let delay = Duration::from_secs(30);
    let mut past = message("s", "past");
    past.schedule = Schedule::AfterPublish {
        publish_epoch_ms: 1_000_000_000_123,
        delay,
    };
    let mut future = message("s", "future");
    future.schedule = Schedule::AfterPublish {
        publish_epoch_ms: super::inbox_support::now_ms() + 3_600_000,
        delay,
    };
    store_all(&*store, &[past.clone(), future.clone()]).await;
    let p = db.inbox_row(&layout, past.id).await;
    assert_eq!(p.scheduled_at, 1_000_000_000_123_000 + 30_000_000);
    let f = db.inbox_row(&layout, future.id).await;
    assert_eq!(f.scheduled_at - f.created_at, 30_000_000);
    db.cleanup().await;
}

/// INB-56/INB-58/INB-45: a row stored `dead` (a broker body that is not JSON, a transform
/// rejection) is `dead` from its insert, with its `last_error`, due at its receipt whatever
/// delay it was given, and never claimed by the relay.
pub(crate) async fn inb_56_a_dead_row_is_stored_dead_with_its_error_and_never_claimed(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "inb56").await;
    let layout = TableLayout::default();
    let mut dead = delayed(message("queue", "sha256:00ff"), 60_000);
    dead.payload = r#"{"raw":"not json"}"#.into();
    dead.state = StoredState::Dead;
    dead.last_error = Some("The body is not valid JSON.".into());
    store_all(&*store, std::slice::from_ref(&dead)).await;
    let row = db.inbox_row(&layout, dead.id).await;
    assert_eq!(row.state, "dead");
    assert_eq!(
        row.last_error.as_deref(),
        Some("The body is not valid JSON.")
    );
    assert_eq!(json(&row.payload), json(r#"{"raw":"not json"}"#));
    assert_eq!(
        row.scheduled_at, row.created_at,
        "INB-45: due at receipt, no delay"
    );
    assert_eq!(row.attempt, 0);
    let claimed = store
        .relay_claim(10, LONG_LEASE, &sources(&["queue"]))
        .await
        .expect("relay claim");
    assert!(
        claimed.is_empty(),
        "a dead row is never claimed: {claimed:?}"
    );
    // INB-57: the same key again is a duplicate and changes nothing.
    let mut again = message("queue", "sha256:00ff");
    again.state = StoredState::Dead;
    again.last_error = Some("The body is not valid JSON.".into());
    let outcomes = store.insert_batch(&[again]).await.expect("insert");
    assert_eq!(outcomes, vec![InsertOutcome::Duplicate]);
    assert_eq!(unread(db.inbox_row(&layout, dead.id).await), unread(row));
    db.cleanup().await;
}
