//! Issue 15 item 4 and the start-up schema guard (schema.md SCH-60): a source with
//! `storeRawBody: true` needs the `raw_body` column of migration version 4. With
//! `database.migrate: false` and a table without it, `queuebox run` refuses at start, naming the
//! column, the source and the statement that adds it, on PostgreSQL, SQLite and MySQL; instead
//! of failing at the first insert of a webhook. The same database without such a source starts.

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use support::process::{Scratch, log_messages, queuebox};
use support::service::{Service, migrate, migrate_database};

/// The `sources:` section: one HTTP source, keeping its raw body or not.
fn sources(store_raw_body: bool) -> String {
    format!(
        "sources:\n  hooks:\n    path: /hooks\n    idempotencyKeyPath: $.id\n    consumption: pull\n    \
         storeRawBody: {store_raw_body}\n"
    )
}

fn config(database: &str, store_raw_body: bool) -> String {
    format!(
        "{database}  migrate: false\nserver:\n  httpPort: 0\ninbox:\n  relay:\n    enabled: false\n{}",
        sources(store_raw_body)
    )
}

/// Runs `queuebox run` and expects it to end by itself within 60 s: its exit code and log
/// messages. A process still running then (the guard let it start) is killed and fails the test.
fn run_expecting_exit(label: &str, config: &str) -> (Option<i32>, Vec<String>) {
    let scratch = Scratch::new(label);
    let file = scratch.write("queuebox.yml", config);
    let mut child = queuebox(scratch.path())
        .args(["run", "--config"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "queuebox run started although no raw_body column exists:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    // The JSON log lines' messages (quotes unescaped), and any plain line as it is.
    let mut messages = log_messages(&stderr);
    messages.push(stderr);
    (output.status.code(), messages)
}

/// The refusal names the table, the column, the source and the fix.
fn assert_refused(code: Option<i32>, messages: &[String], statement: &str) {
    assert_ne!(code, Some(0), "{messages:#?}");
    let text = messages.join("\n");
    assert!(
        text.contains("has no column raw_body")
            && text.contains("storeRawBody: true")
            && text.contains("hooks")
            && text.contains(statement),
        "the refusal names the column, the source and the statement:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn postgresql_without_raw_body_refuses_a_store_raw_body_source_at_start() {
    let schema = support::pg::TestSchema::create("raw_body_guard").await;
    migrate(&schema.queuebox_url());
    schema
        .client()
        .batch_execute("ALTER TABLE inbox DROP COLUMN raw_body")
        .await
        .unwrap();
    let database = format!("database:\n  url: \"{}\"\n", schema.queuebox_url());

    let (code, messages) = run_expecting_exit("raw-body-guard-pg", &config(&database, true));
    assert_refused(
        code,
        &messages,
        "ALTER TABLE \"inbox\" ADD COLUMN raw_body BYTEA NULL;",
    );

    // No source keeps its raw body: the column is not needed, and QueueBox starts.
    let service = Service::start("raw-body-guard-pg-ok", &config(&database, false));
    service.stop();

    // The statement of the message is the fix.
    schema
        .client()
        .batch_execute("ALTER TABLE \"inbox\" ADD COLUMN raw_body BYTEA NULL;")
        .await
        .unwrap();
    let service = Service::start("raw-body-guard-pg-fixed", &config(&database, true));
    service.stop();
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_without_raw_body_refuses_a_store_raw_body_source_at_start() {
    let scratch = Scratch::new("raw-body-guard-sqlite");
    let path = scratch.path().join("queuebox.db");
    let database = format!(
        "database:\n  type: sqlite\n  url: \"sqlite://{}\"\n",
        path.display()
    );
    migrate_database(&database);
    let sqlite = rusqlite::Connection::open(&path).unwrap();
    sqlite
        .execute_batch("ALTER TABLE inbox DROP COLUMN raw_body")
        .unwrap();
    drop(sqlite);

    let (code, messages) = run_expecting_exit("raw-body-guard-sqlite", &config(&database, true));
    assert_refused(
        code,
        &messages,
        "ALTER TABLE \"inbox\" ADD COLUMN raw_body BLOB NULL;",
    );

    let service = Service::start("raw-body-guard-sqlite-ok", &config(&database, false));
    service.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn mysql_without_raw_body_refuses_a_store_raw_body_source_at_start() {
    let db = support::mysql::TestDatabase::create("raw_body_guard").await;
    let database = format!(
        "database:\n  type: mysql\n  url: \"{}\"\n",
        db.queuebox_url()
    );
    migrate_database(&database);
    db.conn()
        .await
        .query_drop("ALTER TABLE inbox DROP COLUMN raw_body")
        .await
        .unwrap();

    let (code, messages) = run_expecting_exit("raw-body-guard-mysql", &config(&database, true));
    assert_refused(
        code,
        &messages,
        "ALTER TABLE `inbox` ADD COLUMN raw_body LONGBLOB NULL;",
    );

    let service = Service::start("raw-body-guard-mysql-ok", &config(&database, false));
    service.stop();
    db.drop().await;
}
