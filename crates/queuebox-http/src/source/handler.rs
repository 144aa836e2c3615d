//! The request path of one HTTP source, in the order of INB-7: what is HTTP (the declared length,
//! the rate limit, the capped body, authentication, the headers it keeps) is done here; the
//! message then goes to the intake, whose pipeline runs the filter, the JSON parse, the key
//! extraction and the schedule, and whose receipt resolves after the commit (INB-9). Step 1
//! (draining) and step 2 (declared length) are the data-port server's; step 2 is repeated here
//! so the route holds its rule on any server.

use std::sync::Arc;

use axum::body::Body;
use axum::http::header::CONTENT_LENGTH;
use axum::http::{HeaderMap, Request, Response};
use queuebox_core::correlation::CorrelationId;
use queuebox_core::intake::{IntakeOutcome, ProtocolAttributes, Refusal};
use queuebox_core::{Intake, ReceivedMessage};

use super::HttpSourceSettings;
use super::body::{BodyError, read_capped};
use super::budget::Budget;
use super::correlation;
use super::rate::retry_after_secs;
use super::refusals::Refusals;
use super::respond::Answer;
use super::route::HttpSourceRoute;

/// Everything one route's requests share.
pub(crate) struct RouteHandler {
    pub(crate) route: HttpSourceRoute,
    pub(crate) settings: HttpSourceSettings,
    pub(crate) intake: Arc<dyn Intake>,
    pub(crate) refusals: Refusals,
    /// Shared by every route: the intake's memory bound (issue 17 defect 5).
    pub(crate) budget: Budget,
}

impl RouteHandler {
    pub(crate) async fn handle(self: Arc<Self>, request: Request<Body>) -> Response<Body> {
        let correlation = correlation::of_request(&request);
        let answer = self.process(request, &correlation).await;
        if let Some(reason) = answer.refusal_reason() {
            self.refusals.record(reason, &answer, correlation.as_str());
        }
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
        // Step 4: the body, once; these bytes serve every later step. They are held in the
        // intake's memory bound until the message's outcome is known.
        let mut held = self.budget.hold();
        let body = match read_capped(body, cap, declared, &mut held).await {
            Ok(body) => body,
            Err(BodyError::TooLarge) => return Answer::TooLarge(cap),
            Err(BodyError::Overloaded) => {
                super::wait::overloaded(source, correlation_id);
                return Answer::Overloaded;
            }
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
        // Steps 6..11: the headers as they are stored (credential headers already gone), to the
        // intake's pipeline, with the correlation id this request already answers with.
        let message = ReceivedMessage {
            source: self.route.name.clone(),
            headers: self.route.headers.collect(&parts.headers),
            body,
            protocol: ProtocolAttributes {
                correlation_id: Some(correlation_id.to_owned()),
                ..ProtocolAttributes::default()
            },
        };
        let wait = self.settings.storage_wait;
        let Some(outcome) = super::wait::stored_within(&self.intake, message, held, wait).await
        else {
            super::wait::timed_out(source, correlation_id, wait);
            return Answer::StorageTimeout {
                retry_after_secs: wait.as_millis().div_ceil(1000).max(1) as u64,
            };
        };
        match outcome {
            IntakeOutcome::New { id, .. } => {
                tracing::debug!(
                    source,
                    correlationId = correlation_id,
                    inboxId = %id,
                    "Inbox message stored"
                );
                Answer::Stored(id)
            }
            IntakeOutcome::Duplicate => {
                tracing::debug!(
                    source,
                    correlationId = correlation_id,
                    "Duplicate inbox message; nothing stored"
                );
                Answer::Duplicate
            }
            IntakeOutcome::Filtered { .. } => Answer::Filtered,
            IntakeOutcome::Refused(Refusal::InvalidJson) => Answer::InvalidJson,
            IntakeOutcome::Refused(Refusal::NoKey { .. }) => Answer::NoKey,
            IntakeOutcome::Refused(Refusal::TransformFailed { error }) => {
                Answer::TransformFailed(error)
            }
            IntakeOutcome::Refused(Refusal::JsonLimit { limit }) => Answer::JsonLimit(limit),
            IntakeOutcome::Refused(Refusal::InvalidTopic { error }) => Answer::InvalidTopic(error),
            IntakeOutcome::Refused(Refusal::DataRejected { reason }) => {
                tracing::warn!(
                    source,
                    correlationId = correlation_id,
                    "The inbox message cannot be stored"
                );
                Answer::DataRejected(reason)
            }
            IntakeOutcome::StorageFailed { .. } => {
                // The writer logged the redacted cause; this line ties it to the request.
                tracing::warn!(
                    source,
                    correlationId = correlation_id,
                    "The inbox message was not stored"
                );
                Answer::StorageFailed
            }
            IntakeOutcome::ShuttingDown => Answer::ShuttingDown,
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
