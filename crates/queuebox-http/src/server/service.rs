//! The per-port request pipeline in front of the router: draining flag and in-flight count
//! (OPS-26), header limits and the declared-size check (OPS-6), the body deadline, the
//! panic guard and the JSON shape of the router's own errors (OPS-7).

use std::collections::HashSet;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::header::CONTENT_LENGTH;
use axum::http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use tokio::time::Instant;
use tower::Service;

use super::HttpLimits;
use super::body::DeadlineBody;
use super::respond;
use super::unwind::CatchUnwind;
use crate::source::correlation;

/// Draining flag and in-flight count of one port.
pub(crate) struct PortState {
    pub(crate) label: &'static str,
    draining: AtomicBool,
    in_flight: AtomicUsize,
}

impl PortState {
    pub(crate) fn new(label: &'static str) -> Self {
        Self {
            label,
            draining: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// Counts the request in unless the port drains. Counting first and then reading the
    /// flag (both SeqCst, the drain does the reverse) means a request the drain does not see
    /// in the count is one that sees the flag: none slips through uncounted.
    fn enter(self: &Arc<Self>) -> Option<InFlight> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        if self.draining.load(Ordering::SeqCst) {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(InFlight(Arc::clone(self)))
    }

    pub(crate) fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}

/// One request inside the pipeline; dropped when the handler has answered, panicked or been
/// cancelled by a closed connection.
struct InFlight(Arc<PortState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// hyper's view of a port: one clone per connection, one call per request.
#[derive(Clone)]
pub(crate) struct PortService {
    inner: Arc<Inner>,
}

struct Inner {
    router: Router,
    state: Arc<PortState>,
    limits: HttpLimits,
    max_body_bytes: Option<u64>,
    /// Inbox source routes: their answers all carry `X-Correlation-Id` (INB-6).
    source_paths: HashSet<String>,
}

impl PortService {
    pub(crate) fn new(
        router: Router,
        state: Arc<PortState>,
        limits: HttpLimits,
        max_body_bytes: Option<u64>,
        source_paths: Vec<String>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                router,
                state,
                limits,
                max_body_bytes,
                source_paths: source_paths.into_iter().collect(),
            }),
        }
    }
}

type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for PortService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { Ok(inner.handle(request).await) })
    }
}

impl Inner {
    /// On a source route, the correlation id is fixed before anything can answer, handed to
    /// the route through the request extensions, and stamped on whatever answers.
    async fn handle(&self, mut request: Request<Incoming>) -> Response<Body> {
        if !self.source_paths.contains(request.uri().path()) {
            return self.answer(request).await;
        }
        let id = correlation::of_headers(request.headers());
        request.extensions_mut().insert(id.clone());
        correlation::stamp(&id, self.answer(request).await)
    }

    async fn answer(&self, request: Request<Incoming>) -> Response<Body> {
        // The whole-request clock starts when the head is in (hyper gives no earlier time).
        let deadline = Instant::now() + self.limits.request_timeout;
        let Some(_in_flight) = self.state.enter() else {
            return respond::json_error_closing(
                StatusCode::SERVICE_UNAVAILABLE,
                respond::SHUTTING_DOWN,
            );
        };
        if request.headers().len() > self.limits.max_headers
            || head_size(&request) > self.limits.max_header_bytes
        {
            return respond::json_error_closing(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                respond::HEADERS_TOO_LARGE,
            );
        }
        if let Some(max) = self.max_body_bytes
            && declared_length(&request).is_some_and(|length| length > max)
        {
            return respond::json_error_closing(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("Request body exceeds {max} bytes"),
            );
        }

        let timed_out = Arc::new(AtomicBool::new(false));
        let request = request.map({
            let timed_out = Arc::clone(&timed_out);
            |body| Body::new(DeadlineBody::new(body, deadline, timed_out))
        });
        let path = request.uri().path().to_owned();
        let mut router = self.router.clone();
        let response = match CatchUnwind::new(router.call(request)).await {
            Ok(Ok(response)) => response,
            Ok(Err(never)) => match never {},
            Err(()) => {
                tracing::error!(
                    listener = self.state.label,
                    path,
                    "a request handler panicked"
                );
                return respond::json_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    respond::INTERNAL_ERROR,
                );
            }
        };
        // A handler that hit the deadline answered with whatever its read error mapped to;
        // the rule is 408 (OPS-6).
        if timed_out.load(Ordering::SeqCst) {
            return respond::json_error_closing(
                StatusCode::REQUEST_TIMEOUT,
                respond::REQUEST_TIMEOUT,
            );
        }
        respond::shape_router_error(response)
    }
}

fn declared_length(request: &Request<Incoming>) -> Option<u64> {
    request
        .headers()
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The size of the request line and headers as the client sent them, counted in the shortest
/// form that parses to the same request (`name:value`, no optional whitespace): the count
/// never exceeds the bytes received, so no request under the limit is refused. hyper itself
/// enforces a hard cap above this limit (see the listener) with an empty-bodied 431.
fn head_size(request: &Request<Incoming>) -> usize {
    let target = match request.uri().path_and_query() {
        Some(target) if request.uri().authority().is_none() => target.as_str().len(),
        _ => request.uri().to_string().len(),
    };
    // METHOD SP target SP HTTP/1.x CRLF
    let line = request.method().as_str().len() + 1 + target + 1 + 8 + 2;
    let headers: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + 1 + value.len() + 2)
        .sum();
    line + headers + 2
}
