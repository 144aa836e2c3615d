//! The outbox checks of the suite that run many rows or other names (outbox.md OUT-13/14,
//! OUT-36, schema.md SCH-38): concurrent claimers, a large batch, and mapped names.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use queuebox_core::{SqlIdentifier, TableLayout};
use uuid::Uuid;

use super::outbox_claim::claim_of;
use super::{ConformanceFactory, LONG_LEASE, NewOutboxRow, ids_of, join_all, migrated};
use crate::outbox::{OutboxStore, TerminalWrite};

/// What the concurrent claimers saw, shared between them.
#[derive(Default)]
struct Ledger {
    /// Per key, the row claimed and not yet handed to `finish`.
    in_flight: HashMap<String, Uuid>,
    seen: HashSet<Uuid>,
    /// Per key, the sequence of each claimed row, in claim order.
    order: HashMap<String, Vec<i64>>,
    finished: usize,
    claims: usize,
}

/// Far more claims than draining needs, even with every claimer spinning on empty answers;
/// reaching it means the claimers stopped making progress.
const MAX_CLAIMS: usize = 50_000;

/// One claimer: claim a few rows, record them, mark each sent, until every row is sent. The
/// key leaves `in_flight` before its `finish` starts, so the next row of the key can only be
/// claimed (after that finish commits) once the ledger no longer holds the key.
async fn claimer(store: &dyn OutboxStore, ledger: &Mutex<Ledger>, total: usize) {
    loop {
        if ledger.lock().expect("ledger").finished >= total {
            return;
        }
        let rows = store.claim(3, LONG_LEASE).await.expect("claim");
        {
            let mut l = ledger.lock().expect("ledger");
            l.claims += 1;
            assert!(
                l.claims < MAX_CLAIMS,
                "the claimers stopped making progress"
            );
            let keys: HashSet<_> = rows.iter().map(|r| r.key.clone()).collect();
            assert_eq!(keys.len(), rows.len(), "one claim took two rows of a key");
            for row in &rows {
                assert!(
                    l.seen.insert(row.claim.id.0),
                    "{} claimed twice",
                    row.claim.id
                );
                let key = row.key.clone().expect("every row has a key");
                if let Some(other) = l.in_flight.insert(key.clone(), row.claim.id.0) {
                    panic!(
                        "{} of key {key} claimed while {other} was held",
                        row.claim.id
                    );
                }
                l.order.entry(key).or_default().push(row.sequence);
            }
        }
        for row in rows {
            let key = row.key.clone().expect("every row has a key");
            ledger.lock().expect("ledger").in_flight.remove(&key);
            let sent = TerminalWrite::Sent { claim: row.claim };
            let written = store.finish(&[sent]).await.expect("finish");
            assert_eq!(written, vec![row.claim], "a live claim was lost");
            ledger.lock().expect("ledger").finished += 1;
        }
    }
}

/// OUT-13/14/36: 8 concurrent claimers on two stores drain 200 rows of 10 keys; no row is
/// claimed twice, a key never has two rows out, and each key goes strictly in sequence order.
pub(crate) async fn out_14_concurrent_claimers_never_share_a_row_or_a_key(
    factory: &dyn ConformanceFactory,
) {
    const ROWS: usize = 200;
    const KEYS: usize = 10;
    let (db, first) = migrated(factory, "out14conc").await;
    let layout = TableLayout::default();
    let rows: Vec<NewOutboxRow> = (0..ROWS)
        .map(|i| NewOutboxRow::new("t").key(&format!("k{}", i % KEYS)))
        .collect();
    db.insert_outbox(&layout, &rows).await;
    let second = db.store(layout.clone()).await;
    let stores: [&dyn OutboxStore; 2] = [&*first, &*second];

    let ledger = Mutex::new(Ledger::default());
    let claimers = (0..8)
        .map(|i| claimer(stores[i % 2], &ledger, ROWS))
        .collect();
    join_all(claimers).await;

    let ledger = ledger.into_inner().expect("ledger");
    assert_eq!(ledger.finished, ROWS);
    assert_eq!(ledger.seen.len(), ROWS);
    assert_eq!(ledger.order.len(), KEYS);
    for (key, sequences) in &ledger.order {
        assert_eq!(sequences.len(), ROWS / KEYS, "key {key}");
        assert!(
            sequences.windows(2).all(|w| w[0] < w[1]),
            "key {key} went out of order: {sequences:?}"
        );
    }
    let states = db.outbox_states(&layout).await;
    assert_eq!(states, BTreeMap::from([("sent".to_owned(), ROWS as i64)]));
    db.cleanup().await;
}

