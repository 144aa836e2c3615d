//! `check` and `migrate`, and the start-up steps they share with `run` (operations.md OPS-23,
//! OPS-24). `run` itself is in `run.rs`; `version` is answered in `main`.

use std::path::PathBuf;

use queuebox_config::{CaptureMode, Config, format_warnings};
use queuebox_store::{MigrateRequest, StoreError};

use crate::logging::{self, LogHandle};
use crate::startup::{self, StartError};
use crate::wiring;

/// `queuebox check` (CFG-32): no connection, no log lines; the result on stdout, problems on
/// stderr. After the configuration rules it runs every check `run` runs before it touches the
/// network (issue 14 item 3): the parts this build cannot run, and the building of every
/// source and destination; a failure prints `run`'s line and exits 1.
pub fn check(config: Option<PathBuf>) -> u8 {
    let options = startup::load_options(config, startup::environment());
    match queuebox_config::load(&options) {
        Ok(loaded) => {
            if let Err(err) = check_parts(&loaded.config) {
                eprintln!("{err}");
                return 1;
            }
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

/// `run`'s steps 5–6 without side effects: nothing connects, no file opens.
fn check_parts(config: &Config) -> Result<(), StartError> {
    wiring::check_buildable(config)?;
    // Some parts build their clients on the runtime; none of them connects here.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| StartError::new("start the runtime", err))?;
    runtime.block_on(async {
        let metrics = queuebox_telemetry::Metrics::new(env!("CARGO_PKG_VERSION"));
        wiring::build_outbox(config, &metrics, wiring::Build::Check)?;
        wiring::build_sources(config, &metrics)?;
        Ok(())
    })
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
        let store = wiring::connect_store(&config).await?;
        let request = MigrateRequest {
            baseline,
            notify: config.outbox.capture_mode == CaptureMode::Notify,
        };
        store.migrate(&request).await.map_err(store_error)?;
        store
            .check_schema(&crate::run::schema_needs(&config))
            .await
            .map_err(store_error)?;
        store.close().await;
        Ok::<(), StartError>(())
    });
    match result {
        Ok(()) => 0,
        Err(err) => fail(&err),
    }
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, StartError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|err| StartError::new("start the runtime", err))
}

pub(crate) fn fail(err: &StartError) -> u8 {
    if !err.is_reported() {
        tracing::error!("{err}");
    }
    1
}

/// Steps 3–4, then the configured log format and level. A configuration that does not load is
/// printed as `check` prints it, as text on stderr whatever the log format (issue 14 item 2):
/// a JSON line would fold its list of problems into one string of `\n` escapes.
pub(crate) fn load(
    config: Option<PathBuf>,
    env: Vec<(String, String)>,
    log: &LogHandle,
) -> Result<Config, StartError> {
    let loaded = match queuebox_config::load(&startup::load_options(config, env)) {
        Ok(loaded) => loaded,
        Err(err) => {
            eprintln!("{err}");
            return Err(StartError::reported());
        }
    };
    log.set(loaded.config.log.format, loaded.config.log.level);
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    Ok(loaded.config)
}

/// Store errors are already redacted and phrased for this line (OPS-25); redacting again would
/// damage the SQL statements the schema guard prints.
pub(crate) fn store_error(err: StoreError) -> StartError {
    StartError {
        action: err.action().phrase().to_owned(),
        reason: err.to_string(),
    }
}
