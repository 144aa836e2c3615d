//! Turns driver and pool errors into short reasons fit for a start-up line: the database's own
//! message, or the root cause of a connection failure, never the whole error chain, never a
//! password (OPS-25, CFG-43).

use deadpool_postgres::PoolError;
use queuebox_core::Secret;

/// A reason for a tokio-postgres error.
pub(crate) fn pg_error(err: &tokio_postgres::Error, password: &Secret) -> String {
    let text = match err.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => root_cause(err),
    };
    scrub(text, password)
}

/// A reason for a failure to get a pooled connection.
pub(crate) fn pool_error(err: &PoolError, password: &Secret) -> String {
    match err {
        PoolError::Backend(e) => pg_error(e, password),
        PoolError::Timeout(_) => "timed out waiting for a database connection".to_owned(),
        PoolError::Closed => "the connection pool is closed".to_owned(),
        other => scrub(root_cause(other), password),
    }
}

/// The innermost error's text: the fact that failed ("Connection refused (os error 111)"),
/// without the layers of context the driver wraps around it.
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut current = err;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

/// A driver never sends the password back, but a server message could echo connection text;
/// hiding it here keeps the rule in one place.
fn scrub(text: String, password: &Secret) -> String {
    if password.is_empty() {
        text
    } else {
        text.replace(password.expose(), "***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfg_43_password_never_survives() {
        let secret = Secret::new("hunter2");
        assert_eq!(
            scrub("auth as app:hunter2 failed".into(), &secret),
            "auth as app:*** failed"
        );
        assert_eq!(scrub("plain".into(), &Secret::default()), "plain");
    }

    #[test]
    fn ops_25_root_cause_drops_the_context_layers() {
        #[derive(Debug, thiserror::Error)]
        #[error("error connecting to server: {0}")]
        struct Outer(#[source] std::io::Error);
        let err = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "refused",
        ));
        assert_eq!(root_cause(&err), "refused");
    }
}
