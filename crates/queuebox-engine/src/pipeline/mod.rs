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
use queuebox_core::template::Template;
use queuebox_core::{ReceivedMessage, SourceName};
use queuebox_store::{NewInboxRow, Schedule};
use queuebox_telemetry::RejectionReason;
use queuebox_transform::{Expression, Pool, Variables};
use serde_json::Value;
use uuid::Uuid;

use extract::{AGGREGATE_ID, Chain, EVENT_TYPE, KEY, KeyResults, Message, Step};
use schedule::{ScheduleRule, Timed};

use crate::relay::render_topic;
use crate::transform::{MessageIds, StageTransform};

use crate::intake::refused::{DATA_REFUSED_ERROR, WhenRefused};

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

/// A key expression (TRF-25), compiled once, with its configuration path.
#[derive(Clone, Debug)]
pub struct KeyExpression {
    /// Such as `sources.github.eventTypeExpression` (TRF-29).
    pub path: String,
    pub expression: Expression,
}

/// A source's JSONata: the key expressions, the source transform (INB-47), and the pool they
/// run on. Empty for a source without any.
#[derive(Clone, Debug, Default)]
pub struct SourceExpressions {
    pub idempotency_key: Option<KeyExpression>,
    pub aggregate_id: Option<KeyExpression>,
    pub event_type: Option<KeyExpression>,
    pub transform: Option<StageTransform>,
    /// Set whenever a key expression is.
    pub pool: Option<Pool>,
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
    expressions: SourceExpressions,
    /// `storeRawBody`: the stored row keeps the body bytes as received.
    store_raw_body: bool,
    /// The relay topic of a push `http` source, rendered at receipt (issue 14 item 6).
    relay_topic: Option<Template>,
}

impl SourcePipeline {
    pub fn new(rules: SourceRules) -> Result<Self, PipelineError> {
        Self::with_expressions(rules, SourceExpressions::default())
    }

    /// `storeRawBody: true` (issue 15): every row this source stores keeps the body bytes
    /// exactly as received, beside the payload (which keeps its type).
    pub fn storing_raw_body(mut self, on: bool) -> Self {
        self.store_raw_body = on;
        self
    }

