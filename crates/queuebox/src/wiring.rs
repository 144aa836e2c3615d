//! Config becomes running parts here, and only here (architecture.md, rule 3): the store of
//! `database.type`, every destination and every source, each built by one exhaustive `match`
//! on its configured kind, so a new connector shows the compiler each place that must handle
//! it. This is the only module that names a concrete store, source or destination. Parts this
//! build cannot run yet are refused at start, naming their keys.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use queuebox_config::{
    CaptureMode, Config, DatabaseType, Destination as DestinationConfig, DestinationAuth,
    DestinationKind, SourceKind,
};
use queuebox_core::{Destination, Secret, Source};
use queuebox_engine::outbox::Route;
use queuebox_engine::pipeline::SourcePipeline;
use queuebox_http::destination::{
    HttpAuth, HttpDestination, HttpDestinationSettings, LogDestination, LogDestinationSettings,
    SharedHttp,
};
use queuebox_http::source::HttpSourceRoute;
use queuebox_store::Store;
use queuebox_telemetry::Metrics;

use crate::commands::store_error;
use crate::startup::StartError;

/// OPS-23 step 5, first half: each configured destination, source and transform must have
/// something in this build that runs it. `check` accepts them all (they are valid by the spec);
/// `run` refuses a configuration that this build would silently ignore.
pub fn check_runnable(config: &Config) -> Result<(), StartError> {
    let mut gaps = Vec::new();
    for (name, destination) in &config.destinations {
        let runnable = match destination.kind {
            DestinationKind::Http(_) | DestinationKind::Log(_) => true,
            DestinationKind::Rabbitmq(_) | DestinationKind::Kafka(_) | DestinationKind::Nats(_) => {
                false
            }
        };
        if !runnable {
            gaps.push(format!(
                "'{name}' of type '{}' (destinations.{name})",
                destination.kind.type_name()
            ));
        }
        if destination.transform.is_some() {
            gaps.push(format!(
                "the transform of '{name}' (destinations.{name}.transform)"
            ));
        }
    }
    for (index, route) in config.routes.iter().enumerate() {
        if route.transform.is_some() {
            gaps.push(format!(
                "the transform of route {index} (routes[{index}].transform)"
            ));
        }
    }
    for (name, source) in &config.sources {
        let runnable = match source.kind {
            SourceKind::Http(_) => true,
            SourceKind::Rabbitmq(_) | SourceKind::Kafka(_) | SourceKind::Nats(_) => false,
        };
        if !runnable {
            gaps.push(format!(
                "'{name}' of type '{}' (sources.{name})",
                source.kind.type_name()
            ));
        }
        // JSONata arrives with the transforms; until then these keys would be ignored.
        let expressions = [
            (
                "idempotencyKeyExpression",
                source.idempotency_key_expression.is_some(),
            ),
            (
                "aggregateIdExpression",
                source.aggregate_id_expression.is_some(),
            ),
            (
                "eventTypeExpression",
                source.event_type_expression.is_some(),
            ),
            ("transform", source.transform.is_some()),
        ];
        for (key, set) in expressions {
            if set {
                gaps.push(format!("JSONata in sources.{name}.{key}"));
            }
        }
    }
    // Configured features whose engine part comes in a later build.
    if config.outbox.capture_mode == CaptureMode::Notify {
        gaps.push("LISTEN/NOTIFY wake-ups (outbox.capture.mode: notify)".to_owned());
    }
    if gaps.is_empty() {
        return Ok(());
    }
    let (them, it) = if gaps.len() == 1 {
        ("it", "runs it")
    } else {
        ("them", "runs them")
    };
    Err(StartError::new(
        "build the destinations",
        format!(
            "this build of QueueBox cannot run {}. Remove {them} from the configuration, or use a build that {it}.",
            gaps.join(", ")
        ),
    ))
}

/// OPS-23 step 6: the admin API is not part of this build, so `admin.enabled: true` stops the
/// start instead of leaving the operator without the routes they configured.
pub fn check_admin(config: &Config) -> Result<(), StartError> {
    if config.admin.enabled {
        return Err(StartError::new(
            "enable the admin API",
            "this build of QueueBox has no admin API yet; set admin.enabled: false",
        ));
    }
    Ok(())
}

/// OPS-24 step 8: the store of `database.type`, connected. The one place that names a concrete
/// store; everything after it holds the store as `Arc<dyn Store>`.
pub async fn connect_store(config: &Config) -> Result<Arc<dyn Store>, StartError> {
    match config.database.db_type {
        DatabaseType::Postgresql => queuebox_store_postgres::connect(&config.database)
            .await
            .map_err(store_error),
        DatabaseType::Sqlite => queuebox_store_sqlite::connect(&config.database)
            .await
            .map_err(store_error),
        DatabaseType::Mysql => queuebox_store_mysql::connect(&config.database)
            .await
            .map_err(store_error),
        DatabaseType::Sqlserver => Err(StartError::new(
            "connect to the database",
            format!(
                "database.type {} has no store in this build of QueueBox; use postgresql, sqlite or mysql",
                config.database.db_type.as_str()
            ),
        )),
    }
}

