//! Opening the pool and waiting for the database at start (config.md CFG-37/40, operations.md
//! OPS-24 step 8): session settings, timeouts, TLS, and the retry with backoff.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use queuebox_core::database::{DatabaseConfig, PgSslMode, PostgresTarget};
use queuebox_store::{Attempt, StoreError};
use tokio_postgres::config::SslMode;

use crate::{redact, sql, tls};

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

/// The oldest server QueueBox runs on (config.md CFG-38), as `server_version_num`.
const OLDEST_SERVER: i64 = 140000;

/// Tries to reach the database until it answers or `database.startupTimeoutMs` runs out,
/// pausing 250 ms, doubling, at most 5 s between tries (CFG-37). A permanent refusal (a wrong
/// password, a role or database that does not exist, TLS refused, a server older than 14)
/// stops the wait at once (issue 14 item 1).
pub(crate) async fn wait_for_database(
    pool: &Pool,
    db: &DatabaseConfig,
    target: &PostgresTarget,
) -> Result<(), StoreError> {
    queuebox_store::wait_for_database(&db.host_port, db.startup_timeout_ms, || {
        try_once(pool, target)
    })
    .await
}

async fn try_once(pool: &Pool, target: &PostgresTarget) -> Result<(), Attempt> {
    let client = pool.get().await.map_err(|e| {
        let reason = redact::pool_error(&e, &target.password);
        let code = match &e {
            PoolError::Backend(e) => e.code().map(|c| c.code().to_owned()),
            _ => None,
        };
        attempt(code.as_deref(), reason, target)
    })?;
    let rows = client
        .simple_query(sql::SERVER_VERSION)
        .await
        .map_err(|e| {
            let reason = redact::pg_error(&e, &target.password);
            attempt(e.code().map(|c| c.code()), reason, target)
        })?;
    let version = rows.iter().find_map(|message| match message {
        tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
        _ => None,
    });
    check_version(version.as_deref())
}

/// A server older than [`OLDEST_SERVER`] is a permanent refusal; a version that cannot be read
/// is let through (the schema guard and the statements find out soon enough).
fn check_version(version: Option<&str>) -> Result<(), Attempt> {
    match version.map(str::parse::<i64>) {
        Some(Ok(number)) if number < OLDEST_SERVER => Err(Attempt::Refused {
            reason: format!(
                "the server is PostgreSQL {}.{}, and QueueBox needs PostgreSQL 14 or later",
                number / 10000,
                number % 10000 / 100
            ),
            fix: "Upgrade the server, or point database.url at one that is 14 or later.".to_owned(),
        }),
        _ => Ok(()),
    }
}

/// A failed try as a retry or a refusal, by the SQLSTATE the server sent or, without one, by
/// the TLS failure the driver saw. Everything else (refused, timed out, the server starting
/// up: 57P03) is worth another try.
pub(crate) fn attempt(code: Option<&str>, reason: String, target: &PostgresTarget) -> Attempt {
    let user = &target.user;
    let database = target.database.as_deref().unwrap_or(user);
    let fix = match code {
        // invalid_password
        Some("28P01") => Some(
            "Check the password: database.password, or the password in database.url.".to_owned(),
        ),
        // invalid_authorization_specification: no such role, or no pg_hba.conf line (which
        // is also how a server that requires TLS refuses a connection without it).
        Some("28000") if reason.contains("pg_hba.conf") => Some(
            "Allow this host, user and database in the server's pg_hba.conf; a hostssl line needs sslmode=require in database.url.".to_owned(),
        ),
        Some("28000") => Some(format!(
            "Create the role (createuser {user}), or set database.username (or the user in database.url) to one that exists."
        )),
        // invalid_catalog_name
        Some("3D000") => Some(format!(
            "Create the database (createdb {database}), or fix the database name in database.url."
        )),
        // insufficient_privilege: no CONNECT on the database.
        Some("42501") => Some(format!(
            "Grant the role the right to connect: GRANT CONNECT ON DATABASE {database} TO {user}."
        )),
        Some(_) => None,
        None if reason.contains("does not support TLS") => Some(
            "Enable TLS on the server, or set sslmode=prefer or sslmode=disable in database.url."
                .to_owned(),
        ),
        None if reason.to_ascii_lowercase().contains("certificate") => Some(
            "Check the server's certificate and sslrootcert, or choose a weaker sslmode in database.url."
                .to_owned(),
        ),
        None => None,
    };
    match fix {
        Some(fix) => Attempt::Refused { reason, fix },
        None => Attempt::Retry(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 14 item 1: a server older than 14 stops the start with the fix; 14 and later, or a
    /// version that cannot be read, do not. (No server older than 14 runs here, so the rule is
    /// tested on the `server_version_num` text the server would send.)
    #[test]
    fn a_server_older_than_14_is_a_permanent_refusal() {
        match check_version(Some("130012")) {
            Err(Attempt::Refused { reason, fix }) => {
                assert_eq!(
                    reason,
                    "the server is PostgreSQL 13.0, and QueueBox needs PostgreSQL 14 or later"
                );
                assert!(fix.starts_with("Upgrade the server"), "{fix}");
            }
            other => panic!("{other:?}"),
        }
        assert!(check_version(Some("140000")).is_ok());
        assert!(check_version(Some("150019")).is_ok());
        assert!(check_version(None).is_ok());
    }
}
