//! Every answer of a source route (INB-10), as JSON with `Content-Type: application/json` and
//! the message's `X-Correlation-Id` (INB-6).

use axum::body::Body;
use axum::http::header::{CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderValue, Response, StatusCode};
use serde_json::json;
use uuid::Uuid;

use queuebox_core::correlation::CorrelationId;
use queuebox_telemetry::RefusalReason;

use super::correlation;

/// The outcome of one request; the first step that ends it decides (INB-7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// 202 `{"messageId":…,"inboxId":…}` (the same inbox row id), after the insert committed.
    Stored(Uuid),
    /// 202 `{"status":"filtered"}`.
    Filtered,
    /// 200 `{"status":"duplicate"}`.
    Duplicate,
    /// 400 `{"error":"Invalid JSON"}`.
    InvalidJson,
    /// 400 `{"error":"Unsupported JSON: <limit>"}`: valid JSON beyond a parser limit.
    JsonLimit(&'static str),
    /// 422 `{"error":"The message cannot be stored: <reason>"}`: the database refuses the
    /// data, the same way every time, so a retry cannot help.
    DataRejected(String),
    /// 400 `{"error":"No idempotency key found"}`.
    NoKey,
    /// 400 `{"error":"<why the relay topic is invalid>"}` (issue 14 item 6).
    InvalidTopic(String),
    /// 422 `{"error":"Transform failed: <reason>"}` (TRF-17); the text is redacted.
    TransformFailed(String),
    /// 400 for a body the HTTP layer could not read (INB-11: not a source answer as such).
    UnreadableBody,
    /// 401 with the check's message.
    Unauthorized(String),
    /// 413 `Request body exceeds <N> bytes`.
    TooLarge(u64),
    /// 429 with `Retry-After` in whole seconds.
    RateLimited { retry_after_secs: u64 },
    /// 500 `{"error":"Storage failed"}`.
    StorageFailed,
    /// 503 `{"error":"QueueBox is shutting down"}`.
    ShuttingDown,
    /// 503 `{"error":"Too many requests waiting to be stored"}` with `Retry-After: 1`: the
    /// intake's memory bound (`inbox.maxPendingBytes`) has no room for the body.
    Overloaded,
    /// 503 `{"error":"The database did not answer in time"}` with `Retry-After`: the message
    /// was not stored within `inbox.storageWaitMs` (it may still be; a repeat is a duplicate).
    StorageTimeout { retry_after_secs: u64 },
}

impl Answer {
    /// The `reason` of `queuebox_inbox_webhook_refusals_total` for an error answer; `None` for
    /// an answer that accepts the message (202, 200).
    pub(crate) fn refusal_reason(&self) -> Option<RefusalReason> {
        Some(match self {
            Self::Stored(_) | Self::Filtered | Self::Duplicate => return None,
            Self::InvalidJson => RefusalReason::InvalidJson,
            Self::JsonLimit(_) => RefusalReason::JsonLimit,
            Self::DataRejected(_) => RefusalReason::DataRejected,
            Self::NoKey => RefusalReason::NoKey,
            Self::TransformFailed(_) => RefusalReason::TransformFailed,
            Self::UnreadableBody => RefusalReason::UnreadableBody,
            Self::Unauthorized(_) => RefusalReason::Unauthorized,
            Self::TooLarge(_) => RefusalReason::TooLarge,
            Self::RateLimited { .. } => RefusalReason::RateLimited,
            Self::StorageFailed => RefusalReason::StorageFailed,
            Self::ShuttingDown => RefusalReason::ShuttingDown,
            Self::Overloaded => RefusalReason::Overloaded,
            Self::StorageTimeout { .. } => RefusalReason::StorageTimeout,
            Self::InvalidTopic(_) => RefusalReason::InvalidTopic,
        })
    }

    pub(crate) fn into_response(self, correlation: &CorrelationId) -> Response<Body> {
        let error = |status, text: &str| (status, json!({ "error": text }));
        let (status, body) = match &self {
            Self::Stored(id) => (
                StatusCode::ACCEPTED,
                // `messageId` is inbox.md's field; `inboxId` names the same id so that it is not
                // mistaken for the outbox row's id a delivery shows (issue 14 item 8).
                json!({ "messageId": id.hyphenated().to_string(), "inboxId": id.hyphenated().to_string() }),
            ),
            Self::Filtered => (StatusCode::ACCEPTED, json!({ "status": "filtered" })),
            Self::Duplicate => (StatusCode::OK, json!({ "status": "duplicate" })),
            Self::InvalidJson => error(StatusCode::BAD_REQUEST, "Invalid JSON"),
            Self::JsonLimit(limit) => error(
                StatusCode::BAD_REQUEST,
                &format!("Unsupported JSON: {limit}"),
            ),
            Self::DataRejected(reason) => error(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("The message cannot be stored: {reason}"),
            ),
            Self::NoKey => error(StatusCode::BAD_REQUEST, "No idempotency key found"),
            Self::InvalidTopic(text) => error(StatusCode::BAD_REQUEST, text),
            Self::TransformFailed(text) => error(StatusCode::UNPROCESSABLE_ENTITY, text),
            Self::UnreadableBody => error(StatusCode::BAD_REQUEST, "Bad request"),
            Self::Unauthorized(text) => error(StatusCode::UNAUTHORIZED, text),
            Self::TooLarge(cap) => error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("Request body exceeds {cap} bytes"),
            ),
            Self::RateLimited { .. } => error(StatusCode::TOO_MANY_REQUESTS, "Rate limit exceeded"),
            Self::StorageFailed => error(StatusCode::INTERNAL_SERVER_ERROR, "Storage failed"),
            Self::ShuttingDown => {
                error(StatusCode::SERVICE_UNAVAILABLE, "QueueBox is shutting down")
            }
            Self::Overloaded => error(
                StatusCode::SERVICE_UNAVAILABLE,
                "Too many requests waiting to be stored",
            ),
            Self::StorageTimeout { .. } => error(
                StatusCode::SERVICE_UNAVAILABLE,
                "The database did not answer in time",
            ),
        };
        let mut response = Response::new(Body::from(body.to_string()));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        match self {
            Self::RateLimited { retry_after_secs } | Self::StorageTimeout { retry_after_secs } => {
                headers.insert(RETRY_AFTER, HeaderValue::from(retry_after_secs));
            }
            // The body may not have been read to its end.
            Self::Overloaded => {
                headers.insert(RETRY_AFTER, HeaderValue::from(1_u64));
                headers.insert(CONNECTION, HeaderValue::from_static("close"));
            }
            // The rest of the body was not read (or cannot be): the connection is not reused,
            // and a client about to shut down is not invited to send again on it.
            Self::TooLarge(_) | Self::UnreadableBody | Self::ShuttingDown => {
                headers.insert(CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        correlation::stamp(correlation, response)
    }
}
