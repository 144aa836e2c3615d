//! AMQP headers both ways: the received headers table converted to text as INB-25 says, and
//! the headers table of a published message assembled from the row, the destination's static
//! headers and QueueBox's own (DST-8, DST-9, DST-11).

use base64::Engine;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use queuebox_core::outgoing_headers::{Groups, assemble, is_reserved};
use queuebox_core::{ReceivedHeaders, Secret};

use crate::error::AmqpConfigError;

const X_TOPIC: &str = "x-topic";
const X_ATTEMPT: &str = "x-attempt";

/// The longest AMQP field name (a short string).
const MAX_NAME_BYTES: usize = 255;

/// INB-25 for `rabbitmq`: every entry of the table as text; `void` entries are dropped.
/// Names are kept as received (INB-23); a name received twice keeps its last value (INB-24).
pub(crate) fn received(table: Option<&FieldTable>) -> ReceivedHeaders {
    let mut headers = ReceivedHeaders::new();
    for (name, value) in table.into_iter().flat_map(|t| t.inner()) {
        if let Some(text) = value_text(value) {
            headers.insert(name.as_str(), text);
        }
    }
    headers
}

/// One header value as stored text; `None` for `void`.
fn value_text(value: &AMQPValue) -> Option<String> {
    Some(match value {
        AMQPValue::Void => return None,
        AMQPValue::LongString(s) => bytes_text(s.as_bytes()),
        AMQPValue::ShortString(s) => s.as_str().to_owned(),
        AMQPValue::ByteArray(b) => bytes_text(b.as_slice()),
        AMQPValue::Timestamp(seconds) => iso8601_utc(*seconds),
        AMQPValue::FieldTable(_) | AMQPValue::FieldArray(_) => value_json(value).to_string(),
        scalar => match value_json(scalar) {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        },
    })
}

/// A value as JSON, for the compact JSON text of a nested table or array.
fn value_json(value: &AMQPValue) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        AMQPValue::Void => J::Null,
        AMQPValue::Boolean(b) => J::Bool(*b),
        AMQPValue::ShortShortInt(n) => J::from(*n),
        AMQPValue::ShortShortUInt(n) => J::from(*n),
        AMQPValue::ShortInt(n) => J::from(*n),
        AMQPValue::ShortUInt(n) => J::from(*n),
        AMQPValue::LongInt(n) => J::from(*n),
        AMQPValue::LongUInt(n) => J::from(*n),
        AMQPValue::LongLongInt(n) => J::from(*n),
        // A float's plain text form (INB-25): `1.5`, not `1.5e0`; NaN and infinities have no
        // JSON number, so they keep Rust's text.
        AMQPValue::Float(f) => float_json(f64::from(*f), &f.to_string()),
        AMQPValue::Double(f) => float_json(*f, &f.to_string()),
        AMQPValue::DecimalValue(d) => J::String(decimal_text(d.value, d.scale)),
        AMQPValue::ShortString(s) => J::String(s.as_str().to_owned()),
        AMQPValue::LongString(s) => J::String(bytes_text(s.as_bytes())),
        AMQPValue::ByteArray(b) => J::String(bytes_text(b.as_slice())),
        AMQPValue::Timestamp(seconds) => J::String(iso8601_utc(*seconds)),
        AMQPValue::FieldArray(items) => J::Array(items.as_slice().iter().map(value_json).collect()),
        AMQPValue::FieldTable(table) => J::Object(
            table
                .inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), value_json(v)))
                .collect(),
        ),
    }
}

fn float_json(value: f64, text: &str) -> serde_json::Value {
    serde_json::Number::from_f64(value)
        .map(serde_json::Value::Number)
        .unwrap_or_else(|| serde_json::Value::String(text.to_owned()))
}

/// An AMQP decimal (`value` × 10^-`scale`) in plain notation: `12345` with scale 2 is `123.45`.
fn decimal_text(value: u32, scale: u8) -> String {
    let digits = value.to_string();
    let scale = usize::from(scale);
    if scale == 0 {
        return digits;
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    format!("{whole}.{fraction}")
}

/// The text when valid UTF-8, else `base64:` + standard Base64 (INB-25).
fn bytes_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => format!(
            "base64:{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        ),
    }
}

