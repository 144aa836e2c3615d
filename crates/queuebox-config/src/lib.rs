//! YAML + environment -> a validated QueueBox `Config`, with every error at once (config.md).
//! No connector or database dependency: `queuebox check` needs only this crate.

mod model_database;

pub use model_database::{DatabaseConfig, DatabaseTarget, DatabaseType, PgSslMode, PostgresTarget};
