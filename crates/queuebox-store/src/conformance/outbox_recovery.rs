//! Release, reclaim and the pending gauges in the suite (outbox.md OUT-46/47, OUT-58/59, the
//! MET pending gauges): rows go back to pending with attempt, scheduled_at and last_error kept.

use std::time::Duration;

use queuebox_core::TableLayout;

use super::outbox_writes::{claimed_rows, left_processing, stale};
use super::{ConformanceFactory, LONG_LEASE, NewOutboxRow, OutboxSnapshot, ids_of, migrated};
use crate::outbox::{PendingStats, TerminalWrite};

/// Claims the one row of `id` after a retry that set attempt 1 and `last_error` "e1", so the
/// checks can see that those survive.
async fn claimed_after_a_retry(
    store: &dyn crate::outbox::OutboxStore,
    id: uuid::Uuid,
    lease: Duration,
) -> crate::outbox::Claim {
    let first = store.claim(1, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&first), vec![id]);
    let retry = TerminalWrite::Retry {
        claim: first[0].claim,
        attempt: 1,
        delay: Duration::ZERO,
        error: "e1".into(),
    };
    assert_eq!(store.finish(&[retry]).await.expect("finish").len(), 1);
    let second = store.claim(1, lease).await.expect("claim");
    assert_eq!(ids_of(&second), vec![id]);
    second[0].claim
}

/// OUT-58 step 2 / OUT-59: a release returns unstarted rows to pending under the fence, with
/// attempt, scheduled_at, last_error and claimed_at unchanged.
pub(crate) async fn out_58_release_keeps_attempt_schedule_and_error(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out58").await;
    let layout = TableLayout::default();
    let row = NewOutboxRow::new("t");
    db.insert_outbox(&layout, std::slice::from_ref(&row)).await;
    let claim = claimed_after_a_retry(&*store, row.id, LONG_LEASE).await;
    let other = claimed_rows(&*db, &*store, 1, LONG_LEASE).await[0];
    let before = db.outbox_row(&layout, claim.id.0).await;

    let released = store
        .release(&[claim, stale(other)])
        .await
        .expect("release");
    assert_eq!(released, vec![claim]);
    let after = db.outbox_row(&layout, claim.id.0).await;
    assert_eq!(after, left_processing(&before, &after, "pending"));
    assert_eq!(
        (after.attempt, after.last_error.as_deref()),
        (1, Some("e1"))
    );
    assert_eq!(db.outbox_row(&layout, other.id.0).await.state, "processing");

    let again = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&again), vec![row.id], "a released row is claimable");

    let expired = claimed_rows(&*db, &*store, 1, Duration::ZERO).await;
    assert!(store.release(&expired).await.expect("release").is_empty());
    assert!(store.release(&[]).await.expect("release").is_empty());
    db.cleanup().await;
}

/// OUT-46/47: the reclaim returns exactly the expired processing rows to pending, keeps
/// attempt, scheduled_at and last_error, fences out the old owner, and the row is the head
/// again for the next claim.
pub(crate) async fn out_46_reclaim_returns_only_expired_rows(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out46").await;
    let layout = TableLayout::default();
    let expired_row = NewOutboxRow::new("t").key("k");
    db.insert_outbox(&layout, std::slice::from_ref(&expired_row))
        .await;
    let old_claim = claimed_after_a_retry(&*store, expired_row.id, Duration::ZERO).await;
    let live = claimed_rows(&*db, &*store, 1, LONG_LEASE).await[0];
    let behind = NewOutboxRow::new("t").key("k");
    let future = NewOutboxRow::new("t").scheduled_in_ms(3_600_000);
    db.insert_outbox(&layout, &[behind.clone(), future]).await;
    let before = db.outbox_row(&layout, expired_row.id).await;
    let live_before = db.outbox_row(&layout, live.id.0).await;

    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 1);
    let after = db.outbox_row(&layout, expired_row.id).await;
    assert_eq!(after, left_processing(&before, &after, "pending"));
    assert_eq!(
        (after.attempt, after.last_error.as_deref()),
        (1, Some("e1"))
    );
    let live_after = db.outbox_row(&layout, live.id.0).await;
    assert_eq!(
        OutboxSnapshot {
            read_at: live_before.read_at,
            ..live_after
        },
        live_before,
        "a live lease was reclaimed"
    );
    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 0);

    let late = TerminalWrite::Sent { claim: old_claim };
    assert!(store.finish(&[late]).await.expect("finish").is_empty());
    let next = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(
        ids_of(&next),
        vec![expired_row.id],
        "still the head of its key"
    );
    assert_eq!(next[0].attempt, 1);
    assert_eq!(next[0].sequence, before.sequence);
    db.cleanup().await;
}

/// The pending gauges: pending rows of any schedule count; the age is that of the oldest due
/// pending row by the database clock, 0 when none is due.
pub(crate) async fn out_62_pending_stats_count_and_age(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out62").await;
    let layout = TableLayout::default();
    assert_eq!(
        store.pending_stats().await.expect("stats"),
        PendingStats::default()
    );
    let processing = NewOutboxRow::new("t").scheduled_in_ms(-60_000);
    let old = NewOutboxRow::new("t").scheduled_in_ms(-5_000);
    let young = NewOutboxRow::new("t").scheduled_in_ms(-1_000);
    let future = NewOutboxRow::new("t").scheduled_in_ms(3_600_000);
    db.insert_outbox(&layout, &[processing.clone(), old, young, future])
        .await;
    let claimed = store.claim(1, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&claimed), vec![processing.id]);

    let stats = store.pending_stats().await.expect("stats");
    assert_eq!(stats.pending, 3);
    assert!(
        (5.0..15.0).contains(&stats.oldest_due_age_seconds),
        "age {}",
        stats.oldest_due_age_seconds
    );

    assert_eq!(store.claim(10, LONG_LEASE).await.expect("claim").len(), 2);
    let only_future = store.pending_stats().await.expect("stats");
    assert_eq!(only_future.pending, 1);
    assert_eq!(only_future.oldest_due_age_seconds, 0.0);
    db.cleanup().await;
}
