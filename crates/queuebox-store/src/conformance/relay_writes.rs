//! The relay's fenced writes in the suite (inbox.md RLY-7..13, RLY-15, RLY-16; schema.md
//! SCH-21, SCH-40): forward with its outbox row, dead, release, renew, reclaim, and the
//! oldest-pending gauge.

use std::time::Duration;

use queuebox_core::TableLayout;
use uuid::Uuid;

use super::inbox_support::{delayed, json, message, of, published_ago, pulled, sources};
use super::{ConformanceFactory, InboxSnapshot, LONG_LEASE, inbox_migrated};
use crate::outbox::{Claim, ClaimToken};
use crate::relay::{ForwardedRow, RelayRow};
use crate::store::Store;

/// Stores `n` push rows of source `s` (each its own aggregate) and claims them with `lease`.
pub(crate) async fn relay_claimed(store: &dyn Store, n: usize, lease: Duration) -> Vec<RelayRow> {
    let rows: Vec<_> = (0..n)
        .map(|i| {
            published_ago(
                of(message("s", &format!("k{i}")), &format!("a{i}")),
                10_000 - i as i64,
            )
        })
        .collect();
    super::inbox_support::store_all(store, &rows).await;
    let claimed = store
        .relay_claim(n as u32, lease, &sources(&["s"]))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), n);
    claimed
}

fn stale(claim: Claim) -> Claim {
    Claim {
        id: claim.id,
        token: ClaimToken(Uuid::new_v4()),
    }
}

/// The outbox row of a forward, as RLY-11 would have built its headers.
fn forwarded(key: Option<&str>) -> ForwardedRow {
    ForwardedRow {
        id: Uuid::new_v4(),
        topic: "orders.created".into(),
        key: key.map(str::to_owned),
        payload: r#"{"order": 7}"#.into(),
        headers: r#"{"x-tenant": "acme", "x-inbox-id": "i", "x-source": "s"}"#.into(),
        max_attempts: 7,
    }
}

/// `after` with the columns a write is allowed to change put back from `before`.
fn same_but(before: &InboxSnapshot, after: &InboxSnapshot) -> InboxSnapshot {
    InboxSnapshot {
        state: before.state.clone(),
        processed_at: before.processed_at,
        claim_token: before.claim_token,
        lease_expires_at: before.lease_expires_at,
        last_error: before.last_error.clone(),
        read_at: before.read_at,
        ..after.clone()
    }
}

/// RLY-9/10/13, SCH-21/40: a forward inserts exactly the RLY-10 outbox row and marks the inbox
/// row `processed` with `processed_at`, token and lease cleared, in one transaction.
pub(crate) async fn rly_10_forward_inserts_the_outbox_row_and_marks_processed(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "rly10").await;
    let layout = TableLayout::default();
    let claimed = relay_claimed(&*store, 2, LONG_LEASE).await;
    let before = db.inbox_row(&layout, claimed[0].claim.id.0).await;
    let out = forwarded(Some("a0"));
    assert!(
        store
            .relay_forward(claimed[0].claim, &out)
            .await
            .expect("forward")
    );
    let after = db.inbox_row(&layout, claimed[0].claim.id.0).await;
    let row = db.outbox_row(&layout, out.id).await;

    assert_eq!(row.topic, "orders.created");
    assert_eq!(row.key.as_deref(), Some("a0"));
    assert_eq!(json(&row.payload), json(&out.payload));
    assert_eq!(json(&row.headers), json(&out.headers));
    assert_eq!(row.aggregate_type, None);
    assert_eq!(
        (row.state.as_str(), row.attempt, row.max_attempts),
        ("pending", 0, 7)
    );
    assert!(before.read_at <= row.created_at && row.created_at <= row.read_at);
    assert_eq!(
        (row.scheduled_at, row.updated_at),
        (row.created_at, row.created_at)
    );
    assert_eq!(
        (row.claimed_at, row.claim_token, row.lease_expires_at),
        (None, None, None)
    );
    assert_eq!(row.last_error, None);

    assert_eq!(after.state, "processed");
    let processed_at = after.processed_at.expect("processed_at");
    assert!(before.read_at <= processed_at && processed_at <= after.read_at);
    assert_eq!((after.claim_token, after.lease_expires_at), (None, None));
    assert_eq!(
        same_but(&before, &after),
        before,
        "the mark wrote another column"
    );

    let keyless = forwarded(None);
    assert!(
        store
            .relay_forward(claimed[1].claim, &keyless)
            .await
            .expect("forward")
    );
    assert_eq!(db.outbox_row(&layout, keyless.id).await.key, None);
    assert_eq!(db.outbox_ids(&layout).await.len(), 2);
    db.cleanup().await;
}

