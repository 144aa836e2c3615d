//! The inbox requirements that only the running binary can show, one test per id (inbox.md
//! INB-4 item 4, INB-9, INB-28, INB-32, INB-38, INB-47, INB-51, RLY-1; operations.md RET-11):
//! the real `queuebox` over HTTP against the real PostgreSQL.

mod support;

use std::time::{Duration, Instant};

use support::pg::TestSchema;
use support::process::{Scratch, queuebox, stderr};
use support::receiver::{Receiver, Reply};
use support::service::{Answer, Service, http_post};

/// A push source `orders` (key `$.id`, aggregate `$.orderId`, event type `$.type`), a pull
/// source `webhooks` keyed by headers, an hmac source `partner`, and a receiver for the relay.
fn config(schema: &TestSchema, receiver: &Receiver, relay: &str, extra: &str) -> String {
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
{relay}sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    aggregateIdPath: $.orderId
    eventTypePath: $.type
  webhooks:
    path: /webhooks
    consumption: pull
    idempotencyKeyHeader: X-Event-Id
    aggregateIdHeader: x-order-id
    eventTypeHeader: X-Event-Type
  partner:
    path: /partner
    idempotencyKeyPath: $.id
    consumption: pull
    auth:
      type: hmac
      secret: s3cret
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

async fn accept_all() -> Receiver {
    Receiver::start(|_, _| Reply::status(200)).await
}

fn post(service: &Service, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    http_post(service.port, path, headers, body.as_bytes())
}

async fn count(schema: &TestSchema, sql: &str) -> i64 {
    schema.client().query_one(sql, &[]).await.unwrap().get(0)
}

async fn wait_count(schema: &TestSchema, sql: &str, expected: i64, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let n = count(schema, sql).await;
        if n == expected {
            return;
        }
        assert!(Instant::now() < deadline, "{sql}: {n}, expected {expected}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn message_id(answer: &Answer) -> String {
    assert_eq!(answer.status, 202, "{answer:?}");
    answer.json()["messageId"]
        .as_str()
        .unwrap_or_else(|| panic!("a messageId: {answer:?}"))
        .to_owned()
}

/// INB-9: a 202 for a new row comes only after the insert committed: the `messageId` of each
/// answer is visible, with its key and state `pending`, from another connection at once.
#[tokio::test(flavor = "multi_thread")]
async fn inb_9_202_only_after_the_row_is_committed() {
    let schema = TestSchema::create("ids_inb9").await;
    let receiver = accept_all().await;
    let service = Service::start("ids-inb9", &config(&schema, &receiver, "", ""));
    for i in 0..25 {
        let key = format!("evt-{i}");
        let answer = post(
            &service,
            "/inbox/webhooks",
            &[("X-Event-Id", &key)],
            r#"{"n": 1}"#,
        );
        let id = message_id(&answer);
        // Read committed, another session, no wait: the row is there.
        let rows = schema
            .client()
            .query(
                "SELECT idempotency_key, state FROM inbox WHERE id = $1::text::uuid",
                &[&id],
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 1, "the row of the 202 {id} is committed");
        assert_eq!(rows[0].get::<_, String>(0), key);
        assert_eq!(rows[0].get::<_, String>(1), "pending");
    }
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// The `X-Correlation-Id` of an answer.
fn correlation(answer: &Answer) -> &str {
    answer
        .header("x-correlation-id")
        .unwrap_or_else(|| panic!("X-Correlation-Id on every answer: {answer:?}"))
}

fn is_new_uuid(value: &str) -> bool {
    uuid::Uuid::parse_str(value)
        .is_ok_and(|u| u.get_version_num() == 4 && u.hyphenated().to_string() == value)
}

/// INB-28 (with INB-27): an `http` source answers with the correlation id in `X-Correlation-Id`
/// on 202, 200, 400, 401 and 413: the sent one echoed, or a new lower-case v4 UUID when none is
/// sent. The stored row and the log lines about the message carry the same value.
#[tokio::test(flavor = "multi_thread")]
async fn inb_28_correlation_id_is_echoed_or_generated_on_every_answer() {
    let schema = TestSchema::create("ids_inb28").await;
    let receiver = accept_all().await;
    let mut service = Service::start(
        "ids-inb28",
        &config(&schema, &receiver, "", "log:\n  level: debug\n"),
    );
    let big = format!(r#"{{"id": "x", "pad": "{}"}}"#, "a".repeat(3000));
    let cases: [(&str, &str, &str, u16); 6] = [
        ("/inbox/webhooks", "corr-new", r#"{"n": 1}"#, 202),
        ("/inbox/webhooks", "corr-dup", r#"{"n": 1}"#, 200),
        ("/inbox/webhooks", "corr-json", "{not json", 400),
        ("/inbox/orders", "corr-nokey", r#"{"no": "key"}"#, 400),
        ("/inbox/partner", "corr-auth", r#"{"id": "p"}"#, 401),
        ("/inbox/orders", "corr-big", &big, 413),
    ];
    // The correlation ids that log lines must carry: the sent and the generated ones.
    let mut logged: Vec<(String, u16)> = Vec::new();
    for (path, id, body, status) in cases {
        let sent = [("X-Event-Id", "evt-1"), ("X-Correlation-Id", id)];
        let answer = post(&service, path, &sent, body);
        assert_eq!(answer.status, status, "{id}: {answer:?}");
        assert_eq!(correlation(&answer), id, "echoed on {status}");
        let unsent = post(&service, path, &sent[..1], body);
        assert_eq!(unsent.status, if status == 202 { 200 } else { status });
        let generated = correlation(&unsent);
        assert!(is_new_uuid(generated), "generated on {status}: {generated}");
        assert_ne!(generated, id);
        logged.push((id.to_owned(), status));
        logged.push((generated.to_owned(), unsent.status));
    }
    // A new message without one gets a fresh UUID each time, and the row keeps it.
    let a = post(
        &service,
        "/inbox/webhooks",
        &[("X-Event-Id", "evt-2")],
        "{}",
    );
    let b = post(
        &service,
        "/inbox/webhooks",
        &[("X-Event-Id", "evt-3")],
        "{}",
    );
    assert_ne!(correlation(&a), correlation(&b));
    for answer in [&a, &b] {
        let stored: String = schema
            .client()
            .query_one(
                "SELECT correlation_id FROM inbox WHERE id = $1::text::uuid",
                &[&message_id(answer)],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(stored, correlation(answer));
    }
    let stored: String = schema
        .client()
        .query_one(
            "SELECT correlation_id FROM inbox WHERE idempotency_key = 'evt-1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, "corr-new");
    // INB-27: cut to 128 characters.
    let long = "c".repeat(200);
    let answer = post(
        &service,
        "/inbox/webhooks",
        &[("X-Event-Id", "evt-4"), ("X-Correlation-Id", &long)],
        "{}",
    );
    assert_eq!(correlation(&answer), &long[..128]);
    // The log lines about each message carry its correlation id (debug level: every outcome
    // that is logged; a 413 is answered before the message exists and is not).
    service.wait_for_log(Duration::from_secs(5), "No idempotency key found");
    std::thread::sleep(Duration::from_millis(200));
    service.drain_log();
    for (id, status) in logged.iter().filter(|(_, status)| *status != 413) {
        assert!(
            service
                .log
                .iter()
                .any(|l| l["correlationId"] == id.as_str() && l["source"].is_string()),
            "a log line about the {status} message with correlationId {id}: {:#?}",
            service.log
        );
    }
    for line in service.log.iter().filter(|l| l["source"].is_string()) {
        assert!(
            line["correlationId"].is_string(),
            "a line about a message without correlationId: {line}"
        );
    }
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// INB-32: the key, aggregate-id and event-type headers are looked up in any letter case.
#[tokio::test(flavor = "multi_thread")]
async fn inb_32_the_key_header_is_matched_in_any_letter_case() {
    let schema = TestSchema::create("ids_inb32").await;
    let receiver = accept_all().await;
    let service = Service::start("ids-inb32", &config(&schema, &receiver, "", ""));
    // Configured as X-Event-Id, x-order-id, X-Event-Type.
    let first = post(
        &service,
        "/inbox/webhooks",
        &[
            ("x-event-id", "k-1"),
            ("X-ORDER-ID", "o-1"),
            ("x-eVeNt-TyPe", "order.created"),
        ],
        "{}",
    );
    let id = message_id(&first);
    let row = schema
        .client()
        .query_one(
            "SELECT idempotency_key, aggregate_id, event_type FROM inbox WHERE id = $1::text::uuid",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            row.get::<_, String>(0),
            row.get::<_, Option<String>>(1),
            row.get::<_, Option<String>>(2)
        ),
        (
            "k-1".to_owned(),
            Some("o-1".to_owned()),
            Some("order.created".to_owned())
        )
    );
    // The same key in another spelling of the name is the same message.
    for name in ["X-EVENT-ID", "X-Event-Id", "x-EVENT-id"] {
        let again = post(&service, "/inbox/webhooks", &[(name, "k-1")], "{}");
        assert_eq!(
            (again.status, again.json()),
            (200, serde_json::json!({"status": "duplicate"})),
            "{name}"
        );
    }
    let other = post(&service, "/inbox/webhooks", &[("X-EVENT-ID", "k-2")], "{}");
    message_id(&other);
    assert_eq!(count(&schema, "SELECT count(*) FROM inbox").await, 2);
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// INB-38: the three attributes come from the original payload (as received and parsed), and
/// that payload is what is stored. (No source transform runs in this build: INB-47.)
#[tokio::test(flavor = "multi_thread")]
async fn inb_38_attributes_come_from_the_original_payload() {
    let schema = TestSchema::create("ids_inb38").await;
    let receiver = accept_all().await;
    let relay = "    enabled: false\n";
    let extra = "  nested:\n    path: /nested\n    consumption: pull\n    idempotencyKeyPath: [$.missing, $.data.object.id]\n    aggregateIdPath: $.data.object.order\n    eventTypePath: $.meta.type\n";
    let cfg = config(&schema, &receiver, relay, "")
        .replace("destinations:\n", &format!("{extra}destinations:\n"));
    let service = Service::start("ids-inb38", &cfg);
    let body = r#"{"data": {"object": {"id": 42.0, "order": 1e3}}, "meta": {"type": " invoice.paid "}, "id": "top"}"#;
    let answer = post(&service, "/inbox/nested", &[], body);
    let id = message_id(&answer);
    let row = schema
        .client()
        .query_one(
            "SELECT idempotency_key, aggregate_id, event_type, payload = $2::text::jsonb \
             FROM inbox WHERE id = $1::text::uuid",
            &[&id, &body],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            row.get::<_, String>(0),
            row.get::<_, Option<String>>(1),
            row.get::<_, Option<String>>(2),
            row.get::<_, bool>(3),
        ),
        (
            "42".to_owned(),
            Some("1000".to_owned()),
            Some("invoice.paid".to_owned()),
            true
        ),
        "values from the body's paths, normalized (INB-37); the body stored as received"
    );
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// INB-51: with no transform, the payload column holds the body text as received, as `jsonb`
/// normalizes it: digits and scale of numbers kept, nothing re-serialized through a float.
#[tokio::test(flavor = "multi_thread")]
async fn inb_51_the_body_reaches_the_payload_column_as_received() {
    let schema = TestSchema::create("ids_inb51").await;
    let receiver = accept_all().await;
    let service = Service::start(
        "ids-inb51",
        &config(&schema, &receiver, "    enabled: false\n", ""),
    );
    // A `type`, since the source's relay topic is `{{ eventType }}` (issue 14 item 6).
    let body = "{ \"id\" : \"p-1\", \"type\": \"t\", \"amount\": 12345678901234567890.1230, \"n\": 2.50,\n  \"s\": \"\\u00e9\", \"dup\": 1, \"dup\": 2 }";
    let id = message_id(&post(&service, "/inbox/orders", &[], body));
    let row = schema
        .client()
        .query_one(
            "SELECT payload::text, $2::text::jsonb::text, payload ->> 'amount' \
             FROM inbox WHERE id = $1::text::uuid",
            &[&id, &body],
        )
        .await
        .unwrap();
    let (stored, expected, amount): (String, String, String) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(stored, expected);
    assert_eq!(amount, "12345678901234567890.1230");
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// RET-11 (with INB-52): once an inbox row is deleted, by retention or by an operator, its key no
/// longer deduplicates: a repeat is a new message with a new id. The configuration reference
/// says so next to `inbox.maxAge`.
#[tokio::test(flavor = "multi_thread")]
async fn ret_11_a_repeat_after_the_inbox_row_was_deleted_is_new() {
    let schema = TestSchema::create("ids_ret11").await;
    let receiver = accept_all().await;
    let retention = "retention:\n  enabled: true\n  inbox:\n    policy: AGE\n    maxAge: 1h\n    cleanupInterval: 1s\n";
    let service = Service::start(
        "ids-ret11",
        &config(&schema, &receiver, "    enabled: false\n", retention),
    );
    let body = r#"{"id": "evt-1", "orderId": "o-1", "type": "order.created"}"#;
    let first = message_id(&post(&service, "/inbox/orders", &[], body));
    let repeat = post(&service, "/inbox/orders", &[], body);
    assert_eq!(repeat.status, 200, "deduplicated while the row exists");
    // The row is finished and old: retention deletes it.
    schema
        .client()
        .execute(
            "UPDATE inbox SET state = 'processed', created_at = now() - interval '2 hours' \
             WHERE id = $1::text::uuid",
            &[&first],
        )
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        0,
        Duration::from_secs(4),
    )
    .await;
    let second = message_id(&post(&service, "/inbox/orders", &[], body));
    assert_ne!(second, first, "a new message, with a new id");
    // An operator delete ends deduplication the same way.
    schema
        .client()
        .execute("DELETE FROM inbox WHERE id = $1::text::uuid", &[&second])
        .await
        .unwrap();
    let third = message_id(&post(&service, "/inbox/orders", &[], body));
    assert!(third != first && third != second);
    assert_eq!(count(&schema, "SELECT count(*) FROM inbox").await, 1);
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
    // The reference says so next to the key.
    let reference =
        std::fs::read_to_string(support::markdown::repo_root().join("docs/configuration.md"))
            .unwrap();
    let key_row = reference
        .find("| `inbox.maxAge` |")
        .expect("the inbox.maxAge row of the reference");
    let near = &reference[key_row..(key_row + 1_500).min(reference.len())];
    assert!(
        near.contains("Deleting an inbox row ends deduplication")
            && near.contains("Set `inbox.maxAge` above"),
        "the note next to inbox.maxAge: {near}"
    );
}

/// The `components` of the `QueueBox started` line.
fn components(service: &Service) -> String {
    service
        .log
        .iter()
        .find(|l| l["message"] == "QueueBox started")
        .and_then(|l| l["components"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// RLY-1: with `inbox.relay.enabled: false` the replica runs no relay: push rows stay
/// `pending`, unclaimed, and nothing reaches the outbox or a destination. The same rows are
/// relayed by a replica whose relay is on.
#[tokio::test(flavor = "multi_thread")]
async fn rly_1_with_the_relay_disabled_push_rows_stay_pending() {
    let schema = TestSchema::create("ids_rly1").await;
    let receiver = accept_all().await;
    let off = Service::start(
        "ids-rly1-off",
        &config(&schema, &receiver, "    enabled: false\n", ""),
    );
    for i in 0..3 {
        let body = format!(r#"{{"id": "evt-{i}", "orderId": "o-{i}", "type": "order.created"}}"#);
        message_id(&post(&off, "/inbox/orders", &[], &body));
    }
    // Far longer than the 50 ms relay poll interval that a running relay would use.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        count(
            &schema,
            "SELECT count(*) FROM inbox WHERE consumption = 'push' AND state = 'pending' \
             AND claim_token IS NULL AND claimed_at IS NULL"
        )
        .await,
        3
    );
    assert_eq!(count(&schema, "SELECT count(*) FROM outbox").await, 0);
    assert_eq!(receiver.count(), 0);
    assert!(
        !components(&off).contains("inbox-relay"),
        "no relay among the started components: {}",
        components(&off)
    );
    assert_eq!(off.stop(), Some(0));
    // Control: the rows were relayable all along.
    let on = Service::start("ids-rly1-on", &config(&schema, &receiver, "", ""));
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox WHERE state = 'processed'",
        3,
        Duration::from_secs(5),
    )
    .await;
    assert!(components(&on).contains("inbox-relay"));
    assert_eq!(on.stop(), Some(0));
    schema.drop().await;
}

/// `queuebox run` with this configuration, expected to refuse the start: (exit code, stderr).
fn refused_start(label: &str, yaml: &str) -> (Option<i32>, String) {
    let scratch = Scratch::new(label);
    let file = scratch.write("queuebox.yml", yaml);
    let started = Instant::now();
    let output = queuebox(scratch.path())
        .args(["run", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a configuration refusal never waits for the database"
    );
    (output.status.code(), stderr(&output))
}

/// A configuration whose database is never reachable: a refusal must come before step 8.
fn unreachable_db(sources: &str) -> String {
    format!(
        "database:\n  url: postgres://app@127.0.0.1:1/app\n  startupTimeoutMs: 60000\nserver:\n  httpPort: 0\ninbox:\n  relay:\n    enabled: false\nsources:\n{sources}"
    )
}

/// INB-47, TRF-3: a source transform that does not compile stops `queuebox run` at start,
/// naming `sources.<name>.transform.expression`, instead of storing untransformed payloads
/// (a transform that compiles runs: transforms_e2e.rs).
#[test]
fn inb_47_trf_3_a_source_transform_that_does_not_compile_stops_the_start_naming_the_key() {
    let (code, err) = refused_start(
        "ids-inb47",
        &unreachable_db(
            "  orders:\n    path: /orders\n    consumption: pull\n    idempotencyKeyPath: $.id\n    transform:\n      expression: \"$merge([$, {'seen': true}]\"\n      onError: Skip\n",
        ),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("sources.orders.transform.expression: does not compile: S0"),
        "{err}"
    );
    assert!(!err.contains("QueueBox started"), "{err}");
}

/// INB-4 item 4: key expressions are compiled at start; one that does not compile stops
/// `queuebox run`, and the error names each key path.
#[test]
fn inb_4_key_expressions_that_do_not_compile_stop_the_start_naming_each_key() {
    let (code, err) = refused_start(
        "ids-inb4",
        &unreachable_db(
            "  orders:\n    path: /orders\n    consumption: pull\n    idempotencyKeyExpression: 'id &'\n    eventTypeExpression: 'type ]'\n",
        ),
    );
    assert_eq!(code, Some(1), "{err}");
    for key in [
        "sources.orders.idempotencyKeyExpression: does not compile",
        "sources.orders.eventTypeExpression: does not compile",
    ] {
        assert!(err.contains(key), "{key} in {err}");
    }
}
