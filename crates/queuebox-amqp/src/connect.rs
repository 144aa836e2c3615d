//! Opening the one connection of a source or a destination: bounded in time, named after the
//! part that owns it (visible in the management UI), every error text redacted so no URL
//! password reaches a log line or `last_error` (DST-4, DST-5).

use std::time::Duration;

use lapin::types::LongString;
use lapin::{Connection, ConnectionProperties};
use queuebox_core::Secret;
use queuebox_core::redact::redact;

/// The longest a connection attempt may take; the broker's TCP accept, the AMQP handshake and
/// the authentication included.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to `url`. `Err` is the redacted reason.
pub(crate) async fn connect(url: &Secret, name: &str) -> Result<Connection, String> {
    let properties = ConnectionProperties::default()
        .with_connection_name(LongString::from(format!("queuebox {name}")));
    match tokio::time::timeout(
        CONNECT_TIMEOUT,
        Connection::connect(url.expose(), properties),
    )
    .await
    {
        Ok(Ok(connection)) => Ok(connection),
        Ok(Err(err)) => Err(error_text(&err)),
        Err(_) => Err(format!(
            "no connection within {} ms",
            CONNECT_TIMEOUT.as_millis()
        )),
    }
}

/// The redacted text of a client error, for log lines and `last_error`.
pub(crate) fn error_text(err: &lapin::Error) -> String {
    redact(&err.to_string())
}
