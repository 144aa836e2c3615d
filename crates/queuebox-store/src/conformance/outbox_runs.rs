//! The run claim in the suite (outbox.md OUT-13a): a claim's keyed row may take the next rows
//! of its key, consecutive and due, all leased to the same replica; the fence holds for it as
//! for every write, a failure or a lost lease mid-run lets nothing overtake, and two replicas
//! never share a key while a run is held.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use queuebox_core::TableLayout;
use uuid::Uuid;

use super::outbox_writes::stale;
use super::{ConformanceFactory, LONG_LEASE, NewOutboxRow, ids_of, join_all, migrated};
use crate::StoreErrorKind;
use crate::outbox::{Claim, ClaimedRow, OutboxStore, RunStart, TerminalWrite};

const HOUR_MS: i64 = 3_600_000;

async fn run_after(
    store: &dyn OutboxStore,
    after: Claim,
    limit: u32,
    lease: Duration,
) -> Vec<ClaimedRow> {
    store
        .claim_run(&[RunStart { after, limit }], lease)
        .await
        .expect("run claim")
}

async fn sent(store: &dyn OutboxStore, claim: Claim) {
    let written = store
        .finish(&[TerminalWrite::Sent { claim }])
        .await
        .expect("finish");
    assert_eq!(written, vec![claim]);
}

/// OUT-13a: a run takes the next rows of its key after a held row, in sequence order, at most
/// the limit, up to the first row that is not due; never a row of another key, never after a
/// keyless or stale row; its rows are `processing` with their own tokens and a lease, and while
/// they are held no claim takes a row of the key.
pub(crate) async fn out_13a_a_run_takes_the_next_due_rows_of_its_key_in_order(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out13arun").await;
    let layout = TableLayout::default();
    let a: Vec<NewOutboxRow> = (0..4).map(|_| NewOutboxRow::new("t").key("a")).collect();
    let a_future = NewOutboxRow::new("t").key("a").scheduled_in_ms(HOUR_MS);
    let a_after = NewOutboxRow::new("t").key("a");
    let b = NewOutboxRow::new("t").key("b");
    let keyless = NewOutboxRow::new("t");
    let mut all = a.clone();
    all.extend([
        a_future.clone(),
        a_after.clone(),
        b.clone(),
        keyless.clone(),
    ]);
    db.insert_outbox(&layout, &all).await;

    let head = store.claim(1, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&head), vec![a[0].id]);
    let first = run_after(&*store, head[0].claim, 2, LONG_LEASE).await;
    assert_eq!(ids_of(&first), vec![a[1].id, a[2].id], "the limit");
    // A run may follow any held row of the key: here its tail.
    let second = run_after(&*store, first[1].claim, 10, LONG_LEASE).await;
    assert_eq!(
        ids_of(&second),
        vec![a[3].id],
        "a run ends before the first row that is not due, and never skips it"
    );
    for row in first.iter().chain(&second) {
        let stored = db.outbox_row(&layout, row.claim.id.0).await;
        assert_eq!(stored.state, "processing");
        assert_eq!(stored.claim_token, Some(row.claim.token.0));
        assert_ne!(row.claim.token, head[0].claim.token);
        assert!(stored.lease_expires_at > Some(stored.read_at));
        assert_eq!(row.key.as_deref(), Some("a"));
    }
    assert!(
        run_after(&*store, second[0].claim, 10, LONG_LEASE)
            .await
            .is_empty(),
        "nothing due follows"
    );

    let others = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(
        ids_of(&others),
        vec![b.id, keyless.id],
        "no row of a key whose run is held"
    );
    let keyless_claim = others[1].claim;
    assert!(
        run_after(&*store, keyless_claim, 10, LONG_LEASE)
            .await
            .is_empty(),
        "a keyless row has no run"
    );
    assert!(
        run_after(&*store, stale(head[0].claim), 10, LONG_LEASE)
            .await
            .is_empty(),
        "a stale token takes nothing"
    );
    // The whole run sent in order: the future row still holds back the row behind it.
    for claim in [
        head[0].claim,
        first[0].claim,
        first[1].claim,
        second[0].claim,
    ] {
        sent(&*store, claim).await;
    }
    assert!(store.claim(10, LONG_LEASE).await.expect("claim").is_empty());
    assert_eq!(db.outbox_row(&layout, a_after.id).await.state, "pending");
    db.cleanup().await;
}

