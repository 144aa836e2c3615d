//! `queuebox run`: the start-up sequence (operations.md OPS-23), the supervisor that owns every
//! background task, and the shutdown phases (OPS-26..30).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use queuebox_config::{CaptureMode, Config};
use queuebox_core::redact::redact;
use queuebox_engine::intake::{Intake, IntakeError, IntakeHandle, IntakeSettings};
use queuebox_engine::metrics::{DbPoolStatus, Metrics};
use queuebox_engine::outbox::OutboxPoller;
use queuebox_engine::relay::Relay;
use queuebox_engine::retention::{Retention, RetentionSettings};
use queuebox_http::destination::check_private_addresses;
use queuebox_http::server::{
    self, ComponentDown, DataPortRoutes, Endpoints, OperationalRoutes, ReadinessComponent,
    ServerHandle, ServerSettings,
};
use queuebox_http::source::{
    HttpSourceRoute, IntakeRefused, IntakeSettings as RouteSettings, IntakeSink, source_routes,
};
use queuebox_store::{InsertOutcome, MigrateRequest, NewInboxRow, Store};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::commands::{fail, load, runtime, store_error};
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

/// One background task with its own stop signal, so the shutdown can stop them in order.
struct Task {
    name: &'static str,
    cancel: CancellationToken,
    handle: JoinHandle<()>,
}

