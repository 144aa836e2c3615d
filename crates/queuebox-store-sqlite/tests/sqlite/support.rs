//! Test helpers: a temporary folder per test holding the database file, a `DatabaseConfig`
//! that points at it, and an admin connection of the test's own.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use queuebox_core::TableLayout;
use queuebox_core::database::{DatabaseConfig, DatabaseTarget, DatabaseType, SqliteTarget};
use queuebox_store_sqlite::SqliteStore;
use rusqlite::Connection;

/// `strftime` of the fixed time form (schema.md SCH-3).
pub const NOW: &str = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

pub fn config_for(target: SqliteTarget, layout: TableLayout, busy_ms: u64) -> DatabaseConfig {
    let shown = match &target {
        SqliteTarget::File(path) => path.display().to_string(),
        SqliteTarget::Memory => ":memory:".to_owned(),
    };
    DatabaseConfig {
        db_type: DatabaseType::Sqlite,
        masked_url: format!("sqlite://{shown}"),
        host_port: shown,
        target: DatabaseTarget::Sqlite(target),
        pool_size: 1,
        connection_timeout_ms: busy_ms,
        startup_timeout_ms: 5_000,
        migrate: true,
        layout,
    }
}

/// A fresh folder under the system's temporary folder.
pub fn temp_folder(name: &str) -> PathBuf {
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let dir = std::env::temp_dir()
        .join("queuebox-sqlite-tests")
        .join(format!("{name}-{}", &suffix[..8]));
    std::fs::create_dir_all(&dir).expect("create the test folder");
    dir
}

/// Another connection to the file, as an application or an operator opens it.
pub fn connection(file: &Path) -> Connection {
    let conn = Connection::open(file).expect("open the test database");
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .expect("busy timeout");
    conn
}

/// The database file of one test, in a folder of its own, and the test's admin connection.
pub struct TestDb {
    pub dir: PathBuf,
    pub file: PathBuf,
    pub admin: Mutex<Connection>,
}

impl TestDb {
    pub fn new(name: &str) -> Self {
        let dir = temp_folder(name);
        let file = dir.join("queuebox.db");
        let admin = connection(&file);
        admin
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .expect("WAL");
        Self {
            dir,
            file,
            admin: Mutex::new(admin),
        }
    }

    pub fn target(&self) -> SqliteTarget {
        SqliteTarget::File(self.file.clone())
    }

    pub async fn store_with(&self, layout: TableLayout, busy_ms: u64) -> SqliteStore {
        SqliteStore::connect(&config_for(self.target(), layout, busy_ms))
            .await
            .expect("open the test database")
    }

    /// Runs statements on the admin connection.
    pub fn exec(&self, sql: &str) {
        self.admin
            .lock()
            .expect("admin connection")
            .execute_batch(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    pub fn remove(self) {
        drop(self.admin);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
