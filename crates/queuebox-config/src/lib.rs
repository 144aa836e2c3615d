//! YAML + environment -> a validated QueueBox `Config`, with every error at once (config.md).
//! No connector or database dependency: `queuebox check` needs only this crate.

mod dburl;
mod diag;
mod env;
mod load;
mod mask;
mod model;
mod model_destination;
mod model_source;
mod node;
mod parse_common;
mod parse_database;
mod parse_dest_auth;
mod parse_destination;
mod parse_filter;
mod parse_retention;
mod parse_route;
mod parse_sections;
mod parse_source;
mod parse_source_broker;
mod parse_urls;
mod placeholder;
mod read;
mod rules;
mod schema;
mod source_rules;
mod suggest;
mod values;

pub use diag::{Diagnostic, Diagnostics, LoadError, format_warnings};
pub use load::{LoadOptions, Loaded, load};
pub use mask::mask_url;
pub use model::{
    AdminConfig, CaptureMode, Config, HeaderName, HmacAlgorithm, HmacAuth, HttpConfig, InboundAuth,
    InboxConfig, InboxRetention, InboxRetentionPolicy, LogConfig, LogFormat, LogLevel, OnError,
    OutboxConfig, OutboxRetention, OutboxRetentionPolicy, PresetAuth, RelayConfig, RetentionConfig,
    ServerConfig, SignaturePayloadFormat, TransformConfig, WebhookPreset,
};
pub use model_destination::{
    Address, AddressColumn, CircuitBreaker, DeliveryMode, DeliverySigning, Destination,
    DestinationAuth, DestinationKind, DestinationRateLimit, ExchangeType, HttpDestination,
    KafkaDestination, KafkaSasl, KafkaSecurity, LogDestination, NatsCredentials, NatsDestination,
    RabbitmqDestination, Route, SaslMechanism, SecurityProtocol,
};
pub use model_source::{
    AttributeHeaders, AutoOffsetReset, BrokerAttributes, Consumption, Filter, FilterRule,
    FilterTest, HttpSource, KafkaSource, NatsSource, RabbitmqSource, RateLimit, Source, SourceKind,
};
/// The `database` section's types live in core, so the stores use them without this crate.
pub use queuebox_core::database::{
    DatabaseConfig, DatabaseTarget, DatabaseType, MysqlSslMode, MysqlTarget, PgSslMode,
    PostgresTarget, SqliteTarget,
};
pub use schema::json_schema;
