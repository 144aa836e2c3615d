//! NATS end to end: the real `queuebox` binary, the real PostgreSQL, the shared JetStream server
//! (or a private `nats-server` a test stops and starts), and the standard client nats-py on the
//! other side (inbox.md §10.6, destinations.md §7, issue 10).

mod support;

#[path = "../../queuebox-nats/tests/support/mod.rs"]
mod nats;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use nats::{PrivateNats, Publish, TestStream, py, py_publish, shared_url};
use support::pg::TestSchema;
use support::service::{Service, migrate};

async fn count(schema: &TestSchema, sql: &str) -> i64 {
    schema.client().query_one(sql, &[]).await.unwrap().get(0)
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
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn message(subject: String, body: &str, headers: &[(&str, &str)]) -> Publish {
    Publish {
        subject,
        body: body.as_bytes().to_vec(),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    }
}

/// One inbox row as the intake test reads it.
struct StoredRow {
    source: String,
    state: String,
    consumption: String,
    payload: String,
    headers: String,
    last_error: Option<String>,
}

fn sha256_key(body: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(body)))
}

/// A push source `orders` and a pull source `jobs` on two streams, and a NATS destination
/// `out` that receives every relayed row.
fn intake_config(
    schema: &TestSchema,
    url: &str,
    orders: &TestStream,
    jobs: &TestStream,
    out: &TestStream,
) -> String {
    format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 200
  retryMaxDelayMs: 1000
  maxAttempts: 100
inbox:
  relay:
    pollIntervalMs: 50
sources:
  orders:
    type: nats
    servers: {url}
    stream: {orders}
    durable: queuebox
  jobs:
    type: nats
    servers: {url}
    stream: {jobs}
    durable: queuebox
    consumption: pull
destinations:
  out:
    type: nats
    servers: {url}
    subject: "{out_prefix}.{{{{ topic }}}}"
    timeoutMs: 2000
routes:
  - topicPattern: "**"
    destination: out
"#,
        db = schema.queuebox_url(),
        orders = orders.name,
        jobs = jobs.name,
        out_prefix = out.prefix,
    )
}

