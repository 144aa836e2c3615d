//! `queuebox run`: the start-up sequence (operations.md OPS-23) and the shutdown phases
//! (OPS-26..30). The parts come from `wiring`; the supervisor owns the tasks.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use queuebox_config::{CaptureMode, Config};
use queuebox_core::{ComponentDown, Destination, Intake, ReadinessComponent};
use queuebox_engine::gauges::InboxGauges;
use queuebox_engine::intake::InboxIntake;
use queuebox_engine::intake::writer::{IntakeWriter, StoreWait, WriterSettings};
use queuebox_engine::outbox::OutboxPoller;
use queuebox_engine::relay::Relay;
use queuebox_engine::retention::Retention;
use queuebox_http::destination::check_private_addresses;
use queuebox_http::server::{
    self, DataPortRoutes, Endpoints, OperationalRoutes, ServerHandle, ServerSettings,
};
use queuebox_http::source::{HttpSourceSettings, source_routes};
use queuebox_store::{MigrateRequest, SchemaNeeds, Store};
use queuebox_telemetry::{DbPoolStatus, Metrics};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::commands::{fail, load, runtime, store_error};
use crate::logging;
use crate::settings;
use crate::signals::Signals;
use crate::startup::{self, StartError};
use crate::supervisor::{Ended, TaskKind, Tasks};
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
    store: Arc<dyn Store>,
    destinations: Vec<Arc<dyn Destination>>,
    servers: ServerHandle,
    signals: Signals,
    tasks: Tasks,
    ended: mpsc::UnboundedReceiver<Ended>,
}