/// The destinations and routes of the outbox, built once at start (OPS-23 step 5, second half).
pub struct OutboxParts {
    pub routes: Vec<Route>,
    /// Every destination once, for readiness and for `close` at shutdown (OPS-26 phase 9).
    pub destinations: Vec<Arc<dyn Destination>>,
    /// Every `baseUrl` and `tokenUrl` with its key, for the private-address guard (DST-32).
    pub outbound_urls: Vec<(String, url::Url)>,
}

pub fn build_outbox(config: &Config, metrics: &Metrics) -> Result<OutboxParts, StartError> {
    let failed = |err| StartError::new("build the destinations", err);
    let shared_http = SharedHttp::new(metrics.clone());
    let mut destinations: BTreeMap<&str, Arc<dyn Destination>> = BTreeMap::new();
    let mut outbound_urls = Vec::new();
    for (name, destination) in &config.destinations {
        let built: Arc<dyn Destination> = match &destination.kind {
            DestinationKind::Http(_) => {
                let settings = http_settings(config, destination);
                outbound_urls.extend(settings.private_address_targets());
                Arc::new(HttpDestination::new(settings, &shared_http).map_err(failed)?)
            }
            DestinationKind::Log(log) => Arc::new(
                LogDestination::open(LogDestinationSettings {
                    name: name.clone(),
                    file: log.file.clone(),
                    static_headers: static_headers(destination),
                })
                .map_err(failed)?,
            ),
            // `check_runnable` has refused these before we get here.
            DestinationKind::Rabbitmq(_) | DestinationKind::Kafka(_) | DestinationKind::Nats(_) => {
                return Err(StartError::new(
                    "build the destinations",
                    format!(
                        "this build of QueueBox has no publisher for '{name}' of type '{}'",
                        destination.kind.type_name()
                    ),
                ));
            }
        };
        destinations.insert(name, built);
    }
    let routes = config
        .routes
        .iter()
        .map(|route| {
            // CFG-103 guarantees the name exists; a gap here is a bug, reported, never a panic.
            let destination = destinations
                .get(route.destination.as_str())
                .cloned()
                .ok_or_else(|| {
                    StartError::new(
                        "build the destinations",
                        format!("no destination named {}", route.destination),
                    )
                })?;
            Ok(Route {
                pattern: route.topic_pattern.clone(),
                destination,
            })
        })
        .collect::<Result<Vec<_>, StartError>>()?;
    Ok(OutboxParts {
        routes,
        destinations: destinations.into_values().collect(),
        outbound_urls,
    })
}

/// The sources: one pipeline each for the intake, the route of each `http` source, and one
/// task per broker source (OPS-23 step 12).
pub struct SourceParts {
    pub pipelines: Vec<SourcePipeline>,
    pub http_routes: Vec<HttpSourceRoute>,
    pub brokers: Vec<Box<dyn Source>>,
}

pub fn build_sources(config: &Config) -> Result<SourceParts, StartError> {
    let failed = |err: String| StartError::new("build the sources", err);
    let mut parts = SourceParts {
        pipelines: Vec::new(),
        http_routes: Vec::new(),
        brokers: Vec::new(),
    };
    for (name, source) in &config.sources {
        let pipeline =
            SourcePipeline::new(source.inbox_rules()).map_err(|err| failed(err.to_string()))?;
        parts.pipelines.push(pipeline);
        match &source.kind {
            SourceKind::Http(_) => parts
                .http_routes
                .push(HttpSourceRoute::from_config(source).map_err(|err| failed(err.to_string()))?),
            // `check_runnable` has refused these before we get here.
            SourceKind::Rabbitmq(_) | SourceKind::Kafka(_) | SourceKind::Nats(_) => {
                return Err(failed(format!(
                    "this build of QueueBox has no consumer for '{name}' of type '{}'",
                    source.kind.type_name()
                )));
            }
        }
    }
    Ok(parts)
}

fn static_headers(destination: &DestinationConfig) -> Vec<(String, Secret)> {
    destination
        .headers
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), value.clone()))
        .collect()
}

fn http_settings(config: &Config, destination: &DestinationConfig) -> HttpDestinationSettings {
    let DestinationKind::Http(http) = &destination.kind else {
        unreachable!("http_settings is called for http destinations only")
    };
    let auth = http.auth.as_ref().map(|auth| match auth {
        DestinationAuth::Oauth2 {
            client_id,
            client_secret,
            token_url,
            scope,
            extra_params,
        } => HttpAuth::OAuth2 {
            client_id: client_id.clone(),
            client_secret: client_secret.clone(),
            token_url: token_url.clone(),
            scope: scope.clone(),
            extra_params: extra_params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        },
        DestinationAuth::Basic { username, password } => HttpAuth::Basic {
            username: username.clone(),
            password: password.clone(),
        },
        DestinationAuth::Header {
            header_name,
            header_value,
        } => HttpAuth::Header {
            name: header_name.as_str().to_owned(),
            value: header_value.clone(),
        },
    });
    HttpDestinationSettings {
        name: destination.name.clone(),
        base_url: http.base_url.clone(),
        path: http.path.clone(),
        timeout: Duration::from_millis(http.timeout_ms),
        static_headers: static_headers(destination),
        auth,
        signing: http
            .signing
            .as_ref()
            .map(|signing| signing.secrets.clone())
            .unwrap_or_default(),
        max_error_body_bytes: config.http.max_error_body_bytes as usize,
    }
}
