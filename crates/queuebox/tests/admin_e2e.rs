//! The admin API end to end (operations.md §6, ADM-1..25; outbox.md OUT-48..52; inbox.md
//! RLY-17/18): the real `queuebox` binary over HTTP, the real PostgreSQL, real receivers and the
//! project's Rust pull worker.

mod support;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use support::pg::TestSchema;
use support::process::{Scratch, queuebox};
use support::receiver::{Receiver, Reply};
use support::service::{Answer, Service};

const TOKEN: &str = "admin-token-1";

/// One schema, one receiver, two sources (push `orders`, pull `jobs`), and `admin`.
fn config(schema: &TestSchema, receiver: &str, admin: &str) -> String {
    format!(
        r#"database:
  url: "{db}"
  startupTimeoutMs: 10000
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
inbox:
  relay:
    pollIntervalMs: 50
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    topic: orders.event
  jobs:
    path: /jobs
    idempotencyKeyPath: $.id
    consumption: pull
destinations:
  receiver:
    type: http
    baseUrl: {receiver}
  other:
    type: http
    baseUrl: {receiver}/other
routes:
  - topicPattern: "other.**"
    destination: other
  - topicPattern: "**"
    destination: receiver
admin:
{admin}
"#,
        db = schema.queuebox_url()
    )
}

fn bearer_admin() -> String {
    format!("  enabled: true\n  auth:\n    type: bearer\n    token: {TOKEN}")
}

/// Any method, on a fresh connection.
fn call(port: u16, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse(&raw)
}

