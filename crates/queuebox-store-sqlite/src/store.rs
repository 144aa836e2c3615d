//! `SqliteStore`: the SQLite store's handle (its connection thread, layout, rendered
//! statements), opening the file with the session settings of SCH-8 and CFG-42, the helpers
//! every part uses to run a read or a `BEGIN IMMEDIATE` write on the connection thread, and the
//! `SchemaStore` and umbrella `Store` implementations.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use queuebox_core::TableLayout;
use queuebox_core::database::{DatabaseConfig, DatabaseTarget, SqliteTarget};
use queuebox_store::{
    MigrateReport, MigrateRequest, PoolStatus, SchemaNeeds, SchemaStore, Store, StoreAction,
    StoreError, evaluate_schema, run_migrate,
};
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use crate::classify;
use crate::guard::{self, SqliteDialect};
use crate::migrate::SqliteMigrationBackend;
use crate::sql::Statements;
use crate::worker::Worker;

/// The SQLite store: one connection on a thread of its own.
pub struct SqliteStore {
    pub(crate) worker: Arc<Worker>,
    pub(crate) layout: TableLayout,
    pub(crate) sql: Arc<Statements>,
    pub(crate) busy_timeout: Duration,
    pub(crate) startup_timeout_ms: u64,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

/// Opens the connection with the settings of SCH-8: the busy timeout, and WAL on a file
/// database (CFG-42). The folder must exist; the file is created when it does not.
fn open(target: &SqliteTarget, busy_timeout: Duration) -> Result<Connection, rusqlite::Error> {
    let conn = match target {
        SqliteTarget::File(path) => Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?,
        SqliteTarget::Memory => Connection::open_in_memory()?,
    };
    conn.busy_timeout(busy_timeout)?;
    if matches!(target, SqliteTarget::File(_)) {
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(crate::worker::cannot_open(format!(
                "the database file stays in journal mode {mode}; QueueBox needs WAL"
            )));
        }
    }
    // FULL: a commit is on disk before it returns, so an acknowledged webhook or a finished
    // delivery survives a power loss too, not only a crash of the process (WAL's NORMAL would
    // not). Set explicitly, whatever the library's compiled-in default.
    conn.execute_batch("PRAGMA synchronous = FULL")?;
    // Every statement of the store stays prepared on its one connection.
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

fn sqlite_target(db: &DatabaseConfig) -> Result<&SqliteTarget, StoreError> {
    match &db.target {
        DatabaseTarget::Sqlite(target) => Ok(target),
        DatabaseTarget::Postgres(_)
        | DatabaseTarget::Mysql(_)
        | DatabaseTarget::Sqlserver { .. } => Err(StoreError::BadTarget {
            reason: format!(
                "the SQLite store cannot open a database of type {}",
                db.db_type.as_str()
            ),
        }),
    }
}

impl SqliteStore {
    /// Opens the database (OPS-24 step 8), trying again until `database.startupTimeoutMs`
    /// while the file's folder does not exist (it may not be mounted yet); fails with
    /// [`StoreError::NotReachable`] naming the file. A folder that exists but where the file
    /// cannot be created or written, or a file that is no database, stops at once
    /// ([`StoreError::Refused`], issue 14 item 1).
    pub async fn connect(db: &DatabaseConfig) -> Result<Self, StoreError> {
        let target = sqlite_target(db)?.clone();
        let sql = Arc::new(Statements::new(&db.layout)?);
        let busy_timeout = Duration::from_millis(db.connection_timeout_ms);
        let worker =
            queuebox_store::wait_for_database(&db.host_port, db.startup_timeout_ms, || {
                let attempt_target = target.clone();
                let file = Self::file(&target);
                async move {
                    Worker::start(move || open(&attempt_target, busy_timeout))
                        .await
                        .map_err(|err| classify::attempt(&err, file.as_deref()))
                }
            })
            .await?;
        Ok(Self {
            worker: Arc::new(worker),
            layout: db.layout.clone(),
            sql,
            busy_timeout,
            startup_timeout_ms: db.startup_timeout_ms,
        })
    }

    /// The database file, or `None` for `sqlite::memory:`.
    pub fn file(target: &SqliteTarget) -> Option<PathBuf> {
        match target {
            SqliteTarget::File(path) => Some(path.clone()),
            SqliteTarget::Memory => None,
        }
    }