/// OUT-13a with OUT-13/OUT-36: a row of a run that fails goes to retry; the rest of the run is
/// released, `attempt` unchanged, and no later row goes before the failed one: it is the head
/// again, and the next run follows it.
pub(crate) async fn out_13a_a_failure_mid_run_lets_nothing_overtake(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out13afail").await;
    let layout = TableLayout::default();
    let a: Vec<NewOutboxRow> = (0..4).map(|_| NewOutboxRow::new("t").key("a")).collect();
    db.insert_outbox(&layout, &a).await;
    let head = store.claim(10, LONG_LEASE).await.expect("claim");
    let run = run_after(&*store, head[0].claim, 10, LONG_LEASE).await;
    assert_eq!(ids_of(&run), vec![a[1].id, a[2].id, a[3].id]);
    sent(&*store, head[0].claim).await;

    let retry = TerminalWrite::Retry {
        claim: run[0].claim,
        attempt: 1,
        delay: Duration::from_millis(HOUR_MS as u64),
        error: "e1".into(),
    };
    assert_eq!(store.finish(&[retry]).await.expect("finish").len(), 1);
    let rest = [run[1].claim, run[2].claim];
    // The released claims come back in the database's order, not the request's.
    let mut released = store.release(&rest).await.expect("release");
    released.sort_by_key(|claim| rest.iter().position(|r| r == claim));
    assert_eq!(released, rest.to_vec());
    for row in &a[2..] {
        let stored = db.outbox_row(&layout, row.id).await;
        assert_eq!((stored.state.as_str(), stored.attempt), ("pending", 0));
    }
    assert!(
        store.claim(10, LONG_LEASE).await.expect("claim").is_empty(),
        "the failed row waits for its retry and holds its key"
    );

    // Due again: it is the head, and a run behind it takes the rest in order.
    db.backdate_outbox(&layout, a[1].id, 2 * HOUR_MS).await;
    let again = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&again), vec![a[1].id]);
    assert_eq!(again[0].attempt, 1);
    let run = run_after(&*store, again[0].claim, 10, LONG_LEASE).await;
    assert_eq!(ids_of(&run), vec![a[2].id, a[3].id]);
    assert!(
        run.iter().all(|r| r.attempt == 0),
        "a release counts no attempt"
    );
    db.cleanup().await;
}

/// OUT-13a with OUT-41/OUT-46: rows of a run whose lease is lost come back through the reclaim
/// and go out behind the held row, in sequence order; a run after an expired row takes nothing;
/// stale writes to a lost run row change nothing.
pub(crate) async fn out_13a_a_lost_lease_mid_run_keeps_order_through_the_reclaim(
    factory: &dyn ConformanceFactory,
) {
    let (db, store) = migrated(factory, "out13alost").await;
    let layout = TableLayout::default();
    let a: Vec<NewOutboxRow> = (0..3).map(|_| NewOutboxRow::new("t").key("a")).collect();
    let b: Vec<NewOutboxRow> = (0..2).map(|_| NewOutboxRow::new("t").key("b")).collect();
    let mut all = a.clone();
    all.extend(b.clone());
    db.insert_outbox(&layout, &all).await;

    let heads = store.claim(1, LONG_LEASE).await.expect("claim");
    assert_eq!(ids_of(&heads), vec![a[0].id]);
    // The run's leases end at once, as if this replica had stalled past them.
    let run = run_after(&*store, heads[0].claim, 10, Duration::ZERO).await;
    assert_eq!(ids_of(&run), vec![a[1].id, a[2].id]);
    assert!(
        run_after(&*store, run[1].claim, 10, LONG_LEASE)
            .await
            .is_empty(),
        "a run never follows an expired lease"
    );
    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 2);
    assert!(
        store
            .renew(&[run[0].claim], LONG_LEASE)
            .await
            .expect("renew")
            .is_empty()
    );
    let late = TerminalWrite::Sent {
        claim: run[0].claim,
    };
    assert!(store.finish(&[late]).await.expect("finish").is_empty());

    let others = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(
        ids_of(&others),
        vec![b[0].id],
        "the held head still holds its key"
    );
    sent(&*store, heads[0].claim).await;
    let next = store.claim(10, LONG_LEASE).await.expect("claim");
    assert_eq!(
        ids_of(&next),
        vec![a[1].id],
        "reclaimed rows go out in order"
    );
    let run = run_after(&*store, next[0].claim, 10, LONG_LEASE).await;
    assert_eq!(ids_of(&run), vec![a[2].id]);
    db.cleanup().await;
}

