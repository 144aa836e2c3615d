//! The relay claim checks of the suite (inbox.md RLY-2..5, INB-3, INB-46): which rows a relay
//! claim takes, in which order, what it writes, and that pull rows are never touched.

use std::time::Duration;

use queuebox_core::TableLayout;

use super::inbox_support::{
    delayed, json, message, of, published_ago, pulled, relay_ids, sources, store_all,
};
use super::{ConformanceFactory, LONG_LEASE, inbox_migrated};
use crate::relay::ForwardedRow;

/// RLY-2: only push rows, only pending and due ones, only of the listed sources.
pub(crate) async fn rly_2_claim_takes_due_push_rows_of_listed_sources(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "rly2").await;
    let layout = TableLayout::default();
    let a = published_ago(message("s1", "a"), 3_000);
    let b = published_ago(message("s2", "b"), 2_000);
    let unlisted = message("s3", "c");
    let pull = pulled(message("s1", "d"));
    let future = delayed(message("s1", "e"), 3_600_000);
    store_all(
        &*store,
        &[
            a.clone(),
            b.clone(),
            unlisted.clone(),
            pull.clone(),
            future.clone(),
        ],
    )
    .await;

    let listed = sources(&["s1", "s2"]);
    let none = store.relay_claim(10, LONG_LEASE, &[]).await.expect("claim");
    assert!(none.is_empty(), "no sources, no rows: {none:?}");
    let claimed = store
        .relay_claim(10, LONG_LEASE, &listed)
        .await
        .expect("claim");
    assert_eq!(relay_ids(&claimed), vec![a.id, b.id]);
    let again = store
        .relay_claim(10, LONG_LEASE, &listed)
        .await
        .expect("claim");
    assert!(
        again.is_empty(),
        "a processing row was claimed again: {again:?}"
    );
    for id in [unlisted.id, pull.id, future.id] {
        let row = db.inbox_row(&layout, id).await;
        assert_eq!((row.state.as_str(), row.claim_token), ("pending", None));
    }
    let later = store
        .relay_claim(10, LONG_LEASE, &sources(&["s3"]))
        .await
        .expect("claim");
    assert_eq!(relay_ids(&later), vec![unlisted.id], "configured again");
    db.cleanup().await;
}

/// RLY-3, INB-46: one row per aggregate per claim, the first by `scheduled_at` (not by insert
/// order); an aggregate with a push row in processing, of any source and whatever its lease,
/// is skipped; a pull row in processing does not make its aggregate busy for the relay.
pub(crate) async fn rly_3_one_row_per_aggregate_and_busy_aggregates_skipped(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "rly3").await;
    let layout = TableLayout::default();
    let z0 = published_ago(of(message("other", "z0"), "Z"), 10_000);
    store_all(&*store, std::slice::from_ref(&z0)).await;
    let busy = store
        .relay_claim(1, Duration::ZERO, &sources(&["other"]))
        .await
        .expect("claim");
    assert_eq!(
        relay_ids(&busy),
        vec![z0.id],
        "Z now has an expired processing row"
    );
    let wp = pulled(of(message("s", "wp"), "W"));
    store_all(&*store, std::slice::from_ref(&wp)).await;
    db.claim_by_hand(&layout, wp.id, 60_000).await;

    let x1 = published_ago(of(message("s", "x1"), "X"), 4_000);
    let x2 = published_ago(of(message("s", "x2"), "X"), 5_000);
    let y1 = published_ago(of(message("s", "y1"), "Y"), 3_000);
    let y2 = published_ago(of(message("s", "y2"), "Y"), 2_000);
    let w1 = published_ago(of(message("s", "w1"), "W"), 1_500);
    let z1 = published_ago(of(message("s", "z1"), "Z"), 1_000);
    store_all(
        &*store,
        &[
            x1.clone(),
            x2.clone(),
            y1.clone(),
            y2.clone(),
            w1.clone(),
            z1.clone(),
        ],
    )
    .await;

    let s = sources(&["s"]);
    let first = store.relay_claim(10, LONG_LEASE, &s).await.expect("claim");
    assert_eq!(relay_ids(&first), vec![x2.id, y1.id, w1.id]);
    let blocked = store.relay_claim(10, LONG_LEASE, &s).await.expect("claim");
    assert!(
        blocked.is_empty(),
        "a busy aggregate was claimed: {blocked:?}"
    );

    let forward = ForwardedRow {
        id: uuid::Uuid::new_v4(),
        topic: "t".into(),
        key: Some("X".into()),
        payload: "{}".into(),
        headers: "{}".into(),
        max_attempts: 5,
    };
    assert!(
        store
            .relay_forward(first[0].claim, &forward)
            .await
            .expect("forward")
    );
    let next = store.relay_claim(10, LONG_LEASE, &s).await.expect("claim");
    assert_eq!(
        relay_ids(&next),
        vec![x1.id],
        "X is free again, Y and Z are not"
    );
    db.cleanup().await;
}

/// RLY-3: rows with no aggregate are each their own group: several go in one claim.
pub(crate) async fn rly_3_null_aggregates_are_each_their_own_group(
    factory: &dyn ConformanceFactory,
) {
    let (_db, store) = inbox_migrated(factory, "rly3null").await;
    let rows = [
        published_ago(message("s", "a"), 4_000),
        published_ago(message("s", "b"), 3_000),
        published_ago(of(message("s", "c"), "A"), 2_000),
        published_ago(message("s", "d"), 1_000),
    ];
    store_all(&*store, &rows).await;
    let claimed = store
        .relay_claim(10, LONG_LEASE, &sources(&["s"]))
        .await
        .expect("claim");
    let expected: Vec<_> = rows.iter().map(|r| r.id).collect();
    assert_eq!(relay_ids(&claimed), expected);
    assert_eq!(claimed[0].aggregate_id, None);
    assert_eq!(claimed[2].aggregate_id.as_deref(), Some("A"));
    _db.cleanup().await;
}

