//! Config becomes running parts here, and only here (architecture.md, rule 3): the store of
//! `database.type`, every destination and every source, each built by one exhaustive `match`
//! on its configured kind, so a new connector shows the compiler each place that must handle
//! it. This is the only module that names a concrete store, source or destination. Parts this
//! build cannot run yet are refused at start, naming their keys.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use queuebox_amqp::{
    RabbitmqDestination, RabbitmqDestinationSettings, RabbitmqSource, RabbitmqSourceSettings,
};
use queuebox_config::{
    Config, DatabaseType, Destination as DestinationConfig, DestinationAuth, DestinationKind,
    SourceKind,
};
use queuebox_core::{Destination, Secret, Source};
use queuebox_engine::outbox::{OutboxTransforms, Route};
use queuebox_engine::pipeline::{KeyExpression, SourceExpressions, SourcePipeline};
use queuebox_engine::transform::{Limits, OnError, Stage, StageTransform};
use queuebox_http::admin::{AdminApi, AdminRouting};
use queuebox_http::destination::{
    HttpAuth, HttpDestination, HttpDestinationSettings, LogDestination, LogDestinationSettings,
    SharedHttp,
};
use queuebox_http::source::HttpSourceRoute;
use queuebox_nats::{NatsDestination, NatsSource};
use queuebox_store::Store;
use queuebox_telemetry::Metrics;
use queuebox_transform::{Expression, Pool};

use crate::commands::store_error;
use crate::startup::StartError;

/// Every "not built in this build" check, in the order `run` meets them (OPS-23 steps 5, 6 and
/// the store of step 8). `check` and `run` both call this one function (issue 14 item 3), so a
/// part that lands only removes its entry from `check_runnable`, `check_admin` or
/// `check_database_type`.
pub fn check_buildable(config: &Config) -> Result<(), StartError> {
    check_runnable(config)?;
    check_database_type(config)
}

/// Whether the outbox parts are built to run (a `log` destination opens its file) or only to
/// be checked by `queuebox check`, which writes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    Run,
    Check,
}

