//! Every driver error as the store error of its kind (`StoreErrorKind`), with a short reason
//! fit for a log or start-up line: the server's message and error number, or the root cause
//! of a connection failure, never the whole chain and never the password (OPS-25, CFG-43).

use mysql_async::Error;
use queuebox_core::Secret;
use queuebox_store::{Attempt, StoreErrorKind};

/// MySQL / MariaDB server error numbers that mean "lost a race; the same call may succeed":
/// 1205 lock wait timeout (row locks, and metadata locks past `lock_wait_timeout`), 1213
/// deadlock, 3572 a NOWAIT lock refused, 1969 MariaDB `max_statement_time`, 3024 MySQL
/// `max_execution_time`, 1317 a statement interrupted by KILL QUERY.
const TRANSIENT: &[u16] = &[1205, 1213, 3572, 1969, 3024, 1317];

/// Errors of the server's state or of the connection: too many connections (1040, 1203), the
/// server shutting down (1053, 1077, 1078, 1079), network read/write failures the server
/// reports (1152..1161), the connection killed (1927 MariaDB, 3169 MySQL), out of memory
/// (1037, 1038, 1041).
const OUTAGE: &[u16] = &[
    1037, 1038, 1040, 1041, 1053, 1077, 1078, 1079, 1152, 1153, 1154, 1155, 1156, 1157, 1158, 1159,
    1160, 1161, 1203, 1927, 3169,
];

/// The data of the statement refused: a value too long (1406) or out of range (1264, 1690),
/// a string the character set cannot hold (1366, 1367), a bad time value (1292), a NULL for a
/// NOT NULL column (1048), truncated data (1265), a failed CHECK (4025 MariaDB, 3819 MySQL,
/// which is how a MariaDB JSON column refuses text that is not JSON), MySQL's invalid JSON
/// text (3140) and JSON value errors (3141..3150).
const DATA_REJECTED: &[u16] = &[
    1048, 1264, 1265, 1292, 1366, 1367, 1406, 1690, 3140, 3141, 3142, 3143, 3144, 3145, 3146, 3147,
    3148, 3149, 3150, 3819, 4025,
];

/// The kind of a driver error.
pub(crate) fn kind(err: &Error) -> StoreErrorKind {
    match err {
        Error::Server(server) if TRANSIENT.contains(&server.code) => StoreErrorKind::Transient,
        Error::Server(server) if OUTAGE.contains(&server.code) => StoreErrorKind::Outage,
        Error::Server(server) if DATA_REJECTED.contains(&server.code) => {
            StoreErrorKind::DataRejected
        }
        Error::Server(_) | Error::Url(_) => StoreErrorKind::Other,
        // A lost or refused connection, a broken packet, a closed pool.
        Error::Io(_) | Error::Driver(_) | Error::Other(_) => StoreErrorKind::Outage,
    }
}

/// A failed try at start as a retry or a refusal (issue 14 item 1). Access denied (1045, and
/// 1698 for a socket-authenticated account), no access to the database (1044), an unknown
/// database (1049), a server that requires TLS of a connection without it (3159) and an
/// authentication method the driver cannot speak (1251) do not change by waiting; a refused or
/// lost connection, or a server still starting, does.
pub(crate) fn attempt(err: &Error, reason: String, user: &str, database: &str) -> Attempt {
    let Error::Server(server) = err else {
        return Attempt::Retry(reason);
    };
    let fix = match server.code {
        1045 | 1698 => format!(
            "Check the user and password (database.username, database.password, or the ones in database.url), and that the account {user} may connect from this host."
        ),
        1044 => format!("Grant the account its rights: GRANT ALL ON `{database}`.* TO {user}."),
        1049 => format!(
            "Create the database (CREATE DATABASE `{database}`), or fix its name in database.url."
        ),
        3159 => "The server requires TLS for this account: set ssl-mode=required (or verify_ca / verify_identity) in database.url.".to_owned(),
        1251 => "Give the account an authentication method the client supports (caching_sha2_password or mysql_native_password).".to_owned(),
        _ => return Attempt::Retry(reason),
    };
    Attempt::Refused { reason, fix }
}

/// CFG-38: MySQL 8.0.13 or later, MariaDB 10.6 or later, from `SELECT VERSION()`
/// (`8.0.36`, `10.11.6-MariaDB-1:10.11.6+maria~ubu2204`). A version that does not read as
/// numbers is let through: the schema guard and the statements still check what they need.
pub(crate) fn check_version(version: &str) -> Result<(), Attempt> {
    let mariadb = version.to_ascii_lowercase().contains("mariadb");
    let numbers: Vec<u32> = version
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map_while(|part| part.parse().ok())
        .collect();
    let [major, minor, patch] = numbers[..] else {
        return Ok(());
    };
    let (oldest, name) = if mariadb {
        ((10, 6, 0), "MariaDB 10.6")
    } else {
        ((8, 0, 13), "MySQL 8.0.13")
    };
    if (major, minor, patch) < oldest {
        return Err(Attempt::Refused {
            reason: format!("the server is version {version}, and QueueBox needs {name} or later"),
            fix: "Upgrade the server, or point database.url at one that is new enough.".to_owned(),
        });
    }
    Ok(())
}

/// A reason for a driver error.
pub(crate) fn reason(err: &Error, password: &Secret) -> String {
    let text = match err {
        Error::Server(server) => format!("{} (MySQL error {})", server.message, server.code),
        other => root_cause(other),
    };
    scrub(text, password)
}

/// The innermost error's text: the fact that failed ("Connection refused (os error 111)").
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut current = err;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

/// A server never sends the password back, but a message could echo connection text; hiding
/// it here keeps the rule in one place.
pub(crate) fn scrub(text: String, password: &Secret) -> String {
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
    fn issue_14_1_old_servers_are_refused_and_current_ones_pass() {
        for ok in [
            "8.0.13",
            "8.4.2",
            "10.6.0-MariaDB",
            "10.11.6-MariaDB-1:10.11.6+maria~ubu2204",
            "11.4.2-MariaDB",
            "odd",
        ] {
            assert_eq!(check_version(ok), Ok(()), "{ok}");
        }
        for old in ["8.0.12", "5.7.44", "10.5.9-MariaDB"] {
            assert!(
                matches!(check_version(old), Err(Attempt::Refused { .. })),
                "{old}"
            );
        }
    }
    use mysql_async::ServerError;

    fn server(code: u16) -> Error {
        Error::Server(ServerError {
            code,
            message: format!("error {code} for secret-pw"),
            state: "HY000".into(),
        })
    }

    #[test]
    fn deadlocks_and_lock_wait_timeouts_are_transient() {
        assert_eq!(kind(&server(1213)), StoreErrorKind::Transient);
        assert_eq!(kind(&server(1205)), StoreErrorKind::Transient);
        assert_eq!(kind(&server(1040)), StoreErrorKind::Outage);
        assert_eq!(kind(&server(1406)), StoreErrorKind::DataRejected);
        assert_eq!(kind(&server(4025)), StoreErrorKind::DataRejected);
        assert_eq!(kind(&server(1146)), StoreErrorKind::Other);
    }

    #[test]
    fn ops_25_reasons_never_hold_the_password() {
        let text = reason(&server(1213), &Secret::new("secret-pw"));
        assert_eq!(text, "error 1213 for *** (MySQL error 1213)");
    }
}