/// OUT-31 batched: one `finish` call writes 100 rows of mixed outcomes (one statement in the
/// store), and every row changes.
pub(crate) async fn out_31_finish_of_100_rows_in_one_call(factory: &dyn ConformanceFactory) {
    let (db, store) = migrated(factory, "out31batch").await;
    let layout = TableLayout::default();
    let rows: Vec<NewOutboxRow> = (0..100).map(|_| NewOutboxRow::new("t")).collect();
    db.insert_outbox(&layout, &rows).await;
    let claimed = store.claim(100, LONG_LEASE).await.expect("claim");
    assert_eq!(claimed.len(), 100);
    let writes: Vec<TerminalWrite> = claimed
        .iter()
        .enumerate()
        .map(|(i, row)| match i % 3 {
            0 => TerminalWrite::Sent { claim: row.claim },
            1 => TerminalWrite::Retry {
                claim: row.claim,
                attempt: 1,
                delay: Duration::from_secs(60),
                error: format!("failure {i}"),
            },
            _ => TerminalWrite::Dead {
                claim: row.claim,
                attempt: 5,
                error: format!("failure {i}"),
            },
        })
        .collect();
    let written = store.finish(&writes).await.expect("finish");
    let written: HashSet<_> = written.into_iter().collect();
    let expected: HashSet<_> = claimed.iter().map(|r| r.claim).collect();
    assert_eq!(written, expected);
    let states = db.outbox_states(&layout).await;
    let expected = BTreeMap::from([
        ("sent".to_owned(), 34),
        ("pending".to_owned(), 33),
        ("dead".to_owned(), 33),
    ]);
    assert_eq!(states, expected);
    db.cleanup().await;
}

/// SCH-38: every outbox statement works on tables and columns the operator renamed.
pub(crate) async fn sch_38_outbox_statements_use_mapped_names(factory: &dyn ConformanceFactory) {
    let db = factory.fresh("sch38out").await;
    let id = |s: &str| SqlIdentifier::parse(s).expect("identifier");
    let mut layout = TableLayout {
        outbox_table: id("events_out"),
        ..TableLayout::default()
    };
    for (key, name) in [
        ("key", "msg_key"),
        ("state", "status"),
        ("sequence", "seq_no"),
        ("claimToken", "lease_token"),
        ("payload", "body"),
        ("scheduledAt", "due_at"),
        ("leaseExpiresAt", "lease_until"),
        ("lastError", "failure"),
    ] {
        assert!(layout.outbox.set(key, id(name)), "{key}");
    }
    db.create_outbox_by_hand(&layout).await;
    let a = NewOutboxRow::new("t").key("k");
    let b = NewOutboxRow::new("t").key("k");
    let c = NewOutboxRow::new("t");
    db.insert_outbox(&layout, &[a.clone(), b.clone(), c.clone()])
        .await;
    let store = db.store(layout.clone()).await;

    let first = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&first), vec![a.id, c.id]);
    let claims: Vec<_> = first.iter().map(|r| r.claim).collect();
    assert_eq!(
        store.renew(&claims, LONG_LEASE).await.expect("renew").len(),
        2
    );
    let writes = [
        TerminalWrite::Sent { claim: claims[0] },
        TerminalWrite::Retry {
            claim: claims[1],
            attempt: 1,
            delay: Duration::ZERO,
            error: "e".into(),
        },
    ];
    assert_eq!(store.finish(&writes).await.expect("finish").len(), 2);
    let second = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&second), vec![b.id, c.id]);
    let c_claim = claim_of(&second, c.id);
    assert_eq!(
        store.release(&[c_claim]).await.expect("release"),
        vec![c_claim]
    );
    assert_eq!(
        ids_of(&store.claim(10, Duration::ZERO).await.expect("claim")),
        vec![c.id]
    );
    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 1);
    let dead = TerminalWrite::Dead {
        claim: claim_of(&second, b.id),
        attempt: 0,
        error: "no route".into(),
    };
    assert_eq!(store.finish(&[dead]).await.expect("finish").len(), 1);
    let stats = store.pending_stats().await.expect("stats");
    assert_eq!(stats.pending, 1);
    let row = db.outbox_row(&layout, c.id).await;
    assert_eq!((row.attempt, row.last_error.as_deref()), (1, Some("e")));
    let states = db.outbox_states(&layout).await;
    let expected = BTreeMap::from([
        ("dead".to_owned(), 1),
        ("pending".to_owned(), 1),
        ("sent".to_owned(), 1),
    ]);
    assert_eq!(states, expected);
    db.cleanup().await;
}
