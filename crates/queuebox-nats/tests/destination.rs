//! The NATS destination against a real JetStream server, read back by the standard client
//! nats-py (destinations.md §7, §2.4, §3).

mod support;

use std::time::Duration;

use queuebox_core::{Destination, Outcome, OutgoingMessage};
use queuebox_nats::NatsDestination;
use support::{PrivateNats, TestStream, config, shared_url};
use uuid::Uuid;

fn destination(yaml_keys: &str) -> NatsDestination {
    let config = config(&format!(
        "destinations:\n  events:\n    type: nats\n{yaml_keys}"
    ));
    NatsDestination::from_config(&config.destinations["events"]).expect("a valid destination")
}

fn row(topic: &str, key: Option<&str>, headers: &[(&str, &str)], payload: &str) -> OutgoingMessage {
    OutgoingMessage {
        id: Uuid::now_v7(),
        topic: topic.to_owned(),
        key: key.map(str::to_owned),
        aggregate_type: None,
        attempt: 0,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        payload: payload.to_owned(),
        stored_payload: None,
    }
}

fn failure(outcome: Outcome) -> String {
    match outcome {
        Outcome::Failed { reason, .. } => reason,
        Outcome::Delivered => panic!("the publish was expected to fail"),
    }
}

/// DST-45, DST-11, DST-9, DST-8, DST-10, DST-7: the payload and the identity headers arrive
/// (x-message-key included), static and row headers by precedence, reserved and uncarriable
/// row headers left out.
#[tokio::test]
async fn dst_45_payload_and_identity_headers_arrive_as_nats_py_reads_them() {
    let stream = TestStream::create(&shared_url(), "dst45");
    let events = destination(&format!(
        "    servers: {}\n    subject: \"{}.{{{{ topic }}}}\"\n    headers:\n      X-Static: static\n      x-tenant: from-static\n",
        shared_url(),
        stream.prefix
    ));
    let with_key = row(
        "order.created",
        Some("o-1"),
        &[
            ("x-tenant", "acme"),
            ("X-Topic", "forged"),
            ("bad name", "dropped"),
            ("x-inbox-id", "in-1"),
        ],
        r#"{"id":"evt_1","total":12.5}"#,
    );
    let mut without_key = row("order.paid", None, &[], r#"{"id":"evt_2"}"#);
    without_key.attempt = 3;
    assert_eq!(events.publish(&with_key).await, Outcome::Delivered);
    assert_eq!(events.publish(&without_key).await, Outcome::Delivered);

    let stored = stream.messages();
    assert_eq!(stored.len(), 2, "{stored:?}");
    let first = &stored[0];
    assert_eq!(first["subject"], stream.subject("order.created"));
    assert_eq!(first["data"], with_key.payload);
    let headers = &first["headers"];
    assert_eq!(headers["x-message-id"], with_key.id.to_string());
    assert_eq!(
        headers["x-topic"], "order.created",
        "standard wins over the row"
    );
    assert_eq!(headers["x-attempt"], "0");
    assert_eq!(headers["x-message-key"], "o-1");
    assert_eq!(headers["x-tenant"], "acme", "the row wins over static");
    assert_eq!(headers["X-Static"], "static");
    assert_eq!(headers["x-inbox-id"], "in-1");
    assert!(headers.get("bad name").is_none(), "DST-10: {headers}");
    assert!(headers.get("X-Topic").is_none(), "DST-8: {headers}");

    let second = &stored[1];
    assert_eq!(second["subject"], stream.subject("order.paid"));
    assert_eq!(second["headers"]["x-attempt"], "3");
    assert!(
        second["headers"].get("x-message-key").is_none(),
        "no key, no x-message-key: {}",
        second["headers"]
    );
}

/// DST-17, DST-13: a payload path in the subject template; DST-19, DST-20: `subjectFrom` reads
/// the column verbatim, and an empty column fails without publishing.
#[tokio::test]
async fn dst_17_dst_20_subject_templates_and_subject_from_columns() {
    let stream = TestStream::create(&shared_url(), "dst17");
    let by_region = destination(&format!(
        "    servers: {}\n    subject: \"{}.{{{{ payload.region }}}}\"\n",
        shared_url(),
        stream.prefix
    ));
    let by_key = destination(&format!(
        "    servers: {}\n    subjectFrom: key\n    subject: ignored.when.subjectFrom.is.set\n",
        shared_url()
    ));
    assert_eq!(
        by_region
            .publish(&row("t", None, &[], r#"{"region":"eu"}"#))
            .await,
        Outcome::Delivered
    );
    let keyed = row("t", Some(&stream.subject("by.key")), &[], "{}");
    assert_eq!(by_key.publish(&keyed).await, Outcome::Delivered);
    let unkeyed = row("t", None, &[], "{}");
    assert_eq!(
        failure(by_key.publish(&unkeyed).await),
        "Destination 'events' read an empty subject from column 'key'. QueueBox does not publish the message."
    );
    let no_region = row("t", None, &[], "{}");
    assert!(
        failure(by_region.publish(&no_region).await)
            .contains(&format!("rendered an invalid subject '{}.'", stream.prefix)),
        "DST-44: the missing value renders empty and leaves a trailing dot"
    );
    let subjects: Vec<String> = stream
        .messages()
        .iter()
        .map(|m| m["subject"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(subjects, [stream.subject("eu"), stream.subject("by.key")]);
}

/// DST-44: an invalid subject fails with its text and publishes nothing.
#[tokio::test]
async fn dst_44_an_invalid_subject_fails_and_publishes_nothing() {
    let stream = TestStream::create(&shared_url(), "dst44");
    let events = destination(&format!(
        "    servers: {}\n    subject: \"{}.{{{{ topic }}}}\"\n",
        shared_url(),
        stream.prefix
    ));
    for topic in ["order created", "a..b", "orders.*", "orders.>"] {
        let reason = failure(events.publish(&row(topic, None, &[], "{}")).await);
        assert_eq!(
            reason,
            format!(
                "Destination 'events' rendered an invalid subject '{}.{topic}'. QueueBox does not publish the message.",
                stream.prefix
            )
        );
    }
    assert!(stream.messages().is_empty());
}

/// DST-46, DST-49: a JetStream publish to a subject that no stream stores fails; so does a
/// server that does not answer in time. Neither is ever reported as delivered.
#[tokio::test]
async fn dst_46_a_subject_with_no_stream_fails() {
    let events = destination(&format!(
        "    servers: {}\n    subject: qbt.no.stream.{}\n    timeoutMs: 2000\n",
        shared_url(),
        std::process::id()
    ));
    let reason = failure(events.publish(&row("t", None, &[], "{}")).await);
    assert!(
        reason.starts_with("The publish to 'events' failed. Reason: "),
        "{reason}"
    );
    assert!(reason.contains("no JetStream stream"), "{reason}");
}

/// DST-48: a row's `Nats-Msg-Id` is sent as it is, and JetStream deduplicates on it inside the
/// stream's window; the duplicate acknowledgement still counts as delivered (DST-46).
#[tokio::test]
async fn dst_48_nats_msg_id_deduplicates_inside_the_window() {
    let stream = TestStream::create(&shared_url(), "dst48");
    let events = destination(&format!(
        "    servers: {}\n    subject: {}\n",
        shared_url(),
        stream.subject("dedup")
    ));
    let msg_id = format!("evt-{}", Uuid::now_v7());
    let first = row("t", None, &[("Nats-Msg-Id", &msg_id)], r#"{"n":1}"#);
    let second = row("t", None, &[("Nats-Msg-Id", &msg_id)], r#"{"n":2}"#);
    assert_eq!(events.publish(&first).await, Outcome::Delivered);
    assert_eq!(events.publish(&second).await, Outcome::Delivered);
    let stored = stream.messages();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0]["headers"]["Nats-Msg-Id"], msg_id);
    assert_eq!(stored[0]["data"], r#"{"n":1}"#);
}

/// DST-47: with `jetStream: false` the publish is core NATS and succeeds after the flush, even
/// when nothing listens; a stream that captures the subject shows what was sent.
#[tokio::test]
async fn dst_47_core_nats_publishes_and_flushes() {
    let stream = TestStream::create(&shared_url(), "dst47");
    let captured = destination(&format!(
        "    servers: {}\n    subject: {}\n    jetStream: false\n",
        shared_url(),
        stream.subject("core")
    ));
    let unheard = destination(&format!(
        "    servers: {}\n    subject: qbt.nobody.listens.{}\n    jetStream: false\n",
        shared_url(),
        std::process::id()
    ));
    let message = row("t", Some("k"), &[("x-a", "1")], r#"{"core":true}"#);
    assert_eq!(captured.publish(&message).await, Outcome::Delivered);
    assert_eq!(unheard.publish(&message).await, Outcome::Delivered);
    let stored = stream.messages();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["data"], r#"{"core":true}"#);
    assert_eq!(stored[0]["headers"]["x-message-key"], "k");
    assert_eq!(stored[0]["headers"]["x-a"], "1");
}

/// DST-2, DST-43: a server that is down fails the publish (no acknowledgement in time), and
/// the destination reconnects by itself when the server is back: the next publish is stored.
#[tokio::test]
async fn dst_43_the_destination_reconnects_after_an_outage() {
    let mut server = PrivateNats::start();
    let stream = TestStream::create(&server.url(), "dst43");
    let events = destination(&format!(
        "    servers: {}\n    subject: {}\n    timeoutMs: 1500\n",
        server.url(),
        stream.subject("x")
    ));
    assert_eq!(
        events.publish(&row("t", None, &[], r#"{"n":1}"#)).await,
        Outcome::Delivered
    );
    server.halt();
    let reason = failure(events.publish(&row("t", None, &[], r#"{"n":2}"#)).await);
    assert!(
        reason.starts_with("The publish to 'events' failed."),
        "{reason}"
    );
    server.resume();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let outcome = events.publish(&row("t", None, &[], r#"{"n":3}"#)).await;
        if outcome == Outcome::Delivered {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no reconnect: {outcome:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let data: Vec<String> = stream
        .messages()
        .iter()
        .map(|m| m["data"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(data.first().map(String::as_str), Some(r#"{"n":1}"#));
    assert_eq!(data.last().map(String::as_str), Some(r#"{"n":3}"#));
    events.close().await;
}

/// DST-8, DST-10: the loader refuses a reserved or uncarriable static header already; the
/// destination checks again when it is built from any other `Destination` value, naming the key
/// and never the value.
#[test]
fn dst_10_a_static_header_nats_cannot_carry_stops_the_start() {
    let mut events = config(
        "destinations:\n  events:\n    type: nats\n    servers: nats://127.0.0.1:4222\n    subject: a\n",
    )
    .destinations["events"]
    .clone();
    events.headers = vec![(
        queuebox_config::HeaderName::parse("x-note").unwrap(),
        queuebox_core::Secret::new("hunter2\nsecond line"),
    )];
    let err = NatsDestination::from_config(&events)
        .err()
        .expect("a value with a line break is refused");
    assert_eq!(
        err.to_string(),
        "destinations.events.headers: the header 'x-note' cannot be sent on NATS: a NATS header value has no CR or LF"
    );
    events.headers = vec![(
        queuebox_config::HeaderName::parse("X-Message-Key").unwrap(),
        queuebox_core::Secret::new("k"),
    )];
    let err = NatsDestination::from_config(&events)
        .err()
        .expect("a reserved name is refused");
    assert_eq!(
        err.to_string(),
        "destinations.events.headers: 'X-Message-Key' is a reserved header name; only QueueBox sets it"
    );
}