/// Issue 10 intake: messages published by nats-py land in the inbox once each with the key
/// chain of INB-31 (header, then `$.id`, then `Nats-Msg-Id` INB-35, then the digest INB-36),
/// the headers as received (INB-22..25), non-JSON and empty bodies `dead` with `{"raw": …}`
/// (INB-56, INB-57); push rows are relayed to the NATS destination with the identity headers
/// (RLY-11, DST-45) and pull rows stay for workers.
#[tokio::test(flavor = "multi_thread")]
async fn inb_31_inb_56_messages_from_nats_py_land_once_each_and_push_rows_reach_nats() {
    let url = shared_url();
    let schema = TestSchema::create("nats_in").await;
    let orders = TestStream::create(&url, "e2eorders");
    let jobs = TestStream::create(&url, "e2ejobs");
    let out = TestStream::create(&url, "e2eout");
    let service = Service::start(
        "nats-in",
        &intake_config(&schema, &url, &orders, &jobs, &out),
    );

    let s = |tail: &str| orders.subject(tail);
    py_publish(
        &url,
        &[
            message(
                s("a"),
                r#"{"id":"body-1"}"#,
                &[("x-idempotency-key", "hdr-1"), ("X-Tenant", "acme")],
            ),
            message(s("a"), r#"{"id":"body-2"}"#, &[("Nats-Msg-Id", "nmid-2")]),
            message(s("a"), r#"{"other":3}"#, &[("Nats-Msg-Id", "nmid-3")]),
            message(s("a"), r#"{"other":4}"#, &[]),
            // The same header key again: a duplicate, acknowledged, no second row (INB-50).
            message(
                s("a"),
                r#"{"id":"body-5"}"#,
                &[("x-idempotency-key", "hdr-1")],
            ),
            message(s("a"), "not json", &[]),
            message(s("a"), "", &[("x-idempotency-key", "empty-body")]),
        ],
    );
    py_publish(
        &url,
        &[message(jobs.subject("j"), r#"{"id":"job-1"}"#, &[])],
    );

    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        7,
        Duration::from_secs(20),
    )
    .await;
    let rows = schema
        .client()
        .query(
            "SELECT source, idempotency_key, state, consumption, payload::text, headers::text, last_error \
             FROM inbox ORDER BY created_at, idempotency_key",
            &[],
        )
        .await
        .unwrap();
    let by_key: BTreeMap<String, StoredRow> = rows
        .iter()
        .map(|r| {
            (
                r.get::<_, String>(1),
                StoredRow {
                    source: r.get(0),
                    state: r.get(2),
                    consumption: r.get(3),
                    payload: r.get(4),
                    headers: r.get(5),
                    last_error: r.get(6),
                },
            )
        })
        .collect();
    let keys: Vec<&str> = by_key.keys().map(String::as_str).collect();
    let digest_4 = sha256_key(br#"{"other":4}"#);
    let digest_raw = sha256_key(b"not json");
    let mut expected = vec![
        "body-2",
        "empty-body",
        "hdr-1",
        "job-1",
        "nmid-3",
        digest_4.as_str(),
        digest_raw.as_str(),
    ];
    expected.sort();
    assert_eq!(keys, expected, "INB-31 key chain");
    let tenant = &by_key["hdr-1"];
    assert_eq!(
        tenant.headers, r#"{"X-Tenant": "acme", "x-idempotency-key": "hdr-1"}"#,
        "INB-23"
    );
    assert_eq!(tenant.payload, r#"{"id": "body-1"}"#);
    let raw = &by_key[&digest_raw];
    assert_eq!(
        (raw.state.as_str(), raw.payload.as_str()),
        ("dead", r#"{"raw": "not json"}"#)
    );
    assert_eq!(
        raw.last_error.as_deref(),
        Some("The body is not valid JSON."),
        "INB-56"
    );
    let empty = &by_key["empty-body"];
    assert_eq!(
        (empty.state.as_str(), empty.payload.as_str()),
        ("dead", r#"{"raw": ""}"#),
        "INB-56"
    );
    let job = &by_key["job-1"];
    assert_eq!(
        (job.source.as_str(), job.consumption.as_str()),
        ("jobs", "pull")
    );

    // Push rows are relayed: the four pending `orders` rows reach the destination stream.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let delivered = loop {
        let delivered = out.messages();
        if delivered.len() >= 4 {
            break delivered;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "relayed: {delivered:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        delivered.len(),
        4,
        "dead rows are not relayed: {delivered:?}"
    );
    let relayed = delivered
        .iter()
        .find(|m| m["headers"]["x-idempotency-key"] == "hdr-1")
        .expect("the header-keyed message");
    assert_eq!(
        relayed["subject"],
        out.subject("orders"),
        "topic {{ source }}"
    );
    assert_eq!(relayed["data"], r#"{"id": "body-1"}"#);
    assert_eq!(relayed["headers"]["x-source"], "orders");
    assert_eq!(relayed["headers"]["X-Tenant"], "acme");
    assert_eq!(relayed["headers"]["x-topic"], "orders");
    assert_eq!(relayed["headers"]["x-attempt"], "0");
    let outbox_id: String = schema
        .client()
        .query_one(
            "SELECT id::text FROM outbox WHERE headers->>'x-idempotency-key' = 'hdr-1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(relayed["headers"]["x-message-id"], outbox_id.as_str());
    // The pull row is left for workers: no outbox row comes from `jobs`.
    assert_eq!(
        count(
            &schema,
            "SELECT count(*) FROM outbox WHERE headers->>'x-source' = 'jobs'"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &schema,
            "SELECT count(*) FROM inbox WHERE source = 'jobs' AND state = 'pending'"
        )
        .await,
        1
    );
    // INB-55: the duplicate is counted.
    assert_eq!(
        service.metric("queuebox_inbox_messages_total{status=\"duplicate\"}"),
        Some(1.0)
    );
    assert_eq!(service.stop(), Some(0));
    for stream in [&orders, &jobs] {
        let info = py(&url, &["consumer-info", &stream.name, "queuebox"]).remove(0);
        assert_eq!(
            info["num_ack_pending"], 0,
            "every message acknowledged: {info}"
        );
        assert_eq!(info["num_pending"], 0, "{info}");
    }
    schema.drop().await;
}

fn single_source_config(
    schema: &TestSchema,
    url: &str,
    stream: &TestStream,
    extra: &str,
) -> String {
    format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
inbox:
  relay:
    enabled: false
sources:
  jobs:
    type: nats
    servers: {url}
    stream: {stream}
    durable: queuebox
    consumption: pull
{extra}"#,
        db = schema.queuebox_url(),
        stream = stream.name,
    )
}

fn numbered(stream: &TestStream, from: usize, to: usize) -> Vec<Publish> {
    (from..to)
        .map(|i| message(stream.subject("n"), &format!(r#"{{"id":"m-{i}"}}"#), &[]))
        .collect()
}

/// INB-54, INB-55 (issue 10 "ack after commit"): while the database refuses the insert (a
/// trigger raises), the messages are not acknowledged and JetStream delivers them again; once
/// the database recovers each is stored exactly once, and the consumer has nothing pending.
#[tokio::test(flavor = "multi_thread")]
async fn inb_54_a_failing_insert_is_not_acknowledged_and_is_stored_once_after_recovery() {
    let url = shared_url();
    let schema = TestSchema::create("nats_fail").await;
    migrate(&schema.queuebox_url());
    schema
        .client()
        .batch_execute(
            "CREATE TABLE fail_inserts (on_ boolean);
             INSERT INTO fail_inserts VALUES (true);
             CREATE FUNCTION refuse_inbox() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               IF EXISTS (SELECT 1 FROM fail_inserts) THEN
                 RAISE EXCEPTION 'the test refuses inbox rows';
               END IF;
               RETURN NEW;
             END $$;
             CREATE TRIGGER refuse_inbox BEFORE INSERT ON inbox
               FOR EACH ROW EXECUTE FUNCTION refuse_inbox();",
        )
        .await
        .unwrap();
    let stream = TestStream::create(&url, "e2efail");
    let service = Service::start(
        "nats-fail",
        &single_source_config(&schema, &url, &stream, ""),
    );
    py_publish(&url, &numbered(&stream, 0, 20));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while service
        .metric("queuebox_inbox_rejections_total{reason=\"storage_failed\"}")
        .unwrap_or(0.0)
        < 40.0
    {
        assert!(std::time::Instant::now() < deadline, "no redelivery seen");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // 40 failed stores of 20 messages: each was delivered again after its nak.
    assert_eq!(count(&schema, "SELECT count(*) FROM inbox").await, 0);
    schema
        .client()
        .batch_execute("DELETE FROM fail_inserts")
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        20,
        Duration::from_secs(20),
    )
    .await;
    // A duplicate after the recovery is acknowledged and counted, not stored.
    py_publish(&url, &numbered(&stream, 0, 1));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while service.metric("queuebox_inbox_messages_total{status=\"duplicate\"}") != Some(1.0) {
        assert!(
            std::time::Instant::now() < deadline,
            "the duplicate is counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(service.stop(), Some(0));
    assert_eq!(
        count(&schema, "SELECT count(DISTINCT idempotency_key) FROM inbox").await,
        20
    );
    let info = py(&url, &["consumer-info", &stream.name, "queuebox"]).remove(0);
    assert_eq!(info["num_ack_pending"], 0, "{info}");
    assert_eq!(info["num_pending"], 0, "{info}");
    schema.drop().await;
}

/// INB-54 with a message PostgreSQL refuses (`\u0000` in a JSON string, which `jsonb` cannot
/// hold; published by nats-py): it is stored `dead` in its place with U+FFFD for the character
/// and acknowledged, the messages around it are stored as they were, and the consumer has
/// nothing left. Before, the refusal was acknowledged with nothing stored.
#[tokio::test(flavor = "multi_thread")]
async fn inb_54_a_message_the_database_refuses_is_stored_dead_and_acknowledged() {
    let url = shared_url();
    let schema = TestSchema::create("nats_refused").await;
    let stream = TestStream::create(&url, "e2erefused");
    let service = Service::start(
        "nats-refused",
        &single_source_config(&schema, &url, &stream, ""),
    );
    py_publish(
        &url,
        &[
            message(stream.subject("n"), r#"{"id":"m-0"}"#, &[]),
            message(
                stream.subject("n"),
                r#"{"id":"m-1","note":"a\u0000b"}"#,
                &[],
            ),
            message(stream.subject("n"), r#"{"id":"m-2"}"#, &[]),
        ],
    );
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        3,
        Duration::from_secs(30),
    )
    .await;
    let rows: Vec<(String, String, String, Option<String>)> = schema
        .client()
        .query(
            "SELECT idempotency_key, state, payload::text, last_error FROM inbox ORDER BY idempotency_key",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let states: Vec<(&str, &str)> = rows.iter().map(|r| (r.0.as_str(), r.1.as_str())).collect();
    assert_eq!(
        states,
        [("m-0", "pending"), ("m-1", "dead"), ("m-2", "pending")]
    );
    assert_eq!(rows[1].2, "{\"id\": \"m-1\", \"note\": \"a\u{FFFD}b\"}");
    let last_error = rows[1].3.as_deref().unwrap_or_default();
    assert!(
        last_error.starts_with("The database refused the message's data ("),
        "{last_error}"
    );
    assert_eq!(service.stop(), Some(0));
    let info = py(&url, &["consumer-info", &stream.name, "queuebox"]).remove(0);
    assert_eq!(info["num_ack_pending"], 0, "{info}");
    assert_eq!(info["num_pending"], 0, "{info}");
    schema.drop().await;
}

/// Issue 10 crash test (quality.md "during a broker intake"): `kill -9` in the middle of a
/// stream of 10,000 messages, then a restart: the inbox holds every message exactly once,
/// because JetStream redelivers what was not acknowledged.
#[tokio::test(flavor = "multi_thread")]
async fn inb_54_kill_9_during_an_intake_of_10000_messages_loses_and_repeats_nothing() {
    let url = shared_url();
    let schema = TestSchema::create("nats_kill").await;
    let stream = TestStream::create(&url, "e2ekill");
    py_publish(&url, &numbered(&stream, 0, 10_000));
    let config = single_source_config(&schema, &url, &stream, "");
    let service = Service::start("nats-kill", &config);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let stored = count(&schema, "SELECT count(*) FROM inbox").await;
        if stored >= 1000 {
            assert!(stored < 10_000, "the kill comes in the middle: {stored}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "intake too slow: {stored}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    service.kill_hard();
    let after_kill = count(&schema, "SELECT count(*) FROM inbox").await;
    // ackWait is 30 s by default: the restarted consumer gets the unacknowledged messages
    // after it.
    let service = Service::start("nats-kill-2", &config);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        10_000,
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(
        count(&schema, "SELECT count(DISTINCT idempotency_key) FROM inbox").await,
        10_000
    );
    let keys: HashSet<String> = schema
        .client()
        .query("SELECT idempotency_key FROM inbox", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!((0..10_000).all(|i| keys.contains(&format!("m-{i}"))));
    assert!(after_kill < 10_000);
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// INB-73, INB-74, DST-43 (issue 10 broker restart): a private broker stopped and started while
/// QueueBox runs: readiness reports `nats.<source>` down meanwhile, QueueBox reconnects by
/// itself, nothing is lost, and intake and delivery resume.
#[tokio::test(flavor = "multi_thread")]
async fn inb_73_a_broker_restart_is_reported_by_readiness_and_nothing_is_lost() {
    let mut server = PrivateNats::start();
    let url = server.url();
    let schema = TestSchema::create("nats_restart").await;
    let orders = TestStream::create(&url, "rsorders");
    let jobs = TestStream::create(&url, "rsjobs");
    let out = TestStream::create(&url, "rsout");
    let config = intake_config(&schema, &url, &orders, &jobs, &out);
    let service = Service::start("nats-restart", &config);
    py_publish(&url, &numbered(&orders, 0, 5));
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'sent'",
        5,
        Duration::from_secs(20),
    )
    .await;
    let ready = || service.get("/health/ready");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ready().0 != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "never ready: {}",
            ready().1
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.halt();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = ready();
        if status == 503 {
            assert!(body.contains(r#""nats.orders":{"status":"down""#), "{body}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "readiness stayed up: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Meanwhile the application writes outbox rows that cannot be published yet.
    schema
        .client()
        .batch_execute(
            "INSERT INTO outbox (topic, payload) SELECT 'direct', '{}' FROM generate_series(1, 5)",
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.resume();
    py_publish(&url, &numbered(&orders, 5, 10));
    wait_count(
        &schema,
        "SELECT count(DISTINCT idempotency_key) FROM inbox",
        10,
        Duration::from_secs(60),
    )
    .await;
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'sent'",
        15,
        Duration::from_secs(90),
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while ready().0 != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "readiness stayed down: {}",
            ready().1
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let delivered: HashSet<String> = out
        .messages()
        .iter()
        .map(|m| m["headers"]["x-message-id"].as_str().unwrap().to_owned())
        .collect();
    let sent: HashSet<String> = schema
        .client()
        .query("SELECT id::text FROM outbox", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        sent.is_subset(&delivered),
        "every sent row reached the broker"
    );
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

fn outbox_config(schema: &TestSchema, url: &str, extra_destinations: &str) -> String {
    format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 50
  retryMaxDelayMs: 100
  # A row claimed by a killed replica is taken again after this lease (OUT-58).
  claimTimeoutMs: 3000
destinations:
{extra_destinations}
routes:
  - topicPattern: "nostream.**"
    destination: nowhere
  - topicPattern: "**"
    destination: events
"#,
        db = schema.queuebox_url(),
    )
    .replace("{url}", url)
}

/// Issue 10 destination: outbox rows delivered to JetStream and read back by nats-py with the
/// headers of DST-45 (the row's headers, the key), the subject template and `subjectFrom`
/// (DST-17, DST-19); a subject with no stream fails every attempt and ends `dead` at
/// `max_attempts`, never `sent` (DST-46, OUT-28); an invalid subject likewise (DST-44).
#[tokio::test(flavor = "multi_thread")]
async fn dst_45_outbox_rows_reach_jetstream_and_refusals_end_dead() {
    let url = shared_url();
    let schema = TestSchema::create("nats_out").await;
    let stream = TestStream::create(&url, "e2edst");
    let destinations = format!(
        "  events:\n    type: nats\n    servers: {{url}}\n    subject: \"{p}.{{{{ aggregateType }}}}.{{{{ payload.region }}}}\"\n    headers:\n      X-Static: yes\n  nowhere:\n    type: nats\n    servers: {{url}}\n    subjectFrom: topic\n    timeoutMs: 1000\n",
        p = stream.prefix
    );
    let service = Service::start("nats-out", &outbox_config(&schema, &url, &destinations));
    schema
        .client()
        .batch_execute(&format!(
            "INSERT INTO outbox (topic, key, aggregate_type, payload, headers) VALUES
               ('order.created', 'o-1', 'order', '{{\"region\": \"eu\"}}', '{{\"x-tenant\": \"acme\", \"Nats-Msg-Id\": \"dedup-{pid}\"}}'),
               ('order.created', NULL, 'invoice', '{{\"region\": \"us\"}}', '{{}}');
             INSERT INTO outbox (topic, payload, max_attempts) VALUES
               ('nostream.{pid}', '{{}}', 2),
               ('order.created', '{{\"region\": \"bad subject\"}}', 2);",
            pid = std::process::id()
        ))
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'sent'",
        2,
        Duration::from_secs(20),
    )
    .await;
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'dead'",
        2,
        Duration::from_secs(30),
    )
    .await;
    let dead = schema
        .client()
        .query(
            "SELECT topic, attempt, last_error FROM outbox WHERE state = 'dead' ORDER BY topic",
            &[],
        )
        .await
        .unwrap();
    let nostream = dead
        .iter()
        .find(|r| r.get::<_, String>(0).starts_with("nostream"))
        .unwrap();
    assert_eq!(nostream.get::<_, i32>(1), 2);
    assert!(
        nostream
            .get::<_, String>(2)
            .starts_with("The publish to 'nowhere' failed. Reason: "),
        "{}",
        nostream.get::<_, String>(2)
    );
    let invalid = dead
        .iter()
        .find(|r| r.get::<_, String>(0) == "order.created")
        .unwrap();
    assert_eq!(
        invalid.get::<_, String>(2),
        format!(
            "Destination 'events' rendered an invalid subject '{}..bad subject'. QueueBox does not publish the message.",
            stream.prefix
        )
    );
    let stored = stream.messages();
    assert_eq!(stored.len(), 2, "{stored:?}");
    let eu = stored
        .iter()
        .find(|m| m["subject"] == stream.subject("order.eu"))
        .unwrap();
    let eu_id: String = schema
        .client()
        .query_one("SELECT id::text FROM outbox WHERE key = 'o-1'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(eu["headers"]["x-message-id"], eu_id.as_str());
    assert_eq!(eu["headers"]["x-message-key"], "o-1");
    assert_eq!(eu["headers"]["x-topic"], "order.created");
    assert_eq!(eu["headers"]["x-tenant"], "acme");
    assert_eq!(eu["headers"]["X-Static"], "yes");
    assert_eq!(
        eu["headers"]["Nats-Msg-Id"],
        format!("dedup-{}", std::process::id())
    );
    assert_eq!(eu["data"], r#"{"region": "eu"}"#);
    let us = stored
        .iter()
        .find(|m| m["subject"] == stream.subject("invoice.us"))
        .unwrap();
    assert!(us["headers"].get("x-message-key").is_none());
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// Issue 10 crash test (quality.md "during a publish"): `kill -9` while rows are published;
/// after a restart every row ends `sent` and reached the broker at least once, and a repeat
/// carries the same `x-message-id`.
#[tokio::test(flavor = "multi_thread")]
async fn out_kill_9_during_publishing_every_row_is_sent_and_repeats_keep_their_id() {
    let url = shared_url();
    let schema = TestSchema::create("nats_pubkill").await;
    let stream = TestStream::create(&url, "e2epubkill");
    let destinations = format!(
        "  events:\n    type: nats\n    servers: {{url}}\n    subject: {}\n  nowhere:\n    type: nats\n    servers: {{url}}\n    subject: unused\n",
        stream.subject("rows")
    );
    let config = outbox_config(&schema, &url, &destinations);
    migrate(&schema.queuebox_url());
    schema
        .client()
        .batch_execute(
            "INSERT INTO outbox (topic, payload) SELECT 't', json_build_object('n', g)::jsonb FROM generate_series(1, 3000) g",
        )
        .await
        .unwrap();
    let service = Service::start("nats-pubkill", &config);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let sent = count(&schema, "SELECT count(*) FROM outbox WHERE state = 'sent'").await;
        if sent >= 300 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "publishing too slow: {sent}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    service.kill_hard();
    let service = Service::start("nats-pubkill-2", &config);
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'sent'",
        3000,
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(service.stop(), Some(0));
    let rows: BTreeMap<String, String> = schema
        .client()
        .query("SELECT id::text, payload::text FROM outbox", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let delivered = stream.messages();
    assert!(delivered.len() >= 3000, "{}", delivered.len());
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for m in &delivered {
        let id = m["headers"]["x-message-id"].as_str().unwrap().to_owned();
        let data = m["data"].as_str().unwrap().to_owned();
        if let Some(earlier) = seen.insert(id.clone(), data.clone()) {
            assert_eq!(
                earlier, data,
                "a repeat carries the same row under the same id"
            );
        }
        assert_eq!(rows.get(&id), Some(&data), "x-message-id is the row's id");
    }
    assert_eq!(
        seen.len(),
        3000,
        "every row reached the broker at least once"
    );
    schema.drop().await;
}

/// INB-75, OPS-26 phase 3: a SIGTERM in the middle of an intake: the messages in progress
/// finish and are acknowledged, nothing stays unacknowledged that was stored, and a restart
/// stores the rest exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn inb_75_sigterm_during_an_intake_acknowledges_what_it_stored() {
    let url = shared_url();
    let schema = TestSchema::create("nats_term").await;
    let stream = TestStream::create(&url, "e2eterm");
    py_publish(&url, &numbered(&stream, 0, 5000));
    let config = single_source_config(&schema, &url, &stream, "");
    let service = Service::start("nats-term", &config);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while count(&schema, "SELECT count(*) FROM inbox").await < 500 {
        assert!(std::time::Instant::now() < deadline, "intake too slow");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(service.stop(), Some(0));
    let stored = count(&schema, "SELECT count(*) FROM inbox").await;
    let info = py(&url, &["consumer-info", &stream.name, "queuebox"]).remove(0);
    // Everything acknowledged was stored and everything stored was acknowledged: what is not
    // stored is exactly what JetStream still holds for the consumer, either never delivered
    // or returned unacknowledged (negatively acknowledged at the stop, waiting redelivery).
    let outstanding =
        info["num_pending"].as_i64().unwrap() + info["num_ack_pending"].as_i64().unwrap();
    assert_eq!(outstanding + stored, 5000, "stored {stored}: {info}");
    let service = Service::start("nats-term-2", &config);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        5000,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// CFG-53, CFG-77, CFG-100, OPS-25, DST-5: `queuebox check` validates every NATS key with the
/// spec's messages, and a server URL that carries a password is shown masked, never as written.
#[test]
fn cfg_77_cfg_100_check_validates_the_nats_keys_and_masks_server_urls() {
    use support::process::{Scratch, queuebox, stderr};
    let scratch = Scratch::new("nats-check");
    let file = scratch.write(
        "q.yml",
        "database:\n  url: postgres://app@db:5432/app\n\
sources:\n  jobs:\n    type: nats\n    consumption: pull\n    servers: http://app:hunter2@nats:4222\n    stream: \" \"\n    ackWaitMs: 0\n    batchSize: 0\n    username: app\n    token: s3cr3t-token\n\
destinations:\n  events:\n    type: nats\n    servers: nats://nats:4222\n    timeoutMs: 0\n    password: hunter2\n\
routes:\n  - topicPattern: \"**\"\n    destination: events\n",
    );
    let output = queuebox(scratch.path())
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    for expected in [
        "- destinations.events: set subject or subjectFrom",
        "- destinations.events.password: needs username",
        "- destinations.events.timeoutMs: must be",
        "- sources.jobs.ackWaitMs: must be",
        "- sources.jobs.batchSize: must be",
        "- sources.jobs.durable: ",
        "- sources.jobs.servers: must be nats://host:port URLs separated by commas",
        "- sources.jobs.stream: ",
        "- sources.jobs.token: not together with username",
        "- sources.jobs.username: needs password",
    ] {
        assert!(
            text.lines().any(|line| line.starts_with(expected)),
            "{expected:?} missing in:\n{text}"
        );
    }
    assert!(!text.contains("hunter2"), "{text}");
    assert!(!text.contains("s3cr3t-token"), "{text}");
}

/// INB-73, DST-43, INB-76: the start line of a NATS source names its servers with the user
/// information masked; no log line of a run carries the password or the token.
#[tokio::test(flavor = "multi_thread")]
async fn inb_73_credentials_never_reach_a_log_line() {
    let schema = TestSchema::create("nats_mask").await;
    // A port where nothing listens: the source keeps trying and logs why.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
sources:
  jobs:
    type: nats
    consumption: pull
    servers: nats://app:hunter2@127.0.0.1:{port}
    stream: JOBS
    durable: queuebox
destinations:
  events:
    type: nats
    servers: nats://127.0.0.1:{port}
    subject: events
    token: s3cr3t-token
    timeoutMs: 500
routes:
  - topicPattern: "**"
    destination: events
"#,
        db = schema.queuebox_url(),
    );
    let mut service = Service::start("nats-mask", &config);
    service.wait_for_log(Duration::from_secs(20), "cannot reach nats://***@127.0.0.1");
    schema
        .client()
        .batch_execute("INSERT INTO outbox (topic, payload, max_attempts) VALUES ('t', '{}', 1)")
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'dead'",
        1,
        Duration::from_secs(20),
    )
    .await;
    let last_error: String = schema
        .client()
        .query_one("SELECT last_error FROM outbox", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        last_error.starts_with("The publish to 'events' failed."),
        "{last_error}"
    );
    let readiness = service.get("/health/ready");
    assert_eq!(readiness.0, 503);
    assert!(
        readiness
            .1
            .contains(r#""nats.jobs":{"status":"down","reason":"failed"}"#),
        "{}",
        readiness.1
    );
    service.drain_log();
    let log = serde_json::to_string(&service.log).unwrap();
    assert!(!log.contains("hunter2"), "{log}");
    assert!(!log.contains("s3cr3t-token"), "{log}");
    assert!(!last_error.contains("s3cr3t-token"));
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// TRF-8, TRF-33, TRF-41 ("a templated field is read from the stored payload even when a
/// transform changes it"): the subject template reads `{{ payload.region }}` from the row as
/// stored, while the message carries the route transform's output, which has no `region`. Were
/// the template to read the transformed payload, the subject would have an empty token and the
/// row would end `dead` (DST-44).
#[tokio::test(flavor = "multi_thread")]
async fn trf_8_the_subject_template_reads_the_stored_payload_not_the_transformed_one() {
    let url = shared_url();
    let schema = TestSchema::create("nats_trf8").await;
    let stream = TestStream::create(&url, "e2etrf8");
    let yaml = format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 50
  retryMaxDelayMs: 100
destinations:
  events:
    type: nats
    servers: {url}
    subject: "{prefix}.{{{{ payload.region }}}}"
routes:
  - topicPattern: "**"
    destination: events
    transform:
      expression: '{{"id": id, "shaped": true}}'
"#,
        db = schema.queuebox_url(),
        prefix = stream.prefix,
    );
    let service = Service::start("nats-trf8", &yaml);
    schema
        .client()
        .batch_execute(
            "INSERT INTO outbox (topic, payload, max_attempts) VALUES ('order.created', '{\"id\": \"o-8\", \"region\": \"eu\"}', 2)",
        )
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
    let stored = stream.messages();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(
        stored[0]["subject"],
        stream.subject("eu"),
        "the stored region"
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(stored[0]["data"].as_str().unwrap()).unwrap(),
        serde_json::json!({"id": "o-8", "shaped": true}),
        "the transformed payload is what is published"
    );
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// TRF-17, TRF-18, TRF-19, TRF-23, TRF-41 for a NATS source: a source transform that fails with
/// `Fail` stores one `dead` row with the original payload and `Transform failed: …`, and the
/// message is acknowledged; the same message again is a duplicate that changes nothing; while the
/// database refuses the insert, the failed store is not acknowledged (JetStream delivers it
/// again), and once it accepts, the row is stored once and nothing is left pending.
#[tokio::test(flavor = "multi_thread")]
async fn trf_41_a_nats_source_transform_failure_is_dead_acked_once_and_unacked_on_a_failed_store() {
    let url = shared_url();
    let schema = TestSchema::create("nats_trf41").await;
    migrate(&schema.queuebox_url());
    schema
        .client()
        .batch_execute(
            "CREATE TABLE fail_inserts (on_ boolean);
             CREATE FUNCTION refuse_inbox() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               IF EXISTS (SELECT 1 FROM fail_inserts) THEN
                 RAISE EXCEPTION 'the test refuses inbox rows';
               END IF;
               RETURN NEW;
             END $$;
             CREATE TRIGGER refuse_inbox BEFORE INSERT ON inbox
               FOR EACH ROW EXECUTE FUNCTION refuse_inbox();",
        )
        .await
        .unwrap();
    let stream = TestStream::create(&url, "e2etrf41");
    let service = Service::start(
        "nats-trf41",
        &single_source_config(
            &schema,
            &url,
            &stream,
            "    transform:\n      expression: 'missing.field'\n      onError: Fail\n",
        ),
    );
    // The whole row, every column, so a test can tell that a repeat changed nothing.
    let row_sql = "SELECT to_jsonb(i)::text FROM inbox i WHERE idempotency_key = 't-1'";
    py_publish(
        &url,
        &[message(
            stream.subject("n"),
            r#"{"id": "t-1", "n": 1}"#,
            &[],
        )],
    );
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
        serde_json::json!({"id": "t-1", "n": 1}),
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
    py_publish(
        &url,
        &[message(
            stream.subject("n"),
            r#"{"id": "t-1", "n": 2}"#,
            &[],
        )],
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while service.metric("queuebox_inbox_messages_total{status=\"duplicate\"}") != Some(1.0) {
        assert!(
            std::time::Instant::now() < deadline,
            "the duplicate is counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again: String = schema
        .client()
        .query_one(row_sql, &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(again, first, "a repeat never alters the stored row");
    // TRF-18: storing the dead row fails, so the message is negatively acknowledged.
    schema
        .client()
        .batch_execute("INSERT INTO fail_inserts VALUES (true)")
        .await
        .unwrap();
    py_publish(
        &url,
        &[message(stream.subject("n"), r#"{"id": "t-2"}"#, &[])],
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while service
        .metric("queuebox_inbox_rejections_total{reason=\"storage_failed\"}")
        .unwrap_or(0.0)
        < 2.0
    {
        assert!(std::time::Instant::now() < deadline, "no redelivery seen");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(count(&schema, "SELECT count(*) FROM inbox").await, 1);
    schema
        .client()
        .batch_execute("DELETE FROM fail_inserts")
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox WHERE idempotency_key = 't-2' AND state = 'dead' AND payload = '{\"id\": \"t-2\"}'",
        1,
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(service.stop(), Some(0));
    assert_eq!(count(&schema, "SELECT count(*) FROM inbox").await, 2);
    let info = py(&url, &["consumer-info", &stream.name, "queuebox"]).remove(0);
    assert_eq!(info["num_ack_pending"], 0, "{info}");
    assert_eq!(info["num_pending"], 0, "{info}");
    schema.drop().await;
}

/// TRF-37: an address that renders empty fails the publish of that row with the DST-18 text on
/// the normal retry path (`attempt + 1`, then `dead` at `max_attempts`) and publishes nothing;
/// `subjectFrom` wins over the `subject` template and its column is used verbatim; an empty
/// column fails the publish with the DST-20 text.
#[tokio::test(flavor = "multi_thread")]
async fn trf_37_empty_addresses_fail_on_the_retry_path_and_subject_from_wins() {
    let url = shared_url();
    let schema = TestSchema::create("nats_trf37").await;
    let stream = TestStream::create(&url, "e2etrf37");
    let yaml = format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 50
  retryMaxDelayMs: 100
destinations:
  bare:
    type: nats
    servers: {url}
    subject: "{{{{ payload.s }}}}"
  bycolumn:
    type: nats
    servers: {url}
    subject: "{prefix}.fromtemplate"
    subjectFrom: key
routes:
  - topicPattern: "bare.*"
    destination: bare
  - topicPattern: "**"
    destination: bycolumn
"#,
        db = schema.queuebox_url(),
        prefix = stream.prefix,
    );
    let service = Service::start("nats-trf37", &yaml);
    schema
        .client()
        .batch_execute(&format!(
            "INSERT INTO outbox (topic, key, payload, max_attempts) VALUES
               ('bare.ok', NULL, '{{\"s\": \"{p}.bare\"}}', 3),
               ('bare.empty', NULL, '{{\"other\": 1}}', 3),
               ('col.ok', '{p}.fromkey', '{{}}', 3),
               ('col.empty', '', '{{}}', 3);",
            p = stream.prefix
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
    let rows = schema
        .client()
        .query(
            "SELECT topic, state, attempt, coalesce(last_error, '') FROM outbox ORDER BY topic",
            &[],
        )
        .await
        .unwrap();
    let row = |topic: &str| {
        let r = rows
            .iter()
            .find(|r| r.get::<_, String>(0) == topic)
            .unwrap();
        (
            r.get::<_, String>(1),
            r.get::<_, i32>(2),
            r.get::<_, String>(3),
        )
    };
    assert_eq!(row("bare.ok").0, "sent");
    assert_eq!(row("col.ok").0, "sent");
    assert_eq!(
        row("bare.empty"),
        (
            "dead".to_owned(),
            3,
            "Destination 'bare' rendered an empty subject from template '{{ payload.s }}'. QueueBox does not publish the message.".to_owned()
        )
    );
    assert_eq!(
        row("col.empty"),
        (
            "dead".to_owned(),
            3,
            "Destination 'bycolumn' read an empty subject from column 'key'. QueueBox does not publish the message.".to_owned()
        )
    );
    let mut subjects: Vec<String> = stream
        .messages()
        .iter()
        .map(|m| m["subject"].as_str().unwrap().to_owned())
        .collect();
    subjects.sort();
    assert_eq!(
        subjects,
        [stream.subject("bare"), stream.subject("fromkey")],
        "only the two good rows were published, the column over the template"
    );
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// TRF-25 on a broker source, through the binary: a NATS source takes the three key expressions,
/// and each expression's value is what the row stores, ahead of the path, the `Nats-Msg-Id` and
/// the aggregate-id header; where an expression gives no value, the next step of its chain does.
#[tokio::test(flavor = "multi_thread")]
async fn trf_25_a_nats_source_runs_the_three_key_expressions() {
    let url = shared_url();
    let schema = TestSchema::create("nats_trf25").await;
    let stream = TestStream::create(&url, "e2etrf25");
    let service = Service::start(
        "nats-trf25",
        &single_source_config(
            &schema,
            &url,
            &stream,
            "    idempotencyKeyExpression: 'order.ref'\n    eventTypeExpression: '$lookup({\"c\": \"order.created\"}, kind)'\n    eventTypePath: $.type\n    aggregateIdExpression: '$split(subject, \"/\")[2]'\n    aggregateIdPath: $.agg\n",
        ),
    );
    // Two ids: JetStream itself drops a second message with the same `Nats-Msg-Id`.
    let headers = |id| [("Nats-Msg-Id", id), ("x-aggregate-id", "header-agg")];
    py_publish(
        &url,
        &[
            message(
                stream.subject("n"),
                r#"{"id": "path-1", "order": {"ref": "expr-1"}, "kind": "c", "type": "path.type", "subject": "/org/515725/x", "agg": "path-agg"}"#,
                &headers("msg-1"),
            ),
            message(
                stream.subject("n"),
                r#"{"id": "path-2", "kind": "other", "type": "path.type", "agg": "path-agg"}"#,
                &headers("msg-2"),
            ),
        ],
    );
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        2,
        Duration::from_secs(20),
    )
    .await;
    let rows = schema
        .client()
        .query(
            "SELECT idempotency_key, event_type, aggregate_id FROM inbox ORDER BY idempotency_key",
            &[],
        )
        .await
        .unwrap();
    let found: Vec<(String, Option<String>, Option<String>)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        found,
        [
            ("expr-1".to_owned(), some("order.created"), some("515725")),
            ("path-2".to_owned(), some("path.type"), some("path-agg")),
        ]
    );
    drop(service);
    schema.drop().await;
}
