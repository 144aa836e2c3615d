//! The push relay against the real PostgreSQL store (inbox.md §11): forwards push rows into the
//! outbox exactly once with the RLY-10/11 columns, leaves pull rows alone, keeps the aggregate
//! order across two relays, sends an invalid topic to dead, rolls back a forward whose claim was
//! stolen, returns a failed forward to pending, and releases unstarted rows at shutdown.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use queuebox_core::template::{Template, TemplateFields};
use queuebox_engine::EngineError;
use queuebox_engine::relay::{Relay, RelaySettings, RelaySource};
use queuebox_store::{Claim, ForwardedRow, RelayStore, Store, StoreAction, StoreError};
use queuebox_telemetry::{InboxStatus, Metrics, Table};
use support::{Hooked, InboxHooks, TestDb};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const LIMIT: Duration = Duration::from_secs(10);

/// An inbox row as an intake would have stored it, inserted with SQL so the test controls the
/// receipt order (`created_at`).
#[derive(Clone, Debug)]
struct InboxRow {
    source: &'static str,
    key: String,
    aggregate: Option<String>,
    event_type: Option<&'static str>,
    headers: &'static str,
    consumption: &'static str,
    correlation: Option<&'static str>,
}

impl InboxRow {
    fn push(key: impl Into<String>, aggregate: Option<&str>) -> Self {
        Self {
            source: "partner",
            key: key.into(),
            aggregate: aggregate.map(str::to_owned),
            event_type: Some("order.paid"),
            headers: "{}",
            consumption: "push",
            correlation: None,
        }
    }
}

/// Inserts the rows with `created_at` (and `scheduled_at`) one millisecond apart, in order, in
/// the past so they are due; returns their ids.
async fn insert(db: &TestDb, rows: &[InboxRow]) -> Vec<Uuid> {
    let mut ids = Vec::new();
    let n = rows.len() as f64;
    for (i, row) in rows.iter().enumerate() {
        let id = Uuid::now_v7();
        let ago_ms = (n - i as f64) + 1000.0;
        db.admin
            .execute(
                "INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, payload, \
                 headers, consumption, correlation_id, created_at, scheduled_at) \
                 VALUES ($1, $2, $3, $4, $5, '{\"amount\": 10}'::jsonb, $6::text::jsonb, $7, $8, \
                 now() - $9::float8 * interval '1 millisecond', \
                 now() - $9::float8 * interval '1 millisecond')",
                &[
                    &id,
                    &row.source,
                    &row.key,
                    &row.aggregate,
                    &row.event_type,
                    &row.headers,
                    &row.consumption,
                    &row.correlation,
                    &ago_ms,
                ],
            )
            .await
            .expect("insert an inbox row");
        ids.push(id);
    }
    ids
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    db.admin
        .query_one(sql, &[])
        .await
        .expect("count rows")
        .get(0)
}

