//! The life of an inbox row across the relay's statements (inbox.md INB-1, INB-46): only the
//! transitions of the diagram, and the claim order by `scheduled_at`, then `created_at`. Moved
//! here from the PostgreSQL store's tests, so every store proves them.

use std::collections::BTreeMap;
use std::time::Duration;

use queuebox_core::TableLayout;
use uuid::Uuid;

use super::inbox_support::{message, now_ms, of, relay_claim_of, relay_ids, sources};
use super::{ConformanceDatabase, ConformanceFactory, InboxFixture, LONG_LEASE, inbox_migrated};
use crate::intake::{Consumption, InsertOutcome, NewInboxRow, Schedule};
use crate::relay::ForwardedRow;
use crate::store::Store;

const HOUR_MS: i64 = 3_600_000;

fn forwarded() -> ForwardedRow {
    ForwardedRow {
        id: Uuid::now_v7(),
        topic: "order.created".to_owned(),
        key: None,
        payload: "{}".to_owned(),
        headers: "{}".to_owned(),
        max_attempts: 5,
    }
}

/// `state` of each of these inbox rows.
async fn states(db: &dyn ConformanceDatabase, ids: &[Uuid]) -> BTreeMap<Uuid, String> {
    let layout = TableLayout::default();
    let mut states = BTreeMap::new();
    for id in ids {
        states.insert(*id, db.inbox_row(&layout, *id).await.state);
    }
    states
}

async fn store_rows(store: &dyn Store, rows: &[NewInboxRow]) -> Vec<Uuid> {
    let outcomes = store.insert_batch(rows).await.expect("insert");
    outcomes
        .iter()
        .map(|o| match o {
            InsertOutcome::Stored(id) => *id,
            InsertOutcome::Duplicate => panic!("unexpected duplicate: {outcomes:?}"),
        })
        .collect()
}

/// INB-1: the store makes only the transitions of the diagram. Every relay statement is tried
/// on rows in every state, with claims that would pass every test but the state one: a
/// `processed` or `dead` row never goes anywhere (not even back to `pending` by a reclaim of a
/// lease left expired), a `pending` row only goes to `processing` by a claim, and a
/// `processing` row only to `processed`, `dead` or `pending`.
pub(crate) async fn inb_1_the_store_makes_only_the_transitions_of_the_diagram(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "inb1").await;
    let orders = sources(&["orders"]);
    let ids = store_rows(
        &*store,
        &[
            of(message("orders", "to-processed"), "a1"),
            of(message("orders", "to-dead"), "a2"),
            of(message("orders", "to-released"), "a3"),
            of(message("orders", "to-reclaimed"), "a4"),
        ],
    )
    .await;
    let [processed, dead, released, reclaimed] = ids[..] else {
        unreachable!("four rows were stored")
    };
    let all_pending: BTreeMap<Uuid, String> =
        ids.iter().map(|id| (*id, "pending".to_owned())).collect();
    assert_eq!(
        states(&*db, &ids).await,
        all_pending,
        "[*] --> pending: stored"
    );

    // pending --> processing: relay claim.
    let claimed = store.relay_claim(10, LONG_LEASE, &orders).await.unwrap();
    assert_eq!(claimed.len(), 4);
    assert!(states(&*db, &ids).await.values().all(|s| s == "processing"));
    let (c_processed, c_dead, c_released, c_reclaimed) = (
        relay_claim_of(&claimed, processed),
        relay_claim_of(&claimed, dead),
        relay_claim_of(&claimed, released),
        relay_claim_of(&claimed, reclaimed),
    );

    // processing --> processed, processing --> dead, processing --> pending (release, reclaim).
    assert!(
        store
            .relay_forward(c_processed, &forwarded())
            .await
            .unwrap()
    );
    assert!(store.relay_dead(c_dead, "topic empty").await.unwrap());
    let released_claims = store.relay_release(&[c_released], None).await.unwrap();
    assert_eq!(released_claims, [c_released]);
    db.set_inbox_claim(c_reclaimed, -1_000).await;
    assert_eq!(store.relay_reclaim_expired().await.unwrap(), 1);
    let expected: BTreeMap<Uuid, String> = [
        (processed, "processed"),
        (dead, "dead"),
        (released, "pending"),
        (reclaimed, "pending"),
    ]
    .into_iter()
    .map(|(id, s)| (id, s.to_owned()))
    .collect();
    assert_eq!(states(&*db, &ids).await, expected);

    // Put the old claims back on every row, with a live lease, as if a write had been lost: the
    // fenced statements must still refuse every row that is not `processing`.
    let stale = [c_processed, c_dead, c_released, c_reclaimed];
    for claim in stale {
        db.set_inbox_claim(claim, HOUR_MS).await;
    }
    for claim in stale {
        assert!(
            !store.relay_forward(claim, &forwarded()).await.unwrap(),
            "forward of a row that is not processing: {claim:?}"
        );
        assert!(
            !store.relay_dead(claim, "late").await.unwrap(),
            "dead of a row that is not processing: {claim:?}"
        );
    }
    let late_release = store.relay_release(&stale, Some("late")).await.unwrap();
    assert!(late_release.is_empty());
    assert!(
        store
            .relay_renew(&stale, LONG_LEASE)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        states(&*db, &ids).await,
        expected,
        "no write moved a finished or pending row"
    );
    let layout = TableLayout::default();
    assert_eq!(
        db.outbox_ids(&layout).await.len(),
        1,
        "only the real forward wrote an outbox row"
    );

    // An expired lease left on a finished row: a reclaim never revives it.
    for claim in [c_processed, c_dead] {
        db.set_inbox_claim(claim, -HOUR_MS).await;
    }
    assert_eq!(store.relay_reclaim_expired().await.unwrap(), 0);
    // A claim takes only the two pending rows, never a processed or dead one.
    let again = store.relay_claim(10, LONG_LEASE, &orders).await.unwrap();
    let mut taken = relay_ids(&again);
    taken.sort();
    let mut pending = vec![released, reclaimed];
    pending.sort();
    assert_eq!(taken, pending);
    // A repeat of a finished row's key changes nothing (INB-50: no transition on a duplicate).
    let repeat = store
        .insert_batch(&[
            of(message("orders", "to-processed"), "a1"),
            of(message("orders", "to-dead"), "a2"),
        ])
        .await
        .unwrap();
    assert_eq!(repeat, [InsertOutcome::Duplicate, InsertOutcome::Duplicate]);
    let states_now = states(&*db, &ids).await;
    assert_eq!(states_now[&processed], "processed");
    assert_eq!(states_now[&dead], "dead");
    db.cleanup().await;
}

