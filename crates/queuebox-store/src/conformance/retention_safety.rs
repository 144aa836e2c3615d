//! What retention never does (operations.md RET-3, RET-8): delete a `pending` or `processing`
//! row, touch another table, fail or delete twice when two replicas run at once, or wait for a
//! row another session is changing. Moved here from the PostgreSQL store's tests, so every
//! store proves them.

use std::collections::BTreeMap;
use std::time::Duration;

use queuebox_core::TableLayout;

use super::outbox_claim::claim_of;
use super::{
    ConformanceDatabase, ConformanceFactory, InboxFixture, LONG_LEASE, NewOutboxRow,
    inbox_migrated, join_all,
};
use crate::intake::Consumption;
use crate::outbox::TerminalWrite;
use crate::retention::RetentionRule;
use crate::store::Store;

const TEN_DAYS_MS: i64 = 10 * 86_400_000;
const HOUR: Duration = Duration::from_secs(3_600);

/// `n` inbox rows per (state, consumption), created 10 days ago; `processing` rows hold a
/// lease that expired 9 days later.
fn old_inbox_rows(n: usize) -> Vec<InboxFixture> {
    let mut rows = Vec::new();
    for state in ["pending", "processing", "processed", "dead"] {
        for (consumption, name) in [(Consumption::Push, "push"), (Consumption::Pull, "pull")] {
            for g in 1..=n {
                let key = format!("{state}-{name}-{g}");
                rows.push(InboxFixture::old(
                    "orders",
                    &key,
                    consumption,
                    state,
                    TEN_DAYS_MS,
                ));
            }
        }
    }
    rows
}

/// Inbox rows per state (the states with rows).
async fn inbox_states(store: &dyn Store) -> BTreeMap<String, u64> {
    let mut states = BTreeMap::new();
    for (state, n) in store.inbox_counts().await.expect("counts").states {
        if n > 0 {
            states.insert(state.as_str().to_owned(), n);
        }
    }
    states
}

fn states<const N: usize>(pairs: [(&str, i64); N]) -> BTreeMap<String, i64> {
    pairs.into_iter().map(|(s, n)| (s.to_owned(), n)).collect()
}

/// Three outbox rows in each state, 10 days old.
async fn old_outbox_rows(db: &dyn ConformanceDatabase, store: &dyn Store) {
    let layout = TableLayout::default();
    let rows: Vec<_> = (0..12).map(|_| NewOutboxRow::new("t")).collect();
    db.insert_outbox(&layout, &rows).await;
    let claimed = store.claim(12, LONG_LEASE).await.expect("claim");
    let claim = |n: usize| claim_of(&claimed, rows[n].id);
    let mut writes = Vec::new();
    for n in 0..3 {
        writes.push(TerminalWrite::Sent { claim: claim(n) });
        writes.push(TerminalWrite::Dead {
            claim: claim(n + 3),
            attempt: 1,
            error: "e".into(),
        });
    }
    store.finish(&writes).await.expect("finish");
    let release: Vec<_> = (6..9).map(claim).collect();
    store.release(&release).await.expect("release");
    for row in &rows {
        db.backdate_outbox(&layout, row.id, TEN_DAYS_MS).await;
    }
}

