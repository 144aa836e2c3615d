//! `queuebox run`: the start-up sequence (operations.md OPS-23), the supervisor that owns every
//! background task, and the shutdown phases (OPS-26..30).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use queuebox_config::{CaptureMode, Config};
use queuebox_core::redact::redact;
use queuebox_engine::metrics::{DbPoolStatus, Metrics};
use queuebox_engine::outbox::{OutboxPoller, PollerHealth};
use queuebox_http::destination::check_private_addresses;
use queuebox_http::server::{
    self, ComponentDown, DataPortRoutes, Endpoints, OperationalRoutes, ReadinessComponent,
    ServerHandle, ServerSettings,
};
use queuebox_store::{MigrateRequest, SchemaStore};
use queuebox_store_postgres::PgStore;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::commands::{connect, fail, load, runtime, store_error};
use crate::logging;
use crate::signals::Signals;
use crate::startup::{self, StartError};
use crate::wiring;

/// Readiness bound of the `database` component (OPS-18).
const DATABASE_CHECK: Duration = Duration::from_millis(2000);
/// How often the pool gauges are refreshed; a scrape never queries anything (MET-6).
const POOL_GAUGE_INTERVAL: Duration = Duration::from_secs(1);

/// Exit 0 after a clean shutdown, 1 when the start fails or the shutdown is forced.
pub fn run(config: Option<PathBuf>) -> u8 {
    let env = startup::environment();
    let log = logging::init(&env);
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(err) => return fail(&err),
    };
    let code = runtime.block_on(async move {
        let config = match load(config, env, &log) {
            Ok(config) => config,
            Err(err) => return fail(&err),
        };
        match start(config).await {
            Ok(service) => service.run_until_stopped().await,
            Err(err) => fail(&err),
        }
    });
    // OPS-30: nothing of QueueBox outlives the sequence; blocking tasks are not waited for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

/// Everything `run` started, in the order the shutdown stops it.
struct Service {
    config: Config,
    store: Arc<PgStore>,
    servers: ServerHandle,
    signals: Signals,
    cancel_poller: CancellationToken,
    tasks: JoinSet<(&'static str, Result<(), String>)>,
}

/// OPS-23 steps 5–14.
async fn start(config: Config) -> Result<Service, StartError> {
    wiring::check_runnable(&config)?;
    let metrics = Metrics::new(env!("CARGO_PKG_VERSION"));
    let parts = wiring::build_outbox(&config, &metrics)?;
    if config.http.block_private_addresses {
        check_private_addresses(&parts.outbound_urls)
            .await
            .map_err(|err| StartError::new("check the destination addresses", err))?;
    }
    let store = Arc::new(start_database(&config).await?);
    // Step 11: the signal handlers exist before any background task starts.
    let signals =
        Signals::install().map_err(|err| StartError::new("install the signal handlers", err))?;

    let mut tasks = JoinSet::new();
    let cancel_poller = CancellationToken::new();
    let wake = Arc::new(Notify::new());
    let poller = OutboxPoller::new(
        store.clone(),
        parts.routes,
        wiring::outbox_settings(&config),
        metrics.clone(),
        wake,
    );
    let poller_health = poller.health();
    let poller_cancel = cancel_poller.clone();
    tasks.spawn(async move {
        let result = poller.run(poller_cancel).await;
        ("the outbox poller", result.map_err(|err| err.to_string()))
    });
    let gauges_cancel = cancel_poller.clone();
    let gauges_store = store.clone();
    let gauges_metrics = metrics.clone();
    tasks.spawn(async move {
        pool_gauges(&gauges_store, &gauges_metrics, gauges_cancel).await;
        ("the pool gauges", Ok(()))
    });

    let endpoints = Endpoints {
        readiness: readiness(&store, poller_health),
        metrics: Arc::new(move || metrics.render()),
        data_routes: DataPortRoutes::new(),
        operational_routes: OperationalRoutes::new(),
    };
    let settings = ServerSettings::new(config.server.http_port, config.server.management_port);
    let servers = server::start(settings, endpoints).await.map_err(|err| {
        cancel_poller.cancel();
        StartError::new(format!("listen on port {}", err.port), err)
    })?;
    servers.mark_started();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        http_port = servers.data_addr().port(),
        management_port = servers.management_addr().map(|a| a.port()),
        database = config.database.db_type.as_str(),
        database_address = config.database.host_port.as_str(),
        components = "outbox-poller",
        "QueueBox started"
    );
    Ok(Service {
        config,
        store,
        servers,
        signals,
        cancel_poller,
        tasks,
    })
}

