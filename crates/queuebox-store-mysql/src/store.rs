//! `MysqlStore`: the MySQL / MariaDB store's handle (pool, layout, rendered statements,
//! timeouts), opening the pool and waiting for the database at start, the session settings of
//! every connection (SCH-8), the statement helpers the parts share, and the `SchemaStore` and
//! umbrella `Store` implementations.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{
    Conn, DriverError, OptsBuilder, Pool, PoolConstraints, PoolOpts, Row, SslOpts, TxOpts, Value,
};
use queuebox_core::database::{DatabaseConfig, DatabaseTarget, MysqlSslMode, MysqlTarget};
use queuebox_core::{Secret, TableLayout};
use queuebox_store::{
    MigrateReport, MigrateRequest, PoolStatus, SchemaNeeds, SchemaStore, Store, StoreAction,
    StoreError, evaluate_schema, run_migrate,
};

use crate::classify;
use crate::dialect::MysqlDialect;
use crate::guard;
use crate::migrate::MysqlMigrationBackend;
use crate::sql::{IdIndexes, Statements, Stmt};

/// Prepared statements kept per connection: every file of `queries/` fits.
const STATEMENT_CACHE: usize = 128;

/// The session settings of every connection (schema.md SCH-8): UTC for every time the server
/// reads or writes, strict mode so a value too long for its column fails instead of being cut,
/// and READ COMMITTED, the isolation every statement file is written for (outbox.md OUT-17).
/// Then the bounds that keep one stalled or vanished replica from holding up the others
/// (operations.md, "Several replicas"): no statement waits longer than 5 s for a row lock
/// (`innodb_lock_wait_timeout`) or a table lock (`lock_wait_timeout`) another session holds;
/// such a statement fails as transient (1205) and is tried again. The delivery path reads with
/// SKIP LOCKED where a row can be held; this is the bound for the rest (a uniqueness wait at
/// intake, a table an operator locked). Migration lifts the table-lock bound for its DDL.
const SESSION_SETTINGS: &[&str] = &[
    "SET time_zone = '+00:00'",
    "SET SESSION sql_mode = 'STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'",
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET SESSION innodb_lock_wait_timeout = 5",
    "SET SESSION lock_wait_timeout = 5",
];

/// TCP keepalive on QueueBox's side, so a server that vanished (a partition, a dead host) is
/// noticed in about a minute instead of the system default of two hours.
const KEEPALIVE: Duration = Duration::from_secs(30);

/// The MySQL / MariaDB store. Cheap to clone: the pool is shared.
#[derive(Clone)]
pub struct MysqlStore {
    pub(crate) pool: Pool,
    layout: TableLayout,
    pub(crate) sql: Arc<Statements>,
    pub(crate) startup_timeout_ms: u64,
    /// `database.connectionTimeoutMs`: the wait for a pooled connection, and for readiness.
    operation_timeout: Duration,
    pool_size: u64,
    pub(crate) password: Secret,
    /// The relay's claim lock name for this inbox table (inbox.md RLY-6).
    pub(crate) relay_lock_name: String,
}

impl std::fmt::Debug for MysqlStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlStore")
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

/// What one try of the start-up wait found.
enum Reached {
    /// The server answered and its version is supported.
    Answered,
    /// The server answered without offering TLS, which `ssl-mode: preferred` falls back from.
    OffersNoTls,
}

impl MysqlStore {
    /// Opens the pool and waits for the database up to `database.startupTimeoutMs`
    /// (operations.md OPS-24 step 8). Fails with [`StoreError::NotReachable`] naming only the
    /// host and port.
    pub async fn connect(db: &DatabaseConfig) -> Result<Self, StoreError> {
        Self::connect_with_session(db, &[]).await
    }