/// INB-46: the relay claim orders rows by `scheduled_at`, then `created_at`; the id plays no
/// part before those two. Two messages of one aggregate stored in reverse publish order leave
/// in publish order.
pub(crate) async fn inb_46_the_relay_claims_by_scheduled_at_then_created_at(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = inbox_migrated(factory, "inb46").await;
    let orders = sources(&["orders"]);
    // Ids in the reverse of the expected order, so an order by id would fail.
    let early = Uuid::from_u128(3);
    let tie_older = Uuid::from_u128(2);
    let tie_newer = Uuid::from_u128(1);
    let row = |id, key: &str, scheduled_ago_ms, created_ago_ms| InboxFixture {
        id,
        scheduled_ago_ms,
        created_ago_ms,
        ..InboxFixture::old("orders", key, Consumption::Push, "pending", 0)
    };
    db.insert_inbox_fixtures(&[
        row(tie_newer, "k1", 10_000, 1_000),
        row(tie_older, "k2", 10_000, 5_000),
        row(early, "k3", 20_000, 0),
    ])
    .await;
    let mut order = Vec::new();
    let mut claims = Vec::new();
    for _ in 0..3 {
        let claimed = store.relay_claim(1, LONG_LEASE, &orders).await.unwrap();
        assert_eq!(claimed.len(), 1);
        order.push(claimed[0].claim.id.0);
        claims.push(claimed[0].claim);
    }
    assert_eq!(order, [early, tie_older, tie_newer]);
    // Back to pending with their times kept, then claimed in one batch.
    assert_eq!(store.relay_release(&claims, None).await.unwrap().len(), 3);
    let batch = store.relay_claim(10, LONG_LEASE, &orders).await.unwrap();
    assert_eq!(
        relay_ids(&batch),
        [early, tie_older, tie_newer],
        "one batch, same order"
    );

    // One aggregate, stored in reverse publish order: the earlier publish time leaves first.
    let publish = |key: &str, ms_ago: i64| NewInboxRow {
        raw_body: None,
        schedule: Schedule::AfterPublish {
            publish_epoch_ms: now_ms() - ms_ago,
            delay: Duration::ZERO,
        },
        ..of(message("orders", key), "order-9")
    };
    let second = store_rows(&*store, &[publish("published-second", 1_000)]).await[0];
    let first = store_rows(&*store, &[publish("published-first", 5_000)]).await[0];
    let claimed = store.relay_claim(10, LONG_LEASE, &orders).await.unwrap();
    assert_eq!(
        relay_ids(&claimed),
        [first],
        "one row per aggregate, the earlier publish time"
    );
    assert!(
        store
            .relay_forward(claimed[0].claim, &forwarded())
            .await
            .unwrap()
    );
    let claimed = store.relay_claim(10, LONG_LEASE, &orders).await.unwrap();
    assert_eq!(relay_ids(&claimed), [second]);
    db.cleanup().await;
}
