//! The validated configuration: the top level and the small sections (config.md §4, §5, §7,
//! §8, §10, §11, §12.7, §13, §14), and the value types they share.

use std::collections::BTreeMap;
use std::time::Duration;

use queuebox_core::Secret;

use crate::model_destination::{Destination, Route};
use crate::model_source::Source;
use queuebox_core::database::DatabaseConfig;

/// The whole validated configuration (CFG-34).
#[derive(Clone, Debug)]
pub struct Config {
    pub server: ServerConfig,
    pub database: DatabaseConfig,
    pub outbox: OutboxConfig,
    pub inbox: InboxConfig,
    pub http: HttpConfig,
    pub admin: AdminConfig,
    pub destinations: BTreeMap<String, Destination>,
    pub routes: Vec<Route>,
    pub sources: BTreeMap<String, Source>,
    pub retention: RetentionConfig,
    pub log: LogConfig,
}

/// `server` (CFG-35).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// 0 lets the system choose a port.
    pub http_port: u16,
    /// When set, the operational routes are served on this port only.
    pub management_port: Option<u16>,
    /// `server.maxConnections` (issue 17 defect 5): the open connections of each port; beyond
    /// it a port accepts no connection until one closes.
    pub max_connections: u32,
}

/// `outbox.capture.mode` (CFG-46).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureMode {
    Polling,
    /// PostgreSQL `LISTEN`/`NOTIFY` wake-ups on top of polling.
    Notify,
}

/// `outbox` (CFG-46).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxConfig {
    pub poll_interval_ms: u64,
    pub batch_size: u32,
    pub concurrency: u32,
    pub retry_base_delay_ms: u64,
    pub retry_max_delay_ms: u64,
    pub max_attempts: u32,
    pub claim_timeout_ms: u64,
    pub pending_gauge_interval_ms: u64,
    pub shutdown_timeout_ms: u64,
    /// OUT-13a: most consecutive rows of one key one replica claims as a run (1 = one row per
    /// key in flight).
    pub key_run_length: u32,
    pub capture_mode: CaptureMode,
}

/// `inbox` (CFG-47).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxConfig {
    pub base_path: String,
    pub max_body_bytes: u64,
    /// `inbox.maxPendingBytes`: the bytes of request bodies all HTTP sources hold at once,
    /// being received or waiting for the database; beyond it a request gets 503 (issue 17).
    pub max_pending_bytes: u64,
    /// `inbox.storageWaitMs`: how long an HTTP request waits for the database to store its
    /// message before it gets 503 (issue 17).
    pub storage_wait_ms: u64,
    pub relay: RelayConfig,
}

/// `inbox.relay` (CFG-48).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayConfig {
    pub enabled: bool,
    pub poll_interval_ms: u64,
    pub batch_size: u32,
    pub claim_timeout_ms: u64,
    pub pending_gauge_interval_ms: u64,
    /// Resolved: `outbox.maxAttempts` when the key is not set.
    pub max_attempts: u32,
}

/// `http` (CFG-62).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpConfig {
    pub max_error_body_bytes: u64,
    /// Checked at start-up by the binary (CFG-102), which needs DNS.
    pub block_private_addresses: bool,
}

/// `admin` (CFG-63).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminConfig {
    pub enabled: bool,
    pub auth: Option<InboundAuth>,
    pub insecure: bool,
    pub max_transform_timeout_ms: u64,
    pub max_payload_bytes: u64,
}

/// The auth block of a source or of `admin` (CFG-73).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InboundAuth {
    Bearer {
        token: Secret,
    },
    ApiKey {
        key: Secret,
        header_name: HeaderName,
    },
    Hmac(HmacAuth),
    /// A sender's own signature format, which needs only the secret (INB-20a..20f).
    Preset(PresetAuth),
}

impl InboundAuth {
    /// The headers this block reads its signature or key from, which QueueBox never keeps
    /// (CFG-108). A preset with header aliases has several.
    pub fn credential_headers(&self) -> Vec<HeaderName> {
        match self {
            Self::Bearer { .. } => Vec::new(),
            Self::ApiKey { header_name, .. } => vec![header_name.clone()],
            Self::Hmac(h) => vec![h.header_name.clone()],
            Self::Preset(p) => p
                .preset
                .signature_headers()
                .iter()
                .copied()
                .map(HeaderName::known)
                .collect(),
        }
    }

    /// The header that carries the sender's event id, when the preset has one: the idempotency
    /// key defaults to it (INB-31).
    pub fn event_id_header(&self) -> Option<HeaderName> {
        match self {
            Self::Preset(p) => p.preset.event_id_header().map(HeaderName::known),
            _ => None,
        }
    }
}

