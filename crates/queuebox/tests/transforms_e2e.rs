//! Transforms and key expressions end to end (transforms.md): the real `queuebox` binary, the
//! real PostgreSQL, HTTP senders and receivers started by the test. What a user sees: what a
//! webhook is stored as, what a receiver gets, what a row's state and `last_error` become, what
//! `check` says.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::pg::TestSchema;
use support::process::{Scratch, queuebox, stderr};
use support::receiver::{Receiver, Reply};
use support::service::{Answer, Service, http_post};

/// A self-calling function: stopped by the depth limit or the time limit (TRF-41).
const RECURSION: &str = "( $f := function(){ $f() }; $f() )";
/// Long work without deep nesting: only the time limit stops it (TRF-10).
const LOOP: &str = "$count($sort([1..900000].($string($)), function($a, $b){ $a < $b }))";

fn post(service: &Service, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    http_post(service.port, path, &all, body.as_bytes())
}

async fn rows(schema: &TestSchema, sql: &str) -> Vec<tokio_postgres::Row> {
    schema.client().query(sql, &[]).await.unwrap()
}

async fn wait_until(limit: Duration, what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn inbox_config(schema: &TestSchema, sources: &str) -> String {
    format!(
        "database:\n  url: \"{}\"\nserver:\n  httpPort: 0\nsources:\n{sources}",
        schema.queuebox_url()
    )
}

/// TRF-5, TRF-11, TRF-12, TRF-25, TRF-26, TRF-30: the key expressions pick the key and event
/// type from the body, and the source transform reshapes the webhook before it is stored, with
/// every source-stage variable bound (and `$messageId`, an outbox variable, undefined).
#[tokio::test(flavor = "multi_thread")]
async fn trf_5_a_source_transform_reshapes_the_webhook_before_it_is_stored() {
    let schema = TestSchema::create("trf_src").await;
    let sources = r#"  hooks:
    path: /hooks
    consumption: pull
    idempotencyKeyExpression: '$split(subject, "/")[2]'
    eventTypeExpression: '$lookup({"created": "order.created"}, kind)'
    aggregateIdExpression: 'orderId'
    transform:
      expression: |
        {
          "tenant": $headers."x-tenant",
          "source": $source,
          "key": $idempotencyKey,
          "type": $eventType,
          "total": $sum(items.price),
          "at": $timestamp,
          "notBound": $messageId
        }
"#;
    let service = Service::start("trf-src", &inbox_config(&schema, sources));
    let body = r#"{"subject": "/organization/515725/invitation/1", "kind": "created",
                   "orderId": 42, "items": [{"price": 2}, {"price": 3.5}]}"#;
    let answer = post(&service, "/inbox/hooks", &[("X-Tenant", "acme")], body);
    assert_eq!(answer.status, 202, "{answer:?}");
    let stored = rows(
        &schema,
        "SELECT idempotency_key, event_type, aggregate_id, payload::text FROM inbox",
    )
    .await;
    assert_eq!(stored.len(), 1);
    let row = &stored[0];
    assert_eq!(row.get::<_, String>(0), "515725", "TRF-30 first example");
    assert_eq!(row.get::<_, String>(1), "order.created");
    assert_eq!(
        row.get::<_, String>(2),
        "42",
        "a whole number has no fraction"
    );
    let payload: Value = serde_json::from_str(&row.get::<_, String>(3)).unwrap();
    let at = payload["at"].as_str().unwrap().to_owned();
    assert!(at.ends_with('Z') && at.len() == 24, "{at}");
    assert_eq!(
        payload,
        json!({"tenant": "acme", "source": "hooks", "key": "515725",
               "type": "order.created", "total": 5.5, "at": at})
    );
    // An unknown kind gives no value from the expression: no event type (no path configured).
    let answer = post(
        &service,
        "/inbox/hooks",
        &[],
        r#"{"subject": "/o/2/i/1", "kind": "unknown", "items": []}"#,
    );
    assert_eq!(answer.status, 202, "{answer:?}");
    let stored = rows(
        &schema,
        "SELECT event_type, payload->>'type' FROM inbox WHERE idempotency_key = '2'",
    )
    .await;
    assert_eq!(stored[0].get::<_, Option<String>>(0), None);
    assert_eq!(
        stored[0].get::<_, Option<String>>(1),
        None,
        "$eventType is null"
    );
    drop(service);
    schema.drop().await;
}

