//! One listening port: the accept loop (within `server.maxConnections`), hyper's HTTP/1
//! connections with the OPS-6 limits, the 408 for a head that never completes, and the
//! drain-then-close of OPS-26.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, sleep, timeout};

use super::HttpLimits;
use super::connections::{ConnectionBound, Slot};
use super::refusal_io::RefusalShaping;
use super::respond::raw_request_timeout;
use super::service::{PortService, PortState};

/// OPS-26: the drain checks every 25 ms for at most 5000 ms.
const DRAIN_POLL: Duration = Duration::from_millis(25);
const DRAIN_TIMEOUT: Duration = Duration::from_millis(5000);
/// After a clean drain, responses still being written get this long before the connections
/// are cut; idle keep-alive connections close at once.
const CLOSE_GRACE: Duration = Duration::from_millis(500);
/// Bounds writing the raw 408 and closing a socket, so a client that stopped reading cannot
/// hold a connection task.
const SOCKET_WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// After a failed accept (e.g. out of file descriptors), wait before the next one instead of
/// spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What a drain left behind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrainOutcome {
    /// Requests still inside a handler when the 5000 ms ran out; 0 after a clean drain.
    pub still_in_flight: usize,
}

pub(crate) struct Listener {
    addr: SocketAddr,
    state: Arc<PortState>,
    stop: watch::Sender<bool>,
    /// The accept loop; it hands back its connections when it stops. Taken by the first
    /// close, so closing twice is harmless.
    task: Mutex<Option<JoinHandle<JoinSet<()>>>>,
}

/// hyper's HTTP/1 settings. The exact OPS-6 header limits are checked in the service, where
/// the 431 can carry its JSON body; hyper's caps sit at twice those limits so only a grossly
/// oversized head meets hyper's own (empty-bodied) 431.
pub(crate) fn http1_builder(limits: &HttpLimits) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_headers(limits.max_headers.saturating_mul(2))
        .max_header_size(limits.max_header_bytes.saturating_mul(2));
    builder
}

impl Listener {
    pub(crate) fn serve(
        listener: TcpListener,
        addr: SocketAddr,
        service: PortService,
        state: Arc<PortState>,
        http: Arc<http1::Builder>,
        bound: ConnectionBound,
    ) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, service, http, bound, stop_rx));
        Self {
            addr,
            state,
            stop,
            task: Mutex::new(Some(task)),
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// OPS-26 phase 2 / 8: new requests get 503, the ones in a handler finish, then the
    /// listener and its connections close.
    pub(crate) async fn drain_and_close(&self) -> DrainOutcome {
        self.state.start_draining();
        let started = Instant::now();
        let still_in_flight = loop {
            let count = self.state.in_flight();
            if count == 0 {
                break 0;
            }
            if started.elapsed() >= DRAIN_TIMEOUT {
                tracing::warn!(
                    listener = self.state.label,
                    in_flight = count,
                    "{count} request(s) still in flight on the {} port after {} ms; closing it",
                    self.state.label,
                    DRAIN_TIMEOUT.as_millis()
                );
                break count;
            }
            sleep(DRAIN_POLL).await;
        };
        // Requests that outlived the drain are cut at once; otherwise responses being written
        // get a short grace.
        let grace = if still_in_flight == 0 {
            CLOSE_GRACE
        } else {
            Duration::ZERO
        };
        self.close(grace).await;
        DrainOutcome { still_in_flight }
    }

    async fn close(&self, grace: Duration) {
        let _ = self.stop.send(true);
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(task) = task else { return };
        let Ok(mut connections) = task.await else {
            return;
        };
        let finished = timeout(grace, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if finished.is_err() {
            connections.shutdown().await;
        }
        tracing::info!(
            listener = self.state.label,
            "the {} port is closed",
            self.state.label
        );
    }
}

/// Resolves once the stop signal is set, or its sender is gone (the handle was dropped).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

async fn accept_loop(
    listener: TcpListener,
    service: PortService,
    http: Arc<http1::Builder>,
    bound: ConnectionBound,
    stop: watch::Receiver<bool>,
) -> JoinSet<()> {
    let mut connections = JoinSet::new();
    let mut stop_accepting = stop.clone();
    loop {
        // A slot before the accept: at the bound, new connections stay in the system's backlog
        // (costing this process nothing) until one of ours closes.
        let slot = match bound.try_slot() {
            Some(slot) => slot,
            None => tokio::select! {
                () = stopped(&mut stop_accepting) => break,
                slot = bound.next_slot() => slot,
            },
        };
        tokio::select! {
            () = stopped(&mut stop_accepting) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    connections.spawn(serve_connection(
                        stream,
                        service.clone(),
                        Arc::clone(&http),
                        stop.clone(),
                        slot.opened(),
                    ));
                }
                // A client that gave up before the accept concerns nobody.
                Err(err) if matches!(
                    err.kind(),
                    io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
                ) => {}
                Err(err) => {
                    tracing::warn!(error = %err, "accepting a connection failed");
                    sleep(ACCEPT_BACKOFF).await;
                }
            },
            // Reap finished connections so the set does not grow with the process lifetime.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections
}

/// `_slot` is this connection's place within `server.maxConnections`, given back when the
/// task ends, however it ends (an abort at shutdown included).
async fn serve_connection(
    stream: TcpStream,
    service: PortService,
    http: Arc<http1::Builder>,
    mut stop: watch::Receiver<bool>,
    _slot: Slot,
) {
    let _ = stream.set_nodelay(true);
    // hyper's own refusals of a head it cannot parse get the JSON error body (issue 17).
    let stream = RefusalShaping::new(stream);
    let mut connection = http.serve_connection(TokioIo::new(stream), service);
    let mut closing = false;
    // Polled without hyper's own shutdown so the socket stays ours when hyper gives up on a
    // head that did not arrive in time: hyper closes such a connection silently, OPS-6 wants
    // a 408.
    let result = loop {
        tokio::select! {
            result = std::future::poll_fn(|cx| connection.poll_without_shutdown(cx)) => {
                break result;
            }
            () = stopped(&mut stop), if !closing => {
                // Finishes the request in progress, then ends; an idle connection ends now.
                closing = true;
                std::pin::Pin::new(&mut connection).graceful_shutdown();
            }
        }
    };
    let parts = connection.into_parts();
    let mut io = parts.io.into_inner();
    match result {
        // A timeout with bytes of a head already received: a request started and did not
        // finish its head. Without any byte it is an idle connection, closed silently.
        Err(err) if err.is_timeout() && !parts.read_buf.is_empty() => {
            let _ = timeout(SOCKET_WRITE_TIMEOUT, io.write_all(&raw_request_timeout())).await;
        }
        Err(err) if !err.is_timeout() => {
            tracing::debug!(error = %err, "HTTP connection ended with an error");
        }
        _ => {}
    }
    let _ = timeout(SOCKET_WRITE_TIMEOUT, io.shutdown()).await;
}
