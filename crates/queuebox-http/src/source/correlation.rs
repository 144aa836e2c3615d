//! The correlation id of an HTTP message (INB-27/28, OPS-38/39): taken from the
//! `X-Correlation-Id` request header or newly generated, and echoed on every response of a
//! source route, including the answers the server gives before the route runs.

use axum::body::Body;
use axum::http::header::HeaderName;
use axum::http::{HeaderMap, HeaderValue, Response};

use super::headers::stored_value;

/// The request and response header (matched in any letter case: `HeaderMap` names are lower
/// case).
pub const CORRELATION_HEADER: HeaderName = HeaderName::from_static("x-correlation-id");

/// Longest correlation id kept, in characters (INB-27).
const MAX_CHARS: usize = 128;

/// One message's correlation id. The data-port server computes it once per request to a
/// source route and puts it into the request extensions, so the route and the server's own
/// early answers (503, 413, 405, 408) carry the same value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorrelationId(String);

impl CorrelationId {
    /// The `X-Correlation-Id` header (its last value, as stored, INB-24/25) with control
    /// characters removed, trimmed and cut to 128 characters; when that leaves nothing, a new
    /// random v4 UUID in lower-case hyphenated form.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        headers
            .get_all(&CORRELATION_HEADER)
            .iter()
            .next_back()
            .and_then(|value| sanitize(&stored_value(value.as_bytes())))
            .map(Self)
            .unwrap_or_else(Self::generate)
    }

    /// The id the route of a request uses: the server's when it set one.
    pub(crate) fn of_request<B>(request: &axum::http::Request<B>) -> Self {
        match request.extensions().get::<Self>() {
            Some(id) => id.clone(),
            None => Self::from_headers(request.headers()),
        }
    }

    fn generate() -> Self {
        Self(uuid::Uuid::new_v4().hyphenated().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Adds the response header unless the response already has one (INB-6).
    pub fn stamp(&self, mut response: Response<Body>) -> Response<Body> {
        if !response.headers().contains_key(&CORRELATION_HEADER) {
            response
                .headers_mut()
                .insert(CORRELATION_HEADER, self.header_value());
        }
        response
    }

    pub(crate) fn header_value(&self) -> HeaderValue {
        // Control characters are gone (and with them every byte a header value refuses), so
        // this cannot fail; the fallback only keeps the type honest.
        HeaderValue::from_bytes(self.0.as_bytes())
            .unwrap_or_else(|_| HeaderValue::from_static("invalid"))
    }
}

/// INB-27: removes U+0000..U+001F and U+007F, trims, keeps the first 128 characters; `None`
/// when nothing is left.
fn sanitize(raw: &str) -> Option<String> {
    let cleaned: String = raw
        .chars()
        .filter(|c| !matches!(c, '\0'..='\x1f' | '\x7f'))
        .collect();
    let kept: String = cleaned.trim().chars().take(MAX_CHARS).collect();
    // Cutting may leave trailing spaces that were inside the value; they stay, as cut.
    (!kept.is_empty()).then_some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(value: &[u8]) -> CorrelationId {
        let mut headers = HeaderMap::new();
        headers.insert("X-Correlation-Id", HeaderValue::from_bytes(value).unwrap());
        CorrelationId::from_headers(&headers)
    }

    fn is_v4(id: &CorrelationId) -> bool {
        uuid::Uuid::parse_str(id.as_str()).is_ok_and(|u| u.get_version_num() == 4)
            && id.as_str() == id.as_str().to_ascii_lowercase()
    }

    #[test]
    fn inb_27_header_value_is_cleaned_trimmed_and_cut() {
        assert_eq!(from(b"  abc\tdef ").as_str(), "abcdef");
        // HTTP/1 cannot carry the other control characters in a header value; the rule
        // still holds for them.
        assert_eq!(sanitize("\u{0}a\u{1f}b\u{7f}\n").as_deref(), Some("ab"));
        assert_eq!(sanitize(" \u{1} "), None);
        let long = "x".repeat(300);
        assert_eq!(from(long.as_bytes()).as_str(), "x".repeat(128));
        assert_eq!(
            from("é".repeat(200).as_bytes()).as_str().chars().count(),
            128
        );
    }

    #[test]
    fn inb_27_absent_or_empty_gives_a_new_v4_uuid() {
        assert!(is_v4(&CorrelationId::from_headers(&HeaderMap::new())));
        assert!(is_v4(&from(b"   ")));
        assert!(is_v4(&from(b"\t\t")));
    }
}
