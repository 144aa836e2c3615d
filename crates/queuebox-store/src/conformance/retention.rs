//! The retention checks of the suite (operations.md RET-2..6, RET-11; inbox.md INB-52): each
//! rule deletes only rows of the eligible states, oldest first, at most a batch per call, and
//! a deleted inbox row no longer deduplicates.

use std::time::Duration;

use queuebox_core::TableLayout;
use uuid::Uuid;

use super::inbox_support::{delayed, message, of, pulled, relay_claim_of, sources, store_all};
use super::outbox_claim::claim_of;
use super::{ConformanceDatabase, ConformanceFactory, LONG_LEASE, NewOutboxRow, inbox_migrated};
use crate::intake::InsertOutcome;
use crate::outbox::TerminalWrite;
use crate::relay::ForwardedRow;
use crate::retention::RetentionRule;
use crate::store::Store;

const MINUTE_MS: i64 = 60_000;
const HOUR: Duration = Duration::from_secs(3_600);

/// How an outbox row of a retention check ends up.
#[derive(Clone, Copy)]
enum End {
    Sent,
    Dead,
    Pending,
    Processing,
}

/// Inserts one outbox row per entry, brings each to its end state through the outbox store,
/// then moves its times `minutes` into the past. Returns the ids in entry order.
async fn outbox_rows(db: &dyn ConformanceDatabase, rows: &[(End, i64)]) -> Vec<Uuid> {
    let layout = TableLayout::default();
    let outbox = db.store(layout.clone()).await;
    let new: Vec<_> = rows.iter().map(|_| NewOutboxRow::new("t")).collect();
    db.insert_outbox(&layout, &new).await;
    let claimed = outbox
        .claim(rows.len() as u32, LONG_LEASE)
        .await
        .expect("claim");
    let mut writes = Vec::new();
    let mut releases = Vec::new();
    for (row, (end, _)) in new.iter().zip(rows) {
        let claim = claim_of(&claimed, row.id);
        match end {
            End::Sent => writes.push(TerminalWrite::Sent { claim }),
            End::Dead => writes.push(TerminalWrite::Dead {
                claim,
                attempt: 0,
                error: "no route".into(),
            }),
            End::Pending => releases.push(claim),
            End::Processing => {}
        }
    }
    assert_eq!(
        outbox.finish(&writes).await.expect("finish").len(),
        writes.len()
    );
    assert_eq!(
        outbox.release(&releases).await.expect("release").len(),
        releases.len()
    );
    for (row, (_, minutes)) in new.iter().zip(rows) {
        db.backdate_outbox(&layout, row.id, minutes * MINUTE_MS)
            .await;
    }
    new.iter().map(|r| r.id).collect()
}

async fn delete(store: &dyn Store, rule: RetentionRule, batch: u32) -> u64 {
    store
        .retention_delete(rule, batch)
        .await
        .expect("retention")
}

fn sorted(mut ids: Vec<Uuid>) -> Vec<Uuid> {
    ids.sort();
    ids
}

/// RET-2..4, RET-6: the outbox age rule deletes `sent` and `dead` rows whose `updated_at` is
/// older than the age, oldest first, at most `batch` per call; never `pending`/`processing`.
pub(crate) async fn ret_4_outbox_age_deletes_only_old_sent_and_dead(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "ret4out").await;
    let layout = TableLayout::default();
    let ids = outbox_rows(
        &*db,
        &[
            (End::Sent, 123),
            (End::Dead, 122),
            (End::Sent, 121),
            (End::Pending, 180),
            (End::Processing, 180),
            (End::Sent, 0),
        ],
    )
    .await;
    let rule = RetentionRule::OutboxOlderThan(HOUR);
    assert_eq!(delete(&*store, rule, 0).await, 0);
    assert_eq!(delete(&*store, rule, 2).await, 2);
    assert_eq!(
        db.outbox_ids(&layout).await,
        sorted(ids[2..].to_vec()),
        "oldest first"
    );
    assert_eq!(delete(&*store, rule, 2).await, 1);
    assert_eq!(delete(&*store, rule, 2).await, 0);
    assert_eq!(db.outbox_ids(&layout).await, sorted(ids[3..].to_vec()));
    db.cleanup().await;
}