/// Spawns background tasks; each reports to `ended` when it returns, so the supervisor notices
/// a task that stops by itself.
struct Tasks {
    started: Vec<Task>,
    ended: mpsc::UnboundedSender<(&'static str, Result<(), String>)>,
}

impl Tasks {
    fn spawn<F>(&mut self, name: &'static str, run: impl FnOnce(CancellationToken) -> F)
    where
        F: Future<Output = Result<(), String>> + Send + 'static,
    {
        let cancel = CancellationToken::new();
        let future = run(cancel.clone());
        let ended = self.ended.clone();
        let handle = tokio::spawn(async move {
            let result = future.await;
            let _ = ended.send((name, result));
        });
        self.started.push(Task {
            name,
            cancel,
            handle,
        });
    }

    /// Stops the named task and waits for it; each step is guarded on its own (OPS-27).
    async fn stop(&mut self, name: &str) {
        let Some(index) = self.started.iter().position(|t| t.name == name) else {
            return;
        };
        let task = self.started.remove(index);
        task.cancel.cancel();
        if let Err(err) = task.handle.await {
            tracing::warn!(
                "Stopping {} failed. The shutdown continues. Reason: {}",
                task.name,
                redact(&err.to_string())
            );
        }
    }

    async fn stop_all(&mut self) {
        while let Some(task) = self.started.first() {
            let name = task.name;
            self.stop(name).await;
        }
    }
}

/// Everything `run` started, in the order the shutdown stops it.
struct Service {
    config: Config,
    store: Arc<dyn Store>,
    servers: ServerHandle,
    signals: Signals,
    tasks: Tasks,
    ended: mpsc::UnboundedReceiver<(&'static str, Result<(), String>)>,
}

/// Adapts the engine's write-combining batcher to the HTTP source's sink.
struct EngineSink(IntakeHandle);

#[async_trait::async_trait]
impl IntakeSink for EngineSink {
    async fn store(&self, row: NewInboxRow) -> Result<InsertOutcome, IntakeRefused> {
        self.0.store(row).await.map_err(|err| match err {
            IntakeError::StorageFailed { .. } => IntakeRefused::StorageFailed,
            IntakeError::ShuttingDown => IntakeRefused::ShuttingDown,
        })
    }
}

/// The sink of a configuration without HTTP sources: no route exists that could call it.
struct NoIntake;

#[async_trait::async_trait]
impl IntakeSink for NoIntake {
    async fn store(&self, _row: NewInboxRow) -> Result<InsertOutcome, IntakeRefused> {
        Err(IntakeRefused::ShuttingDown)
    }
}

/// OPS-23 steps 5–14.
async fn start(config: Config) -> Result<Service, StartError> {
    wiring::check_runnable(&config)?;
    wiring::check_admin(&config)?;
    let metrics = Metrics::new(env!("CARGO_PKG_VERSION"));
    let parts = wiring::build_outbox(&config, &metrics)?;
    let http_sources = HttpSourceRoute::all(config.sources.values())
        .map_err(|err| StartError::new("build the sources", err))?;
    if config.http.block_private_addresses {
        check_private_addresses(&parts.outbound_urls)
            .await
            .map_err(|err| StartError::new("check the destination addresses", err))?;
    }
    let store = start_database(&config).await?;
    // Step 11: the signal handlers exist before any background task starts.
    let signals =
        Signals::install().map_err(|err| StartError::new("install the signal handlers", err))?;

    // Step 12, in the order of OPS-23; the shutdown stops them in the order of OPS-26.
    let (ended_tx, ended) = mpsc::unbounded_channel();
    let mut tasks = Tasks {
        started: Vec::new(),
        ended: ended_tx,
    };
    let outbox_wake = Arc::new(Notify::new());
    let relay_wake = Arc::new(Notify::new());
    let mut readiness = vec![database_check(&store)];

    let poller = OutboxPoller::new(
        store.clone(),
        parts.routes,
        wiring::outbox_settings(&config),
        metrics.clone(),
        outbox_wake.clone(),
    );
    let poller_health = poller.health();
    readiness.push(running_check("outbox-poller", move || {
        poller_health.is_running()
    }));
    tasks.spawn("the outbox poller", |cancel| async move {
        poller.run(cancel).await.map_err(|err| err.to_string())
    });

    let retention_settings = RetentionSettings::from_config(&config.retention);
    if retention_settings.is_enabled() {
        let retention = Retention::new(store.clone(), retention_settings, metrics.clone());
        let health = retention.health();
        readiness.push(running_check("retention", move || health.is_running()));
        tasks.spawn("retention", |cancel| async move {
            retention.run(cancel).await.map_err(|err| err.to_string())
        });
    }

    if config.inbox.relay.enabled {
        let relay = Relay::new(
            store.clone(),
            wiring::relay_sources(&config),
            wiring::relay_settings(&config),
            metrics.clone(),
            relay_wake.clone(),
            outbox_wake.clone(),
        );
        let health = relay.health();
        readiness.push(running_check("inbox-relay", move || health.is_running()));
        tasks.spawn("the inbox relay", |cancel| async move {
            relay.run(cancel).await.map_err(|err| err.to_string())
        });
    }

    // The intake runs while some route can hand it a row; with no HTTP source there is none,
    // and a writer with no caller would end at once.
    let sink: Arc<dyn IntakeSink> = if http_sources.is_empty() {
        Arc::new(NoIntake)
    } else {
        let intake = Intake::new(
            store.clone(),
            IntakeSettings::default(),
            metrics.clone(),
            relay_wake,
        );
        let sink = Arc::new(EngineSink(intake.handle()));
        tasks.spawn("the intake", |cancel| async move {
            intake.run(cancel).await.map_err(|err| err.to_string())
        });
        sink
    };

    let gauges_store = store.clone();
    let gauges_metrics = metrics.clone();
    tasks.spawn("the pool gauges", |cancel| async move {
        pool_gauges(&*gauges_store, &gauges_metrics, cancel).await;
        Ok(())
    });

    // Step 13: the ports.
    let routes = source_routes(
        http_sources,
        RouteSettings {
            max_body_bytes: config.inbox.max_body_bytes,
        },
        sink,
        metrics.clone(),
    );
    let renderer = metrics.clone();
    let endpoints = Endpoints {
        readiness,
        metrics: Arc::new(move || renderer.render()),
        data_routes: DataPortRoutes::new().merge_sources(routes),
        operational_routes: OperationalRoutes::new(),
    };
    let mut settings = ServerSettings::new(config.server.http_port, config.server.management_port);
    settings.max_body_bytes = Some(config.inbox.max_body_bytes);
    let servers = match server::start(settings, endpoints).await {
        Ok(servers) => servers,
        Err(err) => {
            let failure = StartError::new(format!("listen on port {}", err.port), err);
            tracing::error!("{failure}");
            // OPS-25: a step after the background tasks started runs the shutdown for what it
            // started, so claimed rows go back to pending instead of waiting for their leases.
            tasks.stop_all().await;
            store.close().await;
            tracing::error!("QueueBox did not start. Reason: {}", failure.reason);
            return Err(StartError::reported());
        }
    };
    servers.mark_started();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        httpPort = servers.data_addr().port(),
        managementPort = servers.management_addr().map(|a| a.port()),
        database = config.database.db_type.as_str(),
        databaseAddress = config.database.host_port.as_str(),
        components = component_names(&config).as_str(),
        "QueueBox started"
    );
    Ok(Service {
        config,
        store,
        servers,
        signals,
        tasks,
        ended,
    })
}

fn component_names(config: &Config) -> String {
    let mut names = vec!["outbox-poller"];
    if !config.sources.is_empty() {
        names.push("intake");
    }
    if config.inbox.relay.enabled {
        names.push("inbox-relay");
    }
    if RetentionSettings::from_config(&config.retention).is_enabled() {
        names.push("retention");
    }
    names.join(", ")
}

/// Steps 8–10: connect (waiting up to `database.startupTimeoutMs`), migrate when
/// `database.migrate` is true, then the schema guard, always.
pub async fn start_database(config: &Config) -> Result<Arc<dyn Store>, StartError> {
    let store = wiring::connect_store(config).await?;
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

/// OPS-18 `database`: a pooled connection and `SELECT 1` within 2000 ms.
fn database_check(store: &Arc<dyn Store>) -> ReadinessComponent {
    let store = store.clone();
    ReadinessComponent::new("database", move || {
        let store = store.clone();
        async move {
            match tokio::time::timeout(DATABASE_CHECK, store.ping()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(_)) | Err(_) => Err(ComponentDown::Failed),
            }
        }
    })
}

/// A component that is up while its task runs.
fn running_check(
    name: &'static str,
    running: impl Fn() -> bool + Send + Sync + 'static,
) -> ReadinessComponent {
    ReadinessComponent::new(name, move || {
        let up = running();
        async move {
            if up {
                Ok(())
            } else {
                Err(ComponentDown::Stopped)
            }
        }
    })
}

async fn pool_gauges(store: &dyn Store, metrics: &Metrics, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(POOL_GAUGE_INTERVAL);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => {
                let status = store.pool_status();
                metrics.set_db_pool(DbPoolStatus {
                    active: status.active,
                    idle: status.idle,
                    max: status.max,
                    pending: status.pending,
                });
            }
        }
    }
}

