//! The inbox end to end: the real `queuebox` binary over HTTP, the real PostgreSQL, the push
//! relay into the outbox and retention (inbox.md §3, §9, §11; operations.md retention, OPS-26).

mod support;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use support::pg::TestSchema;
use support::receiver::{Receiver, Reply};
use support::service::{Answer, Service, http_post, migrate};

/// One push source `orders` (key `$.id`, aggregate `$.orderId`, topic from `$.type`), one pull
/// source `jobs`, and a receiver for every relayed message.
fn config(schema: &TestSchema, receiver: &Receiver, extra: &str) -> String {
    format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
inbox:
  maxBodyBytes: 2048
  relay:
    pollIntervalMs: 50
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    aggregateIdPath: $.orderId
    eventTypePath: $.type
  partner:
    path: /partner
    idempotencyKeyPath: $.id
    topic: partner.event
    auth:
      type: hmac
      secret: s3cret
      timestampHeader: X-Timestamp
  jobs:
    path: /jobs
    idempotencyKeyPath: $.id
    consumption: pull
destinations:
  receiver:
    type: http
    baseUrl: {url}
routes:
  - topicPattern: "**"
    destination: receiver
{extra}"#,
        db = schema.queuebox_url(),
        url = receiver.url()
    )
}

fn post(service: &Service, path: &str, body: &str) -> Answer {
    http_post(
        service.port,
        path,
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
}

async fn count(schema: &TestSchema, sql: &str) -> i64 {
    schema.client().query_one(sql, &[]).await.unwrap().get(0)
}

/// The one text column of every row `sql` returns.
async fn texts(schema: &TestSchema, sql: &str) -> Vec<String> {
    let rows = schema.client().query(sql, &[]).await.unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

/// The three text columns of every row `sql` returns.
async fn text_triples(schema: &TestSchema, sql: &str) -> Vec<(String, String, String)> {
    let rows = schema.client().query(sql, &[]).await.unwrap();
    rows.iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

async fn wait_count(schema: &TestSchema, sql: &str, expected: i64, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let n = count(schema, sql).await;
        if n == expected {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{sql}: {n}, expected {expected}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// INB-10; also proves PULL-1 (receipt part): the row stores `consumption` from its source's
/// configuration, `pull` for `jobs` and the default `push` for `orders`.
#[tokio::test(flavor = "multi_thread")]
async fn inb_10_the_same_webhook_twice_is_stored_once_and_sources_are_separate() {
    let schema = TestSchema::create("in_dup").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let service = Service::start("in-dup", &config(&schema, &receiver, ""));
    let body = r#"{"id": "evt_1", "orderId": "o-1", "type": "order.created"}"#;
    let first = post(&service, "/inbox/orders", body);
    assert_eq!(first.status, 202, "{first:?}");
    let id = first.json()["messageId"].as_str().unwrap().to_owned();
    assert!(first.header("x-correlation-id").is_some(), "INB-6");
    let second = post(&service, "/inbox/orders", body);
    assert_eq!(
        (second.status, second.json()),
        (200, serde_json::json!({"status": "duplicate"}))
    );
    // The same event id from another source is another message (pull source: no relay).
    let other = post(&service, "/inbox/jobs", body);
    assert_eq!(other.status, 202);
    let rows = text_triples(
        &schema,
        "SELECT id::text, source, consumption FROM inbox ORDER BY source",
    )
    .await;
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].1, "jobs");
    assert_eq!(rows[0].2, "pull");
    assert_eq!(rows[1], (id, "orders".to_owned(), "push".to_owned()));
    // The push row is relayed and delivered; the pull row is never touched (INB-3).
    receiver
        .wait_for(Duration::from_secs(10), "the relayed delivery", |r| {
            r.len() == 1
        })
        .await;
    assert_eq!(
        receiver.requests()[0].header("x-topic"),
        Some("order.created")
    );
    assert_eq!(
        count(
            &schema,
            "SELECT count(*) FROM inbox WHERE source = 'jobs' AND state = 'pending'"
        )
        .await,
        1
    );
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// PULL-1 (configuration change part): a row keeps the `consumption` it was stored with. A pull
/// row stored while `jobs` was a pull source stays `pull` and untouched after `jobs` becomes a
/// push source, while the relay forwards the rows stored after the change.
#[tokio::test(flavor = "multi_thread")]
async fn pull_1_a_configuration_change_never_alters_a_stored_row() {
    let schema = TestSchema::create("in_pull1").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let as_pull = config(&schema, &receiver, "");
    assert!(as_pull.contains("    consumption: pull\n"));
    let service = Service::start("in-pull1-a", &as_pull);
    assert_eq!(
        post(&service, "/inbox/jobs", r#"{"id": "j-1"}"#).status,
        202
    );
    assert_eq!(service.stop(), Some(0));

    let as_push = as_pull.replace("    consumption: pull\n", "    topic: jobs.event\n");
    let service = Service::start("in-pull1-b", &as_push);
    assert_eq!(
        post(&service, "/inbox/jobs", r#"{"id": "j-2"}"#).status,
        202
    );
    receiver
        .wait_for(Duration::from_secs(10), "the push row relayed", |r| {
            !r.is_empty()
        })
        .await;
    // Several relay polls (every 50 ms) later, still only the row stored as push went out.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let delivered: Vec<String> = receiver
        .requests()
        .iter()
        .map(|r| r.json()["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(delivered, ["j-2"]);
    let rows = text_triples(
        &schema,
        "SELECT idempotency_key, consumption, state FROM inbox ORDER BY idempotency_key",
    )
    .await;
    assert_eq!(
        rows,
        [
            ("j-1".to_owned(), "pull".to_owned(), "pending".to_owned()),
            ("j-2".to_owned(), "push".to_owned(), "processed".to_owned()),
        ]
    );
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// INB-10's 422 (issue 17 defect 7): a webhook whose data PostgreSQL refuses (`\u0000` in a
/// JSON string, which `jsonb` cannot hold; a number beyond `numeric`'s range) can never be
/// stored, so it gets 422 with the database's reason instead of a 500 that asks for a retry for
/// ever. It leaves no row and logs its own warning naming the source; the next webhook is stored.
#[tokio::test(flavor = "multi_thread")]
async fn inb_10_a_body_the_database_refuses_gets_422_with_the_reason_and_the_next_is_stored() {
    let schema = TestSchema::create("in_refused").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let mut service = Service::start("in-refused", &config(&schema, &receiver, ""));
    let refused = post(
        &service,
        "/inbox/jobs",
        r#"{"id": "bad", "note": "a\u0000b"}"#,
    );
    assert_eq!(refused.status, 422, "{refused:?}");
    let error = refused.json()["error"].as_str().unwrap().to_owned();
    assert!(
        error.starts_with("The message cannot be stored: ")
            && error.contains("unsupported Unicode escape sequence"),
        "{error}"
    );
    let number = post(&service, "/inbox/jobs", r#"{"id": "num", "n": 1e-20000}"#);
    assert_eq!(number.status, 422, "{number:?}");
    assert!(
        number.json()["error"]
            .as_str()
            .unwrap()
            .contains("value overflows numeric format"),
        "{number:?}"
    );
    service.wait_for_log(
        Duration::from_secs(5),
        "The database refused a message's data. Its sender is told that it cannot be stored.",
    );
    let line = service
        .log
        .iter()
        .find(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("The database refused"))
        })
        .unwrap()
        .clone();
    assert_eq!(line["level"], "WARN");
    assert_eq!(line["source"], "jobs");
    let stored = post(&service, "/inbox/jobs", r#"{"id": "good"}"#);
    assert_eq!(stored.status, 202, "{stored:?}");
    let keys = texts(&schema, "SELECT idempotency_key FROM inbox").await;
    assert_eq!(keys, ["good"]);
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inb_10_bad_requests_get_their_status_and_leave_no_row() {
    let schema = TestSchema::create("in_bad").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let service = Service::start("in-bad", &config(&schema, &receiver, ""));
    let answer = post(&service, "/inbox/orders", "{not json");
    assert_eq!(
        (answer.status, answer.json()),
        (400, serde_json::json!({"error": "Invalid JSON"}))
    );
    // Valid JSON beyond a parser limit says which (issue 17 defect 7).
    let deep = format!(
        r#"{{"id": "d", "x": {}{}}}"#,
        "[".repeat(128),
        "]".repeat(128)
    );
    let answer = post(&service, "/inbox/orders", &deep);
    assert_eq!(
        (answer.status, answer.json()),
        (
            400,
            serde_json::json!({"error": "Unsupported JSON: nested deeper than 128 levels"})
        )
    );
    let answer = post(&service, "/inbox/orders", r#"{"id": "n", "x": 1e400}"#);
    assert_eq!(
        (answer.status, answer.json()),
        (
            400,
            serde_json::json!({"error": "Unsupported JSON: a number beyond the range of a 64-bit float"})
        )
    );
    let answer = post(&service, "/inbox/orders", r#"{"no": "key"}"#);
    assert_eq!(
        (answer.status, answer.json()),
        (
            400,
            serde_json::json!({"error": "No idempotency key found"})
        )
    );
    let big = format!(r#"{{"id": "x", "pad": "{}"}}"#, "a".repeat(3000));
    let answer = post(&service, "/inbox/orders", &big);
    assert_eq!(
        (answer.status, answer.json()),
        (
            413,
            serde_json::json!({"error": "Request body exceeds 2048 bytes"})
        )
    );
    // HMAC: missing, wrong and stale signatures (INB-20).
    let body = br#"{"id": "p-1"}"#;
    let answer = http_post(service.port, "/inbox/partner", &[], body);
    assert_eq!(
        (answer.status, answer.json()["error"].as_str()),
        (401, Some("Missing X-Signature header"))
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let answer = http_post(
        service.port,
        "/inbox/partner",
        &[("X-Signature", "sha256=00"), ("X-Timestamp", &now)],
        body,
    );
    assert_eq!(
        (answer.status, answer.json()["error"].as_str()),
        (401, Some("Invalid signature"))
    );
    let answer = http_post(
        service.port,
        "/inbox/partner",
        &[("X-Signature", "sha256=00"), ("X-Timestamp", "1000000000")],
        body,
    );
    assert_eq!(
        (answer.status, answer.json()["error"].as_str()),
        (401, Some("Request timestamp expired"))
    );
    let answer = post(&service, "/inbox/nowhere", r#"{"id": 1}"#);
    assert_eq!(answer.status, 404);
    assert_eq!(
        count(&schema, "SELECT count(*) FROM inbox").await,
        0,
        "no rejected request leaves a row"
    );
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rly_11_a_senders_identity_headers_are_replaced_and_others_kept() {
    let schema = TestSchema::create("in_ident").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let service = Service::start("in-ident", &config(&schema, &receiver, ""));
    let answer = http_post(
        service.port,
        "/inbox/orders",
        &[
            ("x-inbox-id", "00000000-0000-0000-0000-000000000000"),
            ("X-SOURCE", "forged"),
            ("X-Idempotency-Key", "forged"),
            ("X-Correlation-Id", "corr-7"),
            ("X-Tenant", "acme"),
            ("Authorization", "Bearer never-stored"),
        ],
        br#"{"id": "evt_9", "orderId": "o-9", "type": "order.paid"}"#,
    );
    assert_eq!(answer.status, 202, "{answer:?}");
    assert_eq!(
        answer.header("x-correlation-id"),
        Some("corr-7"),
        "INB-28: echoed"
    );
    let inbox_id = answer.json()["messageId"].as_str().unwrap().to_owned();
    receiver
        .wait_for(Duration::from_secs(10), "the delivery", |r| r.len() == 1)
        .await;
    let delivered = &receiver.requests()[0];
    assert_eq!(delivered.header("x-inbox-id"), Some(inbox_id.as_str()));
    assert_eq!(delivered.header("x-source"), Some("orders"));
    assert_eq!(delivered.header("x-idempotency-key"), Some("evt_9"));
    assert_eq!(delivered.header("x-correlation-id"), Some("corr-7"));
    assert_eq!(delivered.header("x-tenant"), Some("acme"));
    assert_eq!(
        delivered.header("authorization"),
        None,
        "credential headers are never stored"
    );
    assert_eq!(
        delivered.header("x-message-key"),
        Some("o-9"),
        "the aggregate id is the outbox key"
    );
    let headers: serde_json::Value = schema
        .client()
        .query_one("SELECT headers FROM outbox", &[])
        .await
        .unwrap()
        .get(0);
    let names: Vec<&String> = headers.as_object().unwrap().keys().collect();
    let identity = names
        .iter()
        .filter(|n| {
            [
                "x-inbox-id",
                "x-source",
                "x-idempotency-key",
                "x-correlation-id",
            ]
            .contains(&n.to_ascii_lowercase().as_str())
        })
        .count();
    assert_eq!(identity, 4, "each identity header once: {names:?}");
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// Inserts `n` push rows of 10 aggregates directly, as the intake would have.
async fn seed_push_rows(schema: &TestSchema, n: usize) {
    let mut sql = String::from("BEGIN;");
    for i in 0..n {
        sql.push_str(&format!(
            "INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, payload, headers, created_at) \
             VALUES (gen_random_uuid(), 'orders', 'k{i}', 'a{}', 'order.step', '{{\"n\": {i}}}', '{{}}', clock_timestamp());",
            i % 10
        ));
    }
    sql.push_str("COMMIT;");
    schema.client().batch_execute(&sql).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn rly_13_kill_9_during_relay_forwarding_forwards_each_row_exactly_once() {
    let schema = TestSchema::create("in_kill").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let cfg = config(&schema, &receiver, "").replace(
        "  relay:\n    pollIntervalMs: 50",
        "  relay:\n    pollIntervalMs: 50\n    claimTimeoutMs: 1500",
    );
    let service = Service::start("in-kill-a", &cfg);
    seed_push_rows(&schema, 1500).await;
    // Kill as soon as the relay is part-way through.
    wait_until_at_least(
        &schema,
        "SELECT count(*) FROM inbox WHERE state = 'processed'",
        100,
    )
    .await;
    service.kill_hard();
    let processed = count(
        &schema,
        "SELECT count(*) FROM inbox WHERE state = 'processed'",
    )
    .await;
    assert!(
        processed < 1500,
        "the kill came part-way ({processed} forwarded)"
    );
    let again = Service::start("in-kill-b", &cfg);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox WHERE state = 'processed'",
        1500,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(count(&schema, "SELECT count(*) FROM outbox").await, 1500);
    assert_eq!(
        count(
            &schema,
            "SELECT count(DISTINCT headers ->> 'x-inbox-id') FROM outbox"
        )
        .await,
        1500,
        "each inbox row exactly once in the outbox"
    );
    assert_eq!(again.stop(), Some(0));
    schema.drop().await;
}

async fn wait_until_at_least(schema: &TestSchema, sql: &str, n: i64) {
    for _ in 0..400 {
        if count(schema, sql).await >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{sql} never reached {n}");
}

#[tokio::test(flavor = "multi_thread")]
async fn rly_3_two_relays_keep_inbox_order_per_aggregate() {
    let schema = TestSchema::create("in_order").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    migrate(&schema.queuebox_url());
    seed_push_rows(&schema, 300).await;
    let cfg = config(&schema, &receiver, "");
    let a = Service::start("in-order-a", &cfg);
    let b = Service::start("in-order-b", &cfg);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox WHERE state = 'processed'",
        300,
        Duration::from_secs(60),
    )
    .await;
    let rows = schema
        .client()
        .query(
            "SELECT key, (payload ->> 'n')::int FROM outbox ORDER BY sequence",
            &[],
        )
        .await
        .unwrap();
    let mut last: BTreeMap<String, i32> = BTreeMap::new();
    for row in &rows {
        let (key, n): (String, i32) = (row.get(0), row.get(1));
        if let Some(previous) = last.insert(key.clone(), n) {
            assert!(
                n > previous,
                "aggregate {key}: {n} entered the outbox after {previous}"
            );
        }
    }
    assert_eq!(rows.len(), 300);
    assert_eq!(a.stop(), Some(0));
    assert_eq!(b.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ret_retention_deletes_old_finished_rows_only_and_a_repeat_is_then_new() {
    let schema = TestSchema::create("in_ret").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let retention = "retention:\n  enabled: true\n  outbox:\n    policy: AGE\n    maxAge: 1h\n    cleanupInterval: 1s\n  inbox:\n    policy: AGE\n    maxAge: 1h\n    cleanupInterval: 1s\n";
    let cfg = config(&schema, &receiver, retention).replace(
        "    pollIntervalMs: 50\nsources",
        "    enabled: false\nsources",
    );
    // Old rows in every state, written before QueueBox starts.
    migrate(&schema.queuebox_url());
    schema
        .client()
        .batch_execute(
            "INSERT INTO inbox (source, idempotency_key, payload, state, created_at) VALUES
               ('orders', 'old-processed', '{}', 'processed', now() - interval '2 hours'),
               ('orders', 'old-dead', '{}', 'dead', now() - interval '2 hours'),
               ('orders', 'old-pending', '{}', 'pending', now() - interval '2 hours'),
               ('orders', 'new-processed', '{}', 'processed', now());
             INSERT INTO outbox (topic, payload, state, updated_at) VALUES
               ('t', '{}', 'sent', now() - interval '2 hours'),
               ('t', '{}', 'dead', now() - interval '2 hours'),
               ('t', '{}', 'sent', now());
             INSERT INTO outbox (topic, payload, scheduled_at, updated_at) VALUES
               ('t', '{}', now() + interval '1 day', now() - interval '2 hours');",
        )
        .await
        .unwrap();
    let service = Service::start("in-ret", &cfg);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        2,
        Duration::from_secs(10),
    )
    .await;
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox",
        2,
        Duration::from_secs(10),
    )
    .await;
    let kept: HashSet<String> = texts(&schema, "SELECT idempotency_key FROM inbox")
        .await
        .into_iter()
        .collect();
    assert_eq!(
        kept,
        HashSet::from(["old-pending".to_owned(), "new-processed".to_owned()])
    );
    assert_eq!(
        count(
            &schema,
            "SELECT count(*) FROM outbox WHERE state = 'pending'"
        )
        .await,
        1,
        "active rows stay"
    );
    // RET: a deleted inbox row no longer deduplicates its key.
    let again = post(
        &service,
        "/inbox/orders",
        r#"{"id": "old-processed", "type": "order.created"}"#,
    );
    assert_eq!(
        again.status, 202,
        "accepted as new after retention: {again:?}"
    );
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ops_28_requests_during_the_drain_get_503_and_no_accepted_message_is_lost() {
    let schema = TestSchema::create("in_drain").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let service = Service::start("in-drain", &config(&schema, &receiver, ""));
    let port = service.port;
    let senders: Vec<_> = (0..4)
        .map(|worker| {
            std::thread::spawn(move || {
                let mut answers = Vec::new();
                for i in 0..400 {
                    let body =
                        format!(r#"{{"id": "w{worker}-{i}", "orderId": "o{i}", "type": "t"}}"#);
                    let answer = std::panic::catch_unwind(|| {
                        http_post(port, "/inbox/orders", &[], body.as_bytes())
                    });
                    match answer {
                        Ok(answer) if answer.status != 0 => answers.push(answer),
                        _ => break, // the listener closed
                    }
                }
                answers
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(400));
    service.signal("TERM");
    let answers: Vec<Answer> = senders
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let accepted: Vec<String> = answers
        .iter()
        .filter(|a| a.status == 202)
        .map(|a| a.json()["messageId"].as_str().unwrap().to_owned())
        .collect();
    assert!(!accepted.is_empty());
    for answer in &answers {
        assert!(
            matches!(answer.status, 202 | 503),
            "only 202 or 503 during a drain: {answer:?}"
        );
        if answer.status == 503 {
            assert_eq!(
                answer.json(),
                serde_json::json!({"error": "QueueBox is shutting down"})
            );
        }
    }
    assert_eq!(service.wait(), Some(0), "a clean shutdown");
    for id in &accepted {
        let found = count(
            &schema,
            &format!("SELECT count(*) FROM inbox WHERE id = '{id}'"),
        )
        .await;
        assert_eq!(found, 1, "a 202 is never lost: {id}");
    }
    schema.drop().await;
}
