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
//! let settings = HttpSourceSettings { max_body_bytes: config.inbox.max_body_bytes, metrics };
//! let data_routes = DataPortRoutes::new().merge_sources(source_routes(routes, settings, intake));
//! # Ok(()) }
//! ```
//!
//! `merge_sources` (rather than `merge`) also tells the server which paths are source routes,
//! so its own early answers there (503 while draining, 413 on a declared length, 405, 408,
//! 431, 500) carry `X-Correlation-Id` too (INB-6).

pub(crate) mod auth;
pub(crate) mod body;
pub mod correlation;
mod handler;
mod headers;
mod presets;
mod rate;
mod refusals;
use refusals::Refusals;
mod respond;
mod route;

use std::sync::Arc;

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
    for route in sources {
        let path = route.route.clone();
        let handler = Arc::new(RouteHandler {
            refusals: Refusals::new(&settings.metrics, route.name.as_str()),
            route,
            settings: settings.clone(),
            intake: Arc::clone(&intake),
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