/// TRF-17 (HTTP source), TRF-21..24, TRF-41: `Fail` and `Dead` answer 422 and store nothing;
/// `Skip` stores the original payload; each counts in the failure metric with its strategy.
#[tokio::test(flavor = "multi_thread")]
async fn trf_17_an_http_source_transform_failure_answers_422_or_skips() {
    let schema = TestSchema::create("trf_http").await;
    let source = |name: &str, on_error: &str| {
        format!(
            "  {name}:\n    path: /{name}\n    consumption: pull\n    idempotencyKeyPath: $.id\n    transform:\n      expression: 'missing.field'\n      onError: {on_error}\n"
        )
    };
    let sources = [
        source("fail", "Fail"),
        source("dead", "Dead"),
        source("skip", "Skip"),
    ]
    .concat();
    let mut service = Service::start("trf-http", &inbox_config(&schema, &sources));
    let body = r#"{"id": "e-1", "n": 1}"#;
    for name in ["fail", "dead"] {
        let answer = post(&service, &format!("/inbox/{name}"), &[], body);
        assert_eq!(
            (answer.status, answer.json()),
            (
                422,
                json!({"error": "Transform failed: The expression produced no value."})
            ),
            "{name}"
        );
    }
    let answer = post(&service, "/inbox/skip", &[], body);
    assert_eq!(answer.status, 202, "{answer:?}");
    let stored = rows(&schema, "SELECT source, payload::text FROM inbox").await;
    assert_eq!(stored.len(), 1, "Fail and Dead store nothing");
    assert_eq!(stored[0].get::<_, String>(0), "skip");
    let payload: Value = serde_json::from_str(&stored[0].get::<_, String>(1)).unwrap();
    assert_eq!(
        payload,
        json!({"id": "e-1", "n": 1}),
        "the original payload"
    );
    for strategy in ["fail", "dead", "skip"] {
        assert_eq!(
            service.metric(&format!(
                "queuebox_transform_failures_total{{strategy=\"{strategy}\"}}"
            )),
            Some(1.0),
            "{strategy}"
        );
    }
    assert_eq!(
        service.metric("queuebox_inbox_rejections_total{reason=\"transform_failed\"}"),
        Some(2.0)
    );
    // TRF-22: one warn line per failure with the stage, path, strategy and reason; no payload.
    service.wait_for_log(Duration::from_secs(5), "The transform failed.");
    let line = service
        .log
        .iter()
        .find(|l| l["message"] == "The transform failed.")
        .cloned()
        .unwrap();
    assert_eq!(line["level"], "WARN", "{line}");
    assert_eq!(line["stage"], "source");
    assert_eq!(line["path"], "sources.fail.transform");
    assert_eq!(line["strategy"], "fail");
    assert_eq!(line["reason"], "The expression produced no value.");
    assert_eq!(line["idempotencyKey"], "e-1");
    assert!(!line.to_string().contains("\"n\""), "no payload in {line}");
    drop(service);
    schema.drop().await;
}

