//! The life of an outbox row across the store's statements (outbox.md OUT-5, OUT-9, OUT-10,
//! OUT-38, OUT-47): `sequence` taken at insert and kept for life, only the transitions of the
//! table, the columns each transition writes, and key order against a late commit and a
//! reclaim. Moved here from the PostgreSQL store's tests, so every store proves them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use queuebox_core::TableLayout;
use uuid::Uuid;

use super::outbox_claim::claim_of;
use super::{ConformanceDatabase, ConformanceFactory, LONG_LEASE, NewOutboxRow, ids_of, migrated};
use crate::operator::OutboxFilter;
use crate::outbox::{Claim, ClaimToken, RowId, TerminalWrite};
use crate::store::Store;

/// Inserts one due row as an application does (its own transaction); returns its id.
async fn insert(db: &dyn ConformanceDatabase, key: Option<&str>) -> Uuid {
    let mut row = NewOutboxRow::new("t");
    row.key = key.map(str::to_owned);
    db.insert_outbox(&TableLayout::default(), std::slice::from_ref(&row))
        .await;
    row.id
}

async fn sequence(db: &dyn ConformanceDatabase, id: Uuid) -> i64 {
    db.outbox_row(&TableLayout::default(), id).await.sequence
}

/// OUT-5: the database assigns `sequence` at insert time; values are unique and increase in
/// insert order (not id order, not commit order), and a row keeps its value through claim,
/// retry, reclaim, sent and a replay.
pub(crate) async fn out_5_sequence_increases_in_insert_order_and_is_kept_for_life(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out5").await;
    let layout = TableLayout::default();
    // Ids in descending order, so id order is the reverse of insert order.
    let mut rows: Vec<NewOutboxRow> = (0..5).map(|_| NewOutboxRow::new("t")).collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.id));
    for row in &rows {
        db.insert_outbox(&layout, std::slice::from_ref(row)).await;
    }
    let mut order: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    // Inserted first, committed last: the value is taken at insert time.
    let early = NewOutboxRow::new("t");
    let open = db.insert_outbox_uncommitted(&early).await;
    let late = insert(&*db, None).await;
    open.commit().await;
    order.push(early.id);
    order.push(late);

    let mut sequences = Vec::new();
    for id in &order {
        sequences.push(sequence(&*db, *id).await);
    }
    assert!(
        sequences.windows(2).all(|w| w[0] < w[1]),
        "sequence follows insert order: {sequences:?}"
    );

    // Kept through every write QueueBox makes.
    let first = order[0];
    let kept = sequences[0];
    let claimed = store.claim(1, LONG_LEASE).await.expect("claim");
    assert_eq!(claimed[0].sequence, kept);
    let claim = claim_of(&claimed, first);
    let retry = TerminalWrite::Retry {
        claim,
        attempt: 1,
        delay: Duration::ZERO,
        error: "e".into(),
    };
    store.finish(&[retry]).await.expect("retry");
    assert_eq!(sequence(&*db, first).await, kept);
    let claimed = store.claim(10, Duration::ZERO).await.expect("claim again");
    assert_eq!(claimed.len(), order.len());
    let reclaimed = store.reclaim_expired().await.expect("reclaim");
    assert_eq!(reclaimed, order.len() as u64);
    assert_eq!(sequence(&*db, first).await, kept);
    let claimed = store
        .claim(10, LONG_LEASE)
        .await
        .expect("claim a third time");
    for row in &claimed {
        let at = order
            .iter()
            .position(|id| *id == row.claim.id.0)
            .expect("known");
        assert_eq!(row.sequence, sequences[at]);
    }
    let sent = TerminalWrite::Sent {
        claim: claim_of(&claimed, first),
    };
    store.finish(&[sent]).await.expect("sent");
    assert_eq!(db.outbox_row(&layout, first).await.state, "sent");
    let replay = OutboxFilter {
        ids: Some(vec![first]),
        ..OutboxFilter::default()
    };
    assert_eq!(store.replay_outbox(&replay, None).await.expect("replay"), 1);
    assert_eq!(sequence(&*db, first).await, kept);
    // Distinct over the whole table.
    let mut all = BTreeSet::new();
    for id in db.outbox_ids(&layout).await {
        assert!(all.insert(sequence(&*db, id).await), "a repeated sequence");
    }
    db.cleanup().await;
}

/// Longer than the coarsest clock of a store (SQLite's text timestamps keep milliseconds), so
/// two statements that a test tells apart by their `updated_at` never share a clock reading.
const CLOCK_STEP: Duration = Duration::from_millis(3);