/// RLY-9 step 2, RLY-13: a forward whose fence fails (a stale token, an expired lease, a row
/// already forwarded) rolls the outbox insert back and answers `false`.
pub(crate) async fn rly_13_forward_with_a_lost_claim_rolls_back(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "rly13").await;
    let layout = TableLayout::default();
    let live = relay_claimed(&*store, 1, LONG_LEASE).await[0].claim;
    let before = db.inbox_row(&layout, live.id.0).await;
    assert!(
        !store
            .relay_forward(stale(live), &forwarded(None))
            .await
            .expect("forward")
    );
    assert!(
        db.outbox_ids(&layout).await.is_empty(),
        "the outbox insert was kept"
    );
    let after = db.inbox_row(&layout, live.id.0).await;
    assert_eq!(same_but(&before, &after), before);
    assert_eq!(after.state, "processing");

    assert!(
        store
            .relay_forward(live, &forwarded(None))
            .await
            .expect("forward")
    );
    assert!(
        !store
            .relay_forward(live, &forwarded(None))
            .await
            .expect("forward")
    );
    assert_eq!(db.outbox_ids(&layout).await.len(), 1, "forwarded twice");

    let rows = [published_ago(message("s", "late"), 20_000)];
    super::inbox_support::store_all(&*store, &rows).await;
    let expired = store
        .relay_claim(1, Duration::ZERO, &sources(&["s"]))
        .await
        .expect("claim");
    assert!(
        !store
            .relay_forward(expired[0].claim, &forwarded(None))
            .await
            .expect("forward")
    );
    assert_eq!(db.outbox_ids(&layout).await.len(), 1);
    db.cleanup().await;
}

/// RLY-9 step 1, SCH-21: dead under the fence writes `dead`, `last_error` (at most 2000
/// characters) and clears token and lease; a stale token writes nothing.
pub(crate) async fn rly_9_dead_writes_the_error_under_the_fence(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "rly9dead").await;
    let layout = TableLayout::default();
    let claims = relay_claimed(&*store, 2, LONG_LEASE).await;
    let (a, b) = (claims[0].claim, claims[1].claim);
    let before = db.inbox_row(&layout, a.id.0).await;
    let long = "é".repeat(2_500);
    assert!(store.relay_dead(a, &long).await.expect("dead"));
    let after = db.inbox_row(&layout, a.id.0).await;
    assert_eq!(after.state, "dead");
    assert_eq!(
        after.last_error.as_deref(),
        Some("é".repeat(2_000).as_str())
    );
    assert_eq!(
        (
            after.claim_token,
            after.lease_expires_at,
            after.processed_at
        ),
        (None, None, None)
    );
    assert_eq!(same_but(&before, &after), before);

    assert!(!store.relay_dead(stale(b), "x").await.expect("dead"));
    assert!(
        !store.relay_dead(a, "again").await.expect("dead"),
        "a dead row has no claim"
    );
    assert_eq!(db.inbox_row(&layout, b.id.0).await.state, "processing");
    db.cleanup().await;
}

/// RLY-12/15: release returns the row to `pending` under the fence, clears token and lease,
/// keeps `attempt` and `scheduled_at`; with an error it writes `last_error`, without it keeps
/// the old one. Stale claims are absent from the answer.
pub(crate) async fn rly_12_release_with_and_without_error(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "rly12").await;
    let layout = TableLayout::default();
    let claims: Vec<_> = relay_claimed(&*store, 2, LONG_LEASE)
        .await
        .iter()
        .map(|r| r.claim)
        .collect();
    let before = db.inbox_row(&layout, claims[0].id.0).await;
    let released = store
        .relay_release(&[claims[0], stale(claims[1])], Some("broker down"))
        .await
        .expect("release");
    assert_eq!(released, vec![claims[0]]);
    let after = db.inbox_row(&layout, claims[0].id.0).await;
    assert_eq!(after.state, "pending");
    assert_eq!(after.last_error.as_deref(), Some("broker down"));
    assert_eq!((after.claim_token, after.lease_expires_at), (None, None));
    assert_eq!(
        (after.attempt, after.scheduled_at),
        (before.attempt, before.scheduled_at)
    );
    assert_eq!(same_but(&before, &after), before);

    let again = store
        .relay_claim(10, LONG_LEASE, &sources(&["s"]))
        .await
        .expect("claim");
    assert_eq!(again.len(), 1);
    let mut quiet = store
        .relay_release(&[again[0].claim, claims[1]], None)
        .await
        .expect("release");
    quiet.sort_by_key(|c| c.id);
    let mut expected = vec![again[0].claim, claims[1]];
    expected.sort_by_key(|c| c.id);
    assert_eq!(quiet, expected);
    let kept = db.inbox_row(&layout, claims[0].id.0).await;
    assert_eq!(
        kept.last_error.as_deref(),
        Some("broker down"),
        "RLY-15 keeps the error"
    );
    assert_eq!(db.inbox_row(&layout, claims[1].id.0).await.last_error, None);
    assert!(
        store
            .relay_release(&[], None)
            .await
            .expect("release")
            .is_empty()
    );
    db.cleanup().await;
}

