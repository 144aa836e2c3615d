//! The message a handler receives (pull.md §8, PULL-54/55). It never carries the claim token.

use std::collections::BTreeMap;
use std::time::SystemTime;

use uuid::Uuid;

/// One claimed inbox row, as the handler sees it. Identity is `(source, idempotency_key)`.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxMessage {
    pub id: Uuid,
    pub source: String,
    pub idempotency_key: String,
    pub aggregate_id: Option<String>,
    pub event_type: Option<String>,
    /// The stored JSON value, whatever its kind (JSON `null` included).
    pub payload: serde_json::Value,
    /// Failed deliveries so far; 0 on the first delivery.
    pub attempt: i32,
    pub correlation_id: Option<String>,
    /// Never null: no headers give an empty map.
    pub headers: BTreeMap<String, String>,
    pub created_at: SystemTime,
}

/// `headers` of PULL-55: an object of strings; a non-string value becomes its JSON text;
/// anything else (NULL, not an object) gives an empty map.
pub(crate) fn headers_from_json(value: Option<serde_json::Value>) -> BTreeMap<String, String> {
    match value {
        Some(serde_json::Value::Object(map)) => map
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => (k, s),
                other => (k, other.to_string()),
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}
