//! The correlation id over HTTP (INB-27/28, OPS-38/39): taken from the `X-Correlation-Id`
//! request header or newly generated, and echoed on every response of a source route,
//! including the answers the server gives before the route runs.

use axum::body::Body;
use axum::http::header::HeaderName;
use axum::http::{HeaderMap, HeaderValue, Request, Response};
use queuebox_core::correlation::CorrelationId;

use super::headers::stored_value;

/// The request and response header (matched in any letter case: `HeaderMap` names are lower
/// case).
pub const CORRELATION_HEADER: HeaderName = HeaderName::from_static("x-correlation-id");

/// The `X-Correlation-Id` header (its last value, as stored, INB-24/25), cleaned; else a new
/// id. The data-port server computes it once per request to a source route and puts it into
/// the request extensions, so the route and the server's own early answers (503, 413, 405, 408)
/// carry the same value.
pub fn of_headers(headers: &HeaderMap) -> CorrelationId {
    let last = headers
        .get_all(&CORRELATION_HEADER)
        .iter()
        .next_back()
        .map(|value| stored_value(value.as_bytes()));
    CorrelationId::from_candidate(last.as_deref())
}

/// The id the route of a request uses: the server's when it set one.
pub(crate) fn of_request<B>(request: &Request<B>) -> CorrelationId {
    match request.extensions().get::<CorrelationId>() {
        Some(id) => id.clone(),
        None => of_headers(request.headers()),
    }
}

/// Adds the response header unless the response already has one (INB-6).
pub fn stamp(correlation: &CorrelationId, mut response: Response<Body>) -> Response<Body> {
    if !response.headers().contains_key(&CORRELATION_HEADER) {
        // Control characters are gone (and with them every byte a header value refuses), so
        // this cannot fail; the fallback only keeps the type honest.
        let value = HeaderValue::from_bytes(correlation.as_str().as_bytes())
            .unwrap_or_else(|_| HeaderValue::from_static("invalid"));
        response.headers_mut().insert(CORRELATION_HEADER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(value: &[u8]) -> CorrelationId {
        let mut headers = HeaderMap::new();
        headers.insert("X-Correlation-Id", HeaderValue::from_bytes(value).unwrap());
        of_headers(&headers)
    }

    fn is_v4(id: &CorrelationId) -> bool {
        uuid::Uuid::parse_str(id.as_str()).is_ok_and(|u| u.get_version_num() == 4)
            && id.as_str() == id.as_str().to_ascii_lowercase()
    }

    #[test]
    fn inb_27_header_value_is_cleaned_trimmed_and_cut() {
        assert_eq!(from(b"  abc\tdef ").as_str(), "abcdef");
        let long = "x".repeat(300);
        assert_eq!(from(long.as_bytes()).as_str(), "x".repeat(128));
        assert_eq!(
            from("é".repeat(200).as_bytes()).as_str().chars().count(),
            128
        );
    }

    #[test]
    fn inb_27_absent_or_empty_gives_a_new_v4_uuid() {
        assert!(is_v4(&of_headers(&HeaderMap::new())));
        assert!(is_v4(&from(b"   ")));
        assert!(is_v4(&from(b"\t\t")));
    }

    #[test]
    fn inb_6_the_id_is_stamped_once() {
        let id = CorrelationId::from_candidate(Some("c-1"));
        let response = stamp(&id, Response::new(Body::empty()));
        assert_eq!(response.headers()[&CORRELATION_HEADER], "c-1");
        let again = stamp(&CorrelationId::from_candidate(Some("c-2")), response);
        assert_eq!(again.headers()[&CORRELATION_HEADER], "c-1");
    }
}
