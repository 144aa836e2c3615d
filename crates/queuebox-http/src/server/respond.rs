//! Response helpers shared by both ports: the JSON error shape (OPS-6/7) and content types.

use axum::body::Body;
use axum::http::header::{CONNECTION, CONTENT_TYPE, HeaderValue};
use axum::http::{Response, StatusCode};
use axum::response::IntoResponse;

pub(crate) const JSON: &str = "application/json";
pub(crate) const TEXT: &str = "text/plain; charset=utf-8";
pub(crate) const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(crate) const NOT_FOUND: &str = "Not found";
pub(crate) const METHOD_NOT_ALLOWED: &str = "Method not allowed";
pub(crate) const HEADERS_TOO_LARGE: &str = "Request headers too large";
pub(crate) const REQUEST_TIMEOUT: &str = "Request timeout";
pub(crate) const INTERNAL_ERROR: &str = "Internal error";
pub(crate) const SHUTTING_DOWN: &str = "QueueBox is shutting down";

/// `{"error":"<text>"}` with `application/json` (OPS-7).
pub(crate) fn json_error(status: StatusCode, text: &str) -> Response<Body> {
    json_response(status, error_body(text))
}

pub(crate) fn json_response(status: StatusCode, body: String) -> Response<Body> {
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}

/// The same error, but the connection is not reused: used when the request may not have been
/// read to its end (timeouts) or when the server is going away (draining), so a client does
/// not keep sending to a listener about to close.
pub(crate) fn json_error_closing(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = json_error(status, text);
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

pub(crate) fn error_body(text: &str) -> String {
    serde_json::json!({ "error": text }).to_string()
}

/// axum answers an unknown method (and a nested router's miss) with an empty body; give those
/// answers the JSON shape. A response that already has a content type was written by a
/// handler on purpose and is left alone.
pub(crate) fn shape_router_error(response: Response<Body>) -> Response<Body> {
    let text = match response.status() {
        StatusCode::NOT_FOUND => NOT_FOUND,
        StatusCode::METHOD_NOT_ALLOWED => METHOD_NOT_ALLOWED,
        _ => return response,
    };
    if response.headers().contains_key(CONTENT_TYPE) {
        return response;
    }
    let (mut parts, _) = response.into_parts();
    // The old body's length must not survive the new body (the `Allow` header does).
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    Response::from_parts(parts, Body::from(error_body(text)))
}

/// The raw 408 written on a connection whose head did not arrive in time: hyper gives up on
/// such a connection without answering, so the listener writes this itself.
pub(crate) fn raw_request_timeout() -> Vec<u8> {
    let body = error_body(REQUEST_TIMEOUT);
    format!(
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: {JSON}\r\ncontent-length: {}\r\n\
         connection: close\r\ndate: {}\r\n\r\n{body}",
        body.len(),
        httpdate::fmt_http_date(std::time::SystemTime::now()),
    )
    .into_bytes()
}
