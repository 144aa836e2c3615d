//! OPS-6 request limits over raw sockets: header count and size (431) and the head and
//! whole-request timeouts (408).

mod server_support;

use std::time::{Duration, Instant};

use axum::routing::post;
use server_support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const TOO_LARGE: &str = r#"{"error":"Request headers too large"}"#;
const TIMEOUT: &str = r#"{"error":"Request timeout"}"#;

fn with_headers(count: usize) -> Vec<u8> {
    // Host and Connection count as headers too.
    let mut request = String::from("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for i in 2..count {
        request.push_str(&format!("X-H{i}: v\r\n"));
    }
    request.push_str("\r\n");
    request.into_bytes()
}

/// A request whose line and headers are exactly `size` bytes, padded with a header written
/// without optional whitespace.
fn of_size(size: usize) -> Vec<u8> {
    let start = "GET / HTTP/1.1\r\nHost:x\r\nConnection:close\r\nX-Pad:";
    let end = "\r\n\r\n";
    let pad = size - start.len() - end.len();
    format!("{start}{}{end}", "a".repeat(pad)).into_bytes()
}

#[tokio::test]
async fn ops_6_more_than_100_headers_is_431() {
    let server = plain(vec![]).await;
    let addr = server.data_addr();

    let (status, _) = status_and_body(&raw(addr, &with_headers(100)).await);
    assert_eq!(status, 200);

    let answer = raw(addr, &with_headers(101)).await;
    let (status, body) = status_and_body(&answer);
    assert_eq!(status, 431);
    assert!(
        answer.contains("content-type: application/json\r\n"),
        "{answer}"
    );
    assert_eq!(body, TOO_LARGE);
}

#[tokio::test]
async fn ops_6_more_than_16384_bytes_of_head_is_431() {
    let server = plain(vec![]).await;
    let addr = server.data_addr();
    assert_eq!(of_size(16384).len(), 16384);

    let (status, _) = status_and_body(&raw(addr, &of_size(16384)).await);
    assert_eq!(status, 200);

    let (status, body) = status_and_body(&raw(addr, &of_size(16385)).await);
    assert_eq!(status, 431);
    assert_eq!(body, TOO_LARGE);
}

#[tokio::test]
async fn ops_6_a_grossly_oversized_head_is_cut_off_with_431() {
    // Beyond twice the limit hyper refuses the head itself; the answer still has the JSON
    // body (issue 17 defect 7).
    let server = plain(vec![]).await;
    let answer = raw(server.data_addr(), &of_size(40_000)).await;
    let (status, body) = status_and_body(&answer);
    assert_eq!(status, 431, "{answer}");
    assert!(has_header(&answer, "content-type"), "{answer}");
    assert_eq!(body, TOO_LARGE);
}

/// Issue 17 defect 7: what hyper refuses before any route runs (bad framing, a bad header
/// line, a bad method or version) comes with the JSON error body and closes the connection.
#[tokio::test]
async fn a_head_hyper_cannot_parse_gets_400_with_the_json_error_body() {
    let server = plain(vec![]).await;
    let addr = server.data_addr();
    for request in [
        &b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"G\x01T / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
    ] {
        let answer = raw(addr, request).await;
        let (status, body) = status_and_body(&answer);
        assert_eq!(status, 400, "{request:?}: {answer}");
        assert!(
            answer.contains("content-type: application/json\r\n"),
            "{request:?}: {answer}"
        );
        assert_eq!(body, r#"{"error":"Bad request"}"#, "{request:?}");
    }
    // A good request on the same server is untouched.
    let (status, body) = status_and_body(&raw(addr, &with_headers(3)).await);
    assert_eq!((status, body.as_str()), (200, "QueueBox is running!"));
}

#[tokio::test]
async fn ops_6_a_head_not_received_in_time_is_408() {
    let mut settings = settings(false);
    settings.limits.header_timeout = Duration::from_millis(300);
    let server = started(settings, endpoints(vec![], axum::Router::new())).await;

    let started = Instant::now();
    let answer = raw(server.data_addr(), b"GET / HTTP/1.1\r\nHost: x\r\n").await;
    assert!(started.elapsed() < Duration::from_secs(3));
    let (status, body) = status_and_body(&answer);
    assert_eq!(status, 408, "{answer}");
    assert!(
        answer.contains("content-type: application/json\r\n"),
        "{answer}"
    );
    assert_eq!(body, TIMEOUT);

    // A connection that never sent a byte is simply closed.
    let answer = raw(server.data_addr(), b"").await;
    assert_eq!(answer, "");
}

#[tokio::test]
async fn ops_6_a_body_not_received_in_time_is_408() {
    let routes = axum::Router::new().route(
        "/inbox/orders",
        post(|body: axum::body::Body| async move {
            match axum::body::to_bytes(body, 1024).await {
                Ok(bytes) => (axum::http::StatusCode::OK, format!("{} bytes", bytes.len())),
                Err(_) => (axum::http::StatusCode::BAD_REQUEST, "unreadable".to_owned()),
            }
        }),
    );
    let mut settings = settings(false);
    settings.limits.request_timeout = Duration::from_millis(300);
    let server = started(settings, endpoints(vec![], routes)).await;

    let mut stream = TcpStream::connect(server.data_addr()).await.unwrap();
    stream
        .write_all(b"POST /inbox/orders HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        .await
        .unwrap();
    let answer = read_all(&mut stream).await;
    let (status, body) = status_and_body(&answer);
    assert_eq!(status, 408, "{answer}");
    assert_eq!(body, TIMEOUT);

    // A body that arrives in time is read normally.
    let answer = raw(
        server.data_addr(),
        b"POST /inbox/orders HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc",
    )
    .await;
    assert_eq!(status_and_body(&answer), (200, "3 bytes".to_owned()));
}

/// `server.maxConnections` (issue 17 defect 5): at the bound, a new connection's request is not
/// served (it waits in the backlog, unaccepted) until an open connection closes; then it is.
/// The idle connections here outlive the test (a 60 s head timeout), so only their closing can
/// free a slot.
#[tokio::test]
async fn max_connections_hold_a_new_connection_until_one_closes() {
    use queuebox_telemetry::{Metrics, Port};
    use tokio::io::AsyncReadExt;

    let metrics = Metrics::new("0.0.0-dev");
    let mut settings = settings(false);
    settings.limits.max_connections = 3;
    settings.limits.header_timeout = Duration::from_secs(60);
    settings.metrics = Some(metrics.clone());
    let server = started(settings, endpoints(vec![], axum::Router::new())).await;
    let addr = server.data_addr();
    let open = metrics.http_connections(Port::Data).clone();

    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while open.get() < 3.0 {
        assert!(Instant::now() < deadline, "3 connections accepted");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The system completes the handshake of a 4th connection; QueueBox does not accept it.
    let mut waiting = TcpStream::connect(addr).await.unwrap();
    waiting
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut first = [0_u8; 1];
    // Without the bound this is answered in microseconds; with it, nothing can answer it.
    let early = tokio::time::timeout(Duration::from_millis(500), waiting.read(&mut first)).await;
    assert!(early.is_err(), "served beyond the bound: {early:?}");
    assert_eq!(open.get(), 3.0, "never more than the bound");

    drop(idle.pop());
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), waiting.read_to_end(&mut answer))
        .await
        .expect("served once a connection closed")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(idle);
    drop(waiting);
    let deadline = Instant::now() + Duration::from_secs(20);
    while open.get() > 0.0 {
        assert!(
            Instant::now() < deadline,
            "every slot given back: {}",
            open.get()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
