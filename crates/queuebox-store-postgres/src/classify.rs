//! Which [`StoreErrorKind`] a PostgreSQL failure is, from its SQLSTATE (PostgreSQL manual,
//! appendix A "PostgreSQL Error Codes") or, without one, from what the driver saw: the engine
//! retries a transient failure soon, waits out an outage, and isolates a row whose data is
//! refused.

use deadpool_postgres::PoolError;
use queuebox_store::StoreErrorKind;

/// The kind of a server error by its SQLSTATE.
pub(crate) fn sqlstate_kind(code: &str) -> StoreErrorKind {
    match code {
        // serialization_failure, deadlock_detected, lock_not_available (lock_timeout, NOWAIT),
        // query_canceled (statement_timeout, a cancel request): nothing was written, and the
        // same statement may succeed when tried again.
        "40001" | "40P01" | "55P03" | "57014" => StoreErrorKind::Transient,
        // admin_shutdown, crash_shutdown, cannot_connect_now, idle_session_timeout,
        // idle_in_transaction_session_timeout: the server ended the session.
        "57P01" | "57P02" | "57P03" | "57P05" | "25P03" => StoreErrorKind::Outage,
        // Class 08, connection exception; class 53, insufficient resources (too many
        // connections, disk full, out of memory).
        _ if code.starts_with("08") || code.starts_with("53") => StoreErrorKind::Outage,
        // Class 22, data exception: the data itself is refused (a `\u0000` that jsonb cannot
        // hold, a number out of range).
        _ if code.starts_with("22") => StoreErrorKind::DataRejected,
        _ => StoreErrorKind::Other,
    }
}

/// The kind of a driver error: its SQLSTATE when the server sent one; a closed connection or
/// a failed socket is an outage; anything else (a value that does not convert) is a bug.
pub(crate) fn pg_kind(err: &tokio_postgres::Error) -> StoreErrorKind {
    if let Some(code) = err.code() {
        return sqlstate_kind(code.code());
    }
    if err.is_closed() || has_io_cause(err) {
        return StoreErrorKind::Outage;
    }
    StoreErrorKind::Other
}

/// The kind of a failure to get a pooled connection: a refused or lost connection, or no
/// connection within `database.connectionTimeoutMs`, is an outage.
pub(crate) fn pool_kind(err: &PoolError) -> StoreErrorKind {
    match err {
        PoolError::Backend(e) => match pg_kind(e) {
            StoreErrorKind::Other => StoreErrorKind::Outage,
            kind => kind,
        },
        _ => StoreErrorKind::Outage,
    }
}

fn has_io_cause(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(err);
    while let Some(e) = current {
        if e.is::<std::io::Error>() {
            return true;
        }
        current = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_races_are_transient() {
        for code in ["40001", "40P01", "55P03", "57014"] {
            assert_eq!(sqlstate_kind(code), StoreErrorKind::Transient, "{code}");
        }
    }

    #[test]
    fn ended_sessions_and_connection_classes_are_outages() {
        for code in [
            "57P01", "57P02", "57P03", "08006", "08001", "53300", "25P03",
        ] {
            assert_eq!(sqlstate_kind(code), StoreErrorKind::Outage, "{code}");
        }
    }

    #[test]
    fn data_exceptions_are_rejected_data_and_the_rest_is_other() {
        assert_eq!(sqlstate_kind("22P05"), StoreErrorKind::DataRejected);
        assert_eq!(sqlstate_kind("22003"), StoreErrorKind::DataRejected);
        // undefined_column, unique_violation: a schema or code fault, not worth a retry.
        assert_eq!(sqlstate_kind("42703"), StoreErrorKind::Other);
        assert_eq!(sqlstate_kind("23505"), StoreErrorKind::Other);
    }

    #[test]
    fn a_socket_failure_below_the_driver_error_is_found() {
        #[derive(Debug, thiserror::Error)]
        #[error("error connecting to server")]
        struct Outer(#[source] std::io::Error);
        let refused = Outer(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(has_io_cause(&refused));
        assert!(!has_io_cause(&std::fmt::Error));
    }
}