    /// The pipeline with the source's key expressions in their chains (TRF-26: directly before
    /// the path step of the same attribute) and its transform.
    pub fn with_expressions(
        rules: SourceRules,
        expressions: SourceExpressions,
    ) -> Result<Self, PipelineError> {
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
        if !broker
            && idempotency_key.header.is_none()
            && idempotency_key.paths.is_empty()
            && expressions.idempotency_key.is_none()
        {
            return Err(PipelineError::NoKeyStep(source));
        }
        // INB-31: on a broker the header comes first for the key, after the body for the
        // other two; the protocol id and the digest follow on brokers only.
        let mut key = steps([header(&idempotency_key), paths(&idempotency_key)]);
        if broker {
            key.extend([Step::ProtocolId, Step::Digest]);
        }
        let mut aggregate_id = if broker {
            let mut steps = steps([paths(&aggregate_id), header(&aggregate_id)]);
            if protocol == IntakeProtocol::Kafka {
                steps.push(Step::ProtocolId); // the record key
            }
            steps
        } else {
            steps([header(&aggregate_id), paths(&aggregate_id)])
        };
        let mut event_type = if broker {
            steps([paths(&event_type), header(&event_type)])
        } else {
            steps([header(&event_type), paths(&event_type)])
        };
        // The header leads the chain for every HTTP attribute and for a broker's key; a broker's
        // aggregate id and event type start with the expression (TRF-26).
        insert_expression(&mut key, KEY, &expressions.idempotency_key, true);
        insert_expression(
            &mut aggregate_id,
            AGGREGATE_ID,
            &expressions.aggregate_id,
            !broker,
        );
        insert_expression(
            &mut event_type,
            EVENT_TYPE,
            &expressions.event_type,
            !broker,
        );
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
            expressions,
            store_raw_body: false,
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
            relay_topic: None,
        })
    }

    /// Renders `topic` (the source's relay topic) for every message of a push `http` source
    /// at receipt, and refuses a message whose topic renders empty or invalid (issue 14 item
    /// 6): the relay could never forward it. Brokers and pull sources are unaffected.
    pub fn with_relay_topic(mut self, topic: Template) -> Self {
        if !self.protocol.is_broker() && self.consumption == Consumption::Push {
            self.relay_topic = Some(topic);
        }
        self
    }

    /// The refusal of a message whose relay topic does not render (issue 14 item 6).
    fn check_topic(&self, event_type: Option<&str>) -> Result<(), Refusal> {
        let Some(template) = &self.relay_topic else {
            return Ok(());
        };
        let source = self.source.as_str();
        let Err(invalid) = render_topic(template, source, event_type) else {
            return Ok(());
        };
        let error = match event_type {
            None => format!(
                "The message has no event type (tried {}), and the relay topic '{}' of source {source} needs it. Nothing was stored.",
                self.event_type
                    .tried()
                    .replace("no step", "no step is configured"),
                template.as_str()
            ),
            Some(_) => format!("Source {source}: {invalid} Nothing was stored."),
        };
        Err(Refusal::InvalidTopic { error })
    }

    pub fn source(&self) -> &SourceName {
        &self.source
    }

    /// What the writer does when the database refuses a row of this source: a broker message
    /// is stored dead (its broker is acknowledged only once it is durable), an HTTP sender is
    /// told.
    pub fn when_refused(&self) -> WhenRefused {
        if self.protocol.is_broker() {
            WhenRefused::StoreDead
        } else {
            WhenRefused::TellTheSender
        }
    }

    /// Evaluates the configured key expressions on the original payload (TRF-27: no variables,
    /// fixed limits), on the pool, before the chains read them.
    async fn key_results(&self, payload: &Value) -> KeyResults {
        let Some(pool) = &self.expressions.pool else {
            return [None, None, None];
        };
        let eval = |key: &Option<KeyExpression>| {
            let key = key.clone();
            let payload = payload.clone();
            async move {
                match key {
                    Some(key) => Some(
                        pool.evaluate(&key.expression, payload, Variables::none())
                            .await,
                    ),
                    None => None,
                }
            }
        };
        let (k, a, e) = tokio::join!(
            eval(&self.expressions.idempotency_key),
            eval(&self.expressions.aggregate_id),
            eval(&self.expressions.event_type),
        );
        [k, a, e]
    }

    /// Runs every step on `message`.
    pub async fn admit(&self, message: ReceivedMessage) -> Admission {
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
        let key_results = match &parsed {
            Some((payload, _)) => self.key_results(payload).await,
            None => [None, None, None],
        };
        let message = |json| Message {
            headers: &headers,
            json,
            body: &body,
            protocol_id: protocol.message_id.as_deref(),
            source,
            correlation_id,
            key_results: &key_results,
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
                raw_body: self.store_raw_body.then(|| body.to_vec()),
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
        if let Err(refusal) = self.check_topic(event_type.as_deref()) {
            return Admission::Settle(IntakeOutcome::Refused(refusal));
        }
        let schedule = self.schedule.schedule(&Timed {
            headers: &headers,
            payload: &payload,
            broker_time_ms: protocol.published_at_ms,
            source,
            correlation_id,
        });
        // INB-47: the source transform, after extraction and before the row; with no
        // transform, or `Skip` after a failure, the body text as received is the payload
        // (INB-51).
        let (payload, state, last_error) = match &self.expressions.transform {
            None => (text, StoredState::Pending, None),
            Some(transform) => {
                let variables = Variables::source_stage(
                    source,
                    headers
                        .iter()
                        .map(|(n, v)| (n.to_owned(), Value::from(v)))
                        .collect(),
                    &idempotency_key,
                    event_type.as_deref(),
                );
                let ids = MessageIds {
                    source: Some(source),
                    message_id: None,
                    idempotency_key: Some(&idempotency_key),
                    correlation_id,
                };
                match transform.run(payload, variables, &ids).await {
                    Ok(Some(output)) => (output.to_string(), StoredState::Pending, None),
                    Ok(None) => (text, StoredState::Pending, None),
                    // TRF-17: an HTTP sender is answered 422 and keeps the message; a broker
                    // message is stored `dead` with its original payload (TRF-18: `Fail`
                    // behaves like `Dead`), in the one insert, never `pending` first.
                    Err(rejected) if !self.protocol.is_broker() => {
                        return Admission::Settle(IntakeOutcome::Refused(
                            Refusal::TransformFailed {
                                error: rejected.error,
                            },
                        ));
                    }
                    Err(rejected) => (text, StoredState::Dead, Some(rejected.error)),
                }
            }
        };
        Admission::Store(NewInboxRow {
            raw_body: self.store_raw_body.then(|| body.to_vec()),
            id: Uuid::now_v7(),
            source: source.to_owned(),
            idempotency_key,
            aggregate_id,
            event_type,
            payload,
            headers: headers.to_json(),
            consumption: self.consumption,
            correlation_id: Some(correlation.into_string()),
            schedule,
            state,
            last_error,
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

/// Puts the expression step of `slot` directly before the chain's path step (TRF-26); without a
/// path step, after a leading header when `after_header`, else first.
fn insert_expression(
    steps: &mut Vec<Step>,
    slot: usize,
    expression: &Option<KeyExpression>,
    after_header: bool,
) {
    let Some(expression) = expression else {
        return;
    };
    let at = steps
        .iter()
        .position(|s| matches!(s, Step::Paths(_)))
        .unwrap_or(usize::from(
            after_header && matches!(steps.first(), Some(Step::Header(_))),
        ));
    steps.insert(
        at,
        Step::Expression {
            slot,
            path: expression.path.clone(),
        },
    );
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
/// JSON, a message whose data the database refused as it was (its insert failed), or (with the
/// JSONata engine) a transform rejection.
pub(crate) fn dead_row_rejection(row: &NewInboxRow) -> RejectionReason {
    let last_error = row.last_error.as_deref().unwrap_or_default();
    if last_error == NOT_JSON_ERROR {
        RejectionReason::ExtractionFailed
    } else if last_error.starts_with(DATA_REFUSED_ERROR) {
        RejectionReason::StorageFailed
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