    /// [`MysqlStore::connect`] with more session statements run on every new connection after
    /// QueueBox's own (SCH-8), for example `SET SESSION innodb_lock_wait_timeout = 1`.
    pub async fn connect_with_session(
        db: &DatabaseConfig,
        extra_session: &[String],
    ) -> Result<Self, StoreError> {
        let target = mysql_target(db)?;
        // Renders every file once, so a file that does not render fails the start at once;
        // rendered again below with the id indexes the catalog names.
        let sql = Arc::new(Statements::new(&db.layout, &IdIndexes::default())?);
        let size = usize::try_from(db.pool_size).unwrap_or(usize::MAX).max(1);
        let mut init: Vec<String> = SESSION_SETTINGS.iter().map(|s| (*s).to_owned()).collect();
        init.extend(extra_session.iter().cloned());
        let constraints = PoolConstraints::new(0, size).ok_or_else(|| StoreError::BadTarget {
            reason: format!("database.poolSize {size} cannot size a pool"),
        })?;
        // No reset when a connection goes back to the pool: a reset drops the session settings
        // and the prepared statements; every statement path here ends its transaction and
        // releases its named lock itself, and a connection that could not is dropped.
        let pool_opts = PoolOpts::default()
            .with_constraints(constraints)
            .with_reset_connection(false);
        let opts = OptsBuilder::default()
            .ip_or_hostname(target.host.clone())
            .tcp_port(target.port)
            .user(Some(target.user.clone()))
            .pass(Some(target.password.expose().to_owned()))
            .db_name(Some(target.database.clone()))
            .client_found_rows(true)
            .tcp_nodelay(true)
            .tcp_keepalive(Some(KEEPALIVE))
            .stmt_cache_size(STATEMENT_CACHE)
            .init(init)
            .pool_opts(pool_opts);
        let ssl = ssl_opts(target);
        if ssl.is_some() {
            // mysql_async's rustls connector takes the process's provider; rustls is built with
            // more than one here, so one must be chosen. Another part may have chosen first.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        // CFG-40 `preferred`: TLS when the server offers it, else without.
        let plain = (target.ssl_mode == MysqlSslMode::Preferred).then(|| opts.clone());
        let opts = opts.ssl_opts(ssl);
        let mut store = Self {
            pool: Pool::new(opts),
            sql,
            startup_timeout_ms: db.startup_timeout_ms,
            operation_timeout: Duration::from_millis(db.connection_timeout_ms),
            pool_size: size as u64,
            password: target.password.clone(),
            relay_lock_name: relay_lock_name(db.layout.inbox_table.as_str()),
            layout: db.layout.clone(),
        };
        store.wait_for_database(db, plain).await?;
        let indexes = store.id_indexes().await?;
        if indexes != IdIndexes::default() {
            store.sql = Arc::new(Statements::new(&db.layout, &indexes)?);
        }
        Ok(store)
    }

    /// The unique id index of each table that exists; a table that does not exist yet gets
    /// the name QueueBox's migration gives it (schema.md §5.3).
    async fn id_indexes(&self) -> Result<IdIndexes, StoreError> {
        const DURING: &str = "reading the catalog";
        let mut conn = self.conn_for(StoreAction::Connect, DURING).await?;
        let fail = |e: mysql_async::Error| self.error(StoreAction::Connect, DURING, &e);
        let defaults = IdIndexes::default();
        let mut lookup =
            async |table: &str, column: &str, default: Option<queuebox_core::SqlIdentifier>| {
                if !guard::table_exists(&mut conn, &self.sql, table)
                    .await
                    .map_err(fail)?
                {
                    return Ok::<_, StoreError>(default);
                }
                let stmt = &self.sql.id_index;
                let name: Option<String> = conn
                    .exec_first(
                        &stmt.sql,
                        stmt.params(&[("name", table.into()), ("column", column.into())]),
                    )
                    .await
                    .map_err(fail)?;
                Ok(name.and_then(|n| queuebox_core::SqlIdentifier::parse(&n).ok()))
            };
        let outbox = lookup(
            self.layout.outbox_table.as_str(),
            self.layout.outbox.id.as_str(),
            defaults.outbox,
        )
        .await?;
        let inbox = lookup(
            self.layout.inbox_table.as_str(),
            self.layout.inbox.id.as_str(),
            defaults.inbox,
        )
        .await?;
        Ok(IdIndexes { outbox, inbox })
    }

    /// The mapped table and column names.
    pub fn layout(&self) -> &TableLayout {
        &self.layout
    }

    /// Tries to reach the database until it answers or `database.startupTimeoutMs` runs out,
    /// pausing 250 ms, doubling, at most 5 s between tries (CFG-37). A permanent refusal (access
    /// denied, an unknown database, a server too old) stops the wait at once (issue 14 item 1).
    /// `plain`: the options without TLS that `ssl-mode: preferred` falls back to when the server
    /// offers no TLS (CFG-40); the wait then starts again on a pool of those.
    async fn wait_for_database(
        &mut self,
        db: &DatabaseConfig,
        mut plain: Option<OptsBuilder>,
    ) -> Result<(), StoreError> {
        let (user, database) = match &db.target {
            DatabaseTarget::Mysql(target) => (target.user.clone(), target.database.clone()),
            _ => (String::new(), String::new()),
        };
        loop {
            let may_fall_back = plain.is_some();
            let answer =
                queuebox_store::wait_for_database(&db.host_port, db.startup_timeout_ms, || async {
                    let once = async {
                        let mut conn = self.pool.get_conn().await?;
                        conn.query_first::<String, _>(&self.sql.server_version.sql)
                            .await
                    };
                    match once.await {
                        Ok(version) => classify::check_version(version.as_deref().unwrap_or(""))
                            .map(|()| Reached::Answered),
                        Err(mysql_async::Error::Driver(DriverError::NoClientSslFlagFromServer))
                            if may_fall_back =>
                        {
                            Ok(Reached::OffersNoTls)
                        }
                        Err(err) => Err(classify::attempt(
                            &err,
                            classify::reason(&err, &self.password),
                            &user,
                            &database,
                        )),
                    }
                })
                .await?;
            match (answer, plain.take()) {
                (Reached::OffersNoTls, Some(opts)) => {
                    tracing::info!(host_port = %db.host_port, "the server offers no TLS; ssl-mode preferred connects without it");
                    let tls_pool = std::mem::replace(&mut self.pool, Pool::new(opts));
                    let _ = tls_pool.disconnect().await;
                }
                _ => return Ok(()),
            }
        }
    }

    /// A driver error as the store error of its kind, redacted.
    pub(crate) fn error(
        &self,
        action: StoreAction,
        during: &'static str,
        err: &mysql_async::Error,
    ) -> StoreError {
        StoreError::statement(
            classify::kind(err),
            action,
            during,
            classify::reason(err, &self.password),
        )
    }

    /// `error` for the engine's statements.
    pub(crate) fn fail(
        &self,
        during: &'static str,
    ) -> impl Fn(mysql_async::Error) -> StoreError + '_ {
        move |e| self.error(StoreAction::UseDatabase, during, &e)
    }

