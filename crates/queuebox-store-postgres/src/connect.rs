//! Opening the pool and waiting for the database at start (config.md CFG-37/40, operations.md
//! OPS-24 step 8): session settings, timeouts, TLS, and the retry with backoff.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use queuebox_core::database::{DatabaseConfig, PgSslMode, PostgresTarget};
use queuebox_store::StoreError;
use tokio::time::Instant;
use tokio_postgres::config::SslMode;

use crate::{redact, sql, tls};

/// The first pause between tries, doubled after each failed try up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The session settings QueueBox sets on every connection it opens (operations.md, "Several
/// replicas"), so that one stalled or vanished replica cannot hold up the others:
/// - `lock_timeout`: no statement waits longer than this for a lock another session holds. The
///   delivery path reads with `SKIP LOCKED` where a row can be held; this is the bound for the
///   rest (the relay's claim lock, a uniqueness wait at intake, a table an operator locked). A
///   statement that hits it fails as transient (`lock_not_available`) and is tried again.
/// - `idle_in_transaction_session_timeout`: the server ends a session that sits inside an open
///   transaction this long (a frozen or partitioned replica), which releases its row locks and
///   its claim lock. QueueBox's own transactions never wait between their statements.
/// - TCP keepalives, on both ends: a peer that vanished (a network partition, a dead host) is
///   noticed in about a minute instead of the system default of two hours.
///
/// `database.url`'s `options` come after these, so a `-c name=value` there wins.
pub(crate) const SESSION_OPTIONS: &str = "-c lock_timeout=5000 \
     -c idle_in_transaction_session_timeout=10000 \
     -c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3";

/// Client-side keepalives, matching the server-side ones of [`SESSION_OPTIONS`].
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_RETRIES: u32 = 3;

/// The driver settings for a target: the session settings of SCH-8 and [`SESSION_OPTIONS`],
/// `options`, keepalives, timeouts, TLS.
pub(crate) fn pg_config(
    target: &PostgresTarget,
    connection_timeout: Duration,
) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .host(&target.host)
        .port(target.port)
        .user(&target.user)
        .application_name(&target.application_name)
        .connect_timeout(
            target
                .connect_timeout_s
                .map_or(connection_timeout, |s| Duration::from_secs(u64::from(s))),
        )
        .ssl_mode(match target.sslmode {
            PgSslMode::Disable => SslMode::Disable,
            PgSslMode::Prefer => SslMode::Prefer,
            PgSslMode::Require | PgSslMode::VerifyCa | PgSslMode::VerifyFull => SslMode::Require,
        });
    if !target.password.is_empty() {
        config.password(target.password.expose());
    }
    if let Some(database) = &target.database {
        config.dbname(database);
    }
    config
        .keepalives(true)
        .keepalives_idle(KEEPALIVE_IDLE)
        .keepalives_interval(KEEPALIVE_INTERVAL)
        .keepalives_retries(KEEPALIVE_RETRIES);
    match &target.options {
        Some(options) => config.options(format!("{SESSION_OPTIONS} {options}")),
        None => config.options(SESSION_OPTIONS),
    };
    config
}

/// Builds the pool; it opens no connection yet.
pub(crate) fn build_pool(db: &DatabaseConfig, target: &PostgresTarget) -> Result<Pool, StoreError> {
    let connection_timeout = Duration::from_millis(db.connection_timeout_ms);
    let config = pg_config(target, connection_timeout);
    let connect_timeout = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(connection_timeout);
    let manager_config = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = match tls::connector(target.sslmode, target.sslrootcert.as_deref())? {
        Some(tls) => Manager::from_config(config, tls, manager_config),
        None => Manager::from_config(config, tokio_postgres::NoTls, manager_config),
    };
    let size = usize::try_from(db.pool_size).unwrap_or(usize::MAX).max(1);
    Pool::builder(manager)
        .max_size(size)
        .wait_timeout(Some(connection_timeout))
        .create_timeout(Some(connect_timeout))
        .recycle_timeout(Some(connection_timeout))
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| StoreError::BadTarget {
            reason: format!("the connection pool cannot be built: {e}"),
        })
}

/// Tries to reach the database until it answers or `database.startupTimeoutMs` runs out,
/// pausing 250 ms, doubling, at most 5 s between tries (CFG-37).
pub(crate) async fn wait_for_database(
    pool: &Pool,
    db: &DatabaseConfig,
    target: &PostgresTarget,
) -> Result<(), StoreError> {
    let startup = Duration::from_millis(db.startup_timeout_ms);
    let deadline = Instant::now() + startup;
    let mut backoff = FIRST_BACKOFF;
    let mut last_reason = "no answer".to_owned();
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            break;
        }
        match tokio::time::timeout(remaining, try_once(pool, target)).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(reason)) => {
                tracing::debug!(host_port = %db.host_port, %reason, "database not reachable yet");
                last_reason = reason;
            }
            Err(_) => break,
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(backoff.min(remaining)).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    Err(StoreError::NotReachable {
        host_port: db.host_port.clone(),
        waited_ms: db.startup_timeout_ms,
        reason: last_reason,
    })
}

async fn try_once(pool: &Pool, target: &PostgresTarget) -> Result<(), String> {
    let client = pool
        .get()
        .await
        .map_err(|e| redact::pool_error(&e, &target.password))?;
    client
        .simple_query(sql::PING)
        .await
        .map(|_| ())
        .map_err(|e| redact::pg_error(&e, &target.password))
}
