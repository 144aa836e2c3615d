//! What a Kafka source and a Kafka destination share: the librdkafka settings of the bootstrap
//! servers and of the security keys (INB-68, DST-38), and the client context that turns
//! librdkafka's log lines, errors and statistics into redacted `tracing` lines and a broker
//! state the readiness component reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use queuebox_config::{KafkaSecurity, SaslMechanism, SecurityProtocol};
use queuebox_core::redact::redact;
use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// How often librdkafka reports its statistics, from which the broker state is read.
pub(crate) const STATISTICS_INTERVAL_MS: &str = "1000";

/// The librdkafka settings of `bootstrapServers` and the security keys. SASL credentials go into
/// the client's own configuration, never into a printed text.
pub(crate) fn base_config(servers: &[String], security: &KafkaSecurity) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", servers.join(","))
        .set("security.protocol", security.protocol.as_str())
        .set("statistics.interval.ms", STATISTICS_INTERVAL_MS)
        // Reconnect attempts back off to at most 2 s apart, so a broker that comes back is used
        // again within about 2 s (INB-74).
        .set("reconnect.backoff.ms", "100")
        .set("reconnect.backoff.max.ms", "2000");
    if matches!(
        security.protocol,
        SecurityProtocol::Ssl | SecurityProtocol::SaslSsl
    ) {
        // INB-68, DST-38: the broker certificate is checked against the system's trusted roots
        // (OpenSSL's default locations, probed), and so is its host name.
        config
            .set("enable.ssl.certificate.verification", "true")
            .set("ssl.endpoint.identification.algorithm", "https")
            .set("ssl.ca.location", "probe");
    }
    if let Some(sasl) = &security.sasl {
        config
            .set("sasl.mechanism", mechanism(sasl.mechanism))
            .set("sasl.username", &sasl.username)
            .set("sasl.password", sasl.password.expose());
    }
    config
}

pub(crate) fn mechanism(mechanism: SaslMechanism) -> &'static str {
    match mechanism {
        SaslMechanism::Plain => "PLAIN",
        SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
        SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
    }
}

/// The client context of every QueueBox Kafka client: log lines and errors of librdkafka pass
/// the shared redaction before they reach the log (INB-76, DST-4), and the statistics say
/// whether a broker connection is up.
pub(crate) struct Context {
    /// `source <name>` or `destination <name>`, for the log lines.
    pub(crate) owner: String,
    /// At least one broker of the cluster (not only a bootstrap address) is connected, as the
    /// last statistics said; false after "all brokers down".
    pub(crate) broker_up: Arc<AtomicBool>,
    /// This client was connected to a broker of the cluster once.
    pub(crate) was_up: Arc<AtomicBool>,
    /// This client lost every broker after it was connected. Its owner replaces it: a broker
    /// that comes back may have lost the topics, the offsets and the producer ids this client
    /// holds (see `source::Poller::replace_consumer` and `KafkaDestination::replace`).
    pub(crate) lost: Arc<AtomicBool>,
}

impl Context {
    pub(crate) fn new(owner: String) -> Self {
        Self {
            owner,
            broker_up: Arc::new(AtomicBool::new(false)),
            was_up: Arc::new(AtomicBool::new(false)),
            lost: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The client is connected (a metadata answer or a record said so).
    pub(crate) fn mark_up(&self) {
        self.broker_up.store(true, Ordering::SeqCst);
        self.was_up.store(true, Ordering::SeqCst);
    }

    /// This client lost every broker after it had been connected.
    pub(crate) fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        let text = redact(message);
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error
            | RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", owner = %self.owner, "librdkafka {facility}: {text}")
            }
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::debug!(target: "librdkafka", owner = %self.owner, "librdkafka {facility}: {text}")
            }
            RDKafkaLogLevel::Debug => {
                tracing::trace!(target: "librdkafka", owner = %self.owner, "librdkafka {facility}: {text}")
            }
        }
    }

    fn stats_raw(&self, statistics: &[u8]) {
        match brokers_up(statistics) {
            Some(true) => self.mark_up(),
            Some(false) => self.broker_up.store(false, Ordering::SeqCst),
            None => {}
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) {
            self.broker_up.store(false, Ordering::SeqCst);
            // A client that never connected (the cluster is down at the start) is not
            // replaced: it holds nothing that a returning broker could contradict.
            if self.was_up.load(Ordering::SeqCst) {
                self.lost.store(true, Ordering::SeqCst);
            }
        }
        // librdkafka reports each lost connection here and reconnects by itself: a debug line
        // for those, a warning for anything else.
        let text = redact(&format!("{error}: {reason}"));
        match error.rdkafka_error_code() {
            Some(
                RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::Resolve,
            ) => {
                tracing::debug!(owner = %self.owner, "Kafka connection: {text}")
            }
            _ => tracing::warn!(owner = %self.owner, "Kafka client error: {text}"),
        }
    }
}