/// The webhook senders whose signature format QueueBox knows (`auth.type`, INB-20a).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookPreset {
    Stripe,
    Github,
    StandardWebhooks,
    Shopify,
    Slack,
}

impl WebhookPreset {
    /// The `auth.type` word.
    pub fn type_name(self) -> &'static str {
        match self {
            Self::Stripe => "stripe",
            Self::Github => "github",
            Self::StandardWebhooks => "standard-webhooks",
            Self::Shopify => "shopify",
            Self::Slack => "slack",
        }
    }

    /// The headers that carry the signature (Standard Webhooks also under Svix's names).
    pub fn signature_headers(self) -> &'static [&'static str] {
        match self {
            Self::Stripe => &["Stripe-Signature"],
            Self::Github => &["X-Hub-Signature-256"],
            Self::StandardWebhooks => &["webhook-signature", "svix-signature"],
            Self::Shopify => &["X-Shopify-Hmac-Sha256"],
            Self::Slack => &["X-Slack-Signature"],
        }
    }

    /// Whether the signed content has a timestamp, so a replay window applies.
    pub fn has_timestamp(self) -> bool {
        matches!(self, Self::Stripe | Self::StandardWebhooks | Self::Slack)
    }

    /// The header with the sender's unique delivery id, if the sender sends one.
    pub fn event_id_header(self) -> Option<&'static str> {
        match self {
            Self::Github => Some("X-GitHub-Delivery"),
            Self::StandardWebhooks => Some("webhook-id"),
            // Shopify's "Ignore duplicate webhooks": the same X-Shopify-Event-Id is a duplicate.
            Self::Shopify => Some("X-Shopify-Event-Id"),
            Self::Stripe | Self::Slack => None,
        }
    }
}

/// `auth.type: stripe | github | standard-webhooks | shopify | slack` (CFG-73a).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PresetAuth {
    pub preset: WebhookPreset,
    /// One or more (rotation): a request signed with any of them is accepted.
    pub secrets: Vec<Secret>,
    /// The replay window, for presets whose signature covers a timestamp; 300000 by default.
    pub timestamp_tolerance_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HmacAlgorithm {
    HmacSha256,
    HmacSha512,
    HmacSha1,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignaturePayloadFormat {
    Body,
    TimestampDotBody,
}

/// `auth.type: hmac` (CFG-73), with the defaults resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HmacAuth {
    /// One or more (rotation): a signature made with any of them is accepted.
    pub secrets: Vec<Secret>,
    pub header_name: HeaderName,
    pub algorithm: HmacAlgorithm,
    /// `sha256=`, `sha512=` or `sha1=` by default; may be empty.
    pub signature_prefix: String,
    pub timestamp_header: Option<HeaderName>,
    pub timestamp_tolerance_ms: u64,
    pub payload_format: SignaturePayloadFormat,
}

/// `onError` of a transform block (CFG-80).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnError {
    Fail,
    Skip,
    Dead,
}

/// A transform block (CFG-80); its expression compiled when the configuration loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransformConfig {
    pub expression: String,
    pub timeout_ms: u64,
    pub max_depth: u32,
    pub on_error: OnError,
}

/// `retention.outbox.policy` with its parameter (CFG-83).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutboxRetentionPolicy {
    Age(Duration),
    Count(u32),
    Disabled,
}

/// `retention.inbox.policy` with its parameter (CFG-83).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InboxRetentionPolicy {
    Age(Duration),
    Disabled,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxRetention {
    pub policy: OutboxRetentionPolicy,
    pub cleanup_interval: Duration,
    pub batch_size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxRetention {
    pub policy: InboxRetentionPolicy,
    pub cleanup_interval: Duration,
    pub batch_size: u32,
}

/// `retention` (CFG-83). The policies apply only when `enabled` is true.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetentionConfig {
    pub enabled: bool,
    pub outbox: OutboxRetention,
    pub inbox: InboxRetention,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// `log` (CFG-85).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogConfig {
    pub format: LogFormat,
    pub level: LogLevel,
}

pub use queuebox_core::HeaderName;

/// [`HeaderName::parse`] with the message of the configuration line.
pub(crate) fn parse_header_name(text: &str) -> Result<HeaderName, String> {
    HeaderName::parse(text).map_err(|err| match err {
        queuebox_core::headers::InvalidHeaderName::Blank => "must not be blank".to_owned(),
        queuebox_core::headers::InvalidHeaderName::NotAToken => format!(
            "must be a header name (letters, digits and !#$%&'*+-.^_`|~), got {}",
            crate::diag::quote(text)
        ),
    })
}
