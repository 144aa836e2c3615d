//! The outbox poller's requirements, one test per id (outbox.md OUT-20, 26, 27, 32, 33, 42,
//! 53, 54, 55, 59, 60, 61; destinations.md DST-3, DST-6), against the real PostgreSQL store.

mod support;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use queuebox_core::glob::TopicGlob;
use queuebox_core::redact::redact;
use queuebox_core::{Destination, DestinationType, Outcome, OutgoingMessage, ReadinessComponent};
use queuebox_engine::outbox::Route;
use queuebox_store::{
    Claim, ClaimedRow, OutboxStore, PendingStats, Store, StoreError, TerminalWrite,
};
use queuebox_telemetry::{OutboxStatus, PublishOutcome, Table};
use support::{
    Faulty, NewRow, Plan, Recorder, Running, TestDb, capture_logs, lines_about, routes, settings,
};
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(8);

fn epoch_us(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as i64
}

/// `column` of one row as text (or NULL).
async fn text(db: &TestDb, id: Uuid, column: &str) -> Option<String> {
    db.admin
        .query_one(
            &format!("SELECT {column}::text FROM outbox WHERE id = $1"),
            &[&id],
        )
        .await
        .expect("read a column")
        .get(0)
}

/// Inserts one row naming only `topic` and `payload`, as SCH-28's minimal INSERT.
async fn insert_minimal(db: &TestDb, topic: &str) -> Uuid {
    db.admin
        .query_one(
            "INSERT INTO outbox (topic, payload) VALUES ($1, '{}') RETURNING id",
            &[&topic],
        )
        .await
        .expect("insert")
        .get(0)
}

/// One route `**` to the destination.
fn catch_all(destination: Arc<dyn Destination>) -> Vec<Route> {
    vec![Route {
        pattern: TopicGlob::parse("**").unwrap(),
        destination,
        transforms: Default::default(),
    }]
}

/// A destination that records when each publish started and ended (host clock), waits `delay`,
/// and fails every message whose topic starts with `bad`.
struct Timed {
    name: &'static str,
    kind: DestinationType,
    delay: Duration,
    spans: Mutex<Vec<(Uuid, SystemTime, Option<SystemTime>)>>,
}

impl Timed {
    fn new(name: &'static str, kind: DestinationType, delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            name,
            kind,
            delay,
            spans: Mutex::new(Vec::new()),
        })
    }

    fn spans(&self) -> Vec<(Uuid, SystemTime, Option<SystemTime>)> {
        self.spans.lock().unwrap().clone()
    }
}

#[async_trait]
impl Destination for Timed {
    fn name(&self) -> &str {
        self.name
    }

    fn kind(&self) -> DestinationType {
        self.kind
    }

    fn readiness(&self) -> Vec<ReadinessComponent> {
        Vec::new()
    }

    async fn close(&self) {}

    async fn publish(&self, message: &OutgoingMessage) -> Outcome {
        let n = {
            let mut spans = self.spans.lock().unwrap();
            spans.push((message.id, SystemTime::now(), None));
            spans.len() - 1
        };
        tokio::time::sleep(self.delay).await;
        self.spans.lock().unwrap()[n].2 = Some(SystemTime::now());
        if message.topic.starts_with("bad") {
            Outcome::failed("HTTP 500: Internal Server Error")
        } else {
            Outcome::Delivered
        }
    }
}

/// The real store, recording every claim: when, how many rows asked, how many returned.
struct Counting {
    inner: Arc<dyn Store>,
    claims: Mutex<Vec<(Instant, u32, usize)>>,
}

impl Counting {
    fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            claims: Mutex::new(Vec::new()),
        })
    }

    fn claims(&self) -> Vec<(Instant, u32, usize)> {
        self.claims.lock().unwrap().clone()
    }
}

#[async_trait]
impl OutboxStore for Counting {
    async fn claim(&self, limit: u32, lease: Duration) -> Result<Vec<ClaimedRow>, StoreError> {
        let at = Instant::now();
        let rows = self.inner.claim(limit, lease).await?;
        self.claims.lock().unwrap().push((at, limit, rows.len()));
        Ok(rows)
    }

