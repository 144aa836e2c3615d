//! A Kafka record as the intake receives it (inbox.md §4.1, INB-35, INB-67): header values as
//! text when they are UTF-8, else `base64:` + Base64, null header values dropped, the last value
//! of a repeated name kept (INB-24, INB-25); the record key as the protocol id; a tombstone (a
//! null value) as an empty body, which is not JSON (INB-56 applies); the record's timestamp as
//! the broker's time.

use base64::Engine as _;
use queuebox_core::intake::ProtocolAttributes;
use queuebox_core::{ReceivedHeaders, ReceivedMessage, SourceName};
use rdkafka::Message;
use rdkafka::message::Headers;

/// INB-25 for `kafka`, and INB-35 for the record key: UTF-8 text as it is, other bytes as
/// `base64:` + standard Base64.
pub fn text_or_base64(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => format!(
            "base64:{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        ),
    }
}

/// Builds what the intake receives from one record.
pub fn received_message(source: &SourceName, record: &impl Message) -> ReceivedMessage {
    let mut headers = ReceivedHeaders::new();
    if let Some(received) = record.headers() {
        for header in received.iter() {
            // INB-25: a null value is dropped; a later value of the same name wins (INB-24).
            if let Some(value) = header.value {
                headers.insert(header.key, text_or_base64(value));
            }
        }
    }
    ReceivedMessage {
        source: source.clone(),
        headers,
        // INB-67: a tombstone has an empty body.
        body: record.payload().map(<[u8]>::to_vec).unwrap_or_default(),
        protocol: ProtocolAttributes {
            message_id: record.key().map(text_or_base64),
            correlation_id: None,
            published_at_ms: record.timestamp().to_millis(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::message::{Header, OwnedHeaders, OwnedMessage, Timestamp};

    fn record(key: Option<&[u8]>, value: Option<&[u8]>, headers: OwnedHeaders) -> OwnedMessage {
        OwnedMessage::new(
            value.map(<[u8]>::to_vec),
            key.map(<[u8]>::to_vec),
            "t".into(),
            Timestamp::CreateTime(1_700_000_000_123),
            0,
            7,
            Some(headers),
        )
    }

    #[test]
    fn inb_25_inb_35_headers_and_key_become_text_or_base64_and_null_values_are_dropped() {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "X-Tenant",
                value: Some("first"),
            })
            .insert(Header {
                key: "X-Tenant",
                value: Some("last"),
            })
            .insert(Header {
                key: "bin",
                value: Some(&[0xff_u8, 0x00][..]),
            })
            .insert::<[u8]>(Header {
                key: "gone",
                value: None,
            });
        let message = received_message(
            &SourceName::new("orders"),
            &record(Some(&[0xc3, 0x28]), Some(b"{}"), headers),
        );
        assert_eq!(message.headers.get("x-tenant"), Some("last"), "INB-24");
        assert!(
            message.headers.iter().any(|(n, _)| n == "X-Tenant"),
            "INB-23: as received"
        );
        assert_eq!(message.headers.get("bin"), Some("base64:/wA="));
        assert_eq!(message.headers.get("gone"), None);
        assert_eq!(message.protocol.message_id.as_deref(), Some("base64:wyg="));
        assert_eq!(message.protocol.published_at_ms, Some(1_700_000_000_123));
        assert_eq!(message.body, b"{}");
    }

    #[test]
    fn inb_67_a_tombstone_is_an_empty_body_and_a_text_key_stays_text() {
        let message = received_message(
            &SourceName::new("orders"),
            &record(Some(b"order-7"), None, OwnedHeaders::new()),
        );
        assert!(message.body.is_empty());
        assert_eq!(message.protocol.message_id.as_deref(), Some("order-7"));
        assert!(message.headers.is_empty());
    }
}
