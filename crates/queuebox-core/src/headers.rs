//! Header names and the received headers of one message (inbox.md §4.1): a name is an RFC 9110
//! token compared without regard to letter case; the received headers are what a source keeps
//! of a message, already converted to text by the connector (INB-25), as they are stored,
//! filtered on and looked up.

use std::collections::BTreeMap;
use std::fmt;

/// A header name: an RFC 9110 token, spelled as configured and compared without regard to
/// letter case.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HeaderName(String);

/// Why a text is not a header name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidHeaderName {
    Blank,
    /// A character outside the token set (letters, digits and ``!#$%&'*+-.^_`|~``).
    NotAToken,
}

impl HeaderName {
    pub fn parse(text: &str) -> Result<Self, InvalidHeaderName> {
        if text.trim().is_empty() {
            return Err(InvalidHeaderName::Blank);
        }
        let tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if !text.chars().all(tchar) {
            return Err(InvalidHeaderName::NotAToken);
        }
        Ok(Self(text.to_owned()))
    }

    /// A name written in QueueBox's own code (a default such as `X-Signature`).
    ///
    /// # Panics
    /// When `text` is not a token: a defect of the caller, found by its first test.
    pub fn known(text: &'static str) -> Self {
        match Self::parse(text) {
            Ok(name) => name,
            Err(_) => panic!("{text:?} is not a header name"),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn eq_ignore_case(&self, other: &str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl fmt::Display for HeaderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The headers a source keeps of one message: name → stored value (INB-22..25). An `http`
/// source stores names in lower case; a broker source stores them as received (INB-23).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReceivedHeaders(BTreeMap<String, String>);

impl ReceivedHeaders {
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps `value` under `name`; a name received again keeps its last value (INB-24).
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.0.insert(name.into(), value.into());
    }

    /// Looks a name up in any letter case (INB-23); the value is compared as stored. Of two
    /// stored names that differ only in case, the exact spelling wins, then the first in
    /// byte order.
    pub fn get(&self, name: &str) -> Option<&str> {
        if let Some(value) = self.0.get(name) {
            return Some(value);
        }
        self.0
            .iter()
            .find(|(stored, _)| stored.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// Removes every name equal to `name` in any letter case.
    pub fn remove(&mut self, name: &str) {
        self.0
            .retain(|stored, _| !stored.eq_ignore_ascii_case(name));
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `headers` column: one JSON object of name → string; `{}` when there are none.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "{}".to_owned())
    }
}

impl FromIterator<(String, String)> for ReceivedHeaders {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        let mut headers = Self::new();
        for (name, value) in pairs {
            headers.insert(name, value);
        }
        headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_are_tokens() {
        assert_eq!(HeaderName::parse(" "), Err(InvalidHeaderName::Blank));
        assert_eq!(
            HeaderName::parse("X Key"),
            Err(InvalidHeaderName::NotAToken)
        );
        let name = HeaderName::parse("X-Idempotency-Key").unwrap();
        assert!(name.eq_ignore_case("x-idempotency-key"));
        assert_eq!(name.to_string(), "X-Idempotency-Key");
    }

    #[test]
    fn inb_23_lookup_ignores_case_and_broker_names_keep_theirs() {
        let mut headers = ReceivedHeaders::new();
        headers.insert("X-Idempotency-Key", "k1");
        headers.insert("x-tenant", "acme");
        assert_eq!(headers.get("x-idempotency-key"), Some("k1"));
        assert_eq!(headers.get("X-TENANT"), Some("acme"));
        assert_eq!(headers.get("x-other"), None);
        assert_eq!(
            headers.to_json(),
            r#"{"X-Idempotency-Key":"k1","x-tenant":"acme"}"#
        );
    }

    #[test]
    fn inb_24_a_repeated_name_keeps_its_last_value_and_inb_22_none_is_an_empty_object() {
        let mut headers = ReceivedHeaders::new();
        assert_eq!(headers.to_json(), "{}");
        headers.insert("x-a", "first");
        headers.insert("x-a", "second");
        assert_eq!(headers.get("X-A"), Some("second"));
        headers.remove("X-a");
        assert!(headers.is_empty());
    }
}
