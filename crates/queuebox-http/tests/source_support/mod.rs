//! Helpers for the HTTP source tests: the real data-port server on 127.0.0.1 with the source
//! routes mounted in front of the engine's real intake (pipeline and write-combining writer),
//! whose store is an in-memory inbox table (standing in for the database, not for the engine),
//! configuration builders, and a raw HTTP/1.1 client so every byte sent is chosen by the test
//! (chunked bodies, non-UTF-8 header values, exact lengths).

#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use queuebox_config::{
    Consumption, Filter, HeaderName, HttpSource, InboundAuth, Source, SourceKind,
};
use queuebox_core::intake::{IntakeOutcome, PendingOutcome};
use queuebox_core::jsonpath::JsonPath;
use queuebox_core::template::{Template, TemplateFields};
use queuebox_core::{Intake, ReceivedMessage};
use queuebox_engine::intake::InboxIntake;
use queuebox_engine::intake::writer::{IntakeWriter, WriterSettings};
use queuebox_engine::pipeline::SourcePipeline;
use queuebox_http::server::{
    DataPortRoutes, Endpoints, OperationalRoutes, ServerHandle, ServerSettings, start,
};
use queuebox_http::source::{HttpSourceRoute, HttpSourceSettings, source_routes};
use queuebox_store::{InsertOutcome, IntakeStore, NewInboxRow, StoreAction, StoreError};
use queuebox_telemetry::Metrics;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

pub const MAX_BODY: u64 = 1024;

// --- the inbox table ------------------------------------------------------------------------

const NORMAL: u8 = 0;
const FAIL: u8 = 1;

/// The inbox table in memory with the unique rule of INB-50 on (`source`, `idempotency_key`).
#[derive(Default)]
pub struct MemoryInbox {
    rows: Mutex<Vec<NewInboxRow>>,
    mode: AtomicU8,
    /// Set by `refuse_shutting_down`: the intake answers as a stopping QueueBox does.
    stopping: AtomicBool,
    /// When set, each insert waits for a permit first (to hold a request inside a handler).
    gate: Mutex<Option<Arc<Semaphore>>>,
}

impl MemoryInbox {
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
        self.stopping.store(true, Ordering::SeqCst);
    }

    pub fn hold(&self) -> Arc<Semaphore> {
        let gate = Arc::new(Semaphore::new(0));
        *self.gate.lock().unwrap() = Some(Arc::clone(&gate));
        gate
    }
}

#[async_trait]
impl IntakeStore for MemoryInbox {
    async fn insert_batch(&self, batch: &[NewInboxRow]) -> Result<Vec<InsertOutcome>, StoreError> {
        let gate = self.gate.lock().unwrap().clone();
        if let Some(gate) = gate {
            gate.acquire_many(batch.len() as u32)
                .await
                .unwrap()
                .forget();
        }
        if self.mode.load(Ordering::SeqCst) == FAIL {
            return Err(StoreError::Database {
                action: StoreAction::UseDatabase,
                during: "storing inbox rows",
                reason: "the test made it fail".into(),
            });
        }
        let mut rows = self.rows.lock().unwrap();
        Ok(batch
            .iter()
            .map(|row| {
                let exists = rows
                    .iter()
                    .any(|r| r.source == row.source && r.idempotency_key == row.idempotency_key);
                if exists {
                    InsertOutcome::Duplicate
                } else {
                    rows.push(row.clone());
                    InsertOutcome::Stored(row.id)
                }
            })
            .collect())
    }
}

/// The engine's intake, answering `ShuttingDown` once the test says QueueBox is stopping.
struct StoppableIntake {
    inner: InboxIntake,
    inbox: Arc<MemoryInbox>,
}

#[async_trait]
impl Intake for StoppableIntake {
    async fn enqueue(&self, message: ReceivedMessage) -> PendingOutcome {
        if self.inbox.stopping.load(Ordering::SeqCst) {
            return PendingOutcome::ready(IntakeOutcome::ShuttingDown);
        }
        self.inner.enqueue(message).await
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
    pub sink: Arc<MemoryInbox>,
    pub metrics: Metrics,
    /// Stops the intake's writer when the harness goes.
    _writer: tokio_util::sync::DropGuard,
}

pub async fn serve(sources: Vec<Source>) -> Harness {
    let routes = sources
        .iter()
        .map(|s| HttpSourceRoute::from_config(s).expect("a runnable source"))
        .collect();
    let pipelines = sources
        .iter()
        .map(|s| SourcePipeline::new(s.inbox_rules()).expect("a runnable source"))
        .collect();
    let sink = Arc::new(MemoryInbox::default());
    let metrics = Metrics::new("0.0.0-dev");
    let writer = IntakeWriter::new(
        Arc::clone(&sink) as Arc<dyn IntakeStore>,
        WriterSettings::default(),
        metrics.clone(),
        Arc::new(Notify::new()),
    );
    let intake = StoppableIntake {
        inner: InboxIntake::new(pipelines, writer.handle(), metrics.clone()),
        inbox: Arc::clone(&sink),
    };
    let stop = CancellationToken::new();
    tokio::spawn(writer.run(stop.clone()));
    let routes = source_routes(routes, HttpSourceSettings::new(MAX_BODY), Arc::new(intake));
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
        _writer: stop.drop_guard(),
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
