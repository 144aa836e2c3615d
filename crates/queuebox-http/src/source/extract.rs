//! The idempotency key, aggregate id and event type of an HTTP message (INB-31..39): each the
//! first value of its chain, header then paths, normalized by INB-37.
//!
//! The expression step (`*Expression`) sits between the two; the binary refuses a
//! configuration with one at start (no JSONata engine yet), so the chain has no such step
//! here rather than a step that pretends.

use queuebox_core::jsonpath::JsonPath;
use serde_json::Value;

use super::headers::ReceivedHeaders;
use super::rawjson::{TooLong, locate, normalize_number};

/// Longest value, in UTF-16 code units (INB-37).
const MAX_UTF16_UNITS: usize = 255;

/// The message as the steps read it: the parsed payload and the body text it came from (for
/// numbers, whose exact digits only the text keeps).
pub(crate) struct Message<'a> {
    pub(crate) headers: &'a ReceivedHeaders,
    pub(crate) text: &'a str,
    pub(crate) payload: &'a Value,
    pub(crate) source: &'a str,
    pub(crate) correlation_id: &'a str,
}

/// One attribute's chain, fixed at start.
#[derive(Clone, Debug)]
pub(crate) struct Chain {
    /// For log lines: `idempotency key`, `aggregate id`, `event type`.
    pub(crate) attribute: &'static str,
    /// `…Header`, as configured (looked up in any letter case).
    pub(crate) header: Option<String>,
    /// `…Path`, tried in list order (INB-34).
    pub(crate) paths: Vec<JsonPath>,
}

impl Chain {
    /// The first step that gives a value (INB-31); `None` when none does.
    pub(crate) fn extract(&self, message: &Message<'_>) -> Option<String> {
        if let Some(name) = &self.header
            && let Some(text) = message.headers.get(name)
            && let Some(value) =
                self.accept(normalize_text(text), message, || format!("header {name}"))
        {
            return Some(value);
        }
        for path in &self.paths {
            let Some(found) = path.get(message.payload) else {
                continue;
            };
            let candidate = match found {
                Value::String(text) => normalize_text(text),
                Value::Number(number) => {
                    // The raw literal keeps digits an f64 lost; serde_json's own text is the
                    // fallback, never needed for a body serde_json accepted.
                    let literal = locate(message.text, path.steps())
                        .map_or_else(|| number.to_string(), str::to_owned);
                    match normalize_number(&literal, MAX_UTF16_UNITS) {
                        Ok(text) => Ok(Some(text)),
                        Err(TooLong) => Err(TooLong),
                    }
                }
                Value::Bool(flag) => Ok(Some(flag.to_string())),
                Value::Null | Value::Object(_) | Value::Array(_) => Ok(None),
            };
            if let Some(value) = self.accept(candidate, message, || format!("path {path}")) {
                return Some(value);
            }
        }
        None
    }

    /// What the chain tried, for the warn line of INB-39 (names and paths, never values).
    pub(crate) fn tried(&self) -> String {
        let mut steps: Vec<String> = self.header.iter().map(|h| format!("header {h}")).collect();
        steps.extend(self.paths.iter().map(|p| format!("path {p}")));
        if steps.is_empty() {
            "no step".to_owned()
        } else {
            steps.join(", ")
        }
    }

    fn accept(
        &self,
        candidate: Result<Option<String>, TooLong>,
        message: &Message<'_>,
        step: impl FnOnce() -> String,
    ) -> Option<String> {
        match candidate {
            Ok(value) => value,
            Err(TooLong) => {
                let step = step();
                tracing::warn!(
                    source = message.source,
                    correlationId = message.correlation_id,
                    attribute = self.attribute,
                    step,
                    "The {} from {step} is longer than {MAX_UTF16_UNITS} characters; it counts \
                     as no value",
                    self.attribute
                );
                None
            }
        }
    }
}

