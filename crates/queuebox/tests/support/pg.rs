//! A PostgreSQL schema of its own for one test, so tests run in parallel and leave nothing behind.

use std::sync::atomic::{AtomicU32, Ordering};

/// The server the tests use; override with `QUEUEBOX_TEST_PG_URL`.
pub fn server_url() -> String {
    std::env::var("QUEUEBOX_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

pub struct TestSchema {
    pub name: String,
    client: tokio_postgres::Client,
}

impl TestSchema {
    /// Creates `qb_<label>_<pid>_<n>` and returns a client whose search_path is that schema.
    pub async fn create(label: &str) -> TestSchema {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "qb_{label}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let (client, connection) = tokio_postgres::connect(&server_url(), tokio_postgres::NoTls)
            .await
            .expect("the test PostgreSQL server is up (scripts/services.sh)");
        tokio::spawn(connection);
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}; SET search_path = {name}"
            ))
            .await
            .expect("create the test schema");
        TestSchema { name, client }
    }

    pub fn client(&self) -> &tokio_postgres::Client {
        &self.client
    }

    /// A QueueBox database URL that lands in this schema (SCH-2: first schema of search_path).
    pub fn queuebox_url(&self) -> String {
        let base = server_url();
        let separator = if base.contains('?') { '&' } else { '?' };
        format!(
            "{base}{separator}sslmode=disable&options=-c%20search_path%3D{}",
            self.name
        )
    }

    pub async fn drop(self) {
        let _ = self
            .client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name))
            .await;
    }
}
