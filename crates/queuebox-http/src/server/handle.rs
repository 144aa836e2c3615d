//! Starting both ports (OPS-23 step 13, CFG-36) and the handle that runs their part of the
//! shutdown (OPS-26 phases 1, 2 and 8).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use queuebox_telemetry::Port;
use tokio::net::TcpListener;

use super::connections::ConnectionBound;
use super::health::{ProcessState, Readiness};
use super::listener::{Listener, http1_builder};
use super::routes::{data_router, management_router, operational_router};
use super::service::{PortService, PortState};
use super::{Endpoints, ServerSettings};

pub use super::listener::DrainOutcome;

/// A port could not be bound. `port` is the configured one, for the start's failure line
/// (`QueueBox could not listen on port <n>`, OPS-25); the message is the system's reason.
#[derive(Debug, thiserror::Error)]
#[error("{address}: {source}")]
pub struct BindError {
    pub port: u16,
    /// The key that sets the port: `server.httpPort` or `server.managementPort`.
    pub key: &'static str,
    pub address: SocketAddr,
    #[source]
    pub source: io::Error,
}

/// The running listeners. Dropping it stops accepting and cuts the connections; a clean stop
/// goes through [`ServerHandle::drain_data_port`] and [`ServerHandle::stop_management_port`].
pub struct ServerHandle {
    process: Arc<ProcessState>,
    data: Listener,
    management: Option<Listener>,
}

/// Both ports, bound and not yet served: the binary binds them before any database work, so a
/// port in use stops the start at once (issue 14 item 4). Connections wait in the backlog
/// until [`serve`].
pub struct BoundPorts {
    management: Option<(TcpListener, SocketAddr)>,
    data: (TcpListener, SocketAddr),
}

impl BoundPorts {
    /// The data port's bound address (with the port the system chose for 0).
    pub fn data_addr(&self) -> SocketAddr {
        self.data.1
    }
}

/// Binds the management port (when configured), then the data port, and logs one info line
/// per port with the address bound. Nothing is served yet.
pub async fn bind_ports(settings: &ServerSettings) -> Result<BoundPorts, BindError> {
    let management = match settings.management_port {
        Some(port) => Some(bind(settings, port, "management", "server.managementPort").await?),
        None => None,
    };
    let data = bind(settings, settings.http_port, "data", "server.httpPort").await?;
    Ok(BoundPorts { management, data })
}

/// Binds the management port (when configured), then the data port, logs one info line per
/// port with the address bound, and serves both. Nothing is served unless both bind.
///
/// Readiness reports `process` down until [`ServerHandle::mark_started`].
pub async fn start(
    settings: ServerSettings,
    endpoints: Endpoints,
) -> Result<ServerHandle, BindError> {
    let bound = bind_ports(&settings).await?;
    Ok(serve(bound, settings, endpoints))
}

/// Serves ports bound by [`bind_ports`].
pub fn serve(bound: BoundPorts, settings: ServerSettings, endpoints: Endpoints) -> ServerHandle {
    let process = Arc::new(ProcessState::default());
    let source_paths = endpoints.data_routes.source_paths.clone();
    let readiness = Arc::new(Readiness::new(Arc::clone(&process), endpoints.readiness));
    let operational =
        operational_router(readiness, endpoints.metrics, endpoints.operational_routes);
    let (data, management) = match settings.management_port {
        Some(_) => (
            data_router(endpoints.data_routes, None),
            Some(management_router(operational)),
        ),
        None => (data_router(endpoints.data_routes, Some(operational)), None),
    };

    let BoundPorts {
        management: management_listener,
        data: data_listener,
    } = bound;

    let http = Arc::new(http1_builder(&settings.limits));
    let bound = |label: &'static str, port: Port| {
        let open = settings
            .metrics
            .as_ref()
            .map(|m| m.http_connections(port).clone());
        ConnectionBound::new(settings.limits.max_connections, label, open)
    };
    let management = management
        .zip(management_listener)
        .map(|(router, (listener, addr))| {
            let state = Arc::new(PortState::new("management"));
            // inbox.maxBodyBytes is a data-port rule (OPS-6).
            let service = PortService::new(
                router,
                Arc::clone(&state),
                settings.limits,
                None,
                Vec::new(),
            );
            let bound = bound("management", Port::Management);
            Listener::serve(listener, addr, service, state, Arc::clone(&http), bound)
        });
    let (listener, addr) = data_listener;
    let state = Arc::new(PortState::new("data"));
    let service = PortService::new(
        data,
        Arc::clone(&state),
        settings.limits,
        settings.max_body_bytes,
        source_paths,
    );
    let data = Listener::serve(
        listener,
        addr,
        service,
        state,
        http,
        bound("data", Port::Data),
    );
    ServerHandle {
        process,
        data,
        management,
    }
}

async fn bind(
    settings: &ServerSettings,
    port: u16,
    label: &str,
    key: &'static str,
) -> Result<(TcpListener, SocketAddr), BindError> {
    let address = SocketAddr::new(settings.bind_address, port);
    let failed = |source| BindError {
        port,
        key,
        address,
        source,
    };
    let listener = TcpListener::bind(address).await.map_err(failed)?;
    // With port 0 the system chose one: report the real address (CFG-36).
    let bound = listener.local_addr().map_err(failed)?;
    tracing::info!(listener = label, address = %bound, "Listening on {bound} ({label} port)");
    Ok((listener, bound))
}

impl ServerHandle {
    /// The data port's bound address (with the port the system chose for 0).
    pub fn data_addr(&self) -> SocketAddr {
        self.data.addr()
    }

    pub fn management_addr(&self) -> Option<SocketAddr> {
        self.management.as_ref().map(Listener::addr)
    }

    /// OPS-23 step 14: the start completed, `process` turns up.
    pub fn mark_started(&self) {
        self.process.mark_started();
    }

    /// OPS-26 phase 1: `process` turns down (`stopping`), readiness answers 503.
    pub fn begin_shutdown(&self) {
        self.process.begin_shutdown();
    }

    /// OPS-26 phase 2: every new data-port request gets 503, the ones in a handler finish
    /// (checked every 25 ms, at most 5000 ms, a warn line on timeout), then the data listener
    /// and its connections close. Calling it again does nothing more.
    pub async fn drain_data_port(&self) -> DrainOutcome {
        self.data.drain_and_close().await
    }

    /// OPS-26 phase 8: the same drain rule on the management port; without one, nothing to do.
    pub async fn stop_management_port(&self) -> DrainOutcome {
        match &self.management {
            Some(management) => management.drain_and_close().await,
            None => DrainOutcome::default(),
        }
    }
}
