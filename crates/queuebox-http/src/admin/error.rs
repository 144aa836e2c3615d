//! The refusals of the admin API: a status and the text of `{"error":"<text>"}` (ADM-3..8).

use axum::body::Body;
use axum::http::{Response, StatusCode};
use queuebox_store::StoreError;

use crate::server::respond::json_error as respond_json_error;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminError {
    pub status: StatusCode,
    pub message: String,
}

impl AdminError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 400 `Invalid request: <reason>` (ADM-6).
    pub fn invalid(reason: impl std::fmt::Display) -> Self {
        Self::bad_request(format!("Invalid request: {reason}"))
    }

    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "Message not found")
    }

    /// A database failure: logged whole, answered without detail.
    pub fn store(operation: &str, err: &StoreError) -> Self {
        tracing::error!(operation, "The admin API could not {operation}: {err}");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal error")
    }

    pub fn into_response(self) -> Response<Body> {
        respond_json_error(self.status, &self.message)
    }
}
