//! The NATS destination (destinations.md §7): one connection per destination, opened on the
//! first publish and reconnecting forever (DST-2, DST-43); each row published to its subject
//! with the headers of DST-45, then confirmed by JetStream's acknowledgement (DST-46) or, on
//! core NATS, by a flush (DST-47).

use std::time::Duration;

use async_nats::header::{HeaderMap, HeaderName, HeaderValue};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::{Client, jetstream};
use bytes::Bytes;
use queuebox_config::{Address, DestinationKind};
use queuebox_core::outgoing_headers::{Groups, assemble, is_reserved};
use queuebox_core::redact::redacted_error_text;
use queuebox_core::{
    Destination, DestinationType, Outcome, OutgoingMessage, ReadinessComponent, Secret,
};
use tokio::sync::OnceCell;

use crate::classify::{Answer, classify};
use crate::connection::ConnectionSettings;
use crate::error::NatsError;
use crate::subject::subject_for;

/// A NATS destination, built from its configuration by the binary's wiring.
pub struct NatsDestination {
    name: String,
    address: Address,
    jet_stream: bool,
    /// `timeoutMs`: the connection timeout and the budget of one publish.
    timeout: Duration,
    static_headers: Vec<(String, Secret)>,
    connection: ConnectionSettings,
    /// Opened by the first publish (DST-2), kept for the life of the destination.
    client: OnceCell<Connected>,
}

struct Connected {
    client: Client,
    jetstream: jetstream::Context,
}

impl NatsDestination {
    /// Checks the static headers (DST-8, DST-10) and keeps the settings; opens nothing yet.
    ///
    /// # Panics
    /// When `destination` is not of type `nats`: a defect of the caller.
    pub fn from_config(destination: &queuebox_config::Destination) -> Result<Self, NatsError> {
        let DestinationKind::Nats(nats) = &destination.kind else {
            panic!("NatsDestination::from_config needs a nats destination")
        };
        let static_headers: Vec<(String, Secret)> = destination
            .headers
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), value.clone()))
            .collect();
        for (header, value) in &static_headers {
            if is_reserved(header, &[]) {
                return Err(NatsError::ReservedHeader {
                    destination: destination.name.clone(),
                    header: header.clone(),
                });
            }
            if let Some(reason) = carry_problem(header, value.expose()) {
                return Err(NatsError::InvalidHeader {
                    destination: destination.name.clone(),
                    header: header.clone(),
                    reason,
                });
            }
        }
        let timeout = Duration::from_millis(nats.timeout_ms);
        Ok(Self {
            name: destination.name.clone(),
            address: nats.subject.clone(),
            jet_stream: nats.jet_stream,
            timeout,
            static_headers,
            connection: ConnectionSettings {
                servers: nats.servers.clone(),
                credentials: nats.credentials.clone(),
                name: format!("queuebox destination {}", destination.name),
                connect_timeout: timeout,
            },
            client: OnceCell::new(),
        })
    }

    async fn connected(&self) -> Result<&Connected, NatsError> {
        self.client
            .get_or_try_init(|| async {
                let client = self.connection.connect().await?;
                tracing::info!(
                    destination = self.name.as_str(),
                    servers = self.connection.printable_servers().as_str(),
                    "NATS destination connecting"
                );
                let jetstream = jetstream::ContextBuilder::new()
                    .timeout(self.timeout)
                    // Concurrent publishes wait for a free acknowledgement slot instead of
                    // failing (outbox.concurrency bounds them anyway).
                    .backpressure_on_inflight(true)
                    .build(client.clone());
                Ok(Connected { client, jetstream })
            })
            .await
    }

    /// DST-45: static and row headers by DST-9, then the standard ones. Row headers NATS cannot
    /// carry are left out with one warning (DST-10); `Nats-` row headers pass through as they
    /// are, so JetStream applies them as publish directives (DST-48).
    fn headers(&self, message: &OutgoingMessage) -> HeaderMap {
        let id = message.id.to_string();
        let mut standard = vec![
            ("x-message-id".to_owned(), id.clone()),
            ("x-topic".to_owned(), message.topic.clone()),
            ("x-attempt".to_owned(), message.attempt.to_string()),
        ];
        if let Some(key) = message.key.as_ref().filter(|k| !k.is_empty()) {
            standard.push(("x-message-key".to_owned(), key.clone()));
        }
        let assembled = assemble(
            Groups {
                standard,
                row: &message.headers,
                auth: None,
                statics: &self.static_headers,
            },
            &[],
            |name, value| carry_problem(name, value).is_none(),
        );
        for name in &assembled.reserved_dropped {
            tracing::debug!(
                destination = self.name.as_str(),
                message_id = id.as_str(),
                "row header {name:?} has a reserved name and is not sent"
            );
        }
        if !assembled.uncarriable_dropped.is_empty() {
            tracing::warn!(
                destination = self.name.as_str(),
                message_id = id.as_str(),
                "row headers {:?} cannot be carried by NATS and are not sent",
                assembled.uncarriable_dropped
            );
        }
        let mut headers = HeaderMap::new();
        for (name, value) in assembled.headers {
            // `carry_problem` accepted both, so neither parse fails; a failure would drop only
            // this header, never the message.
            if let (Ok(name), Ok(value)) =
                (name.parse::<HeaderName>(), value.parse::<HeaderValue>())
            {
                headers.insert(name, value);
            }
        }
        headers
    }

    async fn publish_jetstream(
        &self,
        connected: &Connected,
        subject: &str,
        headers: HeaderMap,
        payload: Bytes,
    ) -> Outcome {
        let sent = connected
            .jetstream
            .publish_with_headers(subject.to_owned(), headers, payload)
            .await;
        let ack = match sent {
            Ok(future) => future.await,
            Err(err) => Err(err),
        };
        match ack {
            Ok(ack) => {
                if ack.duplicate {
                    // DST-46: the stream already holds a message with this Nats-Msg-Id.
                    tracing::debug!(
                        destination = self.name.as_str(),
                        stream = ack.stream.as_str(),
                        "JetStream acknowledged the publish as a duplicate"
                    );
                }
                classify(&self.name, Answer::Stored)
            }
            Err(err) => match err.kind() {
                PublishErrorKind::StreamNotFound => {
                    classify(&self.name, Answer::NoStream { subject })
                }
                PublishErrorKind::TimedOut => classify(&self.name, Answer::TimedOut(self.timeout)),
                _ => classify(&self.name, Answer::Refused(&redacted_error_text(&err))),
            },
        }
    }

    async fn publish_core(
        &self,
        connected: &Connected,
        subject: &str,
        headers: HeaderMap,
        payload: Bytes,
    ) -> Outcome {
        let published = async {
            connected
                .client
                .publish_with_headers(subject.to_owned(), headers, payload)
                .await
                .map_err(|err| redacted_error_text(&err))?;
            connected
                .client
                .flush()
                .await
                .map_err(|err| redacted_error_text(&err))
        };
        match tokio::time::timeout(self.timeout, published).await {
            Ok(Ok(())) => classify(&self.name, Answer::Flushed),
            Ok(Err(reason)) => classify(&self.name, Answer::Refused(&reason)),
            Err(_) => classify(&self.name, Answer::TimedOut(self.timeout)),
        }
    }
}

