//! The kind of a SQLite error (`StoreErrorKind`): a busy or locked database is a lost race
//! (transient), a file that cannot be opened, read or written is an outage, a value the table
//! refuses (a CHECK, NOT NULL or STRICT type failure, a too-big value) is rejected data.

use queuebox_store::{StoreAction, StoreError, StoreErrorKind};
use rusqlite::ErrorCode;

pub(crate) fn kind(err: &rusqlite::Error) -> StoreErrorKind {
    let rusqlite::Error::SqliteFailure(failure, _) = err else {
        return StoreErrorKind::Other;
    };
    match failure.code {
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => StoreErrorKind::Transient,
        ErrorCode::ConstraintViolation | ErrorCode::TooBig | ErrorCode::TypeMismatch => {
            StoreErrorKind::DataRejected
        }
        ErrorCode::CannotOpen
        | ErrorCode::SystemIoFailure
        | ErrorCode::DiskFull
        | ErrorCode::ReadOnly
        | ErrorCode::DatabaseCorrupt
        | ErrorCode::NotADatabase
        | ErrorCode::PermissionDenied
        | ErrorCode::OutOfMemory
        | ErrorCode::FileLockingProtocolFailed
        | ErrorCode::NoLargeFileSupport => StoreErrorKind::Outage,
        _ => StoreErrorKind::Other,
    }
}

/// The error's text: SQLite's own message, which names no secret (SQLite has no password).
pub(crate) fn reason(err: &rusqlite::Error) -> String {
    match err {
        rusqlite::Error::SqliteFailure(failure, Some(message)) => {
            format!("{message} (SQLite error {})", failure.extended_code)
        }
        other => other.to_string(),
    }
}

/// A failed statement as the store error of its kind.
pub(crate) fn store_error(
    action: StoreAction,
    during: &'static str,
    err: &rusqlite::Error,
) -> StoreError {
    StoreError::statement(kind(err), action, during, reason(err))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), Some("m".into()))
    }

    #[test]
    fn busy_is_transient_constraint_is_rejected_cantopen_is_outage() {
        assert_eq!(kind(&failure(5)), StoreErrorKind::Transient); // SQLITE_BUSY
        assert_eq!(kind(&failure(6)), StoreErrorKind::Transient); // SQLITE_LOCKED
        assert_eq!(kind(&failure(275)), StoreErrorKind::DataRejected); // CONSTRAINT_CHECK
        assert_eq!(kind(&failure(3091)), StoreErrorKind::DataRejected); // CONSTRAINT_DATATYPE
        assert_eq!(kind(&failure(14)), StoreErrorKind::Outage); // SQLITE_CANTOPEN
        assert_eq!(kind(&failure(13)), StoreErrorKind::Outage); // SQLITE_FULL
        assert_eq!(kind(&failure(1)), StoreErrorKind::Other); // SQLITE_ERROR
    }
}
