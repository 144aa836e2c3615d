//! A message whose data the database refuses (`StoreError::DataRejected`: on PostgreSQL a
//! `\u0000` in a JSON string or a NUL character in a text column): storing it again fails the
//! same way every time, so it is not an outage to wait out. An HTTP sender is told (422); a
//! broker message is stored `dead` instead, because a broker may be acknowledged only once the
//! message is durable (INB-54) and a message never acknowledged comes back for ever (a Kafka
//! partition stops at it, as INB-56 says of a body that is not JSON).

use queuebox_core::intake::StoredState;
use queuebox_store::NewInboxRow;
use serde_json::Value;

/// What the writer does with a row whose data the database refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenRefused {
    /// Answer `Refused(DataRejected)`: the sender learns that this message cannot be stored
    /// (an HTTP source answers 422), and nothing is stored.
    TellTheSender,
    /// Store the message `dead` with the characters the database cannot hold replaced
    /// ([`stored_dead`]), and answer with that row's outcome. When the database refuses that
    /// row too, the answer is `StorageFailed`: the broker is not acknowledged and delivers the
    /// message again, so it is never lost.
    StoreDead,
}

/// The start of `last_error` of a row stored dead by [`WhenRefused::StoreDead`].
pub const DATA_REFUSED_ERROR: &str = "The database refused the message's data";

/// What the database cannot hold in text or JSON strings, and what stands for it instead.
const NUL: char = '\0';
const REPLACEMENT: char = '\u{FFFD}';

/// The `dead` row stored for a message whose data the database refused with `reason` (already
/// redacted): the same id, source and attributes, every NUL character of its texts and of its
/// payload's and headers' JSON strings replaced by U+FFFD, and `last_error` saying so. The raw
/// body, when the source keeps it, stays as received (a byte column holds anything).
pub fn stored_dead(row: NewInboxRow, reason: &str) -> NewInboxRow {
    NewInboxRow {
        idempotency_key: without_nul(&row.idempotency_key),
        aggregate_id: row.aggregate_id.as_deref().map(without_nul),
        event_type: row.event_type.as_deref().map(without_nul),
        correlation_id: row.correlation_id.as_deref().map(without_nul),
        payload: json_without_nul(&row.payload),
        headers: json_without_nul(&row.headers),
        state: StoredState::Dead,
        last_error: Some(format!(
            "{DATA_REFUSED_ERROR} ({reason}); it was stored dead, with U+0000 replaced by U+FFFD."
        )),
        ..row
    }
}

fn without_nul(text: &str) -> String {
    text.replace(NUL, &REPLACEMENT.to_string())
}

/// `text` is JSON written by the pipeline, so it parses; were it not JSON, it is kept as the
/// text of `{"raw": …}`, as a body that is not JSON is (INB-56).
fn json_without_nul(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(mut value) => {
            replace_nul(&mut value);
            value.to_string()
        }
        Err(_) => serde_json::json!({ "raw": without_nul(text) }).to_string(),
    }
}

fn replace_nul(value: &mut Value) {
    match value {
        Value::String(text) if text.contains(NUL) => *text = without_nul(text),
        Value::Array(items) => items.iter_mut().for_each(replace_nul),
        Value::Object(map) if map.keys().any(|key| key.contains(NUL)) => {
            *map = std::mem::take(map)
                .into_iter()
                .map(|(key, mut item)| {
                    replace_nul(&mut item);
                    (without_nul(&key), item)
                })
                .collect();
        }
        Value::Object(map) => map.values_mut().for_each(replace_nul),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use queuebox_core::Consumption;
    use queuebox_store::Schedule;
    use uuid::Uuid;

    use super::*;

    #[test]
    fn every_nul_of_the_texts_and_of_the_json_strings_and_names_is_replaced() {
        let row = NewInboxRow {
            raw_body: Some(b"{\"a\":\"x\\u0000y\"}".to_vec()),
            id: Uuid::now_v7(),
            source: "orders".into(),
            idempotency_key: "k\0".into(),
            aggregate_id: Some("a\0".into()),
            event_type: None,
            payload: r#"{"a":"x\u0000y","n\u0000":[1,"\u0000"],"ok":true}"#.into(),
            headers: r#"{"h":"v\u0000"}"#.into(),
            consumption: Consumption::Push,
            correlation_id: Some("c\0".into()),
            schedule: Schedule::AfterReceipt {
                delay: Duration::ZERO,
            },
            state: StoredState::Pending,
            last_error: None,
        };
        let id = row.id;
        let dead = stored_dead(row, "unsupported Unicode escape sequence");
        assert_eq!(dead.id, id);
        assert_eq!(dead.state, StoredState::Dead);
        assert_eq!(dead.idempotency_key, "k\u{FFFD}");
        assert_eq!(dead.aggregate_id.as_deref(), Some("a\u{FFFD}"));
        assert_eq!(dead.correlation_id.as_deref(), Some("c\u{FFFD}"));
        let payload: Value = serde_json::from_str(&dead.payload).unwrap();
        assert_eq!(
            payload,
            serde_json::json!({"a": "x\u{FFFD}y", "n\u{FFFD}": [1, "\u{FFFD}"], "ok": true})
        );
        assert_eq!(dead.headers, r#"{"h":"v�"}"#);
        assert!(!dead.payload.contains("\\u0000") && !dead.headers.contains("\\u0000"));
        assert_eq!(
            dead.raw_body.as_deref(),
            Some(&b"{\"a\":\"x\\u0000y\"}"[..]),
            "the raw body stays as received"
        );
        assert_eq!(
            dead.last_error.as_deref(),
            Some(
                "The database refused the message's data (unsupported Unicode escape sequence); it was stored dead, with U+0000 replaced by U+FFFD."
            )
        );
    }
}