/// DST-10 for NATS: a name with whitespace, `:` or a character the protocol cannot carry (NATS
/// header names are printable ASCII), or a value with CR or LF.
pub(crate) fn carry_problem(name: &str, value: &str) -> Option<&'static str> {
    if name.is_empty() || name.chars().any(|c| !c.is_ascii_graphic() || c == ':') {
        Some("a NATS header name is printable ASCII without whitespace or ':'")
    } else if value.contains(['\r', '\n']) {
        Some("a NATS header value has no CR or LF")
    } else {
        None
    }
}

#[async_trait::async_trait]
impl Destination for NatsDestination {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> DestinationType {
        DestinationType::Nats
    }

    async fn publish(&self, message: &OutgoingMessage) -> Outcome {
        let subject = match subject_for(&self.name, &self.address, message) {
            Ok(subject) => subject,
            Err(reason) => return Outcome::failed(reason),
        };
        let connected = match self.connected().await {
            Ok(connected) => connected,
            Err(err) => return classify(&self.name, Answer::Refused(&err.to_string())),
        };
        let headers = self.headers(message);
        let payload = Bytes::from(message.payload.clone().into_bytes());
        if self.jet_stream {
            self.publish_jetstream(connected, &subject, headers, payload)
                .await
        } else {
            self.publish_core(connected, &subject, headers, payload)
                .await
        }
    }

    /// OPS-18 lists no destination components: a broker that is down fails publishes, which
    /// retry (DST-2), and never makes QueueBox unready.
    fn readiness(&self) -> Vec<ReadinessComponent> {
        Vec::new()
    }

    /// OPS-26 phase 9: flush what the client still buffers, then close the connection.
    async fn close(&self) {
        if let Some(connected) = self.client.get() {
            let _ = tokio::time::timeout(self.timeout, connected.client.flush()).await;
            let _ = tokio::time::timeout(self.timeout, connected.client.drain()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dst_10_nats_cannot_carry_whitespace_or_colon_names_or_cr_lf_values() {
        assert!(carry_problem("x-tenant", "acme").is_none());
        assert!(carry_problem("Nats-Msg-Id", "evt-1").is_none());
        assert!(carry_problem("x tenant", "acme").is_some());
        assert!(carry_problem("x:tenant", "acme").is_some());
        assert!(carry_problem("", "acme").is_some());
        assert!(carry_problem("x-tenant", "a\r\nb").is_some());
        assert!(carry_problem("x-tenant", "ünïcode ok").is_none());
    }
}