/// RLY-4: at most `limit` rows, in (`scheduled_at`, `created_at`, `id`) order; a limit of 0
/// claims nothing.
pub(crate) async fn rly_4_limit_and_order(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "rly4").await;
    let a = published_ago(message("s", "a"), 1_000);
    let b = published_ago(message("s", "b"), 3_000);
    let c = published_ago(of(message("s", "c"), "k"), 2_000);
    // Same batch and same publish time as b: the same scheduled_at and created_at, so the id
    // decides.
    let mut d = message("s", "d");
    d.schedule = b.schedule;
    store_all(&*store, &[a.clone(), b.clone(), c.clone(), d.clone()]).await;
    let (first, second) = if b.id < d.id {
        (b.id, d.id)
    } else {
        (d.id, b.id)
    };

    let s = sources(&["s"]);
    assert!(
        store
            .relay_claim(0, LONG_LEASE, &s)
            .await
            .expect("claim")
            .is_empty()
    );
    let claimed = store.relay_claim(3, LONG_LEASE, &s).await.expect("claim");
    assert_eq!(relay_ids(&claimed), vec![first, second, c.id]);
    let rest = store.relay_claim(3, LONG_LEASE, &s).await.expect("claim");
    assert_eq!(relay_ids(&rest), vec![a.id]);
    db.cleanup().await;
}

/// RLY-5: the claim writes `processing`, a new token per row, `claimed_at` and the lease from
/// the database clock, nothing else, and returns the row's columns.
pub(crate) async fn rly_5_claim_writes_token_times_and_lease(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "rly5").await;
    let layout = TableLayout::default();
    let mut full = published_ago(of(message("orders", "k-1"), "order-7"), 2_000);
    full.event_type = Some("order.created".into());
    full.payload = r#"{"order": 7, "lines": [1, 2]}"#.into();
    full.headers = r#"{"x-tenant": "acme"}"#.into();
    full.correlation_id = Some("c-9".into());
    let bare = published_ago(message("orders", "k-2"), 1_000);
    store_all(&*store, &[full.clone(), bare.clone()]).await;
    let before = db.inbox_row(&layout, full.id).await;

    let lease = Duration::from_millis(45_000);
    let claimed = store
        .relay_claim(10, lease, &sources(&["orders"]))
        .await
        .expect("claim");
    assert_eq!(relay_ids(&claimed), vec![full.id, bare.id]);
    assert_ne!(claimed[0].claim.token, claimed[1].claim.token);
    let row = &claimed[0];
    assert_eq!(row.source, "orders");
    assert_eq!(row.idempotency_key, "k-1");
    assert_eq!(row.aggregate_id.as_deref(), Some("order-7"));
    assert_eq!(row.event_type.as_deref(), Some("order.created"));
    assert_eq!(json(&row.payload), json(&full.payload));
    assert_eq!(json(&row.headers), json(&full.headers));
    assert_eq!(row.correlation_id.as_deref(), Some("c-9"));
    assert_eq!(
        (
            claimed[1].event_type.clone(),
            claimed[1].correlation_id.clone()
        ),
        (None, None)
    );

    let after = db.inbox_row(&layout, full.id).await;
    assert_eq!(after.state, "processing");
    assert_eq!(after.claim_token, Some(row.claim.token.0));
    let claimed_at = after.claimed_at.expect("claimed_at");
    assert!(before.read_at <= claimed_at && claimed_at <= after.read_at);
    let lease_us = after.lease_expires_at.expect("lease") - claimed_at;
    assert!(
        (44_990_000..=45_010_000).contains(&lease_us),
        "lease of {lease_us} µs"
    );
    let mut unchanged = after.clone();
    unchanged.state = before.state.clone();
    unchanged.claim_token = None;
    unchanged.claimed_at = None;
    unchanged.lease_expires_at = None;
    unchanged.read_at = before.read_at;
    assert_eq!(unchanged, before, "the claim wrote another column");
    db.cleanup().await;
}

/// INB-3, RLY-8: the relay never claims or reclaims a pull row, even an expired one; the
/// reclaim returns expired push rows only.
pub(crate) async fn inb_3_relay_never_touches_pull_rows(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "inb3").await;
    let layout = TableLayout::default();
    let due = pulled(message("s", "due"));
    let expired = pulled(message("s", "expired"));
    let push = message("s", "push");
    store_all(&*store, &[due.clone(), expired.clone(), push.clone()]).await;
    db.claim_by_hand(&layout, expired.id, -1_000).await;
    let before = db.inbox_row(&layout, expired.id).await;

    let s = sources(&["s"]);
    let claimed = store
        .relay_claim(10, Duration::ZERO, &s)
        .await
        .expect("claim");
    assert_eq!(relay_ids(&claimed), vec![push.id]);
    assert_eq!(store.relay_reclaim_expired().await.expect("reclaim"), 1);
    assert_eq!(db.inbox_row(&layout, push.id).await.state, "pending");

    let after = db.inbox_row(&layout, expired.id).await;
    assert_eq!(after.state, "processing");
    assert_eq!(after.claim_token, before.claim_token);
    assert_eq!(after.lease_expires_at, before.lease_expires_at);
    let pending = db.inbox_row(&layout, due.id).await;
    assert_eq!(
        (pending.state.as_str(), pending.claim_token),
        ("pending", None)
    );
    db.cleanup().await;
}
