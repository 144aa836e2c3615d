//! The PostgreSQL side of `queuebox migrate`: the advisory lock on one dedicated connection
//! (SCH-47), the history table, and each version in one transaction with its history row
//! (SCH-46). The order of the steps lives in `queuebox_store::run_migrate`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};
use queuebox_core::Secret;
use queuebox_store::{
    BundledVersion, HistoryKind, HistoryRow, MigrationBackend, MigrationSession, MigrationState,
    NOTIFY_OBJECT_NAME, SCHEMA_HISTORY_TABLE, StoreAction, StoreError,
};
use tokio::time::Instant;

use crate::sql::CatalogSql;
use crate::{guard, redact, sql};

/// How often the lock is tried while another process holds it (SCH-47).
const LOCK_RETRY: Duration = Duration::from_millis(500);

/// The release recorded in each history row.
const QUEUEBOX_VERSION: &str = env!("CARGO_PKG_VERSION");

pub(crate) struct PgMigrationBackend<'a> {
    pub(crate) pool: &'a Pool,
    pub(crate) catalog: &'a Arc<CatalogSql>,
    pub(crate) startup_timeout_ms: u64,
    pub(crate) password: &'a Secret,
}

fn db_error(during: &'static str, reason: String) -> StoreError {
    StoreError::Database {
        action: StoreAction::Migrate,
        during,
        reason,
    }
}

#[async_trait]
impl MigrationBackend for PgMigrationBackend<'_> {
    async fn lock(&self) -> Result<Box<dyn MigrationSession>, StoreError> {
        let conn = self.pool.get().await.map_err(|e| {
            db_error(
                "taking the migration lock",
                redact::pool_error(&e, self.password),
            )
        })?;
        let deadline = Instant::now() + Duration::from_millis(self.startup_timeout_ms);
        loop {
            let row = conn.query_one(sql::TRY_LOCK, &[]).await.map_err(|e| {
                db_error(
                    "taking the migration lock",
                    redact::pg_error(&e, self.password),
                )
            })?;
            let locked: bool = row.try_get(0).map_err(|e| {
                db_error(
                    "taking the migration lock",
                    redact::pg_error(&e, self.password),
                )
            })?;
            if locked {
                return Ok(Box::new(PgMigrationSession {
                    conn,
                    catalog: Arc::clone(self.catalog),
                    password: self.password.clone(),
                }));
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(StoreError::LockTimeout {
                    waited_ms: self.startup_timeout_ms,
                });
            }
            tokio::time::sleep(LOCK_RETRY.min(remaining)).await;
        }
    }

    fn quoted_default_tables(&self) -> (String, String) {
        ("\"outbox\"".to_owned(), "\"inbox\"".to_owned())
    }
}

/// One migration, on the connection that holds the lock.
struct PgMigrationSession {
    conn: Object,
    catalog: Arc<CatalogSql>,
    password: Secret,
}

impl PgMigrationSession {
    fn fail(&self, during: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError + '_ {
        move |e| db_error(during, redact::pg_error(&e, &self.password))
    }

    async fn insert_history(
        catalog: &CatalogSql,
        tx: &tokio_postgres::Transaction<'_>,
        version: &BundledVersion,
        kind: HistoryKind,
        duration_ms: i32,
    ) -> Result<(), tokio_postgres::Error> {
        let text = sql::bundled_sql(version.version).unwrap_or_default();
        let number = i32::try_from(version.version).unwrap_or(i32::MAX);
        tx.execute(
            &catalog.history_insert,
            &[
                &number,
                &version.description,
                &kind.as_str(),
                &sql::checksum(text),
                &QUEUEBOX_VERSION,
                &duration_ms,
            ],
        )
        .await
        .map(|_| ())
    }
}

#[async_trait]
impl MigrationSession for PgMigrationSession {
    async fn read_state(&mut self) -> Result<MigrationState, StoreError> {
        let during = "reading the migration history";
        let client: &tokio_postgres::Client = &self.conn;
        let outbox = guard::table_oid(client, &self.catalog, "outbox")
            .await
            .map_err(self.fail(during))?;
        let inbox = guard::table_oid(client, &self.catalog, "inbox")
            .await
            .map_err(self.fail(during))?;
        let history_table = guard::table_oid(client, &self.catalog, SCHEMA_HISTORY_TABLE)
            .await
            .map_err(self.fail(during))?;
        let mut history = Vec::new();
        if history_table.is_some() {
            let rows = client
                .query(sql::HISTORY_SELECT, &[])
                .await
                .map_err(self.fail(during))?;
            for row in rows {
                let version: i32 = row.try_get(0).map_err(self.fail(during))?;
                history.push(HistoryRow {
                    // A negative version was not written by any QueueBox; it cannot match a
                    // bundled one either way.
                    version: u32::try_from(version).unwrap_or(0),
                    description: row.try_get(1).map_err(self.fail(during))?,
                    kind: row.try_get(2).map_err(self.fail(during))?,
                    checksum: row.try_get(3).map_err(self.fail(during))?,
                });
            }
        }
        Ok(MigrationState {
            outbox_exists: outbox.is_some(),
            inbox_exists: inbox.is_some(),
            history_table_exists: history_table.is_some(),
            history,
        })
    }