/// OUT-13a with OUT-14: two replicas claim heads and runs of the same keys at once; no row is
/// held by both, every row goes out once, and each key goes out in sequence order.
pub(crate) async fn out_13a_two_replicas_with_runs_never_share_a_key(
    factory: &dyn ConformanceFactory,
) {
    const ROWS: usize = 120;
    const KEYS: usize = 3;
    let (db, first) = migrated(factory, "out13atwo").await;
    let layout = TableLayout::default();
    let rows: Vec<NewOutboxRow> = (0..ROWS)
        .map(|i| NewOutboxRow::new("t").key(&format!("k{}", i % KEYS)))
        .collect();
    db.insert_outbox(&layout, &rows).await;
    let second = db.store(layout.clone()).await;
    let sequence_of: HashMap<Uuid, usize> =
        rows.iter().enumerate().map(|(i, r)| (r.id, i)).collect();

    let order: Mutex<BTreeMap<String, Vec<usize>>> = Mutex::new(BTreeMap::new());
    let replicas = [&*first as &dyn OutboxStore, &*second]
        .into_iter()
        .map(|store| replica(store, &order, &sequence_of, ROWS))
        .collect();
    join_all(replicas).await;

    let order = order.into_inner().expect("order");
    assert_eq!(order.values().map(Vec::len).sum::<usize>(), ROWS);
    for (key, sent) in &order {
        assert!(
            sent.windows(2).all(|w| w[0] < w[1]),
            "key {key} went out of order: {sent:?}"
        );
    }
    let states = db.outbox_states(&layout).await;
    assert_eq!(states, BTreeMap::from([("sent".to_owned(), ROWS as i64)]));
    db.cleanup().await;
}

/// One replica of the two: claims 2 rows, runs of up to 4 behind each keyed one, and sends
/// each key's rows one after another, recording each as its `sent` commits (a row two
/// replicas held at once fails the fence of `sent`; a key shared at once goes out of order).
async fn replica(
    store: &dyn OutboxStore,
    order: &Mutex<BTreeMap<String, Vec<usize>>>,
    sequence_of: &HashMap<Uuid, usize>,
    total: usize,
) {
    let mut idle = 0;
    while order
        .lock()
        .expect("order")
        .values()
        .map(Vec::len)
        .sum::<usize>()
        < total
    {
        // A claim that lost a race with the other replica's transaction (a MySQL deadlock,
        // error 1213, seen in a full run) is tried again, as the poller does after a failed
        // claim; any other error fails the test.
        let heads = match store.claim(2, LONG_LEASE).await {
            Ok(heads) => heads,
            Err(err) if err.kind() == StoreErrorKind::Transient => {
                idle += 1;
                assert!(
                    idle < 100_000,
                    "the replicas stopped making progress: {err:?}"
                );
                tokio_yield().await;
                continue;
            }
            Err(err) => panic!("claim: {err:?}"),
        };
        if heads.is_empty() {
            idle += 1;
            assert!(idle < 100_000, "the replicas stopped making progress");
            // Lets the other replica's I/O run before this one asks again.
            tokio_yield().await;
            continue;
        }
        let starts: Vec<RunStart> = heads
            .iter()
            .filter(|h| h.key.is_some())
            .map(|h| RunStart {
                after: h.claim,
                limit: 4,
            })
            .collect();
        // A run claim that lost such a race claims nothing; the heads go out one per key, as
        // the poller sends them when its run claim fails (OUT-13a). The next round claims
        // the rest.
        let runs = match store.claim_run(&starts, LONG_LEASE).await {
            Ok(runs) => runs,
            Err(err) if err.kind() == StoreErrorKind::Transient => Vec::new(),
            Err(err) => panic!("run: {err:?}"),
        };
        let mut by_key: BTreeMap<String, Vec<ClaimedRow>> = BTreeMap::new();
        for row in heads.into_iter().chain(runs) {
            by_key
                .entry(row.key.clone().expect("keyed"))
                .or_default()
                .push(row);
        }
        for (key, rows) in &by_key {
            for row in rows {
                sent(store, row.claim).await;
                order
                    .lock()
                    .expect("order")
                    .entry(key.clone())
                    .or_default()
                    .push(sequence_of[&row.claim.id.0]);
            }
        }
    }
}

/// One turn of the scheduler without a runtime dependency: pending once, waking itself.
async fn tokio_yield() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
    .await;
}
