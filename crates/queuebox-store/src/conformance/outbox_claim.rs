//! The claim checks of the suite (outbox.md OUT-11..16, OUT-35, OUT-37): which rows a claim
//! takes, in which order, and what it writes.

use std::time::Duration;

use queuebox_core::TableLayout;

use super::{ConformanceFactory, LONG_LEASE, NewOutboxRow, ids_of, migrated};
use crate::operator::OutboxFilter;
use crate::outbox::{Claim, TerminalWrite};

const HOUR_MS: i64 = 3_600_000;

/// OUT-11: a claim takes pending, due rows only: never a processing, sent or future row.
pub(crate) async fn out_11_claim_takes_only_due_pending_rows(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out11due").await;
    let layout = TableLayout::default();
    let a = NewOutboxRow::new("t");
    let b = NewOutboxRow::new("t");
    let future = NewOutboxRow::new("t").scheduled_in_ms(HOUR_MS);
    db.insert_outbox(&layout, &[a.clone(), b.clone(), future.clone()])
        .await;

    let first = store.claim(1, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&first), vec![a.id]);
    let written = store
        .finish(&[TerminalWrite::Sent {
            claim: first[0].claim,
        }])
        .await
        .expect("finish");
    assert_eq!(written, vec![first[0].claim]);

    let second = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&second), vec![b.id], "neither sent nor future rows");
    let third = store.claim(10, LONG_LEASE).await.expect("claim");
    assert!(third.is_empty(), "a processing row was claimed again");
    db.cleanup().await;
}

/// OUT-11 (due): a row whose `scheduled_at` is in the future stays pending until it is due.
pub(crate) async fn out_11_future_scheduled_at_is_not_claimed(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out11fut").await;
    let layout = TableLayout::default();
    let soon = NewOutboxRow::new("t").scheduled_in_ms(2_000);
    let later = NewOutboxRow::new("t").key("k").scheduled_in_ms(HOUR_MS);
    db.insert_outbox(&layout, &[soon.clone(), later.clone()])
        .await;
    assert!(store.claim(10, LONG_LEASE).await.expect("claim").is_empty());
    for id in [soon.id, later.id] {
        let row = db.outbox_row(&layout, id).await;
        assert_eq!(row.state, "pending");
        assert_eq!(row.claim_token, None);
        assert_eq!(row.claimed_at, None);
    }
    db.cleanup().await;
}

/// OUT-12/37: rows with no key (NULL or empty) are claimed several in one claim, and come
/// back with `key` None.
pub(crate) async fn out_12_keyless_rows_several_per_claim(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out12").await;
    let layout = TableLayout::default();
    let rows = vec![
        NewOutboxRow::new("t"),
        NewOutboxRow::new("t").key(""),
        NewOutboxRow::new("t"),
        NewOutboxRow::new("t").key(""),
    ];
    db.insert_outbox(&layout, &rows).await;
    let claimed = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(
        ids_of(&claimed),
        rows.iter().map(|r| r.id).collect::<Vec<_>>()
    );
    assert!(claimed.iter().all(|r| r.key.is_none()), "{claimed:?}");
    db.cleanup().await;
}

/// OUT-13/15: one claim takes at most one row per key: the head row.
pub(crate) async fn out_13_one_row_per_key_per_claim(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out13one").await;
    let layout = TableLayout::default();
    let a1 = NewOutboxRow::new("t").key("a");
    let a2 = NewOutboxRow::new("t").key("a");
    let b1 = NewOutboxRow::new("t").key("b");
    let a3 = NewOutboxRow::new("t").key("a");
    let b2 = NewOutboxRow::new("t").key("b");
    db.insert_outbox(&layout, &[a1.clone(), a2, b1.clone(), a3, b2])
        .await;
    let claimed = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&claimed), vec![a1.id, b1.id]);
    assert_eq!(claimed[0].key.as_deref(), Some("a"));
    let again = store.claim(10, LONG_LEASE).await.expect("claim");
    assert!(
        again.is_empty(),
        "a processing head must hold its key: {again:?}"
    );
    db.cleanup().await;
}

/// OUT-13: a pending head with a future `scheduled_at` (inserted so, or waiting for a retry)
/// holds back the due rows of its key.
pub(crate) async fn out_13_future_head_blocks_its_key(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out13fut").await;
    let layout = TableLayout::default();
    let head = NewOutboxRow::new("t").key("a").scheduled_in_ms(HOUR_MS);
    let due = NewOutboxRow::new("t").key("a");
    let other = NewOutboxRow::new("t").key("b");
    let retried = NewOutboxRow::new("t").key("c");
    let behind_retry = NewOutboxRow::new("t").key("c");
    db.insert_outbox(
        &layout,
        &[
            head,
            due,
            other.clone(),
            retried.clone(),
            behind_retry.clone(),
        ],
    )
    .await;
    let claimed = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&claimed), vec![other.id, retried.id]);

    let retry = TerminalWrite::Retry {
        claim: claimed[1].claim,
        attempt: 1,
        delay: Duration::from_secs(3_600),
        error: "failed".into(),
    };
    assert_eq!(
        store.finish(&[retry]).await.expect("finish"),
        vec![claimed[1].claim]
    );
    let next = store.claim(10, LONG_LEASE).await.expect("claim");
    assert!(
        next.is_empty(),
        "a head waiting for its retry must hold its key: {next:?}"
    );
    assert_eq!(
        db.outbox_row(&layout, behind_retry.id).await.state,
        "pending"
    );
    db.cleanup().await;
}

