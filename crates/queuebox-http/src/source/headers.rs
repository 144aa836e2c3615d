//! Which received headers an HTTP source keeps and how (INB-21..25): lower-case names, the
//! last value of a repeated name, UTF-8 text or `base64:` Base64, never a credential header.

use axum::http::HeaderMap;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use queuebox_core::{HeaderName, ReceivedHeaders};

/// Headers no HTTP source ever keeps, besides its own auth header (INB-21, SEC-7).
const ALWAYS_WITHHELD: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

/// The header rules of one source, fixed at start.
#[derive(Clone, Debug)]
pub(crate) struct HeaderPolicy {
    /// Lower case; `http::HeaderMap` names are lower case too.
    withheld: Vec<String>,
}

impl HeaderPolicy {
    /// `credentials` are the headers the source's auth reads its key or signature from.
    pub(crate) fn new(credentials: &[HeaderName]) -> Self {
        let mut withheld: Vec<String> = ALWAYS_WITHHELD.iter().map(|&n| n.to_owned()).collect();
        withheld.extend(
            credentials
                .iter()
                .map(|name| name.as_str().to_ascii_lowercase()),
        );
        Self { withheld }
    }

    /// The headers as they are stored, filtered on and looked up (INB-22..25).
    pub(crate) fn collect(&self, headers: &HeaderMap) -> ReceivedHeaders {
        let mut kept = ReceivedHeaders::new();
        // `HeaderMap::iter` yields every value of a name in the order received, so inserting
        // in turn leaves the last one (INB-24).
        for (name, value) in headers {
            if self.withheld.iter().any(|w| w == name.as_str()) {
                continue;
            }
            kept.insert(name.as_str(), stored_value(value.as_bytes()));
        }
        kept
    }
}

/// INB-25 for `http`: the text when the bytes are UTF-8, else `base64:` + standard Base64.
pub(crate) fn stored_value(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => format!("base64:{}", STANDARD.encode(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn policy(credential: Option<&str>) -> HeaderPolicy {
        let credential: Vec<HeaderName> = credential
            .map(|c| HeaderName::parse(c).unwrap())
            .into_iter()
            .collect();
        HeaderPolicy::new(&credential)
    }

    #[test]
    fn inb_21_credential_headers_are_never_kept() {
        let mut headers = HeaderMap::new();
        for name in [
            "authorization",
            "proxy-authorization",
            "cookie",
            "x-signature",
            "x-kept",
        ] {
            headers.insert(
                axum::http::HeaderName::from_static(name),
                HeaderValue::from_static("v"),
            );
        }
        let kept = policy(Some("X-Signature")).collect(&headers);
        assert_eq!(kept.to_json(), r#"{"x-kept":"v"}"#);
    }

    #[test]
    fn inb_24_last_value_wins_and_inb_25_non_utf8_is_base64() {
        let mut headers = HeaderMap::new();
        headers.append("x-a", HeaderValue::from_static("first"));
        headers.append("x-a", HeaderValue::from_static("second"));
        headers.insert(
            "x-bin",
            HeaderValue::from_bytes(&[0xff, 0xfe, b'a']).unwrap(),
        );
        let kept = policy(None).collect(&headers);
        assert_eq!(kept.get("X-A"), Some("second"));
        assert_eq!(kept.get("x-bin"), Some("base64://5h"));
    }

    #[test]
    fn inb_22_no_headers_is_an_empty_object() {
        assert_eq!(policy(None).collect(&HeaderMap::new()).to_json(), "{}");
    }
}
