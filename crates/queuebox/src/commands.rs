//! The four commands: `check`, `migrate`, `run` (the start-up and shutdown sequences of
//! operations.md §8–9) and their exit codes. `version` is answered in `main`.

use std::path::PathBuf;

use queuebox_config::{CaptureMode, Config, format_warnings};
use queuebox_store::{MigrateRequest, SchemaStore, StoreError};
use queuebox_store_postgres::PgStore;

use crate::logging::{self, LogHandle};
use crate::startup::{self, StartError};
use crate::wiring;

/// `queuebox check` (CFG-32): no connection, no log lines; the result on stdout, problems on
/// stderr.
pub fn check(config: Option<PathBuf>) -> u8 {
    let options = startup::load_options(config, startup::environment());
    match queuebox_config::load(&options) {
        Ok(loaded) => {
            println!("The configuration is valid.");
            if !loaded.warnings.is_empty() {
                eprint!("{}", format_warnings(&loaded.warnings));
            }
            0
        }
        Err(err) => {
            eprintln!("{err}");
            err.check_exit_code() as u8
        }
    }
}

/// `queuebox migrate` (SCH-54): steps 1–4 and 8–10 of the start, then exit.
pub fn migrate(config: Option<PathBuf>, baseline: Option<u32>) -> u8 {
    let env = startup::environment();
    let log = logging::init(&env);
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(err) => return fail(&err),
    };
    let result = runtime.block_on(async {
        let config = load(config, env, &log)?;
        let store = connect(&config).await?;
        let request = MigrateRequest {
            baseline,
            notify: config.outbox.capture_mode == CaptureMode::Notify,
        };
        store.migrate(&request).await.map_err(store_error)?;
        store
            .check_schema(request.notify)
            .await
            .map_err(store_error)?;
        store.pool().close();
        Ok::<(), StartError>(())
    });
    match result {
        Ok(()) => 0,
        Err(err) => fail(&err),
    }
}

/// `queuebox run`: the start-up sequence (OPS-23), then wait for SIGTERM/SIGINT and shut down
/// (OPS-26). Exit 0 after a clean shutdown, 1 when the start fails or the shutdown is forced.
pub fn run(config: Option<PathBuf>) -> u8 {
    let env = startup::environment();
    let log = logging::init(&env);
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(err) => return fail(&err),
    };
    runtime.block_on(async move {
        let config = match load(config, env, &log) {
            Ok(config) => config,
            Err(err) => return fail(&err),
        };
        // Step 5: every configured part must have something in this build that runs it.
        if let Err(err) = wiring::check_runnable(&config) {
            return fail(&err);
        }
        let store = match start_database(&config).await {
            Ok(store) => store,
            Err(err) => return fail(&err),
        };
        // Step 11: the signal handlers exist before any background task starts.
        let mut signals = match Signals::install() {
            Ok(signals) => signals,
            Err(err) => return fail(&StartError::new("install the signal handlers", err)),
        };
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            database = config.database.db_type.as_str(),
            database_address = config.database.host_port.as_str(),
            components = "database",
            "QueueBox started"
        );
        signals.recv().await;
        tracing::info!("Shutting down QueueBox...");
        // OPS-29: a second signal during the shutdown forces the exit at once.
        let shutdown = async {
            store.pool().close();
        };
        tokio::select! {
            () = shutdown => {
                tracing::info!("Shutdown complete");
                0
            }
            () = signals.recv() => {
                tracing::error!("The shutdown took too long and was forced.");
                1
            }
        }
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, StartError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|err| StartError::new("start the runtime", err))
}

fn fail(err: &StartError) -> u8 {
    tracing::error!("{err}");
    1
}

/// Steps 3–4, then the configured log format and level.
fn load(
    config: Option<PathBuf>,
    env: Vec<(String, String)>,
    log: &LogHandle,
) -> Result<Config, StartError> {
    let loaded = startup::load_config(&startup::load_options(config, env))?;
    log.set(loaded.config.log.format, loaded.config.log.level);
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    Ok(loaded.config)
}

/// Steps 8–10: connect (waiting up to `database.startupTimeoutMs`), migrate when
/// `database.migrate` is true, then the schema guard, always.
async fn start_database(config: &Config) -> Result<PgStore, StartError> {
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

async fn connect(config: &Config) -> Result<PgStore, StartError> {
    wiring::require_postgres(config)?;
    PgStore::connect(&config.database)
        .await
        .map_err(store_error)
}

/// Store errors are already redacted and phrased for this line (OPS-25); redacting again would
/// damage the SQL statements the schema guard prints.
fn store_error(err: StoreError) -> StartError {
    StartError {
        action: err.action().phrase().to_owned(),
        reason: err.to_string(),
    }
}

/// SIGTERM and SIGINT, as one stream of shutdown requests.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