/// RLY-7: a renewal extends the lease under the fence; a stale token or an expired lease renews
/// nothing.
pub(crate) async fn rly_7_renew_extends_the_lease_and_stale_renews_nothing(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "rly7").await;
    let layout = TableLayout::default();
    let claims = relay_claimed(&*store, 2, Duration::from_secs(5)).await;
    let (a, b) = (claims[0].claim, claims[1].claim);
    let before = db.inbox_row(&layout, a.id.0).await;
    let renewed = store
        .relay_renew(&[a, stale(b)], LONG_LEASE)
        .await
        .expect("renew");
    assert_eq!(renewed, vec![a]);
    let after = db.inbox_row(&layout, a.id.0).await;
    let lease = after.lease_expires_at.expect("lease");
    assert!(lease >= before.read_at + 59_000_000 && lease <= after.read_at + 60_000_000);
    let unchanged = InboxSnapshot {
        lease_expires_at: before.lease_expires_at,
        read_at: before.read_at,
        ..after.clone()
    };
    assert_eq!(unchanged, before, "a renewal writes only the lease");

    let rows = [published_ago(message("s", "expired"), 20_000)];
    super::inbox_support::store_all(&*store, &rows).await;
    let expired = store
        .relay_claim(1, Duration::ZERO, &sources(&["s"]))
        .await
        .expect("claim");
    assert!(
        store
            .relay_renew(&[expired[0].claim], LONG_LEASE)
            .await
            .expect("renew")
            .is_empty()
    );
    assert!(
        store
            .relay_renew(&[], LONG_LEASE)
            .await
            .expect("renew")
            .is_empty()
    );
    db.cleanup().await;
}

/// RLY-8: the reclaim returns expired push rows to `pending`, clears token and lease, keeps
/// `attempt`, `scheduled_at` and `last_error`, and leaves live leases alone.
pub(crate) async fn rly_8_reclaim_returns_only_expired_rows(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "rly8").await;
    let layout = TableLayout::default();
    let live = relay_claimed(&*store, 1, LONG_LEASE).await[0].claim;
    let rows = [published_ago(of(message("s", "x"), "x"), 20_000)];
    super::inbox_support::store_all(&*store, &rows).await;
    let expired = store
        .relay_claim(1, Duration::ZERO, &sources(&["s"]))
        .await
        .expect("claim")[0]
        .claim;
    let before = db.inbox_row(&layout, expired.id.0).await;
    assert_eq!(store.relay_reclaim_expired().await.expect("reclaim"), 1);
    let after = db.inbox_row(&layout, expired.id.0).await;
    assert_eq!(after.state, "pending");
    assert_eq!((after.claim_token, after.lease_expires_at), (None, None));
    assert_eq!(same_but(&before, &after), before);
    assert_eq!(db.inbox_row(&layout, live.id.0).await.state, "processing");
    assert_eq!(store.relay_reclaim_expired().await.expect("reclaim"), 0);
    assert!(
        !store
            .relay_forward(expired, &forwarded(None))
            .await
            .expect("forward")
    );
    db.cleanup().await;
}

/// RLY-16: the age of the oldest due pending row (push or pull) by the database clock; 0 with
/// none, and rows not yet due or no longer pending do not count.
pub(crate) async fn rly_16_oldest_pending_age(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "rly16").await;
    assert_eq!(age(&*store).await, 0.0);
    let future = delayed(message("s", "future"), 3_600_000);
    super::inbox_support::store_all(&*store, std::slice::from_ref(&future)).await;
    assert_eq!(age(&*store).await, 0.0, "a row that is not due yet");

    let forwarded_row = published_ago(message("s", "done"), 60_000);
    let pull = pulled(published_ago(message("p", "pull"), 10_000));
    let push = published_ago(message("s", "push"), 5_000);
    super::inbox_support::store_all(&*store, &[forwarded_row, pull, push]).await;
    let claimed = store
        .relay_claim(1, LONG_LEASE, &sources(&["s"]))
        .await
        .expect("claim");
    assert!(
        store
            .relay_forward(claimed[0].claim, &forwarded(None))
            .await
            .expect("forward")
    );
    let seconds = age(&*store).await;
    assert!(
        (10.0..15.0).contains(&seconds),
        "oldest due pull row: {seconds} s"
    );
    db.cleanup().await;
}

async fn age(store: &dyn Store) -> f64 {
    store.inbox_oldest_pending_age().await.expect("gauge")
}
