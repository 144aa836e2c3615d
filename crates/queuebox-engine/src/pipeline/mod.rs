//! The message pipeline every source shares (inbox.md INB-7 steps 6..11, INB-53): a received
//! message becomes the inbox row to insert, or the reason it is not stored. Steps, in order:
//! the correlation id (INB-27), the header filter (§5), the JSON parse (a broker body that is
//! not JSON becomes a `dead` row, INB-56), the idempotency key, aggregate id and event type
//! (§6), `scheduled_at` (§7), the source transform (§8, with the JSONata engine), and the row
//! (§9). A connector only translates its protocol into a [`ReceivedMessage`]; the rules are here,
//! once, for every source.

mod extract;
mod schedule;

#[cfg(test)]
mod tests;

use std::time::Duration;

use queuebox_core::Consumption;
use queuebox_core::correlation::CorrelationId;
use queuebox_core::filter::Filter;
use queuebox_core::inbox::{AttributeSteps, IntakeProtocol, SourceRules};
use queuebox_core::intake::{IntakeOutcome, Refusal, StoredState};
use queuebox_core::{ReceivedMessage, SourceName};
use queuebox_store::{NewInboxRow, Schedule};
use queuebox_telemetry::RejectionReason;
use serde_json::Value;
use uuid::Uuid;

use extract::{Chain, Message, Step};
use schedule::{ScheduleRule, Timed};

/// `last_error` of a broker message stored `dead` because its body is not JSON (INB-56).
pub const NOT_JSON_ERROR: &str = "The body is not valid JSON.";

/// A source whose rules cannot run; the configuration checks prevent it (INB-4 rule 1).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    #[error(
        "sources.{0}: set idempotencyKeyHeader, idempotencyKeyExpression or idempotencyKeyPath"
    )]
    NoKeyStep(SourceName),
}

/// What the pipeline made of one message.
// `Store` is the common case and is moved straight into the writer's queue; boxing it would
// add an allocation per message to save stack space on the rare `Settle`.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Admission {
    /// Insert this row; its outcome comes from the insert.
    Store(NewInboxRow),
    /// Nothing to insert: the outcome is already known (filtered, refused).
    Settle(IntakeOutcome),
}

/// One source's rules, compiled once at start.
#[derive(Clone, Debug)]
pub struct SourcePipeline {
    source: SourceName,
    protocol: IntakeProtocol,
    consumption: Consumption,
    filter: Filter,
    key: Chain,
    aggregate_id: Chain,
    event_type: Chain,
    schedule: ScheduleRule,
}

impl SourcePipeline {
    pub fn new(rules: SourceRules) -> Result<Self, PipelineError> {
        let SourceRules {
            source,
            protocol,
            consumption,
            filter,
            idempotency_key,
            aggregate_id,
            event_type,
            initial_delay,
            scheduled_at_header,
            scheduled_at_path,
        } = rules;
        let broker = protocol.is_broker();
        if !broker && idempotency_key.header.is_none() && idempotency_key.paths.is_empty() {
            return Err(PipelineError::NoKeyStep(source));
        }
        // INB-31: on a broker the header comes first for the key, after the body for the
        // other two; the protocol id and the digest follow on brokers only.
        let mut key = steps([header(&idempotency_key), paths(&idempotency_key)]);
        if broker {
            key.extend([Step::ProtocolId, Step::Digest]);
        }
        let aggregate_id = if broker {
            let mut steps = steps([paths(&aggregate_id), header(&aggregate_id)]);
            if protocol == IntakeProtocol::Kafka {
                steps.push(Step::ProtocolId); // the record key
            }
            steps
        } else {
            steps([header(&aggregate_id), paths(&aggregate_id)])
        };
        let event_type = if broker {
            steps([paths(&event_type), header(&event_type)])
        } else {
            steps([header(&event_type), paths(&event_type)])
        };
        Ok(Self {
            key: Chain {
                attribute: "idempotency key",
                steps: key,
            },
            aggregate_id: Chain {
                attribute: "aggregate id",
                steps: aggregate_id,
            },
            event_type: Chain {
                attribute: "event type",
                steps: event_type,
            },
            schedule: ScheduleRule {
                initial_delay,
                header: scheduled_at_header,
                paths: scheduled_at_path,
                broker_time: broker,
            },
            source,
            protocol,
            consumption,
            filter,
        })
    }

    pub fn source(&self) -> &SourceName {
        &self.source
    }

