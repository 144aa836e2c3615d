//! The MySQL side of `queuebox migrate`: the named lock `queuebox_migrate` on one dedicated
//! connection (SCH-47), the history table, and each version's statement followed by its history
//! row (SCH-46: MySQL commits DDL at once, so a version is not one transaction; it is one
//! idempotent `CREATE TABLE IF NOT EXISTS`, run again whole after a failure). The order of the
//! steps lives in `queuebox_store::run_migrate`.

use std::time::Instant;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, TxOpts, Value};
use queuebox_store::{
    BundledVersion, HistoryKind, HistoryRow, MigrationBackend, MigrationSession, MigrationState,
    SCHEMA_HISTORY_TABLE, StoreAction, StoreError,
};

use crate::classify;
use crate::guard::table_exists;
use crate::sql::{self, Stmt};
use crate::store::MysqlStore;

/// The release recorded in each history row.
const QUEUEBOX_VERSION: &str = env!("CARGO_PKG_VERSION");

pub(crate) struct MysqlMigrationBackend<'a> {
    pub(crate) store: &'a MysqlStore,
}

#[async_trait]
impl MigrationBackend for MysqlMigrationBackend<'_> {
    async fn lock(&self) -> Result<Box<dyn MigrationSession>, StoreError> {
        const DURING: &str = "taking the migration lock";
        let store = self.store;
        let mut conn = store.conn_for(StoreAction::Migrate, DURING).await?;
        let seconds = store.startup_timeout_ms as f64 / 1000.0;
        let got: Option<Option<i64>> = conn
            .exec_first(
                &store.sql.get_lock.sql,
                store
                    .sql
                    .get_lock
                    .params(&[("seconds", Value::Double(seconds))]),
            )
            .await
            .map_err(|e| store.error(StoreAction::Migrate, DURING, &e))?;
        match got.flatten() {
            Some(1) => Ok(Box::new(MysqlMigrationSession {
                conn,
                store: store.clone(),
            })),
            Some(_) => Err(StoreError::LockTimeout {
                waited_ms: store.startup_timeout_ms,
            }),
            None => Err(StoreError::Database {
                action: StoreAction::Migrate,
                during: DURING,
                reason: "GET_LOCK('queuebox_migrate') answered NULL (an error on the server)"
                    .to_owned(),
            }),
        }
    }

    fn quoted_default_tables(&self) -> (String, String) {
        ("`outbox`".to_owned(), "`inbox`".to_owned())
    }
}

struct MysqlMigrationSession {
    /// The connection that holds the named lock.
    conn: Conn,
    store: MysqlStore,
}

impl MysqlMigrationSession {
    fn fail(&self, during: &'static str) -> impl Fn(mysql_async::Error) -> StoreError + '_ {
        move |e| self.store.error(StoreAction::Migrate, during, &e)
    }

    fn history_values(
        version: &BundledVersion,
        kind: HistoryKind,
        checksum: String,
        duration_ms: i64,
    ) -> Vec<(&'static str, Value)> {
        vec![
            ("version", Value::from(version.version)),
            ("description", Value::from(version.description)),
            ("kind", Value::from(kind.as_str())),
            ("checksum", Value::from(checksum)),
            ("queuebox_version", Value::from(QUEUEBOX_VERSION)),
            ("duration_ms", Value::from(duration_ms)),
        ]
    }

    fn insert(&self) -> &Stmt {
        &self.store.sql.history_insert
    }
}

#[async_trait]
impl MigrationSession for MysqlMigrationSession {
    async fn read_state(&mut self) -> Result<MigrationState, StoreError> {
        const DURING: &str = "reading the migration history";
        let sql = std::sync::Arc::clone(&self.store.sql);
        let store = self.store.clone();
        let fail = |e: mysql_async::Error| store.error(StoreAction::Migrate, DURING, &e);
        let outbox_exists = table_exists(&mut self.conn, &sql, "outbox")
            .await
            .map_err(fail)?;
        let inbox_exists = table_exists(&mut self.conn, &sql, "inbox")
            .await
            .map_err(fail)?;
        let history_table_exists = table_exists(&mut self.conn, &sql, SCHEMA_HISTORY_TABLE)
            .await
            .map_err(fail)?;
        let mut history = Vec::new();
        if history_table_exists {
            let rows: Vec<(i64, String, String, String)> = self
                .conn
                .exec(&sql.history_select.sql, ())
                .await
                .map_err(fail)?;
            for (version, description, kind, checksum) in rows {
                history.push(HistoryRow {
                    version: u32::try_from(version).unwrap_or(u32::MAX),
                    description,
                    kind,
                    checksum,
                });
            }
        }
        Ok(MigrationState {
            outbox_exists,
            inbox_exists,
            history_table_exists,
            history,
        })
    }

    async fn create_history_table(&mut self) -> Result<(), StoreError> {
        let text = self.store.sql.history_create.sql.clone();
        let result = self.conn.query_drop(text).await;
        result.map_err(self.fail("creating the migration history table"))
    }

    async fn record_baseline(&mut self, versions: &[BundledVersion]) -> Result<(), StoreError> {
        const DURING: &str = "recording the baseline";
        let rows: Vec<Vec<(&'static str, Value)>> = versions
            .iter()
            .map(|v| {
                let text = sql::bundled_sql(v.version).unwrap_or_default();
                Self::history_values(v, HistoryKind::Baseline, sql::checksum(text), 0)
            })
            .collect();
        let insert = self.insert().clone();
        let store = self.store.clone();
        let fail = |e: mysql_async::Error| store.error(StoreAction::Migrate, DURING, &e);
        let mut tx = self
            .conn
            .start_transaction(TxOpts::default())
            .await
            .map_err(fail)?;
        for values in rows {
            tx.exec_drop(&insert.sql, insert.params(&values))
                .await
                .map_err(fail)?;
        }
        tx.commit().await.map_err(fail)
    }

    async fn apply(&mut self, version: &BundledVersion) -> Result<u64, String> {
        let text = sql::bundled_sql(version.version)
            .ok_or_else(|| format!("version {} has no MySQL text", version.version))?;
        let started = Instant::now();
        let password = self.store.password.clone();
        self.conn
            .query_drop(text)
            .await
            .map_err(|e| classify::reason(&e, &password))?;
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let values = Self::history_values(
            version,
            HistoryKind::Applied,
            sql::checksum(text),
            i64::try_from(ms).unwrap_or(i64::MAX),
        );
        let insert = self.insert().clone();
        self.conn
            .exec_drop(&insert.sql, insert.params(&values))
            .await
            .map_err(|e| classify::reason(&e, &password))?;
        Ok(ms)
    }

    fn checksum(&self, version: u32) -> String {
        sql::checksum(sql::bundled_sql(version).unwrap_or_default())
    }

    async fn ensure_notify(&mut self) -> Result<bool, StoreError> {
        // MySQL has no notify mode (config.md allows outbox.capture.mode notify on PostgreSQL
        // only), so there is nothing to create.
        Ok(false)
    }

    async fn release(self: Box<Self>) {
        let Self { mut conn, store } = *self;
        match conn.query_drop(&store.sql.release_lock.sql).await {
            Ok(()) => drop(conn),
            Err(err) => {
                tracing::debug!(reason = %classify::reason(&err, &store.password), "releasing the migration lock; closing its connection instead");
                // Closing the session releases the named lock with it.
                let _ = conn.disconnect().await;
            }
        }
    }
}
