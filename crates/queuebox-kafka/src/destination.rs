//! The Kafka destination (destinations.md §6): one idempotent producer per destination with
//! `acks=all`, a 1 ms linger and the delivery budget `timeoutMs` (DST-39); each row becomes one
//! record on the topic of its address, keyed by the key template and partitioned by the murmur2
//! hash of the key as Kafka's own clients do (DST-40, DST-41). A publish succeeds only on the
//! broker's acknowledgement (DST-42).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use queuebox_config::{Address, AddressColumn, Destination as DestinationConfig, DestinationKind};
use queuebox_config::{KafkaSecurity, Route};
use queuebox_core::outgoing_headers::{Groups, assemble, is_reserved};
use queuebox_core::template::{Template, TemplateField, payload_field};
use queuebox_core::{
    Destination, DestinationType, Outcome, OutgoingMessage, ReadinessComponent, Secret,
};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

use crate::client::{Context, base_config, error_text};
use crate::error::KafkaConfigError;

/// One `kafka` destination, from configuration (CFG-52).
#[derive(Clone, Debug)]
pub struct KafkaDestinationSettings {
    pub name: String,
    pub bootstrap_servers: Vec<String>,
    pub topic: Address,
    pub key_template: Template,
    pub timeout: Duration,
    pub security: KafkaSecurity,
    pub static_headers: Vec<(String, Secret)>,
}

impl KafkaDestinationSettings {
    /// `None` when `destination` is not of type `kafka`.
    pub fn from_config(destination: &DestinationConfig) -> Option<Self> {
        let DestinationKind::Kafka(kafka) = &destination.kind else {
            return None;
        };
        Some(Self {
            name: destination.name.clone(),
            bootstrap_servers: kafka.bootstrap_servers.clone(),
            topic: kafka.topic.clone(),
            key_template: kafka.key_template.clone(),
            timeout: Duration::from_millis(kafka.timeout_ms),
            security: kafka.security.clone(),
            static_headers: destination
                .headers
                .iter()
                .map(|(name, value)| (name.as_str().to_owned(), value.clone()))
                .collect(),
        })
    }

    /// DST-39: the producer's settings.
    pub fn producer_config(&self) -> rdkafka::ClientConfig {
        let timeout_ms = self.timeout.as_millis() as u64;
        let mut config = base_config(&self.bootstrap_servers, &self.security);
        config
            .set("client.id", format!("queuebox-destination-{}", self.name))
            .set("acks", "all")
            .set("enable.idempotence", "true")
            // Issue 11: 1 ms, not 0. The idempotent producer sends a partition a new request only
            // while fewer than 5 of its records are unacknowledged; the others wait in its queue.
            // With a linger of 0 librdkafka 2.12 sets the broker thread's next wake-up to "now"
            // for such a waiting record, so the thread polls its socket without a pause until an
            // acknowledgement comes (the records' "linger has passed"; the in-flight limit is not
            // looked at): 120–450 µs of CPU a record at `outbox.concurrency` 8, a core of a small
            // machine taken from the broker and the database. With 1 ms the records that arrive
            // together go in one request, which rarely leaves any waiting, and a waiting record
            // spins only after 1 ms. Not less: the thread's poll timeout is in whole milliseconds,
            // so a shorter linger rounds down to the same spinning poll (0.1 and 0.2 ms measured
            // worse); not more: a publish waits up to the linger before it is sent, and 2 or 5 ms
            // cost throughput at 8 rows at once (issue 11 measurements in docs/benchmarks.md).
            .set("linger.ms", "1")
            .set("delivery.timeout.ms", timeout_ms.to_string())
            .set(
                "request.timeout.ms",
                timeout_ms.saturating_sub(1000).max(1000).to_string(),
            )
            // DST-41: the murmur2 hash of the key, as Kafka's Java client partitions (a record
            // without a key goes to a random partition). librdkafka's own default hashes with
            // CRC32, which would put a key on another partition than other producers do.
            .set("partitioner", "murmur2_random");
        config
    }
}

