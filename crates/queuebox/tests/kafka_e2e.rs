//! Kafka end to end: the real `queuebox` binary, the real PostgreSQL, the shared tansu broker
//! (or a private tansu a test stops and starts), and the standard client confluent-kafka on the
//! other side (inbox.md §10.5, destinations.md §6, issue 11).

mod support;

#[path = "../../queuebox-kafka/tests/support/mod.rs"]
mod kafka;

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use kafka::{PrivateTansu, Record, TestTopic, py_publish, shared_bootstrap, unique};
use support::pg::TestSchema;
use support::service::{Service, migrate};

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
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_committed(topic: &TestTopic, group: &str, expected: &[i64], limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let committed = topic.committed(group);
        if committed == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "committed {committed:?}, expected {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn sha256_key(body: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(body)))
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

/// A push source `orders` and a pull source `jobs` on two topics, and a Kafka destination `out`
/// that receives every relayed row.
fn intake_config(
    schema: &TestSchema,
    bootstrap: &str,
    orders: &TestTopic,
    jobs: &TestTopic,
    out: &TestTopic,
    group: &str,
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
    type: kafka
    bootstrapServers: {bootstrap}
    topics: [{orders}]
    groupId: {group}
  jobs:
    type: kafka
    bootstrapServers: {bootstrap}
    topics: [{jobs}]
    groupId: {group}
    consumption: pull
destinations:
  out:
    type: kafka
    bootstrapServers: {bootstrap}
    topic: {out}
    timeoutMs: 5000
routes:
  - topicPattern: "**"
    destination: out
"#,
        db = schema.queuebox_url(),
        orders = orders.name,
        jobs = jobs.name,
        out = out.name,
    )
}

