//! The request path of one HTTP source, in the order of INB-7. Step 1 (draining) and step 2
//! (declared length) are the data-port server's; step 2 is repeated here so the route holds
//! its rule on any server. Step 10 (the source transform) does not exist in this build: a
//! configuration with a transform is refused at start, so no request can need it.

use std::sync::Arc;

use axum::body::Body;
use axum::http::header::CONTENT_LENGTH;
use axum::http::{HeaderMap, Request, Response};
use queuebox_engine::metrics::{CounterHandle, Metrics, RejectionReason};
use queuebox_store::{InsertOutcome, NewInboxRow};
use serde_json::Value;
use uuid::Uuid;

use super::IntakeSettings;
use super::body::{BodyError, read_capped};
use super::correlation::CorrelationId;
use super::extract::Message;
use super::filter;
use super::rate::retry_after_secs;
use super::respond::Answer;
use super::route::HttpSourceRoute;
use super::sink::{IntakeRefused, IntakeSink};

/// Everything one route's requests share.
pub(crate) struct Intake {
    pub(crate) route: HttpSourceRoute,
    pub(crate) settings: IntakeSettings,
    pub(crate) sink: Arc<dyn IntakeSink>,
    pub(crate) metrics: Metrics,
    /// `queuebox_inbox_filtered_total{source}`, looked up once.
    pub(crate) filtered: CounterHandle,
}

impl Intake {
    pub(crate) async fn handle(self: Arc<Self>, request: Request<Body>) -> Response<Body> {
        let correlation = CorrelationId::of_request(&request);
        let answer = self.process(request, &correlation).await;
        answer.into_response(&correlation)
    }

    async fn process(&self, request: Request<Body>, correlation: &CorrelationId) -> Answer {
        let source = self.route.name.as_str();
        let correlation_id = correlation.as_str();
        let cap = self.settings.max_body_bytes;
        let (parts, body) = request.into_parts();

        // Step 2: a declared length over the cap, before any byte is read.
        let declared = declared_length(&parts.headers);
        if declared.is_some_and(|length| length > cap) {
            return Answer::TooLarge(cap);
        }
        // Step 3: one token per request that gets this far.
        if let Some(bucket) = &self.route.rate_limit
            && let Err(wait) = bucket.take()
        {
            tracing::debug!(
                source,
                correlationId = correlation_id,
                "Rate limit exceeded"
            );
            return Answer::RateLimited {
                retry_after_secs: retry_after_secs(wait),
            };
        }
        // Step 4: the body, once; these bytes serve every later step.
        let body = match read_capped(body, cap, declared).await {
            Ok(body) => body,
            Err(BodyError::TooLarge) => return Answer::TooLarge(cap),
            Err(BodyError::Broken) => {
                tracing::debug!(
                    source,
                    correlationId = correlation_id,
                    "The body could not be read"
                );
                return Answer::UnreadableBody;
            }
        };
        // Step 5: on the raw bytes.
        if let Err(failure) = self.route.auth.check(&parts.headers, &body) {
            tracing::debug!(
                source,
                correlationId = correlation_id,
                "Authentication failed: {}",
                failure.0
            );
            return Answer::Unauthorized(failure.0);
        }
        // Step 6: on the headers as they would be stored (credential headers already gone).
        let headers = self.route.headers.collect(&parts.headers);
        if let Err(rule) = filter::run(&self.route.filter, &headers) {
            self.filtered.inc();
            tracing::debug!(
                source,
                correlationId = correlation_id,
                "Filtered out by {}",
                rule.0
            );
            return Answer::Filtered;
        }
        // Step 7: JSON whatever the Content-Type; an empty body is not JSON. serde_json checks
        // UTF-8 as well, so the text conversion cannot fail after a successful parse.
        let parsed = serde_json::from_slice::<Value>(&body)
            .ok()
            .zip(String::from_utf8(body).ok());
        let Some((payload, text)) = parsed else {
            self.metrics
                .inbox_rejections(RejectionReason::ExtractionFailed)
                .inc();
            tracing::debug!(
                source,
                correlationId = correlation_id,
                "The body is not JSON"
            );
            return Answer::InvalidJson;
        };
        // Step 8: from the original payload (there is no transform to run before or after).
        let message = Message {
            headers: &headers,
            text: &text,
            payload: &payload,
            source,
            correlation_id,
        };
        let Some(idempotency_key) = self.route.key.extract(&message) else {
            self.metrics
                .inbox_rejections(RejectionReason::ExtractionFailed)
                .inc();
            tracing::warn!(
                source,
                correlationId = correlation_id,
                tried = self.route.key.tried(),
                "No idempotency key found; tried {}",
                self.route.key.tried()
            );
            return Answer::NoKey;
        };
        let aggregate_id = self.route.aggregate_id.extract(&message);
        let event_type = self.route.event_type.extract(&message);
        // Step 9.
        let schedule = self
            .route
            .schedule
            .schedule(&headers, &payload, source, correlation_id);
        // Step 11: the body text as received is the payload (INB-51).
        let row = NewInboxRow {
            id: Uuid::now_v7(),
            source: source.to_owned(),
            idempotency_key,
            aggregate_id,
            event_type,
            payload: text,
            headers: headers.to_json(),
            consumption: self.route.consumption,
            correlation_id: Some(correlation_id.to_owned()),
            schedule,
        };
        let inbox_id = row.id;
        match self.sink.store(row).await {
            Ok(InsertOutcome::Stored(id)) => {
                tracing::debug!(
                    source,
                    correlationId = correlation_id,
                    inboxId = %id,
                    "Inbox message stored"
                );
                Answer::Stored(id)
            }
            Ok(InsertOutcome::Duplicate) => {
                tracing::debug!(
                    source,
                    correlationId = correlation_id,
                    "Duplicate inbox message; nothing stored"
                );
                Answer::Duplicate
            }
            Err(IntakeRefused::StorageFailed) => {
                // The sink logged the redacted cause; this line ties it to the request.
                tracing::warn!(
                    source,
                    correlationId = correlation_id,
                    inboxId = %inbox_id,
                    "The inbox message was not stored"
                );
                Answer::StorageFailed
            }
            Err(IntakeRefused::ShuttingDown) => Answer::ShuttingDown,
        }
    }
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}