/// OPS-23 steps 5–14.
async fn start(config: Config) -> Result<Service, StartError> {
    wiring::check_buildable(&config)?;
    let metrics = Metrics::new(env!("CARGO_PKG_VERSION"));
    let outbox = wiring::build_outbox(&config, &metrics, wiring::Build::Run)?;
    let mut sources = wiring::build_sources(&config, &metrics)?;
    if config.http.block_private_addresses {
        check_private_addresses(&outbox.outbound_urls)
            .await
            .map_err(|err| StartError::new("check the destination addresses", err))?;
    }
    // Issue 14 item 4: the ports are bound before any database work, so a port in use stops
    // the start at once, naming its key; they are served at step 13.
    let mut settings = ServerSettings::new(config.server.http_port, config.server.management_port);
    settings.max_body_bytes = Some(config.inbox.max_body_bytes);
    settings.limits.max_connections =
        usize::try_from(config.server.max_connections).unwrap_or(usize::MAX);
    settings.metrics = Some(metrics.clone());
    let ports = server::bind_ports(&settings).await.map_err(|err| {
        StartError::new(
            format!("listen on port {}", err.port),
            format!(
                "{err}. Set {} to a free port, or stop the process that holds this one.",
                err.key
            ),
        )
    })?;
    let store = start_database(&config).await?;
    // Step 11: the signal handlers exist before any background task starts.
    let signals =
        Signals::install().map_err(|err| StartError::new("install the signal handlers", err))?;

    // INB-74: each broker source checks what it can before any task starts. A broker it cannot
    // reach is no error (the source keeps trying while it runs); a missing queue or stream the
    // broker reports stops the start with its remedy, before anything was started.
    for source in &mut sources.brokers {
        source.prepare().await.map_err(|err| {
            StartError::new(
                format!("start the consumer of source {}", err.source_name),
                err.reason,
            )
        })?;
    }

    // Step 12, in the order of OPS-23; the shutdown stops them in the order of OPS-26.
    let (mut tasks, ended) = Tasks::new();
    let outbox_wake = Arc::new(Notify::new());
    let relay_wake = Arc::new(Notify::new());
    let store_wait = StoreWait::default();
    let storage_wait = Duration::from_millis(config.inbox.storage_wait_ms);
    let mut readiness = vec![database_check(&store, store_wait.clone(), storage_wait)];
    // OUT-57: the notify capture listener, one connection outside the pool, beside polling.
    // The configuration allows notify only with PostgreSQL (CFG-46).
    if config.outbox.capture_mode == CaptureMode::Notify {
        let listener = queuebox_store_postgres::OutboxListener::new(&config.database)
            .map_err(|err| StartError::new("set up outbox.capture.mode notify", err))?;
        let health = listener.health();
        readiness.push(
            ReadinessComponent::flag("outbox-capture", ComponentDown::Failed, move || {
                health.is_listening()
            })
            .advisory(),
        );
        let wake = outbox_wake.clone();
        tasks.spawn(
            TaskKind::CaptureListener,
            "the outbox capture listener",
            |cancel| async move {
                listener.run(wake, cancel.cancelled_owned()).await;
                Ok(())
            },
        );
    }
    for destination in &outbox.destinations {
        readiness.extend(destination.readiness());
    }

    // Issue 15 item 6: the destinations' rate limits and circuit breakers.
    let guards = settings::destination_guards(&config, &metrics);
    readiness.extend(guards.values().filter_map(|g| g.readiness()));
    let poller = OutboxPoller::new(
        store.clone(),
        outbox.routes,
        settings::outbox_settings(&config),
        metrics.clone(),
        outbox_wake.clone(),
    )
    .with_guards(&guards);
    let poller_health = poller.health();
    readiness.push(running_check("outbox-poller", move || {
        poller_health.is_running()
    }));
    tasks.spawn(
        TaskKind::OutboxPoller,
        "the outbox poller",
        |cancel| async move { poller.run(cancel).await.map_err(|err| err.to_string()) },
    );

    let retention_settings = settings::retention_settings(&config.retention);
    if retention_settings.is_enabled() {
        let retention = Retention::new(store.clone(), retention_settings, metrics.clone());
        let health = retention.health();
        readiness.push(running_check("retention", move || health.is_running()));
        tasks.spawn(TaskKind::Retention, "retention", |cancel| async move {
            retention.run(cancel).await.map_err(|err| err.to_string())
        });
    }

    if config.inbox.relay.enabled {
        let relay = Relay::new(
            store.clone(),
            settings::relay_sources(&config),
            settings::relay_settings(&config),
            metrics.clone(),
            relay_wake.clone(),
            outbox_wake.clone(),
        );
        let health = relay.health();
        readiness.push(running_check("inbox-relay", move || health.is_running()));
        tasks.spawn(
            TaskKind::InboxRelay,
            "the inbox relay",
            |cancel| async move { relay.run(cancel).await.map_err(|err| err.to_string()) },
        );
    }

    // Every source submits to one intake: its pipeline per source, and one writer. The writer
    // runs while some source can hand it a message; with no source there is none, and a
    // writer with no caller would end at once.
    let writer = IntakeWriter::new(
        store.clone(),
        WriterSettings::default(),
        metrics.clone(),
        relay_wake.clone(),
    )
    .reporting_to(store_wait);
    let intake: Arc<dyn Intake> = Arc::new(InboxIntake::new(
        sources.pipelines,
        writer.handle(),
        metrics.clone(),
    ));
    if !config.sources.is_empty() {
        tasks.spawn(TaskKind::IntakeWriter, "the intake", |cancel| async move {
            writer.run(cancel).await.map_err(|err| err.to_string())
        });
    }
    for source in sources.brokers {
        readiness.extend(source.readiness());
        let label = format!("the consumer of source {}", source.name());
        let intake = Arc::clone(&intake);
        tasks.spawn(TaskKind::BrokerSource, label, |cancel| async move {
            source
                .run(intake, cancel)
                .await
                .map_err(|err| err.to_string())
        });
    }

    // The inbox operator gauges (issue 14 items 10-12), one series per configured source.
    let inbox_gauges = InboxGauges::new(
        store.clone(),
        metrics.clone(),
        config.sources.values().map(|source| source.name.clone()),
        settings::relay_settings(&config).pending_gauge_interval,
    );
    tasks.spawn(
        TaskKind::PoolGauges,
        "the inbox gauges",
        |cancel| async move {
            inbox_gauges.run(cancel).await;
            Ok(())
        },
    );

    let gauges_store = store.clone();
    let gauges_metrics = metrics.clone();
    tasks.spawn(
        TaskKind::PoolGauges,
        "the pool gauges",
        |cancel| async move {
            pool_gauges(&*gauges_store, &gauges_metrics, cancel).await;
            Ok(())
        },
    );

    // Step 13: the ports.
    let routes = source_routes(
        sources.http_routes,
        HttpSourceSettings::of_inbox(&config.inbox, metrics.clone()),
        intake,
    );
    let renderer = metrics.clone();
    let mut operational_routes = OperationalRoutes::new();
    if config.admin.enabled {
        let api = wiring::build_admin(&config, &store, &outbox_wake, &relay_wake)?;
        operational_routes = operational_routes
            .merge(api.routes())
            .merge(queuebox_http::console::console_routes());
    }
    let endpoints = Endpoints {
        readiness,
        metrics: Arc::new(move || renderer.render()),
        data_routes: DataPortRoutes::new().merge_sources(routes),
        operational_routes,
    };
    let servers = server::serve(ports, settings, endpoints);
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
        destinations: outbox.destinations,
        servers,
        signals,
        tasks,
        ended,
    })
}

