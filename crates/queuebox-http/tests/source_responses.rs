//! The answers of an HTTP source route over real HTTP (inbox.md INB-5..13): the exact status
//! set of INB-10, `X-Correlation-Id` on every answer, the body cap, the rate limit, and the
//! server's own answers on a source route.

mod source_support;

use std::collections::BTreeSet;
use std::time::Duration;

use queuebox_config::{FilterRule, FilterTest, InboundAuth, RateLimit};
use queuebox_core::Secret;
use queuebox_telemetry::RejectionReason;
use source_support::*;

const ID: &str = r#"{"id":"m-1"}"#;

fn max_body_json(len: usize) -> String {
    // {"id":"x","p":"aaa…"} padded to exactly `len` bytes.
    let prefix = r#"{"id":"x","p":""#;
    let suffix = r#""}"#;
    format!(
        "{prefix}{}{suffix}",
        "a".repeat(len - prefix.len() - suffix.len())
    )
}

#[tokio::test]
async fn inb_10_new_message_202_then_duplicate_200() {
    let h = serve(vec![source("s")]).await;
    let first = post("/inbox/s", ID).send(h.addr).await;
    let row = h.sink.only_row();
    assert_eq!(
        first.answer(),
        (
            202,
            format!(r#"{{"messageId":"{0}","inboxId":"{0}"}}"#, row.id)
        )
    );
    assert_eq!(row.id.get_version_num(), 7, "ids are UUID v7");
    let again = post("/inbox/s", ID).send(h.addr).await;
    assert_eq!(
        again.answer(),
        (200, r#"{"status":"duplicate"}"#.to_owned())
    );
    assert_eq!(h.sink.rows().len(), 1);
}

#[tokio::test]
async fn inb_10_invalid_json_and_empty_body_are_400_and_count_extraction_failed() {
    let h = serve(vec![source("s")]).await;
    let invalid = r#"{"error":"Invalid JSON"}"#.to_owned();
    for body in ["{not json", "", "   ", "{\"id\":\"a\"} trailing"] {
        let reply = post("/inbox/s", body).send(h.addr).await;
        assert_eq!(reply.answer(), (400, invalid.clone()), "{body:?}");
    }
    // Whatever the Content-Type says.
    let reply = post("/inbox/s", ID)
        .header("Content-Type", "text/plain")
        .send(h.addr)
        .await;
    assert_eq!(reply.status, 202);
    let failed = h
        .metrics
        .inbox_rejections(RejectionReason::ExtractionFailed);
    assert_eq!(failed.get(), 4);
    assert_eq!(h.sink.rows().len(), 1);
}

#[tokio::test]
async fn inb_10_no_idempotency_key_is_400() {
    let h = serve(vec![source("s")]).await;
    for body in [r#"{"other":1}"#, r#"{"id":null}"#, r#"{"id":"  "}"#, "[1]"] {
        let reply = post("/inbox/s", body).send(h.addr).await;
        assert_eq!(
            reply.answer(),
            (400, r#"{"error":"No idempotency key found"}"#.to_owned()),
            "{body}"
        );
    }
    let failed = h
        .metrics
        .inbox_rejections(RejectionReason::ExtractionFailed);
    assert_eq!(failed.get(), 4);
    assert!(h.sink.rows().is_empty());
}

#[tokio::test]
async fn inb_10_storage_failure_is_500() {
    let h = serve(vec![source("s")]).await;
    h.sink.fail_storage();
    let reply = post("/inbox/s", ID).send(h.addr).await;
    assert_eq!(
        reply.answer(),
        (500, r#"{"error":"Storage failed"}"#.to_owned())
    );
}

#[tokio::test]
async fn inb_10_sink_shutting_down_is_503() {
    let h = serve(vec![source("s")]).await;
    h.sink.refuse_shutting_down();
    let reply = post("/inbox/s", ID).send(h.addr).await;
    assert_eq!(
        reply.answer(),
        (503, r#"{"error":"QueueBox is shutting down"}"#.to_owned())
    );
}

#[tokio::test]
async fn inb_7_step_1_draining_answers_503_with_the_correlation_id() {
    let h = serve(vec![source("s")]).await;
    let gate = h.sink.hold();
    let addr = h.addr;
    let held = tokio::spawn(async move { post("/inbox/s", ID).send(addr).await });
    // Wait until the held request is inside the sink.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let drain = tokio::spawn({
        let server = std::sync::Arc::clone(&h.server);
        async move { server.drain_data_port().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = post("/inbox/s", ID)
        .header("X-Correlation-Id", "late-1")
        .send(addr)
        .await;
    assert_eq!(
        refused.answer(),
        (503, r#"{"error":"QueueBox is shutting down"}"#.to_owned())
    );
    assert_eq!(refused.correlation(), "late-1");
    gate.add_permits(1);
    assert_eq!(
        held.await.unwrap().status,
        202,
        "the request in the handler finishes"
    );
    drain.await.unwrap();
}

#[tokio::test]
async fn inb_10_failed_auth_is_401() {
    let s = with_auth(
        source("s"),
        InboundAuth::Bearer {
            token: Secret::new("t0k"),
        },
    );
    let h = serve(vec![s]).await;
    let reply = post("/inbox/s", ID).send(h.addr).await;
    assert_eq!(
        reply.answer(),
        (
            401,
            r#"{"error":"Missing Authorization header"}"#.to_owned()
        )
    );
}

#[tokio::test]
async fn inb_12_declared_length_exactly_max_accepted_one_more_refused_unread() {
    let h = serve(vec![source("s")]).await;
    let body = max_body_json(MAX_BODY as usize);
    assert_eq!(post("/inbox/s", &body).send(h.addr).await.status, 202);
    let over = max_body_json(MAX_BODY as usize + 1);
    let reply = post("/inbox/s", &over)
        .header("X-Correlation-Id", "big-1")
        .send(h.addr)
        .await;
    assert_eq!(
        reply.answer(),
        (
            413,
            format!(r#"{{"error":"Request body exceeds {MAX_BODY} bytes"}}"#)
        )
    );
    assert_eq!(reply.correlation(), "big-1");
    // Declared but never sent: refused before any byte is read, so no wait for the body.
    let head = "POST /inbox/s HTTP/1.1\r\nHost: t\r\nContent-Length: 999999\r\n\r\n";
    let reply = send_raw(h.addr, head.as_bytes()).await;
    assert_eq!(reply.status, 413);
    assert!(!reply.correlation().is_empty());
    assert_eq!(h.sink.rows().len(), 1);
}

#[tokio::test]
async fn inb_12_chunked_body_exactly_max_accepted_one_more_refused() {
    let h = serve(vec![source("s")]).await;
    let body = max_body_json(MAX_BODY as usize);
    let (a, b) = body.as_bytes().split_at(100);
    let reply = send_raw(h.addr, &chunked("/inbox/s", &[a, b])).await;
    assert_eq!(reply.answer().0, 202);

    let over = max_body_json(MAX_BODY as usize + 1).replace(r#""id":"x""#, r#""id":"y""#);
    let (a, b) = over.as_bytes().split_at(700);
    let reply = send_raw(h.addr, &chunked("/inbox/s", &[a, b])).await;
    assert_eq!(
        reply.answer(),
        (
            413,
            format!(r#"{{"error":"Request body exceeds {MAX_BODY} bytes"}}"#)
        )
    );
    assert_eq!(h.sink.rows().len(), 1);
}

#[tokio::test]
async fn inb_13_the_61st_request_of_a_burst_gets_429_with_retry_after() {
    let mut limited = source("limited");
    limited.rate_limit = Some(RateLimit {
        requests_per_minute: 60,
    });
    let h = serve(vec![limited, source("free")]).await;
    for i in 0..60 {
        let reply = post("/inbox/limited", &format!(r#"{{"id":"{i}"}}"#))
            .send(h.addr)
            .await;
        assert_eq!(reply.status, 202, "request {i}");
    }
    let reply = post("/inbox/limited", r#"{"id":"61"}"#).send(h.addr).await;
    assert_eq!(
        reply.answer(),
        (429, r#"{"error":"Rate limit exceeded"}"#.to_owned())
    );
    let retry: u64 = reply.header("retry-after").unwrap().parse().unwrap();
    assert_eq!(retry, 1, "one token per second at 60/min");
    // Before the body and auth: even an invalid body gets 429.
    assert_eq!(
        post("/inbox/limited", "nope").send(h.addr).await.status,
        429
    );
    // Buckets of different sources are independent.
    assert_eq!(post("/inbox/free", ID).send(h.addr).await.status, 202);
    // A token comes back after a second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        post("/inbox/limited", r#"{"id":"62"}"#)
            .send(h.addr)
            .await
            .status,
        202
    );
}

#[tokio::test]
async fn inb_11_other_method_is_405_with_allow_post_and_the_correlation_id() {
    let h = serve(vec![source("s")]).await;
    for method in ["GET", "PUT", "DELETE"] {
        let mut request = post("/inbox/s", "");
        request.method = method;
        request.body = None;
        let reply = request
            .header("X-Correlation-Id", "m-405")
            .send(h.addr)
            .await;
        assert_eq!(
            reply.answer(),
            (405, r#"{"error":"Method not allowed"}"#.to_owned()),
            "{method}"
        );
        assert_eq!(reply.header("allow"), Some("POST"));
        assert_eq!(reply.correlation(), "m-405");
    }
}

#[tokio::test]
async fn inb_5_exact_path_query_ignored_no_trailing_slash() {
    let h = serve(vec![source("s")]).await;
    assert_eq!(post("/inbox/s?x=1", ID).send(h.addr).await.status, 202);
    for path in ["/inbox/s/", "/inbox/S", "/inbox/s/x", "/inbox", "/s"] {
        let reply = post(path, ID).send(h.addr).await;
        assert_eq!(
            (reply.status, reply.body.as_str()),
            (404, r#"{"error":"Not found"}"#),
            "{path}"
        );
    }
}

#[tokio::test]
async fn inb_6_correlation_id_is_echoed_cleaned_or_generated_on_every_answer() {
    let h = serve(vec![source("s")]).await;
    let echoed = post("/inbox/s", ID)
        .header("X-Correlation-Id", "  abc-123 ")
        .send(h.addr)
        .await;
    assert_eq!(echoed.correlation(), "abc-123");
    assert_eq!(h.sink.only_row().correlation_id.as_deref(), Some("abc-123"));
    // A duplicate echoes the request's value, not the stored row's (OPS-39).
    let duplicate = post("/inbox/s", ID)
        .header("x-correlation-id", "other")
        .send(h.addr)
        .await;
    assert_eq!((duplicate.status, duplicate.correlation()), (200, "other"));
    // Cut to 128 characters.
    let long = "c".repeat(200);
    let reply = post("/inbox/s", "{")
        .header("X-Correlation-Id", &long)
        .send(h.addr)
        .await;
    assert_eq!(reply.correlation(), "c".repeat(128));
    // Absent or blank: a new lower-case v4 UUID, different each time.
    let mut generated = BTreeSet::new();
    for blank in [None, Some("   ")] {
        let mut request = post("/inbox/s", "{");
        if let Some(value) = blank {
            request = request.header("X-Correlation-Id", value);
        }
        let reply = request.send(h.addr).await;
        let id = uuid::Uuid::parse_str(reply.correlation()).expect("a UUID");
        assert_eq!(id.get_version_num(), 4);
        assert_eq!(
            reply.correlation(),
            reply.correlation().to_ascii_lowercase()
        );
        generated.insert(reply.correlation().to_owned());
    }
    assert_eq!(generated.len(), 2);
}

/// INB-10 as a whole: one server, one request per row of the table, and the set of answers
/// is exactly the table's (without 422: source transforms are refused at start).
#[tokio::test]
async fn inb_10_the_route_answers_exactly_the_status_set() {
    let mut filtered = source("s");
    filtered.filter.exclude = vec![FilterRule {
        header: header("X-Drop"),
        test: FilterTest::Exists,
    }];
    filtered.rate_limit = Some(RateLimit {
        requests_per_minute: 8,
    });
    let secured = with_auth(
        source("secured"),
        InboundAuth::Bearer {
            token: Secret::new("t"),
        },
    );
    let h = serve(vec![filtered, secured]).await;
    let addr = h.addr;
    let big = max_body_json(MAX_BODY as usize + 1);
    let mut answers = Vec::new();
    for request in [
        post("/inbox/s", ID),
        post("/inbox/s", ID).header("X-Drop", "1"),
        post("/inbox/s", ID),
        post("/inbox/s", "nope"),
        post("/inbox/s", "{}"),
        post("/inbox/secured", ID),
        post("/inbox/s", &big),
    ] {
        answers.push(request.send(addr).await.answer());
    }
    let (a, b) = big.as_bytes().split_at(10);
    answers.push(send_raw(addr, &chunked("/inbox/s", &[a, b])).await.answer());
    h.sink.fail_storage();
    answers.push(
        post("/inbox/s", r#"{"id":"new"}"#)
            .send(addr)
            .await
            .answer(),
    );
    h.sink.refuse_shutting_down();
    answers.push(
        post("/inbox/s", r#"{"id":"new"}"#)
            .send(addr)
            .await
            .answer(),
    );
    // Eight requests took a token (the declared 413 is refused before step 3): none left.
    answers.push(post("/inbox/s", ID).send(addr).await.answer());

    let id = h.sink.only_row().id;
    let too_large = format!(r#"{{"error":"Request body exceeds {MAX_BODY} bytes"}}"#);
    let expected = [
        (202, format!(r#"{{"messageId":"{id}","inboxId":"{id}"}}"#)),
        (202, r#"{"status":"filtered"}"#.to_owned()),
        (200, r#"{"status":"duplicate"}"#.to_owned()),
        (400, r#"{"error":"Invalid JSON"}"#.to_owned()),
        (400, r#"{"error":"No idempotency key found"}"#.to_owned()),
        (
            401,
            r#"{"error":"Missing Authorization header"}"#.to_owned(),
        ),
        (413, too_large.clone()),
        (413, too_large),
        (500, r#"{"error":"Storage failed"}"#.to_owned()),
        (503, r#"{"error":"QueueBox is shutting down"}"#.to_owned()),
        (429, r#"{"error":"Rate limit exceeded"}"#.to_owned()),
    ];
    assert_eq!(answers, expected);
    let statuses: BTreeSet<u16> = answers.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        statuses,
        BTreeSet::from([200, 202, 400, 401, 413, 429, 500, 503])
    );
    assert_eq!(h.metrics.inbox_filtered("s").get(), 1);
}

/// The server's own answers on a source route carry the correlation id too (INB-6): here the
/// 431 of OPS-6, given before any routing.
#[tokio::test]
async fn inb_6_server_answers_on_a_source_route_carry_the_correlation_id() {
    let h = serve(vec![source("s")]).await;
    let mut request = post("/inbox/s", ID).header("X-Correlation-Id", "many-headers");
    let names: Vec<String> = (0..120).map(|i| format!("X-H{i}")).collect();
    for name in &names {
        request = request.header(name, "v");
    }
    let reply = request.send(h.addr).await;
    assert_eq!(
        reply.answer(),
        (431, r#"{"error":"Request headers too large"}"#.to_owned())
    );
    assert_eq!(reply.correlation(), "many-headers");
    // Not on other routes: the rule is the source routes'.
    let other = post("/nowhere", ID).send(h.addr).await;
    assert_eq!(other.status, 404);
    assert_eq!(other.header("x-correlation-id"), None);
}
