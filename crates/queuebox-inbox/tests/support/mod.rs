//! Test support: one isolated schema per test (clients/contract/fixtures/postgresql.sql), row
//! helpers, and a probing connection source that counts and fails connections on purpose.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use queuebox_inbox::{
    Connection, ConnectionSource, DbError, PgConnectionSource, Purpose, Schema, SqlRow, SqlValue,
    Worker, WorkerOptions,
};
use uuid::Uuid;

const FIXTURE: &str = include_str!("../../../../clients/contract/fixtures/postgresql.sql");

pub fn pg_url() -> String {
    std::env::var("QUEUEBOX_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres:test@127.0.0.1:5432/postgres".to_owned())
}

pub struct Db {
    pub schema_name: String,
    pub schema: Schema,
    pub admin: tokio_postgres::Client,
    pub pool: Pool,
}

impl Db {
    pub async fn new() -> Self {
        Self::with_schema(Schema::default()).await
    }

    pub async fn with_schema(schema: Schema) -> Self {
        let schema_name = format!("qb_rs_{}", Uuid::new_v4().simple());
        let base: tokio_postgres::Config = pg_url().parse().expect("pg url");
        let (admin, conn) = base
            .connect(tokio_postgres::NoTls)
            .await
            .expect("PostgreSQL reachable");
        tokio::spawn(conn);
        let script = queuebox_inbox::sql::substitute_identifiers(
            FIXTURE,
            &schema,
            &[("schema", &schema_name)],
        );
        admin.batch_execute(&script).await.expect("fixture");
        let mut cfg = base.clone();
        cfg.options(format!("-c search_path={schema_name}"));
        let manager = Manager::from_config(
            cfg,
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager).max_size(12).build().expect("pool");
        Self {
            schema_name,
            schema,
            admin,
            pool,
        }
    }

    pub fn t(&self) -> String {
        format!("\"{}\".\"{}\"", self.schema_name, self.schema.table)
    }

    pub fn source(&self) -> PgConnectionSource {
        PgConnectionSource::new(self.pool.clone())
    }

    pub fn worker(&self, options: WorkerOptions) -> Worker {
        Worker::new(self.source(), options).expect("valid options")
    }

