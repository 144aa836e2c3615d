//! Helpers for the HTTP source tests: the real data-port server on 127.0.0.1 with the source
//! routes mounted, an in-memory sink standing in for the engine's batcher (not for the
//! database), configuration builders, and a raw HTTP/1.1 client so every byte sent is chosen
//! by the test (chunked bodies, non-UTF-8 header values, exact lengths).

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use queuebox_config::{
    Consumption, Filter, HeaderName, HttpSource, InboundAuth, Source, SourceKind,
};
use queuebox_core::jsonpath::JsonPath;
use queuebox_core::template::{Template, TemplateFields};
use queuebox_engine::metrics::Metrics;
use queuebox_http::server::{
    DataPortRoutes, Endpoints, OperationalRoutes, ServerHandle, ServerSettings, start,
};
use queuebox_http::source::{
    HttpSourceRoute, IntakeRefused, IntakeSettings, IntakeSink, source_routes,
};
use queuebox_store::{InsertOutcome, NewInboxRow};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

pub const MAX_BODY: u64 = 1024;

// --- the sink ------------------------------------------------------------------------------

const NORMAL: u8 = 0;
const FAIL: u8 = 1;
const SHUTTING_DOWN: u8 = 2;

/// Stores rows in memory with the unique rule of INB-50 on (`source`, `idempotency_key`).
#[derive(Default)]
pub struct MemorySink {
    rows: Mutex<Vec<NewInboxRow>>,
    mode: AtomicU8,
    /// When set, each `store` waits for a permit first (to hold a request inside a handler).
    gate: Mutex<Option<Arc<Semaphore>>>,
}

impl MemorySink {
    pub fn rows(&self) -> Vec<NewInboxRow> {
        self.rows.lock().unwrap().clone()
    }

    pub fn only_row(&self) -> NewInboxRow {
        let rows = self.rows();
        assert_eq!(rows.len(), 1, "exactly one stored row: {rows:?}");
        rows.into_iter().next().unwrap()
    }

    pub fn fail_storage(&self) {
        self.mode.store(FAIL, Ordering::SeqCst);
    }

    pub fn refuse_shutting_down(&self) {
        self.mode.store(SHUTTING_DOWN, Ordering::SeqCst);
    }

    pub fn hold(&self) -> Arc<Semaphore> {
        let gate = Arc::new(Semaphore::new(0));
        *self.gate.lock().unwrap() = Some(Arc::clone(&gate));
        gate
    }
}

#[async_trait]
impl IntakeSink for MemorySink {
    async fn store(&self, row: NewInboxRow) -> Result<InsertOutcome, IntakeRefused> {
        let gate = self.gate.lock().unwrap().clone();
        if let Some(gate) = gate {
            gate.acquire().await.unwrap().forget();
        }
        match self.mode.load(Ordering::SeqCst) {
            FAIL => return Err(IntakeRefused::StorageFailed),
            SHUTTING_DOWN => return Err(IntakeRefused::ShuttingDown),
            _ => {}
        }
        let mut rows = self.rows.lock().unwrap();
        if rows
            .iter()
            .any(|r| r.source == row.source && r.idempotency_key == row.idempotency_key)
        {
            return Ok(InsertOutcome::Duplicate);
        }
        let id = row.id;
        rows.push(row);
        Ok(InsertOutcome::Stored(id))
    }
}

// --- configuration -------------------------------------------------------------------------

pub fn header(name: &str) -> HeaderName {
    HeaderName::parse(name).unwrap()
}

pub fn paths(list: &[&str]) -> Vec<JsonPath> {
    list.iter().map(|p| JsonPath::parse(p).unwrap()).collect()
}

/// An `http` source at `/inbox/<name>` keyed by `$.id`, no auth, no filter.
pub fn source(name: &str) -> Source {
    Source {
        name: name.to_owned(),
        kind: SourceKind::Http(HttpSource {
            path: format!("/{name}"),
            route: format!("/inbox/{name}"),
            idempotency_key_header: None,
            aggregate_id_header: None,
            event_type_header: None,
            auth: None,
        }),
        consumption: Consumption::Push,
        topic: Template::parse("{{ eventType }}", TemplateFields::Source).unwrap(),
        idempotency_key_path: paths(&["$.id"]),
        idempotency_key_expression: None,
        aggregate_id_path: Vec::new(),
        aggregate_id_expression: None,
        event_type_path: Vec::new(),
        event_type_expression: None,
        initial_delay: Duration::ZERO,
        scheduled_at_header: None,
        scheduled_at_path: Vec::new(),
        transform: None,
        filter: Filter::default(),
        rate_limit: None,
    }
}

