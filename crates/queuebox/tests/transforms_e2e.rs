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

/// TRF-3: `queuebox run` compiles every configured expression at start (a source transform, a
/// key expression, a route and a destination transform) and one that does not compile stops the
/// start naming its path, before the database is reached: the database here is never reachable,
/// so no message could have been taken. (That no expression is compiled again per message is
/// not visible from outside the process; the stages hold the compiled expression, wiring.rs.)
#[test]
fn trf_3_run_compiles_every_expression_at_start_and_stops_naming_each_path() {
    let scratch = Scratch::new("trf-3");
    let file = scratch.write(
        "q.yml",
        r#"database:
  url: postgres://app@127.0.0.1:1/app
  startupTimeoutMs: 60000
server:
  httpPort: 0
sources:
  hooks:
    path: /hooks
    consumption: pull
    idempotencyKeyPath: $.id
    eventTypeExpression: 'type ]'
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
        .args(["run", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    let lines = error_lines(&text);
    let expected = [
        "- destinations.out.transform.expression: does not compile: S0",
        "- routes[0].transform.expression: does not compile: S0",
        "- sources.hooks.eventTypeExpression: does not compile: S0",
        "- sources.hooks.transform.expression: does not compile: S0",
    ];
    assert_eq!(lines.len(), expected.len(), "{text}");
    for (line, start) in lines.iter().zip(expected) {
        assert!(line.starts_with(start), "{start} in:\n{text}");
    }
    assert!(!text.contains("QueueBox started"), "{text}");
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

/// `check` on `yaml`: its exit code and standard error.
fn check(label: &str, yaml: &str) -> (Option<i32>, String) {
    let scratch = Scratch::new(label);
    let file = scratch.write("q.yml", yaml);
    let output = queuebox(scratch.path())
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    (output.status.code(), stderr(&output))
}

/// The lines of a configuration error that start with `- `, sorted as the loader prints them.
fn error_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("- "))
        .map(str::to_owned)
        .collect()
}

/// The log lines whose message is `message`.
fn lines_with(service: &Service, message: &str) -> Vec<Value> {
    service
        .log
        .iter()
        .filter(|l| l["message"] == message)
        .cloned()
        .collect()
}

/// TRF-9: the rules of a transform block, seen through `check` (a blank expression, `timeoutMs`
/// and `maxDepth` of 0, `onError: fail` in the wrong letter case), and its defaults, seen through
/// `run`: a block with only `expression` stops a loop at 100 ms and a recursion at 100 levels,
/// and fails with `Fail` (the metric's strategy).
#[tokio::test(flavor = "multi_thread")]
async fn trf_9_a_transform_block_has_its_rules_and_its_defaults() {
    let (code, text) = check(
        "trf-9-check",
        r#"database:
  url: postgres://app@db:5432/app
sources:
  hooks:
    path: /hooks
    consumption: pull
    idempotencyKeyPath: $.id
    transform:
      expression: "  "
      maxDepth: 0
destinations:
  out:
    type: http
    baseUrl: http://127.0.0.1:9
    transform:
      expression: $
      timeoutMs: 0
      onError: fail
routes:
  - topicPattern: "**"
    destination: out
    transform:
      expression: $
      onError: Dead
"#,
    );
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(
        error_lines(&text),
        [
            "- destinations.out.transform.onError: must be one of Fail, Skip, Dead, got \"fail\"; did you mean Fail?",
            "- destinations.out.transform.timeoutMs: must be greater than 0, got 0",
            "- sources.hooks.transform.expression: must not be blank",
            "- sources.hooks.transform.maxDepth: must be greater than 0, got 0",
        ],
        "{text}"
    );

    let schema = TestSchema::create("trf_9").await;
    let sources = format!(
        "  loop:\n    path: /loop\n    consumption: pull\n    idempotencyKeyPath: $.id\n    transform:\n      expression: '{LOOP}'\n\
         \x20 deep:\n    path: /deep\n    consumption: pull\n    idempotencyKeyPath: $.id\n    transform:\n      expression: '( $d := function($n){{ $n = 0 ? 0 : 1 + $d($n - 1) }}; $d(100000) )'\n      timeoutMs: 60000\n"
    );
    let service = Service::start("trf-9", &inbox_config(&schema, &sources));
    let answer = post(&service, "/inbox/loop", &[], r#"{"id": "1"}"#);
    assert_eq!(
        (answer.status, answer.json()),
        (
            422,
            json!({"error": "Transform failed: The expression ran longer than 100 ms."})
        ),
        "timeoutMs defaults to 100"
    );
    let answer = post(&service, "/inbox/deep", &[], r#"{"id": "1"}"#);
    assert_eq!(
        (answer.status, answer.json()),
        (
            422,
            json!({"error": "Transform failed: The expression nested deeper than 100 levels."})
        ),
        "maxDepth defaults to 100"
    );
    assert_eq!(
        service.metric("queuebox_transform_failures_total{strategy=\"fail\"}"),
        Some(2.0),
        "onError defaults to Fail"
    );
    assert_eq!(rows(&schema, "SELECT 1 FROM inbox").await.len(), 0);
    drop(service);
    schema.drop().await;
}

/// TRF-12: `$headers` names match exactly. An HTTP source stores header names in lower case, so
/// `$headers."x-tenant"` finds the `X-Tenant` header and `$headers."X-Tenant"` finds nothing
/// (undefined: the field is left out, it is no error).
#[tokio::test(flavor = "multi_thread")]
async fn trf_12_header_names_match_exactly_and_an_http_source_has_them_in_lower_case() {
    let schema = TestSchema::create("trf_12").await;
    let sources = r#"  hooks:
    path: /hooks
    consumption: pull
    idempotencyKeyPath: $.id
    transform:
      expression: '{"lower": $headers."x-tenant", "asSent": $headers."X-Tenant", "names": $keys($headers)[$lowercase($) = "x-tenant"]}'
"#;
    let service = Service::start("trf-12", &inbox_config(&schema, sources));
    let answer = post(
        &service,
        "/inbox/hooks",
        &[("X-Tenant", "acme")],
        r#"{"id": "h-1"}"#,
    );
    assert_eq!(answer.status, 202, "{answer:?}");
    let stored = rows(&schema, "SELECT payload::text FROM inbox").await;
    assert_eq!(
        serde_json::from_str::<Value>(&stored[0].get::<_, String>(0)).unwrap(),
        json!({"lower": "acme", "names": "x-tenant"})
    );
    drop(service);
    schema.drop().await;
}

/// TRF-14: every kind of JSON value a transform returns becomes the stored payload as it is: an
/// object, an array, a string, a number, a boolean, and `null`, which is a valid payload.
#[tokio::test(flavor = "multi_thread")]
async fn trf_14_every_json_result_is_the_stage_output_and_null_is_a_valid_payload() {
    let schema = TestSchema::create("trf_14").await;
    let sources = r#"  hooks:
    path: /hooks
    consumption: pull
    idempotencyKeyPath: $.id
    transform:
      expression: 'v'
"#;
    let service = Service::start("trf-14", &inbox_config(&schema, sources));
    let values = [
        json!({"a": [1, {"b": null}]}),
        json!([1, "two", false]),
        json!("text"),
        json!(2.5),
        json!(true),
        Value::Null,
    ];
    for (n, value) in values.iter().enumerate() {
        let body = json!({"id": n.to_string(), "v": value}).to_string();
        let answer = post(&service, "/inbox/hooks", &[], &body);
        assert_eq!(answer.status, 202, "{value}: {answer:?}");
        let stored = schema
            .client()
            .query_one(
                "SELECT payload::text FROM inbox WHERE idempotency_key = $1",
                &[&n.to_string()],
            )
            .await
            .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&stored.get::<_, String>(0)).unwrap(),
            *value
        );
    }
    assert_eq!(
        service
            .metric("queuebox_transform_failures_total{strategy=\"fail\"}")
            .unwrap_or(0.0),
        0.0,
        "no result was a failure"
    );
    drop(service);
    schema.drop().await;
}

/// A failure text that carries two secrets pull.md §11.2 masks: URL user information and a
/// `password=` value.
const LEAKY: &str = r#"$error("cannot reach postgres://app:s3cret@db/app with password=hunter2")"#;

/// TRF-16: a failure text passes the redaction before it reaches the HTTP response, the log line
/// and `last_error`: the secrets of an engine error message are masked in all three.
#[tokio::test(flavor = "multi_thread")]
async fn trf_16_failure_texts_are_redacted_in_the_response_the_log_line_and_last_error() {
    let schema = TestSchema::create("trf_16").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let yaml = format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
sources:
  hooks:
    path: /hooks
    consumption: pull
    idempotencyKeyPath: $.id
    transform:
      expression: '{LEAKY}'
destinations:
  plain:
    type: http
    baseUrl: {url}
routes:
  - topicPattern: "**"
    destination: plain
    transform:
      expression: '{LEAKY}'
      onError: Dead
"#,
        db = schema.queuebox_url(),
        url = receiver.url()
    );
    let mut service = Service::start("trf-16", &yaml);
    let reason = "D3137: cannot reach postgres://***@db/app with password=[REDACTED]";
    let answer = post(&service, "/inbox/hooks", &[], r#"{"id": "s-1"}"#);
    assert_eq!(
        (answer.status, answer.json()),
        (422, json!({"error": format!("Transform failed: {reason}")})),
        "{answer:?}"
    );
    schema
        .client()
        .batch_execute("INSERT INTO outbox (topic, payload) VALUES ('t', '{}')")
        .await
        .unwrap();
    wait_until(Duration::from_secs(15), "the row dead", async || {
        let r = rows(&schema, "SELECT state FROM outbox").await;
        r[0].get::<_, String>(0) == "dead"
    })
    .await;
    let row = rows(&schema, "SELECT last_error FROM outbox").await;
    assert_eq!(
        row[0].get::<_, Option<String>>(0),
        Some(format!("Transform failed: {reason}"))
    );
    service.wait_for_log(Duration::from_secs(5), "The transform failed.");
    let deadline = Instant::now() + Duration::from_secs(5);
    while lines_with(&service, "The transform failed.").len() < 2 {
        assert!(Instant::now() < deadline, "two failure lines");
        service.drain_log();
        std::thread::sleep(Duration::from_millis(50));
    }
    for line in lines_with(&service, "The transform failed.") {
        assert_eq!(line["reason"], reason, "{line}");
    }
    let everything = service.log.iter().map(Value::to_string).collect::<String>();
    for secret in ["s3cret", "hunter2"] {
        assert!(!everything.contains(secret), "{secret} in the log");
    }
    drop(service);
    schema.drop().await;
}

/// TRF-21, TRF-22, TRF-24: whatever the outbox stage, `last_error` is `Transform failed:
/// <reason>`, and each failure logs one warn line `The transform failed.` with the stage, the
/// configuration path, the lower-case strategy, the reason and the row's ids and correlation id
/// (never the payload), and counts in the metric. A `Skip` is logged and counted like any failure,
/// and then the delivery proceeds with the original payload.
#[tokio::test(flavor = "multi_thread")]
async fn trf_21_trf_22_trf_24_each_stage_writes_its_failure_logs_its_path_and_skip_still_delivers()
{
    let schema = TestSchema::create("trf_21").await;
    let receiver = Receiver::start(|_, _| Reply::status(200)).await;
    let dests = format!(
        "  failing:\n    type: http\n    baseUrl: {}\n    path: /failing\n    transform:\n      expression: 'missing'\n      onError: Fail\n",
        receiver.url()
    );
    let routes = "  - topicPattern: r.dead\n    destination: plain\n    transform:\n      expression: 'missing'\n      onError: Dead\n\
                  \x20 - topicPattern: d.fail\n    destination: failing\n\
                  \x20 - topicPattern: r.skip\n    destination: plain\n    transform:\n      expression: 'missing'\n      onError: Skip\n";
    let mut service = Service::start("trf-21", &outbox_config(&schema, &receiver, routes, &dests));
    let ids: Vec<(String, String)> = rows(
        &schema,
        r#"INSERT INTO outbox (topic, payload, headers, max_attempts) VALUES
             ('r.dead', '{"secretField": 1}', '{"X-Correlation-Id": "corr-dead"}', 5),
             ('d.fail', '{"secretField": 2}', '{"X-Correlation-Id": "corr-fail"}', 1),
             ('r.skip', '{"secretField": 3}', '{"X-Correlation-Id": "corr-skip"}', 5)
           RETURNING id::text, topic"#,
    )
    .await
    .iter()
    .map(|r| (r.get(1), r.get(0)))
    .collect();
    let id_of = |topic: &str| ids.iter().find(|(t, _)| t == topic).unwrap().1.clone();
    wait_until(Duration::from_secs(20), "every row settled", async || {
        let r = rows(
            &schema,
            "SELECT count(*) FROM outbox WHERE state IN ('sent', 'dead')",
        )
        .await;
        r[0].get::<_, i64>(0) == 3
    })
    .await;
    let settled = rows(
        &schema,
        "SELECT topic, state, attempt, last_error FROM outbox ORDER BY topic",
    )
    .await;
    let state = |topic: &str| {
        let r = settled
            .iter()
            .find(|r| r.get::<_, String>(0) == topic)
            .unwrap();
        (
            r.get::<_, String>(1),
            r.get::<_, i32>(2),
            r.get::<_, Option<String>>(3),
        )
    };
    let text = Some("Transform failed: The expression produced no value.".to_owned());
    assert_eq!(state("r.dead"), ("dead".to_owned(), 0, text.clone()));
    assert_eq!(state("d.fail"), ("dead".to_owned(), 1, text));
    assert_eq!(state("r.skip"), ("sent".to_owned(), 0, None));
    // TRF-24: the skipped row was delivered, with its original payload.
    let delivered = receiver.requests();
    assert_eq!(delivered.len(), 1, "only the skipped row is published");
    assert_eq!(delivered[0].json(), json!({"secretField": 3}));
    assert_eq!(
        delivered[0].header("x-message-id"),
        Some(id_of("r.skip").as_str())
    );

    let deadline = Instant::now() + Duration::from_secs(5);
    while lines_with(&service, "The transform failed.").len() < 3 {
        assert!(Instant::now() < deadline, "three failure lines");
        service.drain_log();
        std::thread::sleep(Duration::from_millis(50));
    }
    let lines = lines_with(&service, "The transform failed.");
    assert_eq!(lines.len(), 3, "one line per failure: {lines:#?}");
    for (topic, stage, path, strategy, correlation) in [
        (
            "r.dead",
            "route",
            "routes[0].transform",
            "dead",
            "corr-dead",
        ),
        (
            "d.fail",
            "destination",
            "destinations.failing.transform",
            "fail",
            "corr-fail",
        ),
        (
            "r.skip",
            "route",
            "routes[2].transform",
            "skip",
            "corr-skip",
        ),
    ] {
        let line = lines
            .iter()
            .find(|l| l["messageId"] == id_of(topic).as_str())
            .unwrap_or_else(|| panic!("a line for {topic}: {lines:#?}"));
        assert_eq!(line["level"], "WARN", "{line}");
        assert_eq!(line["stage"], stage, "{line}");
        assert_eq!(line["path"], path, "{line}");
        assert_eq!(line["strategy"], strategy, "{line}");
        assert_eq!(
            line["reason"], "The expression produced no value.",
            "{line}"
        );
        assert_eq!(line["correlationId"], correlation, "{line}");
        assert!(
            !line.to_string().contains("secretField"),
            "no payload in {line}"
        );
        assert_eq!(
            service.metric(&format!(
                "queuebox_transform_failures_total{{strategy=\"{strategy}\"}}"
            )),
            Some(1.0),
            "{strategy}"
        );
    }
    drop(service);
    schema.drop().await;
}

/// TRF-27, TRF-29: a key expression reads the body as received (not the source transform's
/// output), with no variable bound, and with the fixed limits of 100 ms and depth 100. A failing
/// expression, or one that hits a limit, is no value with one warn line naming the source and
/// the key; the chain goes on to the path, and only an idempotency key missing at the end of the
/// HTTP chain answers 400.
#[tokio::test(flavor = "multi_thread")]
async fn trf_27_trf_29_key_expressions_read_the_received_body_unbound_and_fall_through_on_failure()
{
    let schema = TestSchema::create("trf_27").await;
    let sources = format!(
        r#"  keys:
    path: /keys
    consumption: pull
    idempotencyKeyExpression: 'id'
    eventTypeExpression: '{LOOP}'
    eventTypePath: $.type
    aggregateIdExpression: '$exists($source) or $exists($headers) or $exists($idempotencyKey) or $exists($eventType) or $exists($timestamp) ? "bound" : "unbound"'
    transform:
      expression: '{{"id": "changed-" & id}}'
  deep:
    path: /deep
    consumption: pull
    idempotencyKeyExpression: '$error("no key here")'
    idempotencyKeyPath: $.id
    aggregateIdExpression: '( $d := function($n){{ $n = 0 ? 0 : 1 + $d($n - 1) }}; $d(100000) )'
    aggregateIdPath: $.agg
  nokey:
    path: /nokey
    consumption: pull
    idempotencyKeyExpression: '$error("no key here")'
"#
    );
    let mut service = Service::start("trf-27", &inbox_config(&schema, &sources));
    let answer = post(
        &service,
        "/inbox/keys",
        &[("X-Tenant", "acme")],
        r#"{"id": "k-1", "type": "from.path"}"#,
    );
    assert_eq!(answer.status, 202, "{answer:?}");
    let answer = post(
        &service,
        "/inbox/deep",
        &[],
        r#"{"id": "d-1", "agg": "agg.path"}"#,
    );
    assert_eq!(answer.status, 202, "{answer:?}");
    let answer = post(&service, "/inbox/nokey", &[], r#"{"id": "n-1"}"#);
    assert_eq!(answer.status, 400, "only a missing key rejects: {answer:?}");
    let stored = rows(
        &schema,
        "SELECT source, idempotency_key, event_type, aggregate_id, payload::text FROM inbox ORDER BY source",
    )
    .await;
    // source, idempotency key, event type, aggregate id, payload.
    type Stored = (String, String, Option<String>, Option<String>, Value);
    let found: Vec<Stored> = stored
        .iter()
        .map(|r| {
            (
                r.get(0),
                r.get(1),
                r.get(2),
                r.get(3),
                serde_json::from_str(&r.get::<_, String>(4)).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "deep".to_owned(),
                "d-1".to_owned(),
                None,
                Some("agg.path".to_owned()),
                json!({"id": "d-1", "agg": "agg.path"})
            ),
            (
                "keys".to_owned(),
                "k-1".to_owned(),
                Some("from.path".to_owned()),
                Some("unbound".to_owned()),
                json!({"id": "changed-k-1"})
            ),
        ]
    );
    let expected = [
        (
            "keys",
            "sources.keys.eventTypeExpression",
            "The expression ran longer than 100 ms.",
        ),
        (
            "deep",
            "sources.deep.idempotencyKeyExpression",
            "D3137: no key here",
        ),
        (
            "deep",
            "sources.deep.aggregateIdExpression",
            "The expression nested deeper than 100 levels.",
        ),
        (
            "nokey",
            "sources.nokey.idempotencyKeyExpression",
            "D3137: no key here",
        ),
    ];
    let deadline = Instant::now() + Duration::from_secs(5);
    let failed = |service: &Service| {
        service
            .log
            .iter()
            .filter(|l| {
                l["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("counts as no value"))
            })
            .cloned()
            .collect::<Vec<_>>()
    };
    while failed(&service).len() < expected.len() {
        assert!(Instant::now() < deadline, "{:#?}", failed(&service));
        service.drain_log();
        std::thread::sleep(Duration::from_millis(50));
    }
    let lines = failed(&service);
    assert_eq!(lines.len(), expected.len(), "one line each: {lines:#?}");
    for (source, key, reason) in expected {
        let line = lines
            .iter()
            .find(|l| l["key"] == key)
            .unwrap_or_else(|| panic!("{key}: {lines:#?}"));
        assert_eq!(line["level"], "WARN", "{line}");
        assert_eq!(line["source"], source, "{line}");
        assert_eq!(line["reason"], reason, "{line}");
        assert!(line["message"].as_str().unwrap().contains(key), "{line}");
    }
    drop(service);
    schema.drop().await;
}

/// TRF-30: the examples of the specification, each through an HTTP source into the stored row,
/// with the path step that follows the expression where the example says it is tried next.
#[tokio::test(flavor = "multi_thread")]
async fn trf_30_the_key_expression_examples_give_their_values() {
    let schema = TestSchema::create("trf_30").await;
    let sources = r#"  ex:
    path: /ex
    consumption: pull
    idempotencyKeyExpression: '$split(subject, "/")[2]'
    eventTypeExpression: '$lookup({"created":"order.created"}, kind)'
    eventTypePath: $.fallbackType
    aggregateIdExpression: 'orderId'
  items:
    path: /items
    consumption: pull
    idempotencyKeyPath: $.id
    aggregateIdExpression: 'items'
    aggregateIdPath: $.agg
"#;
    let service = Service::start("trf-30", &inbox_config(&schema, sources));
    for (path, body) in [
        (
            "/inbox/ex",
            r#"{"subject":"/organization/515725/invitation/66725563","kind":"created","orderId":42}"#,
        ),
        (
            "/inbox/ex",
            r#"{"subject":"/organization/77/invitation/1","kind":"unknown","fallbackType":"from.path","orderId":7}"#,
        ),
        (
            "/inbox/items",
            r#"{"id":"i-1","items":[1,2],"agg":"from.path"}"#,
        ),
    ] {
        let answer = post(&service, path, &[], body);
        assert_eq!(answer.status, 202, "{body}: {answer:?}");
    }
    let stored = rows(
        &schema,
        "SELECT idempotency_key, event_type, aggregate_id FROM inbox ORDER BY idempotency_key",
    )
    .await;
    let found: Vec<(String, Option<String>, Option<String>)> = stored
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        found,
        [
            ("515725".to_owned(), some("order.created"), some("42")),
            ("77".to_owned(), some("from.path"), some("7")),
            ("i-1".to_owned(), None, some("from.path")),
        ]
    );
    drop(service);
    schema.drop().await;
}

/// TRF-25: every source kind (http, rabbitmq, kafka, nats) takes the three key expressions, and
/// `check` compiles each of them: one that does not compile is named by its path on each kind,
/// and the others load (an unknown key would be an error of its own). The NATS source runs them
/// in nats_e2e.rs.
#[test]
fn trf_25_every_source_kind_takes_the_three_key_expressions() {
    let three = |bad: &str| {
        [
            "idempotencyKeyExpression",
            "eventTypeExpression",
            "aggregateIdExpression",
        ]
        .iter()
        .map(|key| {
            let expression = if *key == bad { "id &" } else { "id" };
            format!("    {key}: '{expression}'\n")
        })
        .collect::<String>()
    };
    let yaml = format!(
        "database:\n  url: postgres://app@db:5432/app\nsources:\n\
         \x20 web:\n    path: /web\n    consumption: pull\n{}\
         \x20 rabbit:\n    type: rabbitmq\n    connectionUrl: amqp://guest:guest@127.0.0.1:5672/%2f\n    queueName: q\n    consumption: pull\n{}\
         \x20 kafka:\n    type: kafka\n    bootstrapServers: 127.0.0.1:19092\n    topics: [t]\n    groupId: g\n    consumption: pull\n{}\
         \x20 nats:\n    type: nats\n    servers: nats://127.0.0.1:4222\n    stream: s\n    durable: d\n    consumption: pull\n{}",
        three("idempotencyKeyExpression"),
        three("eventTypeExpression"),
        three("aggregateIdExpression"),
        three("idempotencyKeyExpression"),
    );
    let (code, text) = check("trf-25", &yaml);
    assert_eq!(code, Some(1), "{text}");
    let lines = error_lines(&text);
    let expected = [
        "- sources.kafka.aggregateIdExpression: does not compile: S0",
        "- sources.nats.idempotencyKeyExpression: does not compile: S0",
        "- sources.rabbit.eventTypeExpression: does not compile: S0",
        "- sources.web.idempotencyKeyExpression: does not compile: S0",
    ];
    assert_eq!(lines.len(), expected.len(), "{text}");
    for (line, start) in lines.iter().zip(expected) {
        assert!(line.starts_with(start), "{start} in:\n{text}");
    }
    let valid = yaml.replace("'id &'", "'id'");
    let (code, text) = check("trf-25-ok", &valid);
    assert_eq!(code, Some(0), "{text}");
}

/// TRF-34: each template kind takes only its names. A key template (RabbitMQ routing key, Kafka
/// record key, a route's key) and an address (RabbitMQ exchange, Kafka topic, NATS subject) take
/// `topic`, `key`, `aggregateType` and `payload`/`data` fields; a relay topic takes `source` and
/// `eventType`. A name outside the kind's set stops `check` naming the key. (How each kind
/// renders a missing value is proven by trf_35, trf_36, trf_37 and trf_38.)
#[test]
fn trf_34_each_template_kind_takes_only_its_names() {
    let yaml = |exchange: &str,
                routing: &str,
                key: &str,
                topic: &str,
                subject: &str,
                route: &str,
                relay: &str| {
        format!(
            r#"database:
  url: postgres://app@db:5432/app
sources:
  hooks:
    path: /hooks
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    topic: "{relay}"
destinations:
  rabbit:
    type: rabbitmq
    url: amqp://guest:guest@127.0.0.1:5672/%2f
    exchange: "{exchange}"
    routingKeyTemplate: "{routing}"
  kafka:
    type: kafka
    bootstrapServers: 127.0.0.1:19092
    topic: "{topic}"
    keyTemplate: "{key}"
  nats:
    type: nats
    servers: nats://127.0.0.1:4222
    subject: "{subject}"
routes:
  - topicPattern: "a.**"
    destination: rabbit
    routingKeyTemplate: "{route}"
  - topicPattern: "b.**"
    destination: kafka
  - topicPattern: "**"
    destination: nats
"#
        )
    };
    let good = yaml(
        "x.{{ aggregateType }}",
        "{{ topic }}.{{ payload.region }}",
        "{{ key }}",
        "{{ data.tenant }}",
        "s.{{ topic }}",
        "{{ aggregateType }}.{{ key }}",
        "in.{{ source }}.{{ eventType }}",
    );
    let (code, text) = check("trf-34-ok", &good);
    assert_eq!(code, Some(0), "{text}");
    let bad = yaml(
        "x.{{ source }}",
        "{{ eventType }}",
        "{{ source }}",
        "{{ eventType }}",
        "s.{{ source }}",
        "{{ eventType }}",
        "in.{{ topic }}.{{ payload.region }}",
    );
    let (code, text) = check("trf-34-bad", &bad);
    assert_eq!(code, Some(1), "{text}");
    let keys = "use topic, key, aggregateType, payload.<path>, data.<path>";
    assert_eq!(
        error_lines(&text),
        [
            format!(
                "- destinations.kafka.keyTemplate: unknown placeholder {{{{ source }}}}; {keys}"
            ),
            format!("- destinations.kafka.topic: unknown placeholder {{{{ eventType }}}}; {keys}"),
            format!("- destinations.nats.subject: unknown placeholder {{{{ source }}}}; {keys}"),
            format!("- destinations.rabbit.exchange: unknown placeholder {{{{ source }}}}; {keys}"),
            format!(
                "- destinations.rabbit.routingKeyTemplate: unknown placeholder {{{{ eventType }}}}; {keys}"
            ),
            format!(
                "- routes[0].routingKeyTemplate: unknown placeholder {{{{ eventType }}}}; {keys}"
            ),
            "- sources.hooks.topic: unknown placeholder {{ topic }}; use source, eventType"
                .to_owned(),
        ],
        "{text}"
    );
}

const ADMIN_TOKEN: &str = "trf-40-token";

/// `POST /admin/transform/test` with the bearer token: the answer.
fn transform_test(service: &Service, request: Value) -> Answer {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    http_post(
        service.port,
        "/admin/transform/test",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
        ],
        request.to_string().as_bytes(),
    )
}

/// The admin tester's result for `request`, which must succeed.
fn tested(service: &Service, request: Value) -> Value {
    let answer = transform_test(service, request);
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json()["result"].clone()
}

/// TRF-40: `POST /admin/transform/test` gives what the real stage gives for the same expression,
/// input and variable values. A source transform (every source variable, the headers as the row
/// stores them) against the stored payload; a route transform (every outbox variable, on the
/// first attempt and on the retry) against the bytes the receiver got; and the failures: an
/// engine error (the HTTP 422 body, byte for byte, and `last_error`) and a depth limit hit.
#[tokio::test(flavor = "multi_thread")]
async fn trf_40_the_admin_tester_gives_the_result_of_the_real_stage() {
    const SOURCE: &str = r#"{"tenant": $headers."x-tenant", "headers": $headers, "source": $source, "key": $idempotencyKey, "type": $eventType, "total": $sum(items.price), "name": $uppercase(name)}"#;
    const ROUTE: &str = r#"{"id": $messageId, "topic": $topic, "attempt": $attempt, "total": $sum(lines.(qty * price)), "country": $uppercase(address.country), "express": shipping = "express", "items": $count(lines)}"#;
    const BROKEN: &str = r#"{"n": total + name}"#;
    const DEEP: &str = r#"( $d := function($n){ $n = 0 ? 0 : 1 + $d($n - 1) }; $d(100000) )"#;
    let schema = TestSchema::create("trf_40").await;
    // Every first delivery of a row fails, so each row is delivered twice.
    let receiver = Receiver::start(|r, _| {
        Reply::status(if r.header("x-attempt") == Some("0") {
            500
        } else {
            200
        })
    })
    .await;
    let yaml = format!(
        r#"database:
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 100
  retryMaxDelayMs: 200
sources:
  hooks:
    path: /hooks
    consumption: pull
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    transform:
      expression: '{SOURCE}'
  broken:
    path: /broken
    consumption: pull
    idempotencyKeyPath: $.id
    transform:
      expression: '{BROKEN}'
destinations:
  plain:
    type: http
    baseUrl: {url}
routes:
  - topicPattern: broken.*
    destination: plain
    transform:
      expression: '{BROKEN}'
      onError: Dead
  - topicPattern: deep.*
    destination: plain
    transform:
      expression: '{DEEP}'
      timeoutMs: 1000
      maxDepth: 50
      onError: Dead
  - topicPattern: "**"
    destination: plain
    transform:
      expression: '{ROUTE}'
admin:
  enabled: true
  auth:
    type: bearer
    token: {ADMIN_TOKEN}
"#,
        db = schema.queuebox_url(),
        url = receiver.url()
    );
    let service = Service::start("trf-40", &yaml);

    // The source stage.
    let body = json!({"id": "w-1", "type": "order.paid", "name": "widget",
                      "items": [{"price": 2}, {"price": 3.25}]});
    let answer = post(
        &service,
        "/inbox/hooks",
        &[("X-Tenant", "acme")],
        &body.to_string(),
    );
    assert_eq!(answer.status, 202, "{answer:?}");
    let row = rows(
        &schema,
        "SELECT payload::text, headers::text FROM inbox WHERE source = 'hooks'",
    )
    .await;
    let stored: Value = serde_json::from_str(&row[0].get::<_, String>(0)).unwrap();
    let headers: Value = serde_json::from_str(&row[0].get::<_, String>(1)).unwrap();
    assert_eq!(stored["tenant"], "acme", "{stored}");
    let result = tested(
        &service,
        json!({"expression": SOURCE, "payload": body, "stage": "source",
               "context": {"source": "hooks", "headers": headers, "idempotencyKey": "w-1",
                           "eventType": "order.paid"}}),
    );
    assert_eq!(result, stored, "the source stage");

    // The route stage, on the first attempt and on the retry.
    let payload = json!({"lines": [{"qty": 2, "price": 1.5}, {"qty": 1, "price": 4}],
                         "address": {"country": "nl"}, "shipping": "express"});
    schema
        .client()
        .execute(
            "INSERT INTO outbox (topic, payload) VALUES ('order.created', $1)",
            &[&payload],
        )
        .await
        .unwrap();
    receiver
        .wait_for(Duration::from_secs(20), "two deliveries", |r| r.len() >= 2)
        .await;
    for request in receiver.requests().iter().take(2) {
        let attempt: u64 = request.header("x-attempt").unwrap().parse().unwrap();
        let result = tested(
            &service,
            json!({"expression": ROUTE, "payload": payload, "stage": "outbox",
                   "context": {"messageId": request.header("x-message-id").unwrap(),
                               "topic": "order.created", "attempt": attempt}}),
        );
        assert_eq!(request.json(), result, "attempt {attempt}");
        assert_eq!(
            request.body,
            serde_json::to_string(&result).unwrap(),
            "attempt {attempt}: the same bytes"
        );
    }

    // An engine error: the source's 422 and the tester's 422 are the same bytes, and the route's
    // `last_error` is the same text.
    let failing = json!({"id": "b-1", "total": 1, "name": "x"});
    let at_source = post(&service, "/inbox/broken", &[], &failing.to_string());
    let at_tester = transform_test(
        &service,
        json!({"expression": BROKEN, "payload": failing, "stage": "source"}),
    );
    assert_eq!(at_source.status, 422, "{at_source:?}");
    assert_eq!(
        (at_tester.status, &at_tester.body),
        (422, &at_source.body),
        "the source stage's failure"
    );
    let error = at_tester.json()["error"].as_str().unwrap().to_owned();
    assert!(error.starts_with("Transform failed: T2"), "{error}");

    // The same at an outbox stage, and a depth limit hit with the same `maxDepth`.
    schema
        .client()
        .execute(
            "INSERT INTO outbox (topic, payload) VALUES ('broken.one', $1), ('deep.one', '{}')",
            &[&failing],
        )
        .await
        .unwrap();
    wait_until(Duration::from_secs(20), "both rows dead", async || {
        let r = rows(
            &schema,
            "SELECT count(*) FROM outbox WHERE topic IN ('broken.one', 'deep.one') AND state = 'dead'",
        )
        .await;
        r[0].get::<_, i64>(0) == 2
    })
    .await;
    let last_error = async |topic: &str| -> String {
        schema
            .client()
            .query_one("SELECT last_error FROM outbox WHERE topic = $1", &[&topic])
            .await
            .unwrap()
            .get(0)
    };
    let at_tester = transform_test(
        &service,
        json!({"expression": BROKEN, "payload": failing, "stage": "outbox"}),
    );
    assert_eq!(at_tester.status, 422, "{at_tester:?}");
    assert_eq!(
        at_tester.json()["error"].as_str().unwrap(),
        last_error("broken.one").await,
        "the route stage's failure"
    );
    let at_tester = transform_test(
        &service,
        json!({"expression": DEEP, "payload": {}, "stage": "outbox",
               "timeoutMs": 1000, "maxDepth": 50}),
    );
    assert_eq!(at_tester.status, 422, "{at_tester:?}");
    assert_eq!(
        at_tester.json()["error"].as_str().unwrap(),
        last_error("deep.one").await,
        "the depth limit"
    );
    assert_eq!(
        last_error("deep.one").await,
        "Transform failed: The expression nested deeper than 50 levels."
    );
    drop(service);
    schema.drop().await;
}
