//! The kind of a SQLite error (`StoreErrorKind`): a busy or locked database is a lost race
//! (transient), a file that cannot be opened, read or written is an outage, a value the table
//! refuses (a CHECK, NOT NULL or STRICT type failure, a too-big value) is rejected data.

use queuebox_store::{Attempt, StoreAction, StoreError, StoreErrorKind};
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

/// A failed open at start as a retry or a refusal (issue 14 item 1). A missing folder is worth
/// waiting for (a volume not mounted yet); a folder that exists but where the file cannot be
/// created or written (permissions, a read-only file system), a file that is no SQLite
/// database, or a file system without WAL does not change by waiting.
pub(crate) fn attempt(err: &rusqlite::Error, file: Option<&std::path::Path>) -> Attempt {
    let reason = reason(err);
    let (Some(file), rusqlite::Error::SqliteFailure(failure, message)) = (file, err) else {
        return Attempt::Retry(reason);
    };
    let folder = match file.parent() {
        Some(parent) if parent.as_os_str().is_empty() => std::path::Path::new("."),
        Some(parent) => parent,
        None => std::path::Path::new("/"),
    };
    if !folder.is_dir() {
        return Attempt::Retry(format!(
            "{reason}; the folder {} does not exist (yet)",
            folder.display()
        ));
    }
    let fix = match failure.code {
        ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt => format!(
            "{} is not a QueueBox SQLite database: point database.url at another file, or move this one away.",
            file.display()
        ),
        ErrorCode::CannotOpen
            if message
                .as_deref()
                .is_some_and(|m| m.contains("journal mode")) =>
        {
            "Put the file on a local file system that supports WAL (not a network share)."
                .to_owned()
        }
        ErrorCode::CannotOpen | ErrorCode::PermissionDenied | ErrorCode::ReadOnly => format!(
            "QueueBox creates and writes {} and its -wal and -shm files: make the folder {} and the file writable for this user, or point database.url at a folder that is.",
            file.display(),
            folder.display()
        ),
        _ => return Attempt::Retry(reason),
    };
    Attempt::Refused { reason, fix }
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
