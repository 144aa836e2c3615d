//! Leases, lost claims, the reclaim, failing statements and shutdown of the outbox poller,
//! against the real PostgreSQL store (outbox.md §9, §12, §15).

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use queuebox_telemetry::{OutboxStatus, Table};
use support::{
    Faulty, NewRow, Recorder, Running, TestDb, capture_logs, lines_about, routes, settings,
};

const LIMIT: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_44_lease_shorter_than_a_slow_publish_logs_the_duplicate_and_the_other_poller_sends_once()
 {
    capture_logs();
    let db = TestDb::new("leaselost").await;
    let mut s = settings();
    s.claim_timeout = Duration::from_millis(600);
    // Replica A cannot renew (OUT-42: not a lost claim by itself), so its lease runs out during
    // its 1.5 s publish; replica B reclaims the row and delivers it.
    let a_store = Faulty::new(db.store().await);
    a_store.fail_renewals.store(usize::MAX, Ordering::SeqCst);
    let a_dest = Recorder::slow(Duration::from_millis(1500));
    let a = Running::start(Arc::clone(&a_store) as _, routes(&a_dest, true), s.clone());
    let mut headers = NewRow::new("order.created", Some("k"));
    headers.headers = r#"{"x-correlation-id":"corr-44"}"#;
    let ids = db.insert(&[headers]).await;
    a_dest.wait_for(1, LIMIT).await;
    // A claims nothing more either, so the only other owner is B (A, still claiming, would
    // otherwise race B for the reclaimed row and deliver it again).
    a_store.fail_claims.store(usize::MAX, Ordering::SeqCst);
    let b_dest = Recorder::accepting();
    let b = Running::start(db.store().await, routes(&b_dest, true), s);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    assert_eq!(b_dest.ids(), ids, "the other replica delivered it");
    // A's publish ends, its sent mark finds the claim gone: a duplicate, counted and logged.
    let started = Instant::now();
    while a.metrics.claims_lost(Table::Outbox).get() == 0 {
        assert!(started.elapsed() < LIMIT, "A never noticed the lost claim");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(a_dest.ids(), ids);
    assert_eq!(a.metrics.outbox_messages(OutboxStatus::Sent).get(), 0);
    assert_eq!(b.metrics.outbox_messages(OutboxStatus::Sent).get(), 1);
    let reclaimed = a.metrics.outbox_reclaimed().get() + b.metrics.outbox_reclaimed().get();
    assert_eq!(reclaimed, 1, "one replica reclaimed the expired lease");
    let row = db.row(ids[0]).await;
    assert_eq!((row.state.as_str(), row.attempt), ("sent", 0));
    let duplicate = lines_about(ids[0])
        .into_iter()
        .find(|l| l["level"] == "ERROR")
        .expect("an error line about the duplicate");
    let message = duplicate["message"].as_str().unwrap();
    assert!(message.starts_with("Duplicate delivery"), "{duplicate}");
    assert_eq!(duplicate["topic"], "order.created");
    assert_eq!(duplicate["destination"], "recorder");
    assert_eq!(duplicate["attempt"], 0);
    assert_eq!(duplicate["correlationId"], "corr-44");
    a.stop(LIMIT).await.expect("clean stop");
    b.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_43_a_renewal_that_finds_the_claim_taken_stops_the_publish_and_writes_nothing() {
    let db = TestDb::new("renewlost").await;
    let mut s = settings();
    s.claim_timeout = Duration::from_millis(600);
    let dest = Recorder::slow(Duration::from_secs(5));
    let poller = Running::start(db.store().await, routes(&dest, true), s);
    let ids = db.insert(&[NewRow::new("order.created", None)]).await;
    dest.wait_for(1, LIMIT).await;
    // Another owner took the row (as after a reclaim and a new claim): a new token.
    db.admin
        .execute(
            "UPDATE outbox SET claim_token = gen_random_uuid() WHERE id = $1",
            &[&ids[0]],
        )
        .await
        .expect("steal the claim");
    let started = Instant::now();
    while dest.cancelled() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the publish was not stopped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(poller.metrics.claims_lost(Table::Outbox).get(), 1);
    let row = db.row(ids[0]).await;
    assert_eq!(
        (row.state.as_str(), row.has_token),
        ("processing", true),
        "no write"
    );
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_58_shutdown_during_a_slow_publish_releases_unstarted_rows_at_once_with_attempt_unchanged()
 {
    let db = TestDb::new("shutdown").await;
    let mut row = NewRow::new("order.created", None);
    row.attempt = 1;
    let ids = db.insert(&[row; 3]).await;
    let dest = Recorder::slow(Duration::from_millis(1500));
    let mut s = settings();
    s.concurrency = 1;
    let poller = Running::start(db.store().await, routes(&dest, true), s);
    dest.wait_for(1, LIMIT).await;
    let publishing = dest.ids()[0];
    poller.cancel.cancel();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for id in ids.iter().filter(|id| **id != publishing) {
        let r = db.row(*id).await;
        assert_eq!(
            (r.state.as_str(), r.attempt, r.has_token),
            ("pending", 1, false),
            "{id}"
        );
    }
    assert_eq!(db.row(publishing).await.state, "processing");
    poller.stop(LIMIT).await.expect("clean stop");
    // The publish in flight finished within the shutdown timeout and got its write (OUT-58.3).
    let r = db.row(publishing).await;
    assert_eq!((r.state.as_str(), r.attempt), ("sent", 1));
    assert_eq!(
        dest.ids(),
        vec![publishing],
        "no publish starts after the shutdown began"
    );
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_58_a_publish_past_the_shutdown_timeout_is_abandoned_without_a_write() {
    let db = TestDb::new("abandon").await;
    let ids = db.insert(&[NewRow::new("order.created", None)]).await;
    let dest = Recorder::slow(Duration::from_secs(10));
    let mut s = settings();
    s.shutdown_timeout = Duration::from_millis(300);
    let poller = Running::start(db.store().await, routes(&dest, true), s);
    dest.wait_for(1, LIMIT).await;
    let started = Instant::now();
    poller
        .stop(Duration::from_secs(2))
        .await
        .expect("clean stop");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(dest.cancelled(), 1, "the publish is no longer awaited");
    let r = db.row(ids[0]).await;
    assert_eq!(
        (r.state.as_str(), r.attempt, r.has_token),
        ("processing", 0, true)
    );
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_46_an_expired_lease_is_reclaimed_at_start_and_delivered_with_the_same_id() {
    let db = TestDb::new("reclaim").await;
    let ids = db.insert(&[NewRow::new("order.created", Some("k"))]).await;
    // A replica crashed after its publish and before its mark: processing, lease expired.
    db.admin
        .execute(
            "UPDATE outbox SET state = 'processing', claim_token = gen_random_uuid(), \
             claimed_at = now(), lease_expires_at = now() - interval '1 second' WHERE id = $1",
            &[&ids[0]],
        )
        .await
        .expect("simulate the crash");
    let dest = Recorder::accepting();
    let poller = Running::start(db.store().await, routes(&dest, true), settings());
    db.wait_for_state(&ids, "sent", LIMIT).await;
    assert_eq!(dest.ids(), ids, "same X-Message-Id");
    assert_eq!(
        dest.deliveries()[0].attempt,
        0,
        "a reclaim raises no attempt"
    );
    assert_eq!(poller.metrics.outbox_reclaimed().get(), 1);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_18_a_failed_claim_waits_the_poll_interval_and_tries_again() {
    let db = TestDb::new("claimfail").await;
    let ids = db.insert(&[NewRow::new("order.created", None)]).await;
    let store = Faulty::new(db.store().await);
    store.fail_claims.store(2, Ordering::SeqCst);
    let dest = Recorder::accepting();
    let mut s = settings();
    s.poll_interval = Duration::from_millis(300);
    let started = Instant::now();
    let poller = Running::start(Arc::clone(&store) as _, routes(&dest, true), s);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "retried at once: {:?}",
        started.elapsed()
    );
    assert!(
        store.claims.load(Ordering::SeqCst) >= 3,
        "two failed claims, then one that worked"
    );
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_45_a_failed_terminal_write_is_retried_while_the_lease_is_renewed() {
    let db = TestDb::new("finishretry").await;
    let ids = db.insert(&[NewRow::new("order.created", None)]).await;
    let store = Faulty::new(db.store().await);
    store.fail_finishes.store(2, Ordering::SeqCst);
    let dest = Recorder::accepting();
    let mut s = settings();
    // Shorter than the two 1 s retry gaps: only the renewal keeps the claim.
    s.claim_timeout = Duration::from_millis(900);
    let poller = Running::start(Arc::clone(&store) as _, routes(&dest, true), s);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    assert_eq!(dest.ids(), ids, "published once");
    assert_eq!(poller.metrics.outbox_process_errors().get(), 0);
    assert_eq!(poller.metrics.claims_lost(Table::Outbox).get(), 0);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_45_after_five_failed_retries_the_row_is_left_to_lease_expiry() {
    let db = TestDb::new("finishgiveup").await;
    let ids = db.insert(&[NewRow::new("order.created", None)]).await;
    let store = Faulty::new(db.store().await);
    store.fail_finishes.store(usize::MAX, Ordering::SeqCst);
    let dest = Recorder::accepting();
    let poller = Running::start(Arc::clone(&store) as _, routes(&dest, true), settings());
    let started = Instant::now();
    while poller.metrics.outbox_process_errors().get() == 0 {
        assert!(started.elapsed() < Duration::from_secs(9), "never gave up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // One try and five retries, one second apart.
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let r = db.row(ids[0]).await;
    assert_eq!((r.state.as_str(), r.has_token), ("processing", true));
    assert_eq!(dest.ids(), ids, "published once, not again");
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// Issue 17 defect 3 (OUT-43): a replica that held a row past its lease without a renewal
/// getting through (a stall, `SIGSTOP`, a database that did not answer) does not start that
/// row's publish afterwards: another replica may own it and have delivered it and its
/// successors meanwhile. The lost claim is counted and logged; the other replica delivers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_43_a_publish_is_not_started_after_the_local_lease_deadline() {
    capture_logs();
    let db = TestDb::new("leasedeadline").await;
    let mut s = settings();
    s.claim_timeout = Duration::from_millis(1000);
    s.concurrency = 1;
    // A's renewals never get through, and its first publish outlasts the lease, so the second
    // row it claimed waits for the one slot until after its lease ended.
    let a_store = Faulty::new(db.store().await);
    a_store.fail_renewals.store(usize::MAX, Ordering::SeqCst);
    let a_dest = Recorder::slow(Duration::from_millis(2000));
    let ids = db
        .insert(&[
            NewRow::new("order.created", Some("k1")),
            NewRow::new("order.created", Some("k2")),
        ])
        .await;
    let a = Running::start(Arc::clone(&a_store) as _, routes(&a_dest, true), s.clone());
    a_dest.wait_for(1, LIMIT).await;
    a_store.fail_claims.store(usize::MAX, Ordering::SeqCst);
    let started = Instant::now();
    while a.metrics.claims_lost(Table::Outbox).get() < 2 {
        assert!(
            started.elapsed() < LIMIT,
            "A never gave up the rows whose lease ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        a_dest.ids(),
        vec![ids[0]],
        "A published only the row whose lease was running when the publish started"
    );
    let expired = lines_about(ids[1])
        .into_iter()
        .find(|l| l["level"] == "WARN")
        .expect("a warning about the row A did not publish");
    assert!(
        expired["message"]
            .as_str()
            .unwrap()
            .starts_with("The lease on the message ended before its publish could start."),
        "{expired}"
    );

    let b_dest = Recorder::accepting();
    let b = Running::start(db.store().await, routes(&b_dest, true), s);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    let mut delivered = b_dest.ids();
    delivered.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(delivered, all, "B delivers both");
    a.stop(LIMIT).await.expect("clean stop");
    b.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}