/// The record key rule of one route (DST-21): its template, else the destination's, and the
/// route's `routingKeyMissingFieldDefault` for a missing field.
#[derive(Clone, Debug)]
struct KeyRule {
    template: Template,
    missing: String,
}

/// A `kafka` destination.
pub struct KafkaDestination {
    settings: KafkaDestinationSettings,
    /// The one producer; replaced when librdkafka reports it unusable (a fatal error of the
    /// idempotent producer).
    producer: RwLock<Arc<KafkaProducer>>,
    default_key: KeyRule,
}

impl KafkaDestination {
    /// Checks the static headers (DST-8) and creates the producer, which connects in the
    /// background: a broker that cannot be reached never stops the start (DST-2).
    pub fn new(settings: KafkaDestinationSettings) -> Result<Arc<Self>, KafkaConfigError> {
        for (header, _) in &settings.static_headers {
            if is_reserved(header, &[]) {
                return Err(KafkaConfigError::ReservedHeader {
                    destination: settings.name.clone(),
                    header: header.clone(),
                });
            }
        }
        let producer = create_producer(&settings)?;
        let default_key = KeyRule {
            template: settings.key_template.clone(),
            missing: String::new(),
        };
        Ok(Arc::new(Self {
            settings,
            producer: RwLock::new(Arc::new(producer)),
            default_key,
        }))
    }

    /// The destination as one route sees it: the route's `routingKeyTemplate`, when set, wins
    /// over `keyTemplate`, and a missing field renders as the route's
    /// `routingKeyMissingFieldDefault` (DST-14, DST-21).
    pub fn for_route(self: &Arc<Self>, route: &Route) -> Arc<dyn Destination> {
        Arc::new(RoutedKafka {
            inner: Arc::clone(self),
            key: KeyRule {
                template: route
                    .routing_key_template
                    .clone()
                    .unwrap_or_else(|| self.settings.key_template.clone()),
                missing: route.routing_key_missing_field_default.clone(),
            },
        })
    }

    fn failed(&self, reason: &str) -> Outcome {
        Outcome::failed(format!(
            "The publish to '{}' failed. Reason: {reason}",
            self.settings.name
        ))
    }

    async fn publish_with(&self, message: &OutgoingMessage, key: &KeyRule) -> Outcome {
        let topic = match topic_for(&self.settings.name, &self.settings.topic, message) {
            Ok(topic) => topic,
            Err(text) => return Outcome::failed(text),
        };
        let record_key = key
            .template
            .render(&key.missing, |field| field_value(message, field));
        let headers = self.headers(message);
        let mut record: FutureRecord<'_, str, str> = FutureRecord::to(&topic)
            .payload(message.payload.as_str())
            .headers(headers);
        // DST-40: an empty key result sends no key.
        if !record_key.is_empty() {
            record = record.key(record_key.as_str());
        }
        let mut producer = Arc::clone(&self.producer.read().unwrap_or_else(|e| e.into_inner()));
        if producer.lost.load(Ordering::SeqCst) {
            self.replace(
                &producer,
                "the Kafka producer lost every broker; a new producer takes over, so a broker that comes back without its topics or producer ids is used with fresh metadata",
            );
            producer = Arc::clone(&self.producer.read().unwrap_or_else(|e| e.into_inner()));
        }
        let timeout = self.settings.timeout;
        // The delivery timeout of the producer is the same budget; this bound only guards
        // against a report that never comes.
        let sent = tokio::time::timeout(
            timeout + Duration::from_millis(500),
            producer.client.send(record, timeout),
        )
        .await;
        match sent {
            Ok(Ok(_delivery)) => {
                producer.was_up.store(true, Ordering::SeqCst);
                Outcome::Delivered
            }
            Ok(Err((err, _))) => {
                self.replace_if_fatal(&producer);
                self.failed(&error_text(&err))
            }
            Err(_) => self.failed(&format!(
                "no acknowledgement within {}ms",
                timeout.as_millis()
            )),
        }
    }