/// An AMQP timestamp (seconds since 1970, UTC) as `2026-09-21T10:00:00Z`.
pub(crate) fn iso8601_utc(seconds: u64) -> String {
    let days = seconds / 86_400;
    let rest = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Why AMQP cannot carry a header name, if it cannot: a field name is a short string.
fn uncarriable(name: &str) -> Option<&'static str> {
    (name.len() > MAX_NAME_BYTES).then_some("the name is longer than 255 bytes")
}

/// DST-8 and DST-10 at start: a static header with a reserved name, or one AMQP cannot carry,
/// stops the start.
pub(crate) fn check_static(
    destination: &str,
    statics: &[(String, Secret)],
) -> Result<(), AmqpConfigError> {
    for (name, _) in statics {
        if is_reserved(name, &[]) {
            return Err(AmqpConfigError::ReservedHeader {
                destination: destination.to_owned(),
                header: name.clone(),
            });
        }
        if let Some(reason) = uncarriable(name) {
            return Err(AmqpConfigError::InvalidHeader {
                destination: destination.to_owned(),
                header: name.clone(),
                reason,
            });
        }
    }
    Ok(())
}

/// The headers table of one published message, and the row headers left out.
#[derive(Debug, Default)]
pub(crate) struct Outgoing {
    pub table: FieldTable,
    /// Row headers with a reserved name (DST-8): logged at debug.
    pub reserved_dropped: Vec<String>,
    /// Row headers AMQP cannot carry (DST-10): one warning per delivery.
    pub uncarriable_dropped: Vec<String>,
}

