//! The HTTP webhook source (inbox.md §3..§9): `POST <inbox.basePath><path>` for every `http`
//! source, from the body cap to the stored row.
//!
//! The binary prepares each source at start and mounts the routes on the data port:
//!
//! ```no_run
//! # fn wire(
//! #     config: &queuebox_config::Config,
//! #     sink: std::sync::Arc<dyn queuebox_http::source::IntakeSink>,
//! #     metrics: queuebox_engine::metrics::Metrics,
//! # ) -> Result<(), queuebox_http::source::SourceRouteError> {
//! use queuebox_http::server::DataPortRoutes;
//! use queuebox_http::source::{HttpSourceRoute, IntakeSettings, source_routes};
//!
//! let routes = HttpSourceRoute::all(config.sources.values())?;
//! let settings = IntakeSettings { max_body_bytes: config.inbox.max_body_bytes };
//! let data_routes = DataPortRoutes::new().merge_sources(source_routes(routes, settings, sink, metrics));
//! # Ok(()) }
//! ```
//!
//! `merge_sources` (rather than `merge`) also tells the server which paths are source routes,
//! so its own early answers there (503 while draining, 413 on a declared length, 405, 408,
//! 431, 500) carry `X-Correlation-Id` too (INB-6).

mod auth;
mod body;
mod correlation;
mod extract;
mod filter;
mod handler;
mod headers;
mod rate;
mod rawjson;
mod respond;
mod route;
mod schedule;
mod sink;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::Request;
use axum::routing::post;
use queuebox_engine::metrics::Metrics;

pub use auth::AuthConfigError;
pub use correlation::{CORRELATION_HEADER, CorrelationId};
pub use route::{HttpSourceRoute, SourceRouteError};
pub use sink::{IntakeRefused, IntakeSink};

use handler::Intake;

/// What every source route shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntakeSettings {
    /// `inbox.maxBodyBytes` (INB-12): exactly this many bytes are accepted.
    pub max_body_bytes: u64,
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
    settings: IntakeSettings,
    sink: Arc<dyn IntakeSink>,
    metrics: Metrics,
) -> SourceRoutes {
    let mut router = Router::new();
    let mut paths = Vec::with_capacity(sources.len());
    for route in sources {
        let path = route.route.clone();
        let intake = Arc::new(Intake {
            filtered: metrics.inbox_filtered(&route.name),
            route,
            settings,
            sink: Arc::clone(&sink),
            metrics: metrics.clone(),
        });
        router = router.route(
            &path,
            post(move |request: Request<Body>| Arc::clone(&intake).handle(request)),
        );
        paths.push(path);
    }
    SourceRoutes { router, paths }
}

#[cfg(test)]
mod tests;
