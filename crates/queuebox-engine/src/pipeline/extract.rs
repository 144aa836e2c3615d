//! The idempotency key, aggregate id and event type of a message (INB-31..40): each the first
//! value of its chain of steps, in the order INB-31 gives for the source's protocol, normalized
//! by INB-37.
//!
//! The expression step (`*Expression`, TRF-26) reads a result the pipeline evaluated on the
//! pool before the chain runs ([`KeyResults`]); the step only normalizes it (TRF-28) or logs
//! its failure (TRF-29), so the chains stay synchronous.

use queuebox_core::HeaderName;
use queuebox_core::ReceivedHeaders;
use queuebox_core::jsonpath::JsonPath;
use queuebox_core::rawjson::{TooLong, locate, normalize_number};
use queuebox_transform::{Failure, KeyCandidate, key_value};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The results of a source's key expressions on one message, by attribute (`None` where the
/// attribute has no expression, or the body is not JSON).
pub(crate) type KeyResults = [Option<Result<Value, Failure>>; 3];

/// Index of each attribute in [`KeyResults`].
pub(crate) const KEY: usize = 0;
pub(crate) const AGGREGATE_ID: usize = 1;
pub(crate) const EVENT_TYPE: usize = 2;

/// Longest value, in UTF-16 code units (INB-37).
const MAX_UTF16_UNITS: usize = 255;

/// The message as the steps read it.
pub(crate) struct Message<'a> {
    pub(crate) headers: &'a ReceivedHeaders,
    /// The parsed payload and the body text it came from (for numbers, whose exact digits only
    /// the text keeps); `None` for a body that is not JSON, where only the steps that need no
    /// JSON run (INB-56).
    pub(crate) json: Option<(&'a Value, &'a str)>,
    /// The raw body bytes, for the digest.
    pub(crate) body: &'a [u8],
    /// The protocol's own message id (INB-35).
    pub(crate) protocol_id: Option<&'a str>,
    pub(crate) source: &'a str,
    pub(crate) correlation_id: &'a str,
    pub(crate) key_results: &'a KeyResults,
}

/// One step of a chain (INB-31).
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// A header, looked up in any letter case (INB-32).
    Header(HeaderName),
    /// JSONPaths on the original payload, in list order (INB-34).
    Paths(Vec<JsonPath>),
    /// The key expression of this attribute (index into [`KeyResults`]) and its configuration
    /// path, such as `sources.github.eventTypeExpression` (TRF-29).
    Expression { slot: usize, path: String },
    /// The protocol's message id: AMQP `message_id`, Kafka record key, `Nats-Msg-Id` (INB-35).
    ProtocolId,
    /// `sha256:` + hex of the body bytes (INB-36): always a value.
    Digest,
}

/// One attribute's chain, fixed at start.
#[derive(Clone, Debug)]
pub(crate) struct Chain {
    /// For log lines: `idempotency key`, `aggregate id`, `event type`.
    pub(crate) attribute: &'static str,
    pub(crate) steps: Vec<Step>,
}

impl Chain {
    /// The first step that gives a value (INB-31); `None` when none does.
    pub(crate) fn extract(&self, message: &Message<'_>) -> Option<String> {
        self.steps.iter().find_map(|step| self.run(step, message))
    }

    fn run(&self, step: &Step, message: &Message<'_>) -> Option<String> {
        match step {
            Step::Header(name) => {
                let text = message.headers.get(name.as_str())?;
                self.accept(normalize_text(text), message, || format!("header {name}"))
            }
            Step::Paths(paths) => {
                let (payload, text) = message.json?;
                paths.iter().find_map(|path| {
                    let candidate = candidate_at(path, payload, text)?;
                    self.accept(candidate, message, || format!("path {path}"))
                })
            }
            Step::Expression { slot, path } => match message.key_results[*slot].as_ref()? {
                Ok(result) => {
                    let candidate = match key_value(result) {
                        KeyCandidate::Value(v) => Ok(Some(v)),
                        KeyCandidate::None => Ok(None),
                        KeyCandidate::TooLong => Err(TooLong),
                    };
                    self.accept(candidate, message, || format!("expression {path}"))
                }
                Err(failure) => {
                    // TRF-29: no value and one warn line; the chain goes on.
                    tracing::warn!(
                        source = message.source,
                        correlationId = message.correlation_id,
                        attribute = self.attribute,
                        key = %path,
                        reason = %failure.reason(),
                        "The key expression {path} failed; it counts as no value"
                    );
                    None
                }
            },
            Step::ProtocolId => {
                let id = message.protocol_id?;
                self.accept(normalize_text(id), message, || "the protocol id".to_owned())
            }
            Step::Digest => Some(format!(
                "sha256:{}",
                hex::encode(Sha256::digest(message.body))
            )),
        }
    }

    /// What the chain tried, for the warn line of INB-39 (names and paths, never values).
    pub(crate) fn tried(&self) -> String {
        let steps: Vec<String> = self
            .steps
            .iter()
            .flat_map(|step| match step {
                Step::Header(name) => vec![format!("header {name}")],
                Step::Paths(paths) => paths.iter().map(|p| format!("path {p}")).collect(),
                Step::Expression { path, .. } => vec![format!("expression {path}")],
                Step::ProtocolId => vec!["the protocol id".to_owned()],
                Step::Digest => vec!["the body digest".to_owned()],
            })
            .collect();
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

/// INB-37 for the value a path reached; `None` when the path reaches nothing.
fn candidate_at(
    path: &JsonPath,
    payload: &Value,
    text: &str,
) -> Option<Result<Option<String>, TooLong>> {
    let found = path.get(payload)?;
    Some(match found {
        Value::String(text) => normalize_text(text),
        Value::Number(number) => {
            // The raw literal keeps digits an f64 lost; serde_json's own text is the fallback,
            // never needed for a body serde_json accepted.
            let literal =
                locate(text, path.steps()).map_or_else(|| number.to_string(), str::to_owned);
            normalize_number(&literal, MAX_UTF16_UNITS).map(Some)
        }
        Value::Bool(flag) => Ok(Some(flag.to_string())),
        Value::Null | Value::Object(_) | Value::Array(_) => Ok(None),
    })
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

    fn chain(header: Option<&str>, paths: &[&str]) -> Chain {
        let mut steps = Vec::new();
        if let Some(header) = header {
            steps.push(Step::Header(HeaderName::parse(header).unwrap()));
        }
        if !paths.is_empty() {
            steps.push(Step::Paths(
                paths.iter().map(|p| JsonPath::parse(p).unwrap()).collect(),
            ));
        }
        Chain {
            attribute: "idempotency key",
            steps,
        }
    }

    fn run(chain: &Chain, headers: &[(&str, &str)], body: &str) -> Option<String> {
        let headers: ReceivedHeaders = headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect();
        let payload: Value = serde_json::from_str(body).unwrap();
        chain.extract(&Message {
            headers: &headers,
            json: Some((&payload, body)),
            body: body.as_bytes(),
            protocol_id: None,
            source: "s",
            correlation_id: "c",
            key_results: &[None, None, None],
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
