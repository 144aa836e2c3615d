//! Where the database is and how to use it, by `database.type` (config.md §6): the typed
//! connection targets and pool, timeout and migrate settings that the config crate produces and
//! the stores consume. Values only, no I/O.

use std::path::PathBuf;

use crate::{Secret, TableLayout};

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

/// MySQL / MariaDB `ssl-mode` (CFG-40), any letter case in the URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MysqlSslMode {
    Disabled,
    #[default]
    Preferred,
    Required,
    VerifyCa,
    VerifyIdentity,
}

/// Everything needed to open a MySQL or MariaDB connection, from `mysql://`, `jdbc:mysql://`
/// or `jdbc:mariadb://` (same shape), with `database.username` / `database.password` on top.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlTarget {
    pub host: String,
    /// Default 3306.
    pub port: u16,
    /// Required in the URL's path.
    pub database: String,
    pub user: String,
    pub password: Secret,
    pub ssl_mode: MysqlSslMode,
    /// `ssl-ca`: a file with trusted CA certificates.
    pub ssl_ca: Option<String>,
}

/// Where a SQLite database lives (CFG-42).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqliteTarget {
    /// `sqlite://PATH` / `jdbc:sqlite:PATH`: the file, resolved against the working directory
    /// (CFG-7); created when it does not exist, in a folder that must exist.
    File(PathBuf),
    /// `sqlite::memory:` / `jdbc:sqlite::memory:`: in the process only, empty at every start.
    Memory,
}

/// Where the database is, by type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatabaseTarget {
    Postgres(PostgresTarget),
    Mysql(MysqlTarget),
    Sqlite(SqliteTarget),
    /// SQL Server: a validated URL kept whole (masked whenever it is printed); no store of this
    /// build opens one.
    Sqlserver {
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
    /// `host:port` for messages such as "did not answer within" (the file path for SQLite).
    pub host_port: String,
    pub pool_size: u32,
    pub connection_timeout_ms: u64,
    pub startup_timeout_ms: u64,
    pub migrate: bool,
    pub layout: TableLayout,
}
