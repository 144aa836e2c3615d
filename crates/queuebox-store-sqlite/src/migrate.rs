//! The SQLite side of `queuebox migrate` (schema.md SCH-45..57): the migration lock is the
//! database write lock, taken with `BEGIN IMMEDIATE` (waiting up to `startupTimeoutMs`) before
//! the history is read (SCH-47), and held until the end; each version runs in a savepoint of
//! its own together with its history row (SCH-46), so a failed version rolls back whole while
//! the versions before it commit when the lock is released.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use queuebox_store::{
    BundledVersion, HistoryKind, HistoryRow, MigrationBackend, MigrationSession, MigrationState,
    SCHEMA_HISTORY_TABLE, StoreAction, StoreError, StoreErrorKind,
};
use rusqlite::{Connection, named_params};

use crate::classify;
use crate::sql::{Statements, bundled_sql, checksum};
use crate::worker::Worker;

pub(crate) struct SqliteMigrationBackend {
    pub(crate) worker: Arc<Worker>,
    pub(crate) sql: Arc<Statements>,
    pub(crate) busy_timeout: Duration,
    pub(crate) startup_timeout_ms: u64,
}

fn closed(during: &'static str) -> StoreError {
    StoreError::Outage {
        action: StoreAction::Migrate,
        during,
        reason: "the store is closed".to_owned(),
    }
}

fn migrate_error(during: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |err| classify::store_error(StoreAction::Migrate, during, &err)
}

#[async_trait]
impl MigrationBackend for SqliteMigrationBackend {
    async fn lock(&self) -> Result<Box<dyn MigrationSession>, StoreError> {
        const DURING: &str = "taking the migration lock";
        let wait = Duration::from_millis(self.startup_timeout_ms);
        let normal = self.busy_timeout;
        let result = self
            .worker
            .run(move |conn| {
                // The lock may be held for a whole migration of another process: wait up to
                // the start-up timeout for it, then go back to the usual busy timeout.
                conn.busy_timeout(wait)?;
                let begun = conn.execute_batch("BEGIN IMMEDIATE");
                conn.busy_timeout(normal)?;
                begun
            })
            .await
            .ok_or_else(|| closed(DURING))?;
        match result {
            Ok(()) => Ok(Box::new(SqliteMigrationSession {
                worker: self.worker.clone(),
                sql: self.sql.clone(),
            })),
            Err(err) if classify::kind(&err) == StoreErrorKind::Transient => {
                Err(StoreError::LockTimeout {
                    waited_ms: self.startup_timeout_ms,
                })
            }
            Err(err) => Err(classify::store_error(StoreAction::Migrate, DURING, &err)),
        }
    }

    fn quoted_default_tables(&self) -> (String, String) {
        ("\"outbox\"".to_owned(), "\"inbox\"".to_owned())
    }
}

/// The open `BEGIN IMMEDIATE` transaction of one migration.
struct SqliteMigrationSession {
    worker: Arc<Worker>,
    sql: Arc<Statements>,
}

fn table_exists(conn: &Connection, sql: &Statements, name: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached(&sql.table_exists)?
        .query_row(named_params! {":name": name}, |r| r.get::<_, i64>(0))
        .map(|n| n > 0)
}

fn insert_history(
    conn: &Connection,
    sql: &Statements,
    version: &BundledVersion,
    kind: HistoryKind,
    duration_ms: i64,
) -> rusqlite::Result<()> {
    let text = bundled_sql(version.version).unwrap_or_default();
    conn.prepare_cached(&sql.history_insert)?
        .execute(named_params! {
            ":version": version.version,
            ":description": version.description,
            ":kind": kind.as_str(),
            ":checksum": checksum(text),
            ":queuebox_version": env!("CARGO_PKG_VERSION"),
            ":duration_ms": duration_ms,
        })?;
    Ok(())
}