/// OPS-26 phase 9: the destinations' connections, then the database pool, last (OPS-28).
async fn close_resources(destinations: &[Arc<dyn Destination>], store: &dyn Store) {
    for destination in destinations {
        destination.close().await;
    }
    store.close().await;
}

fn component_names(config: &Config) -> String {
    let mut names = vec!["outbox-poller"];
    if config.outbox.capture_mode == CaptureMode::Notify {
        names.push("outbox-capture");
    }
    if !config.sources.is_empty() {
        names.push("intake");
    }
    if config.inbox.relay.enabled {
        names.push("inbox-relay");
    }
    if settings::retention_settings(&config.retention).is_enabled() {
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
    store
        .check_schema(&schema_needs(config))
        .await
        .map_err(store_error)?;
    Ok(store)
}

/// What this configuration needs of the schema beyond the mapped columns: the notify trigger,
/// and `raw_body` when a source keeps its raw body (so a `migrate: false` database without it
/// is refused at start, not at a source's first insert).
pub(crate) fn schema_needs(config: &Config) -> SchemaNeeds {
    SchemaNeeds {
        notify: config.outbox.capture_mode == CaptureMode::Notify,
        raw_body_sources: config
            .sources
            .values()
            .filter(|s| s.store_raw_body)
            .map(|s| s.name.clone())
            .collect(),
    }
}

/// OPS-18 `database`: a pooled connection and `SELECT 1` within 2000 ms; and (issue 17
/// defect 7) `stuck` while the intake's current insert has waited longer than
/// `inbox.storageWaitMs`, which `SELECT 1` alone does not see.
fn database_check(
    store: &Arc<dyn Store>,
    intake: StoreWait,
    storage_wait: Duration,
) -> ReadinessComponent {
    let store = store.clone();
    ReadinessComponent::new("database", move || {
        let store = store.clone();
        let stuck = intake
            .waiting_for()
            .is_some_and(|waited| waited > storage_wait);
        async move {
            if stuck {
                return Err(ComponentDown::Stuck);
            }
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
    ReadinessComponent::flag(name, ComponentDown::Stopped, running)
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
            destinations,
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
            tasks.stop(TaskKind::BrokerSource).await; // phase 3, all together (INB-75)
            // The messages the sources and the data port submitted are committed before the
            // pool closes (OPS-28).
            tasks.stop(TaskKind::IntakeWriter).await;
            tasks.stop(TaskKind::CaptureListener).await; // phase 4
            tasks.stop(TaskKind::OutboxPoller).await; // phase 5: release, wait, abandon
            tasks.stop(TaskKind::InboxRelay).await; // phase 6
            tasks.stop(TaskKind::Retention).await; // phase 7
            tasks.stop_all().await;
            servers.stop_management_port().await; // phase 8
            close_resources(&destinations, &*store).await; // phase 9: the pool last (OPS-28)
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