    async fn claim_run(
        &self,
        runs: &[queuebox_store::RunStart],
        lease: Duration,
    ) -> Result<Vec<ClaimedRow>, StoreError> {
        self.inner.claim_run(runs, lease).await
    }

    async fn renew(&self, claims: &[Claim], lease: Duration) -> Result<Vec<Claim>, StoreError> {
        self.inner.renew(claims, lease).await
    }

    async fn finish(&self, writes: &[TerminalWrite]) -> Result<Vec<Claim>, StoreError> {
        self.inner.finish(writes).await
    }

    async fn release(&self, claims: &[Claim]) -> Result<Vec<Claim>, StoreError> {
        self.inner.release(claims).await
    }

    async fn reclaim_expired(&self) -> Result<u64, StoreError> {
        self.inner.reclaim_expired().await
    }

    async fn pending_stats(&self) -> Result<PendingStats, StoreError> {
        self.inner.pending_stats().await
    }
}

/// OUT-20: the row stays `processing` for the whole publish, and `sent` is written only after
/// the destination answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_20_publish_first_then_mark_sent() {
    let db = TestDb::new("out20").await;
    let id = insert_minimal(&db, "order.created").await;
    let publisher = Timed::new("slow", DestinationType::Log, Duration::from_millis(700));
    let poller = Running::start(
        db.store().await,
        catch_all(Arc::clone(&publisher) as _),
        settings(),
    );
    let started = Instant::now();
    while publisher.spans().is_empty() {
        assert!(started.elapsed() < LIMIT, "the publish never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // While the destination has not answered, the row is never sent.
    let mut samples = 0;
    while publisher.spans()[0].2.is_none() {
        let state = db.row(id).await.state;
        if publisher.spans()[0].2.is_none() {
            assert_eq!(state, "processing", "marked before the publish ended");
            samples += 1;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert!(samples >= 5, "only {samples} samples during the publish");
    db.wait_for_state(&[id], "sent", LIMIT).await;
    let ended = publisher.spans()[0].2.expect("the publish ended");
    let updated: i64 = db
        .admin
        .query_one(
            "SELECT (extract(epoch from updated_at) * 1000000)::bigint FROM outbox WHERE id = $1",
            &[&id],
        )
        .await
        .expect("updated_at")
        .get(0);
    assert!(
        updated >= epoch_us(ended),
        "sent written at {updated}, before the publish ended at {}",
        epoch_us(ended)
    );
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-26: a new row has `attempt` 0, so its first delivery carries attempt 0; the next one,
/// after a failure, carries 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_26_first_delivery_carries_attempt_zero() {
    let db = TestDb::new("out26").await;
    let id = insert_minimal(&db, "order.created").await;
    assert_eq!(db.row(id).await.attempt, 0, "the column default");
    let recorder = Recorder::new(|_, before| Plan {
        delay: Duration::ZERO,
        outcome: if before == 0 {
            Outcome::failed("HTTP 503: Service Unavailable")
        } else {
            Outcome::Delivered
        },
    });
    let poller = Running::start(db.store().await, routes(&recorder, true), settings());
    db.wait_for_state(&[id], "sent", LIMIT).await;
    let attempts: Vec<i32> = recorder.deliveries().iter().map(|d| d.attempt).collect();
    assert_eq!(attempts, vec![0, 1]);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-27: each failed delivery (a refusal, a timeout, a connection error) raises `attempt` by
/// exactly one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_27_each_failed_delivery_raises_attempt_by_one() {
    let db = TestDb::new("out27a").await;
    let id = insert_minimal(&db, "order.created").await;
    let recorder = Recorder::new(|_, before| Plan {
        delay: Duration::ZERO,
        outcome: match before {
            0 => Outcome::failed("HTTP 302: Found"),
            1 => Outcome::failed("Request timeout after 500ms"),
            2 => Outcome::failed("Connection refused"),
            _ => Outcome::Delivered,
        },
    });
    let mut s = settings();
    s.retry.base_delay_ms = 150;
    let poller = Running::start(db.store().await, routes(&recorder, true), s);
    let mut seen = Vec::new();
    let started = Instant::now();
    loop {
        let row = db.row(id).await;
        if seen.last() != Some(&row.attempt) {
            seen.push(row.attempt);
        }
        if row.state == "sent" {
            break;
        }
        assert!(started.elapsed() < LIMIT, "never sent: {row:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen, vec![0, 1, 2, 3], "one step per failure");
    let attempts: Vec<i32> = recorder.deliveries().iter().map(|d| d.attempt).collect();
    assert_eq!(attempts, vec![0, 1, 2, 3]);
    assert_eq!(
        db.row(id).await.last_error.as_deref(),
        Some("Connection refused")
    );
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-27: nothing but a failed delivery raises `attempt`: not a reclaim, not a lost claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_27_a_reclaim_and_a_lost_claim_never_raise_attempt() {
    let db = TestDb::new("out27b").await;
    let mut row = NewRow::new("order.created", None);
    row.attempt = 1;
    let ids = db.insert(&[row, row]).await;
    let (crashed, stolen) = (ids[0], ids[1]);
    // A replica crashed holding `crashed`: processing, lease expired.
    db.admin
        .execute(
            "UPDATE outbox SET state = 'processing', claim_token = gen_random_uuid(), \
             claimed_at = now(), lease_expires_at = now() - interval '1 second' WHERE id = $1",
            &[&crashed],
        )
        .await
        .expect("simulate the crash");
    let recorder = Recorder::new(move |m, _| Plan {
        delay: if m.id == stolen {
            Duration::from_secs(5)
        } else {
            Duration::ZERO
        },
        outcome: Outcome::Delivered,
    });
    let mut s = settings();
    s.claim_timeout = Duration::from_millis(600);
    s.shutdown_timeout = Duration::from_millis(200);
    let poller = Running::start(db.store().await, routes(&recorder, true), s);
    db.wait_for_state(&[crashed], "sent", LIMIT).await;
    let started = Instant::now();
    while !recorder.ids().contains(&stolen) {
        assert!(
            started.elapsed() < LIMIT,
            "the second row was never published"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    db.admin
        .execute(
            "UPDATE outbox SET claim_token = gen_random_uuid() WHERE id = $1",
            &[&stolen],
        )
        .await
        .expect("another owner takes the row");
    while poller.metrics.claims_lost(Table::Outbox).get() == 0 {
        assert!(started.elapsed() < LIMIT, "the lost claim was not noticed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(poller.metrics.outbox_reclaimed().get() >= 1);
    let reclaimed = db.row(crashed).await;
    assert_eq!((reclaimed.state.as_str(), reclaimed.attempt), ("sent", 1));
    assert_eq!(
        db.row(stolen).await.attempt,
        1,
        "a lost claim raises nothing"
    );
    assert!(
        recorder.deliveries().iter().all(|d| d.attempt == 1),
        "{:?}",
        recorder.deliveries()
    );
    assert_eq!(
        poller.metrics.outbox_messages(OutboxStatus::Failed).get(),
        0
    );
    poller.stop(LIMIT).await.expect("clean stop");
    assert_eq!(db.row(stolen).await.attempt, 1);
    db.drop().await;
}

/// OUT-32: error classes are not told apart: a 400 and a 500 both retry and both end `dead`
/// after `max_attempts` deliveries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_32_a_400_and_a_500_are_both_failed_deliveries_until_dead() {
    let db = TestDb::new("out32").await;
    let mut bad = NewRow::new("order.rejected", None);
    bad.max_attempts = 3;
    let mut down = NewRow::new("order.crashed", None);
    down.max_attempts = 3;
    let ids = db.insert(&[bad, down]).await;
    let recorder = Recorder::new(|m, _| Plan {
        delay: Duration::ZERO,
        outcome: Outcome::failed(if m.topic == "order.rejected" {
            "HTTP 400: Bad Request - invalid order"
        } else {
            "HTTP 500: Internal Server Error"
        }),
    });
    let poller = Running::start(db.store().await, routes(&recorder, true), settings());
    db.wait_for_state(&ids, "dead", LIMIT).await;
    for id in &ids {
        let attempts: Vec<i32> = recorder
            .deliveries()
            .iter()
            .filter(|d| d.id == *id)
            .map(|d| d.attempt)
            .collect();
        assert_eq!(attempts, vec![0, 1, 2], "{id}");
        assert_eq!(db.row(*id).await.attempt, 3);
    }
    assert_eq!(
        db.row(ids[0]).await.last_error.as_deref(),
        Some("HTTP 400: Bad Request - invalid order")
    );
    let m = &poller.metrics;
    assert_eq!(m.outbox_messages(OutboxStatus::Failed).get(), 4);
    assert_eq!(m.outbox_messages(OutboxStatus::Dead).get(), 2);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-33: `last_error` and the log lines carry the redacted, truncated text (credential
/// values, URL user information, bearer tokens replaced; 2000 characters ending in
/// `...[truncated]`), and a row that goes `dead` keeps its payload and headers unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_33_last_error_and_logs_are_redacted_and_dead_rows_keep_payload_and_headers() {
    capture_logs();
    let db = TestDb::new("out33").await;
    let mut failing = NewRow::new("order.created", Some("k"));
    failing.max_attempts = 2;
    failing.payload = r#"{"order": 7, "lines": [{"sku": "a", "qty": 2}], "note": "ünïcode"}"#;
    failing.headers = r#"{"X-Correlation-Id": "c-33", "x-tenant": "acme"}"#;
    let mut unrouted = NewRow::new("invoice.paid", None);
    unrouted.payload = r#"{"invoice": 9}"#;
    unrouted.headers = r#"{"x-source": "billing"}"#;
    let ids = db.insert(&[failing, unrouted]).await;
    let mut before = Vec::new();
    for id in &ids {
        before.push((
            text(&db, *id, "payload").await,
            text(&db, *id, "headers").await,
        ));
    }
    let reason = format!(
        "HTTP 500 from https://svc:pa55word@api.example.com/hook, password=hunter2 \
         rejected Bearer abcDEF123456789 then {}",
        "x".repeat(3000)
    );
    let failure = reason.clone();
    let recorder = Recorder::new(move |_, _| Plan {
        delay: Duration::ZERO,
        outcome: Outcome::failed(failure.clone()),
    });
    let poller = Running::start(db.store().await, routes(&recorder, false), settings());
    db.wait_for_state(&ids, "dead", LIMIT).await;

    let expected = redact(&reason);
    assert_eq!(expected.chars().count(), 2000);
    assert!(expected.ends_with("...[truncated]"));
    let last_error = db.row(ids[0]).await.last_error.expect("last_error");
    assert_eq!(last_error, expected);
    for secret in ["pa55word", "hunter2", "abcDEF123456789"] {
        assert!(!last_error.contains(secret), "{secret} in last_error");
    }
    // Both the retry line and the dead line, and no line about the row shows a secret.
    poller.stop(LIMIT).await.expect("clean stop");
    let lines = lines_about(ids[0]);
    let with_error: Vec<_> = lines.iter().filter(|l| l.get("error").is_some()).collect();
    assert!(with_error.len() >= 2, "{lines:#?}");
    for line in &with_error {
        assert_eq!(line["error"].as_str(), Some(expected.as_str()), "{line}");
    }
    for line in &lines {
        let text = line.to_string();
        for secret in ["pa55word", "hunter2", "abcDEF123456789"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
    for (id, (payload, headers)) in ids.iter().zip(before) {
        assert_eq!(text(&db, *id, "payload").await, payload, "{id}");
        assert_eq!(text(&db, *id, "headers").await, headers, "{id}");
    }
    db.drop().await;
}

/// OUT-42: a renewal that fails with a database error is no lost claim: the publish goes on,
/// the lease is simply not extended by it, and the next renewal extends it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_42_a_failed_renewal_is_not_a_lost_claim() {
    let db = TestDb::new("out42").await;
    let id = insert_minimal(&db, "order.created").await;
    let store = Faulty::new(db.store().await);
    store.fail_renewals.store(1, Ordering::SeqCst);
    let recorder = Recorder::slow(Duration::from_millis(2600));
    let mut s = settings();
    // Renewals every second; the first one fails.
    s.claim_timeout = Duration::from_millis(3000);
    let poller = Running::start(Arc::clone(&store) as _, routes(&recorder, true), s);
    recorder.wait_for(1, LIMIT).await;
    let lease = async || -> Option<i64> {
        db.admin
            .query_one(
                "SELECT (extract(epoch from lease_expires_at) * 1000000)::bigint FROM outbox \
                 WHERE id = $1",
                &[&id],
            )
            .await
            .expect("lease")
            .get(0)
    };
    let first = lease().await.expect("a lease while processing");
    tokio::time::sleep(Duration::from_millis(1400)).await;
    assert_eq!(
        store.fail_renewals.load(Ordering::SeqCst),
        0,
        "the failing renewal ran"
    );
    assert_eq!(
        lease().await,
        Some(first),
        "a failed renewal extends nothing"
    );
    assert_eq!(poller.metrics.claims_lost(Table::Outbox).get(), 0);
    // The next renewal (at 2 s) extends it again, before the publish ends (at 2.6 s).
    loop {
        let now = lease()
            .await
            .expect("still processing when the lease is renewed");
        if now > first {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    db.wait_for_state(&[id], "sent", LIMIT).await;
    assert_eq!(recorder.cancelled(), 0, "the publish was never stopped");
    assert_eq!(recorder.ids(), vec![id]);
    assert_eq!(poller.metrics.claims_lost(Table::Outbox).get(), 0);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-53: at most `batchSize` rows held claimed and at most `concurrency` publishes at once;
/// claimed rows take a publish slot in claim order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_53_at_most_batch_size_held_and_concurrency_publishing_in_claim_order() {
    let db = TestDb::new("out53").await;
    let ids = db.insert(&[NewRow::new("order.created", None); 9]).await;
    let mut by_sequence = Vec::new();
    for id in &ids {
        let sequence: i64 = db
            .admin
            .query_one("SELECT sequence FROM outbox WHERE id = $1", &[id])
            .await
            .expect("sequence")
            .get(0);
        by_sequence.push((sequence, *id));
    }
    by_sequence.sort();
    let claim_order: Vec<Uuid> = by_sequence.into_iter().map(|(_, id)| id).collect();
    let recorder = Recorder::slow(Duration::from_millis(150));
    let mut s = settings();
    s.batch_size = 3;
    s.concurrency = 2;
    let poller = Running::start(db.store().await, routes(&recorder, true), s);
    // Held (OUT-54's sense): waiting for a slot (processing, no publish started) plus
    // publishing (the recorder's publishes in flight). A row whose outcome is only waiting
    // for its write is processing too, so the table may show up to twice batchSize.
    let mut most_held = 0;
    let mut most_processing = 0;
    let started = Instant::now();
    while db.count("sent").await < 9 {
        let processing: Vec<Uuid> = db
            .admin
            .query("SELECT id FROM outbox WHERE state = 'processing'", &[])
            .await
            .expect("processing rows")
            .iter()
            .map(|r| r.get(0))
            .collect();
        let publish_started: HashSet<Uuid> = recorder.ids().into_iter().collect();
        let waiting = processing
            .iter()
            .filter(|id| !publish_started.contains(id))
            .count();
        most_held = most_held.max(waiting + recorder.in_flight());
        most_processing = most_processing.max(processing.len());
        assert!(started.elapsed() < LIMIT, "not all sent");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(most_held <= 3, "{most_held} rows held at once");
    assert!(most_held >= 2, "the batch was used: {most_held}");
    assert!(most_processing <= 6, "{most_processing} rows processing");
    assert_eq!(recorder.max_in_flight(), 2);
    // Two publishes may start in the same instant; beyond that, slots follow the claim order.
    let delivered = recorder.ids();
    assert_eq!(
        delivered.iter().collect::<BTreeSet<_>>(),
        claim_order.iter().collect()
    );
    let position: HashMap<Uuid, usize> = claim_order
        .iter()
        .enumerate()
        .map(|(i, id)| (*id, i))
        .collect();
    for (i, id) in delivered.iter().enumerate() {
        assert!(
            position[id].abs_diff(i) <= 1,
            "publish {i} was claimed as {}",
            position[id]
        );
    }
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-54: a claim that returns all it asked for is followed by the next cycle at once, with no
/// sleep, even with a long poll interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_54_a_full_claim_runs_the_next_cycle_without_sleeping() {
    let db = TestDb::new("out54a").await;
    let ids = db.insert(&[NewRow::new("order.created", None); 6]).await;
    let store = Counting::new(db.store().await);
    let recorder = Recorder::accepting();
    let mut s = settings();
    s.batch_size = 2;
    s.poll_interval = Duration::from_secs(5);
    let started = Instant::now();
    let poller = Running::start(Arc::clone(&store) as _, routes(&recorder, true), s);
    db.wait_for_state(&ids, "sent", LIMIT).await;
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "a full claim slept: {:?}",
        started.elapsed()
    );
    let claims = store.claims();
    assert!(claims.len() >= 3, "{claims:?}");
    assert!(
        claims.iter().all(|(_, asked, _)| *asked <= 2),
        "never more than batchSize: {claims:?}"
    );
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-54: the cycle asks for `batchSize` minus the rows held, and after a claim that returned
/// fewer rows it waits `pollIntervalMs` before the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_54_a_short_claim_asks_for_the_free_room_and_waits_the_poll_interval() {
    let db = TestDb::new("out54b").await;
    let ids = db.insert(&[NewRow::new("order.created", None)]).await;
    let store = Counting::new(db.store().await);
    let recorder = Recorder::slow(Duration::from_millis(1500));
    let mut s = settings();
    s.batch_size = 3;
    s.poll_interval = Duration::from_millis(300);
    let poller = Running::start(Arc::clone(&store) as _, routes(&recorder, true), s);
    recorder.wait_for(1, LIMIT).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let claims = store.claims();
    assert_eq!(
        (claims[0].1, claims[0].2),
        (3, 1),
        "the first claim asks for the whole batch"
    );
    let during: Vec<_> = claims[1..].to_vec();
    assert!(
        (2..=5).contains(&during.len()),
        "claims while one row is held: {during:?}"
    );
    for (_, asked, got) in &during {
        assert_eq!((*asked, *got), (2, 0), "batchSize minus the one row held");
    }
    for pair in claims.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(
            gap >= Duration::from_millis(280),
            "a short claim was followed after {gap:?}"
        );
    }
    db.wait_for_state(&ids, "sent", LIMIT).await;
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-55: in `polling` mode only the poll interval (and the in-process wake-up) ends the wait:
/// a row the application inserts while the poller sleeps waits for the next poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_55_polling_mode_finds_new_rows_at_the_next_poll_only() {
    let db = TestDb::new("out55").await;
    let store = Counting::new(db.store().await);
    let recorder = Recorder::accepting();
    let mut s = settings();
    s.poll_interval = Duration::from_millis(1200);
    let poller = Running::start(Arc::clone(&store) as _, routes(&recorder, true), s);
    let started = Instant::now();
    while store.claims().is_empty() {
        assert!(started.elapsed() < LIMIT, "no first claim");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let inserted = Instant::now();
    let id = insert_minimal(&db, "order.created").await;
    db.wait_for_state(&[id], "sent", LIMIT).await;
    let claims = store.claims();
    let (first, _, _) = claims[0];
    let (second, asked, got) = claims[1];
    assert_eq!((asked, got), (100, 1), "the second claim took the new row");
    assert!(
        second - first >= Duration::from_millis(1150),
        "the poller woke after {:?}",
        second - first
    );
    assert!(
        recorder.deliveries()[0].at - inserted >= Duration::from_millis(800),
        "delivered before the next poll"
    );
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-59: a shutdown is no failed delivery: released and abandoned rows keep their `attempt`,
/// and no failure is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_59_shutdown_never_raises_attempt_or_counts_a_failure() {
    let db = TestDb::new("out59").await;
    let mut row = NewRow::new("order.created", None);
    row.attempt = 2;
    let ids = db.insert(&[row; 3]).await;
    let recorder = Recorder::slow(Duration::from_secs(3));
    let mut s = settings();
    s.concurrency = 1;
    s.shutdown_timeout = Duration::from_millis(200);
    let poller = Running::start(db.store().await, routes(&recorder, true), s);
    recorder.wait_for(1, LIMIT).await;
    let metrics = poller.metrics.clone();
    poller.stop(LIMIT).await.expect("clean stop");
    let publishing = recorder.ids()[0];
    for id in &ids {
        let r = db.row(*id).await;
        assert_eq!(r.attempt, 2, "{id}: {r:?}");
        assert_eq!(r.last_error, None);
        let expected = if *id == publishing {
            "processing"
        } else {
            "pending"
        };
        assert_eq!(r.state, expected, "{id}");
    }
    assert_eq!(
        recorder.cancelled(),
        1,
        "the publish in flight was abandoned"
    );
    assert_eq!(metrics.outbox_messages(OutboxStatus::Failed).get(), 0);
    assert_eq!(metrics.outbox_messages(OutboxStatus::Dead).get(), 0);
    assert_eq!(
        metrics
            .destination_messages("recorder", PublishOutcome::Failure)
            .get(),
        0
    );
    db.drop().await;
}

/// OUT-60: a duplicate delivery never goes unsignalled: the reclaim that makes it possible is
/// counted, and the late `sent` mark of the first owner is counted as a lost claim and logged as
/// a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_60_every_duplicate_delivery_has_a_counter_and_a_log_line() {
    capture_logs();
    let db = TestDb::new("out60").await;
    let id = insert_minimal(&db, "order.created").await;
    let store = Faulty::new(db.store().await);
    store.fail_renewals.store(usize::MAX, Ordering::SeqCst);
    // The first publish outlives the lease; the second (after the reclaim) is quick.
    let recorder = Recorder::new(|_, before| Plan {
        delay: if before == 0 {
            Duration::from_millis(1500)
        } else {
            Duration::ZERO
        },
        outcome: Outcome::Delivered,
    });
    let mut s = settings();
    s.claim_timeout = Duration::from_millis(600);
    let poller = Running::start(Arc::clone(&store) as _, routes(&recorder, true), s);
    db.wait_for_state(&[id], "sent", LIMIT).await;
    let started = Instant::now();
    while poller.metrics.claims_lost(Table::Outbox).get() == 0 {
        assert!(started.elapsed() < LIMIT, "the late mark was not counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deliveries = recorder.ids();
    assert_eq!(deliveries, vec![id, id], "delivered twice");
    let m = &poller.metrics;
    assert!(m.outbox_reclaimed().get() >= 1);
    assert_eq!(m.claims_lost(Table::Outbox).get(), 1);
    let duplicate = lines_about(id)
        .into_iter()
        .find(|l| {
            l["level"] == "ERROR"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Duplicate delivery"))
        })
        .expect("an error line about the duplicate");
    assert_eq!(duplicate["topic"], "order.created");
    assert_eq!(m.outbox_messages(OutboxStatus::Sent).get(), 1);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// OUT-61: every log line about a row carries `messageId`, `topic`, `attempt`,
/// `correlationId` (the `X-Correlation-Id` header in any letter case, else the row id) and,
/// once routed, `destination`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_61_every_row_log_line_carries_the_row_fields() {
    capture_logs();
    let db = TestDb::new("out61").await;
    let mut failing = NewRow::new("order.created", None);
    failing.max_attempts = 2;
    failing.headers = r#"{"X-CORRELATION-ID": "corr-61"}"#;
    let delivered = NewRow::new("order.updated", None);
    let unrouted = NewRow::new("invoice.paid", None);
    let ids = db.insert(&[failing, delivered, unrouted]).await;
    let recorder = Recorder::new(|m, _| Plan {
        delay: Duration::ZERO,
        outcome: if m.topic == "order.created" {
            Outcome::failed("HTTP 500: Internal Server Error")
        } else {
            Outcome::Delivered
        },
    });
    let poller = Running::start(db.store().await, routes(&recorder, false), settings());
    db.wait_for_state(&[ids[0], ids[2]], "dead", LIMIT).await;
    db.wait_for_state(&ids[1..2], "sent", LIMIT).await;
    poller.stop(LIMIT).await.expect("clean stop");

    let expect = [
        (
            ids[0],
            "order.created",
            Some("recorder"),
            "corr-61".to_owned(),
            2,
        ),
        (
            ids[1],
            "order.updated",
            Some("recorder"),
            ids[1].to_string(),
            1,
        ),
        (ids[2], "invoice.paid", None, ids[2].to_string(), 1),
    ];
    for (id, topic, destination, correlation, at_least) in expect {
        let lines = lines_about(id);
        assert!(lines.len() >= at_least, "{id}: {lines:#?}");
        for line in &lines {
            assert_eq!(line["messageId"], id.to_string(), "{line}");
            assert_eq!(line["topic"], topic, "{line}");
            assert!(line["attempt"].is_i64(), "{line}");
            assert_eq!(line["correlationId"], correlation.as_str(), "{line}");
            match destination {
                Some(name) => assert_eq!(line["destination"], name, "{line}"),
                None => assert!(line["destination"].is_null(), "{line}"),
            }
        }
    }
    // The attempt of each line is the row's attempt at the delivery it is about.
    let attempts: BTreeSet<i64> = lines_about(ids[0])
        .iter()
        .filter_map(|l| l["attempt"].as_i64())
        .collect();
    assert_eq!(attempts, [0, 1].into_iter().collect());
    db.drop().await;
}

/// DST-3: no publish failure makes a row `dead` before its last delivery: every failure is a
/// failed delivery under OUT-28, whatever its text or `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dst_3_a_failure_never_makes_a_row_dead_before_its_last_attempt() {
    let db = TestDb::new("dst3").await;
    let mut row = NewRow::new("order.created", None);
    row.max_attempts = 4;
    let ids = db.insert(&[row]).await;
    let recorder = Recorder::new(|_, before| Plan {
        delay: Duration::ZERO,
        outcome: match before {
            0 => Outcome::failed("HTTP 400: Bad Request - permanent, do not retry"),
            1 => Outcome::Failed {
                reason: "HTTP 429: Too Many Requests".into(),
                retry_after: Some(Duration::ZERO),
            },
            2 => Outcome::failed("The message was returned as unroutable"),
            _ => Outcome::failed("HTTP 404: Not Found"),
        },
    });
    let poller = Running::start(db.store().await, routes(&recorder, true), settings());
    let mut seen: Vec<(String, i32)> = Vec::new();
    let started = Instant::now();
    loop {
        let r = db.row(ids[0]).await;
        let now = (r.state.clone(), r.attempt);
        if seen.last() != Some(&now) {
            seen.push(now);
        }
        if r.state == "dead" {
            break;
        }
        assert!(started.elapsed() < LIMIT, "never dead: {seen:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        seen.iter()
            .all(|(state, attempt)| state != "dead" || *attempt == 4),
        "{seen:?}"
    );
    assert_eq!(db.row(ids[0]).await.attempt, 4);
    let attempts: Vec<i32> = recorder.deliveries().iter().map(|d| d.attempt).collect();
    assert_eq!(attempts, vec![0, 1, 2, 3], "every delivery was made");
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}

/// DST-6: each publish records its duration under its destination type and its outcome under
/// the destination's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dst_6_each_publish_records_duration_by_type_and_outcome_by_destination() {
    let db = TestDb::new("dst6").await;
    let mut bad = NewRow::new("bad.order", None);
    bad.max_attempts = 1;
    let ids = db
        .insert(&[
            NewRow::new("order.a", None),
            NewRow::new("order.b", None),
            bad,
        ])
        .await;
    let publisher = Timed::new("billing", DestinationType::Http, Duration::from_millis(120));
    let poller = Running::start(
        db.store().await,
        catch_all(Arc::clone(&publisher) as _),
        settings(),
    );
    db.wait_for_state(&ids[..2], "sent", LIMIT).await;
    db.wait_for_state(&ids[2..], "dead", LIMIT).await;
    let m = &poller.metrics;
    assert_eq!(m.publish_duration(DestinationType::Http).count(), 3);
    assert_eq!(m.publish_duration(DestinationType::Log).count(), 0);
    assert_eq!(
        m.destination_messages("billing", PublishOutcome::Success)
            .get(),
        2
    );
    assert_eq!(
        m.destination_messages("billing", PublishOutcome::Failure)
            .get(),
        1
    );
    let text = m.render();
    let sum = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "queuebox_outbox_publish_duration_seconds_sum{destination_type=\"http\"} ",
            )
        })
        .unwrap_or_else(|| panic!("no duration sum for http in:\n{text}"))
        .parse::<f64>()
        .expect("a number");
    assert!(
        (0.36..5.0).contains(&sum),
        "three 120 ms publishes took {sum} s"
    );
    assert!(
        text.contains(
            "queuebox_outbox_destination_messages_total{destination=\"billing\",outcome=\"success\"} 2"
        ),
        "{text}"
    );
    assert_eq!(publisher.spans().len(), 3);
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}
