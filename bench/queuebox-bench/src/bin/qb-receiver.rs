//! `qb-receiver`: a minimal HTTP/1.1 receiver for the outbox benchmark. Answers 200 to every
//! request, records each `POST`'s `X-Message-Id` and the wall-clock time (µs) its headers
//! arrived, and answers `GET /count` with the number recorded so far. On SIGTERM or SIGINT, after
//! `--expect` records, or after `--idle-ms` without a request (once one came), it writes the
//! records as CSV (`queuebox_bench::receipts`) to `--out` and exits.
//!
//! It prints `port=<port>` on standard output once it listens; everything else goes to stderr.

use std::convert::Infallible;
use std::io::Write as _;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use queuebox_bench::receipts;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Notify;

#[derive(Parser)]
#[command(about = "Minimal HTTP receiver for the QueueBox outbox benchmark")]
struct Args {
    /// Port on 127.0.0.1; 0 lets the system choose (printed as `port=N`).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Where the CSV records go at the end.
    #[arg(long)]
    out: PathBuf,
    /// Stop after this many POSTs.
    #[arg(long)]
    expect: Option<u64>,
    /// Stop after this long without a request, once the first one arrived.
    #[arg(long)]
    idle_ms: Option<u64>,
}

#[derive(Default)]
struct State {
    records: Mutex<Vec<(String, i64)>>,
    count: AtomicU64,
    /// µs of the latest request, 0 before the first.
    last_us: AtomicU64,
    enough: Notify,
    expect: Option<u64>,
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

async fn drain(body: Incoming) {
    let mut body = body;
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        if frame.is_err() {
            return;
        }
    }
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<String>, Infallible> {
    let at = now_us();
    if req.method() == Method::GET && req.uri().path() == "/count" {
        let n = state.count.load(Ordering::Relaxed);
        return Ok(Response::new(n.to_string()));
    }
    let id = req
        .headers()
        .get("x-message-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    drain(req.into_body()).await;
    state
        .records
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((id, at));
    state.last_us.store(at as u64, Ordering::Relaxed);
    let n = state.count.fetch_add(1, Ordering::Relaxed) + 1;
    if state.expect.is_some_and(|e| n >= e) {
        state.enough.notify_one();
    }
    let mut response = Response::new(String::new());
    *response.status_mut() = StatusCode::OK;
    Ok(response)
}

async fn idle(state: &State, limit: Option<u64>) {
    let Some(limit) = limit else {
        return std::future::pending().await;
    };
    loop {
        tokio::time::sleep(Duration::from_millis(limit.clamp(10, 500))).await;
        let last = state.last_us.load(Ordering::Relaxed) as i64;
        if last > 0 && now_us() - last > (limit as i64) * 1000 {
            return;
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let state = Arc::new(State {
        expect: args.expect,
        ..State::default()
    });
    let listener = TcpListener::bind(("127.0.0.1", args.port)).await?;
    let port = listener.local_addr()?.port();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "port={port}")?;
        out.flush()?;
    }
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let why = loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = accepted?;
                let _ = stream.set_nodelay(true);
                let state = Arc::clone(&state);
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(Arc::clone(&state), req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            _ = term.recv() => break "SIGTERM",
            _ = int.recv() => break "SIGINT",
            () = state.enough.notified() => break "the expected count",
            () = idle(&state, args.idle_ms) => break "the idle timeout",
        }
    };
    let records = std::mem::take(&mut *state.records.lock().unwrap_or_else(|p| p.into_inner()));
    std::fs::write(&args.out, receipts::to_csv(&records))?;
    eprintln!(
        "qb-receiver: stopped on {why}; wrote {} records to {}",
        records.len(),
        args.out.display()
    );
    Ok(())
}
