//! A JetStream message as the intake receives it (inbox.md §4.1, INB-35): the headers with the
//! last value of each name (INB-25), names as received (INB-23), the `Nats-Msg-Id` header as
//! the protocol's message id, and the time the stream stored the message.

use async_nats::HeaderMap;
use queuebox_core::intake::ProtocolAttributes;
use queuebox_core::{ReceivedHeaders, ReceivedMessage, SourceName};

/// The protocol id of a NATS message (INB-35): JetStream's own deduplication header.
pub const MSG_ID_HEADER: &str = "Nats-Msg-Id";

/// Builds what the intake receives. `published_at_ms` is the stream's time of the message.
pub fn received_message(
    source: &SourceName,
    headers: Option<&HeaderMap>,
    body: &[u8],
    published_at_ms: Option<i64>,
) -> ReceivedMessage {
    let headers = received_headers(headers);
    let message_id = headers.get(MSG_ID_HEADER).map(str::to_owned);
    ReceivedMessage {
        source: source.clone(),
        headers,
        body: body.to_vec(),
        protocol: ProtocolAttributes {
            message_id,
            correlation_id: None,
            published_at_ms,
        },
    }
}

/// INB-25 for `nats`: a header with several values keeps the last one.
fn received_headers(headers: Option<&HeaderMap>) -> ReceivedHeaders {
    let mut received = ReceivedHeaders::new();
    for (name, values) in headers.into_iter().flat_map(HeaderMap::iter) {
        if let Some(last) = values.last() {
            received.insert(name.as_ref() as &str, last.as_str());
        }
    }
    received
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inb_25_the_last_value_of_a_repeated_header_is_kept_and_names_stay_as_received() {
        let mut headers = HeaderMap::new();
        headers.append("X-Tenant", "first");
        headers.append("X-Tenant", "last");
        headers.insert("Nats-Msg-Id", "evt-9");
        let message = received_message(&SourceName::new("jobs"), Some(&headers), b"{}", Some(7));
        assert_eq!(message.headers.get("x-tenant"), Some("last"));
        assert!(
            message.headers.iter().any(|(name, _)| name == "X-Tenant"),
            "INB-23"
        );
        assert_eq!(
            message.protocol.message_id.as_deref(),
            Some("evt-9"),
            "INB-35"
        );
        assert_eq!(message.protocol.published_at_ms, Some(7));
    }

    #[test]
    fn a_message_without_headers_stores_none() {
        let message = received_message(&SourceName::new("jobs"), None, b"x", None);
        assert_eq!(message.headers, ReceivedHeaders::new());
        assert_eq!(message.protocol.message_id, None);
    }
}