/// INB-37 for text: trimmed; empty is no value; over 255 UTF-16 code units is `TooLong`.
fn normalize_text(text: &str) -> Result<Option<String>, TooLong> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        Ok(None)
    } else if trimmed.encode_utf16().count() > MAX_UTF16_UNITS {
        Err(TooLong)
    } else {
        Ok(Some(trimmed.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap, HeaderValue};

    use crate::source::headers::HeaderPolicy;

    fn chain(header: Option<&str>, paths: &[&str]) -> Chain {
        Chain {
            attribute: "idempotency key",
            header: header.map(str::to_owned),
            paths: paths.iter().map(|p| JsonPath::parse(p).unwrap()).collect(),
        }
    }

    fn run(chain: &Chain, headers: &[(&'static str, &'static str)], body: &str) -> Option<String> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(*name, HeaderValue::from_static(value));
        }
        let headers = HeaderPolicy::new(None).collect(&map);
        let payload: Value = serde_json::from_str(body).unwrap();
        chain.extract(&Message {
            headers: &headers,
            text: body,
            payload: &payload,
            source: "s",
            correlation_id: "c",
        })
    }

    #[test]
    fn inb_31_header_wins_over_the_path_in_any_letter_case() {
        let c = chain(Some("X-Idempotency-Key"), &["$.id"]);
        assert_eq!(
            run(&c, &[("x-idempotency-key", " h1 ")], r#"{"id":"p1"}"#),
            Some("h1".into())
        );
        assert_eq!(
            run(&c, &[("x-idempotency-key", "   ")], r#"{"id":"p1"}"#),
            Some("p1".into())
        );
        assert_eq!(run(&c, &[], r#"{"id":"p1"}"#), Some("p1".into()));
        assert_eq!(
            run(&chain(Some("X-Key"), &[]), &[("x-key", "  ")], "{}"),
            None
        );
    }

    #[test]
    fn inb_34_paths_in_list_order() {
        let c = chain(None, &["$.orderId", "$.OrderId"]);
        assert_eq!(run(&c, &[], r#"{"OrderId":"b"}"#), Some("b".into()));
        assert_eq!(
            run(&c, &[], r#"{"orderId":"a","OrderId":"b"}"#),
            Some("a".into())
        );
        assert_eq!(
            run(&c, &[], r#"{"orderId":null,"OrderId":"b"}"#),
            Some("b".into())
        );
        assert_eq!(run(&c, &[], r#"{"orderId":{},"OrderId":[1]}"#), None);
    }

    #[test]
    fn inb_37_values_are_normalized() {
        let c = chain(None, &["$.v"]);
        let v = |body: &str| run(&c, &[], body);
        assert_eq!(v(r#"{"v": 2.0}"#), Some("2".into()));
        assert_eq!(v(r#"{"v": 1e3}"#), Some("1000".into()));
        assert_eq!(
            v(r#"{"v": 123456789012345678901234567890}"#),
            Some("123456789012345678901234567890".into())
        );
        assert_eq!(v(r#"{"v": true}"#), Some("true".into()));
        assert_eq!(v(r#"{"v": "  x  "}"#), Some("x".into()));
        assert_eq!(v(r#"{"v": ""}"#), None);
        let at_limit = format!(r#"{{"v": "{}"}}"#, "é".repeat(255));
        assert_eq!(v(&at_limit), Some("é".repeat(255)));
        // 128 characters outside the BMP are 256 UTF-16 code units.
        let over = format!(r#"{{"v": "{}"}}"#, "😀".repeat(128));
        assert_eq!(v(&over), None);
        assert_eq!(v(r#"{"v": 1e300}"#), None);
    }

    #[test]
    fn inb_39_names_what_was_tried() {
        assert_eq!(
            chain(Some("X-Key"), &["$.a", "$.b"]).tried(),
            "header X-Key, path $.a, path $.b"
        );
    }
}
