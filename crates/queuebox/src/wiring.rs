//! Config becomes running parts here, and only here (architecture.md, rule 3). Every `match`
//! on a configured kind is exhaustive, so a new connector shows the compiler each place that
//! must handle it. Parts this build cannot run yet are refused at start, naming their keys.

use queuebox_config::{Config, DatabaseType, DestinationKind, SourceKind};

use crate::startup::StartError;

/// OPS-23 step 5: each configured destination, source and transform must have something in this
/// build that runs it. `check` accepts them all (they are valid by the spec); `run` refuses a
/// configuration that this build would silently ignore.
pub fn check_runnable(config: &Config) -> Result<(), StartError> {
    let mut gaps = Vec::new();
    for (name, destination) in &config.destinations {
        let runnable = match destination.kind {
            DestinationKind::Http(_) | DestinationKind::Log(_) => false,
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
            SourceKind::Http(_) => false,
            SourceKind::Rabbitmq(_) | SourceKind::Kafka(_) | SourceKind::Nats(_) => false,
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
    Err(StartError::new(
        "build the destinations",
        format!(
            "this build of QueueBox cannot run {}. Remove them from the configuration, or use a build that runs them.",
            gaps.join(", ")
        ),
    ))
}

/// Only the PostgreSQL store exists in this build.
pub fn require_postgres(config: &Config) -> Result<(), StartError> {
    match config.database.db_type {
        DatabaseType::Postgresql => Ok(()),
        DatabaseType::Sqlite | DatabaseType::Mysql | DatabaseType::Sqlserver => {
            Err(StartError::new(
                "connect to the database",
                format!(
                    "database.type {} has no store in this build of QueueBox; use postgresql",
                    config.database.db_type.as_str()
                ),
            ))
        }
    }
}