/// OPS-23 step 5, first half: each configured destination, source and transform must have
/// something in this build that runs it. `check` and `run` refuse alike a configuration that
/// this build would silently ignore.
pub fn check_runnable(config: &Config) -> Result<(), StartError> {
    let mut gaps = Vec::new();
    for (name, destination) in &config.destinations {
        let runnable = match destination.kind {
            DestinationKind::Http(_)
            | DestinationKind::Log(_)
            | DestinationKind::Rabbitmq(_)
            | DestinationKind::Nats(_) => true,
            DestinationKind::Kafka(_) => cfg!(feature = "kafka"),
        };
        if !runnable {
            gaps.push(format!(
                "'{name}' of type '{}' (destinations.{name})",
                destination.kind.type_name()
            ));
        }
    }
    for (name, source) in &config.sources {
        let runnable = match source.kind {
            SourceKind::Http(_) | SourceKind::Rabbitmq(_) | SourceKind::Nats(_) => true,
            SourceKind::Kafka(_) => cfg!(feature = "kafka"),
        };
        if !runnable {
            gaps.push(format!(
                "'{name}' of type '{}' (sources.{name})",
                source.kind.type_name()
            ));
        }
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

/// The admin API (operations.md §6) over the store, with the routes of the configuration for
/// the `destination` filter; ADM-2 is checked again here, before any admin route exists.
pub fn build_admin(
    config: &Config,
    store: &Arc<dyn Store>,
    outbox_wake: &Arc<tokio::sync::Notify>,
    relay_wake: &Arc<tokio::sync::Notify>,
) -> Result<AdminApi, StartError> {
    let operator: Arc<dyn queuebox_store::OperatorStore> = store.clone();
    AdminApi::new(
        &config.admin,
        operator,
        AdminRouting::from_config(config),
        transform_pool()?,
        outbox_wake.clone(),
        relay_wake.clone(),
    )
    .map_err(|err| StartError::new("enable the admin API", err))
}

/// The store of `database.type` must exist in this build; found before any connection, by
/// `check` as by `run`.
pub fn check_database_type(config: &Config) -> Result<(), StartError> {
    match config.database.db_type {
        DatabaseType::Postgresql | DatabaseType::Sqlite | DatabaseType::Mysql => Ok(()),
        DatabaseType::Sqlserver => Err(StartError::new(
            "connect to the database",
            format!(
                "database.type {} has no store in this build of QueueBox; use postgresql, sqlite or mysql",
                config.database.db_type.as_str()
            ),
        )),
    }
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

pub fn build_outbox(
    config: &Config,
    metrics: &Metrics,
    build: Build,
) -> Result<OutboxParts, StartError> {
    let failed = |err| StartError::new("build the destinations", err);
    let shared_http = SharedHttp::new(metrics.clone());
    let mut destinations: BTreeMap<&str, Arc<dyn Destination>> = BTreeMap::new();
    let mut outbound_urls = Vec::new();
    // A route to a RabbitMQ destination carries its own routing key rule (DST-21).
    let mut rabbitmq: BTreeMap<&str, Arc<RabbitmqDestination>> = BTreeMap::new();
    // So does a route to a Kafka destination (its record key, DST-21).
    #[cfg(feature = "kafka")]
    let mut kafka: BTreeMap<&str, Arc<queuebox_kafka::KafkaDestination>> = BTreeMap::new();
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
                    // `check` opens no file; its other rules are the same.
                    file: log.file.clone().filter(|_| build == Build::Run),
                    static_headers: static_headers(destination),
                })
                .map_err(failed)?,
            ),
            DestinationKind::Rabbitmq(_) => {
                let settings =
                    RabbitmqDestinationSettings::from_config(destination).ok_or_else(|| {
                        StartError::new(
                            "build the destinations",
                            format!("'{name}' is not a rabbitmq destination"),
                        )
                    })?;
                let built = RabbitmqDestination::new(settings)
                    .map_err(|err| StartError::new("build the destinations", err))?;
                rabbitmq.insert(name, Arc::clone(&built));
                built
            }
            DestinationKind::Nats(_) => Arc::new(
                NatsDestination::from_config(destination)
                    .map_err(|err| StartError::new("build the destinations", err))?,
            ),
            #[cfg(feature = "kafka")]
            DestinationKind::Kafka(_) => {
                let settings = queuebox_kafka::KafkaDestinationSettings::from_config(destination)
                    .ok_or_else(|| {
                    StartError::new(
                        "build the destinations",
                        format!("'{name}' is not a kafka destination"),
                    )
                })?;
                let built = queuebox_kafka::KafkaDestination::new(settings)
                    .map_err(|err| StartError::new("build the destinations", err))?;
                kafka.insert(name, Arc::clone(&built));
                built
            }
            // `check_runnable` has refused this before we get here (a build without `kafka`).
            #[cfg(not(feature = "kafka"))]
            DestinationKind::Kafka(_) => {
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
        .enumerate()
        .map(|(index, route)| {
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
            let destination = match rabbitmq.get(route.destination.as_str()) {
                Some(broker) => broker.for_route(route),
                None => destination,
            };
            #[cfg(feature = "kafka")]
            let destination = match kafka.get(route.destination.as_str()) {
                Some(broker) => broker.for_route(route),
                None => destination,
            };
            let transforms = OutboxTransforms {
                route: route
                    .transform
                    .as_ref()
                    .map(|t| {
                        stage_transform(
                            Stage::Route,
                            format!("routes[{index}].transform"),
                            t,
                            metrics,
                        )
                    })
                    .transpose()?,
                destination: config.destinations[route.destination.as_str()]
                    .transform
                    .as_ref()
                    .map(|t| {
                        stage_transform(
                            Stage::Destination,
                            format!("destinations.{}.transform", route.destination),
                            t,
                            metrics,
                        )
                    })
                    .transpose()?,
            };
            Ok(Route {
                pattern: route.topic_pattern.clone(),
                destination,
                transforms,
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

pub fn build_sources(config: &Config, metrics: &Metrics) -> Result<SourceParts, StartError> {
    let failed = |err: String| StartError::new("build the sources", err);
    let mut parts = SourceParts {
        pipelines: Vec::new(),
        http_routes: Vec::new(),
        brokers: Vec::new(),
    };
    for (name, source) in &config.sources {
        let expressions = source_expressions(name, source, metrics)?;
        let pipeline = SourcePipeline::with_expressions(source.inbox_rules(), expressions)
            .map_err(|err| failed(err.to_string()))?
            .storing_raw_body(source.store_raw_body)
            .with_relay_topic(source.topic.clone());
        parts.pipelines.push(pipeline);
        match &source.kind {
            SourceKind::Http(_) => parts
                .http_routes
                .push(HttpSourceRoute::from_config(source).map_err(|err| failed(err.to_string()))?),
            SourceKind::Rabbitmq(_) => {
                let settings = RabbitmqSourceSettings::from_config(source)
                    .ok_or_else(|| failed(format!("'{name}' is not a rabbitmq source")))?;
                parts.brokers.push(Box::new(RabbitmqSource::new(settings)));
            }
            SourceKind::Nats(_) => parts
                .brokers
                .push(Box::new(NatsSource::from_config(source))),
            #[cfg(feature = "kafka")]
            SourceKind::Kafka(_) => {
                let settings = queuebox_kafka::KafkaSourceSettings::from_config(source)
                    .ok_or_else(|| failed(format!("'{name}' is not a kafka source")))?;
                parts
                    .brokers
                    .push(Box::new(queuebox_kafka::KafkaSource::new(settings)));
            }
            // `check_runnable` has refused this before we get here (a build without `kafka`).
            #[cfg(not(feature = "kafka"))]
            SourceKind::Kafka(_) => {
                return Err(failed(format!(
                    "this build of QueueBox has no consumer for '{name}' of type '{}'",
                    source.kind.type_name()
                )));
            }
        }
    }
    Ok(parts)
}

/// The one evaluation pool of the process (TRF-4), started with the first expression.
fn transform_pool() -> Result<Pool, StartError> {
    static POOL: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
    if let Some(pool) = POOL.get() {
        return Ok(pool.clone());
    }
    let pool = Pool::per_core().map_err(|err| {
        StartError::new(
            "build the transforms",
            format!("the transform threads could not start: {err}"),
        )
    })?;
    Ok(POOL.get_or_init(|| pool).clone())
}

/// A transform block, compiled (TRF-3). The loader compiled it already (TRF-39), so an error
/// here is a defect, reported with the path.
fn stage_transform(
    stage: Stage,
    path: String,
    block: &queuebox_config::TransformConfig,
    metrics: &Metrics,
) -> Result<StageTransform, StartError> {
    let on_error = match block.on_error {
        queuebox_config::OnError::Fail => OnError::Fail,
        queuebox_config::OnError::Skip => OnError::Skip,
        queuebox_config::OnError::Dead => OnError::Dead,
    };
    let limits = Limits {
        timeout: Duration::from_millis(block.timeout_ms),
        max_depth: block.max_depth as usize,
    };
    StageTransform::compile(
        stage,
        path.clone(),
        &block.expression,
        limits,
        on_error,
        transform_pool()?,
        metrics.clone(),
    )
    .map_err(|err| {
        StartError::new(
            "build the transforms",
            format!("{path}.expression does not compile: {err}"),
        )
    })
}

/// A source's key expressions and transform (TRF-25, INB-47).
fn source_expressions(
    name: &str,
    source: &queuebox_config::Source,
    metrics: &Metrics,
) -> Result<SourceExpressions, StartError> {
    let key = |key: &str, text: &Option<String>| -> Result<Option<KeyExpression>, StartError> {
        let Some(text) = text else { return Ok(None) };
        let path = format!("sources.{name}.{key}");
        let expression = Expression::compile(text, Limits::KEY_EXPRESSION).map_err(|err| {
            StartError::new(
                "build the transforms",
                format!("{path} does not compile: {err}"),
            )
        })?;
        Ok(Some(KeyExpression { path, expression }))
    };
    let mut expressions = SourceExpressions {
        idempotency_key: key(
            "idempotencyKeyExpression",
            &source.idempotency_key_expression,
        )?,
        aggregate_id: key("aggregateIdExpression", &source.aggregate_id_expression)?,
        event_type: key("eventTypeExpression", &source.event_type_expression)?,
        transform: source
            .transform
            .as_ref()
            .map(|t| {
                stage_transform(
                    Stage::Source,
                    format!("sources.{name}.transform"),
                    t,
                    metrics,
                )
            })
            .transpose()?,
        pool: None,
    };
    if expressions.idempotency_key.is_some()
        || expressions.aggregate_id.is_some()
        || expressions.event_type.is_some()
    {
        expressions.pool = Some(transform_pool()?);
    }
    Ok(expressions)
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