/// DST-9 and DST-11 for `rabbitmq`, by the precedence every destination kind shares
/// (`queuebox_core::outgoing_headers`): `x-topic` (string) and `x-attempt` (32-bit signed
/// integer) first and always; then the row's headers; then the static ones. Per name, in any
/// letter case, the first group that has it wins, with its spelling. Other values are strings.
pub(crate) fn outgoing(
    topic: &str,
    attempt: i32,
    row: &[(String, String)],
    statics: &[(String, Secret)],
) -> Outgoing {
    let assembled = assemble(
        Groups {
            standard: vec![
                (X_TOPIC.to_owned(), topic.to_owned()),
                (X_ATTEMPT.to_owned(), attempt.to_string()),
            ],
            row,
            auth: None,
            statics,
        },
        &[],
        |name, _| uncarriable(name).is_none(),
    );
    let mut table = FieldTable::default();
    for (name, value) in assembled.headers {
        // Only the standard group can spell `x-attempt` so: a row header of that name is
        // reserved (dropped above), a static one stopped the start.
        let value = if name == X_ATTEMPT {
            AMQPValue::LongInt(attempt)
        } else {
            AMQPValue::LongString(LongString::from(value))
        };
        table.insert(ShortString::from(name), value);
    }
    Outgoing {
        table,
        reserved_dropped: assembled.reserved_dropped,
        uncarriable_dropped: assembled.uncarriable_dropped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{ByteArray, DecimalValue, FieldArray};

    fn table(entries: Vec<(&str, AMQPValue)>) -> FieldTable {
        let mut table = FieldTable::default();
        for (name, value) in entries {
            table.insert(ShortString::from(name), value);
        }
        table
    }

    #[test]
    fn inb_25_every_amqp_value_kind_becomes_its_stored_text() {
        let mut nested = FieldTable::default();
        nested.insert("a".into(), AMQPValue::LongInt(1));
        let received = received(Some(&table(vec![
            ("s", AMQPValue::LongString("text".into())),
            ("short", AMQPValue::ShortString("short".into())),
            ("i", AMQPValue::LongLongInt(42)),
            ("u8", AMQPValue::ShortShortUInt(7)),
            ("f", AMQPValue::Double(1.5)),
            ("f32", AMQPValue::Float(0.25)),
            ("whole", AMQPValue::Double(2.0)),
            (
                "dec",
                AMQPValue::DecimalValue(DecimalValue {
                    scale: 2,
                    value: 12345,
                }),
            ),
            (
                "dec-small",
                AMQPValue::DecimalValue(DecimalValue { scale: 3, value: 5 }),
            ),
            ("b", AMQPValue::Boolean(true)),
            ("ts", AMQPValue::Timestamp(1_789_984_800)),
            ("nested", AMQPValue::FieldTable(nested)),
            (
                "list",
                AMQPValue::FieldArray(FieldArray::from(vec![
                    AMQPValue::LongInt(1),
                    AMQPValue::LongString("x".into()),
                    AMQPValue::Void,
                ])),
            ),
            (
                "bytes-utf8",
                AMQPValue::ByteArray(ByteArray::from(b"ok".as_slice())),
            ),
            (
                "bytes",
                AMQPValue::ByteArray(ByteArray::from(vec![0xff, 0x00])),
            ),
            ("long-bytes", AMQPValue::LongString(vec![0xc3, 0x28].into())),
            ("void", AMQPValue::Void),
        ])));
        let get = |name: &str| received.get(name).map(str::to_owned);
        assert_eq!(get("s").as_deref(), Some("text"));
        assert_eq!(get("short").as_deref(), Some("short"));
        assert_eq!(get("i").as_deref(), Some("42"));
        assert_eq!(get("u8").as_deref(), Some("7"));
        assert_eq!(get("f").as_deref(), Some("1.5"));
        assert_eq!(get("f32").as_deref(), Some("0.25"));
        assert_eq!(get("whole").as_deref(), Some("2.0"));
        assert_eq!(get("dec").as_deref(), Some("123.45"));
        assert_eq!(get("dec-small").as_deref(), Some("0.005"));
        assert_eq!(get("b").as_deref(), Some("true"));
        assert_eq!(get("ts").as_deref(), Some("2026-09-21T10:00:00Z"));
        assert_eq!(get("nested").as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(get("list").as_deref(), Some(r#"[1,"x",null]"#));
        assert_eq!(get("bytes-utf8").as_deref(), Some("ok"));
        assert_eq!(get("bytes").as_deref(), Some("base64:/wA="));
        assert_eq!(get("long-bytes").as_deref(), Some("base64:wyg="));
        assert_eq!(get("void"), None, "a void value is dropped");
    }

    #[test]
    fn inb_23_broker_names_keep_their_spelling_and_inb_22_none_is_empty() {
        let received = received(Some(&table(vec![(
            "X-Tenant",
            AMQPValue::LongString("acme".into()),
        )])));
        assert_eq!(received.to_json(), r#"{"X-Tenant":"acme"}"#);
        assert_eq!(super::received(None).to_json(), "{}");
    }

    #[test]
    fn timestamps_are_utc_instants() {
        assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601_utc(1_789_984_800 + 59), "2026-09-21T10:00:59Z");
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn dst_9_dst_11_standard_then_row_then_static_with_the_winning_spelling() {
        let row = pairs(&[
            ("X-Topic", "forged"),
            ("x-message-id", "forged"),
            ("X-Tenant", "row"),
        ]);
        let statics = vec![
            ("x-tenant".to_owned(), Secret::new("static")),
            ("X-Static".to_owned(), Secret::new("s")),
        ];
        let out = outgoing("order.created", 3, &row, &statics);
        let inner = out.table.inner();
        assert_eq!(
            inner.get("x-topic"),
            Some(&AMQPValue::LongString("order.created".into()))
        );
        assert_eq!(inner.get("x-attempt"), Some(&AMQPValue::LongInt(3)));
        assert_eq!(
            inner.get("X-Tenant"),
            Some(&AMQPValue::LongString("row".into()))
        );
        assert!(!inner.contains_key("x-tenant"), "each name is sent once");
        assert_eq!(
            inner.get("X-Static"),
            Some(&AMQPValue::LongString("s".into()))
        );
        assert!(
            !inner.contains_key("x-message-id"),
            "DST-11: a property, not a header"
        );
        assert_eq!(out.reserved_dropped, vec!["X-Topic", "x-message-id"]);
        assert_eq!(inner.len(), 4);
    }

    #[test]
    fn dst_10_a_row_header_amqp_cannot_carry_is_left_out_and_named() {
        let long = "n".repeat(256);
        let row = vec![
            (long.clone(), "v".to_owned()),
            ("ok".to_owned(), "v".to_owned()),
        ];
        let out = outgoing("t", 0, &row, &[]);
        assert_eq!(out.uncarriable_dropped, vec![long]);
        assert!(out.table.contains_key("ok"));
    }

    #[test]
    fn dst_8_a_reserved_static_header_stops_the_start() {
        let err =
            check_static("events", &[("X-Attempt".to_owned(), Secret::new("1"))]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "destinations.events.headers: 'X-Attempt' is a reserved header name; only QueueBox sets it"
        );
        let long = "h".repeat(300);
        assert!(check_static("events", &[(long, Secret::new("v"))]).is_err());
        assert!(check_static("events", &[("X-Team".to_owned(), Secret::new("v"))]).is_ok());
    }
}
