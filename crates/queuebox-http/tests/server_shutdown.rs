//! OPS-22 and OPS-26 phases 1, 2 and 8: readiness during shutdown, the drain of each port.

mod server_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get as on_get;
use queuebox_core::{ComponentDown, ReadinessComponent};
use queuebox_http::server::{DrainOutcome, start};
use server_support::*;
use tokio::sync::Notify;

const SHUTTING_DOWN: &str = r#"{"error":"QueueBox is shutting down"}"#;

/// A data route that signals when it is inside its handler, then sleeps `delay`.
fn slow_route(entered: Arc<Notify>, delay: Duration) -> axum::Router {
    axum::Router::new().route(
        "/slow",
        on_get(move || {
            let entered = Arc::clone(&entered);
            async move {
                entered.notify_one();
                tokio::time::sleep(delay).await;
                "done"
            }
        }),
    )
}

#[tokio::test]
async fn ops_26_drain_finishes_requests_in_a_handler_and_refuses_new_ones() {
    let entered = Arc::new(Notify::new());
    let routes = slow_route(Arc::clone(&entered), Duration::from_millis(600));
    let server = Arc::new(started(settings(false), endpoints(vec![], routes)).await);
    let addr = server.data_addr();

    let slow = tokio::spawn(async move { get(addr, "/slow").await });
    entered.notified().await;
    let drain = tokio::spawn({
        let server = Arc::clone(&server);
        async move { server.drain_data_port().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;

    for path in ["/", "/health/live", "/health"] {
        let refused = get(addr, path).await;
        assert_eq!(refused.status, 503, "{path}");
        assert_eq!(refused.header("content-type"), Some("application/json"));
        assert_eq!(refused.body, SHUTTING_DOWN);
    }

    let slow = slow.await.unwrap();
    assert_eq!((slow.status, slow.body.as_str()), (200, "done"));
    assert_eq!(drain.await.unwrap(), DrainOutcome { still_in_flight: 0 });
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the data listener is closed"
    );
}

#[tokio::test]
async fn ops_26_drain_gives_up_after_5000_ms() {
    let entered = Arc::new(Notify::new());
    let routes = slow_route(Arc::clone(&entered), Duration::from_secs(30));
    let server = started(settings(false), endpoints(vec![], routes)).await;
    let addr = server.data_addr();

    let stuck = tokio::spawn(async move { client().get(url(addr, "/slow")).send().await });
    entered.notified().await;
    let started_at = Instant::now();
    let outcome = server.drain_data_port().await;
    let took = started_at.elapsed();
    assert_eq!(outcome, DrainOutcome { still_in_flight: 1 });
    assert!(
        took >= Duration::from_millis(5000) && took < Duration::from_millis(6000),
        "{took:?}"
    );
    // Its connection was cut.
    assert!(stuck.await.unwrap().is_err());
}

#[tokio::test]
async fn ops_22_readiness_is_503_with_process_stopping_after_begin_shutdown() {
    let database = ReadinessComponent::new("database", || async { Ok::<(), ComponentDown>(()) });
    let server = start(
        settings(true),
        endpoints(vec![database], axum::Router::new()),
    )
    .await
    .unwrap();
    let management = server.management_addr().unwrap();

    // Before the start completed, the process is not up.
    let early = get(management, "/health/ready").await;
    assert_eq!(early.status, 503);
    assert_eq!(
        early.body,
        r#"{"status":"unhealthy","components":{"process":{"status":"down","reason":"stopped"},"database":{"status":"up"}}}"#
    );

    server.mark_started();
    assert_eq!(get(management, "/health/ready").await.status, 200);

    server.begin_shutdown();
    let stopping = concat!(
        r#"{"status":"unhealthy","components":{"process":{"status":"down","reason":"stopping"},"#,
        r#""database":{"status":"up"}}}"#
    );
    for path in ["/health/ready", "/health"] {
        let answer = get(management, path).await;
        assert_eq!(answer.status, 503, "{path}");
        assert_eq!(answer.body, stopping, "{path}");
    }
    // Liveness stays healthy (OPS-17), a late "started" does not undo the shutdown.
    server.mark_started();
    assert_eq!(get(management, "/health/live").await.status, 200);
    assert_eq!(get(management, "/health/ready").await.status, 503);

    // Phase 2 closes the data port; the management port still answers until phase 8.
    assert_eq!(server.drain_data_port().await.still_in_flight, 0);
    assert_eq!(get(management, "/health/ready").await.status, 503);
    assert_eq!(server.stop_management_port().await.still_in_flight, 0);
    assert!(tokio::net::TcpStream::connect(management).await.is_err());
    // Each phase may be run again without harm.
    assert_eq!(server.stop_management_port().await, DrainOutcome::default());
}

#[tokio::test]
async fn ops_26_management_port_drain_lets_a_probe_finish_and_refuses_new_requests() {
    // A hanging check keeps a readiness probe inside its handler for 3000 ms.
    let hanging = ReadinessComponent::new("database", || {
        std::future::pending::<Result<(), ComponentDown>>()
    });
    let server = Arc::new(
        started(
            settings(true),
            endpoints(vec![hanging], axum::Router::new()),
        )
        .await,
    );
    let management = server.management_addr().unwrap();

    let probe = tokio::spawn(async move { get(management, "/health/ready").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let drain = tokio::spawn({
        let server = Arc::clone(&server);
        async move { server.stop_management_port().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;

    let refused = get(management, "/metrics").await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.body, SHUTTING_DOWN);

    let probe = probe.await.unwrap();
    assert_eq!(probe.status, 503);
    assert!(
        probe
            .body
            .contains(r#""database":{"status":"down","reason":"timeout"}"#)
    );
    assert_eq!(drain.await.unwrap(), DrainOutcome { still_in_flight: 0 });
    assert!(tokio::net::TcpStream::connect(management).await.is_err());
    // The data port is untouched by phase 8.
    assert_eq!(get(server.data_addr(), "/").await.status, 200);
}

#[tokio::test]
async fn ops_30_a_hanging_check_does_not_outlive_the_listeners() {
    struct Dropped(Arc<Notify>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.notify_one();
        }
    }
    let dropped = Arc::new(Notify::new());
    let hanging = ReadinessComponent::new("database", {
        let dropped = Arc::clone(&dropped);
        move || {
            let guard = Dropped(Arc::clone(&dropped));
            async move {
                let _guard = guard;
                std::future::pending::<Result<(), ComponentDown>>().await
            }
        }
    });
    let server = started(
        settings(false),
        endpoints(vec![hanging], axum::Router::new()),
    )
    .await;
    assert_eq!(get(server.data_addr(), "/health").await.status, 503);
    server.drain_data_port().await;
    tokio::time::timeout(Duration::from_secs(2), dropped.notified())
        .await
        .expect("the hanging check is aborted once the port is closed");
}
