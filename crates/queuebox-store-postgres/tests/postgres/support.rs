//! Test helpers: a private schema per test, a `DatabaseConfig` that points into it, and a log
//! capture for the SCH-57 messages.

use std::io::Write;
use std::sync::{Arc, Mutex};

use queuebox_core::database::{
    DatabaseConfig, DatabaseTarget, DatabaseType, PgSslMode, PostgresTarget,
};
use queuebox_core::{Secret, TableLayout};
use queuebox_store_postgres::PgStore;
use tokio_postgres::{Client, NoTls};

pub const LOCK_KEY: i64 = queuebox_store_postgres::MIGRATION_LOCK_KEY;

pub fn base_url() -> String {
    std::env::var("QUEUEBOX_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The test server as a target, with `options` pointing at `schema`.
pub fn target(schema: &str) -> PostgresTarget {
    let url = url::Url::parse(&base_url()).expect("QUEUEBOX_TEST_PG_URL is a URL");
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    PostgresTarget {
        host: url.host_str().unwrap_or("127.0.0.1").to_owned(),
        port: url.port().unwrap_or(5432),
        database: Some(url.path().trim_start_matches('/').to_owned()).filter(|d| !d.is_empty()),
        user: Some(decode(url.username()))
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "postgres".to_owned()),
        password: Secret::new(url.password().map(decode).unwrap_or_default()),
        sslmode: PgSslMode::Disable,
        sslrootcert: None,
        application_name: "queuebox".to_owned(),
        connect_timeout_s: None,
        options: Some(format!("-c search_path={schema}")),
    }
}

pub fn config_for(
    target: PostgresTarget,
    layout: TableLayout,
    startup_timeout_ms: u64,
) -> DatabaseConfig {
    DatabaseConfig {
        db_type: DatabaseType::Postgresql,
        masked_url: format!(
            "postgres://{}:***@{}:{}/",
            target.user, target.host, target.port
        ),
        host_port: format!("{}:{}", target.host, target.port),
        target: DatabaseTarget::Postgres(target),
        pool_size: 4,
        connection_timeout_ms: 5_000,
        startup_timeout_ms,
        migrate: true,
        layout,
    }
}

/// A schema of one test, with an admin connection whose search_path is that schema.
pub struct TestDb {
    pub schema: String,
    pub admin: Client,
}

impl TestDb {
    pub async fn new(name: &str) -> Self {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let schema = format!("qb_{name}_{}", &suffix[..8]);
        let (admin, connection) = tokio_postgres::connect(&base_url(), NoTls)
            .await
            .expect("the test PostgreSQL server answers (QUEUEBOX_TEST_PG_URL)");
        tokio::spawn(connection);
        admin
            .batch_execute(&format!(
                "CREATE SCHEMA \"{schema}\"; SET search_path TO \"{schema}\""
            ))
            .await
            .expect("create the test schema");
        Self { schema, admin }
    }

    pub fn config(&self, layout: TableLayout, startup_timeout_ms: u64) -> DatabaseConfig {
        config_for(target(&self.schema), layout, startup_timeout_ms)
    }

    pub async fn store_with(&self, layout: TableLayout) -> PgStore {
        PgStore::connect(&self.config(layout, 30_000))
            .await
            .expect("connect to the test database")
    }

    pub async fn store(&self) -> PgStore {
        self.store_with(TableLayout::default()).await
    }

    pub async fn exec(&self, sql: &str) {
        self.admin
            .batch_execute(sql)
            .await
            .unwrap_or_else(|e| panic!("test set-up `{sql}` failed: {e}"));
    }

    /// Whether a relation of this name exists in the test schema.
    pub async fn has_relation(&self, name: &str) -> bool {
        self.admin
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND c.relname = $2)",
                &[&self.schema, &name],
            )
            .await
            .expect("catalog query")
            .get(0)
    }

    /// (version, kind) of every history row.
    pub async fn history(&self) -> Vec<(i32, String)> {
        self.admin
            .query(
                "SELECT version, kind FROM queuebox_schema_history ORDER BY version",
                &[],
            )
            .await
            .expect("history query")
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }

    pub async fn drop(self) {
        let _ = self
            .admin
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ))
            .await;
    }
}

/// Captures the log lines written while it is alive, on this thread (use a current-thread
/// runtime: `#[tokio::test]`).
pub struct LogCapture {
    buffer: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

struct SharedWriter(Arc<Mutex<Vec<u8>>>);

impl Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogCapture {
    pub fn start() -> Self {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || SharedWriter(writer.clone()))
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        Self {
            buffer,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    pub fn text(&self) -> String {
        let bytes = self.buffer.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Asserts a line at this level holding exactly this message.
    pub fn assert_line(&self, level: &str, message: &str) {
        let text = self.text();
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(level) && l.ends_with(message)),
            "no {level} line `{message}` in:\n{text}"
        );
    }
}