pub fn http(source: &mut Source) -> &mut HttpSource {
    match &mut source.kind {
        SourceKind::Http(http) => http,
        _ => unreachable!(),
    }
}

pub fn with_auth(mut source: Source, auth: InboundAuth) -> Source {
    http(&mut source).auth = Some(auth);
    source
}

// --- the server ----------------------------------------------------------------------------

pub struct Harness {
    pub server: Arc<ServerHandle>,
    pub addr: SocketAddr,
    pub sink: Arc<MemorySink>,
    pub metrics: Metrics,
}

pub async fn serve(sources: Vec<Source>) -> Harness {
    let routes = sources
        .iter()
        .map(|s| HttpSourceRoute::from_config(s).expect("a runnable source"))
        .collect();
    let sink = Arc::new(MemorySink::default());
    let metrics = Metrics::new("0.0.0-dev");
    let routes = source_routes(
        routes,
        IntakeSettings {
            max_body_bytes: MAX_BODY,
        },
        Arc::clone(&sink) as Arc<dyn IntakeSink>,
        metrics.clone(),
    );
    let mut settings = ServerSettings::new(0, None);
    settings.bind_address = IpAddr::V4(Ipv4Addr::LOCALHOST);
    settings.max_body_bytes = Some(MAX_BODY);
    let endpoints = Endpoints {
        readiness: Vec::new(),
        metrics: Arc::new(String::new),
        data_routes: DataPortRoutes::new().merge_sources(routes),
        operational_routes: OperationalRoutes::new(),
    };
    let server = start(settings, endpoints)
        .await
        .expect("the data port binds");
    server.mark_started();
    Harness {
        addr: server.data_addr(),
        server: Arc::new(server),
        sink,
        metrics,
    }
}

// --- the client ----------------------------------------------------------------------------

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .rev()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn correlation(&self) -> &str {
        self.header("x-correlation-id")
            .unwrap_or_else(|| panic!("no X-Correlation-Id on {self:?}"))
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("JSON body: {self:?}"))
    }

    /// Status and body; checks the JSON content type and the correlation id on the way
    /// (INB-6), since every answer of a source route must carry both.
    pub fn answer(&self) -> (u16, String) {
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{self:?}"
        );
        assert!(!self.correlation().is_empty());
        (self.status, self.body.clone())
    }
}

/// A request as raw parts; `body: None` sends no `Content-Length` (and no body).
pub struct Post<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub headers: Vec<(&'a str, Vec<u8>)>,
    pub body: Option<Vec<u8>>,
}

pub fn post<'a>(path: &'a str, body: &str) -> Post<'a> {
    Post {
        method: "POST",
        path,
        headers: Vec::new(),
        body: Some(body.as_bytes().to_vec()),
    }
}

impl<'a> Post<'a> {
    pub fn header(mut self, name: &'a str, value: impl AsRef<[u8]>) -> Self {
        self.headers.push((name, value.as_ref().to_vec()));
        self
    }

    pub fn bytes(&self) -> Vec<u8> {
        let mut out = format!(
            "{} {} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n",
            self.method, self.path
        )
        .into_bytes();
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        if let Some(body) = &self.body {
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(body);
        } else {
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    pub async fn send(&self, addr: SocketAddr) -> Reply {
        send_raw(addr, &self.bytes()).await
    }
}

/// Writes the bytes as they are, reads until the server closes, parses the response.
pub async fn send_raw(addr: SocketAddr, request: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    // The server may answer (413) and close before reading everything.
    let _ = stream.write_all(request).await;
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut received));
    let _ = read.await.expect("the server answers and closes in time");
    parse(&received)
}

/// A `Transfer-Encoding: chunked` POST whose body is sent as `chunks`.
pub fn chunked(path: &str, chunks: &[&[u8]]) -> Vec<u8> {
    let mut out = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for chunk in chunks {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

fn parse(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no complete response in {text:?}"));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}
