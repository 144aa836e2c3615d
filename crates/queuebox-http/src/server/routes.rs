//! The routers of both ports: `GET /` on the data port, health and metrics wherever the
//! operational routes live (OPS-2/3, OPS-5), plus the routes later features merge in.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::header::{CONTENT_TYPE, HeaderValue};
use axum::http::{Response, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;

use super::MetricsRenderer;
use super::health::{LIVENESS_BODY, Readiness};
use super::respond::{self, PROMETHEUS_TEXT, TEXT};

/// Routes added to the data port next to `GET /`, such as the inbox webhooks. They must not
/// set a fallback (the port's 404 is fixed) nor collide with a fixed route (OPS-4, checked
/// by the configuration; axum panics on an overlap).
#[derive(Default)]
pub struct DataPortRoutes {
    router: Router,
    /// Paths of the inbox source routes: every answer on them, the server's own included,
    /// carries `X-Correlation-Id` (inbox.md INB-6).
    pub(crate) source_paths: Vec<String>,
}

impl DataPortRoutes {
    pub fn new() -> Self {
        Self::default()
    }

    /// Merges more routes in; may be called once per feature.
    pub fn merge(mut self, routes: Router) -> Self {
        self.router = self.router.merge(routes);
        self
    }

    /// Merges the inbox source routes in and remembers their paths (INB-6).
    pub fn merge_sources(mut self, routes: crate::source::SourceRoutes) -> Self {
        self.router = self.router.merge(routes.router);
        self.source_paths.extend(routes.paths);
        self
    }
}

/// Routes served next to health and metrics: on the management port when there is one, else
/// on the data port (the admin API, `/admin/*`). Same rules as [`DataPortRoutes`].
#[derive(Default)]
pub struct OperationalRoutes {
    router: Router,
}

impl OperationalRoutes {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn merge(mut self, routes: Router) -> Self {
        self.router = self.router.merge(routes);
        self
    }
}

/// Health, metrics and the extra operational routes, ready to be placed on a port.
pub(crate) fn operational_router(
    readiness: Arc<Readiness>,
    metrics: MetricsRenderer,
    extra: OperationalRoutes,
) -> Router {
    let ready = move || {
        let readiness = Arc::clone(&readiness);
        async move {
            let (healthy, body) = readiness.probe().await;
            let status = if healthy {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            respond::json_response(status, body)
        }
    };
    Router::new()
        .route("/health/live", get(live))
        .route("/health/ready", get(ready.clone()))
        // OPS-17: an alias, same status and body.
        .route("/health", get(ready))
        .route("/metrics", get(move || scrape(Arc::clone(&metrics))))
        .merge(extra.router)
}

/// The data port: `GET /`, the merged data routes, and the operational routes when no
/// management port is configured (`operational` is `None` otherwise, so OPS-3's 404 follows
/// from the routes simply not being there).
pub(crate) fn data_router(data: DataPortRoutes, operational: Option<Router>) -> Router {
    let mut router = Router::new().route("/", get(root)).merge(data.router);
    if let Some(operational) = operational {
        router = router.merge(operational);
    }
    router.fallback(not_found)
}

pub(crate) fn management_router(operational: Router) -> Router {
    operational.fallback(not_found)
}

/// OPS-9: touches nothing else.
async fn root() -> Response<Body> {
    text_response(TEXT, "QueueBox is running!".to_owned())
}

async fn live() -> Response<Body> {
    respond::json_response(StatusCode::OK, LIVENESS_BODY.to_owned())
}

/// MET-1: the renderer reads in-memory values; rendering is cheap enough to run in place.
async fn scrape(metrics: MetricsRenderer) -> Response<Body> {
    text_response(PROMETHEUS_TEXT, metrics())
}

async fn not_found() -> Response<Body> {
    respond::json_error(StatusCode::NOT_FOUND, respond::NOT_FOUND)
}

fn text_response(content_type: &'static str, body: String) -> Response<Body> {
    let mut response = (StatusCode::OK, body).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