fn parse(raw: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// An authorized call with the bearer token.
fn admin(s: &Service, method: &str, target: &str, body: Value) -> Answer {
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let auth = format!("Bearer {TOKEN}");
    call(s.port, method, target, &[("Authorization", &auth)], &bytes)
}

fn expect(answer: &Answer, status: u16, body: Value) {
    assert_eq!(
        (answer.status, answer.json()),
        (status, body),
        "{}",
        answer.body
    );
}

async fn exec(schema: &TestSchema, sql: &str) {
    schema.client().batch_execute(sql).await.unwrap();
}

async fn count(schema: &TestSchema, sql: &str) -> i64 {
    schema.client().query_one(sql, &[]).await.unwrap().get(0)
}

async fn wait_until(limit: Duration, what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !done().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `n` outbox rows inserted straight into a final state (test set-up, as an operator restoring
/// rows would): `dead` rows carry `last_error` "boom <i>".
async fn insert_rows(schema: &TestSchema, topic: &str, state: &str, n: usize) {
    exec(
        schema,
        &format!(
            "INSERT INTO outbox (topic, payload, state, last_error, key) \
             SELECT '{topic}', jsonb_build_object('n', i), '{state}', \
                    CASE WHEN '{state}' = 'dead' THEN 'boom ' || i END, 'k' || (i % 3) \
             FROM generate_series(1, {n}) i"
        ),
    )
    .await;
}

fn ok(_: &support::receiver::Request, _: usize) -> Reply {
    Reply::status(200)
}

fn items(answer: &Answer) -> Vec<Value> {
    answer.json()["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn adm_1_adm_2_off_by_default_refused_without_auth_insecure_warns() {
    let schema = TestSchema::create("adm_off").await;
    let receiver = Receiver::start(ok).await;
    // ADM-1: no admin section → every /admin path is 404.
    let cfg = config(&schema, &receiver.url(), "  enabled: false");
    let s = Service::start("adm-off", &cfg);
    for (method, target) in [
        ("GET", "/admin/stats"),
        ("GET", "/admin/outbox/messages"),
        ("POST", "/admin/replay"),
    ] {
        let answer = call(s.port, method, target, &[], b"{}");
        expect(&answer, 404, json!({"error": "Not found"}));
    }
    assert_eq!(s.stop(), Some(0));

    // ADM-2: enabled without auth and without insecure stops the start with the message.
    let scratch = Scratch::new("adm-noauth");
    let file = scratch.write(
        "queuebox.yml",
        &config(&schema, &receiver.url(), "  enabled: true"),
    );
    let output = queuebox(scratch.path())
        .args(["run", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("The admin API is enabled without authentication. Set admin.auth (bearer, api-key or hmac), set admin.insecure: true for a local test, or set admin.enabled: false."),
        "{stderr}"
    );

    // ADM-2: insecure runs, with one warn line, and answers without credentials.
    let cfg = config(
        &schema,
        &receiver.url(),
        "  enabled: true\n  insecure: true",
    );
    let mut s = Service::start("adm-insecure", &cfg);
    s.drain_log();
    let warns: Vec<_> = s
        .log
        .iter()
        .filter(|l| {
            // The loader's warning names the key: `- admin.auth: The admin API runs ...`.
            l["message"]
                .as_str()
                .is_some_and(|m| m.ends_with("The admin API runs without authentication."))
        })
        .collect();
    assert_eq!(warns.len(), 1, "{:#?}", s.log);
    assert_eq!(warns[0]["level"], "WARN");
    let answer = call(s.port, "GET", "/admin/outbox/messages", &[], b"");
    expect(&answer, 200, json!({"items": [], "nextCursor": null}));
    assert_eq!(s.stop(), Some(0));

    // ADM-1: with a management port the admin routes live there only.
    let cfg = config(
        &schema,
        &receiver.url(),
        "  enabled: true\n  insecure: true",
    )
    .replace("  httpPort: 0\n", "  httpPort: 0\n  managementPort: 0\n");
    let s = Service::start("adm-mgmt", &cfg);
    let management = s
        .log
        .iter()
        .find(|l| l["message"] == "QueueBox started")
        .and_then(|l| l["managementPort"].as_u64())
        .expect("a management port on the start line") as u16;
    let answer = call(management, "GET", "/admin/stats", &[], b"");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let answer = call(s.port, "GET", "/admin/stats", &[], b"");
    expect(&answer, 404, json!({"error": "Not found"}));
    assert_eq!(s.stop(), Some(0));
    schema.drop().await;
}

fn hex_hmac(secret: &str, bytes: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(bytes);
    hex::encode(mac.finalize().into_bytes())
}

#[tokio::test(flavor = "multi_thread")]
async fn adm_3_adm_4_adm_5_each_scheme_refuses_with_401_and_oversize_gets_413_first() {
    let schema = TestSchema::create("adm_auth").await;
    let receiver = Receiver::start(ok).await;
    let url = receiver.url();

    // Bearer.
    let small = format!("{}\n  maxPayloadBytes: 1024", bearer_admin());
    let s = Service::start("adm-bearer", &config(&schema, &url, &small));
    let get = |headers: &[(&str, &str)]| call(s.port, "GET", "/admin/stats", headers, b"");
    expect(
        &get(&[]),
        401,
        json!({"error": "Missing Authorization header"}),
    );
    expect(
        &get(&[("Authorization", "Bearer nope")]),
        401,
        json!({"error": "Invalid bearer token"}),
    );
    assert_eq!(
        get(&[("Authorization", &format!("bearer {TOKEN}"))]).status,
        200
    );
    // ADM-5: 413 before 401, declared length and counted read.
    let big = vec![b' '; 1025];
    let answer = call(s.port, "POST", "/admin/replay", &[], &big);
    expect(
        &answer,
        413,
        json!({"error": "Request body exceeds 1024 bytes"}),
    );
    let answer = chunked(s.port, "/admin/replay", &big);
    expect(
        &answer,
        413,
        json!({"error": "Request body exceeds 1024 bytes"}),
    );
    // Exactly the limit is read, then refused by auth.
    let answer = call(s.port, "POST", "/admin/replay", &[], &big[..1024]);
    assert_eq!(answer.status, 401);
    assert_eq!(s.stop(), Some(0));

    // API key.
    let admin_cfg =
        "  enabled: true\n  auth:\n    type: api-key\n    key: k-123\n    headerName: X-Admin-Key";
    let s = Service::start("adm-apikey", &config(&schema, &url, admin_cfg));
    let get = |headers: &[(&str, &str)]| call(s.port, "GET", "/admin/stats", headers, b"");
    expect(
        &get(&[]),
        401,
        json!({"error": "Missing X-Admin-Key header"}),
    );
    expect(
        &get(&[("X-Admin-Key", "wrong")]),
        401,
        json!({"error": "Invalid API key"}),
    );
    assert_eq!(get(&[("x-admin-key", "k-123")]).status, 200);
    assert_eq!(s.stop(), Some(0));

    // HMAC over method, target and body, with a timestamp (ADM-4).
    let admin_cfg = "  enabled: true\n  auth:\n    type: hmac\n    secret: hs-1\n    timestampHeader: X-Timestamp";
    let s = Service::start("adm-hmac", &config(&schema, &url, admin_cfg));
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let sign = |method: &str, target: &str, body: &str, ts: &str| {
        format!(
            "sha256={}",
            hex_hmac("hs-1", format!("{ts}.{method} {target}\n{body}").as_bytes())
        )
    };
    let target = "/admin/outbox/messages?state=dead&limit=5";
    let signature = sign("GET", target, "", &now);
    let headers = [
        ("X-Signature", signature.as_str()),
        ("X-Timestamp", now.as_str()),
    ];
    assert_eq!(call(s.port, "GET", target, &headers, b"").status, 200);
    // The same signature on another target, or another method, authorizes nothing.
    let other = call(
        s.port,
        "GET",
        "/admin/outbox/messages?state=sent&limit=5",
        &headers,
        b"",
    );
    expect(&other, 401, json!({"error": "Invalid signature"}));
    // A GET's signature does not authorize a DELETE of the same target.
    let one = format!("/admin/outbox/messages/{}", uuid::Uuid::new_v4());
    let signature = sign("GET", &one, "", &now);
    let headers = [
        ("X-Signature", signature.as_str()),
        ("X-Timestamp", now.as_str()),
    ];
    expect(
        &call(s.port, "GET", &one, &headers, b""),
        404,
        json!({"error": "Message not found"}),
    );
    expect(
        &call(s.port, "DELETE", &one, &headers, b""),
        401,
        json!({"error": "Invalid signature"}),
    );
    // A body is signed too.
    let body = r#"{"topic":"t"}"#;
    let signature = sign("POST", "/admin/replay", body, &now);
    let headers = [
        ("X-Signature", signature.as_str()),
        ("X-Timestamp", now.as_str()),
    ];
    expect(
        &call(s.port, "POST", "/admin/replay", &headers, body.as_bytes()),
        200,
        json!({"moved": 0}),
    );
    let changed = call(
        s.port,
        "POST",
        "/admin/replay",
        &headers,
        br#"{"topic":"u"}"#,
    );
    expect(&changed, 401, json!({"error": "Invalid signature"}));
    // Missing header, missing and expired timestamp.
    expect(
        &call(s.port, "GET", target, &[], b""),
        401,
        json!({"error": "Missing X-Signature header"}),
    );
    expect(
        &call(s.port, "GET", target, &[("X-Signature", "sha256=00")], b""),
        401,
        json!({"error": "Missing timestamp header"}),
    );
    let old = "1000000000";
    let signature = sign("GET", target, "", old);
    expect(
        &call(
            s.port,
            "GET",
            target,
            &[("X-Signature", &signature), ("X-Timestamp", old)],
            b"",
        ),
        401,
        json!({"error": "Request timestamp expired"}),
    );
    assert_eq!(s.stop(), Some(0));
    schema.drop().await;
}

/// A chunked POST (no Content-Length), so only the counted read can refuse it.
fn chunked(port: u16, target: &str, body: &[u8]) -> Answer {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let head = format!(
        "POST {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    for part in body.chunks(100) {
        let _ = stream.write_all(format!("{:x}\r\n", part.len()).as_bytes());
        let _ = stream.write_all(part);
        let _ = stream.write_all(b"\r\n");
    }
    let _ = stream.write_all(b"0\r\n\r\n");
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse(&raw)
}

#[tokio::test(flavor = "multi_thread")]
async fn adm_6_adm_7_adm_8_adm_11_unknown_fields_limits_and_cursors_across_pages() {
    let schema = TestSchema::create("adm_limits").await;
    let receiver = Receiver::start(ok).await;
    let s = Service::start(
        "adm-limits",
        &config(&schema, &receiver.url(), &bearer_admin()),
    );
    // ADM-6: a typo in a query or a body never widens anything.
    for (method, target, body) in [
        ("GET", "/admin/outbox/messages?topc=a", Value::Null),
        ("GET", "/admin/inbox/messages?sourc=a", Value::Null),
        ("POST", "/admin/replay", json!({"topc": "a"})),
        (
            "POST",
            "/admin/outbox/delete",
            json!({"state": "dead", "topc": "a"}),
        ),
        ("POST", "/admin/inbox/requeue", json!({"sourc": "a"})),
        (
            "POST",
            "/admin/inbox/delete",
            json!({"state": "dead", "sourc": "a"}),
        ),
    ] {
        let field = if target.contains("inbox") {
            "sourc"
        } else {
            "topc"
        };
        let answer = admin(&s, method, target, body);
        expect(
            &answer,
            400,
            json!({"error": format!("Unknown field: {field}")}),
        );
    }
    // Replay takes no key or errorContains (ADM-13), a requeue no state.
    let answer = admin(
        &s,
        "POST",
        "/admin/replay",
        json!({"topic": "a", "key": "k"}),
    );
    expect(&answer, 400, json!({"error": "Unknown field: key"}));
    let answer = admin(&s, "POST", "/admin/inbox/requeue", json!({"state": "dead"}));
    expect(&answer, 400, json!({"error": "Unknown field: state"}));
    let answer = admin(&s, "POST", "/admin/replay", json!({}));
    expect(
        &answer,
        400,
        json!({"error": "A replay needs at least one filter."}),
    );
    let answer = admin(&s, "POST", "/admin/replay", json!({"limit": 5}));
    expect(
        &answer,
        400,
        json!({"error": "A replay needs at least one filter."}),
    );
    let answer = admin(&s, "POST", "/admin/inbox/requeue", json!({}));
    expect(
        &answer,
        400,
        json!({"error": "A requeue needs at least one filter."}),
    );
    let answer = admin(&s, "POST", "/admin/outbox/delete", json!({"topic": "a"}));
    expect(
        &answer,
        400,
        json!({"error": "A bulk delete needs state: sent or dead."}),
    );
    let answer = admin(
        &s,
        "POST",
        "/admin/outbox/delete",
        json!({"state": "pending"}),
    );
    expect(
        &answer,
        400,
        json!({"error": "A bulk delete needs state: sent or dead."}),
    );
    let answer = admin(&s, "POST", "/admin/inbox/delete", json!({}));
    expect(
        &answer,
        400,
        json!({"error": "A bulk delete needs state: processed or dead."}),
    );
    let answer = admin(
        &s,
        "POST",
        "/admin/replay",
        json!({"destination": "nowhere"}),
    );
    expect(
        &answer,
        400,
        json!({"error": "Unknown destination: nowhere"}),
    );
    // ADM-7.
    let answer = admin(&s, "GET", "/admin/outbox/messages/not-a-uuid", Value::Null);
    expect(&answer, 400, json!({"error": "Invalid id: not-a-uuid"}));
    let answer = admin(
        &s,
        "POST",
        "/admin/replay",
        json!({"createdAfter": "2026-11-30T18:00:00"}),
    );
    assert_eq!(answer.status, 400);
    assert!(
        answer.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("Invalid request: ")
    );
    let answer = admin(&s, "POST", "/admin/replay", json!([1]));
    expect(
        &answer,
        400,
        json!({"error": "Invalid request: the body must be a JSON object"}),
    );
    // ADM-8.
    for limit in ["0", "501", "x"] {
        let answer = admin(
            &s,
            "GET",
            &format!("/admin/outbox/messages?limit={limit}"),
            Value::Null,
        );
        expect(
            &answer,
            400,
            json!({"error": "limit must be between 1 and 500"}),
        );
    }
    let answer = admin(
        &s,
        "POST",
        "/admin/replay",
        json!({"topic": "a", "limit": 0}),
    );
    expect(&answer, 400, json!({"error": "limit must be at least 1"}));
    let ids: Vec<String> = (0..1001)
        .map(|_| uuid::Uuid::new_v4().to_string())
        .collect();
    let answer = admin(&s, "POST", "/admin/replay", json!({"ids": ids}));
    expect(
        &answer,
        400,
        json!({"error": "ids takes at most 1000 entries"}),
    );
    let topics: Vec<String> = (0..101).map(|i| format!("t{i}")).collect();
    let answer = admin(&s, "POST", "/admin/replay", json!({"topics": topics}));
    expect(
        &answer,
        400,
        json!({"error": "topics takes at most 100 entries"}),
    );
    let sources: Vec<String> = (0..101).map(|i| format!("s{i}")).collect();
    let answer = admin(
        &s,
        "POST",
        "/admin/inbox/requeue",
        json!({"sources": sources}),
    );
    expect(
        &answer,
        400,
        json!({"error": "sources takes at most 100 entries"}),
    );
    let long = "e".repeat(201);
    let answer = admin(
        &s,
        "GET",
        &format!("/admin/outbox/messages?errorContains={long}"),
        Value::Null,
    );
    expect(
        &answer,
        400,
        json!({"error": "errorContains takes at most 200 characters"}),
    );
    let answer = admin(&s, "GET", "/admin/outbox/messages?cursor=!!", Value::Null);
    expect(&answer, 400, json!({"error": "Invalid cursor"}));

    // ADM-11, ADM-17: 7 dead rows in pages of 3, newest first, no row twice, then null.
    insert_rows(&schema, "page.t", "dead", 7).await;
    insert_rows(&schema, "page.t", "sent", 2).await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let target = match &cursor {
            None => "/admin/outbox/messages?limit=3&topic=page.t".to_owned(),
            Some(c) => format!("/admin/outbox/messages?limit=3&topic=page.t&cursor={c}"),
        };
        let answer = admin(&s, "GET", &target, Value::Null);
        assert_eq!(answer.status, 200, "{}", answer.body);
        pages += 1;
        for item in items(&answer) {
            assert_eq!(item["state"], "dead");
            assert_eq!(item["destination"], "receiver");
            // ADM-12: a list item has no payload, headers or claim token.
            for hidden in [
                "payload",
                "headers",
                "claimToken",
                "claim_token",
                "sequence",
            ] {
                assert!(item.get(hidden).is_none(), "{hidden} in {item}");
            }
            seen.push((
                item["createdAt"].as_str().unwrap().to_owned(),
                item["id"].as_str().unwrap().to_owned(),
            ));
        }
        match answer.json()["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len(), 7);
    let unique: HashSet<_> = seen.iter().map(|(_, id)| id.clone()).collect();
    assert_eq!(unique.len(), 7);
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, sorted, "newest first by (created_at, id)");
    // Filters combine with AND; errorContains is literal.
    let answer = admin(
        &s,
        "GET",
        "/admin/outbox/messages?topic=page.t&errorContains=boom%207",
        Value::Null,
    );
    assert_eq!(items(&answer).len(), 1);
    let answer = admin(
        &s,
        "GET",
        "/admin/outbox/messages?topic=page.t&errorContains=boom%25",
        Value::Null,
    );
    assert_eq!(items(&answer).len(), 0);
    let answer = admin(
        &s,
        "GET",
        "/admin/outbox/messages?state=sent&topics=page.t,x",
        Value::Null,
    );
    assert_eq!(items(&answer).len(), 2);
    let answer = admin(
        &s,
        "GET",
        "/admin/outbox/messages?destination=other&topic=page.t",
        Value::Null,
    );
    assert_eq!(
        items(&answer).len(),
        0,
        "a destination never widens the topic"
    );
    assert_eq!(s.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn adm_15_out_52_replay_of_sent_and_dead_rows_delivers_them_again_with_the_same_message_id() {
    let schema = TestSchema::create("adm_replay").await;
    // Topic `fail.*` fails until the test flips the switch.
    let failing = Arc::new(Mutex::new(true));
    let switch = failing.clone();
    let receiver = Receiver::start(move |r, _| {
        if r.path.ends_with("/other") || !r.json()["fail"].as_bool().unwrap_or(false) {
            Reply::status(200)
        } else if *switch.lock().unwrap() {
            Reply::status(500)
        } else {
            Reply::status(200)
        }
    })
    .await;
    let mut s = Service::start(
        "adm-replay",
        &config(&schema, &receiver.url(), &bearer_admin()),
    );
    exec(
        &schema,
        "INSERT INTO outbox (topic, payload) VALUES ('a.sent', '{\"n\":1}');
         INSERT INTO outbox (topic, payload, max_attempts) VALUES ('a.dead', '{\"fail\":true}', 1);
         INSERT INTO outbox (topic, payload) VALUES ('b.untouched', '{\"n\":3}');",
    )
    .await;
    wait_until(
        Duration::from_secs(20),
        "one sent row per topic and one dead",
        async || {
            count(
                &schema,
                "SELECT count(*) FROM outbox WHERE state IN ('sent','dead')",
            )
            .await
                == 3
        },
    )
    .await;
    let first: Vec<_> = receiver.requests();
    let id_of = |topic: &str| -> String {
        first
            .iter()
            .find(|r| {
                r.header("x-message-topic") == Some(topic) || r.header("x-topic") == Some(topic)
            })
            .and_then(|r| r.header("x-message-id"))
            .map(str::to_owned)
            .unwrap_or_default()
    };
    let dead = admin(&s, "GET", "/admin/outbox/messages?state=dead", Value::Null);
    let dead_items = items(&dead);
    assert_eq!(dead_items.len(), 1);
    let dead_id = dead_items[0]["id"].as_str().unwrap().to_owned();
    assert!(dead_items[0]["lastError"].as_str().unwrap().contains("500"));
    let sent = admin(
        &s,
        "GET",
        "/admin/outbox/messages?state=sent&topic=a.sent",
        Value::Null,
    );
    let sent_id = items(&sent)[0]["id"].as_str().unwrap().to_owned();
    let _ = id_of;
    // ADM-18: the show form has the payload and headers, never the claim token.
    let shown = admin(
        &s,
        "GET",
        &format!("/admin/outbox/messages/{sent_id}"),
        Value::Null,
    );
    assert_eq!(shown.status, 200);
    let shown = shown.json();
    assert_eq!(shown["payload"], json!({"n": 1}));
    assert_eq!(shown["headers"], json!({}));
    assert!(shown["sequence"].as_i64().is_some());
    assert!(shown.get("claimToken").is_none() && shown.get("claim_token").is_none());
    let missing = admin(
        &s,
        "GET",
        &format!("/admin/outbox/messages/{}", uuid::Uuid::new_v4()),
        Value::Null,
    );
    expect(&missing, 404, json!({"error": "Message not found"}));

    *failing.lock().unwrap() = false;
    let before = receiver.count();
    let answer = admin(
        &s,
        "POST",
        "/admin/replay",
        json!({"topics": ["a.sent", "a.dead"]}),
    );
    expect(&answer, 200, json!({"moved": 2}));
    receiver
        .wait_for(Duration::from_secs(20), "both rows again", |r| {
            r.len() >= before + 2
        })
        .await;
    wait_until(Duration::from_secs(10), "both sent", async || {
        count(&schema, "SELECT count(*) FROM outbox WHERE state = 'sent'").await == 3
    })
    .await;
    let again: Vec<String> = receiver.requests()[before..]
        .iter()
        .filter_map(|r| r.header("x-message-id").map(str::to_owned))
        .collect();
    let again: HashSet<_> = again.into_iter().collect();
    assert_eq!(
        again,
        HashSet::from([sent_id.clone(), dead_id.clone()]),
        "OUT-52: same X-Message-Id"
    );
    // The first delivery of the sent row had that id too.
    assert!(
        first
            .iter()
            .any(|r| r.header("x-message-id") == Some(sent_id.as_str()))
    );
    // OUT-50: attempt reset, error cleared.
    let row = admin(
        &s,
        "GET",
        &format!("/admin/outbox/messages/{dead_id}"),
        Value::Null,
    )
    .json();
    assert_eq!(row["state"], "sent");
    assert_eq!(row["lastError"], Value::Null);
    // ADM-10: one info line with the operation, filter, limit, count and auth type.
    s.wait_for_log(Duration::from_secs(5), "admin replay: 2 rows");
    let line = s
        .log
        .iter()
        .find(|l| l["message"] == "admin replay: 2 rows")
        .unwrap()
        .clone();
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["auth"], "bearer");
    assert_eq!(line["count"], 2);
    assert_eq!(line["limit"], "none");
    assert!(
        line["filter"]
            .as_str()
            .unwrap()
            .contains("topics: a.sent,a.dead"),
        "{line}"
    );
    assert!(!line.to_string().contains(TOKEN));
    // A destination filter: `other.*` routes elsewhere, so nothing of ours moves.
    let answer = admin(&s, "POST", "/admin/replay", json!({"destination": "other"}));
    expect(&answer, 200, json!({"moved": 0}));
    let answer = admin(
        &s,
        "POST",
        "/admin/replay",
        json!({"destination": "receiver", "limit": 1}),
    );
    expect(&answer, 200, json!({"moved": 1}));
    assert_eq!(s.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn adm_9_bulk_operations_under_concurrent_delivery_never_move_pending_or_processing_rows() {
    let schema = TestSchema::create("adm_bulk").await;
    let receiver = Receiver::start(|r, _| {
        if r.json()["slow"].as_bool().unwrap_or(false) {
            Reply::status(200).after(Duration::from_secs(4))
        } else {
            Reply::status(200).after(Duration::from_millis(2))
        }
    })
    .await;
    let s = Service::start(
        "adm-bulk",
        &config(&schema, &receiver.url(), &bearer_admin()),
    );
    // 1200 dead rows (three chunks), then 600 live rows delivered while the operator works.
    insert_rows(&schema, "bulk.t", "dead", 1200).await;
    exec(
        &schema,
        "INSERT INTO outbox (topic, payload) VALUES ('bulk.t', '{\"slow\":true}')",
    )
    .await;
    wait_until(
        Duration::from_secs(10),
        "the slow row in processing",
        async || {
            count(
                &schema,
                "SELECT count(*) FROM outbox WHERE state = 'processing'",
            )
            .await
                == 1
        },
    )
    .await;
    let slow: String = schema
        .client()
        .query_one(
            "SELECT id::text FROM outbox WHERE state = 'processing'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    exec(
        &schema,
        "INSERT INTO outbox (topic, payload) SELECT 'bulk.t', jsonb_build_object('live', i) FROM generate_series(1, 600) i",
    )
    .await;
    // A replay or delete naming the processing row does not touch it.
    let answer = admin(&s, "POST", "/admin/replay", json!({"ids": [slow]}));
    expect(&answer, 200, json!({"moved": 0}));
    let answer = admin(
        &s,
        "DELETE",
        &format!("/admin/outbox/messages/{slow}"),
        Value::Null,
    );
    expect(
        &answer,
        409,
        json!({"error": "Only sent or dead rows can be deleted."}),
    );
    // Bulk delete of every dead row of the topic, while live rows are pending and processing.
    let answer = admin(
        &s,
        "POST",
        "/admin/outbox/delete",
        json!({"state": "dead", "topic": "bulk.t"}),
    );
    expect(&answer, 200, json!({"deleted": 1200}));
    // Replay with a limit: only dead/sent rows move, oldest first.
    receiver
        .wait_for(Duration::from_secs(60), "every live row delivered", |r| {
            r.iter().filter(|q| q.json().get("live").is_some()).count() >= 600
        })
        .await;
    wait_until(Duration::from_secs(20), "every row sent", async || {
        count(&schema, "SELECT count(*) FROM outbox WHERE state = 'sent'").await == 601
    })
    .await;
    let live: Vec<String> = receiver
        .requests()
        .iter()
        .filter(|q| q.json().get("live").is_some())
        .filter_map(|q| q.header("x-message-id").map(str::to_owned))
        .collect();
    assert_eq!(live.len(), 600, "no live row delivered twice or lost");
    assert_eq!(
        count(&schema, "SELECT count(*) FROM outbox WHERE state = 'dead'").await,
        0
    );
    assert_eq!(count(&schema, "SELECT count(*) FROM outbox").await, 601);
    assert_eq!(s.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn adm_19_adm_20_adm_23_adm_24_deletes_are_guarded_by_state() {
    let schema = TestSchema::create("adm_delete").await;
    let receiver = Receiver::start(ok).await;
    let s = Service::start(
        "adm-delete",
        &config(&schema, &receiver.url(), &bearer_admin()),
    );
    insert_rows(&schema, "del.sent", "sent", 3).await;
    insert_rows(&schema, "del.dead", "dead", 3).await;
    // A pending row the poller cannot take yet (scheduled in an hour).
    exec(&schema, "INSERT INTO outbox (topic, payload, scheduled_at) VALUES ('del.later', '{}', now() + interval '1 hour')").await;
    let id = |sql: &'static str| {
        let schema = &schema;
        async move {
            let row = schema.client().query_one(sql, &[]).await.unwrap();
            row.get::<_, String>(0)
        }
    };
    let pending = id("SELECT id::text FROM outbox WHERE topic = 'del.later'").await;
    let sent = id("SELECT id::text FROM outbox WHERE topic = 'del.sent' LIMIT 1").await;
    let answer = admin(
        &s,
        "DELETE",
        &format!("/admin/outbox/messages/{pending}"),
        Value::Null,
    );
    expect(
        &answer,
        409,
        json!({"error": "Only sent or dead rows can be deleted."}),
    );
    let answer = admin(
        &s,
        "DELETE",
        &format!("/admin/outbox/messages/{sent}"),
        Value::Null,
    );
    expect(&answer, 200, json!({"deleted": 1}));
    let answer = admin(
        &s,
        "DELETE",
        &format!("/admin/outbox/messages/{sent}"),
        Value::Null,
    );
    expect(&answer, 404, json!({"error": "Message not found"}));
    // Bulk: the state is the guard; a dead delete leaves sent rows, a limit bounds it.
    let answer = admin(
        &s,
        "POST",
        "/admin/outbox/delete",
        json!({"state": "dead", "limit": 2}),
    );
    expect(&answer, 200, json!({"deleted": 2}));
    let answer = admin(&s, "POST", "/admin/outbox/delete", json!({"state": "dead"}));
    expect(&answer, 200, json!({"deleted": 1}));
    let answer = admin(
        &s,
        "POST",
        "/admin/outbox/delete",
        json!({"state": "sent", "topic": "del.sent", "key": "k1"}),
    );
    assert_eq!(answer.status, 200);
    assert_eq!(
        count(
            &schema,
            "SELECT count(*) FROM outbox WHERE topic = 'del.later'"
        )
        .await,
        1
    );

    // Inbox: a processed pull row can go, a pending one cannot.
    exec(
        &schema,
        "INSERT INTO inbox (source, idempotency_key, payload, state, consumption, processed_at) VALUES
           ('jobs', 'done-1', '{}', 'processed', 'pull', now()),
           ('jobs', 'dead-1', '{}', 'dead', 'pull', NULL),
           ('jobs', 'dead-2', '{}', 'dead', 'pull', NULL);
         INSERT INTO inbox (source, idempotency_key, payload, state, consumption, scheduled_at) VALUES
           ('jobs', 'wait-1', '{}', 'pending', 'pull', now() + interval '1 hour');",
    )
    .await;
    let processed = id("SELECT id::text FROM inbox WHERE idempotency_key = 'done-1'").await;
    let waiting = id("SELECT id::text FROM inbox WHERE idempotency_key = 'wait-1'").await;
    let answer = admin(
        &s,
        "DELETE",
        &format!("/admin/inbox/messages/{waiting}"),
        Value::Null,
    );
    expect(
        &answer,
        409,
        json!({"error": "Only processed or dead rows can be deleted."}),
    );
    let answer = admin(
        &s,
        "DELETE",
        &format!("/admin/inbox/messages/{processed}"),
        Value::Null,
    );
    expect(&answer, 200, json!({"deleted": 1}));
    let answer = admin(
        &s,
        "GET",
        &format!("/admin/inbox/messages/{processed}"),
        Value::Null,
    );
    expect(&answer, 404, json!({"error": "Message not found"}));
    let answer = admin(
        &s,
        "POST",
        "/admin/inbox/delete",
        json!({"state": "dead", "idempotencyKey": "dead-1"}),
    );
    expect(&answer, 200, json!({"deleted": 1}));
    let answer = admin(
        &s,
        "POST",
        "/admin/inbox/delete",
        json!({"state": "processed", "source": "jobs"}),
    );
    expect(&answer, 200, json!({"deleted": 0}));
    assert_eq!(count(&schema, "SELECT count(*) FROM inbox").await, 2);
    // ADM-23: once the row is gone, its key no longer deduplicates.
    let answer = support::service::http_post(
        s.port,
        "/inbox/jobs",
        &[("Content-Type", "application/json")],
        br#"{"id":"done-1"}"#,
    );
    assert_eq!(answer.status, 202, "{}", answer.body);
    assert_eq!(s.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn adm_25_rly_18_a_requeued_dead_push_row_makes_a_second_outbox_row_with_a_new_message_id() {
    let schema = TestSchema::create("adm_requeue").await;
    let receiver = Receiver::start(ok).await;
    let s = Service::start(
        "adm-requeue",
        &config(&schema, &receiver.url(), &bearer_admin()),
    );
    let answer = support::service::http_post(
        s.port,
        "/inbox/orders",
        &[("Content-Type", "application/json")],
        br#"{"id":"evt-1","n":1}"#,
    );
    assert_eq!(answer.status, 202, "{}", answer.body);
    receiver
        .wait_for(Duration::from_secs(20), "the first relay", |r| {
            !r.is_empty()
        })
        .await;
    // The row dies (as a failed forward would leave it): test set-up in SQL.
    exec(&schema, "UPDATE inbox SET state = 'dead', last_error = 'simulated failure', processed_at = NULL WHERE idempotency_key = 'evt-1'").await;
    let listed = admin(
        &s,
        "GET",
        "/admin/inbox/messages?source=orders&consumption=push",
        Value::Null,
    );
    let listed = items(&listed);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["idempotencyKey"], "evt-1");
    assert_eq!(listed[0]["lastError"], "simulated failure");
    let inbox_id = listed[0]["id"].as_str().unwrap().to_owned();
    let shown = admin(
        &s,
        "GET",
        &format!("/admin/inbox/messages/{inbox_id}"),
        Value::Null,
    )
    .json();
    assert_eq!(shown["payload"], json!({"id": "evt-1", "n": 1}));
    assert!(shown.get("claimToken").is_none());
    let answer = admin(
        &s,
        "POST",
        "/admin/inbox/requeue",
        json!({"source": "orders", "idempotencyKey": "evt-1"}),
    );
    expect(&answer, 200, json!({"requeued": 1}));
    receiver
        .wait_for(Duration::from_secs(20), "the second relay", |r| {
            r.len() >= 2
        })
        .await;
    let requests = receiver.requests();
    let (a, b) = (&requests[0], &requests[1]);
    assert_ne!(
        a.header("x-message-id"),
        b.header("x-message-id"),
        "RLY-18: a new X-Message-Id"
    );
    assert_eq!(a.header("x-idempotency-key"), Some("evt-1"));
    assert_eq!(b.header("x-idempotency-key"), Some("evt-1"));
    assert_eq!(a.header("x-source"), b.header("x-source"));
    assert_eq!(a.header("x-inbox-id"), Some(inbox_id.as_str()));
    assert_eq!(b.header("x-inbox-id"), Some(inbox_id.as_str()));
    assert_eq!(count(&schema, "SELECT count(*) FROM outbox").await, 2);
    // A requeue moves only dead rows: the row is processed again now.
    wait_until(Duration::from_secs(10), "processed again", async || {
        count(
            &schema,
            "SELECT count(*) FROM inbox WHERE state = 'processed'",
        )
        .await
            == 1
    })
    .await;
    let answer = admin(
        &s,
        "POST",
        "/admin/inbox/requeue",
        json!({"source": "orders"}),
    );
    expect(&answer, 200, json!({"requeued": 0}));
    assert_eq!(s.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn adm_25_rly_17_a_requeued_dead_pull_row_is_claimed_again_by_a_worker() {
    use queuebox_inbox::{PgConnectionSource, Worker, WorkerOptions, handler_fn};
    let schema = TestSchema::create("adm_pull").await;
    let receiver = Receiver::start(ok).await;
    let s = Service::start(
        "adm-pull",
        &config(&schema, &receiver.url(), &bearer_admin()),
    );
    let answer = support::service::http_post(
        s.port,
        "/inbox/jobs",
        &[("Content-Type", "application/json")],
        br#"{"id":"job-1"}"#,
    );
    assert_eq!(answer.status, 202, "{}", answer.body);
    // The project's pull worker, on the same schema: its handler gives up on the first try, so
    // the row goes dead; after the requeue it is claimed again and succeeds.
    let mut pg: tokio_postgres::Config = support::pg::server_url().parse().unwrap();
    pg.options(format!("-c search_path={}", schema.name));
    let manager = deadpool_postgres::Manager::new(pg, tokio_postgres::NoTls);
    let pool = deadpool_postgres::Pool::builder(manager)
        .max_size(4)
        .build()
        .unwrap();
    let mut options = WorkerOptions::new("jobs");
    options.poll_interval = Duration::from_millis(100);
    options.retry_policy = Arc::new(
        queuebox_inbox::DefaultRetryPolicy::new(1, Duration::ZERO, Duration::ZERO, 0.0).unwrap(),
    );
    let worker = Worker::new(PgConnectionSource::new(pool), options).unwrap();
    let seen: Arc<Mutex<Vec<(String, i32)>>> = Arc::default();
    let record = seen.clone();
    let run = tokio::spawn({
        let worker = worker.clone();
        async move {
            worker
                .run(handler_fn(move |m, _tx, _cancel| {
                    let record = record.clone();
                    let id = m.id.to_string();
                    Box::pin(async move {
                        let mut seen = record.lock().unwrap();
                        seen.push((id, 0));
                        if seen.len() == 1 {
                            Err("the first try fails".into())
                        } else {
                            Ok(())
                        }
                    })
                }))
                .await;
        }
    });
    wait_until(Duration::from_secs(20), "the row dead", async || {
        count(&schema, "SELECT count(*) FROM inbox WHERE state = 'dead'").await == 1
    })
    .await;
    let answer = admin(
        &s,
        "POST",
        "/admin/inbox/requeue",
        json!({"consumption": "pull", "source": "jobs"}),
    );
    expect(&answer, 200, json!({"requeued": 1}));
    wait_until(Duration::from_secs(20), "the row processed", async || {
        count(
            &schema,
            "SELECT count(*) FROM inbox WHERE state = 'processed'",
        )
        .await
            == 1
    })
    .await;
    worker.stop();
    run.await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "claimed twice: {seen:?}");
    assert_eq!(seen[0].0, seen[1].0, "the same row (same id) both times");
    assert_eq!(receiver.count(), 0, "the relay never takes a pull row");
    assert_eq!(s.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn adm_14_transform_test_and_stats() {
    let schema = TestSchema::create("adm_misc").await;
    let receiver = Receiver::start(ok).await;
    let s = Service::start(
        "adm-misc",
        &config(&schema, &receiver.url(), &bearer_admin()),
    );
    let answer = admin(
        &s,
        "POST",
        "/admin/transform/test",
        json!({"expression": "{\"t\": $topic, \"n\": n * 2, \"a\": $attempt}", "payload": {"n": 21}, "context": {"topic": "x.y", "attempt": 2}}),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let body = answer.json();
    assert_eq!(body["result"], json!({"t": "x.y", "n": 42, "a": 2}));
    assert_eq!(body["context"]["topic"], "x.y");
    assert!(
        body["context"]["timestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert!(uuid::Uuid::try_parse(body["context"]["messageId"].as_str().unwrap()).is_ok());
    let answer = admin(
        &s,
        "POST",
        "/admin/transform/test",
        json!({"expression": "$source & ':' & $idempotencyKey & ':' & $timestamp", "payload": {}, "stage": "source"}),
    );
    let body = answer.json();
    assert_eq!(
        body["result"],
        json!(format!(
            "test:test-key:{}",
            body["context"]["timestamp"].as_str().unwrap()
        ))
    );
    assert_eq!(body["context"]["eventType"], Value::Null);
    let answer = admin(
        &s,
        "POST",
        "/admin/transform/test",
        json!({"expression": "(", "payload": {}}),
    );
    assert_eq!(answer.status, 400);
    assert!(
        answer.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("Invalid expression: ")
    );
    let answer = admin(
        &s,
        "POST",
        "/admin/transform/test",
        json!({"expression": "nothing", "payload": {}}),
    );
    expect(
        &answer,
        422,
        json!({"error": "Transform failed: The expression produced no value."}),
    );
    let answer = admin(
        &s,
        "POST",
        "/admin/transform/test",
        json!({"expression": "1", "payload": {}, "context": {"source": "x"}}),
    );
    expect(&answer, 400, json!({"error": "Unknown field: source"}));
    let answer = admin(&s, "POST", "/admin/transform/test", json!({"payload": {}}));
    expect(
        &answer,
        400,
        json!({"error": "Invalid request: expression is required"}),
    );

    // Stats: per state, per topic, per destination, per source.
    insert_rows(&schema, "s.one", "dead", 2).await;
    insert_rows(&schema, "other.two", "dead", 3).await;
    insert_rows(&schema, "s.one", "sent", 4).await;
    exec(&schema, "INSERT INTO inbox (source, idempotency_key, payload, state, consumption) VALUES ('jobs', 'a', '{}', 'dead', 'pull'), ('jobs', 'b', '{}', 'processed', 'pull')").await;
    let stats = admin(&s, "GET", "/admin/stats", Value::Null);
    assert_eq!(stats.status, 200, "{}", stats.body);
    let stats = stats.json();
    assert_eq!(
        stats["outbox"]["states"],
        json!({"pending": 0, "processing": 0, "sent": 4, "dead": 5})
    );
    // A table never vacuumed or analyzed: every total is counted, none estimated.
    assert_eq!(stats["outbox"]["estimated"], json!([]));
    assert_eq!(stats["inbox"]["estimated"], json!([]));
    assert_eq!(
        stats["outbox"]["topics"],
        json!([
            {"topic": "other.two", "states": {"pending": 0, "processing": 0, "dead": 3}},
            {"topic": "s.one", "states": {"pending": 0, "processing": 0, "dead": 2}},
        ])
    );
    assert_eq!(
        stats["outbox"]["deadByDestination"],
        json!([{"destination": "other", "dead": 3}, {"destination": "receiver", "dead": 2}])
    );
    assert_eq!(
        stats["inbox"]["states"],
        json!({"pending": 0, "processing": 0, "processed": 1, "dead": 1})
    );
    assert_eq!(stats["inbox"]["sources"][0]["source"], "jobs");
    assert!(
        stats["outbox"]["oldestPendingAgeSeconds"]
            .as_f64()
            .is_some()
    );
    let answer = admin(&s, "GET", "/admin/stats?x=1", Value::Null);
    expect(&answer, 400, json!({"error": "Unknown field: x"}));
    assert_eq!(s.stop(), Some(0));
    schema.drop().await;
}
