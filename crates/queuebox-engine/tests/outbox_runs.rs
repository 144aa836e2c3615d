//! The run claim in the poller against the real PostgreSQL store (outbox.md OUT-13a): one key's
//! backlog goes out in runs, strictly one row after another and in order; a failure mid-run
//! lets nothing overtake; a shutdown mid-run releases the rest. The limits below only bound a
//! hang; no check depends on how fast anything runs.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use queuebox_core::destination::Outcome;
use support::{Faulty, NewRow, Plan, Recorder, Running, TestDb, routes, settings};

const LIMIT: Duration = Duration::from_secs(60);

/// OUT-13a: 300 rows of one key with `concurrency: 8` arrive in insert order, never two at once,
/// in about 300 / keyRunLength claim cycles instead of one per row. `pollIntervalMs` is 30 s,
/// so only a run's last row finishing starts the next cycle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_13a_one_key_backlog_goes_out_in_runs_one_after_another_in_order() {
    const ROWS: usize = 300;
    let db = TestDb::new("runs300").await;
    let ids = db
        .insert(&[NewRow::new("order.created", Some("hot")); ROWS])
        .await;
    // A little publish time, so two publishes of the key at once would overlap.
    let recorder = Recorder::slow(Duration::from_millis(1));
    let store = Faulty::new(db.store().await);
    let mut s = settings();
    s.poll_interval = Duration::from_secs(30);
    s.key_run_length = 32;
    let poller = Running::start(Arc::clone(&store) as _, routes(&recorder, true), s);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    assert_eq!(recorder.ids(), ids, "insert order, each once");
    assert_eq!(recorder.max_in_flight(), 1, "one row of the key at a time");
    let claims = store.claims.load(Ordering::SeqCst);
    // 300 rows in runs of 32: 10 cycles, and one more that finds nothing. One row per claim
    // would need 300.
    assert!(claims <= 12, "{claims} claims for {ROWS} rows of one key");
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-13a with OUT-36: row 4 of a run fails once. The rows behind it are released unpublished
/// with `attempt` 0, and the key goes out as 1, 2, 3, 4 (fails), 4 (retried), 5 … 10: nothing
/// overtakes the failed row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_13a_a_failure_mid_run_releases_the_rest_and_nothing_overtakes() {
    let db = TestDb::new("runfail").await;
    let ids = db
        .insert(&[NewRow::new("order.created", Some("k")); 10])
        .await;
    let failing = ids[3];
    let recorder = Recorder::new(move |m, before| Plan {
        delay: Duration::ZERO,
        outcome: if m.id == failing && before == 0 {
            Outcome::failed("503 from the receiver")
        } else {
            Outcome::Delivered
        },
    });
    let mut s = settings();
    s.retry.base_delay_ms = 300;
    // A lease no test outlives: the rows behind the failure come back only by their release.
    s.claim_timeout = Duration::from_secs(600);
    let poller = Running::start(db.store().await, routes(&recorder, true), s);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    let seen: Vec<_> = recorder
        .deliveries()
        .iter()
        .map(|d| (d.id, d.attempt))
        .collect();
    let mut expected: Vec<_> = ids[..4].iter().map(|id| (*id, 0)).collect();
    expected.push((failing, 1));
    expected.extend(ids[4..].iter().map(|id| (*id, 0)));
    assert_eq!(seen, expected);
    for id in &ids[4..] {
        assert_eq!(db.row(*id).await.attempt, 0, "a release counts no attempt");
    }
    assert_eq!(recorder.max_in_flight(), 1);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-13a with OUT-58: a shutdown while a run is held lets the row publishing finish and
/// returns every later row of the run to `pending` at once, unattempted and without a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_13a_a_shutdown_mid_run_releases_the_unstarted_rows_of_the_run() {
    let db = TestDb::new("runstop").await;
    let ids = db
        .insert(&[NewRow::new("order.created", Some("k")); 10])
        .await;
    let recorder = Recorder::slow(Duration::from_millis(300));
    let poller = Running::start(db.store().await, routes(&recorder, true), settings());
    recorder.wait_for(1, LIMIT).await;
    // The whole key is claimed as one run: the head and the nine behind it.
    for id in &ids {
        assert_eq!(db.row(*id).await.state, "processing");
    }
    poller.stop(LIMIT).await.expect("clean stop");
    assert_eq!(recorder.ids(), vec![ids[0]]);
    assert_eq!(db.row(ids[0]).await.state, "sent");
    for id in &ids[1..] {
        let row = db.row(*id).await;
        assert_eq!(
            (row.state.as_str(), row.attempt, row.has_token),
            ("pending", 0, false)
        );
    }
    db.drop().await;
}
