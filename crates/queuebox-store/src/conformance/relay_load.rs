//! The relay checks of the suite that run many rows or other names (inbox.md RLY-3, RLY-6,
//! RLY-13; schema.md SCH-38): concurrent relay claims over two stores, and mapped names.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use queuebox_core::{SqlIdentifier, TableLayout};
use uuid::Uuid;

use super::inbox_support::{json, message, of, relay_ids, sources, store_all};
use super::{ConformanceFactory, LONG_LEASE, inbox_migrated, join_all};
use crate::intake::InsertOutcome;
use crate::outbox::RowId;
use crate::relay::ForwardedRow;
use crate::retention::RetentionRule;
use crate::store::Store;

/// What the concurrent relays saw, shared between them.
#[derive(Default)]
struct Ledger {
    /// Per aggregate, the row claimed and not yet handed to the forward.
    in_flight: HashMap<String, Uuid>,
    seen: HashSet<Uuid>,
    /// Per aggregate, the claimed ids in claim order.
    order: HashMap<String, Vec<Uuid>>,
    forwarded: usize,
    claims: usize,
}

/// Far more claims than draining needs, even with every relay spinning on empty answers.
const MAX_CLAIMS: usize = 50_000;

fn forward_of(aggregate: &str) -> ForwardedRow {
    ForwardedRow {
        id: Uuid::new_v4(),
        topic: "t".into(),
        key: Some(aggregate.to_owned()),
        payload: "{}".into(),
        headers: "{}".into(),
        max_attempts: 5,
    }
}

/// One relay: claim a few rows, record them, forward each, until every row is forwarded. The
/// aggregate leaves `in_flight` before its forward starts, so its next row can only be
/// claimed (after that forward commits) once the ledger no longer holds the aggregate.
async fn relay(store: &dyn Store, ledger: &Mutex<Ledger>, total: usize) {
    let listed = sources(&["s"]);
    loop {
        if ledger.lock().expect("ledger").forwarded >= total {
            return;
        }
        let rows = store
            .relay_claim(3, LONG_LEASE, &listed)
            .await
            .expect("claim");
        {
            let mut l = ledger.lock().expect("ledger");
            l.claims += 1;
            assert!(l.claims < MAX_CLAIMS, "the relays stopped making progress");
            for row in &rows {
                assert!(
                    l.seen.insert(row.claim.id.0),
                    "{} claimed twice",
                    row.claim.id
                );
                let aggregate = row.aggregate_id.clone().expect("every row has one");
                if let Some(other) = l.in_flight.insert(aggregate.clone(), row.claim.id.0) {
                    panic!(
                        "{} of aggregate {aggregate} claimed while {other} was held",
                        row.claim.id
                    );
                }
                l.order.entry(aggregate).or_default().push(row.claim.id.0);
            }
        }
        for row in rows {
            let aggregate = row.aggregate_id.clone().expect("every row has one");
            ledger.lock().expect("ledger").in_flight.remove(&aggregate);
            let done = store
                .relay_forward(row.claim, &forward_of(&aggregate))
                .await
                .expect("forward");
            assert!(done, "a live claim was lost");
            ledger.lock().expect("ledger").forwarded += 1;
        }
    }
}

