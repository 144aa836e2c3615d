//! A source's inbox rules as the engine's pipeline reads them (inbox.md §2..§7): which header and
//! paths each key chain has, by the source's type. The order of the steps is the engine's.

use queuebox_core::SourceName;
use queuebox_core::inbox::{AttributeSteps, IntakeProtocol, SourceRules};

use crate::model::HeaderName;
use crate::model_source::{BrokerAttributes, Source, SourceKind};

impl Source {
    pub fn inbox_rules(&self) -> SourceRules {
        let (protocol, [key_header, aggregate_header, event_header]) = match &self.kind {
            SourceKind::Http(http) => (
                IntakeProtocol::Http,
                [
                    http.idempotency_key_header.clone(),
                    http.aggregate_id_header.clone(),
                    http.event_type_header.clone(),
                ],
            ),
            SourceKind::Rabbitmq(s) => (IntakeProtocol::Rabbitmq, broker_headers(&s.broker)),
            SourceKind::Kafka(s) => (IntakeProtocol::Kafka, broker_headers(&s.broker)),
            SourceKind::Nats(s) => (IntakeProtocol::Nats, broker_headers(&s.broker)),
        };
        SourceRules {
            source: SourceName::new(self.name.clone()),
            protocol,
            consumption: self.consumption,
            filter: self.filter.clone(),
            idempotency_key: AttributeSteps {
                header: key_header,
                paths: self.idempotency_key_path.clone(),
            },
            aggregate_id: AttributeSteps {
                header: aggregate_header,
                paths: self.aggregate_id_path.clone(),
            },
            event_type: AttributeSteps {
                header: event_header,
                paths: self.event_type_path.clone(),
            },
            initial_delay: self.initial_delay,
            scheduled_at_header: self.scheduled_at_header.clone(),
            scheduled_at_path: self.scheduled_at_path.clone(),
        }
    }
}

/// `attributeHeaders.*` of a broker source: the key, aggregate-id and event-type headers.
fn broker_headers(broker: &BrokerAttributes) -> [Option<HeaderName>; 3] {
    let names = &broker.attribute_headers;
    [
        Some(names.idempotency_key.clone()),
        Some(names.aggregate_id.clone()),
        // INB-31: the event-type header step runs only with eventTypeFromHeader: true.
        broker
            .event_type_from_header
            .then(|| names.event_type.clone()),
    ]
}
