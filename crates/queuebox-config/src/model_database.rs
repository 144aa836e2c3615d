//! The validated `database` section (config.md §6): what the stores need to connect and which
//! tables and columns to use.

use queuebox_core::{Secret, TableLayout};

/// `database.type` (CFG-37).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatabaseType {
    Postgresql,
    Sqlserver,
    Mysql,
    Sqlite,
}

impl DatabaseType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Postgresql => "postgresql",
            Self::Sqlserver => "sqlserver",
            Self::Mysql => "mysql",
            Self::Sqlite => "sqlite",
        }
    }
}

/// PostgreSQL `sslmode` (CFG-40).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PgSslMode {
    Disable,
    #[default]
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// Everything needed to open a PostgreSQL connection, parsed from `database.url` (native or
/// `jdbc:` form) with `database.username` / `database.password` applied on top (they win).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresTarget {
    pub host: String,
    pub port: u16,
    /// `None`: the server's default (the user's name).
    pub database: Option<String>,
    pub user: String,
    pub password: Secret,
    pub sslmode: PgSslMode,
    pub sslrootcert: Option<String>,
    /// Default `queuebox` (CFG-40, SCH-8).
    pub application_name: String,
    /// `connect_timeout` in seconds, when the URL sets it; otherwise `connection_timeout_ms`.
    pub connect_timeout_s: Option<u32>,
    /// The `options` parameter, such as `-c search_path=app`.
    pub options: Option<String>,
}

/// Where the database is, by type. Stores for SQL Server, MySQL and SQLite come later; their
/// URLs are still parsed and validated now, so `check` can accept them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseTarget {
    Postgres(PostgresTarget),
    /// A validated URL of another type, kept whole (masked whenever it is printed).
    Other {
        url: Secret,
    },
}

/// The validated `database` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseConfig {
    pub db_type: DatabaseType,
    pub target: DatabaseTarget,
    /// `url` with its password replaced by `***` (CFG-23): the only form ever printed.
    pub masked_url: String,
    /// `host:port` for messages such as "did not answer within".
    pub host_port: String,
    pub pool_size: u32,
    pub connection_timeout_ms: u64,
    pub startup_timeout_ms: u64,
    pub migrate: bool,
    pub layout: TableLayout,
}
