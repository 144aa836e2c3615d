//! Test support for the SQLite and MySQL/MariaDB contract cases: a fresh file database (SQLite)
//! or a fresh database `qb_clients_rs_<hex>` (MariaDB on 127.0.0.1:3306, or
//! `QUEUEBOX_TEST_MYSQL_URL`) per test, created from clients/contract/fixtures/<dialect>.sql;
//! row helpers that run through the adapter under test; and a probing connection source that
//! counts and fails connections on purpose.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use queuebox_inbox::{
    Connection, ConnectionSource, DbError, Dialect, MysqlConnectionSource, Purpose, Schema, SqlRow,
    SqlValue, SqliteConnectionSource, Worker, WorkerOptions,
};
use uuid::Uuid;

const SQLITE_FIXTURE: &str = include_str!("../../../../clients/contract/fixtures/sqlite.sql");
const MYSQL_FIXTURE: &str = include_str!("../../../../clients/contract/fixtures/mysql.sql");

/// The database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Mysql,
}

impl Kind {
    pub fn dialect(self) -> Dialect {
        match self {
            Kind::Sqlite => Dialect::Sqlite,
            Kind::Mysql => Dialect::Mysql,
        }
    }
}

pub fn mysql_url() -> String {
    std::env::var("QUEUEBOX_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_owned())
}

/// A source shared by the test's own queries and its workers.
#[derive(Clone)]
pub struct Src(pub Arc<dyn ConnectionSource>);

#[async_trait]
impl ConnectionSource for Src {
    async fn connect(&self, purpose: Purpose) -> Result<Box<dyn Connection>, DbError> {
        self.0.connect(purpose).await
    }
}

pub struct Db {
    pub kind: Kind,
    /// Makes source names unique per test on MySQL (see [`Db::source_name`]).
    tag: String,
    pub schema: Schema,
    src: Src,
    /// SQLite: the folder of the database file, removed on drop.
    dir: Option<PathBuf>,
    /// MySQL: the database, dropped on drop.
    database: Option<String>,
}

/// Comment lines out, then one statement per `;` at a line end.
fn statements(script: &str) -> Vec<String> {
    let body: Vec<&str> = script
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect();
    body.join("\n")
        .split(";\n")
        .map(|s| s.trim().trim_end_matches(';').trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

impl Db {
    pub async fn new(kind: Kind) -> Self {
        Self::with_schema(kind, Schema::default()).await
    }

    pub async fn with_schema(kind: Kind, schema: Schema) -> Self {
        let tag = Uuid::new_v4().simple().to_string();
        let (src, dir, database, fixture) = match kind {
            Kind::Sqlite => {
                let dir = std::env::temp_dir().join(format!("qb_clients_rs_{tag}"));
                std::fs::create_dir_all(&dir).unwrap();
                let file = dir.join("inbox.db");
                // The adapter opens existing files only: create the file first.
                std::fs::File::create(&file).unwrap();
                let src = Src(Arc::new(SqliteConnectionSource::new(&file)));
                (src, Some(dir), None, SQLITE_FIXTURE)
            }
            Kind::Mysql => {
                let name = format!("qb_clients_rs_{}", &tag[..16]);
                let base = MysqlConnectionSource::from_url(&mysql_url()).expect("mysql url");
                let mut admin = base
                    .connect(Purpose::Failure)
                    .await
                    .expect("MariaDB reachable on QUEUEBOX_TEST_MYSQL_URL or 127.0.0.1:3306");
                admin
                    .execute(&format!("CREATE DATABASE `{name}`"), &[])
                    .await
                    .unwrap();
                drop(admin);
                let opts = mysql_async::OptsBuilder::from_opts(
                    mysql_async::Opts::from_url(&mysql_url()).unwrap(),
                )
                .db_name(Some(name.clone()));
                let src = Src(Arc::new(MysqlConnectionSource::new(opts)));
                (src, None, Some(name), MYSQL_FIXTURE)
            }
        };
        let script = queuebox_inbox::sql::substitute_identifiers(fixture, &schema, &[]);
        let mut c = src.connect(Purpose::Failure).await.unwrap();
        for statement in statements(&script) {
            c.execute(&statement, &[])
                .await
                .unwrap_or_else(|e| panic!("fixture statement failed: {e}\n{statement}"));
        }
        Self {
            kind,
            tag: tag[..12].to_owned(),
            schema,
            src,
            dir,
            database,
        }
    }

    /// The stored source name for a case's source (`s`, `t`). MySQL's claim lock is a named
    /// lock of the whole server, `queuebox_pull:` + SHA-256 of `<table>:<source>` (pull.md
    /// §5.3), so the same table and source in two databases share one lock: tests that run at
    /// the same time on one server use their own source names, or one test's held lock (C19,
    /// C20) would stall the others.
    pub fn source_name(&self, case_source: &str) -> String {
        match self.kind {
            Kind::Sqlite => case_source.to_owned(),
            Kind::Mysql => format!("{case_source}_{}", self.tag),
        }
    }

    pub fn source(&self) -> Src {
        self.src.clone()
    }

    /// The options every case starts from: this database's dialect and schema, a quick poll.
    pub fn opts(&self) -> WorkerOptions {
        let mut o = WorkerOptions::new(self.source_name("s"));
        o.poll_interval = Duration::from_millis(50);
        o.dialect = self.kind.dialect();
        o.schema = self.schema.clone();
        o
    }

    pub fn worker(&self, options: WorkerOptions) -> Worker {
        Worker::new(self.source(), options).expect("valid options")
    }

    /// `name` quoted for the dialect.
    pub fn q(&self, name: &str) -> String {
        match self.kind {
            Kind::Sqlite => format!("\"{name}\""),
            Kind::Mysql => format!("`{name}`"),
        }
    }

    pub fn t(&self) -> String {
        self.q(&self.schema.table)
    }

    /// The database clock plus `?` milliseconds (PULL-7).
    pub fn now_plus_param(&self) -> &'static str {
        match self.kind {
            Kind::Sqlite => {
                "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', ? / 1000.0))"
            }
            Kind::Mysql => "UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND",
        }
    }

    /// The handler's application insert, in the driver's parameter style.
    pub fn app_insert(&self) -> &'static str {
        "INSERT INTO app_rows (message_id) VALUES (?)"
    }

    pub async fn exec(&self, sql: &str, params: &[SqlValue]) -> u64 {
        let mut c = self.src.connect(Purpose::Failure).await.unwrap();
        c.execute(sql, params)
            .await
            .unwrap_or_else(|e| panic!("{e}: {sql}"))
    }

    pub async fn query(&self, sql: &str, params: &[SqlValue]) -> Vec<SqlRow> {
        let mut c = self.src.connect(Purpose::Failure).await.unwrap();
        c.query(sql, params)
            .await
            .unwrap_or_else(|e| panic!("{e}: {sql}"))
    }

    pub async fn insert(&self, row: NewRow) -> Uuid {
        let s = &self.schema;
        let id = Uuid::new_v4();
        let cols = [
            &s.id,
            &s.source,
            &s.idempotency_key,
            &s.consumption,
            &s.state,
            &s.aggregate_id,
            &s.event_type,
            &s.payload,
            &s.headers,
            &s.correlation_id,
            &s.attempt,
            &s.scheduled_at,
            &s.created_at,
        ]
        .map(|c| self.q(c))
        .join(", ");
        let now = self.now_plus_param();
        let sql = format!(
            "INSERT INTO {} ({cols}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {now}, {now})",
            self.t()
        );
        let payload = row
            .payload_text
            .clone()
            .unwrap_or_else(|| row.payload.to_string());
        self.exec(
            &sql,
            &[
                id.into(),
                self.source_name(&row.source).into(),
                row.key.into(),
                row.consumption.into(),
                row.state.into(),
                row.aggregate_id.into(),
                row.event_type.into(),
                payload.into(),
                row.headers.to_string().into(),
                row.correlation_id.into(),
                row.attempt.into(),
                row.scheduled_ms.into(),
                row.created_ms.into(),
            ],
        )
        .await;
        id
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
        let ahead = match self.kind {
            Kind::Sqlite => format!(
                "CAST((julianday({}) - julianday('now')) * 86400000 AS INTEGER)",
                self.q(&s.scheduled_at)
            ),
            Kind::Mysql => format!(
                "TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), {}) DIV 1000",
                self.q(&s.scheduled_at)
            ),
        };
        let sql = format!(
            "SELECT {}, {}, {}, {} IS NOT NULL, {}, {} IS NOT NULL, {ahead} FROM {} WHERE {} = ?",
            self.q(&s.state),
            self.q(&s.attempt),
            self.q(&s.claim_token),
            self.q(&s.lease_expires_at),
            self.q(&s.last_error),
            self.q(&s.processed_at),
            self.t(),
            self.q(&s.id),
        );
        let mut rows = self.query(&sql, &[id.into()]).await;
        assert_eq!(rows.len(), 1, "row {id}");
        let r = rows.remove(0);
        RowSnap {
            state: text(&r[0]).unwrap(),
            attempt: int(&r[1]) as i32,
            claim_token: text(&r[2]).map(|t| Uuid::parse_str(&t).unwrap()),
            lease_set: int(&r[3]) == 1,
            last_error: text(&r[4]),
            processed_at_set: int(&r[5]) == 1,
            scheduled_in_ms: int(&r[6]),
        }
    }

    /// The stored `created_at` of a row, as the database keeps it.
    pub async fn created_at(&self, id: Uuid) -> SqlValue {
        let sql = format!(
            "SELECT {} FROM {} WHERE {} = ?",
            self.q(&self.schema.created_at),
            self.t(),
            self.q(&self.schema.id)
        );
        self.query(&sql, &[id.into()]).await.remove(0).remove(0)
    }

    pub async fn states(&self) -> Vec<String> {
        let sql = format!(
            "SELECT {} FROM {} ORDER BY 1",
            self.q(&self.schema.state),
            self.t()
        );
        self.query(&sql, &[])
            .await
            .iter()
            .map(|r| text(&r[0]).unwrap())
            .collect()
    }

    /// The thief of the contract cases: a new token and a long lease, written directly.
    pub async fn steal(&self, id: Uuid) -> Uuid {
        let s = &self.schema;
        let thief = Uuid::new_v4();
        let sql = format!(
            "UPDATE {} SET {} = ?, {} = {} WHERE {} = ?",
            self.t(),
            self.q(&s.claim_token),
            self.q(&s.lease_expires_at),
            self.now_plus_param(),
            self.q(&s.id),
        );
        let n = self
            .exec(&sql, &[thief.into(), 600_000i64.into(), id.into()])
            .await;
        assert_eq!(n, 1);
        thief
    }

    /// Sets a row to processing under `token` with a live lease, as a claim would.
    pub async fn hold(&self, id: Uuid, token: Uuid, lease_ms: i64) {
        let s = &self.schema;
        let sql = format!(
            "UPDATE {} SET {} = 'processing', {} = ?, {} = {} WHERE {} = ?",
            self.t(),
            self.q(&s.state),
            self.q(&s.claim_token),
            self.q(&s.lease_expires_at),
            self.now_plus_param(),
            self.q(&s.id),
        );
        assert_eq!(
            self.exec(&sql, &[token.into(), lease_ms.into(), id.into()])
                .await,
            1
        );
    }

    pub async fn app_rows(&self, id: Uuid) -> i64 {
        let rows = self
            .query(
                "SELECT count(*) FROM app_rows WHERE message_id = ?",
                &[id.into()],
            )
            .await;
        int(&rows[0][0])
    }

    pub async fn wait_state(&self, id: Uuid, state: &str, within: Duration) -> RowSnap {
        self.wait_for(id, within, |s| s.state == state).await
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
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some(name) = self.database.take() {
            // Best effort, on its own thread and runtime (Drop cannot await), joined so the
            // database is gone before the test process exits.
            let cleanup = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    if let Ok(src) = MysqlConnectionSource::from_url(&mysql_url())
                        && let Ok(mut c) = src.connect(Purpose::Failure).await
                    {
                        let _ = c.execute(&format!("DROP DATABASE `{name}`"), &[]).await;
                        drop(c);
                        let _ = src.pool().clone().disconnect().await;
                    }
                });
            });
            let _ = cleanup.join();
        }
    }
}

