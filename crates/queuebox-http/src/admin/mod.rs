//! The admin API (operations.md §6, ADM-1..25, and `GET /admin/stats`): list, show, replay,
//! requeue and delete rows of both tables, and the transform tester, behind the admin
//! authentication. Every handler takes the request whole and runs the steps of ADM-5 in order:
//! the declared length, the counted read under `admin.maxPayloadBytes`, authentication, then
//! parsing (unknown fields refused, ADM-6) and the operation. The binary builds [`AdminApi`]
//! and merges [`AdminApi::routes`] into the operational routes.

mod auth;
pub mod cursor;
mod error;
pub mod fields;
pub mod filters;
mod handlers;
pub mod render;
pub mod time;
mod transform;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use queuebox_config::AdminConfig;
use queuebox_store::OperatorStore;
use queuebox_transform::Pool;
use tokio::sync::Notify;

pub use auth::{AdminAuth, signed_bytes};
pub use error::AdminError;
pub use filters::AdminRouting;

/// Why the admin routes cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum AdminSetupError {
    /// ADM-2, checked again by the route layer.
    #[error(
        "The admin API is enabled without authentication. Set admin.auth (bearer, api-key or hmac), set admin.insecure: true for a local test, or set admin.enabled: false."
    )]
    NoAuth,
    #[error("{0}")]
    Auth(#[from] crate::source::AuthConfigError),
}

/// Everything the admin routes use.
pub struct AdminApi {
    pub(crate) store: Arc<dyn OperatorStore>,
    pub(crate) routing: AdminRouting,
    pub(crate) auth: AdminAuth,
    pub(crate) max_payload_bytes: u64,
    pub(crate) max_transform_timeout_ms: u64,
    pub(crate) pool: Pool,
    /// Woken after a replay (ADM-15: the poller wakes at once) and after a requeue.
    pub(crate) outbox_wake: Arc<Notify>,
    pub(crate) relay_wake: Arc<Notify>,
}

impl AdminApi {
    /// ADM-2: refuses to exist without authentication unless `insecure` says so.
    pub fn new(
        config: &AdminConfig,
        store: Arc<dyn OperatorStore>,
        routing: AdminRouting,
        pool: Pool,
        outbox_wake: Arc<Notify>,
        relay_wake: Arc<Notify>,
    ) -> Result<Self, AdminSetupError> {
        if config.auth.is_none() && !config.insecure {
            return Err(AdminSetupError::NoAuth);
        }
        Ok(Self {
            store,
            routing,
            auth: AdminAuth::new(config.auth.as_ref())?,
            max_payload_bytes: config.max_payload_bytes,
            max_transform_timeout_ms: config.max_transform_timeout_ms,
            pool,
            outbox_wake,
            relay_wake,
        })
    }

    pub fn auth(&self) -> &AdminAuth {
        &self.auth
    }

    /// Every `/admin/*` route of ADM-14..25 and `/admin/stats`.
    pub fn routes(self) -> Router {
        let api = Arc::new(self);
        Router::new()
            .route("/admin/transform/test", post(transform::test))
            .route("/admin/replay", post(handlers::replay))
            .route("/admin/outbox/messages", get(handlers::list_outbox))
            .route(
                "/admin/outbox/messages/{id}",
                get(handlers::show_outbox).delete(handlers::delete_outbox_one),
            )
            .route("/admin/outbox/delete", post(handlers::delete_outbox))
            .route("/admin/inbox/messages", get(handlers::list_inbox))
            .route(
                "/admin/inbox/messages/{id}",
                get(handlers::show_inbox).delete(handlers::delete_inbox_one),
            )
            .route("/admin/inbox/delete", post(handlers::delete_inbox))
            .route("/admin/inbox/requeue", post(handlers::requeue))
            .route("/admin/stats", get(handlers::stats))
            .with_state(api)
    }
}
