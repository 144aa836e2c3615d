//! End-to-end facts of the outbox and destination requirements, one test per id (outbox.md
//! OUT-4, OUT-8, OUT-25, OUT-34; destinations.md DST-2, DST-4, DST-7): the real `queuebox`
//! binary, the real PostgreSQL, real HTTP receivers started by the test.

mod support;

use std::time::{Duration, Instant};

use support::pg::TestSchema;
use support::receiver::{Receiver, Reply, Request};
use support::service::Service;

/// A configuration for one schema and one HTTP destination `receiver` at `url`, routed `**`.
fn config(schema: &TestSchema, url: &str, extra: &str) -> String {
    format!(
        r#"database:
  url: "{db}"
  startupTimeoutMs: 10000
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 100
  retryMaxDelayMs: 200
destinations:
  receiver:
    type: http
    baseUrl: {url}
routes:
  - topicPattern: "**"
    destination: receiver
{extra}"#,
        db = schema.queuebox_url()
    )
}

async fn exec(schema: &TestSchema, sql: &str) {
    schema.client().batch_execute(sql).await.unwrap();
}

async fn wait_until(limit: Duration, what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn state_of(schema: &TestSchema, id: &str) -> String {
    schema
        .client()
        .query_one("SELECT state FROM outbox WHERE id::text = $1", &[&id])
        .await
        .unwrap()
        .get(0)
}

async fn wait_for_state(schema: &TestSchema, id: &str, state: &str) {
    wait_until(
        Duration::from_secs(10),
        &format!("{id} {state}"),
        async || state_of(schema, id).await == state,
    )
    .await;
}

fn ok(_: &Request, _: usize) -> Reply {
    Reply::status(200)
}

/// OUT-4: the application's minimal INSERT (SCH-28) and its INSERT with every optional column
/// (SCH-29, `state` = `pending`, here delayed by one second) are both delivered, the full one
/// with its id, key and headers and not before its `scheduled_at`.
#[tokio::test(flavor = "multi_thread")]
async fn out_4_the_minimal_and_the_full_application_insert_are_delivered() {
    let schema = TestSchema::create("ids_out4").await;
    let receiver = Receiver::start(ok).await;
    let service = Service::start("ids-out4", &config(&schema, &receiver.url(), ""));
    exec(
        &schema,
        r#"INSERT INTO outbox (topic, payload) VALUES ('order.created', '{"orderId": 42}');"#,
    )
    .await;
    let inserted = Instant::now();
    let full: String = schema
        .client()
        .query_one(
            r#"INSERT INTO outbox (id, topic, key, payload, headers, aggregate_type, scheduled_at,
                                  max_attempts, state)
               VALUES ('0192f3a4-5b6c-7d8e-9f01-23456789abcd', 'order.created', 'order-42',
                       '{"orderId": 42}', '{"x-tenant": "acme"}', 'order',
                       now() + interval '1 second', 10, 'pending')
               RETURNING id::text"#,
            &[],
        )
        .await
        .unwrap()
        .get(0);
    receiver
        .wait_for(Duration::from_secs(10), "two deliveries", |r| r.len() == 2)
        .await;
    let requests = receiver.requests();
    let minimal = &requests[0];
    assert_eq!(minimal.header("x-topic"), Some("order.created"));
    assert_eq!(minimal.header("x-attempt"), Some("0"));
    assert_eq!(minimal.header("x-message-key"), None);
    assert_eq!(minimal.json(), serde_json::json!({"orderId": 42}));
    let delayed = &requests[1];
    assert_eq!(delayed.header("x-message-id"), Some(full.as_str()));
    assert_eq!(delayed.header("x-message-key"), Some("order-42"));
    assert_eq!(delayed.header("x-tenant"), Some("acme"));
    assert_eq!(delayed.header("x-attempt"), Some("0"));
    assert!(
        delayed.received - inserted >= Duration::from_millis(900),
        "delivered {:?} after the insert, before scheduled_at",
        delayed.received - inserted
    );
    wait_until(Duration::from_secs(5), "both sent", async || {
        schema
            .client()
            .query_one("SELECT count(*) FROM outbox WHERE state = 'sent'", &[])
            .await
            .unwrap()
            .get::<_, i64>(0)
            == 2
    })
    .await;
    let row = schema
        .client()
        .query_one(
            "SELECT attempt, max_attempts, aggregate_type FROM outbox WHERE id::text = $1",
            &[&full],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 0);
    assert_eq!(row.get::<_, i32>(1), 10);
    assert_eq!(row.get::<_, String>(2), "order");
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// OUT-8: the message id goes out in lower-case hyphenated form, in `X-Message-Id` and in log
/// lines, even when the application wrote the id as an upper-case literal.
#[tokio::test(flavor = "multi_thread")]
async fn out_8_upper_case_id_is_sent_and_logged_in_lower_case() {
    let schema = TestSchema::create("ids_out8").await;
    // The first delivery fails, so a warning line about the row is logged.
    let receiver = Receiver::start(|_, seen| {
        if seen == 0 {
            Reply::status(500)
        } else {
            Reply::status(200)
        }
    })
    .await;
    let mut service = Service::start(
        "ids-out8",
        &config(&schema, &receiver.url(), "log:\n  level: debug\n"),
    );
    let upper = "0192F3A4-5B6C-7D8E-9F01-23456789ABCD";
    let lower = upper.to_ascii_lowercase();
    exec(
        &schema,
        &format!("INSERT INTO outbox (id, topic, payload) VALUES ('{upper}', 't', '{{}}')"),
    )
    .await;
    receiver
        .wait_for(Duration::from_secs(10), "two deliveries", |r| r.len() == 2)
        .await;
    for request in receiver.requests() {
        assert_eq!(request.header("x-message-id"), Some(lower.as_str()));
    }
    wait_for_state(&schema, &lower, "sent").await;
    service.drain_log();
    let about: Vec<&serde_json::Value> = service
        .log
        .iter()
        .filter(|l| {
            l["messageId"]
                .as_str()
                .is_some_and(|m| m.eq_ignore_ascii_case(upper))
        })
        .collect();
    assert!(!about.is_empty(), "no log line about the row");
    for line in about {
        assert_eq!(line["messageId"], lower.as_str(), "{line}");
    }
    let everything = service
        .log
        .iter()
        .map(ToString::to_string)
        .collect::<String>();
    assert!(!everything.contains(upper), "an upper-case id was printed");
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// OUT-25: with no transform, the body is the payload text exactly as the database returns it.
#[tokio::test(flavor = "multi_thread")]
async fn out_25_the_body_is_the_payload_text_as_the_database_returns_it() {
    let schema = TestSchema::create("ids_out25").await;
    let receiver = Receiver::start(ok).await;
    let service = Service::start("ids-out25", &config(&schema, &receiver.url(), ""));
    let id: String = schema
        .client()
        .query_one(
            r#"INSERT INTO outbox (topic, payload) VALUES ('t',
                 '{"zeta": 1.50, "alpha": [3, 2, 1], "text": "ünïcødé \"q\" €", "n": 12345678901234567890, "nested": {"b": null, "a": true}}')
               RETURNING id::text"#,
            &[],
        )
        .await
        .unwrap()
        .get(0);
    receiver
        .wait_for(Duration::from_secs(10), "the delivery", |r| r.len() == 1)
        .await;
    let stored: String = schema
        .client()
        .query_one(
            "SELECT payload::text FROM outbox WHERE id::text = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    let request = &receiver.requests()[0];
    assert_eq!(request.body, stored, "byte for byte");
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// DST-7: the body of every published message is the stored payload: the HTTP body, and the
/// `payload` member of a `log` destination line.
#[tokio::test(flavor = "multi_thread")]
async fn dst_7_http_body_and_log_line_payload_are_the_stored_payload() {
    let schema = TestSchema::create("ids_dst7").await;
    let receiver = Receiver::start(ok).await;
    let dir = std::env::temp_dir().join(format!("qb-ids-dst7-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("deliveries.jsonl");
    let _ = std::fs::remove_file(&file);
    let cfg = format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
destinations:
  hook:
    type: http
    baseUrl: {url}
  file:
    type: log
    file: {file}
routes:
  - topicPattern: "to.hook"
    destination: hook
  - topicPattern: "to.file"
    destination: file
"#,
        db = schema.queuebox_url(),
        url = receiver.url(),
        file = file.display()
    );
    let service = Service::start("ids-dst7", &cfg);
    let payload = r#"{"order": {"id": 7, "lines": [{"sku": "a-1", "qty": 2}]}, "note": "ünïcode €", "price": 10.50}"#;
    exec(
        &schema,
        &format!(
            "INSERT INTO outbox (topic, payload) VALUES ('to.hook', '{payload}'), ('to.file', '{payload}')"
        ),
    )
    .await;
    receiver
        .wait_for(Duration::from_secs(10), "the HTTP delivery", |r| {
            r.len() == 1
        })
        .await;
    wait_until(Duration::from_secs(10), "the log line", async || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.lines().count() == 1)
    })
    .await;
    let stored: String = schema
        .client()
        .query_one(
            "SELECT payload::text FROM outbox WHERE topic = 'to.hook'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(receiver.requests()[0].body, stored);
    let line: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&file).unwrap().trim_end()).unwrap();
    assert_eq!(
        line["payload"],
        serde_json::from_str::<serde_json::Value>(&stored).unwrap(),
        "{line}"
    );
    assert!(line["payload"].is_object(), "a JSON value, not a string");
    assert_eq!(service.stop(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
    schema.drop().await;
}

/// OUT-34: a `dead` row stays in the table, unchanged, while QueueBox runs.
#[tokio::test(flavor = "multi_thread")]
async fn out_34_a_dead_row_is_kept_unchanged() {
    let schema = TestSchema::create("ids_out34").await;
    let receiver = Receiver::start(|_, _| Reply::status(422).body("rejected")).await;
    let service = Service::start(
        "ids-out34",
        &config(&schema, &receiver.url(), "").replace(
            "pollIntervalMs: 50",
            "pollIntervalMs: 50\n  claimTimeoutMs: 1000",
        ),
    );
    let id: String = schema
        .client()
        .query_one(
            r#"INSERT INTO outbox (topic, key, payload, headers, max_attempts)
               VALUES ('t', 'k', '{"keep": [1, 2]}', '{"x-keep": "yes"}', 1) RETURNING id::text"#,
            &[],
        )
        .await
        .unwrap()
        .get(0);
    wait_for_state(&schema, &id, "dead").await;
    let read = async || -> String {
        schema
            .client()
            .query_one(
                "SELECT row_to_json(o)::text FROM outbox o WHERE id::text = $1",
                &[&id],
            )
            .await
            .unwrap()
            .get(0)
    };
    let dead = read().await;
    let value: serde_json::Value = serde_json::from_str(&dead).unwrap();
    assert_eq!(value["payload"], serde_json::json!({"keep": [1, 2]}));
    assert_eq!(value["headers"], serde_json::json!({"x-keep": "yes"}));
    assert_eq!(value["attempt"], 1);
    // Several poll cycles and reclaim runs later (no retention configured), nothing moved.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(read().await, dead);
    assert_eq!(receiver.count(), 1, "a dead row is never delivered again");
    assert_eq!(service.stop(), Some(0));
    assert_eq!(read().await, dead, "nor changed by the shutdown");
    schema.drop().await;
}

/// DST-2: an HTTP endpoint that cannot be reached does not stop the start; its publishes fail
/// and follow the retry rules, and the other destinations deliver.
#[tokio::test(flavor = "multi_thread")]
async fn dst_2_an_unreachable_http_endpoint_never_stops_the_start() {
    let schema = TestSchema::create("ids_dst2").await;
    let receiver = Receiver::start(ok).await;
    // A port nobody listens on, and a host name that never resolves.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_url = format!("http://127.0.0.1:{}", closed.local_addr().unwrap().port());
    drop(closed);
    let cfg = format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 60000
  retryMaxDelayMs: 60000
destinations:
  refused:
    type: http
    baseUrl: {closed_url}
    timeoutMs: 2000
  nowhere:
    type: http
    baseUrl: http://queuebox-test-host.invalid
    timeoutMs: 2000
  good:
    type: http
    baseUrl: {good}
routes:
  - topicPattern: refused
    destination: refused
  - topicPattern: nowhere
    destination: nowhere
  - topicPattern: "**"
    destination: good
"#,
        db = schema.queuebox_url(),
        good = receiver.url()
    );
    let service = Service::start("ids-dst2", &cfg);
    assert_eq!(service.get("/health/live").0, 200);
    exec(
        &schema,
        "INSERT INTO outbox (topic, payload) VALUES ('refused', '{}'), ('nowhere', '{}'), ('fine', '{}')",
    )
    .await;
    wait_until(
        Duration::from_secs(10),
        "two failed deliveries",
        async || {
            schema
                .client()
                .query_one(
                    "SELECT count(*) FROM outbox WHERE attempt = 1 AND state = 'pending'",
                    &[],
                )
                .await
                .unwrap()
                .get::<_, i64>(0)
                == 2
        },
    )
    .await;
    receiver
        .wait_for(Duration::from_secs(10), "the good delivery", |r| {
            r.len() == 1
        })
        .await;
    let errors = schema
        .client()
        .query(
            "SELECT topic, last_error FROM outbox WHERE topic <> 'fine' ORDER BY topic",
            &[],
        )
        .await
        .unwrap();
    for row in &errors {
        let error: Option<String> = row.get(1);
        assert!(
            error.as_deref().is_some_and(|e| !e.is_empty()),
            "{}: {error:?}",
            row.get::<_, String>(0)
        );
    }
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// DST-4: failure texts pass the redaction rules before `last_error` and the log: an
/// auth header value echoed by the receiver, and a client secret echoed by a token endpoint,
/// never show.
#[tokio::test(flavor = "multi_thread")]
async fn dst_4_failure_texts_are_redacted_in_last_error_and_logs() {
    let schema = TestSchema::create("ids_dst4").await;
    let receiver = Receiver::start(|request, _| {
        if request.path == "/token" {
            Reply::status(401).body(&format!(
                r#"{{"error":"invalid_client","client_secret":"{}","password":"tok-pw-4"}}"#,
                "cl1ent-s3cret-4"
            ))
        } else {
            let auth = request.header("authorization").unwrap_or("none").to_owned();
            Reply::status(500).body(&format!(
                "denied Authorization: {auth}, password=hunter2-4 for https://app:urlpass4@db.example.com/x"
            ))
        }
    })
    .await;
    let url = receiver.url();
    let cfg = format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
destinations:
  basic:
    type: http
    baseUrl: {url}
    path: /basic
    auth:
      type: basic
      username: app
      password: basic-pw-4
  oauth:
    type: http
    baseUrl: {url}
    path: /oauth
    auth:
      type: oauth2
      clientId: qb
      clientSecret: cl1ent-s3cret-4
      tokenUrl: {url}/token
routes:
  - topicPattern: basic
    destination: basic
  - topicPattern: oauth
    destination: oauth
"#,
        db = schema.queuebox_url()
    );
    let mut service = Service::start("ids-dst4", &cfg);
    exec(
        &schema,
        "INSERT INTO outbox (topic, payload, max_attempts) VALUES ('basic', '{}', 1), ('oauth', '{}', 1)",
    )
    .await;
    wait_until(Duration::from_secs(10), "both dead", async || {
        schema
            .client()
            .query_one("SELECT count(*) FROM outbox WHERE state = 'dead'", &[])
            .await
            .unwrap()
            .get::<_, i64>(0)
            == 2
    })
    .await;
    let rows = schema
        .client()
        .query("SELECT topic, last_error FROM outbox ORDER BY topic", &[])
        .await
        .unwrap();
    let basic: String = rows[0].get(1);
    let oauth: String = rows[1].get(1);
    assert!(basic.starts_with("HTTP 500"), "{basic}");
    assert!(
        oauth.starts_with("OAuth2 token request failed: HTTP 401"),
        "{oauth}"
    );
    // The Base64 of app:basic-pw-4, as the receiver saw and echoed it.
    let echoed = receiver
        .requests()
        .iter()
        .find(|r| r.path == "/basic")
        .and_then(|r| r.header("authorization").map(str::to_owned))
        .expect("the basic destination sent its header");
    let token = echoed.trim_start_matches("Basic ").to_owned();
    let secrets = [
        "basic-pw-4",
        token.as_str(),
        "cl1ent-s3cret-4",
        "tok-pw-4",
        "hunter2-4",
        "urlpass4",
    ];
    for text in [&basic, &oauth] {
        for secret in secrets {
            assert!(!text.contains(secret), "{secret} in last_error {text}");
        }
    }
    service.wait_for_log(Duration::from_secs(5), "The message is dead");
    tokio::time::sleep(Duration::from_millis(300)).await;
    service.drain_log();
    let log: String = service.log.iter().map(ToString::to_string).collect();
    assert!(
        log.contains("OAuth2 token request failed"),
        "the failure was logged"
    );
    for secret in secrets {
        assert!(!log.contains(secret), "{secret} in the log");
    }
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}