pub fn text(v: &SqlValue) -> Option<String> {
    match v {
        SqlValue::Text(t) => Some(t.clone()),
        SqlValue::Null => None,
        other => panic!("not text: {other:?}"),
    }
}

pub fn int(v: &SqlValue) -> i64 {
    match v {
        SqlValue::Int(n) => *n,
        SqlValue::Text(t) => t.parse().unwrap_or_else(|_| panic!("not an integer: {t}")),
        other => panic!("not an integer: {other:?}"),
    }
}

/// A stored time as the worker sees it (text on SQLite, DATETIME(6) on MySQL).
pub fn time(v: &SqlValue) -> SystemTime {
    match v {
        SqlValue::Timestamp(t) => *t,
        SqlValue::Text(t) => {
            // "YYYY-MM-DDTHH:MM:SS.SSSZ": parse through the seconds since the epoch.
            let secs_ms = |s: &str| -> u64 { s.parse().unwrap() };
            let days = {
                let (y, m, d) = (
                    secs_ms(&t[0..4]) as i64,
                    secs_ms(&t[5..7]) as i64,
                    secs_ms(&t[8..10]) as i64,
                );
                let y2 = if m <= 2 { y - 1 } else { y };
                let era = y2.div_euclid(400);
                let yoe = y2 - era * 400;
                let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
                era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
            };
            let secs = days as u64 * 86_400
                + secs_ms(&t[11..13]) * 3_600
                + secs_ms(&t[14..16]) * 60
                + secs_ms(&t[17..19]);
            SystemTime::UNIX_EPOCH
                + Duration::from_secs(secs)
                + Duration::from_millis(secs_ms(&t[20..23]))
        }
        other => panic!("not a time: {other:?}"),
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
    /// Stored as written instead of `payload` (to store JSON text of a given form).
    pub payload_text: Option<String>,
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
            payload_text: None,
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

/// Wraps a source: counts claims and their sizes, counts renewals, can fail renewals until a
/// deadline and the next handler connection, and counts rows that were processing when a claim
/// started (a claim during a batch).
pub struct Probe {
    pub inner: Src,
    pub state_column: String,
    pub table: String,
    pub claims: AtomicUsize,
    pub claim_sizes: Mutex<Vec<usize>>,
    pub renewals: AtomicUsize,
    pub fail_renew_until: Mutex<Option<Instant>>,
    pub fail_next_handler: AtomicBool,
    pub check_idle: bool,
    pub busy_at_claim: AtomicUsize,
}

impl Probe {
    pub fn new(db: &Db) -> Arc<Self> {
        Arc::new(Self {
            inner: db.source(),
            state_column: db.q(&db.schema.state),
            table: db.t(),
            claims: AtomicUsize::new(0),
            claim_sizes: Mutex::new(Vec::new()),
            renewals: AtomicUsize::new(0),
            fail_renew_until: Mutex::new(None),
            fail_next_handler: AtomicBool::new(false),
            check_idle: true,
            busy_at_claim: AtomicUsize::new(0),
        })
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
                if p.check_idle {
                    let mut c = p.inner.connect(Purpose::Failure).await?;
                    let sql = format!(
                        "SELECT count(*) FROM {} WHERE {} = 'processing'",
                        p.table, p.state_column
                    );
                    let n = int(&c.query(&sql, &[]).await?[0][0]);
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
        let rows = self.conn.query(sql, params).await?;
        // The claimed rows (11 columns, PULL-22): the one statement on SQLite, the fetch step
        // on MySQL; not the lock, select or unlock steps, which return one column.
        if self.purpose == Purpose::Claim && rows.first().is_some_and(|r| r.len() == 11) {
            self.probe.claim_sizes.lock().unwrap().push(rows.len());
        }
        Ok(rows)
    }
    async fn begin(&mut self) -> Result<(), DbError> {
        self.conn.begin().await
    }
    async fn commit(&mut self) -> Result<(), DbError> {
        self.conn.commit().await
    }
    async fn rollback(&mut self) -> Result<(), DbError> {
        self.conn.rollback().await
    }
    fn close_on_release(&mut self) {
        self.conn.close_on_release();
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
