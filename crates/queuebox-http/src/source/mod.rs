//! The HTTP webhook source (inbox.md §3): `POST <inbox.basePath><path>` for every `http`
//! source. The route does what is HTTP (body cap, rate limit, authentication, the headers it
//! keeps, the status it answers) and hands the message to the engine's intake, which stores it.
//!
//! The binary prepares each source at start and mounts the routes on the data port:
//!
//! ```no_run
//! # fn wire(
//! #     config: &queuebox_config::Config,
//! #     intake: std::sync::Arc<dyn queuebox_core::Intake>,
//! #     metrics: queuebox_telemetry::Metrics,
//! # ) -> Result<(), queuebox_http::source::SourceRouteError> {
//! use queuebox_http::server::DataPortRoutes;
//! use queuebox_http::source::{HttpSourceRoute, HttpSourceSettings, source_routes};
//!
//! let routes = config
//!     .sources
//!     .values()
//!     .filter(|source| matches!(source.kind, queuebox_config::SourceKind::Http(_)))
//!     .map(HttpSourceRoute::from_config)
//!     .collect::<Result<Vec<_>, _>>()?;
//! let settings = HttpSourceSettings::of_inbox(&config.inbox, metrics);
//! let data_routes = DataPortRoutes::new().merge_sources(source_routes(routes, settings, intake));
//! # Ok(()) }
//! ```
//!
//! `merge_sources` (rather than `merge`) also tells the server which paths are source routes,
//! so its own early answers there (503 while draining, 413 on a declared length, 405, 408,
//! 431, 500) carry `X-Correlation-Id` too (INB-6).

pub(crate) mod auth;
pub(crate) mod body;
pub(crate) mod budget;
pub mod correlation;
mod handler;
mod headers;
mod presets;
mod rate;
mod refusals;
use refusals::Refusals;
mod respond;
mod route;
mod wait;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use axum::routing::post;
use queuebox_core::Intake;

pub use auth::AuthConfigError;
pub use correlation::CORRELATION_HEADER;
pub use route::{HttpSourceRoute, SourceRouteError};

use handler::RouteHandler;

/// What every source route shares.
#[derive(Clone, Debug)]
pub struct HttpSourceSettings {
    /// `inbox.maxBodyBytes` (INB-12): exactly this many bytes are accepted.
    pub max_body_bytes: u64,
    /// Where refusals are counted (`queuebox_inbox_webhook_refusals_total`).
    pub metrics: queuebox_telemetry::Metrics,
    /// `inbox.maxPendingBytes`: the body bytes all source routes hold at once, being received
    /// or waiting for the database; a request beyond it gets 503 (issue 17 defect 5).
    pub max_pending_bytes: u64,
    /// `inbox.storageWaitMs`: the longest wait for the database to store a message; then the
    /// request gets 503 (issue 17 defect 7).
    pub storage_wait: Duration,
}

impl HttpSourceSettings {
    /// The body cap, with the defaults of the other keys (64 MiB held, a 10 s storage wait).
    pub fn new(max_body_bytes: u64, metrics: queuebox_telemetry::Metrics) -> Self {
        Self {
            max_body_bytes,
            metrics,
            max_pending_bytes: 67_108_864_u64.max(max_body_bytes),
            storage_wait: Duration::from_secs(10),
        }
    }

    /// The `inbox` section's keys.
    pub fn of_inbox(
        inbox: &queuebox_config::InboxConfig,
        metrics: queuebox_telemetry::Metrics,
    ) -> Self {
        Self {
            max_body_bytes: inbox.max_body_bytes,
            metrics,
            max_pending_bytes: inbox.max_pending_bytes,
            storage_wait: Duration::from_millis(inbox.storage_wait_ms),
        }
    }
}

/// The source routes and the paths they answer, for [`crate::server::DataPortRoutes::merge_sources`].
pub struct SourceRoutes {
    pub(crate) router: Router,
    pub(crate) paths: Vec<String>,
}

impl SourceRoutes {
    /// The `POST` paths, one per source.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// The routes as a bare router, without the data port's server in front (the fuzz targets
    /// call it directly).
    pub fn into_router(self) -> Router {
        self.router
    }
}

/// One `POST` route per source (INB-5): exact path, query string ignored, no other method
/// (the router answers 405 with `Allow: POST`).
pub fn source_routes(
    sources: Vec<HttpSourceRoute>,
    settings: HttpSourceSettings,
    intake: Arc<dyn Intake>,
) -> SourceRoutes {
    let mut router = Router::new();
    let mut paths = Vec::with_capacity(sources.len());
    let budget = budget::Budget::new(
        settings.max_pending_bytes,
        settings.metrics.inbox_held_bytes().clone(),
    );
    for route in sources {
        let path = route.route.clone();
        let handler = Arc::new(RouteHandler {
            refusals: Refusals::new(&settings.metrics, route.name.as_str()),
            route,
            settings: settings.clone(),
            intake: Arc::clone(&intake),
            budget: budget.clone(),
        });
        router = router.route(
            &path,
            post(move |request: Request<Body>| Arc::clone(&handler).handle(request)),
        );
        paths.push(path);
    }
    SourceRoutes { router, paths }
}

#[cfg(test)]
mod tests;
