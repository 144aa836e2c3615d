//! The validated destinations and routes (config.md §9), plus the Kafka and NATS connection
//! settings that sources share.

use std::collections::BTreeMap;
use std::path::PathBuf;

use queuebox_core::Secret;
use queuebox_core::glob::TopicGlob;
use queuebox_core::template::Template;

use crate::model::{HeaderName, TransformConfig};

/// `destinations.<name>` (CFG-49): the shared keys and the kind with its own keys.
#[derive(Clone, Debug)]
pub struct Destination {
    pub name: String,
    pub kind: DestinationKind,
    /// Static headers, in file order. Values are secrets (CFG-49).
    pub headers: Vec<(HeaderName, Secret)>,
    pub transform: Option<TransformConfig>,
    /// `rateLimit` (CFG-49b): off unless set.
    pub rate_limit: Option<DestinationRateLimit>,
    /// `circuitBreaker` (CFG-49c): off unless set.
    pub circuit_breaker: Option<CircuitBreaker>,
}

/// `rateLimit` of a destination (CFG-49b): a token bucket per replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DestinationRateLimit {
    pub messages_per_second: u32,
    /// Default: `messagesPerSecond`.
    pub burst: u32,
}

/// `circuitBreaker` of a destination (CFG-49c), per replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CircuitBreaker {
    /// Default 5.
    pub consecutive_failures: u32,
    /// Default none: only the consecutive rule.
    pub failure_rate_percent: Option<u32>,
    /// Default 60000.
    pub window_ms: u64,
    /// Default 20.
    pub minimum_publishes: u32,
    /// Default 30000.
    pub open_ms: u64,
}

/// One variant per `type`, so wiring code matches exhaustively.
#[derive(Clone, Debug)]
pub enum DestinationKind {
    Http(HttpDestination),
    Rabbitmq(RabbitmqDestination),
    Kafka(KafkaDestination),
    Nats(NatsDestination),
    Log(LogDestination),
}

impl DestinationKind {
    /// The `type` word (also the `destination_type` metric label, DST-6).
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Http(_) => "http",
            Self::Rabbitmq(_) => "rabbitmq",
            Self::Kafka(_) => "kafka",
            Self::Nats(_) => "nats",
            Self::Log(_) => "log",
        }
    }

    /// The publish timeout, for kinds that have one.
    pub fn timeout_ms(&self) -> Option<u64> {
        match self {
            Self::Http(d) => Some(d.timeout_ms),
            Self::Kafka(d) => Some(d.timeout_ms),
            Self::Nats(d) => Some(d.timeout_ms),
            Self::Rabbitmq(_) | Self::Log(_) => None,
        }
    }
}

/// `type: http` (CFG-50).
#[derive(Clone, Debug)]
pub struct HttpDestination {
    pub base_url: url::Url,
    /// Appended to the path of `base_url` segment by segment (DST-23).
    pub path: String,
    pub timeout_ms: u64,
    pub auth: Option<DestinationAuth>,
    /// `signing` (CFG-50a): Standard Webhooks signatures on every delivery.
    pub signing: Option<DeliverySigning>,
}

/// `signing: {type: standard-webhooks, secret}` of an `http` destination (CFG-50a).
#[derive(Clone, Debug)]
pub struct DeliverySigning {
    /// `whsec_…` secrets; several during a rotation, each adds one signature.
    pub secrets: Vec<Secret>,
}

/// The auth block of an `http` destination (CFG-50).
#[derive(Clone, Debug)]
pub enum DestinationAuth {
    Oauth2 {
        client_id: String,
        client_secret: Secret,
        token_url: url::Url,
        scope: Option<String>,
        extra_params: BTreeMap<String, String>,
    },
    Basic {
        username: String,
        password: Secret,
    },
    Header {
        header_name: HeaderName,
        header_value: Secret,
    },
}

/// A row column named by `exchangeFrom`, `topicFrom` or `subjectFrom` (CFG-61), by its
/// default name whatever `columnMapping` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressColumn {
    AggregateType,
    Topic,
    Key,
}

impl AddressColumn {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AggregateType => "aggregate_type",
            Self::Topic => "topic",
            Self::Key => "key",
        }
    }
}

/// Where a broker destination's address comes from: the `*From` column wins over the
/// template when both are set (CFG-98).
#[derive(Clone, Debug)]
pub enum Address {
    Template(Template),
    Column(AddressColumn),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExchangeType {
    Topic,
    Direct,
    Fanout,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryMode {
    Persistent,
    Transient,
}

/// `type: rabbitmq` (CFG-51).
#[derive(Clone, Debug)]
pub struct RabbitmqDestination {
    pub url: Secret,
    /// `url` with its password replaced by `***` (CFG-23).
    pub masked_url: String,
    pub exchange: Address,
    pub exchange_type: ExchangeType,
    /// Default `{{ topic }}`; a route's `routingKeyTemplate` wins.
    pub routing_key_template: Template,
    pub delivery_mode: DeliveryMode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    pub fn is_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaSasl {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: Secret,
}

/// Kafka security settings of a destination or source (CFG-52, CFG-99): `sasl` is set exactly
/// when the protocol is a SASL one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaSecurity {
    pub protocol: SecurityProtocol,
    pub sasl: Option<KafkaSasl>,
}

/// `type: kafka` (CFG-52).
#[derive(Clone, Debug)]
pub struct KafkaDestination {
    /// `host:port` entries.
    pub bootstrap_servers: Vec<String>,
    pub topic: Address,
    /// Default `{{ key }}`; a route's `routingKeyTemplate` wins.
    pub key_template: Template,
    pub timeout_ms: u64,
    pub security: KafkaSecurity,
}

/// NATS credentials of a destination or source (CFG-100).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NatsCredentials {
    None,
    UserPassword { username: String, password: Secret },
    Token(Secret),
}

/// `type: nats` (CFG-53).
#[derive(Clone, Debug)]
pub struct NatsDestination {
    /// `nats://host:port` entries.
    pub servers: Vec<String>,
    pub subject: Address,
    pub jet_stream: bool,
    pub timeout_ms: u64,
    pub credentials: NatsCredentials,
}

/// `type: log` (CFG-54).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDestination {
    /// Resolved against the working directory (CFG-7); `None` writes to standard output.
    pub file: Option<PathBuf>,
}

/// `routes[i]` (CFG-55).
#[derive(Clone, Debug)]
pub struct Route {
    pub topic_pattern: TopicGlob,
    /// The name of a configured destination (CFG-103).
    pub destination: String,
    pub routing_key_template: Option<Template>,
    pub routing_key_missing_field_default: String,
    pub transform: Option<TransformConfig>,
}