/// From librdkafka's statistics JSON: whether a learned broker (node id ≥ 0) is in state `UP`.
/// `None` when the text does not parse or names no learned broker yet.
fn brokers_up(statistics: &[u8]) -> Option<bool> {
    let value: serde_json::Value = serde_json::from_slice(statistics).ok()?;
    let brokers = value.get("brokers")?.as_object()?;
    let mut learned = false;
    for broker in brokers.values() {
        let node = broker.get("nodeid").and_then(serde_json::Value::as_i64);
        if node.is_some_and(|n| n >= 0) {
            learned = true;
            if broker.get("state").and_then(serde_json::Value::as_str) == Some("UP") {
                return Some(true);
            }
        }
    }
    learned.then_some(false)
}

/// The text of a librdkafka error, redacted (DST-4, INB-76).
pub(crate) fn error_text(err: &KafkaError) -> String {
    redact(&err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_config::KafkaSasl;
    use queuebox_core::Secret;

    #[test]
    fn inb_68_dst_38_sasl_ssl_sets_the_mechanism_credentials_and_verification() {
        let security = KafkaSecurity {
            protocol: SecurityProtocol::SaslSsl,
            sasl: Some(KafkaSasl {
                mechanism: SaslMechanism::ScramSha512,
                username: "app".into(),
                password: Secret::new("hunter2"),
            }),
        };
        let config = base_config(&["k1:9092".into(), "k2:9092".into()], &security);
        assert_eq!(config.get("bootstrap.servers"), Some("k1:9092,k2:9092"));
        assert_eq!(config.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(config.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(config.get("sasl.username"), Some("app"));
        assert_eq!(config.get("sasl.password"), Some("hunter2"));
        assert_eq!(
            config.get("enable.ssl.certificate.verification"),
            Some("true")
        );
        assert_eq!(
            config.get("ssl.endpoint.identification.algorithm"),
            Some("https")
        );
        let plain = base_config(
            &["k1:9092".into()],
            &KafkaSecurity {
                protocol: SecurityProtocol::Plaintext,
                sasl: None,
            },
        );
        assert_eq!(plain.get("security.protocol"), Some("PLAINTEXT"));
        assert_eq!(plain.get("sasl.mechanism"), None);
    }

    #[test]
    fn inb_69_the_statistics_say_whether_a_learned_broker_is_up() {
        let up = br#"{"brokers":{"127.0.0.1:9092/bootstrap":{"nodeid":-1,"state":"UP"},"127.0.0.1:9092/1":{"nodeid":1,"state":"UP"}}}"#;
        assert_eq!(brokers_up(up), Some(true));
        let down = br#"{"brokers":{"127.0.0.1:9092/1":{"nodeid":1,"state":"CONNECT"}}}"#;
        assert_eq!(brokers_up(down), Some(false));
        let bootstrap_only = br#"{"brokers":{"b/bootstrap":{"nodeid":-1,"state":"UP"}}}"#;
        assert_eq!(brokers_up(bootstrap_only), None);
        assert_eq!(brokers_up(b"not json"), None);
    }
}