    /// The mapped table and column names.
    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    fn closed(action: StoreAction, during: &'static str) -> StoreError {
        StoreError::Outage {
            action,
            during,
            reason: "the store is closed".to_owned(),
        }
    }

    /// Runs `job` on the connection thread outside any transaction (reads: WAL gives each
    /// statement a consistent snapshot).
    pub(crate) async fn read<R, F>(
        &self,
        action: StoreAction,
        during: &'static str,
        job: F,
    ) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection, &Statements) -> Result<R, rusqlite::Error> + Send + 'static,
    {
        let sql = self.sql.clone();
        self.worker
            .run(move |conn| job(conn, &sql))
            .await
            .ok_or_else(|| Self::closed(action, during))?
            .map_err(|err| classify::store_error(action, during, &err))
    }

    /// Runs `job` in a `BEGIN IMMEDIATE` transaction on the connection thread: the write lock
    /// is taken first (waiting up to the busy timeout), so the transaction never fails half
    /// way on a lock (outbox.md OUT-17, inbox.md RLY-6). The job's error rolls everything back;
    /// `Ok` commits.
    pub(crate) async fn write<R, F>(&self, during: &'static str, job: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Transaction<'_>, &Statements) -> Result<R, rusqlite::Error> + Send + 'static,
    {
        self.write_or_roll_back(during, move |tx, sql| job(tx, sql).map(|r| (r, true)))
            .await
    }

    /// As [`Self::write`], but the job decides: `(answer, false)` rolls back.
    pub(crate) async fn write_or_roll_back<R, F>(
        &self,
        during: &'static str,
        job: F,
    ) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Transaction<'_>, &Statements) -> Result<(R, bool), rusqlite::Error>
            + Send
            + 'static,
    {
        let sql = self.sql.clone();
        let action = StoreAction::UseDatabase;
        self.worker
            .run(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let (answer, commit) = job(&tx, &sql)?;
                if commit {
                    tx.commit()?;
                } else {
                    tx.rollback()?;
                }
                Ok(answer)
            })
            .await
            .ok_or_else(|| Self::closed(action, during))?
            .map_err(|err: rusqlite::Error| classify::store_error(action, during, &err))
    }
}

#[async_trait]
impl SchemaStore for SqliteStore {
    async fn migrate(&self, request: &MigrateRequest) -> Result<MigrateReport, StoreError> {
        let backend = SqliteMigrationBackend {
            worker: self.worker.clone(),
            sql: self.sql.clone(),
            busy_timeout: self.busy_timeout,
            startup_timeout_ms: self.startup_timeout_ms,
        };
        run_migrate(&backend, &self.layout, request).await
    }

    async fn check_schema(&self, needs: &SchemaNeeds) -> Result<(), StoreError> {
        let layout = self.layout.clone();
        let facts = self
            .read(
                StoreAction::CheckSchema,
                "reading the catalog",
                move |conn, sql| guard::read_facts(conn, sql, &layout),
            )
            .await?;
        let problems = evaluate_schema(&self.layout, &facts, &SqliteDialect, needs);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(StoreError::SchemaMismatch { problems })
        }
    }

    async fn ping(&self) -> Result<(), StoreError> {
        const DURING: &str = "a readiness query";
        let round_trip = self.read(StoreAction::UseDatabase, DURING, |conn, sql| {
            conn.prepare_cached(&sql.ping)?
                .query_row([], |r| r.get::<_, i64>(0))
                .map(|_| ())
        });
        match tokio::time::timeout(self.busy_timeout, round_trip).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Outage {
                action: StoreAction::UseDatabase,
                during: DURING,
                reason: format!(
                    "the connection stayed busy for {} ms",
                    self.busy_timeout.as_millis()
                ),
            }),
        }
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn pool_status(&self) -> PoolStatus {
        let in_flight = self.worker.in_flight();
        let active = in_flight.min(1);
        PoolStatus {
            active,
            idle: 1 - active,
            max: 1,
            pending: in_flight.saturating_sub(1),
        }
    }

    async fn close(&self) {
        self.worker.close();
    }
}