/// TRF-4, TRF-10, TRF-41: a runaway source transform is cut off by its time limit (the loop) or
/// its depth limit (the recursion) within `timeoutMs` + 50 ms of evaluation, answered 422, and
/// the process goes on serving; a deep recursion stops on the depth limit, never a stack
/// overflow.
#[tokio::test(flavor = "multi_thread")]
async fn trf_41_runaway_expressions_are_cut_off_and_the_process_survives() {
    let schema = TestSchema::create("trf_run").await;
    let sources = format!(
        "  loop:\n    path: /loop\n    consumption: pull\n    idempotencyKeyPath: $.id\n    transform:\n      expression: '{LOOP}'\n      timeoutMs: 100\n\
         \x20 recurse:\n    path: /recurse\n    consumption: pull\n    idempotencyKeyPath: $.id\n    transform:\n      expression: '{RECURSION}'\n      timeoutMs: 100\n\
         \x20 deep:\n    path: /deep\n    consumption: pull\n    idempotencyKeyPath: $.id\n    transform:\n      expression: '( $d := function($n){{ $n = 0 ? 0 : 1 + $d($n - 1) }}; $d(1000000) )'\n      timeoutMs: 10000\n      maxDepth: 300\n\
         \x20 ok:\n    path: /ok\n    consumption: pull\n    idempotencyKeyPath: $.id\n    transform:\n      expression: '{{\"n\": n + 1}}'\n"
    );
    let service = Service::start("trf-run", &inbox_config(&schema, &sources));
    let started = Instant::now();
    let answer = post(&service, "/inbox/loop", &[], r#"{"id": "1"}"#);
    let took = started.elapsed();
    assert_eq!(
        (answer.status, answer.json()),
        (
            422,
            json!({"error": "Transform failed: The expression ran longer than 100 ms."})
        )
    );
    // The request also carries the HTTP round trip; the evaluation itself is bounded by 150 ms.
    assert!(
        took < Duration::from_millis(1000),
        "answered after {took:?}"
    );
    let answer = post(&service, "/inbox/recurse", &[], r#"{"id": "1"}"#);
    assert_eq!(answer.status, 422, "{answer:?}");
    let error = answer.json()["error"].as_str().unwrap().to_owned();
    assert!(
        error == "Transform failed: The expression nested deeper than 100 levels."
            || error == "Transform failed: The expression ran longer than 100 ms.",
        "{error}"
    );
    let answer = post(&service, "/inbox/deep", &[], r#"{"id": "1"}"#);
    assert_eq!(
        (answer.status, answer.json()),
        (
            422,
            json!({"error": "Transform failed: The expression nested deeper than 300 levels."})
        )
    );
    // Still serving, and transforms still run.
    let answer = post(&service, "/inbox/ok", &[], r#"{"id": "1", "n": 1}"#);
    assert_eq!(answer.status, 202, "{answer:?}");
    let stored = rows(&schema, "SELECT payload::text FROM inbox").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(
        serde_json::from_str::<Value>(&stored[0].get::<_, String>(0)).unwrap(),
        json!({"n": 2})
    );
    drop(service);
    schema.drop().await;
}

fn outbox_config(schema: &TestSchema, receiver: &Receiver, routes: &str, dests: &str) -> String {
    format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 100
  retryMaxDelayMs: 200
destinations:
  plain:
    type: http
    baseUrl: {url}
    path: /plain
{dests}
routes:
{routes}"#,
        db = schema.queuebox_url(),
        url = receiver.url()
    )
}

/// TRF-5, TRF-6, TRF-11, TRF-41: the route transform changes what the receiver gets while the
/// stored row stays; the destination transform receives the route's output; a retried delivery
/// is transformed again with the new `$attempt` (0, then 1) and the outbox variables.
#[tokio::test(flavor = "multi_thread")]
async fn trf_6_route_and_destination_transforms_run_on_every_attempt_and_leave_the_row() {
    let schema = TestSchema::create("trf_out").await;
    // The first delivery fails, the second succeeds.
    let receiver =
        Receiver::start(|_, seen| Reply::status(if seen == 0 { 500 } else { 200 })).await;
    let dests = format!(
        "  shaped:\n    type: http\n    baseUrl: {}\n    path: /shaped\n    transform:\n      expression: '$merge([$, {{\"wrapped\": true, \"attempt\": $attempt}}])'\n",
        receiver.url()
    );
    let routes = "  - topicPattern: order.*\n    destination: shaped\n    transform:\n      expression: '{\"orderId\": id, \"total\": $sum(lines.amount), \"id\": $messageId, \"topic\": $topic, \"routeAttempt\": $attempt, \"source\": $source}'\n";
    let service = Service::start(
        "trf-out",
        &outbox_config(&schema, &receiver, routes, &dests),
    );
    let stored = r#"{"id": "o-1", "lines": [{"amount": 2}, {"amount": 5}]}"#;
    schema
        .client()
        .batch_execute(&format!(
            "INSERT INTO outbox (topic, payload) VALUES ('order.created', '{stored}')"
        ))
        .await
        .unwrap();
    receiver
        .wait_for(Duration::from_secs(15), "two deliveries", |r| r.len() >= 2)
        .await;
    let requests = receiver.requests();
    let id = requests[0].header("x-message-id").unwrap().to_owned();
    for (n, request) in requests.iter().take(2).enumerate() {
        assert_eq!(request.path, "/shaped");
        assert_eq!(
            request.json(),
            json!({"orderId": "o-1", "total": 7, "id": id, "topic": "order.created",
                   "routeAttempt": n, "wrapped": true, "attempt": n}),
            "attempt {n}: $source is not bound at an outbox stage"
        );
        assert_eq!(request.header("x-attempt"), Some(n.to_string().as_str()));
    }
    wait_until(Duration::from_secs(10), "the row sent", async || {
        let r = rows(&schema, "SELECT state FROM outbox").await;
        r[0].get::<_, String>(0) == "sent"
    })
    .await;
    let row = rows(&schema, "SELECT payload::text FROM outbox").await;
    assert_eq!(
        serde_json::from_str::<Value>(&row[0].get::<_, String>(0)).unwrap(),
        serde_json::from_str::<Value>(stored).unwrap(),
        "TRF-6: the stored row is never changed"
    );
    drop(service);
    schema.drop().await;
}

/// TRF-17, TRF-23, TRF-41: `Skip` at the route publishes the original payload; `Skip` at the
/// destination publishes the route's output; `Fail` retries with `attempt + 1` until
/// `max_attempts`; `Dead` dead-letters at once with `attempt` unchanged. The failing
/// expressions are runaways cut off by their time limit, so each strategy is proven on a limit
/// hit. TRF-23: the rows a transform sends back to `pending` or to `dead` count in
/// `queuebox_outbox_messages_total`, and, as nothing was published for them, not in
/// `queuebox_outbox_destination_messages_total`.
#[tokio::test(flavor = "multi_thread")]
async fn trf_17_trf_23_outbox_strategies_on_a_runaway_expression_and_their_counters() {
    let schema = TestSchema::create("trf_strat").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let runaway = |on_error: &str| {
        format!(
            "    transform:\n      expression: '{LOOP}'\n      timeoutMs: 50\n      onError: {on_error}\n"
        )
    };
    let dests = format!(
        "  skipper:\n    type: http\n    baseUrl: {}\n    path: /skipper\n{}",
        receiver.url(),
        runaway("Skip")
    );
    let routes = format!(
        "  - topicPattern: skip.route\n    destination: plain\n{}\
         \x20 - topicPattern: skip.dest\n    destination: skipper\n    transform:\n      expression: '{{\"r\": n}}'\n\
         \x20 - topicPattern: fail.route\n    destination: plain\n{}\
         \x20 - topicPattern: dead.route\n    destination: plain\n{}",
        runaway("Skip"),
        runaway("Fail"),
        runaway("Dead")
    );
    let service = Service::start(
        "trf-strat",
        &outbox_config(&schema, &receiver, &routes, &dests),
    );
    schema
        .client()
        .batch_execute(
            "INSERT INTO outbox (topic, payload) VALUES ('skip.route', '{\"n\": 1}');
             INSERT INTO outbox (topic, payload) VALUES ('skip.dest', '{\"n\": 2}');
             INSERT INTO outbox (topic, payload, max_attempts) VALUES ('fail.route', '{\"n\": 3}', 2);
             INSERT INTO outbox (topic, payload) VALUES ('dead.route', '{\"n\": 4}');",
        )
        .await
        .unwrap();
    wait_until(Duration::from_secs(20), "every row settled", async || {
        let r = rows(
            &schema,
            "SELECT count(*) FROM outbox WHERE state IN ('sent', 'dead')",
        )
        .await;
        r[0].get::<_, i64>(0) == 4
    })
    .await;
    let by_topic = |topic: &str| {
        receiver
            .requests()
            .into_iter()
            .filter(|r| r.header("x-topic") == Some(topic))
            .map(|r| (r.path.clone(), r.json()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        by_topic("skip.route"),
        vec![("/plain".to_owned(), json!({"n": 1}))]
    );
    assert_eq!(
        by_topic("skip.dest"),
        vec![("/skipper".to_owned(), json!({"r": 2}))]
    );
    assert!(
        by_topic("fail.route").is_empty(),
        "a failed transform publishes nothing"
    );
    assert!(by_topic("dead.route").is_empty());
    let states = rows(
        &schema,
        "SELECT topic, state, attempt, last_error FROM outbox ORDER BY topic",
    )
    .await;
    let state = |topic: &str| {
        let r = states
            .iter()
            .find(|r| r.get::<_, String>(0) == topic)
            .unwrap();
        (
            r.get::<_, String>(1),
            r.get::<_, i32>(2),
            r.get::<_, Option<String>>(3),
        )
    };
    let timeout = Some("Transform failed: The expression ran longer than 50 ms.".to_owned());
    assert_eq!(state("dead.route"), ("dead".to_owned(), 0, timeout.clone()));
    assert_eq!(state("fail.route"), ("dead".to_owned(), 2, timeout));
    assert_eq!(state("skip.route").0, "sent");
    assert_eq!(state("skip.dest").0, "sent");
    // Skip(route) once + Skip(destination) once + Fail twice + Dead once.
    assert_eq!(
        service.metric("queuebox_transform_failures_total{strategy=\"skip\"}"),
        Some(2.0)
    );
    assert_eq!(
        service.metric("queuebox_transform_failures_total{strategy=\"fail\"}"),
        Some(2.0)
    );
    assert_eq!(
        service.metric("queuebox_transform_failures_total{strategy=\"dead\"}"),
        Some(1.0)
    );
    // TRF-23: `fail.route` went back to `pending` once, then `dead`; `dead.route` went `dead`.
    assert_eq!(
        service.metric("queuebox_outbox_messages_total{status=\"failed\"}"),
        Some(1.0)
    );
    assert_eq!(
        service.metric("queuebox_outbox_messages_total{status=\"dead\"}"),
        Some(2.0)
    );
    assert_eq!(
        service.metric("queuebox_outbox_messages_total{status=\"sent\"}"),
        Some(2.0)
    );
    // The publishes: one per destination, both successes; the transform failures are not
    // publishes.
    let publishes = |destination: &str, outcome: &str| {
        service
            .metric(&format!(
                "queuebox_outbox_destination_messages_total{{destination=\"{destination}\",outcome=\"{outcome}\"}}"
            ))
            .or_else(|| {
                service.metric(&format!(
                    "queuebox_outbox_destination_messages_total{{outcome=\"{outcome}\",destination=\"{destination}\"}}"
                ))
            })
            .unwrap_or(0.0)
    };
    assert_eq!(publishes("plain", "success"), 1.0);
    assert_eq!(publishes("skipper", "success"), 1.0);
    assert_eq!(publishes("plain", "failure"), 0.0);
    assert_eq!(publishes("skipper", "failure"), 0.0);
    drop(service);
    schema.drop().await;
}

/// TRF-3, TRF-39, TRF-41: an expression that does not compile, anywhere, stops `check` (and so
/// the start) naming its path; every bad one is listed in the one error.
#[test]
fn trf_39_check_names_the_path_of_every_expression_that_does_not_compile() {
    let scratch = Scratch::new("trf-check");
    let file = scratch.write(
        "q.yml",
        r#"database:
  url: postgres://app@db:5432/app
sources:
  hooks:
    path: /hooks
    idempotencyKeyExpression: 'id &'
    topic: hooks
    transform:
      expression: '{"a": }'
destinations:
  out:
    type: http
    baseUrl: http://127.0.0.1:9
    transform:
      expression: 'items[0'
routes:
  - topicPattern: "**"
    destination: out
    transform:
      expression: '$sum('
"#,
    );
    let output = queuebox(scratch.path())
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    for path in [
        "- destinations.out.transform.expression: does not compile: S0",
        "- routes[0].transform.expression: does not compile: S0",
        "- sources.hooks.idempotencyKeyExpression: does not compile: S0",
        "- sources.hooks.transform.expression: does not compile: S0",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(path)),
            "{path} in:\n{text}"
        );
    }
    assert!(
        text.starts_with("The configuration has 4 errors."),
        "{text}"
    );
}

/// The inbox row of `key`, every column, as JSON text, so a test can tell that a repeat changed
/// nothing.
async fn inbox_row_text(schema: &TestSchema, key: &str) -> String {
    schema
        .client()
        .query_one(
            "SELECT to_jsonb(i)::text FROM inbox i WHERE idempotency_key = $1",
            &[&key],
        )
        .await
        .unwrap()
        .get(0)
}

/// TRF-7: the inbox relay runs no transform. A push source's transform runs once, at receipt;
/// the relay copies the stored inbox payload into the outbox unchanged (were it transformed
/// again, `n` would be 3) and the receiver gets that payload.
#[tokio::test(flavor = "multi_thread")]
async fn trf_7_the_relay_forwards_the_stored_inbox_payload_without_a_transform() {
    let schema = TestSchema::create("trf_relay").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let yaml = format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
inbox:
  relay:
    pollIntervalMs: 50
sources:
  hooks:
    path: /hooks
    idempotencyKeyPath: $.id
    topic: hooks.received
    transform:
      expression: '{{"id": id, "n": n + 1}}'
destinations:
  plain:
    type: http
    baseUrl: {url}
    path: /plain
routes:
  - topicPattern: "**"
    destination: plain
"#,
        db = schema.queuebox_url(),
        url = receiver.url()
    );
    let service = Service::start("trf-relay", &yaml);
    let answer = post(&service, "/inbox/hooks", &[], r#"{"id": "r-1", "n": 1}"#);
    assert_eq!(answer.status, 202, "{answer:?}");
    receiver
        .wait_for(Duration::from_secs(15), "the relayed delivery", |r| {
            !r.is_empty()
        })
        .await;
    assert_eq!(receiver.requests()[0].json(), json!({"id": "r-1", "n": 2}));
    let inbox = rows(&schema, "SELECT payload::text FROM inbox").await;
    let outbox = rows(&schema, "SELECT payload::text, topic FROM outbox").await;
    assert_eq!(outbox.len(), 1);
    let parse = |text: String| serde_json::from_str::<Value>(&text).unwrap();
    assert_eq!(parse(inbox[0].get(0)), json!({"id": "r-1", "n": 2}));
    assert_eq!(
        parse(outbox[0].get(0)),
        parse(inbox[0].get(0)),
        "the outbox row holds the stored inbox payload"
    );
    assert_eq!(outbox[0].get::<_, String>(1), "hooks.received");
    drop(service);
    schema.drop().await;
}

/// TRF-19, TRF-20: on HTTP the transform runs before the duplicate check, so a repeat of a
/// stored message whose transform now fails is answered 422, not 200; a repeat whose transform
/// succeeds is a duplicate (200). Neither changes the stored row.
#[tokio::test(flavor = "multi_thread")]
async fn trf_19_trf_20_an_http_repeat_whose_transform_fails_gets_422_and_changes_nothing() {
    let schema = TestSchema::create("trf_repeat").await;
    let sources = r#"  hooks:
    path: /hooks
    consumption: pull
    idempotencyKeyPath: $.id
    transform:
      expression: 'fail ? nothing.here : {"id": id, "n": n}'
"#;
    let service = Service::start("trf-repeat", &inbox_config(&schema, sources));
    let answer = post(&service, "/inbox/hooks", &[], r#"{"id": "d-1", "n": 1}"#);
    assert_eq!(answer.status, 202, "{answer:?}");
    let first = inbox_row_text(&schema, "d-1").await;
    let row: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(
        (&row["state"], &row["payload"]),
        (&json!("pending"), &json!({"id": "d-1", "n": 1})),
        "{first}"
    );
    let answer = post(
        &service,
        "/inbox/hooks",
        &[],
        r#"{"id": "d-1", "n": 2, "fail": true}"#,
    );
    assert_eq!(
        (answer.status, answer.json()),
        (
            422,
            json!({"error": "Transform failed: The expression produced no value."})
        ),
        "TRF-20: 422, not 200"
    );
    let answer = post(&service, "/inbox/hooks", &[], r#"{"id": "d-1", "n": 3}"#);
    assert_eq!(
        (answer.status, answer.json()),
        (200, json!({"status": "duplicate"}))
    );
    assert_eq!(
        inbox_row_text(&schema, "d-1").await,
        first,
        "TRF-19: a repeat never alters the stored row"
    );
    assert_eq!(rows(&schema, "SELECT 1 FROM inbox").await.len(), 1);
    drop(service);
    schema.drop().await;
}

/// TRF-38, TRF-41 ("Relay topics"): a push source whose topic renders `{{ eventType }}` sends a
/// stored row without an event type to `dead` with the spec's text and writes no outbox row, while a
/// row with one is relayed under it; and `{{ eventType }}` with no event-type source stops
/// `check` naming the keys of the source's kind.
#[tokio::test(flavor = "multi_thread")]
async fn trf_38_a_relay_topic_that_renders_empty_marks_the_row_dead_and_writes_no_outbox_row() {
    let schema = TestSchema::create("trf_topic").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let yaml = format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
inbox:
  relay:
    pollIntervalMs: 50
sources:
  hooks:
    path: /hooks
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    topic: "{{{{ eventType }}}}"
destinations:
  plain:
    type: http
    baseUrl: {url}
    path: /plain
routes:
  - topicPattern: "**"
    destination: plain
"#,
        db = schema.queuebox_url(),
        url = receiver.url()
    );
    let service = Service::start("trf-topic", &yaml);
    // An HTTP push source renders the relay topic at receipt (issue 14 item 6): the webhook
    // without a type is refused with 400 and stores nothing.
    assert_eq!(
        post(&service, "/inbox/hooks", &[], r#"{"id": "t-none"}"#).status,
        400
    );
    // A row the relay finds without an event type (as a broker source or an older version
    // stores it) goes dead at the relay, as TRF-38 says.
    schema
        .client()
        .batch_execute(
            "INSERT INTO inbox (source, idempotency_key, payload, state, consumption) \
             VALUES ('hooks', 't-none', '{\"id\": \"t-none\"}', 'pending', 'push')",
        )
        .await
        .unwrap();
    assert_eq!(
        post(
            &service,
            "/inbox/hooks",
            &[],
            r#"{"id": "t-typed", "type": "order.created"}"#
        )
        .status,
        202
    );
    wait_until(Duration::from_secs(15), "both rows settled", async || {
        let r = rows(
            &schema,
            "SELECT count(*) FROM inbox WHERE state IN ('dead', 'processed')",
        )
        .await;
        r[0].get::<_, i64>(0) == 2
    })
    .await;
    let dead = rows(
        &schema,
        "SELECT state, last_error FROM inbox WHERE idempotency_key = 't-none'",
    )
    .await;
    assert_eq!(dead[0].get::<_, String>(0), "dead");
    assert_eq!(
        dead[0].get::<_, Option<String>>(1).as_deref(),
        Some("The topic template '{{ eventType }}' rendered an invalid topic ''.")
    );
    let outbox = rows(&schema, "SELECT topic FROM outbox").await;
    assert_eq!(outbox.len(), 1, "no outbox row for the dead inbox row");
    assert_eq!(outbox[0].get::<_, String>(0), "order.created");
    drop(service);
    schema.drop().await;

    let scratch = Scratch::new("trf-topic-check");
    let file = scratch.write(
        "q.yml",
        r#"database:
  url: postgres://app@db:5432/app
sources:
  hooks:
    path: /hooks
    idempotencyKeyPath: $.id
    topic: "orders.{{ eventType }}"
destinations:
  out:
    type: http
    baseUrl: http://127.0.0.1:9
routes:
  - topicPattern: "**"
    destination: out
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
            "sources.hooks.topic: uses {{ eventType }}, so set eventTypePath, eventTypeHeader or eventTypeExpression"
        ),
        "{text}"
    );
}