    /// An idempotent producer that had a fatal error refuses every later record: the next
    /// publish uses a new one.
    fn replace_if_fatal(&self, failed: &Arc<KafkaProducer>) {
        let Some((code, reason)) = failed.client.client().fatal_error() else {
            return;
        };
        self.replace(
            failed,
            &format!(
                "the Kafka producer had a fatal error ({code:?}: {}); a new producer takes over",
                queuebox_core::redact::redact(&reason)
            ),
        );
    }

    /// Puts a new producer in the place of `failed`, once (concurrent publishes that saw the
    /// same producer fail do not replace its successor). Records `failed` still holds finish
    /// or fail on it; it closes when the last of them returns.
    ///
    /// A producer that lost every broker is replaced too: an idempotent producer's id and
    /// sequence numbers live on the broker, and one that came back without them (tansu keeps
    /// nothing across a restart) never acknowledges that producer's records again.
    fn replace(&self, failed: &Arc<KafkaProducer>, why: &str) {
        let mut slot = self.producer.write().unwrap_or_else(|e| e.into_inner());
        if Arc::ptr_eq(&slot, failed) {
            tracing::warn!(destination = self.settings.name.as_str(), "{why}");
            match create_producer(&self.settings) {
                Ok(producer) => *slot = Arc::new(producer),
                Err(err) => tracing::warn!(
                    destination = self.settings.name.as_str(),
                    "a new Kafka producer cannot be created: {err}"
                ),
            }
        }
    }

    /// DST-40: static and row headers by DST-9, then `x-message-id`, `x-topic` and `x-attempt`.
    /// Kafka carries any header name and UTF-8 value, so only reserved row names are left out.
    fn headers(&self, message: &OutgoingMessage) -> OwnedHeaders {
        let id = message.id.to_string();
        let standard = vec![
            ("x-message-id".to_owned(), id.clone()),
            ("x-topic".to_owned(), message.topic.clone()),
            ("x-attempt".to_owned(), message.attempt.to_string()),
        ];
        let count = standard.len();
        let assembled = assemble(
            Groups {
                standard,
                row: &message.headers,
                auth: None,
                statics: &self.settings.static_headers,
            },
            &[],
            |_, _| true,
        );
        for name in &assembled.reserved_dropped {
            tracing::debug!(
                destination = self.settings.name.as_str(),
                message_id = id.as_str(),
                "row header {name:?} has a reserved name and is not sent"
            );
        }
        let (standard, others) = assembled.headers.split_at(count);
        let mut headers = OwnedHeaders::new_with_capacity(assembled.headers.len());
        for (name, value) in others.iter().chain(standard) {
            headers = headers.insert(Header {
                key: name,
                value: Some(value.as_str()),
            });
        }
        headers
    }
}

/// One producer, and the flag its context raises when it lost every broker.
struct KafkaProducer {
    client: FutureProducer<Context>,
    lost: Arc<AtomicBool>,
    /// Raised by an acknowledgement too: the statistics (every second) may not have said so
    /// yet when a new producer loses its broker.
    was_up: Arc<AtomicBool>,
}

fn create_producer(settings: &KafkaDestinationSettings) -> Result<KafkaProducer, KafkaConfigError> {
    let context = Context::new(format!("destination {}", settings.name));
    let lost = Arc::clone(&context.lost);
    let was_up = Arc::clone(&context.was_up);
    let client = settings
        .producer_config()
        .create_with_context(context)
        .map_err(|err| KafkaConfigError::Client {
            owner: format!("destinations.{}", settings.name),
            reason: error_text(&err),
        })?;
    Ok(KafkaProducer {
        client,
        lost,
        was_up,
    })
}