/// Issue 11 intake: records published by confluent-kafka land in the inbox once each with the
/// key chain of INB-31 (header, then `$.id`, then the record key INB-35, then the digest
/// INB-36), the headers as received (INB-22..25), non-JSON and empty bodies and a tombstone
/// `dead` with `{"raw": …}` (INB-56, INB-57, INB-67); push rows are relayed to the Kafka
/// destination with the identity headers (RLY-11, DST-40) and pull rows stay for workers; the
/// group commits every record (INB-66).
#[tokio::test(flavor = "multi_thread")]
async fn inb_31_inb_56_records_from_confluent_kafka_land_once_each_and_push_rows_reach_kafka() {
    let bootstrap = shared_bootstrap();
    let schema = TestSchema::create("kafka_in").await;
    let orders = TestTopic::create(&bootstrap, "e2e-orders", 1);
    let jobs = TestTopic::create(&bootstrap, "e2e-jobs", 1);
    let out = TestTopic::create(&bootstrap, "e2e-out", 1);
    let group = unique("g-in");
    let service = Service::start(
        "kafka-in",
        &intake_config(&schema, &bootstrap, &orders, &jobs, &out, &group),
    );
    let r = |body: &str| Record::new(&orders.name, body);
    let mut tombstone = r("").key("tomb-8");
    tombstone.value = None;
    py_publish(
        &bootstrap,
        &[
            r(r#"{"id":"body-1"}"#)
                .header("x-idempotency-key", "hdr-1")
                .header("X-Tenant", "acme"),
            r(r#"{"id":"body-2"}"#).key("key-2"),
            r(r#"{"other":3}"#).key("key-3"),
            r(r#"{"other":4}"#),
            // The same header key again: a duplicate, committed, no second row (INB-50).
            r(r#"{"id":"body-5"}"#).header("x-idempotency-key", "hdr-1"),
            r("not json"),
            r("").header("x-idempotency-key", "empty-body"),
            tombstone,
        ],
    );
    py_publish(&bootstrap, &[Record::new(&jobs.name, r#"{"id":"job-1"}"#)]);

    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        8,
        Duration::from_secs(60),
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
        "key-3",
        "tomb-8",
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
    for key in ["empty-body", "tomb-8"] {
        let empty = &by_key[key];
        assert_eq!(
            (empty.state.as_str(), empty.payload.as_str()),
            ("dead", r#"{"raw": ""}"#),
            "INB-56, INB-67: {key}"
        );
    }
    let job = &by_key["job-1"];
    assert_eq!(
        (job.source.as_str(), job.consumption.as_str()),
        ("jobs", "pull")
    );

    // Push rows are relayed: the four pending `orders` rows reach the destination topic.
    let deadline = Instant::now() + Duration::from_secs(30);
    let delivered = loop {
        let delivered = out.records();
        if delivered.len() >= 4 {
            break delivered;
        }
        assert!(Instant::now() < deadline, "relayed: {delivered:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(
        delivered.len(),
        4,
        "dead rows are not relayed: {delivered:?}"
    );
    let header = |record: &serde_json::Value, name: &str| -> Option<String> {
        record["headers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h[0] == name)
            .map(|h| h[1].as_str().unwrap().to_owned())
    };
    let relayed = delivered
        .iter()
        .find(|m| header(m, "x-idempotency-key").as_deref() == Some("hdr-1"))
        .expect("the header-keyed record");
    assert_eq!(relayed["value"], r#"{"id": "body-1"}"#);
    assert_eq!(header(relayed, "x-source").as_deref(), Some("orders"));
    assert_eq!(header(relayed, "X-Tenant").as_deref(), Some("acme"));
    assert_eq!(header(relayed, "x-topic").as_deref(), Some("orders"));
    assert_eq!(header(relayed, "x-attempt").as_deref(), Some("0"));
    let outbox_id: String = schema
        .client()
        .query_one(
            "SELECT id::text FROM outbox WHERE headers->>'x-idempotency-key' = 'hdr-1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        header(relayed, "x-message-id").as_deref(),
        Some(outbox_id.as_str())
    );
    // The pull row is left for workers: no outbox row comes from `jobs`.
    assert_eq!(
        count(
            &schema,
            "SELECT count(*) FROM outbox WHERE headers->>'x-source' = 'jobs'"
        )
        .await,
        0
    );
    // INB-55: the duplicate is counted.
    assert_eq!(
        service.metric("queuebox_inbox_messages_total{status=\"duplicate\"}"),
        Some(1.0)
    );
    // INB-69: both consumers are subscribed and connected.
    let (status, body) = service.get("/health/ready");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""kafka.orders":{"status":"up""#), "{body}");
    assert!(body.contains(r#""kafka.jobs":{"status":"up""#), "{body}");
    // INB-66: every record of both topics is committed, the duplicate and the dead ones too.
    wait_committed(&orders, &group, &[8], Duration::from_secs(20)).await;
    wait_committed(&jobs, &group, &[1], Duration::from_secs(20)).await;
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

fn single_source_config(
    schema: &TestSchema,
    bootstrap: &str,
    topic: &TestTopic,
    group: &str,
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
    type: kafka
    bootstrapServers: {bootstrap}
    topics: [{topic}]
    groupId: {group}
    consumption: pull
"#,
        db = schema.queuebox_url(),
        topic = topic.name,
    )
}

fn numbered(topic: &TestTopic, from: usize, to: usize) -> Vec<Record> {
    (from..to)
        .map(|i| Record::new(&topic.name, &format!(r#"{{"id":"m-{i}"}}"#)))
        .collect()
}

/// INB-54, INB-55, INB-65, INB-66 (issue 11 "ack after commit" and "a storage failure in the
/// middle of a partition's batch"): while the database refuses the rows from `m-5` on (a
/// trigger raises), nothing from the first refused record on is committed: the group's offset
/// is exactly the number of rows stored, and the records are read again; once the database
/// recovers, the records after it are stored once each, in offset order, and the offset moves
/// to the end. A duplicate afterwards is committed and counted.
#[tokio::test(flavor = "multi_thread")]
async fn inb_66_a_failing_insert_is_not_committed_and_is_stored_once_in_order_after_recovery() {
    let bootstrap = shared_bootstrap();
    let schema = TestSchema::create("kafka_fail").await;
    migrate(&schema.queuebox_url());
    schema
        .client()
        .batch_execute(
            "CREATE TABLE fail_inserts (on_ boolean);
             INSERT INTO fail_inserts VALUES (true);
             CREATE FUNCTION refuse_inbox() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               IF EXISTS (SELECT 1 FROM fail_inserts)
                  AND substr(NEW.idempotency_key, 3)::int >= 5 THEN
                 RAISE EXCEPTION 'the test refuses inbox rows';
               END IF;
               RETURN NEW;
             END $$;
             CREATE TRIGGER refuse_inbox BEFORE INSERT ON inbox
               FOR EACH ROW EXECUTE FUNCTION refuse_inbox();",
        )
        .await
        .unwrap();
    let topic = TestTopic::create(&bootstrap, "e2e-fail", 1);
    let group = unique("g-fail");
    let service = Service::start(
        "kafka-fail",
        &single_source_config(&schema, &bootstrap, &topic, &group),
    );
    py_publish(&bootstrap, &numbered(&topic, 0, 20));
    let deadline = Instant::now() + Duration::from_secs(60);
    while service
        .metric("queuebox_inbox_rejections_total{reason=\"storage_failed\"}")
        .unwrap_or(0.0)
        < 40.0
    {
        assert!(Instant::now() < deadline, "no re-read seen");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The failed records were read again and failed again; the committed offset is the first
    // record that was not stored, never past it.
    let stored = count(&schema, "SELECT count(*) FROM inbox").await;
    assert!(stored <= 5, "{stored}");
    // -1001: the group has committed nothing yet.
    let expected = if stored == 0 { -1001 } else { stored };
    assert_eq!(topic.committed(&group), vec![expected], "INB-66 rule 4");
    schema
        .client()
        .batch_execute("DELETE FROM fail_inserts")
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        20,
        Duration::from_secs(30),
    )
    .await;
    wait_committed(&topic, &group, &[20], Duration::from_secs(20)).await;
    // Stored once each, in offset order (ids are time-ordered UUIDv7).
    let keys: Vec<String> = schema
        .client()
        .query("SELECT idempotency_key FROM inbox ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let expected: Vec<String> = (0..20).map(|i| format!("m-{i}")).collect();
    assert_eq!(keys, expected, "INB-65: offset order");
    // A duplicate after the recovery is committed and counted, not stored.
    py_publish(&bootstrap, &numbered(&topic, 0, 1));
    let deadline = Instant::now() + Duration::from_secs(20);
    while service.metric("queuebox_inbox_messages_total{status=\"duplicate\"}") != Some(1.0) {
        assert!(Instant::now() < deadline, "the duplicate is counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_committed(&topic, &group, &[21], Duration::from_secs(20)).await;
    assert_eq!(service.stop(), Some(0));
    assert_eq!(count(&schema, "SELECT count(*) FROM inbox").await, 20);
    schema.drop().await;
}

/// INB-54, INB-66 rule 1 with a record PostgreSQL refuses (`\u0000` in a JSON string, which
/// `jsonb` cannot hold; published by confluent-kafka): it is stored `dead` in its place, with
/// U+FFFD for the character, and counts as accepted, so the records after it are stored and the
/// group's offset moves to the end. Before, the refusal was committed with nothing stored.
#[tokio::test(flavor = "multi_thread")]
async fn inb_54_a_record_the_database_refuses_is_stored_dead_and_its_partition_goes_on() {
    let bootstrap = shared_bootstrap();
    let schema = TestSchema::create("kafka_refused").await;
    let topic = TestTopic::create(&bootstrap, "e2e-refused", 1);
    let group = unique("g-refused");
    let service = Service::start(
        "kafka-refused",
        &single_source_config(&schema, &bootstrap, &topic, &group),
    );
    py_publish(
        &bootstrap,
        &[
            Record::new(&topic.name, r#"{"id":"m-0"}"#),
            Record::new(&topic.name, r#"{"id":"m-1","note":"a\u0000b"}"#),
            Record::new(&topic.name, r#"{"id":"m-2"}"#),
        ],
    );
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        3,
        Duration::from_secs(60),
    )
    .await;
    wait_committed(&topic, &group, &[3], Duration::from_secs(20)).await;
    let rows: Vec<(String, String, String, Option<String>)> = schema
        .client()
        .query(
            "SELECT idempotency_key, state, payload::text, last_error FROM inbox ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(
        rows.iter()
            .map(|r| (r.0.as_str(), r.1.as_str()))
            .collect::<Vec<_>>(),
        [("m-0", "pending"), ("m-1", "dead"), ("m-2", "pending")]
    );
    assert_eq!(rows[1].2, "{\"id\": \"m-1\", \"note\": \"a\u{FFFD}b\"}");
    let last_error = rows[1].3.as_deref().unwrap_or_default();
    assert!(
        last_error.starts_with("The database refused the message's data (")
            && last_error.contains("unsupported Unicode escape sequence"),
        "{last_error}"
    );
    assert_eq!(
        service.metric("queuebox_inbox_rejections_total{reason=\"storage_failed\"}"),
        Some(1.0)
    );
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// Issue 11 crash test (quality.md "during a broker intake"): `kill -9` in the middle of a
/// topic of 10,000 records, then a restart: the inbox holds every record exactly once, because
/// the group reads again from the last committed offset (INB-54, INB-66).
#[tokio::test(flavor = "multi_thread")]
async fn inb_54_kill_9_during_an_intake_of_10000_records_loses_and_repeats_nothing() {
    let bootstrap = shared_bootstrap();
    let schema = TestSchema::create("kafka_kill").await;
    let topic = TestTopic::create(&bootstrap, "e2e-kill", 1);
    let group = unique("g-kill");
    py_publish(&bootstrap, &numbered(&topic, 0, 10_000));
    let config = single_source_config(&schema, &bootstrap, &topic, &group);
    let service = Service::start("kafka-kill", &config);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let stored = count(&schema, "SELECT count(*) FROM inbox").await;
        if stored >= 1000 {
            assert!(stored < 10_000, "the kill comes in the middle: {stored}");
            break;
        }
        assert!(Instant::now() < deadline, "intake too slow: {stored}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    service.kill_hard();
    let after_kill = count(&schema, "SELECT count(*) FROM inbox").await;
    // The killed member leaves the group when its session (10 s) runs out; then the restarted
    // one gets the partition and reads from the committed offset.
    let service = Service::start("kafka-kill-2", &config);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        10_000,
        Duration::from_secs(180),
    )
    .await;
    let keys: HashSet<String> = schema
        .client()
        .query("SELECT idempotency_key FROM inbox", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(keys.len(), 10_000);
    assert!((0..10_000).all(|i| keys.contains(&format!("m-{i}"))));
    assert!(after_kill < 10_000);
    wait_committed(&topic, &group, &[10_000], Duration::from_secs(20)).await;
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// INB-69, INB-74, DST-2 (issue 11 broker restart): a private broker with a durable log (tansu
/// on its own S3 server) killed and started again while QueueBox runs a push source, a pull
/// source and a destination on it: readiness reports `kafka.orders` down meanwhile, outbox rows
/// written during the outage wait, QueueBox reconnects by itself and readiness comes back;
/// nothing is lost or stored twice (the records from before the restart are still on the
/// broker, the group's offset survived and moves on), and intake and delivery resume.
#[tokio::test(flavor = "multi_thread")]
async fn inb_69_a_broker_restart_is_reported_by_readiness_and_nothing_is_lost() {
    let mut server = PrivateTansu::start_durable();
    let bootstrap = server.bootstrap();
    let schema = TestSchema::create("kafka_restart").await;
    let base = unique("rs");
    let names = [
        format!("{base}.orders"),
        format!("{base}.jobs"),
        format!("{base}.out"),
    ];
    let topics: Vec<TestTopic> = names
        .iter()
        .map(|n| TestTopic::named(&bootstrap, n, 1))
        .collect();
    let (orders, jobs, out) = (&topics[0], &topics[1], &topics[2]);
    let group = unique("g-rs");
    let config = intake_config(&schema, &bootstrap, orders, jobs, out, &group);
    let mut service = Service::start("kafka-restart", &config);
    py_publish(&bootstrap, &numbered(orders, 0, 5));
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'sent'",
        5,
        Duration::from_secs(60),
    )
    .await;
    wait_committed(orders, &group, &[5], Duration::from_secs(20)).await;
    wait_ready(
        &mut service,
        (200, ""),
        Duration::from_secs(30),
        "connecting",
    );
    server.halt();
    wait_ready(
        &mut service,
        (503, r#""kafka.orders":{"status":"down""#),
        Duration::from_secs(30),
        "the broker is down",
    );
    // Meanwhile the application writes outbox rows that cannot be published yet.
    schema
        .client()
        .batch_execute(
            "INSERT INTO outbox (topic, payload) SELECT 'direct', '{}' FROM generate_series(1, 5)",
        )
        .await
        .unwrap();
    let down = Instant::now() + Duration::from_secs(2);
    while Instant::now() < down {
        assert!(
            service.exited().is_none(),
            "QueueBox exited during the outage"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        count(&schema, "SELECT count(*) FROM outbox WHERE state = 'sent'").await,
        5,
        "nothing is sent while the broker is down"
    );
    server.resume();
    wait_ready(
        &mut service,
        (200, r#""kafka.orders":{"status":"up""#),
        Duration::from_secs(60),
        "the broker came back",
    );
    py_publish(&bootstrap, &numbered(orders, 5, 10));
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'sent'",
        15,
        Duration::from_secs(90),
    )
    .await;
    // Each record once: the unique key would hide a repeat, so the keys are compared whole.
    let keys: Vec<String> = schema
        .client()
        .query("SELECT idempotency_key FROM inbox ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let expected: Vec<String> = (0..10).map(|i| format!("m-{i}")).collect();
    assert_eq!(keys, expected, "every record once, in order");
    // The group's offset survived the restart and moved past the new records.
    wait_committed(orders, &group, &[10], Duration::from_secs(20)).await;
    // Every outbox row is on the destination topic: the five relayed before the restart are
    // still in the broker's log, and the rest arrived after it.
    let sent: HashSet<String> = schema
        .client()
        .query("SELECT id::text FROM outbox", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let delivered: HashSet<String> = out
        .records()
        .iter()
        .flat_map(|m| m["headers"].as_array().unwrap().clone())
        .filter(|h| h[0] == "x-message-id")
        .map(|h| h[1].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sent.len(), 15);
    assert!(sent.is_subset(&delivered), "{sent:?} vs {delivered:?}");
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// Waits until `/health/ready` answers `status` with `text` in its body, failing at once if
/// QueueBox exited (a crash shows as its signal).
fn wait_ready(
    service: &mut Service,
    (status, text): (u16, &str),
    limit: Duration,
    what: &str,
) -> String {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(exit) = service.exited() {
            use std::os::unix::process::ExitStatusExt;
            panic!(
                "QueueBox exited ({:?}, signal {:?}) while {what}",
                exit.code(),
                exit.signal()
            );
        }
        let (got, body) = service.get("/health/ready");
        if got == status && body.contains(text) {
            return body;
        }
        assert!(Instant::now() < deadline, "{what}: {got} {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// INB-74, INB-69 (issue 11: "a relay must not crash when a broker comes back empty"): a
/// private broker that is killed and comes back with no topics, records or group offsets,
/// three times while QueueBox runs a Kafka source and a Kafka destination on it. librdkafka
/// 2.12.1 crashes its process (SIGSEGV in `rd_kafka_metadata_cache_find`, from a Fetch
/// response of the returned broker about a partition the consumer still fetched) unless the
/// source replaces its consumer when every broker is lost. Each time: readiness goes down,
/// QueueBox says it replaces the consumer, readiness comes back, no crash; the records of each
/// round (published on the topics the test creates again) are stored once each and relayed,
/// and nothing is stored that was not published.
#[tokio::test(flavor = "multi_thread")]
async fn inb_74_a_broker_that_comes_back_empty_does_not_crash_queuebox() {
    let mut server = PrivateTansu::start();
    let bootstrap = server.bootstrap();
    let schema = TestSchema::create("kafka_empty").await;
    let base = unique("em");
    let names = [
        format!("{base}.orders"),
        format!("{base}.jobs"),
        format!("{base}.out"),
    ];
    let topics: Vec<TestTopic> = names
        .iter()
        .map(|n| TestTopic::named(&bootstrap, n, 1))
        .collect();
    let (orders, jobs, out) = (&topics[0], &topics[1], &topics[2]);
    let group = unique("g-em");
    let config = intake_config(&schema, &bootstrap, orders, jobs, out, &group);
    let mut service = Service::start("kafka-empty", &config);
    const ROUNDS: usize = 3;
    for round in 0..ROUNDS {
        if round > 0 {
            // The broker came back empty: the application's operator creates the topics again.
            for name in &names {
                kafka::py(&bootstrap, &["create-topic", name, "1"]);
            }
        }
        py_publish(&bootstrap, &numbered(orders, round * 10, round * 10 + 10));
        let stored = (round as i64 + 1) * 10;
        let deadline = Instant::now() + Duration::from_secs(90);
        while count(&schema, "SELECT count(*) FROM outbox WHERE state = 'sent'").await < stored {
            assert!(
                service.exited().is_none(),
                "QueueBox exited in round {round}"
            );
            if Instant::now() > deadline {
                service.drain_log();
                let messages: Vec<String> = service
                    .log
                    .iter()
                    .map(|l| format!("{} {}", l["timestamp"], l["message"]))
                    .collect();
                panic!(
                    "round {round}: {} stored, {} sent; log:\n{}",
                    count(&schema, "SELECT count(*) FROM inbox").await,
                    count(&schema, "SELECT count(*) FROM outbox WHERE state = 'sent'").await,
                    messages.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        wait_ready(
            &mut service,
            (200, ""),
            Duration::from_secs(30),
            "connecting",
        );
        server.halt();
        wait_ready(
            &mut service,
            (503, r#""kafka.orders":{"status":"down""#),
            Duration::from_secs(30),
            "the broker is down",
        );
        server.resume();
        wait_ready(
            &mut service,
            (200, ""),
            Duration::from_secs(60),
            "the broker came back empty",
        );
        // A few seconds on the empty broker, where the crash came.
        let settle = Instant::now() + Duration::from_secs(5);
        while Instant::now() < settle {
            assert!(
                service.exited().is_none(),
                "QueueBox crashed in round {round}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    service.drain_log();
    assert!(
        service.has_log("lost every broker; it replaces its consumer"),
        "the clear log line"
    );
    let keys: Vec<String> = schema
        .client()
        .query(
            "SELECT idempotency_key FROM inbox ORDER BY idempotency_key",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut expected: Vec<String> = (0..ROUNDS * 10).map(|i| format!("m-{i}")).collect();
    expected.sort();
    assert_eq!(keys, expected, "every record once, nothing else");
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

fn outbox_config(schema: &TestSchema, bootstrap: &str, destinations: &str, routes: &str) -> String {
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
{destinations}
routes:
{routes}
"#,
        db = schema.queuebox_url(),
    )
    .replace("{bootstrap}", bootstrap)
}

/// Issue 11 destination: outbox rows delivered to Kafka and read back by confluent-kafka with
/// the headers of DST-40 (the row's headers, static headers, `x-message-id`, `x-topic`,
/// `x-attempt`) and the record key of DST-21 (a route's `routingKeyTemplate` wins over
/// `keyTemplate`); a topic template reaches two topics by aggregate type (DST-17) and
/// `topicFrom` reads a column (DST-19); an empty rendered topic (DST-18) and a broker that
/// never acknowledges (DST-42) fail every attempt and end `dead` at `max_attempts`, never
/// `sent`.
#[tokio::test(flavor = "multi_thread")]
async fn dst_40_outbox_rows_reach_kafka_and_refusals_end_dead() {
    let bootstrap = shared_bootstrap();
    let schema = TestSchema::create("kafka_out").await;
    let base = unique("dst");
    let order = TestTopic::named(&bootstrap, &format!("{base}.order"), 1);
    let invoice = TestTopic::named(&bootstrap, &format!("{base}.invoice"), 1);
    let column = TestTopic::named(&bootstrap, &format!("{base}.column"), 1);
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let destinations = format!(
        "  events:
    type: kafka
    bootstrapServers: {{bootstrap}}
    topic: \"{base}.{{{{ aggregateType }}}}\"
    keyTemplate: \"k-{{{{ key }}}}\"
    headers:
      X-Static: yes
  bycolumn:
    type: kafka
    bootstrapServers: {{bootstrap}}
    topicFrom: key
  bytype:
    type: kafka
    bootstrapServers: {{bootstrap}}
    topic: \"{{{{ aggregateType }}}}\"
  nowhere:
    type: kafka
    bootstrapServers: 127.0.0.1:{closed}
    topic: nowhere
    timeoutMs: 2000
"
    );
    let routes = "  - topicPattern: \"routed.**\"
    destination: events
    routingKeyTemplate: \"route-{{ payload.region }}\"
  - topicPattern: \"column.**\"
    destination: bycolumn
  - topicPattern: \"nowhere.**\"
    destination: nowhere
  - topicPattern: \"empty.**\"
    destination: bytype
  - topicPattern: \"**\"
    destination: events
";
    let service = Service::start(
        "kafka-out",
        &outbox_config(&schema, &bootstrap, &destinations, routes),
    );
    schema
        .client()
        .batch_execute(&format!(
            "INSERT INTO outbox (topic, key, aggregate_type, payload, headers) VALUES
               ('order.created', 'o-1', 'order', '{{\"region\": \"eu\"}}', '{{\"x-tenant\": \"acme\", \"X-Message-Id\": \"forged\"}}'),
               ('routed.created', 'o-2', 'invoice', '{{\"region\": \"us\"}}', '{{}}'),
               ('column.x', '{base}.column', NULL, '{{}}', '{{}}');
             INSERT INTO outbox (topic, payload, max_attempts) VALUES
               ('nowhere.x', '{{}}', 2),
               ('empty.x', '{{}}', 2);"
        ))
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'sent'",
        3,
        Duration::from_secs(30),
    )
    .await;
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'dead'",
        2,
        Duration::from_secs(60),
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
    let nowhere = dead
        .iter()
        .find(|r| r.get::<_, String>(0) == "nowhere.x")
        .unwrap();
    assert_eq!(nowhere.get::<_, i32>(1), 2);
    assert!(
        nowhere
            .get::<_, String>(2)
            .starts_with("The publish to 'nowhere' failed. Reason: "),
        "{}",
        nowhere.get::<_, String>(2)
    );
    let empty = dead
        .iter()
        .find(|r| r.get::<_, String>(0) == "empty.x")
        .unwrap();
    assert_eq!(
        empty.get::<_, String>(2),
        "Destination 'bytype' rendered an empty topic from template '{{ aggregateType }}'. QueueBox does not publish the message."
    );
    let header = |record: &serde_json::Value, name: &str| -> Option<String> {
        record["headers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h[0] == name)
            .map(|h| h[1].as_str().unwrap().to_owned())
    };
    let orders = order.records();
    assert_eq!(orders.len(), 1, "{orders:?}");
    let o1_id: String = schema
        .client()
        .query_one("SELECT id::text FROM outbox WHERE key = 'o-1'", &[])
        .await
        .unwrap()
        .get(0);
    let o1 = &orders[0];
    assert_eq!(o1["value"], r#"{"region": "eu"}"#);
    assert_eq!(o1["key"], "k-o-1", "keyTemplate");
    assert_eq!(header(o1, "x-message-id"), Some(o1_id), "DST-8");
    assert_eq!(header(o1, "x-topic").as_deref(), Some("order.created"));
    assert_eq!(header(o1, "x-attempt").as_deref(), Some("0"));
    assert_eq!(header(o1, "x-tenant").as_deref(), Some("acme"));
    assert_eq!(header(o1, "X-Static").as_deref(), Some("yes"));
    assert_eq!(header(o1, "x-message-key"), None, "DST-11: not sent");
    let names: Vec<String> = o1["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h[0].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "x-tenant",
            "X-Static",
            "x-message-id",
            "x-topic",
            "x-attempt"
        ],
        "DST-40 order"
    );
    let invoices = invoice.records();
    assert_eq!(invoices.len(), 1);
    assert_eq!(invoices[0]["key"], "route-us", "DST-21: the route key wins");
    let columns = column.records();
    assert_eq!(columns.len(), 1, "DST-19 topicFrom: key");
    assert!(columns[0]["key"].as_str().unwrap().starts_with("qbt-dst"));
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// Issue 11 crash test (quality.md "during a publish"): `kill -9` while rows are published;
/// after a restart every row ends `sent` and reached the broker at least once, and a repeat
/// carries the same `x-message-id`.
#[tokio::test(flavor = "multi_thread")]
async fn out_kill_9_during_publishing_every_row_is_sent_and_repeats_keep_their_id() {
    let bootstrap = shared_bootstrap();
    let schema = TestSchema::create("kafka_pubkill").await;
    let topic = TestTopic::create(&bootstrap, "e2e-pubkill", 1);
    let destinations = format!(
        "  events:\n    type: kafka\n    bootstrapServers: {{bootstrap}}\n    topic: {}\n",
        topic.name
    );
    let config = outbox_config(
        &schema,
        &bootstrap,
        &destinations,
        "  - topicPattern: \"**\"\n    destination: events\n",
    );
    migrate(&schema.queuebox_url());
    schema
        .client()
        .batch_execute(
            "INSERT INTO outbox (topic, payload) SELECT 't', json_build_object('n', g)::jsonb FROM generate_series(1, 3000) g",
        )
        .await
        .unwrap();
    let service = Service::start("kafka-pubkill", &config);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let sent = count(&schema, "SELECT count(*) FROM outbox WHERE state = 'sent'").await;
        if sent >= 300 {
            assert!(sent < 3000, "the kill comes in the middle: {sent}");
            break;
        }
        assert!(Instant::now() < deadline, "publishing too slow: {sent}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    service.kill_hard();
    let service = Service::start("kafka-pubkill-2", &config);
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'sent'",
        3000,
        Duration::from_secs(180),
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
    let delivered = topic.records();
    assert!(delivered.len() >= 3000, "{}", delivered.len());
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for m in &delivered {
        let id = m["headers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h[0] == "x-message-id")
            .map(|h| h[1].as_str().unwrap().to_owned())
            .unwrap();
        let data = m["value"].as_str().unwrap().to_owned();
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

/// INB-75, OPS-26 phase 3: a SIGTERM in the middle of an intake: the records in progress
/// finish, and the committed offset is exactly what was stored (nothing committed that was not
/// stored, nothing stored left uncommitted); a restart stores the rest exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn inb_75_sigterm_during_an_intake_commits_exactly_what_it_stored() {
    let bootstrap = shared_bootstrap();
    let schema = TestSchema::create("kafka_term").await;
    let topic = TestTopic::create(&bootstrap, "e2e-term", 1);
    let group = unique("g-term");
    py_publish(&bootstrap, &numbered(&topic, 0, 5000));
    let config = single_source_config(&schema, &bootstrap, &topic, &group);
    let service = Service::start("kafka-term", &config);
    let deadline = Instant::now() + Duration::from_secs(90);
    while count(&schema, "SELECT count(*) FROM inbox").await < 500 {
        assert!(Instant::now() < deadline, "intake too slow");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(service.stop(), Some(0));
    let stored = count(&schema, "SELECT count(*) FROM inbox").await;
    assert!(stored < 5000, "the stop comes in the middle: {stored}");
    assert_eq!(topic.committed(&group), vec![stored], "INB-75");
    let service = Service::start("kafka-term-2", &config);
    wait_count(
        &schema,
        "SELECT count(*) FROM inbox",
        5000,
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(service.stop(), Some(0));
    assert_eq!(
        count(&schema, "SELECT count(DISTINCT idempotency_key) FROM inbox").await,
        5000
    );
    schema.drop().await;
}

/// CFG-52, CFG-76, CFG-99, INB-68, DST-38, DST-5: `queuebox check` validates every Kafka key
/// with the spec's messages, and the SASL password is never printed.
#[test]
fn cfg_76_cfg_99_check_validates_the_kafka_keys_and_never_prints_the_password() {
    use support::process::{Scratch, queuebox, stderr};
    let scratch = Scratch::new("kafka-check");
    let file = scratch.write(
        "q.yml",
        "database:\n  url: postgres://app@db:5432/app\n\
sources:\n  orders:\n    type: kafka\n    consumption: pull\n    bootstrapServers: \"kafka:9092,\"\n    topics: [\"ok\", \"bad topic\"]\n    groupId: \" \"\n    autoOffsetReset: middle\n    maxPollRecords: 0\n    securityProtocol: SASL_SSL\n    saslUsername: app\n    saslPassword: hunter2\n  empty:\n    type: kafka\n    consumption: pull\n    bootstrapServers: kafka:9092\n    topics: []\n    groupId: g\n    securityProtocol: TLS\n\
destinations:\n  events:\n    type: kafka\n    bootstrapServers: kafka:9092\n    timeoutMs: 1000\n    saslPassword: hunter2\n\
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
        "- destinations.events: set topic or topicFrom",
        "- destinations.events.saslPassword: applies only to SASL security protocols",
        "- destinations.events.timeoutMs: must be",
        "- sources.empty.securityProtocol: ",
        "- sources.empty.topics: must not be empty",
        "- sources.orders.autoOffsetReset: ",
        "- sources.orders.bootstrapServers: ",
        "- sources.orders.groupId: ",
        "- sources.orders.maxPollRecords: must be",
        "- sources.orders.saslMechanism: required for securityProtocol SASL_SSL",
        "- sources.orders.topics[1]: must be 1 to 249 letters, digits, ., _ or -",
    ] {
        assert!(
            text.lines().any(|line| line.starts_with(expected)),
            "{expected:?} missing in:\n{text}"
        );
    }
    assert!(!text.contains("hunter2"), "{text}");
}

/// INB-68, INB-74, INB-76, DST-5: a SASL source and destination whose broker cannot be reached:
/// the start goes on, the source says so and keeps trying, readiness shows `kafka.<source>`
/// down, a publish fails with the spec's text, and no log line or `last_error` carries the
/// password.
#[tokio::test(flavor = "multi_thread")]
async fn inb_68_the_sasl_password_never_reaches_a_log_line() {
    let schema = TestSchema::create("kafka_mask").await;
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
    type: kafka
    consumption: pull
    bootstrapServers: 127.0.0.1:{port}
    topics: [jobs]
    groupId: queuebox
    securityProtocol: SASL_PLAINTEXT
    saslMechanism: PLAIN
    saslUsername: app
    saslPassword: hunter2-kafka
destinations:
  events:
    type: kafka
    bootstrapServers: 127.0.0.1:{port}
    topic: events
    timeoutMs: 2000
    securityProtocol: SASL_PLAINTEXT
    saslMechanism: SCRAM-SHA-256
    saslUsername: app
    saslPassword: s3cr3t-kafka
routes:
  - topicPattern: "**"
    destination: events
"#,
        db = schema.queuebox_url(),
    );
    let mut service = Service::start("kafka-mask", &config);
    service.wait_for_log(
        Duration::from_secs(20),
        &format!("cannot reach 127.0.0.1:{port}"),
    );
    schema
        .client()
        .batch_execute("INSERT INTO outbox (topic, payload, max_attempts) VALUES ('t', '{}', 1)")
        .await
        .unwrap();
    wait_count(
        &schema,
        "SELECT count(*) FROM outbox WHERE state = 'dead'",
        1,
        Duration::from_secs(30),
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
            .contains(r#""kafka.jobs":{"status":"down","reason":"failed"}"#),
        "{}",
        readiness.1
    );
    service.drain_log();
    let log = serde_json::to_string(&service.log).unwrap();
    assert!(!log.contains("hunter2-kafka"), "{log}");
    assert!(!log.contains("s3cr3t-kafka"), "{log}");
    assert!(!last_error.contains("s3cr3t-kafka"));
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}