impl Service {
    /// Waits for SIGTERM/SIGINT, or for a background task that ends by itself (a failure), then
    /// runs the shutdown. A second signal, or a shutdown longer than the OPS-29 bound, forces
    /// the exit with status 1; rows in flight then wait for their lease to expire.
    async fn run_until_stopped(self) -> u8 {
        let Service {
            config,
            store,
            servers,
            mut signals,
            mut tasks,
            mut ended,
        } = self;
        let failed = tokio::select! {
            () = signals.recv() => None,
            Some((task, result)) = ended.recv() => Some(match result {
                Err(reason) => format!("{task} failed: {reason}"),
                Ok(()) => format!("{task} stopped by itself"),
            }),
        };
        if let Some(reason) = &failed {
            tracing::error!("{}", StartError::new("keep running", reason));
        }
        tracing::info!("Shutting down QueueBox...");
        // OPS-29: 5 s data drain + 30 s broker sources + outbox.shutdownTimeoutMs + 15 s.
        let bound =
            Duration::from_secs(50) + Duration::from_millis(config.outbox.shutdown_timeout_ms);
        let shutdown = async move {
            servers.begin_shutdown(); // phase 1
            servers.drain_data_port().await; // phase 2: requests in a handler finish
            tasks.stop("the intake").await; // their rows are committed before the pool closes
            tasks.stop("the outbox poller").await; // phase 5: release, wait, abandon
            tasks.stop("the inbox relay").await; // phase 6
            tasks.stop("retention").await; // phase 7
            tasks.stop_all().await;
            servers.stop_management_port().await; // phase 8
            store.close().await; // phase 9: the pool closes last (OPS-28)
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
