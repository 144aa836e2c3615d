//! The relay's claim and reclaim beside a row that another session holds (inbox.md RLY-3,
//! RLY-8; issue 17 defects 1 and 2): a held head row holds its aggregate back instead of letting
//! the row behind it go first, and no relay statement waits for a row another session holds.

use std::time::Duration;

use queuebox_core::TableLayout;

use super::inbox_support::{message, of, published_ago, relay_ids, sources, store_all};
use super::{ConformanceFactory, LONG_LEASE, inbox_migrated};

/// Longer than any claim on an idle test database, far shorter than a lock wait that never ends.
const NO_WAIT: Duration = Duration::from_secs(3);

/// RLY-3: with the head of aggregate A held by another session (an operator's `SELECT … FOR
/// UPDATE`, a stalled replica's open transaction), a claim takes nothing of A (not its second
/// row) and still takes other aggregates; once the session ends, A leaves head first.
pub(crate) async fn rly_3_a_held_head_row_holds_back_its_aggregate(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "rly3held").await;
    let layout = TableLayout::default();
    let a1 = published_ago(of(message("s", "a1"), "A"), 9_000);
    let a2 = published_ago(of(message("s", "a2"), "A"), 8_000);
    let a3 = published_ago(of(message("s", "a3"), "A"), 7_000);
    let b1 = published_ago(of(message("s", "b1"), "B"), 6_000);
    store_all(&*store, &[a1.clone(), a2.clone(), a3.clone(), b1.clone()]).await;
    // Writes the state it already has: the row stays pending but is held by the session.
    let holder = db.change_inbox_state_uncommitted(a1.id, "pending").await;

    let s = sources(&["s"]);
    let claimed = tokio::time::timeout(NO_WAIT, store.relay_claim(10, LONG_LEASE, &s))
        .await
        .expect("a relay claim never waits for a row another session holds")
        .expect("claim");
    assert_eq!(
        relay_ids(&claimed),
        vec![b1.id],
        "the row behind a held head must not go first (a1 {}, a2 {}, a3 {})",
        a1.id,
        a2.id,
        a3.id
    );
    for id in [a1.id, a2.id, a3.id] {
        assert_eq!(db.inbox_row(&layout, id).await.state, "pending");
    }

    holder.commit().await;
    let next = store.relay_claim(10, LONG_LEASE, &s).await.expect("claim");
    assert_eq!(relay_ids(&next), vec![a1.id], "the head leaves first");
    db.cleanup().await;
}

/// RLY-8: the reclaim of expired leases skips a row another session holds (a stalled
/// replica's forward transaction) instead of waiting for it, and reclaims it once it is free.
pub(crate) async fn rly_8_reclaim_never_waits_for_a_row_another_session_holds(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "rly8held").await;
    let layout = TableLayout::default();
    let held = published_ago(of(message("s", "held"), "H"), 9_000);
    let free = published_ago(of(message("s", "free"), "F"), 8_000);
    store_all(&*store, &[held.clone(), free.clone()]).await;
    let s = sources(&["s"]);
    let expired = store
        .relay_claim(10, Duration::ZERO, &s)
        .await
        .expect("claim");
    assert_eq!(relay_ids(&expired), vec![held.id, free.id]);
    let holder = db
        .change_inbox_state_uncommitted(held.id, "processing")
        .await;

    let reclaimed = tokio::time::timeout(NO_WAIT, store.relay_reclaim_expired())
        .await
        .expect("the reclaim never waits for a row another session holds")
        .expect("reclaim");
    assert_eq!(reclaimed, 1, "only the row nobody holds");
    assert_eq!(db.inbox_row(&layout, free.id).await.state, "pending");

    holder.commit().await;
    assert_eq!(store.relay_reclaim_expired().await.expect("reclaim"), 1);
    assert_eq!(db.inbox_row(&layout, held.id).await.state, "pending");
    db.cleanup().await;
}