/// RLY-3/6: 8 concurrent relay claims on two stores drain 100 rows of 10 aggregates; no row is
/// claimed twice, an aggregate never has two rows out, each aggregate leaves in
/// (`scheduled_at`, `created_at`, `id`) order, and each forward made one outbox row.
pub(crate) async fn rly_3_concurrent_relay_claims_never_share_a_row_or_an_aggregate(
    factory: &dyn ConformanceFactory,
) {
    const ROWS: usize = 100;
    const AGGREGATES: usize = 10;
    let (db, first) = inbox_migrated(factory, "rly3conc").await;
    let layout = TableLayout::default();
    let rows: Vec<_> = (0..ROWS)
        .map(|i| {
            of(
                message("s", &format!("k{i}")),
                &format!("a{}", i % AGGREGATES),
            )
        })
        .collect();
    store_all(&*first, &rows).await;
    let second = db.store(layout.clone()).await;
    let stores: [&dyn Store; 2] = [&*first, &*second];

    let ledger = Mutex::new(Ledger::default());
    let relays = (0..8)
        .map(|i| relay(stores[i % 2], &ledger, ROWS))
        .collect();
    join_all(relays).await;

    let ledger = ledger.into_inner().expect("ledger");
    assert_eq!(ledger.forwarded, ROWS);
    assert_eq!(ledger.seen.len(), ROWS);
    assert_eq!(ledger.order.len(), AGGREGATES);
    for (aggregate, ids) in &ledger.order {
        // One batch: equal scheduled_at and created_at, so the id decides.
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, &sorted, "aggregate {aggregate} went out of order");
    }
    assert_eq!(db.outbox_ids(&layout).await.len(), ROWS);
    for row in &rows {
        assert_eq!(db.inbox_row(&layout, row.id).await.state, "processed");
    }
    db.cleanup().await;
}

/// SCH-38: with renamed tables and columns (created by hand, SCH-39), insert, claim, release,
/// forward, the gauge and the inbox retention use the mapped names.
pub(crate) async fn sch_38_inbox_statements_use_mapped_names(factory: &dyn ConformanceFactory) {
    let db = factory.fresh("sch38inbox").await;
    let id = |s: &str| SqlIdentifier::parse(s).expect("identifier");
    let mut layout = TableLayout {
        inbox_table: id("events_in"),
        outbox_table: id("events_out"),
        ..TableLayout::default()
    };
    for (key, default, _) in TableLayout::default().inbox.entries() {
        assert!(layout.inbox.set(key, id(&format!("in_{default}"))));
    }
    assert!(layout.outbox.set("topic", id("subject")));
    assert!(layout.outbox.set("state", id("status")));
    assert!(layout.outbox.set("key", id("partition_key")));
    db.create_outbox_by_hand(&layout).await;
    db.create_inbox_by_hand(&layout).await;
    let store = db.store(layout.clone()).await;

    let a = of(message("s", "a"), "agg");
    let repeat = message("s", "a");
    let b = message("s", "b");
    let outcomes = store
        .insert_batch(&[a.clone(), repeat, b.clone()])
        .await
        .expect("insert");
    assert_eq!(
        outcomes,
        vec![
            InsertOutcome::Stored(a.id),
            InsertOutcome::Duplicate,
            InsertOutcome::Stored(b.id)
        ]
    );
    let claimed = store
        .relay_claim(10, LONG_LEASE, &sources(&["s"]))
        .await
        .expect("claim");
    let mut expected = vec![a.id, b.id];
    expected.sort();
    assert_eq!(relay_ids(&claimed), expected);
    let b_claim = claimed
        .iter()
        .find(|r| r.claim.id == RowId(b.id))
        .expect("b")
        .claim;
    let a_claim = claimed
        .iter()
        .find(|r| r.claim.id == RowId(a.id))
        .expect("a")
        .claim;
    assert_eq!(
        store
            .relay_release(&[b_claim], Some("e"))
            .await
            .expect("release"),
        vec![b_claim]
    );

    let out = forward_of("agg");
    assert!(store.relay_forward(a_claim, &out).await.expect("forward"));
    let inbox = db.inbox_row(&layout, a.id).await;
    assert_eq!(inbox.state, "processed");
    let outbox = db.outbox_row(&layout, out.id).await;
    assert_eq!(
        (outbox.topic.as_str(), outbox.state.as_str()),
        ("t", "pending")
    );
    assert_eq!(outbox.key.as_deref(), Some("agg"));
    assert_eq!(json(&outbox.payload), json("{}"));
    assert!(store.inbox_oldest_pending_age().await.expect("gauge") >= 0.0);
    assert_eq!(store.relay_reclaim_expired().await.expect("reclaim"), 0);
    let deleted = store
        .retention_delete(RetentionRule::InboxOlderThan(Duration::ZERO), 10)
        .await
        .expect("retention");
    assert_eq!(deleted, 1);
    assert_eq!(db.inbox_ids(&layout).await, vec![b.id]);
    db.cleanup().await;
}
