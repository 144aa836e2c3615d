//! The outbox relay end to end: the real `queuebox` binary, the real PostgreSQL, real HTTP
//! receivers started by the test (outbox.md, destinations.md §4, operations.md §4).

mod support;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use support::pg::TestSchema;
use support::proxy::Proxy;
use support::receiver::{Receiver, Reply, Request};
use support::service::Service;

/// A configuration for one schema and one HTTP destination at `url`.
fn config(schema: &TestSchema, url: &str, outbox: &str, destination: &str) -> String {
    format!(
        r#"database:
  url: "{db}"
  startupTimeoutMs: 10000
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
{outbox}
destinations:
  receiver:
    type: http
    baseUrl: {url}
{destination}
routes:
  - topicPattern: "**"
    destination: receiver
"#,
        db = schema.queuebox_url()
    )
}

async fn insert(schema: &TestSchema, sql: &str) {
    schema.client().batch_execute(sql).await.unwrap();
}

async fn rows(schema: &TestSchema, sql: &str) -> Vec<tokio_postgres::Row> {
    schema.client().query(sql, &[]).await.unwrap()
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

async fn count_state(schema: &TestSchema, state: &str) -> i64 {
    schema
        .client()
        .query_one("SELECT count(*) FROM outbox WHERE state = $1", &[&state])
        .await
        .unwrap()
        .get(0)
}

fn ok(_: &Request, _: usize) -> Reply {
    Reply::status(200)
}

#[tokio::test(flavor = "multi_thread")]
async fn out_36_two_replicas_deliver_1000_rows_of_10_keys_in_order_exactly_once() {
    let schema = TestSchema::create("e2e_order").await;
    let receiver = Receiver::start(ok).await;
    let cfg = config(&schema, &receiver.url(), "  concurrency: 16", "");
    let a = Service::start("order-a", &cfg);
    let b = Service::start("order-b", &cfg);
    // Separate statements, so `sequence` follows the insert order within each key (SCH-31).
    let mut sql = String::from("BEGIN;");
    for n in 0..1000 {
        sql.push_str(&format!(
            "INSERT INTO outbox (topic, key, payload) VALUES ('order.updated', 'k{}', '{{\"n\": {n}}}');",
            n % 10
        ));
    }
    sql.push_str("COMMIT;");
    insert(&schema, &sql).await;
    receiver
        .wait_for(Duration::from_secs(60), "1000 deliveries", |r| {
            r.len() >= 1000
        })
        .await;
    wait_until(Duration::from_secs(10), "every row sent", async || {
        count_state(&schema, "sent").await == 1000
    })
    .await;
    let requests = receiver.requests();
    assert_eq!(
        requests.len(),
        1000,
        "no row delivered twice while nothing crashes"
    );
    let ids: HashSet<&str> = requests
        .iter()
        .filter_map(|r| r.header("x-message-id"))
        .collect();
    assert_eq!(ids.len(), 1000);
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    for request in &requests {
        let key = request.header("x-message-key").unwrap().to_owned();
        let n = request.json()["n"].as_i64().unwrap();
        if let Some(previous) = last.insert(key.clone(), n) {
            assert!(n > previous, "key {key}: {n} arrived after {previous}");
        }
    }
    assert_eq!(a.stop(), Some(0));
    assert_eq!(b.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn out_46_kill_9_during_a_slow_publish_redelivers_with_the_same_message_id() {
    let schema = TestSchema::create("e2e_kill").await;
    // The first delivery hangs; the second is answered at once.
    let receiver = Receiver::start(|_, seen| {
        if seen == 0 {
            Reply::status(200).after(Duration::from_secs(30))
        } else {
            Reply::status(200)
        }
    })
    .await;
    let cfg = config(
        &schema,
        &receiver.url(),
        "  claimTimeoutMs: 2000",
        "    timeoutMs: 1500",
    );
    let first = Service::start("kill-a", &cfg);
    insert(
        &schema,
        "INSERT INTO outbox (topic, payload) VALUES ('t', '{\"v\": 1}')",
    )
    .await;
    receiver
        .wait_for(Duration::from_secs(10), "the first publish", |r| {
            r.len() == 1
        })
        .await;
    first.kill_hard();
    assert_eq!(
        count_state(&schema, "processing").await,
        1,
        "the row is left processing"
    );
    let second = Service::start("kill-b", &cfg);
    receiver
        .wait_for(Duration::from_secs(15), "the redelivery", |r| r.len() == 2)
        .await;
    let requests = receiver.requests();
    assert_eq!(
        requests[0].header("x-message-id"),
        requests[1].header("x-message-id")
    );
    assert_eq!(
        requests[1].header("x-attempt"),
        Some("0"),
        "a reclaim raises no attempt"
    );
    wait_until(Duration::from_secs(5), "sent", async || {
        count_state(&schema, "sent").await == 1
    })
    .await;
    assert!(
        second
            .metric("queuebox_outbox_messages_reclaimed_total")
            .unwrap_or(0.0)
            >= 1.0
    );
    assert_eq!(second.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn out_44_a_publish_that_outlives_its_lease_is_a_counted_duplicate() {
    let schema = TestSchema::create("e2e_lease").await;
    let receiver = Receiver::start(|_, seen| {
        if seen == 0 {
            Reply::status(200).after(Duration::from_secs(4))
        } else {
            Reply::status(200)
        }
    })
    .await;
    let cfg = config(
        &schema,
        &receiver.url(),
        "  claimTimeoutMs: 1500",
        "    timeoutMs: 20000",
    );
    let mut first = Service::start("lease-a", &cfg);
    insert(
        &schema,
        "INSERT INTO outbox (topic, payload) VALUES ('t', '{}')",
    )
    .await;
    receiver
        .wait_for(Duration::from_secs(10), "the first publish", |r| {
            r.len() == 1
        })
        .await;
    // A frozen process renews nothing: its lease runs out while its publish is in flight.
    first.signal("STOP");
    let second = Service::start("lease-b", &cfg);
    receiver
        .wait_for(Duration::from_secs(15), "the second publish", |r| {
            r.len() == 2
        })
        .await;
    wait_until(
        Duration::from_secs(5),
        "sent by the second replica",
        async || count_state(&schema, "sent").await == 1,
    )
    .await;
    first.signal("CONT");
    let mut lost = 0.0;
    for _ in 0..100 {
        lost = first
            .metric("queuebox_claims_lost_total{component=\"outbox\"}")
            .unwrap_or(0.0);
        if lost >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(lost >= 1.0, "the first replica counts its lost claim");
    first.drain_log();
    assert!(
        first.has_log("lost") || first.has_log("Duplicate"),
        "the loss is logged"
    );
    let requests = receiver.requests();
    assert_eq!(
        requests[0].header("x-message-id"),
        requests[1].header("x-message-id")
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let states = rows(&schema, "SELECT state FROM outbox").await;
    assert_eq!(states.len(), 1);
    assert_eq!(
        states[0].get::<_, String>(0),
        "sent",
        "the row ends sent, once"
    );
    assert_eq!(first.stop(), Some(0));
    assert_eq!(second.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn out_28_failures_retry_with_backoff_then_dead_and_the_key_moves_on() {
    let schema = TestSchema::create("e2e_retry").await;
    // Topic `flaky`: one 500 then 200. Topic `broken`: always 500.
    let receiver = Receiver::start(|request, _| {
        if request.header("x-topic") == Some("flaky") && request.header("x-attempt") == Some("0") {
            Reply::status(500).body("upstream said password=hunter2 and gave up")
        } else if request.header("x-topic") == Some("broken") {
            Reply::status(503).body("down")
        } else {
            Reply::status(200)
        }
    })
    .await;
    let cfg = config(
        &schema,
        &receiver.url(),
        "  retryBaseDelayMs: 300\n  retryMaxDelayMs: 1000",
        "",
    );
    let service = Service::start("retry", &cfg);
    insert(
        &schema,
        "INSERT INTO outbox (topic, payload) VALUES ('flaky', '{}')",
    )
    .await;
    wait_until(Duration::from_secs(5), "the first failure", async || {
        let row = &rows(&schema, "SELECT attempt FROM outbox").await[0];
        row.get::<_, i32>(0) >= 1
    })
    .await;
    let row = &rows(
        &schema,
        "SELECT attempt, last_error, EXTRACT(EPOCH FROM scheduled_at - updated_at)::float8 FROM outbox",
    )
    .await[0];
    let error: String = row.get(1);
    assert_eq!(row.get::<_, i32>(0), 1);
    assert!(
        error.starts_with("HTTP 500: Internal Server Error - upstream said password=[REDACTED]"),
        "{error}"
    );
    assert!(!error.contains("hunter2"));
    let delay: f64 = row.get(2);
    assert!(
        (0.29..=0.38).contains(&delay),
        "backoff of the first failure: {delay}"
    );
    wait_until(Duration::from_secs(5), "sent after the retry", async || {
        count_state(&schema, "sent").await == 1
    })
    .await;
    assert_eq!(
        rows(&schema, "SELECT attempt FROM outbox").await[0].get::<_, i32>(0),
        1
    );

    // A dead head releases its key (OUT-35): max_attempts 2, then the next row of the key goes.
    insert(
        &schema,
        "INSERT INTO outbox (topic, key, payload, max_attempts) VALUES ('broken', 'k', '{}', 2);
         INSERT INTO outbox (topic, key, payload) VALUES ('after', 'k', '{}');",
    )
    .await;
    wait_until(
        Duration::from_secs(10),
        "the head dead and the next row sent",
        async || count_state(&schema, "dead").await == 1 && count_state(&schema, "sent").await == 2,
    )
    .await;
    let dead = &rows(
        &schema,
        "SELECT attempt, last_error FROM outbox WHERE state = 'dead'",
    )
    .await[0];
    assert_eq!(dead.get::<_, i32>(0), 2);
    assert_eq!(
        dead.get::<_, String>(1),
        "HTTP 503: Service Unavailable - down"
    );
    let order: Vec<String> = receiver
        .requests()
        .iter()
        .filter(|r| r.header("x-message-key") == Some("k"))
        .map(|r| r.header("x-topic").unwrap().to_owned())
        .collect();
    assert_eq!(order, ["broken", "broken", "after"]);
    assert_eq!(
        service.metric("queuebox_outbox_messages_total{status=\"dead\"}"),
        Some(1.0)
    );
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dst_25_redirect_429_and_timeout_each_fail_the_attempt() {
    let schema = TestSchema::create("e2e_fail").await;
    let receiver = Receiver::start(|request, _| match request.path.as_str() {
        "/redirect" => Reply::status(302).header("Location", "/target"),
        "/limited" => Reply::status(429).header("Retry-After", "120"),
        "/slow" => Reply::status(200).after(Duration::from_secs(3)),
        _ => Reply::status(200),
    })
    .await;
    let cfg = format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 60000
  retryMaxDelayMs: 300000
destinations:
  redirect:
    type: http
    baseUrl: {url}
    path: /redirect
  limited:
    type: http
    baseUrl: {url}
    path: /limited
  slow:
    type: http
    baseUrl: {url}
    path: /slow
    timeoutMs: 500
routes:
  - topicPattern: redirect
    destination: redirect
  - topicPattern: limited
    destination: limited
  - topicPattern: slow
    destination: slow
"#,
        db = schema.queuebox_url(),
        url = receiver.url()
    );
    let service = Service::start("fail", &cfg);
    insert(
        &schema,
        "INSERT INTO outbox (topic, payload) VALUES ('redirect', '{}'), ('limited', '{}'), ('slow', '{}'), ('nowhere', '{}')",
    )
    .await;
    wait_until(Duration::from_secs(10), "four outcomes", async || {
        rows(
            &schema,
            "SELECT 1 FROM outbox WHERE attempt = 1 OR state = 'dead'",
        )
        .await
        .len()
            == 4
    })
    .await;
    let outcome = async |topic: &str| {
        let row = schema
            .client()
            .query_one(
                "SELECT state, attempt, last_error, EXTRACT(EPOCH FROM scheduled_at - updated_at)::float8 FROM outbox WHERE topic = $1",
                &[&topic],
            )
            .await
            .unwrap();
        (
            row.get::<_, String>(0),
            row.get::<_, i32>(1),
            row.get::<_, String>(2),
            row.get::<_, f64>(3),
        )
    };
    let (state, _, error, _) = outcome("redirect").await;
    assert_eq!(
        (state.as_str(), error.as_str()),
        ("pending", "HTTP 302: Found")
    );
    assert!(
        receiver.requests().iter().all(|r| r.path != "/target"),
        "a redirect is never followed"
    );
    let (_, _, error, delay) = outcome("limited").await;
    assert_eq!(error, "HTTP 429: Too Many Requests");
    assert!(
        (119.9..=120.2).contains(&delay),
        "Retry-After 120 lengthens the 60 to 75 s backoff: {delay}"
    );
    let (_, _, error, _) = outcome("slow").await;
    assert_eq!(error, "Request timeout after 500ms");
    let (state, attempt, error, _) = outcome("nowhere").await;
    assert_eq!((state.as_str(), attempt), ("dead", 0));
    assert_eq!(error, "No route matches topic 'nowhere'.");
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dst_30_oauth2_token_is_fetched_once_and_reused() {
    let schema = TestSchema::create("e2e_oauth").await;
    let receiver = Receiver::start(|request, _| {
        if request.path == "/token" {
            Reply::status(200)
                .header("Content-Type", "application/json")
                .body(r#"{"access_token":"tok-1","expires_in":3600}"#)
        } else if request.header("authorization") == Some("Bearer tok-1") {
            Reply::status(200)
        } else {
            Reply::status(401)
        }
    })
    .await;
    let auth = format!(
        "    auth:\n      type: oauth2\n      clientId: qb\n      clientSecret: s3cret\n      tokenUrl: {}/token",
        receiver.url()
    );
    let cfg = config(&schema, &receiver.url(), "", &auth);
    let service = Service::start("oauth", &cfg);
    insert(
        &schema,
        "INSERT INTO outbox (topic, payload) SELECT 't', '{}' FROM generate_series(1, 5)",
    )
    .await;
    wait_until(Duration::from_secs(10), "five deliveries", async || {
        count_state(&schema, "sent").await == 5
    })
    .await;
    let tokens = receiver
        .requests()
        .iter()
        .filter(|r| r.path == "/token")
        .count();
    assert_eq!(tokens, 1, "one token request for five deliveries");
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ops_18_readiness_follows_the_database_and_nothing_is_lost() {
    let schema = TestSchema::create("e2e_ready").await;
    let proxy = Proxy::start("127.0.0.1:5432").await;
    let receiver = Receiver::start(ok).await;
    let url =
        schema
            .queuebox_url()
            .replacen("127.0.0.1:5432", &format!("127.0.0.1:{}", proxy.port), 1);
    assert!(
        url.contains(&proxy.port.to_string()),
        "the test URL goes through the proxy"
    );
    let cfg = format!(
        r#"database:
  url: "{url}"
  connectionTimeoutMs: 1000
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
destinations:
  receiver:
    type: http
    baseUrl: {receiver}
routes:
  - topicPattern: "**"
    destination: receiver
"#,
        receiver = receiver.url()
    );
    let mut service = Service::start("ready", &cfg);
    let mut status = 0;
    for _ in 0..100 {
        status = service.get("/health/ready").0;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "ready once started");
    proxy.take_down();
    for _ in 0..100 {
        status = service.get("/health/ready").0;
        if status == 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 503, "readiness reports the outage");
    let (_, body) = service.get("/health/ready");
    assert!(body.contains(r#""database":{"status":"down""#), "{body}");
    // The application keeps writing while QueueBox cannot reach the database.
    insert(
        &schema,
        "INSERT INTO outbox (topic, payload) SELECT 't', '{}' FROM generate_series(1, 20)",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.count(), 0);
    proxy.bring_up();
    for _ in 0..100 {
        status = service.get("/health/ready").0;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "readiness recovers by itself");
    // Not wait_until: a failure here (seen once in a full run under load, never alone) must
    // say where the rows are and what QueueBox logged meanwhile.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while count_state(&schema, "sent").await != 20 {
        if std::time::Instant::now() >= deadline {
            let states = rows(
                &schema,
                "SELECT state || '=' || count(*) FROM outbox GROUP BY state ORDER BY state",
            )
            .await
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>();
            panic!(
                "not every row sent 20 s after readiness recovered: states {states:?}, {} delivered; log: {:#?}",
                receiver.count(),
                service.log_lines()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}

/// Issue 17 defect 4 (SEC-5): a receiver that echoes a destination's static header value in its
/// error body, as written, inside JSON, percent-encoded or in Base64, gets none of them into
/// `last_error` or any log line.
#[tokio::test(flavor = "multi_thread")]
async fn sec_5_static_header_values_echoed_by_a_receiver_are_redacted_everywhere() {
    use base64::Engine as _;
    let schema = TestSchema::create("e2e_static_secret").await;
    const VALUE: &str = "S3cr3t/Static+Value=42 x";
    let forms = |value: &str| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(value);
        let pct = percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
        let json = serde_json::to_string(value).unwrap();
        vec![
            value.to_owned(),
            b64,
            pct,
            json[1..json.len() - 1].to_owned(),
        ]
    };
    let receiver = Receiver::start(move |request, _| {
        // The receiver echoes whatever it got, so the test shows what would leak.
        let got = request
            .header("x-static-secret")
            .unwrap_or("none")
            .to_owned();
        let f = forms(&got);
        let body = serde_json::json!({
            "error": format!("key {} refused", f[0]),
            "b64": f[1],
            "pct": f[2],
        });
        Reply::status(500).body(&format!("{body} raw={}", f[0]))
    })
    .await;
    let destination =
        format!("    headers:\n      X-Static-Secret: \"{VALUE}\"\n    timeoutMs: 2000");
    let config = config(
        &schema,
        &receiver.url(),
        "  retryBaseDelayMs: 10\n  retryMaxDelayMs: 20",
        &destination,
    );
    let mut service = Service::start("static_secret", &config);
    insert(
        &schema,
        "INSERT INTO outbox (topic, payload, max_attempts) VALUES ('t', '{}', 2)",
    )
    .await;
    wait_until(Duration::from_secs(10), "the row dead", async || {
        count_state(&schema, "dead").await == 1
    })
    .await;
    assert_eq!(
        receiver.requests()[0].header("x-static-secret"),
        Some(VALUE),
        "the header is sent as configured"
    );
    let error: String = rows(&schema, "SELECT last_error FROM outbox").await[0].get(0);
    assert!(error.starts_with("HTTP 500"), "{error}");
    assert!(error.contains("[REDACTED]"), "{error}");
    for form in forms(VALUE) {
        assert!(!error.contains(&form), "last_error leaks {form:?}: {error}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    service.drain_log();
    let log: Vec<String> = service.log.iter().map(|l| l.to_string()).collect();
    assert_eq!(service.stop(), Some(0));
    assert!(
        log.iter().any(|l| l.contains("HTTP 500")),
        "the failure is logged: {log:#?}"
    );
    for line in &log {
        for form in forms(VALUE) {
            let escaped = serde_json::to_string(&form).unwrap();
            assert!(
                !line.contains(&escaped[1..escaped.len() - 1]),
                "a log line leaks {form:?}: {line}"
            );
        }
    }
    schema.drop().await;
}

/// OUT-57 (all but point 7, which is polling's, and point 6's `migrate: false` branch, covered
/// by the schema guard tests): with `capture.mode: notify` and `pollIntervalMs: 5000`, the start
/// creates the trigger, a row inserted while the poller sleeps arrives in well under the poll
/// interval, the advisory `outbox-capture` component is up; the server ending the listening
/// connection costs latency, never a message (polling delivers, readiness stays 200, a warning
/// is logged); the listener reconnects by itself and notifications work again.
#[tokio::test(flavor = "multi_thread")]
async fn out_57_notify_wakes_the_poller_and_a_killed_listener_costs_latency_never_a_message() {
    let schema = TestSchema::create("e2e_notify").await;
    let receiver = Receiver::start(ok).await;
    let app = format!("qb_notify_{}", std::process::id());
    let cfg = format!(
        r#"database:
  url: "{db}&application_name={app}"
  startupTimeoutMs: 10000
server:
  httpPort: 0
outbox:
  pollIntervalMs: 5000
  capture:
    mode: notify
destinations:
  receiver:
    type: http
    baseUrl: {url}
routes:
  - topicPattern: "**"
    destination: receiver
"#,
        db = schema.queuebox_url(),
        url = receiver.url()
    );
    let mut service = Service::start("notify", &cfg);
    service.wait_for_log(
        Duration::from_secs(20),
        "Listening for outbox notifications",
    );
    let trigger = rows(
        &schema,
        "SELECT count(*) FROM pg_trigger WHERE tgname = 'queuebox_outbox_notify' \
         AND tgrelid = 'outbox'::regclass",
    )
    .await;
    assert_eq!(trigger[0].get::<_, i64>(0), 1, "SCH-25: created at start");
    let mut body = String::new();
    for _ in 0..100 {
        let (status, b) = service.get("/health/ready");
        body = b;
        if status == 200 && body.contains(r#""outbox-capture":{"status":"up""#) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        body.contains(r#""outbox-capture":{"status":"up","advisory":true}"#),
        "{body}"
    );
    // The first cycles found nothing, so the poller now sleeps its 5 s.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let inserted = std::time::Instant::now();
    insert(
        &schema,
        "INSERT INTO outbox (topic, payload) VALUES ('t', '{\"n\": 1}')",
    )
    .await;
    receiver
        .wait_for(Duration::from_secs(10), "the notified row", |r| {
            !r.is_empty()
        })
        .await;
    assert!(
        inserted.elapsed() < Duration::from_millis(2500),
        "a notification ends the 5 s wait: {:?}",
        inserted.elapsed()
    );

    // Point 4/5: the server ends the listening connection.
    let killed = rows(
        &schema,
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = '{app}' AND query = 'LISTEN queuebox_outbox'"
        ),
    )
    .await;
    assert_eq!(killed.len(), 1, "one listening connection per replica");
    insert(
        &schema,
        "INSERT INTO outbox (topic, payload) VALUES ('t', '{\"n\": 2}')",
    )
    .await;
    service.wait_for_log(
        Duration::from_secs(10),
        "The LISTEN connection of outbox.capture.mode notify failed",
    );
    let (status, body) = service.get("/health/ready");
    assert_eq!(status, 200, "advisory: never fails readiness: {body}");
    receiver
        .wait_for(Duration::from_secs(20), "the row polling finds", |r| {
            r.len() >= 2
        })
        .await;
    service.wait_for_log(
        Duration::from_secs(20),
        "The LISTEN connection of outbox.capture.mode notify is open again",
    );
    // The poller is asleep again; a notification on the new connection ends the wait.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let inserted = std::time::Instant::now();
    insert(
        &schema,
        "INSERT INTO outbox (topic, payload) VALUES ('t', '{\"n\": 3}')",
    )
    .await;
    receiver
        .wait_for(
            Duration::from_secs(10),
            "the row after the reconnect",
            |r| r.len() >= 3,
        )
        .await;
    assert!(
        inserted.elapsed() < Duration::from_millis(2500),
        "notifications work again after the reconnect: {:?}",
        inserted.elapsed()
    );
    wait_until(Duration::from_secs(10), "every row sent", async || {
        count_state(&schema, "sent").await == 3
    })
    .await;
    let ns: Vec<i64> = receiver
        .requests()
        .iter()
        .map(|r| r.json()["n"].as_i64().unwrap())
        .collect();
    assert_eq!(ns, vec![1, 2, 3], "each row once");
    assert_eq!(service.stop(), Some(0));
    schema.drop().await;
}
