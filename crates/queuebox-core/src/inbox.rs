//! What the configuration says about one source's messages, as the engine's pipeline reads it:
//! the protocol, `consumption`, the header filter, the configured steps of the three key chains
//! and the schedule keys (inbox.md §2, §5..§7). The configuration produces it; the engine puts
//! the steps in the order of INB-31 and runs them.

use std::time::Duration;

use crate::filter::Filter;
use crate::headers::HeaderName;
use crate::intake::SourceName;
use crate::jsonpath::JsonPath;
use crate::table::Consumption;

/// The protocol a source reads, which decides the order of the key chains (INB-31) and what a
/// message that cannot be used becomes (a refusal over HTTP, a `dead` row from a broker).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntakeProtocol {
    Http,
    Rabbitmq,
    Kafka,
    Nats,
}

impl IntakeProtocol {
    pub fn is_broker(self) -> bool {
        !matches!(self, Self::Http)
    }
}

/// The configured steps of one attribute: its header and its paths.
#[derive(Clone, Debug, Default)]
pub struct AttributeSteps {
    /// `http`: `…Header`; broker: `attributeHeaders.…` (for the event type only with
    /// `eventTypeFromHeader: true`).
    pub header: Option<HeaderName>,
    pub paths: Vec<JsonPath>,
}

/// One source's inbox rules.
#[derive(Clone, Debug)]
pub struct SourceRules {
    pub source: SourceName,
    pub protocol: IntakeProtocol,
    pub consumption: Consumption,
    pub filter: Filter,
    pub idempotency_key: AttributeSteps,
    pub aggregate_id: AttributeSteps,
    pub event_type: AttributeSteps,
    pub initial_delay: Duration,
    pub scheduled_at_header: Option<HeaderName>,
    pub scheduled_at_path: Vec<JsonPath>,
}
