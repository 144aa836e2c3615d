//! The outbox poller against the real PostgreSQL store: order per key, parallel keyless rows,
//! retries, dead letters and wake-ups (outbox.md §15, the checks about the engine).

mod support;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use queuebox_core::destination::Outcome;
use queuebox_telemetry::{DestinationType, OutboxStatus, PublishOutcome, Table};
use support::{NewRow, Plan, Recorder, Running, TestDb, routes, settings};

const LIMIT: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_36_three_rows_of_one_key_arrive_in_insert_order_with_concurrency_8() {
    let db = TestDb::new("order3").await;
    let ids = db
        .insert(&[NewRow::new("order.created", Some("k")); 3])
        .await;
    let recorder = Recorder::accepting();
    let poller = Running::start(db.store().await, routes(&recorder, true), settings());
    db.wait_for_state(&ids, "sent", LIMIT).await;
    assert_eq!(recorder.ids(), ids, "insert order");
    assert_eq!(poller.metrics.outbox_messages(OutboxStatus::Sent).get(), 3);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_36_two_pollers_200_rows_over_10_keys_each_key_in_order_none_lost_none_twice() {
    let db = TestDb::new("two200").await;
    let keys: Vec<String> = (0..10).map(|k| format!("key-{k}")).collect();
    let rows: Vec<NewRow<'_>> = (0..200)
        .map(|i| NewRow::new("order.created", Some(keys[i % 10].as_str())))
        .collect();
    let ids = db.insert(&rows).await;
    // A little publish time makes the two replicas interleave on every key.
    let plan = |_: &_, _| Plan {
        delay: Duration::from_millis(2),
        outcome: Outcome::Delivered,
    };
    let (r1, r2) = (Recorder::new(plan), Recorder::new(plan));
    let mut small = settings();
    small.batch_size = 7;
    let p1 = Running::start(db.store().await, routes(&r1, true), small.clone());
    let p2 = Running::start(db.store().await, routes(&r2, true), small);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    let mut all = r1.deliveries();
    all.extend(r2.deliveries());
    assert!(
        !r1.ids().is_empty() && !r2.ids().is_empty(),
        "both replicas delivered"
    );
    all.sort_by_key(|d| d.at);
    let mut seen = HashMap::new();
    for d in &all {
        *seen.entry(d.id).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 200, "none lost");
    assert!(seen.values().all(|n| *n == 1), "none twice");
    let position: HashMap<_, _> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    for key in &keys {
        let order: Vec<usize> = all
            .iter()
            .filter(|d| d.key.as_deref() == Some(key.as_str()))
            .map(|d| position[&d.id])
            .collect();
        assert_eq!(order.len(), 20);
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "{key} out of order: {order:?}"
        );
    }
    p1.stop(LIMIT).await.expect("clean stop");
    p2.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_36_head_failing_once_holds_rows_2_and_3_until_it_is_sent() {
    let db = TestDb::new("headfail").await;
    let ids = db
        .insert(&[NewRow::new("order.created", Some("k")); 3])
        .await;
    let head = ids[0];
    let recorder = Recorder::new(move |m, before| Plan {
        delay: Duration::ZERO,
        outcome: if m.id == head && before == 0 {
            Outcome::failed("503 from the receiver")
        } else {
            Outcome::Delivered
        },
    });
    let mut s = settings();
    s.retry.base_delay_ms = 400;
    let poller = Running::start(db.store().await, routes(&recorder, true), s);
    recorder.wait_for(1, LIMIT).await;
    // While the head waits for its retry, the rest of its key stays pending.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(db.row(head).await.state, "pending");
    assert_eq!(db.row(head).await.attempt, 1);
    assert_eq!(db.row(ids[1]).await.state, "pending");
    assert_eq!(db.row(ids[2]).await.state, "pending");
    assert_eq!(recorder.ids(), vec![head]);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    let seen: Vec<_> = recorder
        .deliveries()
        .iter()
        .map(|d| (d.id, d.attempt))
        .collect();
    assert_eq!(seen, vec![(head, 0), (head, 1), (ids[1], 0), (ids[2], 0)]);
    assert_eq!(
        poller.metrics.outbox_messages(OutboxStatus::Failed).get(),
        1
    );
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_35_a_dead_head_releases_its_key() {
    let db = TestDb::new("deadhead").await;
    let mut first = NewRow::new("order.created", Some("k"));
    first.max_attempts = 1;
    let ids = db
        .insert(&[first, NewRow::new("order.created", Some("k"))])
        .await;
    let head = ids[0];
    let recorder = Recorder::new(move |m, _| Plan {
        delay: Duration::ZERO,
        outcome: if m.id == head {
            Outcome::failed("400 Bad Request")
        } else {
            Outcome::Delivered
        },
    });
    let poller = Running::start(db.store().await, routes(&recorder, true), settings());
    db.wait_for_state(&ids[1..], "sent", LIMIT).await;
    let dead = db.row(head).await;
    assert_eq!((dead.state.as_str(), dead.attempt), ("dead", 1));
    assert_eq!(dead.last_error.as_deref(), Some("400 Bad Request"));
    assert_eq!(recorder.ids(), ids);
    assert_eq!(poller.metrics.outbox_messages(OutboxStatus::Dead).get(), 1);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_37_keyless_rows_are_published_in_parallel() {
    let db = TestDb::new("keyless").await;
    let ids = db.insert(&[NewRow::new("order.created", None); 8]).await;
    let recorder = Recorder::slow(Duration::from_millis(300));
    let mut s = settings();
    s.concurrency = 4;
    let store = db.store().await;
    let started = Instant::now();
    let poller = Running::start(store, routes(&recorder, true), s);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    assert_eq!(
        recorder.max_in_flight(),
        4,
        "up to concurrency at once, never more"
    );
    // Eight 300 ms publishes, four at a time: two rounds, far from eight.
    assert!(
        started.elapsed() < Duration::from_millis(1800),
        "{:?}",
        started.elapsed()
    );
    // OUT-62: one publish duration per publish under the publisher's kind, one processing
    // duration per final write, and no row left in the queue depth.
    let m = &poller.metrics;
    assert_eq!(m.publish_duration(DestinationType::Log).count(), 8);
    assert_eq!(m.outbox_processing_duration().count(), 8);
    assert_eq!(m.queue_depth("recorder").get(), 0.0);
    assert_eq!(
        m.destination_messages("recorder", PublishOutcome::Success)
            .get(),
        8
    );
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_28_max_attempts_3_gives_x_attempt_0_1_2_then_dead_with_attempt_3() {
    let db = TestDb::new("maxatt").await;
    let mut row = NewRow::new("order.created", Some("k"));
    row.max_attempts = 3;
    let ids = db.insert(&[row]).await;
    let recorder = Recorder::new(|_, _| Plan {
        delay: Duration::ZERO,
        outcome: Outcome::failed("500 Internal Server Error, password=hunter2"),
    });
    let poller = Running::start(db.store().await, routes(&recorder, true), settings());
    db.wait_for_state(&ids, "dead", LIMIT).await;
    let attempts: Vec<i32> = recorder.deliveries().iter().map(|d| d.attempt).collect();
    assert_eq!(attempts, vec![0, 1, 2]);
    let dead = db.row(ids[0]).await;
    assert_eq!(dead.attempt, 3);
    let error = dead.last_error.expect("last_error is set");
    assert!(error.starts_with("500 Internal Server Error"), "{error}");
    assert!(!error.contains("hunter2"), "OUT-33 redaction: {error}");
    let m = &poller.metrics;
    assert_eq!(m.outbox_messages(OutboxStatus::Failed).get(), 2);
    assert_eq!(m.outbox_messages(OutboxStatus::Dead).get(), 1);
    assert_eq!(
        m.destination_messages("recorder", PublishOutcome::Failure)
            .get(),
        3
    );
    assert_eq!(m.claims_lost(Table::Outbox).get(), 0);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_30_retry_after_2_s_schedules_the_next_delivery_2_s_later() {
    let db = TestDb::new("retryafter").await;
    let ids = db.insert(&[NewRow::new("order.created", None)]).await;
    let recorder = Recorder::new(|_, before| Plan {
        delay: Duration::ZERO,
        outcome: if before == 0 {
            Outcome::Failed {
                reason: "429 Too Many Requests".into(),
                retry_after: Some(Duration::from_secs(2)),
            }
        } else {
            Outcome::Delivered
        },
    });
    let poller = Running::start(db.store().await, routes(&recorder, true), settings());
    recorder.wait_for(1, LIMIT).await;
    let started = Instant::now();
    let waiting = loop {
        let row = db.row(ids[0]).await;
        if row.attempt == 1 {
            break row;
        }
        assert!(started.elapsed() < LIMIT, "the retry was never written");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(waiting.state, "pending");
    let delay = waiting.scheduled_after_update_ms;
    assert!(
        (1995.0..2050.0).contains(&delay),
        "scheduled {delay} ms after the write"
    );
    db.wait_for_state(&ids, "sent", LIMIT).await;
    let d = recorder.deliveries();
    let gap = d[1].at - d[0].at;
    assert!(
        gap >= Duration::from_millis(1950),
        "second delivery after {gap:?}"
    );
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_23_a_topic_with_no_route_goes_dead_with_attempt_0() {
    let db = TestDb::new("noroute").await;
    let ids = db
        .insert(&[
            NewRow::new("invoice.paid", None),
            NewRow::new("order.created", None),
        ])
        .await;
    let recorder = Recorder::accepting();
    let poller = Running::start(db.store().await, routes(&recorder, false), settings());
    db.wait_for_state(&ids[..1], "dead", LIMIT).await;
    db.wait_for_state(&ids[1..], "sent", LIMIT).await;
    let dead = db.row(ids[0]).await;
    assert_eq!(dead.attempt, 0);
    assert_eq!(
        dead.last_error.as_deref(),
        Some("No route matches topic 'invoice.paid'.")
    );
    assert!(!dead.has_token);
    assert_eq!(
        recorder.ids(),
        vec![ids[1]],
        "the unrouted row is never published"
    );
    assert_eq!(poller.metrics.outbox_messages(OutboxStatus::Dead).get(), 1);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_56_a_wake_up_ends_the_idle_wait_at_once() {
    let db = TestDb::new("wake").await;
    let recorder = Recorder::accepting();
    let mut s = settings();
    s.poll_interval = Duration::from_secs(30);
    let poller = Running::start(db.store().await, routes(&recorder, true), s);
    // Let the first (empty) cycle run, so the poller sleeps its 30 s.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ids = db.insert(&[NewRow::new("order.created", None)]).await;
    let woken = Instant::now();
    poller.wake.notify_one();
    db.wait_for_state(&ids, "sent", Duration::from_secs(2))
        .await;
    assert!(
        woken.elapsed() < Duration::from_secs(1),
        "{:?}",
        woken.elapsed()
    );
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-54, third point: a keyed row this replica finishes ends the wait after a short claim,
/// so a backlog of one key moves at the pace of its deliveries, not one row per poll interval
/// (with `pollIntervalMs` 30 s, 20 rows would otherwise take about 10 minutes; the bound below
/// is 8 s). Order is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_54_a_finished_keyed_row_ends_the_wait_so_one_key_is_not_paced_by_the_poll() {
    let db = TestDb::new("hotkey").await;
    let ids = db
        .insert(&[NewRow::new("order.created", Some("hot")); 20])
        .await;
    let recorder = Recorder::accepting();
    let mut s = settings();
    s.poll_interval = Duration::from_secs(30);
    let poller = Running::start(db.store().await, routes(&recorder, true), s);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    assert_eq!(recorder.ids(), ids, "insert order");
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-54, the prefetch: with rows still waiting for a slot, the poller claims again as soon
/// as what it holds falls to the low-water mark (`max(batchSize / 2, concurrency)` = 5 here),
/// asking for `batchSize` minus what it holds; OUT-53 still bounds what it holds and publishes.
/// The old rule (claim only when no row waits) asked for 7 or more every time: it held at
/// most the row publishing and one or two finishing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_54_the_poller_claims_again_at_the_low_water_mark_while_rows_wait() {
    let db = TestDb::new("prefetch").await;
    let ids = db.insert(&[NewRow::new("order.created", None); 40]).await;
    let recorder = Recorder::slow(Duration::from_millis(20));
    let mut s = settings();
    s.batch_size = 10;
    s.concurrency = 1;
    let store = support::Faulty::new(db.store().await);
    let poller = Running::start(store.clone(), routes(&recorder, true), s);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    poller.stop(LIMIT).await.expect("clean stop");
    let asked = store.asked.lock().unwrap().clone();
    assert_eq!(asked.first(), Some(&10), "{asked:?}");
    assert!(
        asked.iter().skip(1).any(|n| *n <= 6),
        "a claim while rows still waited: {asked:?}"
    );
    assert!(asked.iter().all(|n| *n <= 10), "{asked:?}");
    assert_eq!(recorder.max_in_flight(), 1, "OUT-53");
    assert_eq!(recorder.ids().len(), 40);
    db.drop().await;
}

/// OUT-54: only rows waiting for a slot or publishing hold the next claim back. With every
/// claimed row published and its write not yet committed (the writer held here), the poller
/// claims the next batch at once, so claim, publish and write overlap instead of taking turns.
/// Once more than `batchSize` rows wait for their write, the claims wait for the writer: the
/// table never has more than twice `batchSize` rows `processing` for one replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_54_rows_waiting_for_their_write_do_not_hold_the_next_claim_back() {
    let db = TestDb::new("overlap").await;
    let ids = db.insert(&[NewRow::new("order.created", None); 20]).await;
    let recorder = Recorder::accepting();
    let mut s = settings();
    s.batch_size = 5;
    s.concurrency = 5;
    let store = support::Faulty::new(db.store().await);
    store.finishes_open.send_replace(false);
    let poller = Running::start(store.clone(), routes(&recorder, true), s);
    // The first batch publishes and its write waits. The next claim must not: a row beyond
    // the first batch gets published.
    let started = Instant::now();
    while recorder.ids().len() <= 5 {
        assert!(
            started.elapsed() < LIMIT,
            "nothing claimed while a batch waited for its write: {} published, claims asked {:?}",
            recorder.ids().len(),
            store.asked.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Soon more than batchSize rows wait for the writer: then the claims stop until it moves.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let claims = store.claims.load(Ordering::SeqCst);
    let processing = db.count("processing").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        store.claims.load(Ordering::SeqCst),
        claims,
        "a claim while {processing} rows waited for the writer: {:?}",
        store.asked.lock().unwrap()
    );
    assert_eq!(db.count("processing").await, processing);
    assert!(
        (6..=10).contains(&processing),
        "{processing} rows processing"
    );
    assert_eq!(
        recorder.ids().len() as i64,
        processing,
        "all of them published"
    );
    store.finishes_open.send_replace(true);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    assert_eq!(recorder.ids().len(), 20, "each row published once");
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn met_6_pending_gauges_are_refreshed_in_the_background() {
    let db = TestDb::new("gauges").await;
    db.insert(&[NewRow::new("order.created", None); 3]).await;
    // Pending but not due: counted by the gauge, never claimed.
    db.admin
        .execute(
            "UPDATE outbox SET scheduled_at = now() + interval '1 hour'",
            &[],
        )
        .await
        .expect("schedule later");
    let recorder = Recorder::accepting();
    let mut s = settings();
    s.pending_gauge_interval = Duration::from_millis(100);
    let poller = Running::start(db.store().await, routes(&recorder, true), s);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let text = poller.metrics.render();
    assert!(
        text.contains("queuebox_outbox_messages_pending 3"),
        "{text}"
    );
    assert!(
        text.contains("queuebox_outbox_oldest_pending_age_seconds 0"),
        "{text}"
    );
    assert!(recorder.ids().is_empty());
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}