    pub async fn insert(&self, row: NewRow) -> Uuid {
        let s = &self.schema;
        let sql = format!(
            "INSERT INTO {t} (\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\",\"{}\")
             VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,
                     clock_timestamp() + $11::bigint * INTERVAL '1 millisecond',
                     clock_timestamp() + $12::bigint * INTERVAL '1 millisecond')
             RETURNING \"{}\"",
            s.source, s.idempotency_key, s.consumption, s.state, s.aggregate_id, s.event_type,
            s.payload, s.headers, s.correlation_id, s.attempt, s.scheduled_at, s.created_at, s.id,
            t = self.t()
        );
        let r = self
            .admin
            .query_one(
                &sql,
                &[
                    &row.source,
                    &row.key,
                    &row.consumption,
                    &row.state,
                    &row.aggregate_id,
                    &row.event_type,
                    &row.payload,
                    &row.headers,
                    &row.correlation_id,
                    &row.attempt,
                    &row.scheduled_ms,
                    &row.created_ms,
                ],
            )
            .await
            .expect("insert");
        r.get(0)
    }

    /// Inserts `n` plain rows in creation order.
    pub async fn insert_n(&self, n: usize) -> Vec<Uuid> {
        let mut ids = Vec::new();
        for i in 0..n {
            ids.push(
                self.insert(NewRow::new(&format!("k{i}")).created(-60_000 + i as i64))
                    .await,
            );
        }
        ids
    }

    pub async fn row(&self, id: Uuid) -> RowSnap {
        let s = &self.schema;
        let sql = format!(
            "SELECT \"{}\", \"{}\", \"{}\", \"{}\" IS NOT NULL, \"{}\", \"{}\" IS NOT NULL,
                    (EXTRACT(EPOCH FROM (\"{}\" - clock_timestamp())) * 1000)::bigint
               FROM {t} WHERE \"{}\" = $1",
            s.state,
            s.attempt,
            s.claim_token,
            s.lease_expires_at,
            s.last_error,
            s.processed_at,
            s.scheduled_at,
            s.id,
            t = self.t()
        );
        let r = self.admin.query_one(&sql, &[&id]).await.expect("row");
        RowSnap {
            state: r.get(0),
            attempt: r.get(1),
            claim_token: r.get(2),
            lease_set: r.get(3),
            last_error: r.get(4),
            processed_at_set: r.get(5),
            scheduled_in_ms: r.get(6),
        }
    }

    pub async fn states(&self) -> Vec<String> {
        let sql = format!(
            "SELECT \"{}\" FROM {} ORDER BY 1",
            self.schema.state,
            self.t()
        );
        self.admin
            .query(&sql, &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// The thief of the contract cases: a new token and a long lease, written directly.
    pub async fn steal(&self, id: Uuid) -> Uuid {
        let s = &self.schema;
        let thief = Uuid::new_v4();
        let sql = format!(
            "UPDATE {t} SET \"{}\" = $1, \"{}\" = clock_timestamp() + INTERVAL '600 seconds' WHERE \"{}\" = $2",
            s.claim_token,
            s.lease_expires_at,
            s.id,
            t = self.t()
        );
        assert_eq!(self.admin.execute(&sql, &[&thief, &id]).await.unwrap(), 1);
        thief
    }

    pub async fn app_rows(&self, id: Uuid) -> i64 {
        let sql = format!(
            "SELECT count(*) FROM \"{}\".app_rows WHERE message_id = $1",
            self.schema_name
        );
        self.admin.query_one(&sql, &[&id]).await.unwrap().get(0)
    }

    pub async fn wait_state(&self, id: Uuid, state: &str, within: Duration) -> RowSnap {
        let end = Instant::now() + within;
        loop {
            let snap = self.row(id).await;
            if snap.state == state || Instant::now() > end {
                return snap;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub async fn wait_for(
        &self,
        id: Uuid,
        within: Duration,
        ok: impl Fn(&RowSnap) -> bool,
    ) -> RowSnap {
        let end = Instant::now() + within;
        loop {
            let snap = self.row(id).await;
            if ok(&snap) || Instant::now() > end {
                return snap;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub async fn wait_all(&self, state: &str, within: Duration) -> bool {
        let end = Instant::now() + within;
        loop {
            if self.states().await.iter().all(|s| s == state) {
                return true;
            }
            if Instant::now() > end {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // Best effort, on its own thread and runtime (Drop cannot await), joined so the schema
        // is gone before the test process exits.
        let sql = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.schema_name);
        let url = pg_url();
        let cleanup = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok((c, conn)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
                    tokio::spawn(conn);
                    let _ = c.batch_execute(&sql).await;
                }
            });
        });
        let _ = cleanup.join();
    }
}

#[derive(Debug, Clone)]
pub struct RowSnap {
    pub state: String,
    pub attempt: i32,
    pub claim_token: Option<Uuid>,
    pub lease_set: bool,
    pub last_error: Option<String>,
    pub processed_at_set: bool,
    pub scheduled_in_ms: i64,
}

#[derive(Debug, Clone)]
pub struct NewRow {
    pub source: String,
    pub key: String,
    pub consumption: String,
    pub state: String,
    pub aggregate_id: Option<String>,
    pub event_type: Option<String>,
    pub payload: serde_json::Value,
    pub headers: serde_json::Value,
    pub correlation_id: Option<String>,
    pub attempt: i32,
    pub scheduled_ms: i64,
    pub created_ms: i64,
}

impl NewRow {
    pub fn new(key: &str) -> Self {
        Self {
            source: "s".into(),
            key: key.into(),
            consumption: "pull".into(),
            state: "pending".into(),
            aggregate_id: None,
            event_type: None,
            payload: serde_json::json!({}),
            headers: serde_json::json!({}),
            correlation_id: None,
            attempt: 0,
            scheduled_ms: -1_000,
            created_ms: -60_000,
        }
    }
    pub fn created(mut self, ms: i64) -> Self {
        self.created_ms = ms;
        self
    }
    pub fn aggregate(mut self, a: &str) -> Self {
        self.aggregate_id = Some(a.into());
        self
    }
    pub fn attempt(mut self, a: i32) -> Self {
        self.attempt = a;
        self
    }
}

pub fn opts() -> WorkerOptions {
    let mut o = WorkerOptions::new("s");
    o.poll_interval = Duration::from_millis(50);
    o
}

/// Wraps a source: counts claims and records their parameters (an empty list for a claim whose
/// connection was refused) and sizes, counts renewals, counts transactions begun on claim connections, can fail
/// every claim, renewals until a deadline and the first handler connection, and (from `new`)
/// checks that no row is processing when a claim starts.
pub struct Probe {
    pub inner: PgConnectionSource,
    pub claims: AtomicUsize,
    pub claim_sizes: Mutex<Vec<usize>>,
    pub claim_params: Mutex<Vec<Vec<SqlValue>>>,
    pub claim_begins: AtomicUsize,
    /// Renewal connections asked for (one per renewal tick of a held row).
    pub renewals: AtomicUsize,
    pub fail_claims: AtomicBool,
    pub fail_renew_until: Mutex<Option<Instant>>,
    pub fail_next_handler: AtomicBool,
    pub check_idle: Option<(Pool, String)>,
    pub busy_at_claim: AtomicUsize,
}

impl Probe {
    pub fn new(db: &Db) -> Arc<Self> {
        Arc::new(Self::build(
            db,
            Some((db.pool.clone(), db.schema.state.clone())),
        ))
    }

    /// A probe that only observes: no query of its own before a claim.
    pub fn without_idle_check(db: &Db) -> Arc<Self> {
        Arc::new(Self::build(db, None))
    }

    fn build(db: &Db, check_idle: Option<(Pool, String)>) -> Self {
        Self {
            inner: db.source(),
            claims: AtomicUsize::new(0),
            claim_sizes: Mutex::new(Vec::new()),
            claim_params: Mutex::new(Vec::new()),
            claim_begins: AtomicUsize::new(0),
            renewals: AtomicUsize::new(0),
            fail_claims: AtomicBool::new(false),
            fail_renew_until: Mutex::new(None),
            fail_next_handler: AtomicBool::new(false),
            check_idle,
            busy_at_claim: AtomicUsize::new(0),
        }
    }

    /// The parameters of every claim so far, in order.
    pub fn claim_calls(&self) -> Vec<Vec<SqlValue>> {
        self.claim_params.lock().unwrap().clone()
    }
}

pub struct Shared(pub Arc<Probe>);

#[async_trait]
impl ConnectionSource for Shared {
    async fn connect(&self, purpose: Purpose) -> Result<Box<dyn Connection>, DbError> {
        let p = &self.0;
        match purpose {
            Purpose::Claim => {
                p.claims.fetch_add(1, Ordering::SeqCst);
                if p.fail_claims.load(Ordering::SeqCst) {
                    p.claim_params.lock().unwrap().push(Vec::new());
                    return Err("claim connection refused (test)".into());
                }
                if let Some((pool, state)) = &p.check_idle {
                    let c = pool.get().await?;
                    let sql =
                        format!("SELECT count(*) FROM inbox WHERE \"{state}\" = 'processing'");
                    let n: i64 = c.query_one(&sql, &[]).await?.get(0);
                    p.busy_at_claim.fetch_add(n as usize, Ordering::SeqCst);
                }
            }
            Purpose::Renew => {
                p.renewals.fetch_add(1, Ordering::SeqCst);
                if p.fail_renew_until
                    .lock()
                    .unwrap()
                    .is_some_and(|t| Instant::now() < t)
                {
                    return Err("renewal connection refused (test)".into());
                }
            }
            Purpose::Handler => {
                if p.fail_next_handler.swap(false, Ordering::SeqCst) {
                    return Err("handler connection refused (test)".into());
                }
            }
            Purpose::Failure => {}
        }
        let conn = p.inner.connect(purpose).await?;
        Ok(Box::new(Counting {
            conn,
            probe: p.clone(),
            purpose,
        }))
    }
}

struct Counting {
    conn: Box<dyn Connection>,
    probe: Arc<Probe>,
    purpose: Purpose,
}

#[async_trait]
impl Connection for Counting {
    async fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, DbError> {
        self.conn.execute(sql, params).await
    }
    async fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, DbError> {
        if self.purpose == Purpose::Claim {
            self.probe
                .claim_params
                .lock()
                .unwrap()
                .push(params.to_vec());
        }
        let rows = self.conn.query(sql, params).await?;
        if self.purpose == Purpose::Claim {
            self.probe.claim_sizes.lock().unwrap().push(rows.len());
        }
        Ok(rows)
    }
    async fn begin(&mut self) -> Result<(), DbError> {
        if self.purpose == Purpose::Claim {
            self.probe.claim_begins.fetch_add(1, Ordering::SeqCst);
        }
        self.conn.begin().await
    }
    async fn commit(&mut self) -> Result<(), DbError> {
        self.conn.commit().await
    }
    async fn rollback(&mut self) -> Result<(), DbError> {
        self.conn.rollback().await
    }
}

/// Captures tracing output of the current thread (tests run on a current-thread runtime).
#[derive(Clone, Default)]
pub struct Captured(pub Arc<Mutex<Vec<u8>>>);

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        let me = self.clone();
        let sub = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || me.clone())
            .finish();
        tracing::subscriber::set_default(sub)
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `worker` in the background; the returned handle yields when run returns.
pub fn spawn_run<H: queuebox_inbox::Handler>(worker: &Worker, h: H) -> tokio::task::JoinHandle<()> {
    let w = worker.clone();
    tokio::spawn(async move { w.run(h).await })
}

/// Runs `worker` with the batch handler in the background.
pub fn spawn_run_batched<H: queuebox_inbox::BatchHandler>(
    worker: &Worker,
    h: H,
) -> tokio::task::JoinHandle<()> {
    let w = worker.clone();
    tokio::spawn(async move { w.run_batched(h).await })
}

/// Stops `worker` and waits (at most 20 s) for its run to return.
pub async fn stop_and_join(worker: &Worker, run: tokio::task::JoinHandle<()>) {
    worker.stop();
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("run returns")
        .unwrap();
}