async fn wait_for(db: &TestDb, sql: &str, expected: i64) {
    let started = Instant::now();
    loop {
        let n = count(db, sql).await;
        if n == expected {
            return;
        }
        assert!(started.elapsed() < LIMIT, "{sql}: {n}, expected {expected}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn source(name: &str, topic: &str) -> RelaySource {
    RelaySource {
        name: name.into(),
        topic: Template::parse(topic, TemplateFields::Source).unwrap(),
    }
}

fn settings() -> RelaySettings {
    RelaySettings {
        poll_interval: Duration::from_millis(50),
        batch_size: 10,
        claim_timeout: Duration::from_secs(30),
        pending_gauge_interval: Duration::from_millis(100),
        max_attempts: 7,
    }
}

struct Running {
    metrics: Metrics,
    outbox_wake: Arc<Notify>,
    cancel: CancellationToken,
    task: JoinHandle<Result<(), EngineError>>,
}

impl Running {
    fn start(store: Arc<dyn RelayStore>, sources: Vec<RelaySource>, s: RelaySettings) -> Self {
        let metrics = Metrics::new("test");
        let outbox_wake = Arc::new(Notify::new());
        let relay = Relay::new(
            store,
            sources,
            s,
            metrics.clone(),
            Arc::new(Notify::new()),
            Arc::clone(&outbox_wake),
        );
        let cancel = CancellationToken::new();
        let task = tokio::spawn(relay.run(cancel.clone()));
        Self {
            metrics,
            outbox_wake,
            cancel,
            task,
        }
    }

    /// Cancels, waits for `run` to return cleanly, and hands back the metrics.
    async fn stop(self) -> Metrics {
        self.cancel.cancel();
        tokio::time::timeout(LIMIT, self.task)
            .await
            .expect("the relay stops in time")
            .expect("the relay does not panic")
            .expect("the relay stops cleanly");
        self.metrics
    }
}

/// Test behaviour in front of the real store's `relay_forward`: a pause (announced by
/// `forward_started`), injected failures, or a stolen claim (another owner's token written
/// through a separate connection just before the forward). Every other call goes straight to
/// PostgreSQL.
struct Wrapped {
    forward_delay: Duration,
    forward_started: Notify,
    fail_forwards: AtomicUsize,
    thief: Option<Client>,
}

impl Wrapped {
    fn new(store: Arc<dyn Store>) -> Hooked<Self> {
        Hooked {
            store,
            hooks: Self {
                forward_delay: Duration::ZERO,
                forward_started: Notify::new(),
                fail_forwards: AtomicUsize::new(0),
                thief: None,
            },
        }
    }
}

#[async_trait]
impl InboxHooks for Wrapped {
    async fn relay_forward(
        &self,
        store: &dyn Store,
        claim: Claim,
        row: &ForwardedRow,
    ) -> Result<bool, StoreError> {
        self.forward_started.notify_one();
        tokio::time::sleep(self.forward_delay).await;
        let failing = self
            .fail_forwards
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(StoreError::Database {
                action: StoreAction::UseDatabase,
                during: "forwarding an inbox row",
                reason: "connection reset by the test; password=hunter2".into(),
            });
        }
        if let Some(thief) = &self.thief {
            thief
                .execute(
                    "UPDATE inbox SET claim_token = gen_random_uuid() WHERE id = $1",
                    &[&claim.id.0],
                )
                .await
                .expect("steal the claim");
        }
        store.relay_forward(claim, row).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rly_10_11_a_push_row_is_forwarded_once_with_its_columns_and_identity_headers() {
    support::capture_logs();
    let db = TestDb::new("relayfwd").await;
    let mut row = InboxRow::push("evt-1", Some("order-7"));
    row.headers = r#"{"X-SOURCE":"forged","x-inbox-id":"forged","X-Idempotency-Key":"forged","X-Tenant":"acme","x-count":3}"#;
    row.correlation = Some("corr-1");
    let ids = insert(&db, &[row]).await;
    let relay = Running::start(
        db.store().await,
        vec![source("partner", "partner.{{ eventType }}")],
        settings(),
    );
    wait_for(
        &db,
        "SELECT count(*) FROM inbox WHERE state = 'processed'",
        1,
    )
    .await;
    let woken = tokio::time::timeout(Duration::from_secs(1), relay.outbox_wake.notified()).await;
    assert!(woken.is_ok(), "the commit wakes the outbox poller (OUT-56)");
    // Let a few more claim cycles pass: still exactly one outbox row.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(count(&db, "SELECT count(*) FROM outbox").await, 1);
    let out = db
        .admin
        .query_one(
            "SELECT id, topic, key, payload::text, headers::text, aggregate_type, max_attempts, \
             state, attempt, scheduled_at <= now() FROM outbox",
            &[],
        )
        .await
        .unwrap();
    let out_id: Uuid = out.get(0);
    assert_ne!(out_id, ids[0], "a new id");
    assert_eq!(out.get::<_, String>(1), "partner.order.paid");
    assert_eq!(out.get::<_, Option<String>>(2).as_deref(), Some("order-7"));
    let payload: serde_json::Value = serde_json::from_str(&out.get::<_, String>(3)).unwrap();
    assert_eq!(payload, serde_json::json!({"amount": 10}));
    let headers: serde_json::Value = serde_json::from_str(&out.get::<_, String>(4)).unwrap();
    assert_eq!(
        headers,
        serde_json::json!({
            "x-inbox-id": ids[0].hyphenated().to_string(),
            "x-source": "partner",
            "x-idempotency-key": "evt-1",
            "X-Correlation-Id": "corr-1",
            "X-Tenant": "acme",
            "x-count": 3,
        })
    );
    assert_eq!(out.get::<_, Option<String>>(5), None);
    assert_eq!(out.get::<_, i32>(6), 7);
    assert_eq!(out.get::<_, String>(7), "pending");
    assert_eq!(out.get::<_, i32>(8), 0);
    assert!(out.get::<_, bool>(9));
    let inbox = db
        .admin
        .query_one(
            "SELECT processed_at IS NOT NULL, claim_token IS NULL, lease_expires_at IS NULL FROM inbox",
            &[],
        )
        .await
        .unwrap();
    assert!(inbox.get::<_, bool>(0) && inbox.get::<_, bool>(1) && inbox.get::<_, bool>(2));
    assert_eq!(
        relay.metrics.inbox_messages(InboxStatus::Forwarded).get(),
        1
    );
    // OPS-32: a relay line about a forwarded row carries both ids.
    let forwarded = lines_about_inbox(ids[0])
        .into_iter()
        .find(|l| l["messageId"] == out_id.to_string())
        .expect("a line about the forward");
    assert_eq!(forwarded["correlationId"], "corr-1");
    assert_eq!(forwarded["source"], "partner");
    relay.stop().await;
    db.drop().await;
}

/// INB-3, RLY-2; also proves PULL-2: the inbox relay never claims or changes a pull row (it stays
/// pending, with no claim token and no claimed_at, and nothing reaches the outbox for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_3_rly_2_the_relay_never_touches_pull_rows_or_rows_of_unconfigured_sources() {
    let db = TestDb::new("relaypull").await;
    let mut pull = InboxRow::push("pull-1", Some("order-1"));
    pull.consumption = "pull";
    let mut other = InboxRow::push("other-1", Some("order-2"));
    other.source = "retired";
    let push = InboxRow::push("push-1", Some("order-3"));
    insert(&db, &[pull, other, push]).await;
    let relay = Running::start(
        db.store().await,
        vec![source("partner", "{{ source }}")],
        settings(),
    );
    wait_for(
        &db,
        "SELECT count(*) FROM inbox WHERE state = 'processed'",
        1,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    relay.stop().await;
    let untouched = count(
        &db,
        "SELECT count(*) FROM inbox WHERE idempotency_key IN ('pull-1', 'other-1') \
         AND state = 'pending' AND claim_token IS NULL AND claimed_at IS NULL",
    )
    .await;
    assert_eq!(untouched, 2);
    assert_eq!(count(&db, "SELECT count(*) FROM outbox").await, 1);
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rly_3_two_relays_over_200_rows_keep_each_aggregate_in_inbox_order_in_the_outbox() {
    let db = TestDb::new("relayorder").await;
    let rows: Vec<InboxRow> = (0..200)
        .map(|i| InboxRow::push(format!("evt-{i}"), Some(&format!("agg-{}", i % 10))))
        .collect();
    insert(&db, &rows).await;
    let mut s = settings();
    s.batch_size = 7;
    let sources = || vec![source("partner", "orders.{{ eventType }}")];
    let a = Running::start(db.store().await, sources(), s.clone());
    let b = Running::start(db.store().await, sources(), s);
    wait_for(
        &db,
        "SELECT count(*) FROM inbox WHERE state = 'processed'",
        200,
    )
    .await;
    let (a, b) = (a.stop().await, b.stop().await);
    let forwarded = a.inbox_messages(InboxStatus::Forwarded).get()
        + b.inbox_messages(InboxStatus::Forwarded).get();
    assert_eq!(
        count(&db, "SELECT count(*) FROM outbox").await,
        200,
        "exactly once"
    );
    assert_eq!(forwarded, 200);
    // Per aggregate: the inbox ids in receipt order equal the outbox's x-inbox-id in sequence
    // order.
    let mismatches = count(
        &db,
        "WITH i AS (SELECT aggregate_id AS agg, id::text AS inbox_id, \
                row_number() OVER (PARTITION BY aggregate_id ORDER BY scheduled_at, created_at, id) AS n \
              FROM inbox), \
         o AS (SELECT key AS agg, headers->>'x-inbox-id' AS inbox_id, \
                row_number() OVER (PARTITION BY key ORDER BY sequence) AS n FROM outbox) \
         SELECT count(*) FROM i FULL JOIN o ON i.agg = o.agg AND i.n = o.n \
         WHERE i.inbox_id IS DISTINCT FROM o.inbox_id",
    )
    .await;
    assert_eq!(mismatches, 0);
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rly_9_an_invalid_topic_sends_the_row_to_dead_and_writes_no_outbox_row() {
    support::capture_logs();
    let db = TestDb::new("relaydead").await;
    let mut row = InboxRow::push("evt-1", Some("order-1"));
    row.event_type = None;
    let ids = insert(&db, &[row]).await;
    let relay = Running::start(
        db.store().await,
        vec![source("partner", "{{ eventType }}")],
        settings(),
    );
    wait_for(&db, "SELECT count(*) FROM inbox WHERE state = 'dead'", 1).await;
    relay.stop().await;
    let error: Option<String> = db
        .admin
        .query_one("SELECT last_error FROM inbox", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        error.as_deref(),
        Some("The topic template '{{ eventType }}' rendered an invalid topic ''.")
    );
    assert_eq!(count(&db, "SELECT count(*) FROM outbox").await, 0);
    // INB-76 / OPS-34: the warning names the row, its source and its correlation id (here the
    // inbox id, as the row has none); there is no outbox row, so no messageId.
    let warning = lines_about_inbox(ids[0])
        .into_iter()
        .find(|l| l["level"] == "WARN")
        .expect("a warning about the dead row");
    assert_eq!(warning["source"], "partner");
    assert_eq!(warning["correlationId"], ids[0].to_string());
    assert!(warning.get("messageId").is_none(), "{warning}");
    db.drop().await;
}

/// The captured log lines about one inbox row.
fn lines_about_inbox(id: Uuid) -> Vec<serde_json::Value> {
    let id = id.to_string();
    support::log_lines()
        .into_iter()
        .filter(|l| l["inboxId"].as_str() == Some(id.as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rly_9_13_a_forward_after_the_claim_was_stolen_rolls_back_and_counts_a_lost_claim() {
    let db = TestDb::new("relaystolen").await;
    let ids = insert(&db, &[InboxRow::push("evt-1", Some("order-1"))]).await;
    let (thief, connection) = tokio_postgres::connect(&support::base_url(), NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    thief
        .batch_execute(&format!("SET search_path TO \"{}\"", db.schema))
        .await
        .unwrap();
    let mut store = Wrapped::new(db.store().await);
    store.hooks.thief = Some(thief);
    let relay = Running::start(
        Arc::new(store),
        vec![source("partner", "{{ source }}")],
        settings(),
    );
    let started = Instant::now();
    while relay.metrics.claims_lost(Table::Inbox).get() == 0 {
        assert!(started.elapsed() < LIMIT, "the lost claim was not counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        relay.metrics.inbox_messages(InboxStatus::Forwarded).get(),
        0
    );
    relay.stop().await;
    assert_eq!(
        count(&db, "SELECT count(*) FROM outbox").await,
        0,
        "rolled back"
    );
    let row = db
        .admin
        .query_one(
            "SELECT state, claim_token IS NOT NULL FROM inbox WHERE id = $1",
            &[&ids[0]],
        )
        .await
        .unwrap();
    assert_eq!(
        (row.get::<_, String>(0).as_str(), row.get::<_, bool>(1)),
        ("processing", true),
        "the new owner's claim is untouched"
    );
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rly_12_a_failed_forward_returns_the_row_to_pending_with_the_redacted_error_then_forwards_it()
 {
    let db = TestDb::new("relayfail").await;
    let ids = insert(&db, &[InboxRow::push("evt-1", Some("order-1"))]).await;
    let store = Wrapped::new(db.store().await);
    store.hooks.fail_forwards.store(1, Ordering::SeqCst);
    let store = Arc::new(store);
    let mut s = settings();
    s.poll_interval = Duration::from_millis(400);
    let relay = Running::start(
        Arc::clone(&store) as _,
        vec![source("partner", "{{ source }}")],
        s,
    );
    // Between the failure and the next claim (one poll interval later), the row is pending
    // with the error, its attempt unchanged.
    wait_for(
        &db,
        "SELECT count(*) FROM inbox WHERE state = 'pending' AND last_error IS NOT NULL",
        1,
    )
    .await;
    let row = db
        .admin
        .query_one(
            "SELECT last_error, attempt, claim_token IS NULL FROM inbox WHERE id = $1",
            &[&ids[0]],
        )
        .await
        .unwrap();
    let error: String = row.get(0);
    assert!(error.contains("connection reset by the test"), "{error}");
    assert!(!error.contains("hunter2"), "redacted: {error}");
    assert_eq!(row.get::<_, i32>(1), 0);
    assert!(row.get::<_, bool>(2));
    assert_eq!(relay.metrics.inbox_relay_errors().get(), 1);
    wait_for(
        &db,
        "SELECT count(*) FROM inbox WHERE state = 'processed'",
        1,
    )
    .await;
    assert_eq!(count(&db, "SELECT count(*) FROM outbox").await, 1);
    relay.stop().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rly_15_shutdown_finishes_the_forward_in_progress_and_releases_the_other_claims() {
    let db = TestDb::new("relaystop").await;
    let rows: Vec<InboxRow> = (0..5)
        .map(|i| InboxRow::push(format!("evt-{i}"), Some(&format!("agg-{i}"))))
        .collect();
    insert(&db, &rows).await;
    let mut store = Wrapped::new(db.store().await);
    store.hooks.forward_delay = Duration::from_millis(300);
    let store = Arc::new(store);
    let relay = Running::start(
        Arc::clone(&store) as _,
        vec![source("partner", "{{ source }}")],
        settings(),
    );
    tokio::time::timeout(LIMIT, store.hooks.forward_started.notified())
        .await
        .expect("a forward starts");
    assert_eq!(
        count(&db, "SELECT count(*) FROM inbox WHERE state = 'processing'").await,
        5,
        "the whole batch is claimed"
    );
    relay.stop().await;
    assert_eq!(
        count(&db, "SELECT count(*) FROM inbox WHERE state = 'processed'").await,
        1,
        "the forward in progress finished"
    );
    assert_eq!(count(&db, "SELECT count(*) FROM outbox").await, 1);
    let released = count(
        &db,
        "SELECT count(*) FROM inbox WHERE state = 'pending' AND claim_token IS NULL \
         AND lease_expires_at IS NULL AND last_error IS NULL AND attempt = 0",
    )
    .await;
    assert_eq!(released, 4);
    db.drop().await;
}

/// OUT-56, coalesced (issue 16 item 3): the relay wakes the outbox poller once per relay batch,
/// after its forwards, not once per row. 200 forwards in batches of 50 with the poller's poll
/// interval at 30 s cost a handful of outbox claims (about one per relay batch); one wake-up
/// per forward cost about one claim per row (99,972 claims for 100,000 forwards on main).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_56_relay_forwards_cost_about_one_outbox_claim_per_relay_batch() {
    let db = TestDb::new("relaywake").await;
    let rows: Vec<InboxRow> = (0..200)
        .map(|i| InboxRow::push(format!("evt-{i}"), None))
        .collect();
    insert(&db, &rows).await;
    let counting = support::Faulty::new(db.store().await);
    let recorder = support::Recorder::accepting();
    let mut outbox = support::settings();
    outbox.poll_interval = Duration::from_secs(30);
    let poller =
        support::Running::start(counting.clone(), support::routes(&recorder, true), outbox);
    let mut s = settings();
    s.batch_size = 50;
    let metrics = Metrics::new("test");
    let relay = Relay::new(
        db.store().await,
        vec![source("partner", "partner.{{ eventType }}")],
        s,
        metrics.clone(),
        Arc::new(Notify::new()),
        Arc::clone(&poller.wake),
    );
    let cancel = CancellationToken::new();
    let task = tokio::spawn(relay.run(cancel.clone()));
    wait_for(&db, "SELECT count(*) FROM outbox WHERE state = 'sent'", 200).await;
    let claims = counting.claims.load(Ordering::SeqCst);
    assert!(
        claims <= 20,
        "200 forwards in relay batches of 50 cost {claims} outbox claims"
    );
    assert_eq!(recorder.ids().len(), 200);
    cancel.cancel();
    task.await.expect("no panic").expect("clean stop");
    poller.stop(LIMIT).await.expect("clean stop");
    db.drop().await;
}
