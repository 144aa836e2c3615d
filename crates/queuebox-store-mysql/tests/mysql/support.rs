//! Test helpers: a private database per test, a `DatabaseConfig` that points into it, and an
//! admin pool on it.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Pool};
use queuebox_core::database::{
    DatabaseConfig, DatabaseTarget, DatabaseType, MysqlSslMode, MysqlTarget,
};
use queuebox_core::{Secret, TableLayout};
use queuebox_store_mysql::MysqlStore;

/// The test server: `QUEUEBOX_TEST_MYSQL_URL`, or MariaDB on loopback as root.
pub fn base_url() -> String {
    std::env::var("QUEUEBOX_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/".to_owned())
}

fn base_opts() -> Opts {
    Opts::from_url(&base_url()).expect("QUEUEBOX_TEST_MYSQL_URL is a mysql:// URL")
}

/// The test server as a target in `database`.
pub fn target(database: &str) -> MysqlTarget {
    let opts = base_opts();
    MysqlTarget {
        host: opts.ip_or_hostname().to_owned(),
        port: opts.tcp_port(),
        database: database.to_owned(),
        user: opts.user().unwrap_or("root").to_owned(),
        password: Secret::new(opts.pass().unwrap_or_default()),
        ssl_mode: MysqlSslMode::Disabled,
        ssl_ca: None,
    }
}

pub fn config_for(
    target: MysqlTarget,
    layout: TableLayout,
    startup_timeout_ms: u64,
) -> DatabaseConfig {
    DatabaseConfig {
        db_type: DatabaseType::Mysql,
        masked_url: format!(
            "mysql://{}:***@{}:{}/{}",
            target.user, target.host, target.port, target.database
        ),
        host_port: format!("{}:{}", target.host, target.port),
        target: DatabaseTarget::Mysql(target),
        pool_size: 4,
        connection_timeout_ms: 5_000,
        startup_timeout_ms,
        migrate: true,
        layout,
    }
}

/// Connection options into one test database, UTC and READ COMMITTED like the store's.
pub fn db_opts(database: &str) -> OptsBuilder {
    OptsBuilder::from_opts(base_opts())
        .db_name(Some(database))
        .client_found_rows(true)
        .init(vec![
            "SET time_zone = '+00:00'",
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
        ])
}

/// A database of one test, with an admin pool on it.
pub struct TestDb {
    pub database: String,
    pub admin: Pool,
}

impl TestDb {
    pub async fn new(name: &str) -> Self {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let short: String = name.chars().take(40).collect();
        let database = format!("qb_mysql_{short}_{}", &suffix[..8]);
        let mut server = Conn::new(base_opts())
            .await
            .expect("the test MariaDB server answers (QUEUEBOX_TEST_MYSQL_URL)");
        server
            .query_drop(format!(
                "CREATE DATABASE `{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
            ))
            .await
            .expect("create the test database");
        let _ = server.disconnect().await;
        Self {
            admin: Pool::new(db_opts(&database)),
            database,
        }
    }

    pub fn config(&self, layout: TableLayout, startup_timeout_ms: u64) -> DatabaseConfig {
        config_for(target(&self.database), layout, startup_timeout_ms)
    }

    pub async fn store_with(&self, layout: TableLayout) -> MysqlStore {
        MysqlStore::connect(&self.config(layout, 30_000))
            .await
            .expect("connect to the test database")
    }

    pub async fn store(&self) -> MysqlStore {
        self.store_with(TableLayout::default()).await
    }

    pub async fn conn(&self) -> Conn {
        self.admin.get_conn().await.expect("an admin connection")
    }

    pub async fn exec(&self, sql: &str) {
        self.conn()
            .await
            .query_drop(sql)
            .await
            .unwrap_or_else(|e| panic!("test set-up `{sql}` failed: {e}"));
    }

    pub async fn drop(self) {
        if let Ok(mut conn) = self.admin.get_conn().await {
            let _ = conn
                .query_drop(format!("DROP DATABASE IF EXISTS `{}`", self.database))
                .await;
        }
        let _ = self.admin.disconnect().await;
    }
}