impl SqliteMigrationSession {
    async fn run<R, F>(&self, during: &'static str, job: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection, &Statements) -> rusqlite::Result<R> + Send + 'static,
    {
        let sql = self.sql.clone();
        self.worker
            .run(move |conn| job(conn, &sql))
            .await
            .ok_or_else(|| closed(during))?
            .map_err(migrate_error(during))
    }
}

#[async_trait]
impl MigrationSession for SqliteMigrationSession {
    async fn read_state(&mut self) -> Result<MigrationState, StoreError> {
        self.run("reading the migration history", |conn, sql| {
            let history_table_exists = table_exists(conn, sql, SCHEMA_HISTORY_TABLE)?;
            let history = if history_table_exists {
                let mut stmt = conn.prepare_cached(&sql.history_select)?;
                let rows = stmt.query_map([], |r| {
                    Ok(HistoryRow {
                        version: u32::try_from(r.get::<_, i64>(0)?).unwrap_or(u32::MAX),
                        description: r.get(1)?,
                        kind: r.get(2)?,
                        checksum: r.get(3)?,
                    })
                })?;
                rows.collect::<rusqlite::Result<Vec<_>>>()?
            } else {
                Vec::new()
            };
            Ok(MigrationState {
                outbox_exists: table_exists(conn, sql, "outbox")?,
                inbox_exists: table_exists(conn, sql, "inbox")?,
                history_table_exists,
                history,
            })
        })
        .await
    }

    async fn create_history_table(&mut self) -> Result<(), StoreError> {
        self.run("creating the migration history", |conn, sql| {
            conn.execute_batch(&sql.history_create)
        })
        .await
    }

    async fn record_baseline(&mut self, versions: &[BundledVersion]) -> Result<(), StoreError> {
        let versions = versions.to_vec();
        self.run("recording the baseline", move |conn, sql| {
            conn.execute_batch("SAVEPOINT queuebox_baseline")?;
            let recorded = versions
                .iter()
                .try_for_each(|v| insert_history(conn, sql, v, HistoryKind::Baseline, 0));
            match recorded {
                Ok(()) => conn.execute_batch("RELEASE queuebox_baseline"),
                Err(err) => {
                    conn.execute_batch("ROLLBACK TO queuebox_baseline; RELEASE queuebox_baseline")?;
                    Err(err)
                }
            }
        })
        .await
    }

    async fn apply(&mut self, version: &BundledVersion) -> Result<u64, String> {
        let version = *version;
        let sql = self.sql.clone();
        let answer = self
            .worker
            .run(move |conn| {
                let text = bundled_sql(version.version).unwrap_or_default();
                let started = Instant::now();
                conn.execute_batch("SAVEPOINT queuebox_version")?;
                let applied = run_version(conn, version.version, text).and_then(|()| {
                    let ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
                    insert_history(conn, &sql, &version, HistoryKind::Applied, ms)?;
                    Ok(u64::try_from(ms).unwrap_or(0))
                });
                match applied {
                    Ok(ms) => {
                        conn.execute_batch("RELEASE queuebox_version")?;
                        Ok(ms)
                    }
                    Err(err) => {
                        conn.execute_batch(
                            "ROLLBACK TO queuebox_version; RELEASE queuebox_version",
                        )?;
                        Err(err)
                    }
                }
            })
            .await;
        match answer {
            Some(Ok(ms)) => Ok(ms),
            Some(Err(err)) => Err(classify::reason(&err)),
            None => Err("the store is closed".to_owned()),
        }
    }

    fn checksum(&self, version: u32) -> String {
        checksum(bundled_sql(version).unwrap_or_default())
    }

    async fn ensure_notify(&mut self) -> Result<bool, StoreError> {
        // SQLite has no notify mode (config.md: outbox.capture.mode notify is PostgreSQL's).
        Ok(false)
    }

    async fn release(self: Box<Self>) {
        // Commits what the run applied; a failed commit rolls back, and the lock goes either
        // way, since the transaction ends.
        let ended = self
            .worker
            .run(|conn| {
                if conn.is_autocommit() {
                    return Ok(());
                }
                conn.execute_batch("COMMIT").inspect_err(|_| {
                    let _ = conn.execute_batch("ROLLBACK");
                })
            })
            .await;
        if let Some(Err(err)) = ended {
            tracing::warn!(
                "Releasing the SQLite migration lock failed: {}",
                classify::reason(&err)
            );
        }
    }
}

/// SCH-45 on SQLite: `ADD COLUMN` has no `IF NOT EXISTS`, so a version that only adds a column
/// runs when `pragma_table_info` does not show the column yet.
fn run_version(conn: &rusqlite::Connection, version: u32, text: &str) -> rusqlite::Result<()> {
    if version == queuebox_store::RAW_BODY_VERSION {
        let present: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('inbox') WHERE name = 'raw_body')",
            [],
            |r| r.get(0),
        )?;
        if present {
            return Ok(());
        }
    }
    conn.execute_batch(text)
}
