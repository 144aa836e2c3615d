//! The operator gauges through the binary on PostgreSQL (issue 13 part 4, issue 14 items 9-12):
//! during a destination outage the rows wait in backoff, the due-based age reads 0 and the age by
//! `created_at` fires; dead rows and inbox pending rows per configured source; refused webhooks
//! counted by reason; and, with the database taken away (a TCP proxy in front of the real
//! server, as the readiness test does), the gauges are marked stale.

mod support;

use std::time::Duration;

use support::pg::TestSchema;
use support::proxy::Proxy;
use support::receiver::{Receiver, Reply, Request};
use support::service::{Service, http_post};

fn unavailable(_: &Request, _: usize) -> Reply {
    Reply::status(503)
}

async fn wait_for_metric(
    service: &Service,
    sample: &str,
    what: &str,
    accept: impl Fn(f64) -> bool,
) -> f64 {
    let mut last = None;
    for _ in 0..150 {
        last = service.metric(sample);
        if last.is_some_and(&accept) {
            return last.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, body) = service.get("/metrics");
    panic!("{what}: {sample} is {last:?} after 15 s\n{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn gauges_fire_during_a_destination_outage_count_dead_rows_sources_and_refusals() {
    let schema = TestSchema::create("e2e_gauges").await;
    let proxy = Proxy::start("127.0.0.1:5432").await;
    let receiver = Receiver::start(unavailable).await;
    let url =
        schema
            .queuebox_url()
            .replacen("127.0.0.1:5432", &format!("127.0.0.1:{}", proxy.port), 1);
    let cfg = format!(
        r#"database:
  url: "{url}"
  connectionTimeoutMs: 1000
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  pendingGaugeIntervalMs: 200
  retryBaseDelayMs: 600000
  retryMaxDelayMs: 600000
inbox:
  relay:
    enabled: false
    pendingGaugeIntervalMs: 200
sources:
  stripe:
    path: /stripe
    idempotencyKeyPath: $.id
    topic: stripe.event
    auth:
      type: bearer
      token: s3cret
  jobs:
    path: /jobs
    idempotencyKeyPath: $.id
    consumption: pull
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
    let service = Service::start("gauges", &cfg);
    let client = schema.client();
    // Three rows the destination refuses: each goes to backoff for 10 minutes after one try.
    client
        .batch_execute(
            "INSERT INTO outbox (topic, payload) SELECT 'orders', '{}' FROM generate_series(1, 3);
             INSERT INTO outbox (topic, payload, state, last_error) VALUES ('orders', '{}', 'dead', 'gone');",
        )
        .await
        .unwrap();
    receiver
        .wait_for(Duration::from_secs(15), "three tries", |r| r.len() >= 3)
        .await;
    // Backdate so the age by created_at is well above 0 (the rows were just written).
    client
        .batch_execute("UPDATE outbox SET created_at = created_at - interval '90 seconds'")
        .await
        .unwrap();
    wait_for_metric(
        &service,
        "queuebox_outbox_oldest_pending_created_age_seconds",
        "the age by created_at during the outage",
        |v| v >= 90.0,
    )
    .await;
    assert_eq!(
        service.metric("queuebox_outbox_messages_pending"),
        Some(3.0)
    );
    assert_eq!(
        service.metric("queuebox_outbox_oldest_pending_age_seconds"),
        Some(0.0),
        "no row is due: the due-based gauge does not see the outage"
    );
    assert_eq!(service.metric("queuebox_outbox_messages_dead"), Some(1.0));

    // Inbox: a pending pull row, a pending push row (relay off), and a dead row; per source.
    let stored = http_post(service.port, "/inbox/jobs", &[], br#"{"id":"j1"}"#);
    assert_eq!(stored.status, 202, "{}", stored.body);
    let auth = [("Authorization", "Bearer s3cret")];
    let stored = http_post(service.port, "/inbox/stripe", &auth, br#"{"id":"s1"}"#);
    assert_eq!(stored.status, 202, "{}", stored.body);
    client
        .batch_execute(
            "INSERT INTO inbox (source, idempotency_key, payload, state, consumption)
             VALUES ('stripe', 'd1', '{}', 'dead', 'push'), ('gone', 'g1', '{}', 'pending', 'push')",
        )
        .await
        .unwrap();
    wait_for_metric(
        &service,
        "queuebox_inbox_messages_pending",
        "inbox pending",
        |v| v == 3.0,
    )
    .await;
    assert_eq!(service.metric("queuebox_inbox_messages_dead"), Some(1.0));
    assert_eq!(
        service.metric(r#"queuebox_inbox_source_messages_pending{source="stripe"}"#),
        Some(1.0)
    );
    assert_eq!(
        service.metric(r#"queuebox_inbox_source_messages_pending{source="jobs"}"#),
        Some(1.0)
    );
    let (_, body) = service.get("/metrics");
    assert!(
        !body.contains(r#"source="gone""#),
        "an unconfigured source is no label value"
    );

    // Refused webhooks, by reason.
    for _ in 0..2 {
        let refused = http_post(service.port, "/inbox/stripe", &[], br#"{"id":"x"}"#);
        assert_eq!(refused.status, 401);
    }
    let refused = http_post(service.port, "/inbox/jobs", &[], b"not json");
    assert_eq!(refused.status, 400);
    assert_eq!(
        service.metric(
            r#"queuebox_inbox_webhook_refusals_total{source="stripe",reason="unauthorized"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        service.metric(
            r#"queuebox_inbox_webhook_refusals_total{source="jobs",reason="invalid_json"}"#
        ),
        Some(1.0)
    );

    // The database goes away: the gauges keep their value, but the failures count and the
    // last-refresh timestamp stops.
    let before = service
        .metric(r#"queuebox_gauge_last_refresh_timestamp{component="outbox"}"#)
        .expect("the outbox gauges were refreshed");
    assert!(before > 1.7e9, "a Unix time: {before}");
    proxy.take_down();
    for component in ["outbox", "inbox"] {
        wait_for_metric(
            &service,
            &format!(r#"queuebox_gauge_refresh_failures_total{{component="{component}"}}"#),
            "refresh failures while the database is down",
            |v| v >= 2.0,
        )
        .await;
    }
    let stale = service
        .metric(r#"queuebox_gauge_last_refresh_timestamp{component="outbox"}"#)
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        service.metric(r#"queuebox_gauge_last_refresh_timestamp{component="outbox"}"#),
        Some(stale),
        "no refresh while the database is down"
    );
    assert_eq!(
        service.metric("queuebox_outbox_messages_pending"),
        Some(3.0),
        "the last value stays"
    );
    proxy.bring_up();
    wait_for_metric(
        &service,
        r#"queuebox_gauge_last_refresh_timestamp{component="outbox"}"#,
        "a refresh once the database is back",
        |v| v > stale,
    )
    .await;
    drop(service);
    schema.drop().await;
}