/// RET-5, RET-6: the count rule keeps the newest `n` `sent` rows and, separately, the newest
/// `n` `dead` rows, deleting the rest oldest first, at most `batch` per call.
pub(crate) async fn ret_5_outbox_count_keeps_the_newest_per_state(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "ret5").await;
    let layout = TableLayout::default();
    let ids = outbox_rows(
        &*db,
        &[
            (End::Sent, 40),
            (End::Dead, 35),
            (End::Sent, 30),
            (End::Dead, 25),
            (End::Sent, 20),
            (End::Dead, 15),
            (End::Sent, 10),
            (End::Pending, 50),
            (End::Processing, 50),
        ],
    )
    .await;
    let rule = RetentionRule::OutboxKeepNewest(2);
    assert_eq!(delete(&*store, rule, 2).await, 2);
    assert_eq!(
        db.outbox_ids(&layout).await,
        sorted(ids[2..].to_vec()),
        "oldest first"
    );
    assert_eq!(delete(&*store, rule, 2).await, 1);
    assert_eq!(delete(&*store, rule, 2).await, 0);
    assert_eq!(db.outbox_ids(&layout).await, sorted(ids[3..].to_vec()));
    let large = RetentionRule::OutboxKeepNewest(100);
    assert_eq!(delete(&*store, large, 10).await, 0);
    db.cleanup().await;
}

/// Forwards the claimed row of `id`.
async fn forward(store: &dyn Store, claimed: &[crate::relay::RelayRow], id: Uuid) {
    let row = ForwardedRow {
        id: Uuid::new_v4(),
        topic: "t".into(),
        key: None,
        payload: "{}".into(),
        headers: "{}".into(),
        max_attempts: 5,
    };
    let claim = relay_claim_of(claimed, id);
    assert!(store.relay_forward(claim, &row).await.expect("forward"));
}

/// RET-2..4, RET-6: the inbox age rule deletes `processed` and `dead` rows whose `created_at`
/// is older than the age, oldest first, at most `batch` per call; never a pending or
/// processing row, push or pull.
pub(crate) async fn ret_4_inbox_age_deletes_only_old_processed_and_dead(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "ret4in").await;
    let layout = TableLayout::default();
    let processed = of(message("s", "processed"), "a");
    let dead = of(message("s", "dead"), "b");
    let processing = of(message("s", "processing"), "c");
    let fresh = of(message("s", "fresh"), "d");
    let pending = delayed(message("s", "pending"), 3_600_000);
    let pull = pulled(message("s", "pull"));
    let rows = [processed, dead, processing, fresh, pending, pull];
    store_all(&*store, &rows).await;
    let claimed = store
        .relay_claim(10, LONG_LEASE, &sources(&["s"]))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 4);
    forward(&*store, &claimed, rows[0].id).await;
    forward(&*store, &claimed, rows[3].id).await;
    let dead_claim = relay_claim_of(&claimed, rows[1].id);
    assert!(
        store
            .relay_dead(dead_claim, "bad topic")
            .await
            .expect("dead")
    );
    for (row, minutes) in rows.iter().zip([122, 121, 180, 0, 180, 180]) {
        db.backdate_inbox(&layout, row.id, minutes * MINUTE_MS)
            .await;
    }
    let ids: Vec<_> = rows.iter().map(|r| r.id).collect();

    let rule = RetentionRule::InboxOlderThan(HOUR);
    assert_eq!(delete(&*store, rule, 1).await, 1);
    assert_eq!(
        db.inbox_ids(&layout).await,
        sorted(ids[1..].to_vec()),
        "oldest first"
    );
    assert_eq!(delete(&*store, rule, 1).await, 1);
    assert_eq!(delete(&*store, rule, 1).await, 0);
    assert_eq!(db.inbox_ids(&layout).await, sorted(ids[2..].to_vec()));
    db.cleanup().await;
}

/// INB-52, RET-11: while the row exists a repeat is a duplicate; once retention deleted it, a
/// repeat of its pair is stored as a new row.
pub(crate) async fn inb_52_repeat_after_retention_is_stored_as_new(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "inb52").await;
    let layout = TableLayout::default();
    let first = message("s", "k");
    store_all(&*store, std::slice::from_ref(&first)).await;
    let claimed = store
        .relay_claim(1, LONG_LEASE, &sources(&["s"]))
        .await
        .expect("claim");
    forward(&*store, &claimed, first.id).await;
    let repeat = message("s", "k");
    let outcome = store.insert_batch(std::slice::from_ref(&repeat)).await;
    assert_eq!(outcome.expect("insert"), vec![InsertOutcome::Duplicate]);

    db.backdate_inbox(&layout, first.id, 120 * MINUTE_MS).await;
    let rule = RetentionRule::InboxOlderThan(HOUR);
    assert_eq!(delete(&*store, rule, 10).await, 1);
    let again = message("s", "k");
    let outcome = store.insert_batch(std::slice::from_ref(&again)).await;
    assert_eq!(
        outcome.expect("insert"),
        vec![InsertOutcome::Stored(again.id)]
    );
    let row = db.inbox_row(&layout, again.id).await;
    assert_eq!(
        (row.state.as_str(), row.idempotency_key.as_str()),
        ("pending", "k")
    );
    db.cleanup().await;
}
