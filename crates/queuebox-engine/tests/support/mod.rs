//! Helpers of the outbox integration tests: a private schema per test on the real PostgreSQL
//! (QUEUEBOX_TEST_PG_URL), rows inserted as an application would, a recording test destination,
//! and a running poller.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use queuebox_core::database::{
    DatabaseConfig, DatabaseTarget, DatabaseType, PgSslMode, PostgresTarget,
};
use queuebox_core::glob::TopicGlob;
use queuebox_core::retry::RetryPolicy;
use queuebox_core::{Destination, DestinationType, Outcome, OutgoingMessage, ReadinessComponent};
use queuebox_core::{Secret, TableLayout};
use queuebox_engine::EngineError;
use queuebox_engine::outbox::{OutboxPoller, OutboxSettings, Route};
use queuebox_store::{
    Claim, ForwardedRow, InsertOutcome, IntakeStore, MigrateRequest, NewInboxRow, OutboxStore,
    RelayRow, RelayStore, RetentionRule, RetentionStore, Store, StoreError,
};
use queuebox_telemetry::Metrics;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub fn base_url() -> String {
    std::env::var("QUEUEBOX_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

fn config(schema: &str) -> DatabaseConfig {
    let url = url::Url::parse(&base_url()).expect("QUEUEBOX_TEST_PG_URL is a URL");
    let target = PostgresTarget {
        host: url.host_str().unwrap_or("127.0.0.1").to_owned(),
        port: url.port().unwrap_or(5432),
        database: Some(url.path().trim_start_matches('/').to_owned()).filter(|d| !d.is_empty()),
        user: Some(url.username().to_owned())
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "postgres".to_owned()),
        password: Secret::new(url.password().unwrap_or_default().to_owned()),
        sslmode: PgSslMode::Disable,
        sslrootcert: None,
        application_name: "queuebox-engine-test".to_owned(),
        connect_timeout_s: None,
        options: Some(format!("-c search_path={schema}")),
    };
    DatabaseConfig {
        db_type: DatabaseType::Postgresql,
        masked_url: "postgres://***@test/".to_owned(),
        host_port: format!("{}:{}", target.host, target.port),
        target: DatabaseTarget::Postgres(target),
        pool_size: 4,
        connection_timeout_ms: 5_000,
        startup_timeout_ms: 10_000,
        migrate: true,
        layout: TableLayout::default(),
    }
}

/// One test's schema, migrated, with an admin connection into it.
pub struct TestDb {
    pub schema: String,
    pub admin: Client,
}

/// A row as the test reads it back.
#[derive(Debug, Clone, PartialEq)]
pub struct RowState {
    pub state: String,
    pub attempt: i32,
    pub last_error: Option<String>,
    pub has_token: bool,
    /// `scheduled_at − updated_at`, in ms.
    pub scheduled_after_update_ms: f64,
}

impl TestDb {
    pub async fn new(name: &str) -> Self {
        let suffix = Uuid::new_v4().simple().to_string();
        let schema = format!("qbe_{name}_{}", &suffix[..8]);
        let (admin, connection) = tokio_postgres::connect(&base_url(), NoTls)
            .await
            .expect("the test PostgreSQL server answers (QUEUEBOX_TEST_PG_URL)");
        tokio::spawn(connection);
        admin
            .batch_execute(&format!(
                "CREATE SCHEMA \"{schema}\"; SET search_path TO \"{schema}\""
            ))
            .await
            .expect("create the test schema");
        let db = Self { schema, admin };
        db.store()
            .await
            .migrate(&MigrateRequest::default())
            .await
            .expect("migrate the test schema");
        db
    }

    /// A new store (its own pool), as another replica would have.
    pub async fn store(&self) -> Arc<dyn Store> {
        queuebox_store_postgres::connect(&config(&self.schema))
            .await
            .expect("connect to the test database")
    }

    /// Inserts rows in one statement (one transaction), in order; returns their ids.
    pub async fn insert(&self, rows: &[NewRow<'_>]) -> Vec<Uuid> {
        let mut ids = Vec::with_capacity(rows.len());
        let mut values = Vec::with_capacity(rows.len());
        let mut params: Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send>> = Vec::new();
        for row in rows {
            let id = Uuid::new_v4();
            ids.push(id);
            let n = params.len();
            values.push(format!(
                "(${}, ${}, ${}, ${}::text::jsonb, ${}::text::jsonb, ${}, ${})",
                n + 1,
                n + 2,
                n + 3,
                n + 4,
                n + 5,
                n + 6,
                n + 7
            ));
            params.push(Box::new(id));
            params.push(Box::new(row.topic.to_owned()));
            params.push(Box::new(row.key.map(str::to_owned)));
            params.push(Box::new(row.payload.to_owned()));
            params.push(Box::new(row.headers.to_owned()));
            params.push(Box::new(row.max_attempts));
            params.push(Box::new(row.attempt));
        }
        let sql = format!(
            "INSERT INTO outbox (id, topic, key, payload, headers, max_attempts, attempt) VALUES {}",
            values.join(", ")
        );
        let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
            .iter()
            .map(|p| &**p as &(dyn tokio_postgres::types::ToSql + Sync))
            .collect();
        self.admin
            .execute(&sql, &refs)
            .await
            .expect("insert outbox rows");
        ids
    }

    pub async fn row(&self, id: Uuid) -> RowState {
        let row = self
            .admin
            .query_one(
                "SELECT state, attempt, last_error, claim_token IS NOT NULL, \
                 (EXTRACT(EPOCH FROM scheduled_at - updated_at) * 1000)::float8 \
                 FROM outbox WHERE id = $1",
                &[&id],
            )
            .await
            .expect("read an outbox row");
        RowState {
            state: row.get(0),
            attempt: row.get(1),
            last_error: row.get(2),
            has_token: row.get(3),
            scheduled_after_update_ms: row.get(4),
        }
    }

    /// Rows per state.
    pub async fn count(&self, state: &str) -> i64 {
        self.admin
            .query_one("SELECT count(*) FROM outbox WHERE state = $1", &[&state])
            .await
            .expect("count rows")
            .get(0)
    }

    /// Waits until `done` holds for the rows, polling every 25 ms, at most `limit`.
    pub async fn wait_for_state(&self, ids: &[Uuid], state: &str, limit: Duration) {
        let started = Instant::now();
        loop {
            let rows = self
                .admin
                .query_one(
                    "SELECT count(*) FROM outbox WHERE id = ANY($1) AND state = $2",
                    &[&ids, &state],
                )
                .await
                .expect("count rows");
            let n: i64 = rows.get(0);
            if n as usize == ids.len() {
                return;
            }
            assert!(
                started.elapsed() < limit,
                "only {n} of {} rows reached {state} within {limit:?}",
                ids.len()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub async fn drop(self) {
        let _ = self
            .admin
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ))
            .await;
    }
}

/// A row to insert.
#[derive(Clone, Copy, Debug)]
pub struct NewRow<'a> {
    pub topic: &'a str,
    pub key: Option<&'a str>,
    pub payload: &'a str,
    pub headers: &'a str,
    pub max_attempts: i32,
    pub attempt: i32,
}

impl<'a> NewRow<'a> {
    pub fn new(topic: &'a str, key: Option<&'a str>) -> Self {
        Self {
            topic,
            key,
            payload: r#"{"n":1}"#,
            headers: "{}",
            max_attempts: 5,
            attempt: 0,
        }
    }
}

/// One publish the test destination saw (recorded when it starts).
#[derive(Clone, Debug)]
pub struct Delivery {
    pub id: Uuid,
    pub key: Option<String>,
    pub attempt: i32,
    pub at: Instant,
}

/// How the test destination answers one publish.
pub struct Plan {
    pub delay: Duration,
    pub outcome: Outcome,
}

type Behaviour = dyn Fn(&OutgoingMessage, usize) -> Plan + Send + Sync;

/// A recording test destination (a real destination, not a stand-in for the database): records
/// every publish, tracks how many run at once, and answers as `behaviour` says (given the
/// message and how many times this id was published before).
pub struct Recorder {
    deliveries: Mutex<Vec<Delivery>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Publishes whose future was dropped before it finished (a lost claim or an abandon).
    cancelled: AtomicUsize,
    behaviour: Box<Behaviour>,
}

impl Recorder {
    pub fn new(
        behaviour: impl Fn(&OutgoingMessage, usize) -> Plan + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            deliveries: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            cancelled: AtomicUsize::new(0),
            behaviour: Box::new(behaviour),
        })
    }

    pub fn accepting() -> Arc<Self> {
        Self::new(|_, _| Plan {
            delay: Duration::ZERO,
            outcome: Outcome::Delivered,
        })
    }

    pub fn slow(delay: Duration) -> Arc<Self> {
        Self::new(move |_, _| Plan {
            delay,
            outcome: Outcome::Delivered,
        })
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.deliveries.lock().unwrap().clone()
    }

    pub fn ids(&self) -> Vec<Uuid> {
        self.deliveries().iter().map(|d| d.id).collect()
    }

    /// Publishes started and not yet ended.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    pub fn cancelled(&self) -> usize {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` publishes started.
    pub async fn wait_for(&self, n: usize, limit: Duration) {
        let started = Instant::now();
        while self.deliveries.lock().unwrap().len() < n {
            assert!(
                started.elapsed() < limit,
                "fewer than {n} publishes within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Counts a publish that is dropped before it finishes.
struct InFlight<'a> {
    recorder: &'a Recorder,
    finished: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.recorder.in_flight.fetch_sub(1, Ordering::SeqCst);
        if !self.finished {
            self.recorder.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[async_trait]
impl Destination for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    fn kind(&self) -> DestinationType {
        DestinationType::Log
    }

    fn readiness(&self) -> Vec<ReadinessComponent> {
        Vec::new()
    }

    async fn close(&self) {}

    async fn publish(&self, message: &OutgoingMessage) -> Outcome {
        let previous = {
            let mut deliveries = self.deliveries.lock().unwrap();
            let previous = deliveries.iter().filter(|d| d.id == message.id).count();
            deliveries.push(Delivery {
                id: message.id,
                key: message.key.clone(),
                attempt: message.attempt,
                at: Instant::now(),
            });
            previous
        };
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let mut guard = InFlight {
            recorder: self,
            finished: false,
        };
        let plan = (self.behaviour)(message, previous);
        tokio::time::sleep(plan.delay).await;
        guard.finished = true;
        plan.outcome
    }
}

/// Settings fast enough for tests.
pub fn settings() -> OutboxSettings {
    OutboxSettings {
        poll_interval: Duration::from_millis(50),
        batch_size: 100,
        concurrency: 8,
        retry: RetryPolicy {
            base_delay_ms: 10,
            max_delay_ms: 5_000,
        },
        claim_timeout: Duration::from_secs(30),
        pending_gauge_interval: Duration::from_millis(200),
        shutdown_timeout: Duration::from_secs(5),
        key_run_length: 32,
    }
}

/// Routes: `order.*` and `**` (everything else) to the recorder, unless `catch_all` is false.
pub fn routes(recorder: &Arc<Recorder>, catch_all: bool) -> Vec<Route> {
    let destination = Arc::clone(recorder) as Arc<dyn Destination>;
    let mut routes = vec![Route {
        pattern: TopicGlob::parse("order.*").unwrap(),
        destination: Arc::clone(&destination),
        transforms: Default::default(),
    }];
    if catch_all {
        routes.push(Route {
            pattern: TopicGlob::parse("**").unwrap(),
            destination,
            transforms: Default::default(),
        });
    }
    routes
}

/// A running poller.
pub struct Running {
    pub cancel: CancellationToken,
    pub metrics: Metrics,
    pub wake: Arc<Notify>,
    pub task: JoinHandle<Result<(), EngineError>>,
}

impl Running {
    pub fn start(
        store: Arc<dyn OutboxStore>,
        routes: Vec<Route>,
        settings: OutboxSettings,
    ) -> Self {
        let metrics = Metrics::new("test");
        let wake = Arc::new(Notify::new());
        let poller = OutboxPoller::new(store, routes, settings, metrics.clone(), Arc::clone(&wake));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(poller.run(cancel.clone()));
        Self {
            cancel,
            metrics,
            wake,
            task,
        }
    }

    /// Cancels and waits for `run` to return; fails if it does not within `limit`.
    pub async fn stop(self, limit: Duration) -> Result<(), EngineError> {
        self.cancel.cancel();
        tokio::time::timeout(limit, self.task)
            .await
            .expect("the poller stops in time")
            .expect("the poller task does not panic")
    }
}

/// The real store with faults injected in front of it, for the failure paths the spec names
/// (OUT-18 claim failures, OUT-42 renewal failures, OUT-45 terminal-write failures): each call
/// either fails with a database error before reaching PostgreSQL, or goes through.
pub struct Faulty {
    pub inner: Arc<dyn Store>,
    /// The next this many claims fail.
    pub fail_claims: AtomicUsize,
    /// The next this many renewals fail (`usize::MAX`: all).
    pub fail_renewals: AtomicUsize,
    /// The next this many terminal writes fail.
    pub fail_finishes: AtomicUsize,
    pub claims: AtomicUsize,
    /// The `limit` of every claim, in order.
    pub asked: Mutex<Vec<u32>>,
    /// While `false`, terminal writes wait before they reach the database (a writer that is
    /// slow or stuck); `true` by default.
    pub finishes_open: tokio::sync::watch::Sender<bool>,
}

impl Faulty {
    pub fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            fail_claims: AtomicUsize::new(0),
            fail_renewals: AtomicUsize::new(0),
            fail_finishes: AtomicUsize::new(0),
            claims: AtomicUsize::new(0),
            asked: Mutex::new(Vec::new()),
            finishes_open: tokio::sync::watch::Sender::new(true),
        })
    }

    fn take(counter: &AtomicUsize) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| match n {
                0 => None,
                usize::MAX => Some(usize::MAX),
                n => Some(n - 1),
            })
            .is_ok()
    }

    fn error(during: &'static str) -> queuebox_store::StoreError {
        queuebox_store::StoreError::Database {
            action: queuebox_store::StoreAction::UseDatabase,
            during,
            reason: "connection reset by the test".into(),
        }
    }
}