    async fn create_history_table(&mut self) -> Result<(), StoreError> {
        self.conn
            .batch_execute(sql::HISTORY_CREATE)
            .await
            .map_err(self.fail("creating queuebox_schema_history"))
    }

    async fn record_baseline(&mut self, versions: &[BundledVersion]) -> Result<(), StoreError> {
        let during = "recording the baseline";
        let password = self.password.clone();
        let fail =
            move |e: tokio_postgres::Error| db_error(during, redact::pg_error(&e, &password));
        let tx = self.conn.transaction().await.map_err(&fail)?;
        for version in versions {
            Self::insert_history(&self.catalog, &tx, version, HistoryKind::Baseline, 0)
                .await
                .map_err(&fail)?;
        }
        tx.commit().await.map_err(&fail)
    }

    async fn apply(&mut self, version: &BundledVersion) -> Result<u64, String> {
        let Some(text) = sql::bundled_sql(version.version) else {
            return Err("this store has no text for the version".to_owned());
        };
        let password = self.password.clone();
        let reason = move |e: tokio_postgres::Error| redact::pg_error(&e, &password);
        let tx = self.conn.transaction().await.map_err(&reason)?;
        // A migration may wait for its table locks as long as it must (the session's
        // lock_timeout bounds the delivery path only, connect::SESSION_OPTIONS).
        tx.batch_execute(sql::MIGRATION_LOCK_WAIT)
            .await
            .map_err(&reason)?;
        let started = Instant::now();
        tx.batch_execute(text).await.map_err(&reason)?;
        let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let duration_ms = i32::try_from(elapsed).unwrap_or(i32::MAX);
        Self::insert_history(
            &self.catalog,
            &tx,
            version,
            HistoryKind::Applied,
            duration_ms,
        )
        .await
        .map_err(&reason)?;
        tx.commit().await.map_err(&reason)?;
        Ok(elapsed)
    }

    fn checksum(&self, version: u32) -> String {
        sql::bundled_sql(version)
            .map(sql::checksum)
            .unwrap_or_default()
    }

    async fn ensure_notify(&mut self) -> Result<bool, StoreError> {
        let during = "creating the notify trigger";
        let client: &tokio_postgres::Client = &self.conn;
        let Some(oid) = guard::table_oid(client, &self.catalog, "outbox")
            .await
            .map_err(self.fail(during))?
        else {
            return Ok(false);
        };
        let triggers = guard::enabled_triggers(client, &self.catalog, oid)
            .await
            .map_err(self.fail(during))?;
        if triggers.contains(NOTIFY_OBJECT_NAME) {
            return Ok(false);
        }
        let password = self.password.clone();
        let fail =
            move |e: tokio_postgres::Error| db_error(during, redact::pg_error(&e, &password));
        let tx = self.conn.transaction().await.map_err(&fail)?;
        tx.batch_execute(sql::NOTIFY_FUNCTION)
            .await
            .map_err(&fail)?;
        tx.batch_execute(sql::NOTIFY_TRIGGER).await.map_err(&fail)?;
        tx.commit().await.map_err(&fail)?;
        tracing::info!(
            "Created the notify function and trigger queuebox_outbox_notify on \"outbox\"."
        );
        Ok(true)
    }

    async fn release(self: Box<Self>) {
        let unlocked = match self.conn.query_one(sql::UNLOCK, &[]).await {
            Ok(row) => row.try_get::<_, bool>(0).unwrap_or(false),
            Err(e) => {
                tracing::warn!(
                    reason = %redact::pg_error(&e, &self.password),
                    "could not release the migration lock; closing its connection"
                );
                false
            }
        };
        if !unlocked {
            // A session lock lives as long as its connection: taking the connection out of the
            // pool and dropping it ends the session, so the lock cannot outlive this migration.
            drop(Object::take(self.conn));
        }
    }
}
