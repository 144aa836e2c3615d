//! Helpers for the listener tests: servers on 127.0.0.1 with system-chosen ports, a plain
//! HTTP client, and raw-socket requests for the cases a client library would not send.

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use queuebox_core::ReadinessComponent;
use queuebox_http::server::{
    DataPortRoutes, Endpoints, OperationalRoutes, ServerHandle, ServerSettings, start,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const METRICS_TEXT: &str = "# HELP queuebox_info Build.\n# TYPE queuebox_info gauge\nqueuebox_info{version=\"0.0.0-dev\"} 1\n";

pub fn settings(management: bool) -> ServerSettings {
    let mut settings = ServerSettings::new(0, management.then_some(0));
    settings.bind_address = IpAddr::V4(Ipv4Addr::LOCALHOST);
    settings
}

pub fn endpoints(readiness: Vec<ReadinessComponent>, data_routes: axum::Router) -> Endpoints {
    Endpoints {
        readiness,
        metrics: Arc::new(|| METRICS_TEXT.to_owned()),
        data_routes: DataPortRoutes::new().merge(data_routes),
        operational_routes: OperationalRoutes::new(),
    }
}

/// A started server (`process` up) without a management port and with no extra routes.
pub async fn plain(readiness: Vec<ReadinessComponent>) -> ServerHandle {
    started(settings(false), endpoints(readiness, axum::Router::new())).await
}

pub async fn started(settings: ServerSettings, endpoints: Endpoints) -> ServerHandle {
    let server = start(settings, endpoints).await.expect("the ports bind");
    server.mark_started();
    server
}

pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        // A fresh connection per request: the drain tests close listeners under the client.
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
}

pub fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://{addr}{path}")
}

pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("ascii header"))
    }
}

pub async fn get(addr: SocketAddr, path: &str) -> Answer {
    send(client().get(url(addr, path))).await
}

pub async fn send(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.expect("the request is answered");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.text().await.expect("body");
    Answer {
        status,
        headers,
        body,
    }
}

/// Writes `request` as is and reads until the server closes (or 10 s pass). Write errors are
/// ignored: the server may answer and close before it read everything.
pub async fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let _ = stream.write_all(request).await;
    read_all(&mut stream).await
}

pub async fn read_all(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    String::from_utf8_lossy(&received).into_owned()
}

/// The status code and body of a raw response.
pub fn status_and_body(raw: &str) -> (u16, String) {
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {raw:?}"));
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, body)| body)
        .unwrap_or("");
    (status, body.to_owned())
}

pub fn has_header(raw: &str, name: &str) -> bool {
    let head = raw.split_once("\r\n\r\n").map_or(raw, |(head, _)| head);
    head.lines().skip(1).any(|line| {
        line.split(':')
            .next()
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
    })
}
