//! RabbitMQ end to end: the real `queuebox` binary, the real PostgreSQL and the real broker,
//! with Python's pika as the other side (inbox.md §10, destinations.md §5, operations.md).
//! Every queue and exchange is the test's own and is deleted at its end.

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::amqp::{
    PrivateBroker, amqp_url, bound_queue, count, declare_queue, delete, get, pika, pika_at,
    publish, unique,
};
use support::pg::TestSchema;
use support::process::{Scratch, queuebox, stderr};
use support::service::Service;

async fn scalar(schema: &TestSchema, sql: &str) -> i64 {
    schema.client().query_one(sql, &[]).await.unwrap().get(0)
}

async fn wait_count(schema: &TestSchema, sql: &str, expected: i64, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let n = scalar(schema, sql).await;
        if n == expected {
            return;
        }
        assert!(Instant::now() < deadline, "{sql}: {n}, expected {expected}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `database`, fast outbox and relay, then `rest` (sources, destinations, routes).
fn config(schema: &TestSchema, rest: &str) -> String {
    format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 50
  retryMaxDelayMs: 100
inbox:
  relay:
    pollIntervalMs: 50
{rest}"#,
        db = schema.queuebox_url()
    )
}

/// The `sources` block of one pull `rabbitmq` source `orders` on the shared broker, reading
/// `queue`; `extra` is more keys of the source, each line indented by four spaces.
fn pull_source(queue: &str, extra: &str) -> String {
    format!(
        "sources:\n  orders:\n    type: rabbitmq\n    connectionUrl: \"{url}\"\n    queueName: {queue}\n{extra}    consumption: pull\n",
        url = amqp_url()
    )
}

fn message(queue: &str, body: &str) -> serde_json::Value {
    json!({"queue": queue, "body": body})
}

/// INB-25, INB-27, INB-31, INB-35, INB-36, INB-50, INB-54, INB-56, INB-60, RLY-11, DST-11: what a
/// standard client publishes lands once each with its key chain, headers and correlation id;
/// push rows are relayed to a RabbitMQ destination and read back, pull rows stay for workers;
/// every delivery is acknowledged.
#[tokio::test(flavor = "multi_thread")]
async fn inb_31_inb_54_pika_messages_land_once_each_and_push_rows_reach_an_exchange() {
    let schema = TestSchema::create("rmq_intake").await;
    let orders = unique("orders");
    let jobs = unique("jobs");
    let exchange = unique("out");
    let relayed = unique("relayed");
    declare_queue(&orders);
    declare_queue(&jobs);
    bound_queue(&exchange, "topic", &relayed, "relayed.#");
    let url = amqp_url();
    let yaml = config(
        &schema,
        &format!(
            r#"sources:
  orders:
    type: rabbitmq
    connectionUrl: "{url}"
    queueName: {orders}
    prefetchCount: 4
    eventTypePath: $.type
  jobs:
    type: rabbitmq
    connectionUrl: "{url}"
    queueName: {jobs}
    consumption: pull
destinations:
  broker:
    type: rabbitmq
    url: "{url}"
    exchange: {exchange}
    routingKeyTemplate: "relayed.{{{{ topic }}}}"
routes:
  - topicPattern: "**"
    destination: broker
"#
        ),
    );
    let service = Service::start("rmq-intake", &yaml);
    let created = r#""type":"order.created""#;
    publish(&[
        json!({"queue": orders, "body": format!(r#"{{"id":"body-1",{created}}}"#),
               "headers": {"x-idempotency-key": "k-header", "X-Tenant": "acme"}}),
        json!({"queue": orders, "body": format!(r#"{{"id":"body-2",{created}}}"#), "message_id": "mid-2"}),
        json!({"queue": orders, "body": format!(r#"{{"other":3,{created}}}"#), "message_id": "mid-3"}),
        message(&orders, &format!(r#"{{"other":4,{created}}}"#)),
        // The same key header again: a duplicate, acknowledged, no second row.
        json!({"queue": orders, "body": format!(r#"{{"id":"body-5",{created}}}"#),
               "headers": {"X-IDEMPOTENCY-KEY": "k-header"}}),
        json!({"queue": orders, "body": format!(r#"{{"id":"body-6",{created}}}"#),
               "correlation_id": "corr-6",
               "headers": {"n": 42, "d": {"$type": "decimal", "value": "1.25"}, "b": true,
                           "ts": {"$type": "timestamp", "value": 1789984800},
                           "nested": {"a": 1}, "raw": {"$type": "bytes", "value": "/wA="},
                           "none": null}}),
        message(&orders, "not json"),
        message(&orders, ""),
        message(&jobs, r#"{"id":"j-1"}"#),
    ]);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        8,
        Duration::from_secs(20),
    )
    .await;
    let rows = schema
        .client()
        .query(
            "SELECT idempotency_key, state, payload::text, headers::text, correlation_id, \
             coalesce(last_error, ''), event_type FROM inbox WHERE source = 'orders'",
            &[],
        )
        .await
        .unwrap();
    let by_key = |key: &str| {
        rows.iter()
            .find(|r| r.get::<_, String>(0) == key)
            .unwrap_or_else(|| panic!("no row with key {key}: {rows:?}"))
    };
    // INB-31 step 1: the header; the stored headers keep the sender's spelling (INB-23).
    let first = by_key("k-header");
    assert_eq!(
        first.get::<_, String>(2),
        r#"{"id": "body-1", "type": "order.created"}"#
    );
    assert_eq!(
        first.get::<_, String>(3),
        r#"{"X-Tenant": "acme", "x-idempotency-key": "k-header"}"#
    );
    assert_eq!(
        first.get::<_, Option<String>>(6).as_deref(),
        Some("order.created")
    );
    // Step 3 (the `$.id` path) before step 4 (the AMQP message_id, INB-35).
    by_key("body-2");
    by_key("mid-3");
    // Step 5: the SHA-256 of the body (INB-36).
    let digest = format!(
        "sha256:{}",
        sha256_hex(format!(r#"{{"other":4,{created}}}"#).as_bytes())
    );
    by_key(&digest);
    // INB-25 and INB-27: typed headers as text, `void` dropped, the correlation_id property.
    let typed = by_key("body-6");
    let headers: serde_json::Value = serde_json::from_str(&typed.get::<_, String>(3)).unwrap();
    assert_eq!(
        headers,
        json!({"n": "42", "d": "1.25", "b": "true", "ts": "2026-09-21T10:00:00Z",
               "nested": r#"{"a":1}"#, "raw": "base64:/wA="})
    );
    assert_eq!(typed.get::<_, Option<String>>(4).as_deref(), Some("corr-6"));
    // INB-56: a body that is not JSON, and an empty one, are `dead` rows with the raw text.
    let dead: Vec<(String, String)> = rows
        .iter()
        .filter(|r| r.get::<_, String>(1) == "dead")
        .map(|r| (r.get::<_, String>(2), r.get::<_, String>(5)))
        .collect();
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert!(dead.contains(&(
        r#"{"raw": "not json"}"#.to_owned(),
        "The body is not valid JSON.".to_owned()
    )));
    assert!(dead.contains(&(
        r#"{"raw": ""}"#.to_owned(),
        "The body is not valid JSON.".to_owned()
    )));
    // The pull row waits for a worker; the five live push rows are relayed to the exchange.
    let got = wait_for_messages(&relayed, 5, Duration::from_secs(20));
    assert!(
        got.iter().all(|m| m["routing_key"] == "relayed.orders"),
        "{got:?}"
    );
    let keys: Vec<&str> = got
        .iter()
        .map(|m| m["headers"]["x-idempotency-key"].as_str().unwrap())
        .collect();
    assert!(
        keys.contains(&"k-header") && keys.contains(&digest.as_str()),
        "{keys:?}"
    );
    assert!(
        got.iter().all(|m| m["headers"]["x-source"] == "orders"),
        "RLY-11"
    );
    assert!(
        got.iter().all(|m| m["headers"]["x-topic"] == "orders"),
        "DST-11"
    );
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox WHERE source = 'jobs' AND state = 'pending'",
        1,
        Duration::from_secs(1),
    )
    .await;
    assert_eq!(
        service.metric("queuebox_inbox_messages_total{status=\"duplicate\"}"),
        Some(1.0)
    );
    let log = serde_json::to_string(&service.log).unwrap();
    assert_eq!(service.stop(), Some(0));
    // Every delivery was acknowledged: nothing came back to the queues when the channel closed.
    assert_eq!(count(&orders).0, 0);
    assert_eq!(count(&jobs).0, 0);
    // CFG-23, DST-5: the password of the URL never reaches a log line.
    assert!(
        !log.contains("guest:guest@"),
        "a log line holds the password"
    );
    delete(&[&orders, &jobs, &relayed], &[&exchange]);
    schema.drop().await;
}

fn sha256_hex(bytes: &[u8]) -> String {
    let script = "import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())";
    let mut child = std::process::Command::new(support::amqp::python())
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Reads `queue` until `expected` messages arrived or `limit` passed.
fn wait_for_messages(queue: &str, expected: usize, limit: Duration) -> Vec<serde_json::Value> {
    wait_for_messages_at(&amqp_url(), queue, expected, limit)
}

fn wait_for_messages_at(
    url: &str,
    queue: &str,
    expected: usize,
    limit: Duration,
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    while got.len() < expected && Instant::now() < deadline {
        let out = pika_at(
            url,
            &["get", queue, &(expected - got.len()).to_string(), "0.5"],
            "",
        );
        got.extend(
            out.lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()),
        );
    }
    got
}

/// INB-54, INB-57: while the database refuses the insert, nothing is acknowledged and RabbitMQ
/// delivers the messages again; once it accepts, each is stored exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn inb_54_a_failed_insert_is_not_acknowledged_and_is_stored_once_after_recovery() {
    let schema = TestSchema::create("rmq_fail").await;
    let queue = unique("fail");
    declare_queue(&queue);
    let yaml = config(&schema, &pull_source(&queue, ""));
    let service = Service::start("rmq-fail", &yaml);
    schema
        .client()
        .batch_execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'the test refuses inserts'; END $$; \
             CREATE TRIGGER refuse BEFORE INSERT ON inbox FOR EACH ROW EXECUTE FUNCTION refuse();",
        )
        .await
        .unwrap();
    let bodies: Vec<serde_json::Value> = (0..5)
        .map(|i| message(&queue, &format!(r#"{{"id":"f-{i}"}}"#)))
        .collect();
    publish(&bodies);
    // Several rounds of refusals: the messages keep coming back and are never acknowledged.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(scalar(&schema, "SELECT count(*) FROM inbox").await, 0);
    assert!(
        service
            .metric("queuebox_inbox_rejections_total{reason=\"storage_failed\"}")
            .unwrap_or(0.0)
            >= 5.0,
        "the refusals are counted"
    );
    schema
        .client()
        .batch_execute("DROP TRIGGER refuse ON inbox")
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        5,
        Duration::from_secs(20),
    )
    .await;
    // Redelivered copies that arrive after the commit are duplicates, never second rows.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        scalar(&schema, "SELECT count(DISTINCT idempotency_key) FROM inbox").await,
        5
    );
    assert_eq!(service.stop(), Some(0));
    assert_eq!(count(&queue).0, 0, "all acknowledged once stored");
    delete(&[&queue], &[]);
    schema.drop().await;
}

/// INB-54 with messages PostgreSQL refuses, published by pika: a `\u0000` in a JSON string of
/// the body, and a NUL in a header value (`jsonb` holds neither). Each is stored `dead` in its
/// place with U+FFFD for the character, then acknowledged; the message between them is stored as
/// it was. Before, the refusal was acknowledged with nothing stored.
#[tokio::test(flavor = "multi_thread")]
async fn inb_54_a_message_the_database_refuses_is_stored_dead_and_acknowledged() {
    let schema = TestSchema::create("rmq_refused").await;
    let queue = unique("refused");
    declare_queue(&queue);
    let yaml = config(&schema, &pull_source(&queue, ""));
    let service = Service::start("rmq-refused", &yaml);
    publish(&[
        message(&queue, r#"{"id":"r-0","note":"a\u0000b"}"#),
        message(&queue, r#"{"id":"r-1"}"#),
        json!({"queue": queue, "body": r#"{"id":"r-2"}"#, "headers": {"x-note": "c\u{0}d"}}),
    ]);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        3,
        Duration::from_secs(30),
    )
    .await;
    let rows: Vec<(String, String, String, String, Option<String>)> = schema
        .client()
        .query(
            "SELECT idempotency_key, state, payload::text, headers->>'x-note', last_error \
             FROM inbox ORDER BY idempotency_key",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get(0),
                r.get(1),
                r.get(2),
                r.get::<_, Option<String>>(3).unwrap_or_default(),
                r.get(4),
            )
        })
        .collect();
    let states: Vec<(&str, &str)> = rows.iter().map(|r| (r.0.as_str(), r.1.as_str())).collect();
    assert_eq!(
        states,
        [("r-0", "dead"), ("r-1", "pending"), ("r-2", "dead")]
    );
    assert_eq!(rows[0].2, "{\"id\": \"r-0\", \"note\": \"a\u{FFFD}b\"}");
    assert_eq!(rows[2].3, "c\u{FFFD}d");
    for dead in [&rows[0], &rows[2]] {
        let last_error = dead.4.as_deref().unwrap_or_default();
        assert!(
            last_error.starts_with("The database refused the message's data ("),
            "{last_error}"
        );
    }
    assert_eq!(service.stop(), Some(0));
    assert_eq!(count(&queue).0, 0, "every message acknowledged once stored");
    delete(&[&queue], &[]);
    schema.drop().await;
}

/// INB-61, INB-74: a missing queue stops the start with the remedy; `declareQueue: true`
/// declares it durable; an existing queue with other arguments stops the start and says so.
#[tokio::test(flavor = "multi_thread")]
async fn inb_61_inb_74_a_missing_queue_stops_the_start_with_its_remedy() {
    let schema = TestSchema::create("rmq_declare").await;
    let queue = unique("missing");
    let source = |declare: bool| {
        config(
            &schema,
            &pull_source(&queue, &format!("    declareQueue: {declare}\n")),
        )
    };
    let run = |yaml: String| {
        let scratch = Scratch::new("rmq-declare");
        let file = scratch.write("queuebox.yml", &yaml);
        let output = queuebox(scratch.path())
            .args(["run", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        (output.status.code(), stderr(&output))
    };
    let (code, err) = run(source(false));
    assert_ne!(code, Some(0));
    assert!(
        err.contains(&format!(
            "RabbitMQ has no queue '{queue}'. Create the queue, or set declareQueue: true"
        )),
        "{err}"
    );
    // declareQueue: true declares it, durable, and the service runs.
    let service = Service::start("rmq-declare-ok", &source(true));
    assert_eq!(
        count(&queue).1,
        1,
        "QueueBox consumes the queue it declared"
    );
    assert_eq!(service.stop(), Some(0));
    delete(&[&queue], &[]);
    // A queue declared with other arguments is refused, naming it.
    let spec = json!({"queues": [{"name": queue, "arguments": {"x-max-length": 10}}]});
    pika(&["declare"], &spec.to_string());
    let (code, err) = run(source(true));
    assert_ne!(code, Some(0));
    assert!(
        err.contains(&format!("the queue '{queue}' exists with other arguments")),
        "{err}"
    );
    delete(&[&queue], &[]);
    schema.drop().await;
}

/// DST-3, DST-36, OUT-28: an unroutable message is a failed attempt that retries and ends
/// `dead` at `max_attempts` with the unroutable text, never `sent`.
#[tokio::test(flavor = "multi_thread")]
async fn dst_36_an_unroutable_row_retries_and_ends_dead_never_sent() {
    let schema = TestSchema::create("rmq_dead").await;
    let exchange = unique("nobody");
    let url = amqp_url();
    let yaml = config(
        &schema,
        &format!(
            "destinations:\n  broker:\n    type: rabbitmq\n    url: \"{url}\"\n    exchange: {exchange}\nroutes:\n  - topicPattern: \"**\"\n    destination: broker\n"
        ),
    );
    let mut service = Service::start("rmq-dead", &yaml);
    schema
        .client()
        .batch_execute(
            "INSERT INTO outbox (topic, payload, max_attempts) VALUES ('order.created', '{\"card\":\"payload-marker-4111\"}', 3)",
        )
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'dead'",
        1,
        Duration::from_secs(20),
    )
    .await;
    let row = schema
        .client()
        .query_one("SELECT id::text, attempt, last_error FROM outbox", &[])
        .await
        .unwrap();
    let id: String = row.get(0);
    assert_eq!(row.get::<_, i32>(1), 3);
    assert_eq!(
        row.get::<_, String>(2),
        format!(
            "RabbitMQ publish failed: Message {id} is unroutable on exchange {exchange} with routing key order.created"
        )
    );
    // The client library's own lines (it logs each returned message whole, payload bytes
    // included) never reach the log; the connector's redacted ones do.
    service.drain_log();
    let client_lines: Vec<&serde_json::Value> = service
        .log
        .iter()
        .filter(|l| l["target"].as_str().is_some_and(|t| t.starts_with("lapin")))
        .collect();
    assert!(client_lines.is_empty(), "{client_lines:?}");
    assert_eq!(service.stop(), Some(0));
    delete(&[], &[&exchange]);
    schema.drop().await;
}

/// INB-75: at shutdown what is in progress finishes and is acknowledged; what was stored is
/// acknowledged and what was not stays in the queue, so together they are every message once.
#[tokio::test(flavor = "multi_thread")]
async fn inb_75_shutdown_acknowledges_exactly_what_was_stored() {
    let schema = TestSchema::create("rmq_stop").await;
    let queue = unique("stop");
    declare_queue(&queue);
    let total = 3000;
    pika(&["publish-many", &queue, &total.to_string()], "");
    let yaml = config(&schema, &pull_source(&queue, "    prefetchCount: 50\n"));
    let service = Service::start("rmq-stop", &yaml);
    // Stop while the queue is being drained.
    wait_until_some(&schema).await;
    assert_eq!(service.stop(), Some(0));
    let stored: Vec<String> = schema
        .client()
        .query("SELECT idempotency_key FROM inbox", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let left = get(&queue, total, 1.0);
    let left: Vec<String> = left
        .iter()
        .map(|m| {
            let body: serde_json::Value =
                serde_json::from_str(m["body"].as_str().unwrap()).unwrap();
            body["id"].as_str().unwrap().to_owned()
        })
        .collect();
    delete(&[&queue], &[]);
    schema.drop().await;
    assert!(!stored.is_empty());
    let stored_set: std::collections::HashSet<&String> = stored.iter().collect();
    let overlap = left.iter().filter(|id| stored_set.contains(id)).count();
    assert_eq!(overlap, 0, "a stored message was left unacknowledged");
    assert_eq!(
        stored.len() + left.len(),
        total,
        "a message was acknowledged but not stored"
    );
}

async fn wait_until_some(schema: &TestSchema) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while scalar(schema, "SELECT count(*) FROM inbox").await < 100 {
        assert!(Instant::now() < deadline, "nothing was stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// INB-54 and OUT-* through a crash: `kill -9` in the middle of 10,000 messages, then a restart:
/// the inbox holds every message exactly once (RabbitMQ delivered again what was not
/// acknowledged).
#[tokio::test(flavor = "multi_thread")]
async fn inb_54_kill_9_mid_stream_then_restart_stores_every_message_exactly_once() {
    let schema = TestSchema::create("rmq_kill").await;
    let queue = unique("kill");
    declare_queue(&queue);
    let total: i64 = 10_000;
    pika(&["publish-many", &queue, &total.to_string()], "");
    let yaml = config(&schema, &pull_source(&queue, "    prefetchCount: 100\n"));
    let service = Service::start("rmq-kill", &yaml);
    let deadline = Instant::now() + Duration::from_secs(60);
    while scalar(&schema, "SELECT count(*) FROM inbox").await < 2000 {
        assert!(Instant::now() < deadline, "the first run stored too little");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    service.kill_hard();
    let after_kill = scalar(&schema, "SELECT count(*) FROM inbox").await;
    assert!(
        after_kill < total,
        "the kill came too late to prove anything"
    );
    let service = Service::start("rmq-kill-again", &yaml);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        total,
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(
        scalar(&schema, "SELECT count(DISTINCT idempotency_key) FROM inbox").await,
        total
    );
    assert_eq!(service.stop(), Some(0));
    assert_eq!(count(&queue).0, 0);
    delete(&[&queue], &[]);
    schema.drop().await;
}

/// INB-63, DST-33, OPS-18: a private broker stopped and started while QueueBox runs: readiness
/// reports `rabbitmq.orders` down meanwhile, QueueBox reconnects by itself, nothing is lost, and
/// intake and delivery resume.
#[tokio::test(flavor = "multi_thread")]
async fn inb_63_dst_33_the_broker_restarts_and_queuebox_reconnects_by_itself() {
    let schema = TestSchema::create("rmq_restart").await;
    let mut broker = PrivateBroker::start();
    let url = broker.url();
    let queue = "orders_in";
    let exchange = "orders_out";
    let out = "orders_seen";
    let spec = json!({
        "exchanges": [{"name": exchange, "type": "topic"}],
        "queues": [{"name": queue}, {"name": out, "bind": [{"exchange": exchange, "key": "#"}]}],
    });
    pika_at(&url, &["declare"], &spec.to_string());
    let yaml = config(
        &schema,
        &format!(
            r#"sources:
  orders:
    type: rabbitmq
    connectionUrl: "{url}"
    queueName: {queue}
destinations:
  broker:
    type: rabbitmq
    url: "{url}"
    exchange: {exchange}
routes:
  - topicPattern: "**"
    destination: broker
"#
        ),
    );
    let mut service = Service::start("rmq-restart", &yaml);
    let ready = |service: &Service| service.get("/health/ready");
    wait_ready(&service, 200).await;
    let publish_at = |from: usize, to: usize| {
        let lines: Vec<String> = (from..to)
            .map(|i| json!({"queue": queue, "body": format!(r#"{{"id":"r-{i}"}}"#)}).to_string())
            .collect();
        pika_at(&url, &["publish"], &lines.join("\n"));
    };
    publish_at(0, 10);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        10,
        Duration::from_secs(20),
    )
    .await;
    broker.stop();
    // Down while the broker is away, with the source's component named.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, body) = ready(&service);
        if status == 503 && body.contains(r#""rabbitmq.orders":{"status":"down""#) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "readiness stayed up: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Rows written while the broker is down wait and retry.
    schema
        .client()
        .batch_execute("INSERT INTO outbox (topic, payload, max_attempts) VALUES ('direct.row', '{\"id\":\"d\"}', 100)")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    broker.start_again();
    wait_ready(&service, 200).await;
    publish_at(10, 20);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        20,
        Duration::from_secs(30),
    )
    .await;
    // 20 relayed rows and the direct one: every outbox row ends `sent` and reaches the broker.
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'sent'",
        21,
        Duration::from_secs(30),
    )
    .await;
    let seen = wait_for_messages_at(&url, out, 21, Duration::from_secs(20));
    let mut ids: Vec<String> = seen
        .iter()
        .map(|m| m["message_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        21,
        "every row reached the broker: {}",
        seen.len()
    );
    service.drain_log();
    assert!(
        service.has_log("reconnecting in 5 s"),
        "the loss was logged"
    );
    assert_eq!(service.stop(), Some(0));
    drop(broker);
    schema.drop().await;
}

async fn wait_ready(service: &Service, expected: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = service.get("/health/ready");
        if status == expected {
            return;
        }
        assert!(Instant::now() < deadline, "readiness: {status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// DST-11, OUT-*: `kill -9` while rows are being published, then a restart: every row ends
/// `sent` and reaches the broker at least once, and repeats carry the same message id.
#[tokio::test(flavor = "multi_thread")]
async fn dst_11_kill_9_during_publishing_every_row_is_sent_at_least_once_with_its_id() {
    let schema = TestSchema::create("rmq_pubkill").await;
    let exchange = unique("pk");
    let queue = unique("pkq");
    bound_queue(&exchange, "topic", &queue, "#");
    let url = amqp_url();
    let yaml = config(
        &schema,
        &format!(
            "destinations:\n  broker:\n    type: rabbitmq\n    url: \"{url}\"\n    exchange: {exchange}\nroutes:\n  - topicPattern: \"**\"\n    destination: broker\n"
        ),
    )
    // The rows the killed run held come back when their lease ends (OUT-40).
    .replacen("  pollIntervalMs: 50\n", "  pollIntervalMs: 50\n  claimTimeoutMs: 3000\n", 1);
    support::service::migrate(&schema.queuebox_url());
    let total: i64 = 3000;
    schema
        .client()
        .batch_execute(&format!(
            "INSERT INTO outbox (topic, payload) SELECT 'bulk', json_build_object('n', g)::jsonb FROM generate_series(1, {total}) g"
        ))
        .await
        .unwrap();
    let service = Service::start("rmq-pubkill", &yaml);
    let deadline = Instant::now() + Duration::from_secs(60);
    while scalar(&schema, "SELECT count(*) FROM outbox WHERE state = 'sent'").await < 300 {
        assert!(Instant::now() < deadline, "nothing was sent");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    service.kill_hard();
    assert!(scalar(&schema, "SELECT count(*) FROM outbox WHERE state = 'sent'").await < total);
    let service = Service::start("rmq-pubkill-again", &yaml);
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'sent'",
        total,
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(service.stop(), Some(0));
    let ids: std::collections::HashSet<String> = schema
        .client()
        .query("SELECT id::text FROM outbox", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let seen = get(&queue, 2 * total as usize, 2.0);
    let seen_ids: std::collections::HashSet<String> = seen
        .iter()
        .map(|m| m["message_id"].as_str().unwrap().to_owned())
        .collect();
    delete(&[&queue], &[&exchange]);
    schema.drop().await;
    assert!(seen.len() as i64 >= total);
    assert_eq!(
        seen_ids, ids,
        "every row reached the broker, repeats with the same id"
    );
}

/// INB-60: at most `prefetchCount` deliveries are in progress: while the inbox table is locked,
/// exactly that many leave the queue unacknowledged, and all are stored once it is released.
/// INB-30: a message the filter drops leaves no row and is acknowledged.
#[tokio::test(flavor = "multi_thread")]
async fn inb_60_prefetch_bounds_the_messages_in_progress_and_inb_30_filtered_are_acknowledged() {
    let schema = TestSchema::create("rmq_prefetch").await;
    let queue = unique("prefetch");
    declare_queue(&queue);
    let url = amqp_url();
    let yaml = config(
        &schema,
        &format!(
            "sources:\n  orders:\n    type: rabbitmq\n    connectionUrl: \"{url}\"\n    queueName: {queue}\n    prefetchCount: 5\n    consumption: pull\n    filter:\n      exclude:\n        - header: x-test\n          exists: true\n"
        ),
    );
    let service = Service::start("rmq-prefetch", &yaml);
    // A second session holds the lock, so this test's own client can still count.
    let (locker, connection) =
        tokio_postgres::connect(&support::pg::server_url(), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    locker
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE {}.inbox IN ACCESS EXCLUSIVE MODE",
            schema.name
        ))
        .await
        .unwrap();
    let bodies: Vec<serde_json::Value> = (0..30)
        .map(|i| message(&queue, &format!(r#"{{"id":"p-{i}"}}"#)))
        .collect();
    publish(&bodies);
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&queue).0 != 25 {
        assert!(Instant::now() < deadline, "ready: {:?}", count(&queue));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // It stays at 25: nothing more is taken while the five wait for their commit.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(count(&queue).0, 25);
    locker.batch_execute("COMMIT").await.unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        30,
        Duration::from_secs(20),
    )
    .await;
    publish(&[json!({"queue": queue, "body": r#"{"id":"t-1"}"#, "headers": {"x-test": "1"}})]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while service
        .metric("queuebox_inbox_filtered_total{source=\"orders\"}")
        .unwrap_or(0.0)
        < 1.0
    {
        assert!(
            Instant::now() < deadline,
            "the filtered message was not counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(service.stop(), Some(0));
    assert_eq!(scalar(&schema, "SELECT count(*) FROM inbox").await, 30);
    assert_eq!(count(&queue).0, 0, "the filtered message was acknowledged");
    delete(&[&queue], &[]);
    schema.drop().await;
}

/// TRF-8, TRF-33, TRF-41 ("a templated field is read from the stored payload even when a
/// transform changes it"): the exchange template and the routing key template read
/// `{{ payload.… }}` from the row as stored, while the message carries the route transform's
/// output. Were the templates to read the transformed payload, the exchange would render
/// empty and the routing key would not match the binding, so nothing would arrive.
#[tokio::test(flavor = "multi_thread")]
async fn trf_8_broker_templates_read_the_stored_payload_not_the_transformed_one() {
    let schema = TestSchema::create("rmq_trf8").await;
    let exchange = unique("trf8");
    let queue = unique("trf8_seen");
    bound_queue(&exchange, "topic", &queue, "orders.eu");
    let url = amqp_url();
    let yaml = config(
        &schema,
        &format!(
            r#"destinations:
  broker:
    type: rabbitmq
    url: "{url}"
    exchange: "{{{{ payload.ex }}}}"
    routingKeyTemplate: "orders.{{{{ payload.region }}}}"
routes:
  - topicPattern: "**"
    destination: broker
    transform:
      expression: '{{"region": "us", "id": id}}'
"#
        ),
    );
    let service = Service::start("rmq-trf8", &yaml);
    schema
        .client()
        .batch_execute(&format!(
            "INSERT INTO outbox (topic, payload, max_attempts) VALUES ('order.created', '{{\"id\": \"o-8\", \"region\": \"eu\", \"ex\": \"{exchange}\"}}', 2)"
        ))
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state IN ('sent', 'dead')",
        1,
        Duration::from_secs(20),
    )
    .await;
    let state: String = schema
        .client()
        .query_one(
            "SELECT state || ' ' || coalesce(last_error, '') FROM outbox",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(state.trim(), "sent");
    let got = wait_for_messages(&queue, 1, Duration::from_secs(10));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["exchange"], exchange.as_str());
    assert_eq!(got[0]["routing_key"], "orders.eu", "the stored region");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(got[0]["body"].as_str().unwrap()).unwrap(),
        json!({"region": "us", "id": "o-8"}),
        "the transformed payload is what is published"
    );
    assert_eq!(service.stop(), Some(0));
    delete(&[&queue], &[&exchange]);
    schema.drop().await;
}

/// TRF-17, TRF-18, TRF-19, TRF-23, TRF-41 for a RabbitMQ source: a source transform that fails
/// with `Fail` stores one `dead` row with the original payload and `Transform failed: …`, and
/// the message is acknowledged; the same message again is a duplicate that changes nothing and
/// is acknowledged; while the database refuses the insert, the failed store is not
/// acknowledged (RabbitMQ delivers it again), and once it accepts, the row is stored once.
#[tokio::test(flavor = "multi_thread")]
async fn trf_41_a_rabbitmq_source_transform_failure_is_dead_acked_once_and_unacked_on_a_failed_store()
 {
    let schema = TestSchema::create("rmq_trf41").await;
    let queue = unique("trf41");
    declare_queue(&queue);
    let url = amqp_url();
    let yaml = config(
        &schema,
        &format!(
            "sources:\n  orders:\n    type: rabbitmq\n    connectionUrl: \"{url}\"\n    queueName: {queue}\n    consumption: pull\n    transform:\n      expression: 'missing.field'\n      onError: Fail\n"
        ),
    );
    let service = Service::start("rmq-trf41", &yaml);
    // The whole row, every column, so a test can tell that a repeat changed nothing.
    let row_sql = "SELECT to_jsonb(i)::text FROM inbox i WHERE idempotency_key = 't-1'";
    publish(&[message(&queue, r#"{"id": "t-1", "n": 1}"#)]);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        1,
        Duration::from_secs(20),
    )
    .await;
    let first: String = schema
        .client()
        .query_one(row_sql, &[])
        .await
        .unwrap()
        .get(0);
    let row: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(row["state"], "dead", "{first}");
    assert_eq!(
        row["payload"],
        json!({"id": "t-1", "n": 1}),
        "the original payload"
    );
    assert_eq!(
        row["last_error"],
        "Transform failed: The expression produced no value."
    );
    assert_eq!(
        service.metric("queuebox_inbox_rejections_total{reason=\"transform_failed\"}"),
        Some(1.0),
        "TRF-23"
    );
    // TRF-19: the same message again is a duplicate; the row stays exactly as it was.
    publish(&[message(&queue, r#"{"id": "t-1", "n": 2}"#)]);
    let deadline = Instant::now() + Duration::from_secs(15);
    while service.metric("queuebox_inbox_messages_total{status=\"duplicate\"}") != Some(1.0) {
        assert!(Instant::now() < deadline, "the duplicate is counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again: String = schema
        .client()
        .query_one(row_sql, &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(again, first, "a repeat never alters the stored row");
    assert_eq!(scalar(&schema, "SELECT count(*) FROM inbox").await, 1);
    // TRF-18: storing the dead row fails, so the message is not acknowledged.
    schema
        .client()
        .batch_execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'the test refuses inserts'; END $$; \
             CREATE TRIGGER refuse BEFORE INSERT ON inbox FOR EACH ROW EXECUTE FUNCTION refuse();",
        )
        .await
        .unwrap();
    publish(&[message(&queue, r#"{"id": "t-2"}"#)]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while service
        .metric("queuebox_inbox_rejections_total{reason=\"storage_failed\"}")
        .unwrap_or(0.0)
        < 2.0
    {
        assert!(Instant::now() < deadline, "the message came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(scalar(&schema, "SELECT count(*) FROM inbox").await, 1);
    schema
        .client()
        .batch_execute("DROP TRIGGER refuse ON inbox")
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox WHERE idempotency_key = 't-2' AND state = 'dead' AND payload = '{\"id\": \"t-2\"}'",
        1,
        Duration::from_secs(20),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(scalar(&schema, "SELECT count(*) FROM inbox").await, 2);
    assert_eq!(service.stop(), Some(0));
    assert_eq!(count(&queue).0, 0, "every message acknowledged in the end");
    delete(&[&queue], &[]);
    schema.drop().await;
}

/// TRF-34, TRF-35, TRF-36: a route's `routingKeyTemplate` wins over the destination's, with the
/// route's `routingKeyMissingFieldDefault` for a missing field; a route without one takes the
/// destination's template; a rendered routing key over 255 bytes fails the publish on the retry
/// path and ends `dead`, publishing nothing; and a route key on a NATS destination stops `check`.
#[tokio::test(flavor = "multi_thread")]
async fn trf_36_the_route_key_wins_a_long_key_fails_and_a_route_key_needs_rabbitmq_or_kafka() {
    let schema = TestSchema::create("rmq_trf36").await;
    let exchange = unique("trf36");
    let queue = unique("trf36_seen");
    bound_queue(&exchange, "topic", &queue, "#");
    let url = amqp_url();
    let yaml = config(
        &schema,
        &format!(
            r#"destinations:
  broker:
    type: rabbitmq
    url: "{url}"
    exchange: {exchange}
    routingKeyTemplate: "dest.{{{{ topic }}}}"
routes:
  - topicPattern: "routed.*"
    destination: broker
    routingKeyTemplate: "route.{{{{ key }}}}"
    routingKeyMissingFieldDefault: nokey
  - topicPattern: "long.*"
    destination: broker
    routingKeyTemplate: "{{{{ payload.k }}}}"
  - topicPattern: "**"
    destination: broker
"#
        ),
    );
    let service = Service::start("rmq-trf36", &yaml);
    let long = "k".repeat(256);
    schema
        .client()
        .batch_execute(&format!(
            "INSERT INTO outbox (topic, key, payload) VALUES
               ('routed.a', 'k1', '{{}}'),
               ('routed.b', NULL, '{{}}'),
               ('plain.c', 'k3', '{{}}');
             INSERT INTO outbox (topic, payload, max_attempts) VALUES ('long.d', '{{\"k\": \"{long}\"}}', 2);"
        ))
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state IN ('sent', 'dead')",
        4,
        Duration::from_secs(20),
    )
    .await;
    let got = wait_for_messages(&queue, 3, Duration::from_secs(10));
    let mut keys: Vec<String> = got
        .iter()
        .map(|m| m["routing_key"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    assert_eq!(keys, ["dest.plain.c", "route.k1", "route.nokey"]);
    let dead = schema
        .client()
        .query_one(
            "SELECT state, attempt, last_error FROM outbox WHERE topic = 'long.d'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(dead.get::<_, String>(0), "dead");
    assert_eq!(dead.get::<_, i32>(1), 2, "the normal retry path");
    assert!(
        dead.get::<_, String>(2)
            .ends_with("the routing key is 256 bytes long; RabbitMQ takes at most 255"),
        "{}",
        dead.get::<_, String>(2)
    );
    // Nothing more arrived: the long key was never published.
    assert!(get(&queue, 1, 0.5).is_empty());
    assert_eq!(service.stop(), Some(0));
    delete(&[&queue], &[&exchange]);
    schema.drop().await;

    let scratch = Scratch::new("trf36-check");
    let file = scratch.write(
        "q.yml",
        r#"database:
  url: postgres://app@db:5432/app
destinations:
  events:
    type: nats
    servers: nats://127.0.0.1:4222
    subject: orders
routes:
  - topicPattern: "**"
    destination: events
    routingKeyTemplate: "{{ key }}"
"#,
    );
    let output = queuebox(scratch.path())
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert!(
        text.contains(
            "- routes[0].routingKeyTemplate: applies only to rabbitmq and kafka destinations"
        ),
        "{text}"
    );
}

/// `amqps://` (CFG `url` and `connectionUrl`: "An `amqp://` or `amqps://` URI"; a broker
/// certificate is verified): a private RabbitMQ node with a TLS listener and a certificate of a
/// test CA. With that CA among the trusted roots (`SSL_CERT_FILE`, read by the client's native
/// root store), a source consumes over TLS into the inbox and a destination publishes over TLS;
/// with roots that do not hold the CA, nothing is consumed and the publish fails on the retry
/// path, never `sent`, and no log line holds the password.
#[tokio::test(flavor = "multi_thread")]
async fn amqps_a_source_and_a_destination_over_tls_verify_the_broker_certificate() {
    let certs = std::env::temp_dir().join(unique("tls"));
    support::amqp::tls_material(&certs);
    let other = certs.join("other");
    support::amqp::tls_material(&other);
    let tls_port = support::amqp::free_port();
    let broker = PrivateBroker::start_tls(&certs, tls_port);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", tls_port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "no TLS listener; see {}",
            broker.dir().display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let plain = broker.url();
    let exchange = unique("tls_x");
    let seen = unique("tls_seen");
    let incoming = unique("tls_in");
    let spec = json!({
        "exchanges": [{"name": exchange, "type": "topic"}],
        "queues": [{"name": seen, "bind": [{"exchange": exchange, "key": "#"}]}, {"name": incoming}],
    });
    pika_at(&plain, &["declare"], &spec.to_string());
    let secure = format!("amqps://guest:guest@localhost:{tls_port}/%2f");
    let run = |schema: &TestSchema| {
        config(
            schema,
            &format!(
                "sources:\n  orders:\n    type: rabbitmq\n    connectionUrl: \"{secure}\"\n    queueName: {incoming}\n    consumption: pull\n\
                 destinations:\n  broker:\n    type: rabbitmq\n    url: \"{secure}\"\n    exchange: {exchange}\n\
                 routes:\n  - topicPattern: \"**\"\n    destination: broker\n"
            ),
        )
    };
    let publish_in = |id: &str| {
        let line = json!({"queue": incoming, "body": format!(r#"{{"id":"{id}"}}"#)});
        pika_at(&plain, &["publish"], &line.to_string());
    };

    let schema = TestSchema::create("rmq_tls").await;
    let ca = certs.join("ca.pem");
    let service = Service::start_env(
        "rmq-tls",
        &run(&schema),
        &[("SSL_CERT_FILE", ca.to_str().unwrap())],
    );
    publish_in("in-1");
    schema
        .client()
        .batch_execute(
            "INSERT INTO outbox (topic, payload) VALUES ('order.created', '{\"id\": \"out-1\"}')",
        )
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox WHERE idempotency_key = 'in-1'",
        1,
        Duration::from_secs(30),
    )
    .await;
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'sent'",
        1,
        Duration::from_secs(30),
    )
    .await;
    let got = wait_for_messages_at(&plain, &seen, 1, Duration::from_secs(10));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["body"], r#"{"id": "out-1"}"#);
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;

    // Trusted roots without the test CA: the handshakes fail.
    let schema = TestSchema::create("rmq_tls_bad").await;
    let wrong = other.join("ca.pem");
    let mut service = Service::start_env(
        "rmq-tls-bad",
        &run(&schema),
        &[("SSL_CERT_FILE", wrong.to_str().unwrap())],
    );
    publish_in("in-2");
    schema
        .client()
        .batch_execute("INSERT INTO outbox (topic, payload, max_attempts) VALUES ('order.created', '{\"id\": \"out-2\"}', 100)")
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE attempt >= 1 AND state = 'pending' AND last_error IS NOT NULL",
        1,
        Duration::from_secs(30),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(scalar(&schema, "SELECT count(*) FROM inbox").await, 0);
    assert_eq!(
        scalar(&schema, "SELECT count(*) FROM outbox WHERE state = 'sent'").await,
        0
    );
    let error: String = schema
        .client()
        .query_one("SELECT last_error FROM outbox", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        error.to_ascii_lowercase().contains("certificate")
            || error.to_ascii_lowercase().contains("tls"),
        "{error}"
    );
    service.drain_log();
    let log = serde_json::to_string(&service.log).unwrap();
    assert!(
        !log.contains("guest:guest@"),
        "a log line holds the password"
    );
    assert_eq!(service.stop(), Some(0));
    assert!(
        wait_for_messages_at(&plain, &seen, 1, Duration::from_secs(1)).is_empty(),
        "nothing was published"
    );
    schema.drop().await;
    drop(broker);
    let _ = std::fs::remove_dir_all(&certs);
}
