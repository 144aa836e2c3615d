//! One NATS connection as QueueBox opens it for a source or a destination: the configured
//! servers and credentials, reconnecting forever (INB-73, DST-43), and the servers as they may
//! be printed (user information masked, never a password or token).

use std::time::Duration;

use async_nats::{Client, ConnectOptions, ServerAddr};
use queuebox_config::NatsCredentials;

use crate::error::NatsError;

/// What a connection needs: the `servers` list and the credentials of the block.
#[derive(Clone, Debug)]
pub struct ConnectionSettings {
    /// `nats://host:port` or `tls://host:port` entries, as configured (they may carry user
    /// information, so they are never printed as they are).
    pub servers: Vec<String>,
    pub credentials: NatsCredentials,
    /// The connection name the server shows (`queuebox <kind> <name>`).
    pub name: String,
    /// The bound of one connection attempt.
    pub connect_timeout: Duration,
}

impl ConnectionSettings {
    /// The servers as a log line may show them: user information replaced by `***`.
    pub fn printable_servers(&self) -> String {
        self.servers
            .iter()
            .map(|server| mask_user_information(server))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The parsed server addresses; a URL that does not parse is reported without being
    /// printed, because it can carry a password (OPS-25).
    fn addresses(&self) -> Result<Vec<ServerAddr>, NatsError> {
        self.servers
            .iter()
            .map(|server| {
                server
                    .parse::<ServerAddr>()
                    .map_err(|_| NatsError::UnparsableServer)
            })
            .collect()
    }

    /// Opens the connection without waiting for it: the client connects in the background and
    /// keeps reconnecting for as long as QueueBox runs, so an unreachable server never stops
    /// the start (INB-74, DST-2). `Client::connection_state` tells whether it is connected.
    pub async fn connect(&self) -> Result<Client, NatsError> {
        let addresses = self.addresses()?;
        let mut options = ConnectOptions::new()
            .name(&self.name)
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(self.connect_timeout)
            // Reconnect attempts back off to at most 2 s apart, so a broker that comes back is
            // used again within about 2 s.
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((attempts as u64 * 100).min(2000))
            });
        options = match &self.credentials {
            NatsCredentials::None => options,
            NatsCredentials::UserPassword { username, password } => {
                options.user_and_password(username.clone(), password.expose().to_owned())
            }
            NatsCredentials::Token(token) => options.token(token.expose().to_owned()),
        };
        options
            .connect(addresses)
            .await
            .map_err(|err| NatsError::Connect(queuebox_core::redact::redacted_error_text(&err)))
    }
}

/// `nats://user:pass@host:4222` → `nats://***@host:4222`: the whole user information goes,
/// because a NATS URL may carry a token as its user name (DST-5).
pub fn mask_user_information(server: &str) -> String {
    let Some(scheme_end) = server.find("://").map(|i| i + 3) else {
        return server.to_owned();
    };
    let authority_end = server[scheme_end..]
        .find(['/', '?', '#'])
        .map_or(server.len(), |i| scheme_end + i);
    match server[scheme_end..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &server[..scheme_end], &server[scheme_end + at..]),
        None => server.to_owned(),
    }
}

/// Whether the client holds a live connection now.
pub fn is_connected(client: &Client) -> bool {
    client.connection_state() == async_nats::connection::State::Connected
}

/// Waits up to `limit` for the client to be connected.
pub async fn wait_connected(client: &Client, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if is_connected(client) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::Secret;

    fn settings(servers: &[&str]) -> ConnectionSettings {
        ConnectionSettings {
            servers: servers.iter().map(|s| s.to_string()).collect(),
            credentials: NatsCredentials::Token(Secret::new("t0ken")),
            name: "queuebox test".into(),
            connect_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn inb_73_dst_43_printed_servers_never_show_user_information() {
        let printed =
            settings(&["nats://app:hunter2@n1:4222", "nats://n2:4222"]).printable_servers();
        assert_eq!(printed, "nats://***@n1:4222,nats://n2:4222");
        assert!(!printed.contains("hunter2"));
        assert_eq!(
            mask_user_information("tls://s3cr3t-token@n:4222/x@y"),
            "tls://***@n:4222/x@y"
        );
        assert_eq!(mask_user_information("nats://n:4222"), "nats://n:4222");
    }
}