    /// A pooled connection, waiting at most `database.connectionTimeoutMs` for one.
    pub(crate) async fn conn_for(
        &self,
        action: StoreAction,
        during: &'static str,
    ) -> Result<Conn, StoreError> {
        match tokio::time::timeout(self.operation_timeout, self.pool.get_conn()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(err)) => Err(self.error(action, during, &err)),
            Err(_) => Err(StoreError::Outage {
                action,
                during,
                reason: format!(
                    "no database connection within {} ms",
                    self.operation_timeout.as_millis()
                ),
            }),
        }
    }

    pub(crate) async fn conn(&self, during: &'static str) -> Result<Conn, StoreError> {
        self.conn_for(StoreAction::UseDatabase, during).await
    }

    /// One statement on one pooled connection; its rows.
    pub(crate) async fn rows(
        &self,
        during: &'static str,
        stmt: &Stmt,
        values: &[(&str, Value)],
    ) -> Result<Vec<Row>, StoreError> {
        let mut conn = self.conn(during).await?;
        conn.exec(&stmt.sql, stmt.params(values))
            .await
            .map_err(self.fail(during))
    }

    /// One statement on one pooled connection; the rows it matched (CLIENT_FOUND_ROWS).
    pub(crate) async fn execute(
        &self,
        during: &'static str,
        stmt: &Stmt,
        values: &[(&str, Value)],
    ) -> Result<u64, StoreError> {
        let mut conn = self.conn(during).await?;
        conn.exec_drop(&stmt.sql, stmt.params(values))
            .await
            .map_err(self.fail(during))?;
        Ok(conn.affected_rows())
    }

    /// A locking read and the write of the rows it returned, in one short transaction: the
    /// shape of every batch write on MySQL, which has no `UPDATE ... RETURNING`. `build` makes
    /// the write's values from the read's rows; `None` (nothing to write) commits the read
    /// alone. The answer is `build`'s value and the rows the write matched.
    pub(crate) async fn read_then_write<T>(
        &self,
        during: &'static str,
        read: (&Stmt, &[(&str, Value)]),
        write: &Stmt,
        build: impl FnOnce(Vec<Row>) -> Result<Option<(T, Vec<(&'static str, Value)>)>, StoreError>,
    ) -> Result<Option<(T, u64)>, StoreError> {
        let mut conn = self.conn(during).await?;
        self.read_then_write_on(&mut conn, during, read, write, build)
            .await
    }

    /// [`MysqlStore::read_then_write`] on a connection the caller holds (one that holds a
    /// named lock). An error drops the transaction, which rolls it back.
    pub(crate) async fn read_then_write_on<T>(
        &self,
        conn: &mut Conn,
        during: &'static str,
        read: (&Stmt, &[(&str, Value)]),
        write: &Stmt,
        build: impl FnOnce(Vec<Row>) -> Result<Option<(T, Vec<(&'static str, Value)>)>, StoreError>,
    ) -> Result<Option<(T, u64)>, StoreError> {
        let fail = self.fail(during);
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .map_err(&fail)?;
        let rows: Vec<Row> = tx
            .exec(&read.0.sql, read.0.params(read.1))
            .await
            .map_err(&fail)?;
        let Some((answer, values)) = build(rows)? else {
            tx.commit().await.map_err(&fail)?;
            return Ok(None);
        };
        tx.exec_drop(&write.sql, write.params(&values))
            .await
            .map_err(&fail)?;
        let changed = tx.affected_rows();
        tx.commit().await.map_err(&fail)?;
        Ok(Some((answer, changed)))
    }
}

/// inbox.md RLY-6: `queuebox_inbox_claim_<table>`, or the prefix and the first 40 hex digits
/// of SHA-256 of the table name when the whole name would pass GET_LOCK's 64 characters.
pub(crate) fn relay_lock_name(table: &str) -> String {
    use sha2::{Digest, Sha256};
    let name = format!("queuebox_inbox_claim_{table}");
    if name.chars().count() <= 64 {
        name
    } else {
        let digest = hex::encode(Sha256::digest(table.as_bytes()));
        format!("queuebox_inbox_claim_{}", &digest[..40])
    }
}

/// `ssl-mode` (config.md CFG-40) as the driver's TLS options; `None` for `disabled`.
/// `preferred` and `required` do not check the certificate, `verify_ca` checks the chain,
/// `verify_identity` the chain and the host name. The trusted roots are the built-in Mozilla
/// set plus the certificates of `ssl-ca`.
fn ssl_opts(target: &MysqlTarget) -> Option<SslOpts> {
    let ssl = match target.ssl_mode {
        MysqlSslMode::Disabled => return None,
        MysqlSslMode::Preferred | MysqlSslMode::Required => SslOpts::default()
            .with_danger_accept_invalid_certs(true)
            .with_danger_skip_domain_validation(true),
        MysqlSslMode::VerifyCa => SslOpts::default().with_danger_skip_domain_validation(true),
        MysqlSslMode::VerifyIdentity => SslOpts::default(),
    };
    Some(match &target.ssl_ca {
        Some(ca) => ssl.with_root_certs(vec![PathBuf::from(ca).into()]),
        None => ssl,
    })
}

fn mysql_target(db: &DatabaseConfig) -> Result<&MysqlTarget, StoreError> {
    match &db.target {
        DatabaseTarget::Mysql(target) => Ok(target),
        DatabaseTarget::Postgres(_)
        | DatabaseTarget::Sqlite(_)
        | DatabaseTarget::Sqlserver { .. } => Err(StoreError::BadTarget {
            reason: format!(
                "the MySQL store cannot open a database of type {}",
                db.db_type.as_str()
            ),
        }),
    }
}

#[async_trait]
impl SchemaStore for MysqlStore {
    async fn migrate(&self, request: &MigrateRequest) -> Result<MigrateReport, StoreError> {
        let backend = MysqlMigrationBackend { store: self };
        run_migrate(&backend, &self.layout, request).await
    }

    async fn check_schema(&self, needs: &SchemaNeeds) -> Result<(), StoreError> {
        const DURING: &str = "reading the catalog";
        let mut conn = self.conn_for(StoreAction::CheckSchema, DURING).await?;
        let facts = guard::read_facts(&mut conn, &self.sql, &self.layout)
            .await
            .map_err(|e| self.error(StoreAction::CheckSchema, DURING, &e))?;
        let problems = evaluate_schema(&self.layout, &facts, &MysqlDialect, needs);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(StoreError::SchemaMismatch { problems })
        }
    }

    async fn ping(&self) -> Result<(), StoreError> {
        const DURING: &str = "a readiness query";
        let round_trip = async {
            let mut conn = self.conn(DURING).await?;
            conn.query_drop(&self.sql.ping.sql)
                .await
                .map_err(self.fail(DURING))
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
impl Store for MysqlStore {
    fn pool_status(&self) -> PoolStatus {
        use std::sync::atomic::Ordering::Relaxed;
        let m = self.pool.metrics();
        PoolStatus {
            active: m.connections_in_use.load(Relaxed) as u64,
            idle: m.connections_in_pool.load(Relaxed) as u64,
            max: self.pool_size,
            pending: m.active_wait_requests.load(Relaxed) as u64,
        }
    }

    async fn close(&self) {
        if let Err(err) = self.pool.clone().disconnect().await {
            tracing::debug!(reason = %classify::reason(&err, &self.password), "closing the MySQL pool");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rly_6_lock_name_is_the_table_or_its_digest() {
        assert_eq!(relay_lock_name("inbox"), "queuebox_inbox_claim_inbox");
        let long = "t".repeat(60);
        let name = relay_lock_name(&long);
        assert_eq!(name.len(), "queuebox_inbox_claim_".len() + 40);
        assert!(name.starts_with("queuebox_inbox_claim_"));
        assert!(name.len() <= 64);
    }
}