/// Drives every statement of the store over six rows, including fenced writes that must do
/// nothing (a stale token, a row no longer processing). Returns the rows, named.
async fn every_statement(
    db: &dyn ConformanceDatabase,
    store: &dyn Store,
) -> BTreeMap<&'static str, Uuid> {
    let step = || tokio::time::sleep(CLOCK_STEP);
    let mut rows = BTreeMap::new();
    // `expired` is claimed alone with a lease that is over at once, the others together.
    rows.insert("expired", insert(db, None).await);
    step().await;
    let short = store.claim(1, Duration::ZERO).await.expect("claim");
    assert_eq!(ids_of(&short), vec![rows["expired"]]);
    for name in ["sent", "retried", "dead", "released", "stale"] {
        rows.insert(name, insert(db, None).await);
    }
    step().await;
    let claimed = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(claimed.len(), 5);
    let c = |name: &str| claim_of(&claimed, rows[name]);
    let renewed = store
        .renew(&[c("sent"), c("stale")], LONG_LEASE)
        .await
        .expect("renew");
    assert_eq!(renewed.len(), 2);
    let forged = Claim {
        id: RowId(rows["stale"]),
        token: ClaimToken(Uuid::new_v4()),
    };
    step().await;
    let written = store
        .finish(&[
            TerminalWrite::Sent { claim: c("sent") },
            TerminalWrite::Retry {
                claim: c("retried"),
                attempt: 1,
                delay: Duration::ZERO,
                error: "e".into(),
            },
            TerminalWrite::Dead {
                claim: c("dead"),
                attempt: 1,
                error: "e".into(),
            },
            TerminalWrite::Sent { claim: forged },
        ])
        .await
        .expect("finish");
    assert_eq!(written.len(), 3, "the stale token writes nothing");
    step().await;
    let released = store.release(&[c("released")]).await.expect("release");
    assert_eq!(released, vec![c("released")]);
    step().await;
    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 1);
    // Fenced writes on rows that left processing change nothing.
    let none = store
        .finish(&[
            TerminalWrite::Retry {
                claim: c("sent"),
                attempt: 1,
                delay: Duration::ZERO,
                error: "late".into(),
            },
            TerminalWrite::Sent { claim: c("dead") },
            TerminalWrite::Dead {
                claim: c("released"),
                attempt: 9,
                error: "late".into(),
            },
        ])
        .await
        .expect("late finish");
    assert!(none.is_empty());
    let late_release = store.release(&[c("retried"), c("sent")]).await;
    assert!(late_release.expect("late release").is_empty());
    let late_renew = store.renew(&[c("dead"), c("released")], LONG_LEASE).await;
    assert!(late_renew.expect("late renew").is_empty());
    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 0);
    // The rows back in pending are claimed again and sent; `stale` too.
    step().await;
    let again = store.claim(10, LONG_LEASE).await.expect("claim again");
    let again_ids: BTreeSet<Uuid> = ids_of(&again).into_iter().collect();
    let expected: BTreeSet<Uuid> = ["retried", "released", "expired"]
        .iter()
        .map(|n| rows[n])
        .collect();
    assert_eq!(again_ids, expected);
    let mut sends: Vec<TerminalWrite> = again
        .iter()
        .map(|r| TerminalWrite::Sent { claim: r.claim })
        .collect();
    sends.push(TerminalWrite::Sent { claim: c("stale") });
    step().await;
    assert_eq!(store.finish(&sends).await.expect("finish").len(), 4);
    rows
}

/// OUT-9: QueueBox makes only the transitions of the table (insert → pending, pending →
/// processing, processing → sent / pending / dead); fenced writes on a row that is not
/// `processing` make none, and no other state value is written.
pub(crate) async fn out_9_the_store_makes_only_the_listed_transitions(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out9").await;
    db.audit_outbox_transitions().await;
    let rows = every_statement(&*db, &*store).await;
    let allowed: BTreeSet<(Option<&str>, &str)> = [
        (None, "pending"),
        (Some("pending"), "processing"),
        (Some("processing"), "sent"),
        (Some("processing"), "pending"),
        (Some("processing"), "dead"),
    ]
    .into_iter()
    .collect();
    let mut paths: BTreeMap<Uuid, Vec<String>> = BTreeMap::new();
    for t in db.outbox_transitions().await {
        assert!(
            allowed.contains(&(t.from.as_deref(), t.to.as_str())),
            "transition {:?} -> {} is not in the table",
            t.from,
            t.to
        );
        paths.entry(t.id).or_default().push(t.to);
    }
    let path = |name: &str| paths[&rows[name]].join(" > ");
    let twice = "pending > processing > pending > processing > sent";
    assert_eq!(path("sent"), "pending > processing > sent");
    assert_eq!(path("stale"), "pending > processing > sent");
    assert_eq!(path("dead"), "pending > processing > dead");
    assert_eq!(path("retried"), twice);
    assert_eq!(path("released"), twice);
    assert_eq!(path("expired"), twice);
    db.cleanup().await;
}

