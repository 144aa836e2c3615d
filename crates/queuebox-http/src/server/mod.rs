//! QueueBox's HTTP listeners: the data port and the optional management port (OPS-2..9,
//! OPS-17..22, MET-1), the shared error rules, the draining flag and the graceful shutdown
//! (OPS-26 phases 2 and 8).
//!
//! The binary builds the pieces and starts both ports with [`start`]:
//!
//! ```no_run
//! # async fn run() -> Result<(), queuebox_http::server::BindError> {
//! use std::sync::Arc;
//! use queuebox_core::{ComponentDown, ReadinessComponent};
//! use queuebox_http::server::{start, DataPortRoutes, Endpoints, OperationalRoutes, ServerSettings};
//!
//! let endpoints = Endpoints {
//!     readiness: vec![
//!         ReadinessComponent::new("database", || async { Ok::<(), ComponentDown>(()) }),
//!         ReadinessComponent::new("outbox-capture", || async { Err(ComponentDown::Failed) })
//!             .advisory(),
//!     ],
//!     metrics: Arc::new(|| String::from("# metrics\n")),
//!     data_routes: DataPortRoutes::new(),
//!     operational_routes: OperationalRoutes::new(),
//! };
//! let servers = start(ServerSettings::new(8080, Some(8081)), endpoints).await?;
//! servers.mark_started(); // OPS-23 step 14: readiness may turn healthy
//! // ... on SIGTERM:
//! servers.begin_shutdown(); // phase 1
//! servers.drain_data_port().await; // phase 2
//! // phases 3..7 belong to the engine
//! servers.stop_management_port().await; // phase 8
//! # Ok(()) }
//! ```

mod body;
mod connections;
mod handle;
mod health;
mod listener;
mod refusal_io;
pub(crate) mod respond;
mod routes;
mod service;
mod unwind;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use queuebox_core::ReadinessComponent;

pub use handle::{BindError, BoundPorts, DrainOutcome, ServerHandle, bind_ports, serve, start};
pub use routes::{DataPortRoutes, OperationalRoutes};

/// Renders the Prometheus text exposition (MET-1). The engine's registry supplies it; it
/// reads in-memory values only, so a scrape never reaches the database (MET-6).
pub type MetricsRenderer = Arc<dyn Fn() -> String + Send + Sync>;

/// Where and how the ports listen (CFG-35/36).
#[derive(Clone, Debug)]
pub struct ServerSettings {
    /// `server.httpPort`; 0 lets the system choose.
    pub http_port: u16,
    /// `server.managementPort`; when set, the operational routes live there only (OPS-3).
    pub management_port: Option<u16>,
    /// All interfaces by default (OPS-2); a test may narrow it to the loopback.
    pub bind_address: IpAddr,
    /// `inbox.maxBodyBytes`: a declared `Content-Length` above it gets 413 on every data-port
    /// route before the body is read (OPS-6). `None` disables the check.
    pub max_body_bytes: Option<u64>,
    pub limits: HttpLimits,
    /// Where each port counts its open connections (`queuebox_http_connections`); `None`
    /// counts nothing.
    pub metrics: Option<queuebox_telemetry::Metrics>,
}

impl ServerSettings {
    pub fn new(http_port: u16, management_port: Option<u16>) -> Self {
        Self {
            http_port,
            management_port,
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            max_body_bytes: None,
            limits: HttpLimits::default(),
            metrics: None,
        }
    }
}

/// The request limits of OPS-6. The defaults are the specified values; tests shorten the
/// timeouts so they do not wait 10 s.
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// More request headers than this → 431.
    pub max_headers: usize,
    /// More bytes of request line and headers than this → 431.
    pub max_header_bytes: usize,
    /// The request line and headers must arrive within this → 408.
    pub header_timeout: Duration,
    /// The body must have arrived this long after the headers → 408.
    pub request_timeout: Duration,
    /// `server.maxConnections`: the open connections of each port. At the bound a port accepts
    /// nothing until one closes (issue 17 defect 5).
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_headers: 100,
            max_header_bytes: 16384,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_connections: 1024,
        }
    }
}

/// What the binary plugs into the listeners: readiness checks, the metrics renderer and the
/// routes added by later features (inbox on the data port, admin next to health).
pub struct Endpoints {
    /// Readiness components after `process`, in the order of OPS-18.
    pub readiness: Vec<ReadinessComponent>,
    pub metrics: MetricsRenderer,
    pub data_routes: DataPortRoutes,
    pub operational_routes: OperationalRoutes,
}