/// RET-3: retention never deletes a `pending` or `processing` row, whatever its age (push or
/// pull, an expired lease included), and never touches any other table: an outbox rule leaves
/// the inbox alone, an inbox rule leaves the outbox alone, and an application table with
/// QueueBox's column names is never touched.
pub(crate) async fn ret_3_retention_never_deletes_pending_or_processing_and_no_other_table(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "ret3").await;
    let layout = TableLayout::default();
    db.insert_inbox_fixtures(&old_inbox_rows(3)).await;
    old_outbox_rows(&*db, &*store).await;
    db.create_application_table().await;
    let outbox_before = db.outbox_states(&layout).await;
    let inbox_rule = RetentionRule::InboxOlderThan(Duration::from_millis(1));
    let deleted = store.retention_delete(inbox_rule, 1_000).await.unwrap();
    assert_eq!(deleted, 12, "processed and dead, push and pull");
    let inbox_after = inbox_states(&*store).await;
    let six = BTreeMap::from([("pending".to_owned(), 6), ("processing".to_owned(), 6)]);
    assert_eq!(inbox_after, six);
    assert_eq!(
        db.outbox_states(&layout).await,
        outbox_before,
        "the inbox rule touched the outbox"
    );
    for rule in [
        RetentionRule::OutboxOlderThan(Duration::from_millis(1)),
        RetentionRule::OutboxKeepNewest(1),
    ] {
        store.retention_delete(rule, 1_000).await.unwrap();
    }
    assert_eq!(
        db.outbox_states(&layout).await,
        states([("pending", 3), ("processing", 3)])
    );
    assert_eq!(
        inbox_states(&*store).await,
        inbox_after,
        "the outbox rules touched the inbox"
    );
    assert_eq!(
        db.application_table_states().await,
        states([("dead", 1), ("processed", 1), ("sent", 1)]),
        "another table is never touched"
    );
    db.cleanup().await;
}

/// Deletes in batches of 50 until a batch deletes fewer; answers (rows, statements).
async fn run(store: &dyn Store) -> (u64, u32) {
    let mut total = 0u64;
    let mut deletes = 0;
    loop {
        let n = store
            .retention_delete(RetentionRule::InboxOlderThan(HOUR), 50)
            .await
            .expect("a concurrent DELETE never fails");
        total += n;
        deletes += 1;
        if n < 50 {
            return (total, deletes);
        }
    }
}

/// RET-8: two replicas' retention runs at the same time are safe: each DELETE re-checks its
/// conditions, no run fails, every eligible row is deleted exactly once (the counts add up),
/// and the other rows stay. A row that another session is changing while a DELETE runs is not
/// deleted: the DELETE does not wait for it, and a requeue that commits afterwards keeps it.
pub(crate) async fn ret_8_two_concurrent_retention_runs_are_safe(factory: &dyn ConformanceFactory) {
    let (db, store) = inbox_migrated(factory, "ret8").await;
    db.insert_inbox_fixtures(&old_inbox_rows(500)).await;
    let before = inbox_states(&*store).await;
    assert_eq!(before["processed"] + before["dead"], 2_000);
    let other = db.store(TableLayout::default()).await;
    let runs = join_all(vec![run(&*store), run(&*other)]).await;
    let (a, b) = (runs[0], runs[1]);
    assert_eq!(
        a.0 + b.0,
        2_000,
        "each row deleted exactly once: {a:?} {b:?}"
    );
    let after = inbox_states(&*store).await;
    let kept = BTreeMap::from([
        ("pending".to_owned(), 1_000),
        ("processing".to_owned(), 1_000),
    ]);
    assert_eq!(
        after, kept,
        "no processed or dead row is left; the others stay"
    );

    let requeued = InboxFixture::old("orders", "requeued", Consumption::Push, "dead", TEN_DAYS_MS);
    let finished = InboxFixture::old("orders", "finished", Consumption::Push, "dead", TEN_DAYS_MS);
    db.insert_inbox_fixtures(&[requeued.clone(), finished])
        .await;
    let operator = db
        .change_inbox_state_uncommitted(requeued.id, "pending")
        .await;
    let third = db.store(TableLayout::default()).await;
    let rule = RetentionRule::InboxOlderThan(HOUR);
    let deleted = tokio::time::timeout(Duration::from_secs(3), third.retention_delete(rule, 50))
        .await
        .expect("a DELETE never waits for a row another session holds")
        .unwrap();
    assert_eq!(deleted, 1, "only the row nobody holds");
    operator.commit().await;
    assert_eq!(
        third.retention_delete(rule, 50).await.unwrap(),
        0,
        "the requeued row is pending now"
    );
    let layout = TableLayout::default();
    assert_eq!(db.inbox_row(&layout, requeued.id).await.state, "pending");
    db.cleanup().await;
}