/// OUT-13 rule 3: a processing row blocks its key even against a lower-sequence pending row
/// (one that a replay put back, OUT-39); once it ends, the replayed row goes first.
pub(crate) async fn out_13_processing_row_blocks_its_key(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out13proc").await;
    let layout = TableLayout::default();
    let first = NewOutboxRow::new("t").key("a");
    let second = NewOutboxRow::new("t").key("a");
    let third = NewOutboxRow::new("t").key("a");
    db.insert_outbox(&layout, &[first.clone(), second.clone(), third.clone()])
        .await;

    let c1 = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&c1), vec![first.id]);
    store
        .finish(&[TerminalWrite::Sent { claim: c1[0].claim }])
        .await
        .expect("finish");
    let c2 = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&c2), vec![second.id]);

    let replay = OutboxFilter {
        ids: Some(vec![first.id]),
        ..OutboxFilter::default()
    };
    assert_eq!(store.replay_outbox(&replay, None).await.expect("replay"), 1);
    let blocked = store.claim(10, LONG_LEASE).await.expect("claim");
    assert!(
        blocked.is_empty(),
        "a processing row must block its key: {blocked:?}"
    );

    store
        .finish(&[TerminalWrite::Sent { claim: c2[0].claim }])
        .await
        .expect("finish");
    let c3 = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&c3), vec![first.id], "the replayed row is the head");
    db.cleanup().await;
}

/// OUT-35: a dead head releases its key; the next row of the key becomes claimable.
pub(crate) async fn out_35_dead_head_releases_its_key(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out35").await;
    let layout = TableLayout::default();
    let head = NewOutboxRow::new("t").key("a");
    let next = NewOutboxRow::new("t").key("a");
    db.insert_outbox(&layout, &[head.clone(), next.clone()])
        .await;
    let c1 = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&c1), vec![head.id]);
    let dead = TerminalWrite::Dead {
        claim: c1[0].claim,
        attempt: 0,
        error: "No route matches topic 't'.".into(),
    };
    assert_eq!(
        store.finish(&[dead]).await.expect("finish"),
        vec![c1[0].claim]
    );
    let c2 = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&c2), vec![next.id]);
    db.cleanup().await;
}

/// OUT-13/15 with a backlog of one key at the front (issue 16 item 4): the rows behind it that
/// are eligible, keyless (NULL and empty) and the heads of other keys, are still claimed in
/// claim order, and the backlog gives one row per claim. A small limit puts the other rows
/// beyond the first rows in claim order that a store may read first (PostgreSQL reads
/// `limit * 4`), so this also checks what a store finds past them.
pub(crate) async fn out_13_a_backlog_of_one_key_hides_no_row_behind_it(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out13hot").await;
    let layout = TableLayout::default();
    let hot: Vec<NewOutboxRow> = (0..30).map(|_| NewOutboxRow::new("t").key("h")).collect();
    db.insert_outbox(&layout, &hot).await;
    let keyless = NewOutboxRow::new("t");
    let empty = NewOutboxRow::new("t").key("");
    let b1 = NewOutboxRow::new("t").key("b");
    let b2 = NewOutboxRow::new("t").key("b");
    let late_head = NewOutboxRow::new("t").key("c").scheduled_in_ms(HOUR_MS);
    let behind_late = NewOutboxRow::new("t").key("c");
    db.insert_outbox(
        &layout,
        &[
            keyless.clone(),
            empty.clone(),
            b1.clone(),
            b2.clone(),
            late_head,
            behind_late.clone(),
        ],
    )
    .await;

    let first = store.claim(3, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&first), vec![hot[0].id, keyless.id, empty.id]);
    let second = store.claim(3, LONG_LEASE).await.expect("claim");
    assert_eq!(
        ids_of(&second),
        vec![b1.id],
        "the head of b beyond the backlog; not b2, not c's rows behind a future head"
    );
    assert!(store.claim(3, LONG_LEASE).await.expect("claim").is_empty());
    assert_eq!(
        db.outbox_row(&layout, behind_late.id).await.state,
        "pending"
    );
    db.cleanup().await;
}

