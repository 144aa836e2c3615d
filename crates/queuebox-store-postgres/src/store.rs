//! `PgStore`: the PostgreSQL store's handle (pool, layout, rendered statements, timeouts), its
//! `SchemaStore` and umbrella `Store` implementations (`OutboxStore` is in `outbox.rs`; the
//! intake, relay and retention parts are in `inbox.rs`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Pool, PoolError};
use queuebox_core::database::{DatabaseConfig, DatabaseTarget, PostgresTarget};
use queuebox_core::{Secret, TableLayout};
use queuebox_store::{
    MigrateReport, MigrateRequest, PoolStatus, SchemaNeeds, SchemaStore, Store, StoreAction,
    StoreError, evaluate_schema, run_migrate,
};

use crate::dialect::PgDialect;
use crate::inbox_sql::InboxSql;
use crate::migrate::PgMigrationBackend;
use crate::operator_sql::OperatorSql;
use crate::outbox_sql::OutboxSql;
use crate::replan::Replanner;
use crate::sql::CatalogSql;
use crate::{classify, connect, guard, redact, sql};

/// The PostgreSQL store. Cheap to clone: the pool is shared.
#[derive(Clone)]
pub struct PgStore {
    pub(crate) pool: Pool,
    layout: TableLayout,
    /// The outbox statements with this layout's names, rendered once (`outbox_sql.rs`).
    pub(crate) outbox_sql: Arc<OutboxSql>,
    /// The inbox, relay and retention statements, rendered once (`inbox_sql.rs`).
    pub(crate) inbox_sql: Arc<InboxSql>,
    /// The operator statements, rendered once (`operator_sql.rs`).
    pub(crate) operator_sql: Arc<OperatorSql>,
    /// The catalog and history statements, rendered once (`sql.rs`).
    catalog_sql: Arc<CatalogSql>,
    /// When each connection last prepared the statements that keep a generic plan (`replan.rs`).
    pub(crate) replanner: Arc<Replanner>,
    startup_timeout_ms: u64,
    operation_timeout: Duration,
    pub(crate) password: Secret,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("layout", &self.layout)
            .field("pool", &self.pool.status())
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Builds the pool and waits for the database up to `database.startupTimeoutMs`
    /// (operations.md OPS-24 step 8). Fails with [`StoreError::NotReachable`] naming only the
    /// host and port.
    pub async fn connect(db: &DatabaseConfig) -> Result<Self, StoreError> {
        let target = postgres_target(db)?;
        let outbox_sql = Arc::new(OutboxSql::new(&db.layout)?);
        let inbox_sql = Arc::new(InboxSql::new(&db.layout)?);
        let operator_sql = Arc::new(OperatorSql::new(&db.layout)?);
        let catalog_sql = Arc::new(CatalogSql::new()?);
        let pool = connect::build_pool(db, target)?;
        connect::wait_for_database(&pool, db, target).await?;
        Ok(Self {
            pool,
            layout: db.layout.clone(),
            outbox_sql,
            inbox_sql,
            operator_sql,
            catalog_sql,
            replanner: Arc::default(),
            startup_timeout_ms: db.startup_timeout_ms,
            operation_timeout: Duration::from_millis(db.connection_timeout_ms),
            password: target.password.clone(),
        })
    }

    /// The connection pool, for the engine's statements.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The mapped table and column names.
    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    /// A driver error as the store error of its kind (`classify.rs`), redacted.
    pub(crate) fn pg_error(
        &self,
        action: StoreAction,
        during: &'static str,
        err: &tokio_postgres::Error,
    ) -> StoreError {
        let reason = redact::pg_error(err, &self.password);
        StoreError::statement(classify::pg_kind(err), action, during, reason)
    }

    /// A failure to get a pooled connection as the store error of its kind, redacted.
    pub(crate) fn pool_error(
        &self,
        action: StoreAction,
        during: &'static str,
        err: &PoolError,
    ) -> StoreError {
        let reason = redact::pool_error(err, &self.password);
        StoreError::statement(classify::pool_kind(err), action, during, reason)
    }
}

pub(crate) fn postgres_target(db: &DatabaseConfig) -> Result<&PostgresTarget, StoreError> {
    match &db.target {
        DatabaseTarget::Postgres(target) => Ok(target),
        DatabaseTarget::Mysql(_) | DatabaseTarget::Sqlite(_) | DatabaseTarget::Sqlserver { .. } => {
            Err(StoreError::BadTarget {
                reason: format!(
                    "the PostgreSQL store cannot open a database of type {}",
                    db.db_type.as_str()
                ),
            })
        }
    }
}

#[async_trait]
impl SchemaStore for PgStore {
    async fn migrate(&self, request: &MigrateRequest) -> Result<MigrateReport, StoreError> {
        let backend = PgMigrationBackend {
            pool: &self.pool,
            catalog: &self.catalog_sql,
            startup_timeout_ms: self.startup_timeout_ms,
            password: &self.password,
        };
        run_migrate(&backend, &self.layout, request).await
    }

    async fn check_schema(&self, needs: &SchemaNeeds) -> Result<(), StoreError> {
        const DURING: &str = "reading the catalog";
        let client = self
            .pool
            .get()
            .await
            .map_err(|e| self.pool_error(StoreAction::CheckSchema, DURING, &e))?;
        let facts = guard::read_facts(&client, &self.catalog_sql, &self.layout)
            .await
            .map_err(|e| self.pg_error(StoreAction::CheckSchema, DURING, &e))?;
        let problems = evaluate_schema(&self.layout, &facts, &PgDialect, needs);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(StoreError::SchemaMismatch { problems })
        }
    }

    async fn ping(&self) -> Result<(), StoreError> {
        const DURING: &str = "a readiness query";
        let round_trip = async {
            let client = self
                .pool
                .get()
                .await
                .map_err(|e| self.pool_error(StoreAction::UseDatabase, DURING, &e))?;
            client
                .simple_query(sql::PING)
                .await
                .map(|_| ())
                .map_err(|e| self.pg_error(StoreAction::UseDatabase, DURING, &e))
        };
        match tokio::time::timeout(self.operation_timeout, round_trip).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Outage {
                action: StoreAction::UseDatabase,
                during: DURING,
                reason: format!("no answer within {} ms", self.operation_timeout.as_millis()),
            }),
        }
    }
}

#[async_trait]
impl Store for PgStore {
    fn pool_status(&self) -> PoolStatus {
        let status = self.pool.status();
        let idle = status.available as u64;
        PoolStatus {
            active: (status.size as u64).saturating_sub(idle),
            idle,
            max: status.max_size as u64,
            pending: status.waiting as u64,
        }
    }

    async fn close(&self) {
        self.pool.close();
    }
}
