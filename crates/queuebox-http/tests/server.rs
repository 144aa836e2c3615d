//! The data and management ports over real TCP: root, health, metrics, routing per port, the
//! shared error rules and the drain (operations.md §1–§5, §9).

mod server_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::routing::{get as on_get, post};
use queuebox_core::{ComponentDown, ReadinessComponent};
use server_support::*;

fn up(name: &str) -> ReadinessComponent {
    ReadinessComponent::new(name, || async { Ok(()) })
}

fn down(name: &str, why: ComponentDown) -> ReadinessComponent {
    ReadinessComponent::new(name, move || async move { Err(why) })
}

#[tokio::test]
async fn ops_9_root_answers_plain_text() {
    let server = plain(vec![]).await;
    let answer = get(server.data_addr(), "/").await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(answer.body, "QueueBox is running!");
}

#[tokio::test]
async fn ops_5_head_is_accepted_wherever_get_is() {
    let server = plain(vec![up("database")]).await;
    let addr = server.data_addr();
    for path in ["/", "/health/live", "/health/ready", "/health", "/metrics"] {
        let got = get(addr, path).await;
        let raw_head = raw(
            addr,
            format!("HEAD {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await;
        let (status, body) = status_and_body(&raw_head);
        assert_eq!(status, got.status, "{path}");
        assert_eq!(body, "", "{path}: a HEAD answer has no body");
        let content_type = got.header("content-type").unwrap();
        assert!(
            raw_head.contains(&format!("content-type: {content_type}\r\n")),
            "{path}: {raw_head}"
        );
        let length = got.body.len();
        assert!(
            raw_head.contains(&format!("content-length: {length}\r\n")),
            "{path}: {raw_head}"
        );
    }
}

#[tokio::test]
async fn ops_17_liveness_body_is_exact_even_with_a_failing_database() {
    let server = plain(vec![down("database", ComponentDown::Failed)]).await;
    let answer = get(server.data_addr(), "/health/live").await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(
        answer.body,
        r#"{"status":"healthy","components":{"process":{"status":"up"}}}"#
    );
}

#[tokio::test]
async fn ops_18_readiness_keeps_the_caller_order_and_ignores_advisory_components() {
    let server = plain(vec![
        up("database"),
        down("outbox-capture", ComponentDown::Failed).advisory(),
        up("outbox-poller"),
        up("kafka.orders"),
    ])
    .await;
    let expected = concat!(
        r#"{"status":"healthy","components":{"process":{"status":"up"},"database":{"status":"up"},"#,
        r#""outbox-capture":{"status":"down","reason":"failed","advisory":true},"#,
        r#""outbox-poller":{"status":"up"},"kafka.orders":{"status":"up"}}}"#
    );
    for path in ["/health/ready", "/health"] {
        let answer = get(server.data_addr(), path).await;
        assert_eq!(answer.status, 200, "{path}");
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(answer.body, expected, "{path}");
    }
}

#[tokio::test]
async fn ops_19_readiness_is_503_when_a_component_is_down() {
    let server = plain(vec![
        down("database", ComponentDown::Failed),
        down("outbox-poller", ComponentDown::Stopped),
        up("retention"),
    ])
    .await;
    let expected = concat!(
        r#"{"status":"unhealthy","components":{"process":{"status":"up"},"#,
        r#""database":{"status":"down","reason":"failed"},"#,
        r#""outbox-poller":{"status":"down","reason":"stopped"},"retention":{"status":"up"}}}"#
    );
    let ready = get(server.data_addr(), "/health/ready").await;
    let alias = get(server.data_addr(), "/health").await;
    for answer in [ready, alias] {
        assert_eq!(answer.status, 503);
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(answer.body, expected);
    }
}

#[tokio::test]
async fn ops_20_a_hanging_check_times_out_and_is_not_started_again() {
    let entered = Arc::new(AtomicUsize::new(0));
    let hanging = ReadinessComponent::new("database", {
        let entered = Arc::clone(&entered);
        move || {
            entered.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<(), ComponentDown>>()
        }
    });
    let server = plain(vec![hanging, up("outbox-poller")]).await;
    for probe in 0..2 {
        let started = Instant::now();
        let answer = get(server.data_addr(), "/health/ready").await;
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(2900) && took < Duration::from_millis(3500),
            "probe {probe} took {took:?}"
        );
        assert_eq!(answer.status, 503);
        assert_eq!(
            answer.body,
            concat!(
                r#"{"status":"unhealthy","components":{"process":{"status":"up"},"#,
                r#""database":{"status":"down","reason":"timeout"},"outbox-poller":{"status":"up"}}}"#
            )
        );
    }
    assert_eq!(entered.load(Ordering::SeqCst), 1, "single flight");
}

#[tokio::test]
async fn ops_20_a_finished_check_runs_again_on_the_next_probe() {
    let entered = Arc::new(AtomicUsize::new(0));
    let counting = ReadinessComponent::new("database", {
        let entered = Arc::clone(&entered);
        move || {
            entered.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        }
    });
    let server = plain(vec![counting]).await;
    for _ in 0..3 {
        assert_eq!(get(server.data_addr(), "/health").await.status, 200);
    }
    assert_eq!(entered.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn ops_3_with_a_management_port_the_data_port_answers_404_for_operational_routes() {
    let server = started(
        settings(true),
        endpoints(vec![up("database")], axum::Router::new()),
    )
    .await;
    let data = server.data_addr();
    let management = server.management_addr().expect("a management port");
    assert_ne!(data.port(), management.port());

    for path in [
        "/health",
        "/health/live",
        "/health/ready",
        "/metrics",
        "/admin/replay",
    ] {
        let answer = get(data, path).await;
        assert_eq!(answer.status, 404, "{path}");
        assert_eq!(answer.body, r#"{"error":"Not found"}"#);
    }
    assert_eq!(get(data, "/").await.status, 200);

    assert_eq!(get(management, "/health/live").await.status, 200);
    assert_eq!(get(management, "/health/ready").await.status, 200);
    assert_eq!(get(management, "/health").await.status, 200);
    let metrics = get(management, "/metrics").await;
    assert_eq!((metrics.status, metrics.body.as_str()), (200, METRICS_TEXT));
    // The root belongs to the data port only.
    assert_eq!(get(management, "/").await.status, 404);
}

#[tokio::test]
async fn ops_2_without_a_management_port_the_data_port_serves_operational_routes() {
    let server = plain(vec![up("database")]).await;
    for path in ["/health", "/health/live", "/health/ready", "/metrics"] {
        assert_eq!(get(server.data_addr(), path).await.status, 200, "{path}");
    }
    assert!(server.management_addr().is_none());
}

#[tokio::test]
async fn met_1_metrics_have_the_prometheus_content_type() {
    let server = plain(vec![]).await;
    let answer = get(server.data_addr(), "/metrics").await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(answer.body, METRICS_TEXT);
}

#[tokio::test]
async fn ops_6_unknown_path_is_404_and_wrong_method_is_405_with_allow() {
    let routes = axum::Router::new().route("/inbox/orders", post(|| async { "accepted" }));
    let server = started(settings(false), endpoints(vec![], routes)).await;
    let addr = server.data_addr();

    let missing = get(addr, "/nowhere").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("content-type"), Some("application/json"));
    assert_eq!(missing.body, r#"{"error":"Not found"}"#);

    let wrong = send(client().post(url(addr, "/"))).await;
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.header("allow"), Some("GET,HEAD"));
    assert_eq!(wrong.header("content-type"), Some("application/json"));
    assert_eq!(wrong.body, r#"{"error":"Method not allowed"}"#);

    let wrong = get(addr, "/inbox/orders").await;
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.header("allow"), Some("POST"));
    assert_eq!(wrong.body, r#"{"error":"Method not allowed"}"#);

    let wrong = send(client().delete(url(addr, "/health/live"))).await;
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.body, r#"{"error":"Method not allowed"}"#);
}

#[tokio::test]
async fn ops_6_a_panicking_handler_answers_500_and_the_port_keeps_serving() {
    let routes = axum::Router::new().route(
        "/boom",
        on_get(|| async {
            if true {
                panic!("handler bug");
            }
            "unreachable"
        }),
    );
    let server = started(settings(false), endpoints(vec![], routes)).await;
    let answer = get(server.data_addr(), "/boom").await;
    assert_eq!(answer.status, 500);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(answer.body, r#"{"error":"Internal error"}"#);
    assert_eq!(get(server.data_addr(), "/").await.status, 200);
}

#[tokio::test]
async fn ops_6_declared_body_above_the_limit_is_413_on_the_data_port() {
    let routes = axum::Router::new().route("/inbox/orders", post(|| async { "accepted" }));
    let mut settings = settings(false);
    settings.max_body_bytes = Some(10);
    let server = started(settings, endpoints(vec![], routes)).await;
    let addr = server.data_addr();

    let exact = send(client().post(url(addr, "/inbox/orders")).body("0123456789")).await;
    assert_eq!(exact.status, 200);
    let over = send(
        client()
            .post(url(addr, "/inbox/orders"))
            .body("0123456789X"),
    )
    .await;
    assert_eq!(over.status, 413);
    assert_eq!(over.header("content-type"), Some("application/json"));
    assert_eq!(over.body, r#"{"error":"Request body exceeds 10 bytes"}"#);
    // "on any route": also one that does not exist.
    let over = send(client().post(url(addr, "/nowhere")).body("0123456789X")).await;
    assert_eq!(over.status, 413);
}

#[tokio::test]
async fn ops_8_responses_carry_no_server_header() {
    let server = plain(vec![down("database", ComponentDown::Failed)]).await;
    let addr = server.data_addr();
    for path in ["/", "/health/live", "/health", "/metrics", "/nowhere"] {
        let answer = get(addr, path).await;
        assert!(answer.header("server").is_none(), "{path}");
    }
    let answer = send(client().post(url(addr, "/"))).await;
    assert!(answer.header("server").is_none());
    let raw_answer = raw(
        addr,
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(!has_header(&raw_answer, "server"), "{raw_answer}");
}
