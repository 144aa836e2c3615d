//! A MariaDB / MySQL database of its own for one test (`qb_mysql_…`), so tests run in parallel
//! and leave nothing behind.

use std::sync::atomic::{AtomicU32, Ordering};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Pool};

/// The server the tests use; override with `QUEUEBOX_TEST_MYSQL_URL`.
pub fn server_url() -> String {
    std::env::var("QUEUEBOX_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/".to_owned())
}

pub struct TestDatabase {
    pub name: String,
    pool: Pool,
}

impl TestDatabase {
    /// Creates `qb_mysql_<label>_<pid>_<n>` and a pool on it.
    pub async fn create(label: &str) -> TestDatabase {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "qb_mysql_{label}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let opts = Opts::from_url(&server_url()).expect("QUEUEBOX_TEST_MYSQL_URL is a URL");
        let mut server = Conn::new(opts.clone())
            .await
            .expect("the test MariaDB server is up (scripts/services.sh mariadb)");
        server
            .query_drop(format!(
                "DROP DATABASE IF EXISTS `{name}`; CREATE DATABASE `{name}`"
            ))
            .await
            .expect("create the test database");
        let _ = server.disconnect().await;
        let pool = Pool::new(
            OptsBuilder::from_opts(opts)
                .db_name(Some(name.clone()))
                .init(vec!["SET time_zone = '+00:00'"]),
        );
        TestDatabase { name, pool }
    }

    pub async fn conn(&self) -> Conn {
        self.pool.get_conn().await.expect("a test connection")
    }

    /// A QueueBox database URL into this database.
    pub fn queuebox_url(&self) -> String {
        let base = server_url();
        format!("{}/{}", base.trim_end_matches('/'), self.name)
    }

    /// The one integer of `sql`.
    pub async fn count(&self, sql: &str) -> i64 {
        self.conn()
            .await
            .query_first(sql)
            .await
            .expect("count query")
            .unwrap_or(0)
    }

    pub async fn drop(self) {
        if let Ok(mut conn) = self.pool.get_conn().await {
            let _ = conn
                .query_drop(format!("DROP DATABASE IF EXISTS `{}`", self.name))
                .await;
        }
        let _ = self.pool.disconnect().await;
    }
}
