//! The `notify` capture listener (outbox.md OUT-57, schema.md SCH-24/25, operations.md OPS-18):
//! one dedicated connection outside the pool that runs `LISTEN queuebox_outbox` and turns each
//! notification naming this outbox table into a wake-up of the poller; reconnects with a backoff
//! of 1 s doubling to 30 s, and wakes the poller once after each reconnect. Polling stays on
//! beside it, so a lost notification costs latency, never a message.

use std::future::{Future, poll_fn};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use queuebox_core::Secret;
use queuebox_core::database::{DatabaseConfig, PgSslMode};
use queuebox_store::StoreError;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tokio_postgres::tls::TlsStream;
use tokio_postgres::{AsyncMessage, Client, Connection};

use crate::{connect, redact, tls};

/// The channel of SCH-24.
pub const CHANNEL: &str = "queuebox_outbox";
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Whether the LISTEN connection is open: the advisory readiness component `outbox-capture`.
#[derive(Clone, Debug, Default)]
pub struct ListenerHealth(Arc<AtomicBool>);

impl ListenerHealth {
    pub fn is_listening(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self, up: bool) {
        self.0.store(up, Ordering::Relaxed);
    }
}

/// The listener of one replica. Build it at start; [`OutboxListener::run`] it as a task.
pub struct OutboxListener {
    config: tokio_postgres::Config,
    sslmode: PgSslMode,
    sslrootcert: Option<String>,
    password: Secret,
    /// The payload that names this replica's outbox table (`TG_TABLE_NAME`).
    table: String,
    health: ListenerHealth,
}

/// How one connection ended.
enum Ended {
    Stopped,
    Failed(String),
}

impl OutboxListener {
    /// The listener for the store of `db`; it opens no connection yet.
    pub fn new(db: &DatabaseConfig) -> Result<Self, StoreError> {
        let target = crate::store::postgres_target(db)?;
        let timeout = Duration::from_millis(db.connection_timeout_ms);
        // Checked now, so a bad TLS setting stops the start instead of every reconnect.
        tls::connector(target.sslmode, target.sslrootcert.as_deref())?;
        Ok(Self {
            config: connect::pg_config(target, timeout),
            sslmode: target.sslmode,
            sslrootcert: target.sslrootcert.clone(),
            password: target.password.clone(),
            table: db.layout.outbox_table.as_str().to_owned(),
            health: ListenerHealth::default(),
        })
    }

    pub fn health(&self) -> ListenerHealth {
        self.health.clone()
    }

    /// Listens until `stop` completes. Each notification whose payload names this outbox table
    /// calls `wake.notify_one()` (one stored permit: any number of notifications during a claim
    /// cycle cause one further cycle, OUT-57 point 3); others are ignored (point 2). A failed
    /// connection logs a warning and is opened again after the backoff (point 5).
    pub async fn run(self, wake: Arc<Notify>, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let mut backoff = FIRST_BACKOFF;
        let mut reconnect = false;
        loop {
            let ended = tokio::select! {
                () = &mut stop => Ended::Stopped,
                ended = self.listen_once(&wake, reconnect, &mut backoff) => ended,
            };
            self.health.set(false);
            let reason = match ended {
                Ended::Stopped => return,
                Ended::Failed(reason) => reason,
            };
            tracing::warn!(
                error = %reason,
                retry_in_ms = backoff.as_millis() as u64,
                "The LISTEN connection of outbox.capture.mode notify failed. QueueBox keeps polling and reconnects."
            );
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            reconnect = true;
        }
    }

    /// One connection: open it, LISTEN, and pass notifications on until it fails.
    async fn listen_once(&self, wake: &Notify, reconnect: bool, backoff: &mut Duration) -> Ended {
        let connector = match tls::connector(self.sslmode, self.sslrootcert.as_deref()) {
            Ok(connector) => connector,
            Err(err) => return Ended::Failed(err.to_string()),
        };
        let opened = match connector {
            Some(tls) => match self.config.connect(tls).await {
                Ok((client, connection)) => {
                    self.serve(client, connection, wake, reconnect, backoff)
                        .await
                }
                Err(err) => Err(err),
            },
            None => match self.config.connect(tokio_postgres::NoTls).await {
                Ok((client, connection)) => {
                    self.serve(client, connection, wake, reconnect, backoff)
                        .await
                }
                Err(err) => Err(err),
            },
        };
        match opened {
            Ok(reason) => Ended::Failed(reason),
            Err(err) => Ended::Failed(redact::pg_error(&err, &self.password)),
        }
    }

    /// Runs `LISTEN` on an open connection, then forwards its notifications; returns why the
    /// connection ended.
    async fn serve<S, T>(
        &self,
        client: Client,
        mut connection: Connection<S, T>,
        wake: &Notify,
        reconnect: bool,
        backoff: &mut Duration,
    ) -> Result<String, tokio_postgres::Error>
    where
        S: AsyncRead + AsyncWrite + Unpin,
        T: TlsStream + Unpin,
    {
        let listen = client.batch_execute(LISTEN);
        tokio::pin!(listen);
        // The connection must be driven while LISTEN runs; nothing is notified before it ends.
        loop {
            tokio::select! {
                done = &mut listen => { done?; break; }
                message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                    Some(Ok(_)) => {}
                    Some(Err(err)) => return Err(err),
                    None => return Ok("the server closed the connection".to_owned()),
                },
            }
        }
        self.health.set(true);
        *backoff = FIRST_BACKOFF;
        if reconnect {
            tracing::info!("The LISTEN connection of outbox.capture.mode notify is open again.");
            // Point 5: rows inserted while it was down are looked for at once.
            wake.notify_one();
        } else {
            tracing::info!(channel = CHANNEL, "Listening for outbox notifications.");
        }
        loop {
            match poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if n.channel() == CHANNEL && n.payload() == self.table {
                        wake.notify_one();
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => return Err(err),
                None => return Ok("the server closed the connection".to_owned()),
            }
        }
    }
}

const LISTEN: &str = "LISTEN queuebox_outbox";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sch_24_the_listen_statement_uses_the_channel() {
        assert_eq!(LISTEN, format!("LISTEN {CHANNEL}"));
    }
}