    /// Runs every step on `message`.
    pub fn admit(&self, message: ReceivedMessage) -> Admission {
        let ReceivedMessage {
            headers,
            body,
            protocol,
            ..
        } = message;
        let source = self.source.as_str();
        let correlation = CorrelationId::of_message(&headers, protocol.correlation_id.as_deref());
        let correlation_id = correlation.as_str();
        if let Err(rule) = self.filter.check(&headers) {
            tracing::debug!(
                source,
                correlationId = correlation_id,
                "Filtered out by {}",
                rule.0
            );
            return Admission::Settle(IntakeOutcome::Filtered { rule });
        }
        // JSON whatever the content type; an empty body is not JSON. serde_json checks UTF-8
        // as well, so the text conversion cannot fail after a successful parse.
        let parsed = serde_json::from_slice::<Value>(&body);
        let limit = parsed.as_ref().err().and_then(json_limit);
        let parsed = parsed
            .ok()
            .zip(std::str::from_utf8(&body).ok().map(str::to_owned));
        let message = |json| Message {
            headers: &headers,
            json,
            body: &body,
            protocol_id: protocol.message_id.as_deref(),
            source,
            correlation_id,
        };
        let Some((payload, text)) = parsed else {
            tracing::debug!(
                source,
                correlationId = correlation_id,
                "The body is not JSON"
            );
            if !self.protocol.is_broker() {
                let refusal = match limit {
                    Some(limit) => Refusal::JsonLimit { limit },
                    None => Refusal::InvalidJson,
                };
                return Admission::Settle(IntakeOutcome::Refused(refusal));
            }
            // INB-56: stored dead, with the attributes of the steps that need no JSON body,
            // due at once (INB-45); the transform does not run.
            let readable = message(None);
            let Some(idempotency_key) = self.key.extract(&readable) else {
                return self.no_key(correlation_id);
            };
            let raw = String::from_utf8_lossy(&body);
            return Admission::Store(NewInboxRow {
                id: Uuid::now_v7(),
                source: source.to_owned(),
                idempotency_key,
                aggregate_id: self.aggregate_id.extract(&readable),
                event_type: self.event_type.extract(&readable),
                payload: serde_json::json!({ "raw": raw }).to_string(),
                headers: headers.to_json(),
                consumption: self.consumption,
                correlation_id: Some(correlation.into_string()),
                schedule: Schedule::AfterReceipt {
                    delay: Duration::ZERO,
                },
                state: StoredState::Dead,
                last_error: Some(NOT_JSON_ERROR.to_owned()),
            });
        };
        // From the original payload, before the transform (INB-38).
        let readable = message(Some((&payload, &text)));
        let Some(idempotency_key) = self.key.extract(&readable) else {
            return self.no_key(correlation_id);
        };
        let aggregate_id = self.aggregate_id.extract(&readable);
        let event_type = self.event_type.extract(&readable);
        let schedule = self.schedule.schedule(&Timed {
            headers: &headers,
            payload: &payload,
            broker_time_ms: protocol.published_at_ms,
            source,
            correlation_id,
        });
        // The source transform (INB-47) runs here once the JSONata engine exists; until then
        // the binary refuses a source with one, and the body text as received is the payload
        // (INB-51).
        Admission::Store(NewInboxRow {
            id: Uuid::now_v7(),
            source: source.to_owned(),
            idempotency_key,
            aggregate_id,
            event_type,
            payload: text,
            headers: headers.to_json(),
            consumption: self.consumption,
            correlation_id: Some(correlation.into_string()),
            schedule,
            state: StoredState::Pending,
            last_error: None,
        })
    }

    /// INB-39: only an `http` source can run out of key steps (a broker's chain ends in the
    /// digest).
    fn no_key(&self, correlation_id: &str) -> Admission {
        let tried = self.key.tried();
        tracing::warn!(
            source = self.source.as_str(),
            correlationId = correlation_id,
            tried,
            "No idempotency key found; tried {tried}"
        );
        Admission::Settle(IntakeOutcome::Refused(Refusal::NoKey { tried }))
    }
}

fn header(spec: &AttributeSteps) -> Option<Step> {
    spec.header.clone().map(Step::Header)
}

fn paths(spec: &AttributeSteps) -> Option<Step> {
    (!spec.paths.is_empty()).then(|| Step::Paths(spec.paths.clone()))
}

fn steps<const N: usize>(steps: [Option<Step>; N]) -> Vec<Step> {
    steps.into_iter().flatten().collect()
}

/// What a `dead` row counts as in `queuebox_inbox_rejections_total` (INB-55): a body that is not
/// JSON, or (with the JSONata engine) a transform rejection.
pub(crate) fn dead_row_rejection(row: &NewInboxRow) -> RejectionReason {
    if row.last_error.as_deref() == Some(NOT_JSON_ERROR) {
        RejectionReason::ExtractionFailed
    } else {
        RejectionReason::TransformFailed
    }
}

/// Which limit of the JSON parser a body that failed to parse hit, if it was one (issue 17
/// defect 7): the sender then learns that its JSON is valid but unsupported, and why.
/// serde_json names both in its message; every other failure is invalid JSON.
fn json_limit(err: &serde_json::Error) -> Option<&'static str> {
    let text = err.to_string();
    if text.starts_with("recursion limit exceeded") {
        Some("nested deeper than 128 levels")
    } else if text.starts_with("number out of range") {
        Some("a number beyond the range of a 64-bit float")
    } else {
        None
    }
}