/// DST-17..20: the topic of this row, or the failure text.
pub(crate) fn topic_for(
    destination: &str,
    address: &Address,
    message: &OutgoingMessage,
) -> Result<String, String> {
    match address {
        Address::Template(template) => {
            // DST-14: a missing value renders empty in an address template.
            let topic = template.render("", |field| field_value(message, field));
            if topic.is_empty() {
                return Err(format!(
                    "Destination '{destination}' rendered an empty topic from template '{template}'. QueueBox does not publish the message."
                ));
            }
            Ok(topic)
        }
        Address::Column(column) => {
            let value = match column {
                AddressColumn::AggregateType => message.aggregate_type.clone(),
                AddressColumn::Topic => Some(message.topic.clone()),
                AddressColumn::Key => message.key.clone(),
            };
            value.filter(|v| !v.is_empty()).ok_or_else(|| {
                format!(
                    "Destination '{destination}' read an empty topic from column '{}'. QueueBox does not publish the message.",
                    column.as_str()
                )
            })
        }
    }
}

/// A template field of the row (DST-13); `{{ payload.… }}` reads the stored payload (DST-15).
fn field_value(message: &OutgoingMessage, field: &TemplateField) -> Option<String> {
    match field {
        TemplateField::Topic => Some(message.topic.clone()),
        TemplateField::Key => message.key.clone().filter(|k| !k.is_empty()),
        TemplateField::AggregateType => message.aggregate_type.clone().filter(|a| !a.is_empty()),
        TemplateField::Payload(path) => {
            let payload: serde_json::Value =
                serde_json::from_str(message.template_payload()).ok()?;
            payload_field(&payload, path)
        }
        // Not a destination field: the config crate refuses it at start.
        TemplateField::Source | TemplateField::EventType => None,
    }
}

#[async_trait::async_trait]
impl Destination for KafkaDestination {
    fn name(&self) -> &str {
        &self.settings.name
    }

    fn kind(&self) -> DestinationType {
        DestinationType::Kafka
    }

    async fn publish(&self, message: &OutgoingMessage) -> Outcome {
        self.publish_with(message, &self.default_key).await
    }

    /// None: operations.md OPS-18 lists readiness components for sources only; a destination
    /// that cannot reach its broker shows in failed deliveries and their metrics.
    fn readiness(&self) -> Vec<ReadinessComponent> {
        Vec::new()
    }

    /// OPS-26 phase 9: every publish has returned, so nothing is queued; flushing once more is
    /// cheap, then the producer closes when the last reference goes.
    async fn close(&self) {
        let producer = Arc::clone(&self.producer.read().unwrap_or_else(|e| e.into_inner()));
        let timeout = self.settings.timeout;
        let _ = tokio::task::spawn_blocking(move || producer.client.flush(timeout)).await;
    }
}

/// A `kafka` destination behind one route, with that route's key rule (DST-21). It shares the
/// destination's producer.
pub struct RoutedKafka {
    inner: Arc<KafkaDestination>,
    key: KeyRule,
}

#[async_trait::async_trait]
impl Destination for RoutedKafka {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn kind(&self) -> DestinationType {
        DestinationType::Kafka
    }

    async fn publish(&self, message: &OutgoingMessage) -> Outcome {
        self.inner.publish_with(message, &self.key).await
    }

    fn readiness(&self) -> Vec<ReadinessComponent> {
        Vec::new()
    }

