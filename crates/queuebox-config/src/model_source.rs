//! The validated sources (config.md §12): keys of every kind, then one variant per kind.

use std::time::Duration;

pub use queuebox_core::Consumption;
use queuebox_core::Secret;
pub use queuebox_core::filter::{Filter, FilterRule, FilterTest};
use queuebox_core::jsonpath::JsonPath;
use queuebox_core::template::Template;

use crate::model::{HeaderName, InboundAuth, TransformConfig};
use crate::model_destination::{KafkaSecurity, NatsCredentials};

/// `sources.<name>` (CFG-65): the keys every kind accepts, and the kind with its own keys.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: String,
    pub kind: SourceKind,
    pub consumption: Consumption,
    /// The relay topic; defaults resolved (`{{ eventType }}` for http, `{{ source }}` else).
    pub topic: Template,
    /// Empty when not set; broker kinds default to `$.id`.
    pub idempotency_key_path: Vec<JsonPath>,
    pub idempotency_key_expression: Option<String>,
    pub aggregate_id_path: Vec<JsonPath>,
    pub aggregate_id_expression: Option<String>,
    pub event_type_path: Vec<JsonPath>,
    pub event_type_expression: Option<String>,
    pub initial_delay: Duration,
    pub scheduled_at_header: Option<HeaderName>,
    pub scheduled_at_path: Vec<JsonPath>,
    pub transform: Option<TransformConfig>,
    pub filter: Filter,
    /// Applies to `http` sources only; a broker source ignores it (CFG-116).
    pub rate_limit: Option<RateLimit>,
    /// `storeRawBody` (issue 15): keep the body bytes as received in `inbox.raw_body`.
    pub store_raw_body: bool,
}

/// One variant per `type`, so wiring code matches exhaustively and can refuse kinds it cannot
/// run yet.
#[derive(Clone, Debug)]
pub enum SourceKind {
    Http(HttpSource),
    Rabbitmq(RabbitmqSource),
    Kafka(KafkaSource),
    Nats(NatsSource),
}

impl SourceKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Http(_) => "http",
            Self::Rabbitmq(_) => "rabbitmq",
            Self::Kafka(_) => "kafka",
            Self::Nats(_) => "nats",
        }
    }

    /// The broker-only keys, for the three broker kinds.
    pub fn broker(&self) -> Option<&BrokerAttributes> {
        match self {
            Self::Http(_) => None,
            Self::Rabbitmq(s) => Some(&s.broker),
            Self::Kafka(s) => Some(&s.broker),
            Self::Nats(s) => Some(&s.broker),
        }
    }
}

/// `type: http` (CFG-72).
#[derive(Clone, Debug)]
pub struct HttpSource {
    pub path: String,
    /// `inbox.basePath` + `path`: the `POST` route.
    pub route: String,
    pub idempotency_key_header: Option<HeaderName>,
    pub aggregate_id_header: Option<HeaderName>,
    pub event_type_header: Option<HeaderName>,
    pub auth: Option<InboundAuth>,
}

/// `attributeHeaders` (CFG-74).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttributeHeaders {
    pub idempotency_key: HeaderName,
    pub aggregate_id: HeaderName,
    pub event_type: HeaderName,
}

/// Keys of every broker kind (CFG-74).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerAttributes {
    pub event_type_from_header: bool,
    pub attribute_headers: AttributeHeaders,
}

/// `type: rabbitmq` (CFG-75).
#[derive(Clone, Debug)]
pub struct RabbitmqSource {
    pub connection_url: Secret,
    /// `connection_url` with its password replaced by `***` (CFG-23).
    pub masked_url: String,
    pub queue_name: String,
    pub prefetch_count: u16,
    pub declare_queue: bool,
    pub broker: BrokerAttributes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoOffsetReset {
    Earliest,
    Latest,
}

/// `type: kafka` (CFG-76).
#[derive(Clone, Debug)]
pub struct KafkaSource {
    pub bootstrap_servers: Vec<String>,
    pub topics: Vec<String>,
    pub group_id: String,
    pub auto_offset_reset: AutoOffsetReset,
    pub max_poll_records: u32,
    pub security: KafkaSecurity,
    pub broker: BrokerAttributes,
}

/// `type: nats` (CFG-77).
#[derive(Clone, Debug)]
pub struct NatsSource {
    pub servers: Vec<String>,
    pub stream: String,
    pub durable: String,
    pub filter_subject: Option<String>,
    pub ack_wait_ms: u64,
    pub batch_size: u32,
    pub credentials: NatsCredentials,
    pub broker: BrokerAttributes,
}

/// `rateLimit` (CFG-72).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub requests_per_minute: u32,
}
