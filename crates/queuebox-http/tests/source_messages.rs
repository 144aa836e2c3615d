//! What an HTTP source stores, over real HTTP (inbox.md INB-21..51): the kept headers, the
//! header filter, the idempotency key / aggregate id / event type chains with INB-37
//! normalization, `scheduled_at`, and the row itself.

mod source_support;

use std::time::Duration;

use queuebox_config::SignaturePayloadFormat;
use queuebox_config::{Consumption, FilterRule, FilterTest, HmacAlgorithm, HmacAuth, InboundAuth};
use queuebox_core::Secret;
use queuebox_core::glob::TopicGlob;
use queuebox_store::Schedule;
use serde_json::{Value, json};
use source_support::*;

fn stored_headers(h: &Harness) -> serde_json::Map<String, Value> {
    match serde_json::from_str(&h.sink.only_row().headers).unwrap() {
        Value::Object(map) => map,
        other => panic!("headers are an object: {other}"),
    }
}

fn rule(name: &str, test: FilterTest) -> FilterRule {
    FilterRule {
        header: header(name),
        test,
    }
}

#[tokio::test]
async fn inb_21_credential_headers_are_never_stored() {
    let api = with_auth(
        source("api"),
        InboundAuth::ApiKey {
            key: Secret::new("k"),
            header_name: header("X-Api-Token"),
        },
    );
    let h = serve(vec![api]).await;
    let reply = post("/inbox/api", r#"{"id":"1"}"#)
        .header("x-api-token", "k")
        .header("Authorization", "Bearer secret-1")
        .header("Proxy-Authorization", "Basic c2VjcmV0")
        .header("Cookie", "session=secret-2")
        .header("X-Kept", "yes")
        .send(h.addr)
        .await;
    assert_eq!(reply.status, 202);
    let headers = stored_headers(&h);
    for name in [
        "x-api-token",
        "authorization",
        "proxy-authorization",
        "cookie",
    ] {
        assert!(!headers.contains_key(name), "{name} must not be stored");
    }
    assert_eq!(headers["x-kept"], "yes");
    let text = h.sink.only_row().headers;
    for secret in ["secret-1", "c2VjcmV0", "secret-2"] {
        assert!(!text.contains(secret));
    }
}

#[tokio::test]
async fn inb_21_the_hmac_signature_header_is_not_stored() {
    let auth = HmacAuth {
        secrets: vec![Secret::new("s")],
        header_name: header("X-Hub-Signature-256"),
        algorithm: HmacAlgorithm::HmacSha256,
        signature_prefix: String::new(),
        timestamp_header: None,
        timestamp_tolerance_ms: 300_000,
        payload_format: SignaturePayloadFormat::Body,
    };
    let h = serve(vec![with_auth(source("gh"), InboundAuth::Hmac(auth))]).await;
    let body = r#"{"id":"1"}"#;
    use hmac::Mac;
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(b"s").unwrap();
    mac.update(body.as_bytes());
    let signature = hex::encode(mac.finalize().into_bytes());
    let reply = post("/inbox/gh", body)
        .header("X-HUB-SIGNATURE-256", &signature)
        .send(h.addr)
        .await;
    assert_eq!(reply.status, 202);
    assert!(!stored_headers(&h).contains_key("x-hub-signature-256"));
}

#[tokio::test]
async fn inb_23_to_25_lower_case_names_last_value_and_base64_for_non_utf8() {
    let h = serve(vec![source("s")]).await;
    let reply = post("/inbox/s", r#"{"id":"1"}"#)
        .header("X-Mixed-Case", "Value Kept As Is")
        .header("X-Repeated", "first")
        .header("x-repeated", "second")
        .header("X-Latin1", [b'c', b'a', b'f', 0xe9])
        .header("X-Utf8", "café")
        .send(h.addr)
        .await;
    assert_eq!(reply.status, 202);
    let headers = stored_headers(&h);
    assert!(headers.keys().all(|k| *k == k.to_ascii_lowercase()));
    assert_eq!(headers["x-mixed-case"], "Value Kept As Is");
    assert_eq!(headers["x-repeated"], "second");
    assert_eq!(headers["x-latin1"], "base64:Y2Fm6Q==");
    assert_eq!(headers["x-utf8"], "café");
    // Every other received header is kept, the transport ones included.
    assert_eq!(headers["host"], "test");
    assert_eq!(headers["content-length"], "10");
}

#[tokio::test]
async fn inb_30_require_equals_with_another_value_is_filtered_without_a_row() {
    let mut s = source("s");
    s.filter.require = vec![rule("X-Tenant", FilterTest::Equals("acme".into()))];
    let h = serve(vec![s]).await;
    for value in ["other", "ACME", " acme-x"] {
        let reply = post("/inbox/s", r#"{"id":"1"}"#)
            .header("x-tenant", value)
            .send(h.addr)
            .await;
        assert_eq!(reply.answer(), (202, r#"{"status":"filtered"}"#.to_owned()));
    }
    // Filtered before the JSON parse: a broken body is filtered too, not 400.
    let reply = post("/inbox/s", "not json").send(h.addr).await;
    assert_eq!(reply.answer(), (202, r#"{"status":"filtered"}"#.to_owned()));
    assert!(h.sink.rows().is_empty());
    assert_eq!(h.metrics.inbox_filtered("s").get(), 4);
    let passes = post("/inbox/s", r#"{"id":"1"}"#)
        .header("X-TENANT", "acme")
        .send(h.addr)
        .await;
    assert_eq!(passes.status, 202);
    assert_eq!(h.sink.rows().len(), 1);
}

#[tokio::test]
async fn inb_29_missing_header_require_blocks_exclude_passes() {
    let mut required = source("required");
    required.filter.require = vec![rule("X-Env", FilterTest::In(vec!["prod".into()]))];
    let mut excluded = source("excluded");
    excluded.filter.exclude = vec![
        rule("X-Env", FilterTest::Equals("test".into())),
        rule(
            "X-Topic",
            FilterTest::Matches(TopicGlob::parse("internal.**").unwrap()),
        ),
    ];
    let h = serve(vec![required, excluded]).await;
    let send = |path: &'static str, headers: Vec<(&'static str, &'static str)>| {
        let mut request = post(path, r#"{"id":"1"}"#);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move { request.send(h.addr).await.body }
    };
    let filtered = r#"{"status":"filtered"}"#;
    assert_eq!(send("/inbox/required", vec![]).await, filtered);
    assert_ne!(send("/inbox/excluded", vec![]).await, filtered);
    assert_eq!(
        send("/inbox/excluded", vec![("X-Topic", "internal.a.b")]).await,
        filtered
    );
    assert_eq!(
        send("/inbox/excluded", vec![("x-env", "test")]).await,
        filtered
    );
    assert_ne!(
        send("/inbox/required", vec![("X-ENV", "prod")]).await,
        filtered
    );
    assert_eq!(h.metrics.inbox_filtered("required").get(), 1);
    assert_eq!(h.metrics.inbox_filtered("excluded").get(), 2);
}

#[tokio::test]
async fn inb_31_key_header_wins_over_path_in_any_letter_case() {
    let mut s = source("s");
    http(&mut s).idempotency_key_header = Some(header("X-Idempotency-Key"));
    s.idempotency_key_path = paths(&["$.id"]);
    let h = serve(vec![s]).await;
    let reply = post("/inbox/s", r#"{"id":"from-body"}"#)
        .header("x-idempotency-key", "  from-header ")
        .send(h.addr)
        .await;
    assert_eq!(reply.status, 202);
    assert_eq!(h.sink.only_row().idempotency_key, "from-header");
    // An all-space header falls through to the path.
    let reply = post("/inbox/s", r#"{"id":"from-body"}"#)
        .header("X-IDEMPOTENCY-KEY", "   ")
        .send(h.addr)
        .await;
    assert_eq!(reply.status, 202);
    assert_eq!(h.sink.rows()[1].idempotency_key, "from-body");
}

#[tokio::test]
async fn inb_37_all_space_header_without_fallback_is_400() {
    let mut s = source("s");
    http(&mut s).idempotency_key_header = Some(header("X-Key"));
    s.idempotency_key_path = Vec::new();
    let h = serve(vec![s]).await;
    let reply = post("/inbox/s", r#"{"id":"x"}"#)
        .header("X-Key", "    ")
        .send(h.addr)
        .await;
    assert_eq!(
        reply.answer(),
        (400, r#"{"error":"No idempotency key found"}"#.to_owned())
    );
    let too_long = "k".repeat(256);
    let reply = post("/inbox/s", "{}")
        .header("X-Key", &too_long)
        .send(h.addr)
        .await;
    assert_eq!(reply.status, 400, "over 255 characters is no value");
    let at_limit = "k".repeat(255);
    let reply = post("/inbox/s", "{}")
        .header("X-Key", &at_limit)
        .send(h.addr)
        .await;
    assert_eq!(reply.status, 202);
}

#[tokio::test]
async fn inb_34_aggregate_id_path_list_takes_either_spelling() {
    let mut s = source("s");
    s.aggregate_id_path = paths(&["$.orderId", "$.OrderId"]);
    s.event_type_path = paths(&["$.meta.type"]);
    http(&mut s).event_type_header = Some(header("X-Event-Type"));
    let h = serve(vec![s]).await;
    for (id, body) in [
        (
            "1",
            r#"{"id":"1","orderId":"o-lower","meta":{"type":"a.b"}}"#,
        ),
        ("2", r#"{"id":"2","OrderId":"o-upper"}"#),
        ("3", r#"{"id":"3"}"#),
    ] {
        let reply = post("/inbox/s", body)
            .header("x-event-type", if id == "2" { "from.header" } else { "" })
            .send(h.addr)
            .await;
        assert_eq!(reply.status, 202, "{body}");
    }
    let rows = h.sink.rows();
    let got: Vec<_> = rows
        .iter()
        .map(|r| (r.aggregate_id.as_deref(), r.event_type.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (Some("o-lower"), Some("a.b")),
            (Some("o-upper"), Some("from.header")),
            (None, None)
        ]
    );
}

/// INB-37 over HTTP, property style: every JSON spelling of a number gives the same key text.
#[tokio::test]
async fn inb_37_numbers_become_their_decimal_text() {
    let h = serve(vec![source("s")]).await;
    let mut cases: Vec<(String, String)> = vec![
        ("2.0".into(), "2".into()),
        ("1e3".into(), "1000".into()),
        ("12345678901234567890".into(), "12345678901234567890".into()),
        (
            "123456789012345678901234567890".into(),
            "123456789012345678901234567890".into(),
        ),
        ("-7.50".into(), "-7.5".into()),
        ("true".into(), "true".into()),
    ];
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for round in 0..12 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let value = (seed >> (round * 5)).max(1);
        let digits = value.to_string();
        cases.push((format!("{digits}.000"), digits.clone()));
        cases.push((format!("{digits}0e-1"), digits.clone()));
        let (head, tail) = digits.split_at(1);
        cases.push((format!("{head}.{tail}0E+{}", tail.len()), digits.clone()));
    }
    for (i, (literal, expected)) in cases.iter().enumerate() {
        // A distinct source key per case: the number goes into `id`, duplicates are told apart
        // by nothing else, so each expected text must be new.
        let body = format!(r#"{{"id": {literal}, "n": {i}}}"#);
        let reply = post("/inbox/s", &body).send(h.addr).await;
        assert!(matches!(reply.status, 200 | 202), "{body}: {reply:?}");
        let stored = h
            .sink
            .rows()
            .into_iter()
            .any(|row| &row.idempotency_key == expected);
        assert!(stored, "{literal} → {expected}");
    }
    // Objects, arrays and null are no value.
    for value in ["{}", "[]", "null"] {
        let reply = post("/inbox/s", &format!(r#"{{"id": {value}}}"#))
            .send(h.addr)
            .await;
        assert_eq!(reply.status, 400, "{value}");
    }
}

#[tokio::test]
async fn inb_41_without_publish_keys_scheduled_at_is_receipt_plus_initial_delay() {
    let mut delayed = source("delayed");
    delayed.initial_delay = Duration::from_secs(30);
    let h = serve(vec![delayed, source("plain")]).await;
    post("/inbox/delayed", r#"{"id":"1","time":1790000000}"#)
        .send(h.addr)
        .await;
    post("/inbox/plain", r#"{"id":"1"}"#).send(h.addr).await;
    let schedules: Vec<_> = h.sink.rows().iter().map(|r| r.schedule).collect();
    assert_eq!(
        schedules,
        [
            Schedule::AfterReceipt {
                delay: Duration::from_secs(30)
            },
            Schedule::AfterReceipt {
                delay: Duration::ZERO
            }
        ]
    );
}

#[tokio::test]
async fn inb_42_publish_time_from_header_then_path_then_receipt() {
    let mut s = source("s");
    s.initial_delay = Duration::from_secs(30);
    s.scheduled_at_header = Some(header("X-Published-At"));
    s.scheduled_at_path = paths(&["$.time", "$.meta.sentAt"]);
    let h = serve(vec![s]).await;
    let delay = Duration::from_secs(30);
    let cases: Vec<(&str, Option<&str>, Schedule)> = vec![
        // Header first, ISO-8601 with Z.
        (
            r#"{"id":"1","time":1790000000}"#,
            Some("2026-09-21T10:00:00Z"),
            Schedule::AfterPublish {
                publish_epoch_ms: 1_789_984_800_000,
                delay,
            },
        ),
        // Header invalid: falls through to the path (seconds).
        (
            r#"{"id":"2","time":1790000000}"#,
            Some("yesterday"),
            Schedule::AfterPublish {
                publish_epoch_ms: 1_790_000_000_000,
                delay,
            },
        ),
        // First path invalid, second path in milliseconds as decimal text.
        (
            r#"{"id":"3","time":"soon","meta":{"sentAt":"1790000000123"}}"#,
            None,
            Schedule::AfterPublish {
                publish_epoch_ms: 1_790_000_000_123,
                delay,
            },
        ),
        // Offset form on the path.
        (
            r#"{"id":"4","time":"2026-09-21T12:00:00+02:00"}"#,
            None,
            Schedule::AfterPublish {
                publish_epoch_ms: 1_789_984_800_000,
                delay,
            },
        ),
        // Nothing valid: receipt time + delay.
        (
            r#"{"id":"5","time":"2026-09-21T10:00:00"}"#,
            Some("2026-13-01T00:00:00Z"),
            Schedule::AfterReceipt { delay },
        ),
    ];
    for (body, header_value, _) in &cases {
        let mut request = post("/inbox/s", body);
        if let Some(value) = header_value {
            request = request.header("x-published-at", value);
        }
        assert_eq!(request.send(h.addr).await.status, 202, "{body}");
    }
    let got: Vec<_> = h.sink.rows().iter().map(|r| r.schedule).collect();
    let expected: Vec<_> = cases.iter().map(|(_, _, s)| *s).collect();
    assert_eq!(got, expected);
}

#[tokio::test]
async fn inb_49_the_row_carries_the_body_as_received_and_the_source_settings() {
    let mut s = source("orders");
    s.consumption = Consumption::Pull;
    s.event_type_path = paths(&["$.type"]);
    let h = serve(vec![s]).await;
    let body = "{ \"id\" : \"o-1\",\n  \"type\": \"order.created\", \"n\": 1.50 }";
    let reply = post("/inbox/orders", body)
        .header("X-Correlation-Id", "corr-9")
        .send(h.addr)
        .await;
    let row = h.sink.only_row();
    assert_eq!(
        reply.json(),
        json!({ "messageId": row.id.to_string(), "inboxId": row.id.to_string() })
    );
    assert_eq!(row.source, "orders");
    assert_eq!(row.idempotency_key, "o-1");
    assert_eq!(row.event_type.as_deref(), Some("order.created"));
    assert_eq!(row.aggregate_id, None);
    assert_eq!(row.payload, body, "the body text as received (INB-51)");
    assert_eq!(row.consumption, queuebox_store::Consumption::Pull);
    assert_eq!(row.correlation_id.as_deref(), Some("corr-9"));
    assert_eq!(row.id.get_version_num(), 7);
}