    /// The destination itself is closed once, from the list of destinations.
    async fn close(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::template::TemplateFields;
    use uuid::Uuid;

    fn message() -> OutgoingMessage {
        OutgoingMessage {
            id: Uuid::nil(),
            topic: "order.created".into(),
            key: Some("o-1".into()),
            aggregate_type: None,
            attempt: 2,
            headers: vec![
                ("x-tenant".into(), "acme".into()),
                ("X-Message-Id".into(), "forged".into()),
            ],
            payload: r#"{"region":"eu"}"#.into(),
            stored_payload: None,
        }
    }

    fn settings(topic: Address) -> KafkaDestinationSettings {
        KafkaDestinationSettings {
            name: "events".into(),
            bootstrap_servers: vec!["127.0.0.1:1".into()],
            topic,
            key_template: Template::parse("{{ key }}", TemplateFields::Destination).unwrap(),
            timeout: Duration::from_millis(30_000),
            security: KafkaSecurity {
                protocol: queuebox_config::SecurityProtocol::Plaintext,
                sasl: None,
            },
            static_headers: vec![("X-Static".into(), Secret::new("yes"))],
        }
    }

    #[test]
    fn dst_39_the_producer_is_idempotent_with_acks_all_a_1_ms_linger_and_the_budget() {
        let config = settings(Address::Column(AddressColumn::Topic)).producer_config();
        assert_eq!(config.get("acks"), Some("all"));
        assert_eq!(config.get("enable.idempotence"), Some("true"));
        assert_eq!(config.get("linger.ms"), Some("1"), "issue 11: not 0");
        assert_eq!(config.get("delivery.timeout.ms"), Some("30000"));
        assert_eq!(config.get("request.timeout.ms"), Some("29000"));
        assert_eq!(config.get("partitioner"), Some("murmur2_random"), "DST-41");
        let mut short = settings(Address::Column(AddressColumn::Topic));
        short.timeout = Duration::from_millis(2000);
        assert_eq!(
            short.producer_config().get("request.timeout.ms"),
            Some("1000")
        );
    }

    #[test]
    fn dst_18_dst_20_an_empty_topic_fails_with_the_spec_text() {
        let template = Template::parse(
            "events.{{ aggregateType }}{{ payload.none }}",
            TemplateFields::Destination,
        )
        .unwrap();
        let mut row = message();
        assert_eq!(
            topic_for("events", &Address::Template(template.clone()), &row),
            Ok("events.".to_owned())
        );
        let empty = Template::parse("{{ aggregateType }}", TemplateFields::Destination).unwrap();
        assert_eq!(
            topic_for("events", &Address::Template(empty), &row),
            Err("Destination 'events' rendered an empty topic from template '{{ aggregateType }}'. QueueBox does not publish the message.".to_owned())
        );
        row.key = None;
        assert_eq!(
            topic_for("events", &Address::Column(AddressColumn::Key), &row),
            Err("Destination 'events' read an empty topic from column 'key'. QueueBox does not publish the message.".to_owned())
        );
    }

    #[tokio::test]
    async fn dst_40_headers_are_static_and_row_then_the_identity_headers() {
        use rdkafka::message::Headers;
        let destination =
            KafkaDestination::new(settings(Address::Column(AddressColumn::Topic))).unwrap();
        let headers = destination.headers(&message());
        let pairs: Vec<(String, String)> = headers
            .iter()
            .map(|h| {
                (
                    h.key.to_owned(),
                    String::from_utf8(h.value.unwrap().to_vec()).unwrap(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = [
            ("x-tenant", "acme"),
            ("X-Static", "yes"),
            ("x-message-id", "00000000-0000-0000-0000-000000000000"),
            ("x-topic", "order.created"),
            ("x-attempt", "2"),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            pairs, expected,
            "DST-8: the forged X-Message-Id is not sent"
        );
    }

    #[test]
    fn dst_8_a_reserved_static_header_stops_the_start() {
        let mut reserved = settings(Address::Column(AddressColumn::Topic));
        reserved.static_headers = vec![("X-Attempt".into(), Secret::new("9"))];
        let err = KafkaDestination::new(reserved).err().unwrap();
        assert_eq!(
            err.to_string(),
            "destinations.events.headers: 'X-Attempt' is a reserved header name; only QueueBox sets it"
        );
    }
}