/// OUT-13: one key's backlog drains strictly in insert order, one row per claim, each claim
/// taking the next row as soon as the previous one is `sent`.
pub(crate) async fn out_13_one_key_backlog_drains_in_order(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out13drain").await;
    let layout = TableLayout::default();
    let rows: Vec<NewOutboxRow> = (0..25).map(|_| NewOutboxRow::new("t").key("h")).collect();
    db.insert_outbox(&layout, &rows).await;
    let mut order = Vec::new();
    for _ in 0..rows.len() {
        let claimed = store.claim(2, LONG_LEASE).await.expect("claim");
        assert_eq!(
            claimed.len(),
            1,
            "one row of the key at a time: {claimed:?}"
        );
        assert!(store.claim(2, LONG_LEASE).await.expect("claim").is_empty());
        order.push(claimed[0].claim.id.0);
        let sent = TerminalWrite::Sent {
            claim: claimed[0].claim,
        };
        assert_eq!(store.finish(&[sent]).await.expect("finish").len(), 1);
    }
    assert_eq!(order, rows.iter().map(|r| r.id).collect::<Vec<_>>());
    assert!(store.claim(2, LONG_LEASE).await.expect("claim").is_empty());
    db.cleanup().await;
}

/// OUT-15: the limit holds, and rows go in `scheduled_at`, then `sequence` order.
pub(crate) async fn out_15_limit_and_order(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out15").await;
    let layout = TableLayout::default();
    let a = NewOutboxRow::new("t").scheduled_in_ms(-1_000);
    let b = NewOutboxRow::new("t").scheduled_in_ms(-3_000);
    let c = NewOutboxRow::new("t").key("k").scheduled_in_ms(-2_000);
    let d = NewOutboxRow::new("t").scheduled_in_ms(-3_000);
    db.insert_outbox(&layout, &[a.clone(), b.clone(), c.clone(), d.clone()])
        .await;
    let first = store.claim(3, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&first), vec![b.id, d.id, c.id]);
    let rest = store.claim(3, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&rest), vec![a.id]);
    assert!(store.claim(0, LONG_LEASE).await.expect("claim").is_empty());
    db.cleanup().await;
}

/// OUT-16: the claim writes state, a new token per row, `claimed_at`, the lease and
/// `updated_at` from the database clock, and returns the row's columns.
pub(crate) async fn out_16_claim_writes_token_times_and_lease(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out16").await;
    let layout = TableLayout::default();
    let mut first = NewOutboxRow::new("order.created").key("o-1");
    first.payload = r#"{"order": 7, "lines": [1, 2]}"#.into();
    first.headers = r#"{"X-Correlation-Id": "c-9"}"#.into();
    first.aggregate_type = Some("order".into());
    first.max_attempts = 3;
    let second = NewOutboxRow::new("t");
    db.insert_outbox(&layout, &[first.clone(), second.clone()])
        .await;
    let before = db.outbox_row(&layout, first.id).await;

    let lease = Duration::from_millis(45_000);
    let claimed = store.claim(10, lease).await.expect("claim");
    assert_eq!(ids_of(&claimed), vec![first.id, second.id]);
    assert_ne!(claimed[0].claim.token, claimed[1].claim.token);

    let row = &claimed[0];
    assert_eq!(row.topic, "order.created");
    assert_eq!(row.key.as_deref(), Some("o-1"));
    let json = |text: &str| serde_json::from_str::<serde_json::Value>(text).expect("JSON");
    assert_eq!(json(&row.payload), json(&first.payload));
    assert_eq!(json(&row.headers), json(&first.headers));
    assert_eq!(row.aggregate_type.as_deref(), Some("order"));
    assert_eq!((row.attempt, row.max_attempts), (0, 3));
    assert_eq!(row.sequence, before.sequence);

    let after = db.outbox_row(&layout, first.id).await;
    assert_eq!(after.state, "processing");
    assert_eq!(after.claim_token, Some(row.claim.token.0));
    let claimed_at = after.claimed_at.expect("claimed_at");
    assert!(before.read_at <= claimed_at && claimed_at <= after.read_at);
    assert!(before.read_at <= after.updated_at && after.updated_at <= after.read_at);
    let lease_end = after.lease_expires_at.expect("lease");
    let lease_us = lease_end - claimed_at;
    assert!(
        (44_990_000..=45_010_000).contains(&lease_us),
        "lease of {lease_us} µs"
    );
    let mut unchanged = after.clone();
    unchanged.state = before.state.clone();
    unchanged.claim_token = None;
    unchanged.claimed_at = None;
    unchanged.lease_expires_at = None;
    unchanged.updated_at = before.updated_at;
    unchanged.read_at = before.read_at;
    assert_eq!(unchanged, before, "the claim wrote another column");
    db.cleanup().await;
}

/// The claim of `row` as the claim returned it, for the fence checks.
pub(crate) fn claim_of(rows: &[crate::outbox::ClaimedRow], id: uuid::Uuid) -> Claim {
    rows.iter()
        .find(|r| r.claim.id.0 == id)
        .map(|r| r.claim)
        .unwrap_or_else(|| panic!("{id} was not claimed: {rows:?}"))
}