/// Steps 8–10: connect (waiting up to `database.startupTimeoutMs`), migrate when
/// `database.migrate` is true, then the schema guard, always.
pub async fn start_database(config: &Config) -> Result<PgStore, StartError> {
    let store = connect(config).await?;
    let notify = config.outbox.capture_mode == CaptureMode::Notify;
    if config.database.migrate {
        let request = MigrateRequest {
            baseline: None,
            notify,
        };
        store.migrate(&request).await.map_err(store_error)?;
    }
    store.check_schema(notify).await.map_err(store_error)?;
    Ok(store)
}

/// OPS-18: `database` and `outbox-poller` after `process` (which the server adds).
fn readiness(store: &Arc<PgStore>, poller: PollerHealth) -> Vec<ReadinessComponent> {
    let store = store.clone();
    vec![
        ReadinessComponent::new("database", move || {
            let store = store.clone();
            async move {
                match tokio::time::timeout(DATABASE_CHECK, store.ping()).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(_)) | Err(_) => Err(ComponentDown::Failed),
                }
            }
        }),
        ReadinessComponent::new("outbox-poller", move || {
            let running = poller.is_running();
            async move {
                if running {
                    Ok(())
                } else {
                    Err(ComponentDown::Stopped)
                }
            }
        }),
    ]
}

async fn pool_gauges(store: &PgStore, metrics: &Metrics, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(POOL_GAUGE_INTERVAL);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {
                let status = store.pool().status();
                let idle = status.available as u64;
                metrics.set_db_pool(DbPoolStatus {
                    active: (status.size as u64).saturating_sub(idle),
                    idle,
                    max: status.max_size as u64,
                    pending: status.waiting as u64,
                });
            }
        }
    }
}

impl Service {
    /// Waits for SIGTERM/SIGINT, or for a background task that ends by itself (a failure), then
    /// runs the shutdown. A second signal, or a shutdown longer than the OPS-29 bound, forces
    /// the exit with status 1; rows in flight then wait for their lease to expire.
    async fn run_until_stopped(mut self) -> u8 {
        let failed = tokio::select! {
            () = self.signals.recv() => None,
            Some(joined) = self.tasks.join_next() => Some(match joined {
                Ok((task, Err(reason))) => format!("{task} failed: {reason}"),
                Ok((task, Ok(()))) => format!("{task} stopped by itself"),
                Err(err) => format!("a task panicked: {err}"),
            }),
        };
        if let Some(reason) = &failed {
            tracing::error!("{}", StartError::new("keep running", reason));
        }
        tracing::info!("Shutting down QueueBox...");
        // OPS-29: 5 s data drain + 30 s broker sources + outbox.shutdownTimeoutMs + 15 s.
        let bound =
            Duration::from_secs(50) + Duration::from_millis(self.config.outbox.shutdown_timeout_ms);
        let mut signals = self.signals;
        let servers = self.servers;
        let mut tasks = self.tasks;
        let cancel_poller = self.cancel_poller;
        let store = self.store;
        let shutdown = async move {
            servers.begin_shutdown(); // phase 1
            servers.drain_data_port().await; // phase 2
            cancel_poller.cancel(); // phase 5: the poller releases, waits, abandons
            while let Some(joined) = tasks.join_next().await {
                match joined {
                    // OPS-27: each step is guarded on its own; the sequence continues.
                    Ok((task, Err(reason))) => tracing::warn!(
                        "Stopping {task} failed. The shutdown continues. Reason: {}",
                        redact(&reason)
                    ),
                    Ok(_) => {}
                    Err(err) => tracing::warn!(
                        "Stopping a task failed. The shutdown continues. Reason: {}",
                        redact(&err.to_string())
                    ),
                }
            }
            servers.stop_management_port().await; // phase 8
            store.pool().close(); // phase 9: the pool closes last (OPS-28)
        };
        tokio::select! {
            () = shutdown => {
                tracing::info!("Shutdown complete");
                if failed.is_some() { 1 } else { 0 }
            }
            () = signals.recv() => {
                tracing::error!("The shutdown took too long and was forced.");
                1
            }
            () = tokio::time::sleep(bound) => {
                tracing::error!("The shutdown took too long and was forced.");
                1
            }
        }
    }
}
