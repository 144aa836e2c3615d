//! The kind of a store failure (`StoreError::kind`) as the engine sees it: a lock wait past the
//! store's limit is transient and the same call succeeds once the lock is gone; a database
//! nobody answers for is an outage.

use std::time::Duration;

use queuebox_core::TableLayout;

use super::{ConformanceFactory, LONG_LEASE, NewOutboxRow, migrated};
use crate::error::{StoreAction, StoreErrorKind};

/// A claim that waits for a lock another transaction holds gives up after the store's lock
/// wait with a transient error, writes nothing, and succeeds once the lock is released.
pub(crate) async fn a_lock_wait_past_the_limit_is_transient(factory: &dyn ConformanceFactory) {
    let (db, _) = migrated(factory, "locktransient").await;
    let layout = TableLayout::default();
    let store = db.store_with_short_lock_wait(layout.clone()).await;
    let row = NewOutboxRow::new("t");
    db.insert_outbox(&layout, std::slice::from_ref(&row)).await;
    let lock = db.lock_outbox().await;
    let err = tokio::time::timeout(Duration::from_secs(10), store.claim(10, LONG_LEASE))
        .await
        .expect("the claim gives up waiting")
        .expect_err("the outbox is locked");
    assert_eq!(err.kind(), StoreErrorKind::Transient, "{err}");
    lock.commit().await;
    assert_eq!(db.outbox_row(&layout, row.id).await.state, "pending");
    let claimed = store
        .claim(10, LONG_LEASE)
        .await
        .expect("claim after the lock");
    assert_eq!(claimed.len(), 1);
    db.cleanup().await;
}

/// Opening a store on a database nobody answers for fails at connect, as an outage.
pub(crate) async fn an_unreachable_database_is_an_outage(factory: &dyn ConformanceFactory) {
    let db = factory.fresh("outage").await;
    let err = db.unreachable_store_error().await;
    assert_eq!(err.kind(), StoreErrorKind::Outage, "{err}");
    assert_eq!(err.action(), StoreAction::Connect);
    db.cleanup().await;
}
