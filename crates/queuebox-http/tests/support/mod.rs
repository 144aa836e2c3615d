//! A tiny HTTP/1.1 receiver for the destination tests: real sockets on 127.0.0.1:0, every
//! request recorded, each answer scripted by the test (status, headers, body, delays).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuebox_core::destination::OutgoingMessage;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use url::Url;
use uuid::Uuid;

#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn header_count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }
}

/// A scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub interim: Option<u16>,
    pub status: u16,
    /// The reason phrase on the status line; QueueBox must use the standard one regardless.
    pub phrase: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Announce this length instead of the body's, to simulate a body that never ends.
    pub content_length: Option<usize>,
    /// Wait this long before the status line.
    pub delay: Duration,
    /// Keep the connection open this long after writing.
    pub hold: Duration,
}

impl Reply {
    pub fn status(status: u16) -> Self {
        Self {
            interim: None,
            status,
            phrase: "Whatever".to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
            content_length: None,
            delay: Duration::ZERO,
            hold: Duration::ZERO,
        }
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

type Handler = dyn Fn(&Recorded, usize) -> Reply + Send + Sync;

pub struct Receiver {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Receiver {
    /// Starts a receiver; `handler` gets each request and its index (0 for the first).
    pub async fn start(
        handler: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let recorded = Arc::clone(&requests);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&handler), Arc::clone(&recorded)));
            }
        });
        Self { addr, requests }
    }

    /// A receiver that answers every request with `status`.
    pub async fn answering(status: u16) -> Self {
        Self::start(move |_, _| Reply::status(status)).await
    }

    pub fn url(&self, path: &str) -> Url {
        Url::parse(&format!("http://{}{path}", self.addr)).unwrap()
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(mut stream: TcpStream, handler: Arc<Handler>, recorded: Arc<Mutex<Vec<Recorded>>>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(pos) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let target = request_line.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let request = Recorded {
        method,
        target,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let index = {
        let mut all = recorded.lock().unwrap();
        all.push(request.clone());
        all.len() - 1
    };
    let reply = handler(&request, index);
    tokio::time::sleep(reply.delay).await;
    let mut out = Vec::new();
    if let Some(interim) = reply.interim {
        out.extend_from_slice(format!("HTTP/1.1 {interim} Interim\r\n\r\n").as_bytes());
    }
    out.extend_from_slice(format!("HTTP/1.1 {} {}\r\n", reply.status, reply.phrase).as_bytes());
    for (name, value) in &reply.headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    let length = reply.content_length.unwrap_or(reply.body.len());
    out.extend_from_slice(
        format!("Content-Length: {length}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    out.extend_from_slice(&reply.body);
    if stream.write_all(&out).await.is_err() {
        return;
    }
    let _ = stream.flush().await;
    tokio::time::sleep(reply.hold).await;
}

/// A message with an id, a topic, a key and no row headers.
pub fn message(payload: &str) -> OutgoingMessage {
    OutgoingMessage {
        id: Uuid::new_v4(),
        topic: "order.created".to_owned(),
        key: Some("o-42".to_owned()),
        aggregate_type: Some("Order".to_owned()),
        attempt: 0,
        headers: Vec::new(),
        payload: payload.to_owned(),
        stored_payload: None,
    }
}
