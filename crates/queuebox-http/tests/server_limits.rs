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
