//! The correlation id of one inbox message (INB-27/28, OPS-38/39): the first usable candidate
//! (the `X-Correlation-Id` header, then a protocol property such as AMQP `correlation_id`),
//! cleaned, or else a new random v4 UUID. Every log line about the message carries it.

use crate::headers::ReceivedHeaders;

/// The header that carries a correlation id, in any letter case.
pub const CORRELATION_HEADER: &str = "x-correlation-id";

/// Longest correlation id kept, in characters (INB-27).
const MAX_CHARS: usize = 128;

/// One message's correlation id: free of control characters, trimmed, at most 128 characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorrelationId(String);

impl CorrelationId {
    /// INB-27: the `X-Correlation-Id` header of `headers`, else `protocol` (a broker's own
    /// property), each cleaned; when neither leaves anything, a new id.
    pub fn of_message(headers: &ReceivedHeaders, protocol: Option<&str>) -> Self {
        headers
            .get(CORRELATION_HEADER)
            .and_then(sanitize)
            .or_else(|| protocol.and_then(sanitize))
            .map(Self)
            .unwrap_or_else(Self::generate)
    }

    /// The first candidate that is usable after cleaning, else a new id.
    pub fn from_candidate(candidate: Option<&str>) -> Self {
        candidate
            .and_then(sanitize)
            .map(Self)
            .unwrap_or_else(Self::generate)
    }

    /// A random version-4 UUID in lower-case hyphenated form.
    pub fn generate() -> Self {
        Self(uuid::Uuid::new_v4().hyphenated().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
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

    fn is_v4(id: &CorrelationId) -> bool {
        uuid::Uuid::parse_str(id.as_str()).is_ok_and(|u| u.get_version_num() == 4)
            && id.as_str() == id.as_str().to_ascii_lowercase()
    }

    fn headers(value: &str) -> ReceivedHeaders {
        [("X-Correlation-ID".to_owned(), value.to_owned())]
            .into_iter()
            .collect()
    }

    #[test]
    fn inb_27_the_value_is_cleaned_trimmed_and_cut() {
        assert_eq!(sanitize("\u{0}a\u{1f}b\u{7f}\n").as_deref(), Some("ab"));
        assert_eq!(sanitize(" \u{1} "), None);
        let long = "x".repeat(300);
        assert_eq!(sanitize(&long), Some("x".repeat(128)));
        assert_eq!(sanitize(&"é".repeat(200)).unwrap().chars().count(), 128);
    }

    #[test]
    fn inb_27_the_header_comes_first_then_the_protocol_property_then_a_new_uuid() {
        let id = CorrelationId::of_message(&headers(" from-header "), Some("from-amqp"));
        assert_eq!(id.as_str(), "from-header");
        let id = CorrelationId::of_message(&headers("\t"), Some("from-amqp"));
        assert_eq!(id.as_str(), "from-amqp");
        assert!(is_v4(&CorrelationId::of_message(&headers(" "), Some(" "))));
        assert!(is_v4(&CorrelationId::of_message(
            &ReceivedHeaders::new(),
            None
        )));
    }
}