#[async_trait]
impl OutboxStore for Faulty {
    async fn claim(
        &self,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<queuebox_store::ClaimedRow>, queuebox_store::StoreError> {
        self.claims.fetch_add(1, Ordering::SeqCst);
        self.asked.lock().unwrap().push(limit);
        if Self::take(&self.fail_claims) {
            return Err(Self::error("claiming outbox rows"));
        }
        self.inner.claim(limit, lease).await
    }

    async fn claim_run(
        &self,
        runs: &[queuebox_store::RunStart],
        lease: Duration,
    ) -> Result<Vec<queuebox_store::ClaimedRow>, queuebox_store::StoreError> {
        self.inner.claim_run(runs, lease).await
    }

    async fn renew(
        &self,
        claims: &[queuebox_store::Claim],
        lease: Duration,
    ) -> Result<Vec<queuebox_store::Claim>, queuebox_store::StoreError> {
        if Self::take(&self.fail_renewals) {
            return Err(Self::error("renewing outbox leases"));
        }
        self.inner.renew(claims, lease).await
    }

    async fn finish(
        &self,
        writes: &[queuebox_store::TerminalWrite],
    ) -> Result<Vec<queuebox_store::Claim>, queuebox_store::StoreError> {
        let mut open = self.finishes_open.subscribe();
        let _ = open.wait_for(|open| *open).await;
        if Self::take(&self.fail_finishes) {
            return Err(Self::error("marking outbox rows"));
        }
        self.inner.finish(writes).await
    }

    async fn release(
        &self,
        claims: &[queuebox_store::Claim],
    ) -> Result<Vec<queuebox_store::Claim>, queuebox_store::StoreError> {
        self.inner.release(claims).await
    }

    async fn reclaim_expired(&self) -> Result<u64, queuebox_store::StoreError> {
        self.inner.reclaim_expired().await
    }

    async fn pending_stats(
        &self,
    ) -> Result<queuebox_store::PendingStats, queuebox_store::StoreError> {
        self.inner.pending_stats().await
    }
}

/// Every log line of the test process, as flattened JSON objects (installed once per test
/// binary; tests find their lines by `messageId`, which is unique).
pub fn log_lines() -> Vec<serde_json::Value> {
    let buffer = LOGS.get_or_init(install_capture);
    let bytes = buffer.lock().unwrap().clone();
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Starts the capture; call before the poller logs.
pub fn capture_logs() {
    LOGS.get_or_init(install_capture);
}

/// The captured lines about one outbox row.
pub fn lines_about(id: Uuid) -> Vec<serde_json::Value> {
    let id = id.to_string();
    log_lines()
        .into_iter()
        .filter(|l| l["messageId"].as_str() == Some(id.as_str()))
        .collect()
}

static LOGS: std::sync::OnceLock<Arc<Mutex<Vec<u8>>>> = std::sync::OnceLock::new();

struct SharedWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn install_capture() -> Arc<Mutex<Vec<u8>>> {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let writer = Arc::clone(&buffer);
    let subscriber = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_writer(move || SharedWriter(Arc::clone(&writer)))
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    // Global: the poller's tasks run on the runtime's worker threads.
    let _ = tracing::subscriber::set_global_default(subscriber);
    buffer
}

/// Test behaviour in front of some calls of the real inbox store (see [`Hooked`]). Each method
/// receives the real store; one a test does not override goes straight to PostgreSQL.
#[async_trait]
pub trait InboxHooks: Send + Sync {
    async fn insert_batch(
        &self,
        store: &dyn Store,
        rows: &[NewInboxRow],
    ) -> Result<Vec<InsertOutcome>, StoreError> {
        store.insert_batch(rows).await
    }
    async fn relay_forward(
        &self,
        store: &dyn Store,
        claim: Claim,
        row: &ForwardedRow,
    ) -> Result<bool, StoreError> {
        store.relay_forward(claim, row).await
    }
    async fn retention_delete(
        &self,
        store: &dyn Store,
        rule: RetentionRule,
        batch: u32,
    ) -> Result<u64, StoreError> {
        store.retention_delete(rule, batch).await
    }
}

/// The real PostgreSQL inbox store with a test's [`InboxHooks`] in front of it.
pub struct Hooked<H> {
    pub store: Arc<dyn Store>,
    pub hooks: H,
}

#[async_trait]
impl<H: InboxHooks> IntakeStore for Hooked<H> {
    async fn insert_batch(&self, rows: &[NewInboxRow]) -> Result<Vec<InsertOutcome>, StoreError> {
        self.hooks.insert_batch(&*self.store, rows).await
    }
}

#[async_trait]
impl<H: InboxHooks> RelayStore for Hooked<H> {
    async fn relay_claim(
        &self,
        limit: u32,
        lease: Duration,
        sources: &[String],
    ) -> Result<Vec<RelayRow>, StoreError> {
        self.store.relay_claim(limit, lease, sources).await
    }
    async fn relay_renew(
        &self,
        claims: &[Claim],
        lease: Duration,
    ) -> Result<Vec<Claim>, StoreError> {
        self.store.relay_renew(claims, lease).await
    }
    async fn relay_forward(&self, claim: Claim, row: &ForwardedRow) -> Result<bool, StoreError> {
        self.hooks.relay_forward(&*self.store, claim, row).await
    }
    async fn relay_dead(&self, claim: Claim, error: &str) -> Result<bool, StoreError> {
        self.store.relay_dead(claim, error).await
    }
    async fn relay_release(
        &self,
        claims: &[Claim],
        error: Option<&str>,
    ) -> Result<Vec<Claim>, StoreError> {
        self.store.relay_release(claims, error).await
    }
    async fn relay_reclaim_expired(&self) -> Result<u64, StoreError> {
        self.store.relay_reclaim_expired().await
    }
    async fn inbox_oldest_pending_age(&self) -> Result<f64, StoreError> {
        self.store.inbox_oldest_pending_age().await
    }
    async fn inbox_backlog(&self) -> Result<queuebox_store::InboxBacklog, StoreError> {
        self.store.inbox_backlog().await
    }
}

#[async_trait]
impl<H: InboxHooks> RetentionStore for Hooked<H> {
    async fn retention_delete(&self, rule: RetentionRule, batch: u32) -> Result<u64, StoreError> {
        self.hooks.retention_delete(&*self.store, rule, batch).await
    }
}