/// OUT-10: every write that changes `state` sets `updated_at` to the database clock of that
/// statement; every transition out of `processing` clears `claim_token` and
/// `lease_expires_at` and keeps `claimed_at`; a claim sets `claimed_at`, the token and the
/// lease.
pub(crate) async fn out_10_every_state_change_sets_updated_at_and_the_claim_columns(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out10").await;
    db.audit_outbox_transitions().await;
    every_statement(&*db, &*store).await;
    let changes: Vec<_> = db
        .outbox_transitions()
        .await
        .into_iter()
        .filter(|t| t.from.is_some())
        .collect();
    assert_eq!(changes.len(), 3 * 2 + 3 * 4, "every change was recorded");
    let of_the_statement =
        |at: i64, t: &super::OutboxTransition| (t.statement_at..=t.recorded_at).contains(&at);
    for t in &changes {
        let from = t.from.as_deref().unwrap_or_default();
        let what = format!("{from} -> {}", t.to);
        assert!(
            t.old_updated_at.is_some_and(|old| t.new_updated_at > old),
            "{what}: updated_at did not move"
        );
        assert!(
            of_the_statement(t.new_updated_at, t),
            "{what}: updated_at is not the database clock of the statement"
        );
        if from == "processing" {
            assert_eq!(
                t.new_claimed_at, t.old_claimed_at,
                "{what}: claimed_at changed"
            );
            assert_eq!(t.new_claim_token, None, "{what}: claim_token not cleared");
            assert_eq!(t.new_lease_expires_at, None, "{what}: lease not cleared");
        }
        if t.to == "processing" {
            assert!(
                t.new_claimed_at.is_some_and(|at| of_the_statement(at, t)),
                "{what}: claimed_at not the claim's clock"
            );
            assert!(t.new_claim_token.is_some(), "{what}: no claim_token");
            assert!(t.new_lease_expires_at.is_some(), "{what}: no lease");
        }
    }
    db.cleanup().await;
}

/// OUT-47: a reclaimed row keeps its `sequence`, so it is still the head of its key and the next
/// claim takes it, before the later rows of the key.
pub(crate) async fn out_47_a_reclaimed_row_keeps_its_sequence_and_is_claimed_as_head(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out47").await;
    let layout = TableLayout::default();
    let head = insert(&*db, Some("k")).await;
    let next = insert(&*db, Some("k")).await;
    let before = db.outbox_row(&layout, head).await;
    let claimed = store.claim(10, Duration::ZERO).await.expect("claim");
    assert_eq!(ids_of(&claimed), vec![head]);
    // Expired but not yet reclaimed: still processing, still holding its key.
    assert!(store.claim(10, LONG_LEASE).await.expect("claim").is_empty());
    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 1);
    let reclaimed = db.outbox_row(&layout, head).await;
    assert_eq!(reclaimed.state, "pending");
    assert_eq!(reclaimed.sequence, before.sequence);
    let again = store.claim(10, LONG_LEASE).await.expect("claim again");
    assert_eq!(ids_of(&again), vec![head], "the reclaimed row is the head");
    assert_eq!(again[0].sequence, before.sequence);
    assert_eq!(again[0].attempt, 0);
    assert_eq!(db.outbox_row(&layout, next).await.state, "pending");
    db.cleanup().await;
}

/// OUT-38: the order of a key is the order of `sequence` among the rows the claim can see. A row
/// whose transaction took its `sequence` first but committed after a higher-`sequence` row of the
/// same key was claimed goes out after that row: the claim never waits for it, and once it is
/// visible the processing row still holds the key (OUT-13 rule 3) until it ends.
pub(crate) async fn out_38_a_lower_sequence_committed_late_goes_after_the_row_already_claimed(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out38").await;
    let layout = TableLayout::default();
    // The slow writer takes its sequence first and holds its transaction open.
    let late = NewOutboxRow::new("t").key("k");
    let open = db.insert_outbox_uncommitted(&late).await;
    let early = insert(&*db, Some("k")).await;
    assert!(
        !db.outbox_ids(&layout).await.contains(&late.id),
        "the late row is not visible before its commit"
    );

    let first = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(
        ids_of(&first),
        vec![early],
        "only the committed row is seen"
    );
    open.commit().await;
    let late_seq = sequence(&*db, late.id).await;
    assert!(
        late_seq < first[0].sequence,
        "the late row took the lower sequence ({late_seq} vs {})",
        first[0].sequence
    );
    assert!(
        store.claim(10, LONG_LEASE).await.expect("claim").is_empty(),
        "the processing row holds its key against the lower-sequence late row"
    );
    let sent = TerminalWrite::Sent {
        claim: claim_of(&first, early),
    };
    store.finish(&[sent]).await.expect("finish");
    let second = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(
        ids_of(&second),
        vec![late.id],
        "the late row goes out after the row already claimed"
    );
    db.cleanup().await;
}
