//! `queuebox migrate` on PostgreSQL: history, baseline, refusals, lock, warnings, atomicity,
//! idempotent statements and the notify objects (schema.md SCH-25, SCH-45..59).

use std::time::{Duration, Instant};

use queuebox_core::{SqlIdentifier, TableLayout};
use queuebox_store::{MigrateRequest, SchemaNeeds, SchemaStore, StoreAction, StoreError};
use queuebox_store_postgres::{PgStore, bundled_sql, checksum};

use crate::support::{LOCK_KEY, LogCapture, TestDb};

fn baseline(n: u32) -> MigrateRequest {
    MigrateRequest {
        baseline: Some(n),
        notify: false,
    }
}

#[tokio::test]
async fn sch_49_empty_database_gets_both_tables_and_history_rows() {
    let db = TestDb::new("sch49").await;
    let store = db.store().await;
    let logs = LogCapture::start();
    let report = store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    assert_eq!(
        report.applied,
        queuebox_store::BUNDLED_VERSIONS
            .iter()
            .map(|v| v.version)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        report.database_version,
        Some(queuebox_store::HIGHEST_VERSION)
    );
    logs.assert_line("INFO", &applied_line());
    assert!(
        logs.text()
            .contains("Applied migration 1 (create outbox) in "),
        "{}",
        logs.text()
    );
    assert!(
        logs.text()
            .contains("Applied migration 2 (create inbox) in "),
        "{}",
        logs.text()
    );

    for name in [
        "outbox",
        "inbox",
        "outbox_sequence_seq",
        "queuebox_schema_history",
        "idx_inbox_state_created",
    ] {
        assert!(db.has_relation(name).await, "{name} missing");
    }
    let rows = db
        .admin
        .query(
            "SELECT version, description, kind, checksum, queuebox_version, duration_ms, applied_at <= now() \
             FROM queuebox_schema_history ORDER BY version",
            &[],
        )
        .await
        .expect("history");
    assert_eq!(rows.len(), queuebox_store::BUNDLED_VERSIONS.len());
    for (row, (version, description)) in
        rows.iter().zip([(1, "create outbox"), (2, "create inbox")])
    {
        assert_eq!(row.get::<_, i32>(0), version);
        assert_eq!(row.get::<_, String>(1), description);
        assert_eq!(row.get::<_, String>(2), "applied");
        let text = bundled_sql(version as u32).expect("bundled");
        assert_eq!(row.get::<_, String>(3), checksum(text));
        assert_eq!(row.get::<_, String>(4), env!("CARGO_PKG_VERSION"));
        assert!(row.get::<_, i32>(5) >= 0);
        assert!(row.get::<_, bool>(6));
    }

    // SCH-59: a second run right after applies nothing.
    let again = store
        .migrate(&MigrateRequest::default())
        .await
        .expect("second migrate");
    assert!(again.applied.is_empty());
    logs.assert_line(
        "INFO",
        &format!(
            "The database is at version {}. Nothing to apply.",
            queuebox_store::HIGHEST_VERSION
        ),
    );
    assert_eq!(
        db.history().await.len(),
        queuebox_store::BUNDLED_VERSIONS.len()
    );
    store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect("guard passes");
    db.drop().await;
}

#[tokio::test]
async fn sch_53_tables_without_history_refused() {
    let db = TestDb::new("sch53").await;
    db.exec("CREATE TABLE outbox (id UUID)").await;
    let store = db.store().await;
    let expected = "QueueBox tables exist without a migration history. Run queuebox migrate --baseline <version> with the last version you applied by hand.";
    let err = store
        .migrate(&MigrateRequest::default())
        .await
        .expect_err("refused");
    assert_eq!(err.to_string(), expected);
    assert_eq!(err.action(), StoreAction::Migrate);
    assert!(!db.has_relation("inbox").await);
    assert!(!db.has_relation("queuebox_schema_history").await);

    // An empty history table counts as no history.
    db.exec(bundled_history_table()).await;
    let err = store
        .migrate(&MigrateRequest::default())
        .await
        .expect_err("refused");
    assert_eq!(err.to_string(), expected);
    assert!(db.history().await.is_empty());
    db.drop().await;
}

fn bundled_history_table() -> &'static str {
    include_str!("../../queries/history/create_table.sql")
}

#[tokio::test]
async fn sch_56_baseline_1_records_outbox_made_by_hand_and_applies_2() {
    let db = TestDb::new("sch56base").await;
    db.exec(bundled_sql(1).expect("v1")).await;
    let store = db.store().await;
    let logs = LogCapture::start();
    let report = store.migrate(&baseline(1)).await.expect("baseline");
    assert_eq!(report.baselined, vec![1]);
    let later: Vec<u32> = queuebox_store::BUNDLED_VERSIONS
        .iter()
        .map(|v| v.version)
        .filter(|v| *v >= 2)
        .collect();
    assert_eq!(report.applied, later);
    logs.assert_line(
        "INFO",
        "Recorded versions 1 to 1 as applied by hand (baseline).",
    );
    let words: Vec<String> = later.iter().map(u32::to_string).collect();
    logs.assert_line(
        "INFO",
        &format!("Applied {} migration(s): {}", later.len(), words.join(", ")),
    );
    let mut history = vec![(1, "baseline".to_owned())];
    history.extend(later.iter().map(|v| (*v as i32, "applied".to_owned())));
    assert_eq!(db.history().await, history);
    let duration: i32 = db
        .admin
        .query_one(
            "SELECT duration_ms FROM queuebox_schema_history WHERE version = 1",
            &[],
        )
        .await
        .expect("row")
        .get(0);
    assert_eq!(duration, 0);
    store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect("guard passes");
    db.drop().await;
}

#[tokio::test]
async fn sch_56_baseline_with_history_refused_and_nothing_changed() {
    let db = TestDb::new("sch56hist").await;
    let store = db.store().await;
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    let before = db.history().await;
    let err = store.migrate(&baseline(1)).await.expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "The database already has a migration history (version {}). --baseline applies only to a database without one. Nothing changed.",
            queuebox_store::HIGHEST_VERSION
        )
    );
    assert_eq!(db.history().await, before);
    db.drop().await;
}

#[tokio::test]
async fn sch_56_baseline_with_neither_table_refused() {
    let db = TestDb::new("sch56none").await;
    let store = db.store().await;
    let err = store.migrate(&baseline(2)).await.expect_err("refused");
    assert_eq!(
        err.to_string(),
        "Neither table \"outbox\" nor \"inbox\" exists, so there is nothing to baseline. Run \"queuebox migrate\" without --baseline. Nothing changed."
    );
    assert!(!db.has_relation("queuebox_schema_history").await);
    db.drop().await;
}

#[tokio::test]
async fn sch_55_renamed_names_refused_and_nothing_created() {
    let db = TestDb::new("sch55").await;
    let mut layout = TableLayout {
        inbox_table: SqlIdentifier::parse("events_in").expect("identifier"),
        ..TableLayout::default()
    };
    assert!(
        layout
            .outbox
            .set("key", SqlIdentifier::parse("msg_key").expect("identifier"))
    );
    let store = db.store_with(layout).await;
    let err = store
        .migrate(&MigrateRequest::default())
        .await
        .expect_err("refused");
    assert_eq!(
        err.startup_line(),
        "QueueBox could not apply the migrations. Reason: QueueBox migrates only the default table and column names. These keys rename one: database.inboxTableName, database.columnMapping.outbox.key. Create the tables yourself (see the schema page) and keep database.migrate: false."
    );
    for name in ["outbox", "inbox", "events_in", "queuebox_schema_history"] {
        assert!(!db.has_relation(name).await, "{name} was created");
    }
    db.drop().await;
}

/// Waits until this admin session gets the migration lock (other tests may hold it briefly).
async fn take_lock(db: &TestDb) {
    db.exec(&format!("SELECT pg_advisory_lock({LOCK_KEY})"))
        .await;
}

#[tokio::test]
async fn sch_47_lock_held_elsewhere_times_out_and_changes_nothing() {
    let db = TestDb::new("sch47").await;
    let store = PgStore::connect(&db.config(TableLayout::default(), 1_200))
        .await
        .expect("connect");
    take_lock(&db).await;
    let started = Instant::now();
    let err = store
        .migrate(&MigrateRequest::default())
        .await
        .expect_err("lock timeout");
    let waited = started.elapsed();
    db.exec(&format!("SELECT pg_advisory_unlock({LOCK_KEY})"))
        .await;
    assert_eq!(
        err.to_string(),
        "Another process holds the migration lock; QueueBox waited 1200 ms. Nothing changed."
    );
    assert!(
        waited >= Duration::from_millis(1_100),
        "gave up after {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    assert!(!db.has_relation("queuebox_schema_history").await);
    db.drop().await;
}

/// SCH-47: the lock is released after a failed migration, so the next one can take it.
async fn assert_lock_free(db: &TestDb) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got: bool = db
            .admin
            .query_one(&format!("SELECT pg_try_advisory_lock({LOCK_KEY})"), &[])
            .await
            .expect("try lock")
            .get(0);
        if got {
            db.exec(&format!("SELECT pg_advisory_unlock({LOCK_KEY})"))
                .await;
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the migration lock was never released"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn sch_46_failed_version_1_rolls_back_whole_and_releases_the_lock() {
    let db = TestDb::new("sch46one").await;
    // A type of the table's name makes CREATE TABLE outbox fail after CREATE SEQUENCE ran.
    db.exec("CREATE TYPE outbox AS ENUM ('x')").await;
    let store = PgStore::connect(&db.config(TableLayout::default(), 30_000))
        .await
        .expect("connect");
    let err = store
        .migrate(&MigrateRequest::default())
        .await
        .expect_err("fails");
    assert!(
        matches!(err, StoreError::MigrationFailed { version: 1, .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "Migration 1 (create outbox) failed: type \"outbox\" already exists (SQLSTATE 42710). Versions before 1 stay applied."
    );
    assert!(
        !db.has_relation("outbox_sequence_seq").await,
        "partial version 1 kept"
    );
    assert!(db.history().await.is_empty());
    assert_lock_free(&db).await;
    db.drop().await;
}

#[tokio::test]
async fn sch_46_failed_version_2_keeps_version_1() {
    let db = TestDb::new("sch46two").await;
    db.exec("CREATE TYPE inbox AS ENUM ('x')").await;
    let store = db.store().await;
    let err = store
        .migrate(&MigrateRequest::default())
        .await
        .expect_err("fails");
    assert_eq!(
        err.to_string(),
        "Migration 2 (create inbox) failed: type \"inbox\" already exists (SQLSTATE 42710). Versions before 2 stay applied."
    );
    assert_eq!(db.history().await, vec![(1, "applied".into())]);
    assert!(db.has_relation("outbox").await);
    assert!(!db.has_relation("idx_inbox_push_pending").await);
    // Once the obstacle is gone, the next run applies only version 2 and the later ones.
    db.exec("DROP TYPE inbox").await;
    let report = store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    let later: Vec<u32> = queuebox_store::BUNDLED_VERSIONS
        .iter()
        .map(|v| v.version)
        .filter(|v| *v >= 2)
        .collect();
    assert_eq!(report.applied, later);
    db.drop().await;
}

#[tokio::test]
async fn sch_50_newer_version_warns_and_carries_on() {
    let db = TestDb::new("sch50").await;
    let store = db.store().await;
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    db.exec(&format!(
        "INSERT INTO queuebox_schema_history (version, description, kind, checksum, queuebox_version, duration_ms) \
         VALUES ({}, 'from the future', 'applied', '{}', '9.9.9', 1)",
        queuebox_store::HIGHEST_VERSION + 1,
        "a".repeat(64)
    ))
    .await;
    let logs = LogCapture::start();
    let report = store
        .migrate(&MigrateRequest::default())
        .await
        .expect("carries on");
    assert_eq!(
        report.newer_version,
        Some(queuebox_store::HIGHEST_VERSION + 1)
    );
    assert!(report.applied.is_empty());
    logs.assert_line(
        "WARN",
        &format!(
            "The database is at version {}, newer than this QueueBox ({}). Nothing to apply.",
            queuebox_store::HIGHEST_VERSION + 1,
            queuebox_store::HIGHEST_VERSION
        ),
    );
    db.drop().await;
}

#[tokio::test]
async fn sch_51_checksum_mismatch_warns_and_does_not_rerun() {
    let db = TestDb::new("sch51").await;
    let store = db.store().await;
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    db.exec(&format!(
        "UPDATE queuebox_schema_history SET checksum = '{}' WHERE version = 1",
        "0".repeat(64)
    ))
    .await;
    let logs = LogCapture::start();
    let report = store
        .migrate(&MigrateRequest::default())
        .await
        .expect("carries on");
    assert_eq!(report.checksum_mismatches, vec![1]);
    assert!(report.applied.is_empty());
    logs.assert_line(
        "WARN",
        "Migration 1 (create outbox) differs from the one recorded in queuebox_schema_history. QueueBox does not run it again.",
    );
    assert!(!logs.text().contains("Migration 2 (create inbox) differs"));
    db.drop().await;
}

/// Names and kinds of every relation, constraint, trigger and function in the schema.
async fn objects(db: &TestDb) -> Vec<String> {
    db.admin
        .query(
            "SELECT 'rel ' || c.relname || ' ' || c.relkind::text FROM pg_class c \
               JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 \
             UNION ALL SELECT 'con ' || conname FROM pg_constraint k \
               JOIN pg_namespace n ON n.oid = k.connamespace WHERE n.nspname = $1 \
             UNION ALL SELECT 'trg ' || tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid \
               JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal \
             UNION ALL SELECT 'fn ' || proname FROM pg_proc p \
               JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 \
             ORDER BY 1",
            &[&db.schema],
        )
        .await
        .expect("catalog")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test]
async fn sch_45_every_migration_statement_runs_twice_without_change() {
    let db = TestDb::new("sch45").await;
    let texts = [
        bundled_sql(1).expect("v1"),
        bundled_sql(2).expect("v2"),
        include_str!("../../queries/history/create_table.sql"),
        include_str!("../../queries/notify/create_function.sql"),
        include_str!("../../queries/notify/create_trigger.sql"),
    ];
    for text in texts {
        db.exec(text).await;
    }
    let first = objects(&db).await;
    assert!(
        first.iter().any(|o| o == "trg queuebox_outbox_notify"),
        "{first:?}"
    );
    for text in texts {
        db.exec(text).await;
    }
    assert_eq!(objects(&db).await, first);
    db.drop().await;
}

#[tokio::test]
async fn sch_25_notify_mode_creates_the_trigger_and_the_guard_checks_it() {
    let db = TestDb::new("sch25").await;
    let store = db.store().await;
    let notify = MigrateRequest {
        baseline: None,
        notify: true,
    };
    let report = store.migrate(&notify).await.expect("migrate");
    assert!(report.notify_created);
    store
        .check_schema(&SchemaNeeds::notify(true))
        .await
        .expect("guard with notify passes");
    let again = store.migrate(&notify).await.expect("migrate again");
    assert!(!again.notify_created, "the trigger exists already");

    // SCH-24: the trigger sends the table's name on queuebox_outbox, seen by a listener.
    let (listener, mut connection) =
        tokio_postgres::connect(&crate::support::base_url(), tokio_postgres::NoTls)
            .await
            .expect("listener connects");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if let Ok(tokio_postgres::AsyncMessage::Notification(n)) = message {
                let _ = tx.send((n.channel().to_owned(), n.payload().to_owned()));
            }
        }
    });
    listener
        .batch_execute("LISTEN queuebox_outbox")
        .await
        .expect("listen");
    db.exec("INSERT INTO outbox (topic, payload) VALUES ('t', '{}')")
        .await;
    let received = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("a notification within 5 s")
        .expect("listener alive");
    assert_eq!(
        received,
        ("queuebox_outbox".to_owned(), "outbox".to_owned())
    );
    drop(listener);

    db.exec("DROP TRIGGER queuebox_outbox_notify ON outbox")
        .await;
    let err = store
        .check_schema(&SchemaNeeds::notify(true))
        .await
        .expect_err("trigger missing");
    let text = err.to_string();
    let line = text.lines().nth(1).expect("problem line");
    let prefix = "- table \"outbox\" has no trigger queuebox_outbox_notify, which outbox.capture.mode notify needs. Add it: ";
    assert!(line.starts_with(prefix), "{line}");
    // The fix in the message is valid SQL that satisfies the guard.
    db.exec(&line[prefix.len()..]).await;
    store
        .check_schema(&SchemaNeeds::notify(true))
        .await
        .expect("fixed");
    // Polling mode ignores the trigger.
    db.exec("DROP TRIGGER queuebox_outbox_notify ON outbox")
        .await;
    store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect("polling ignores it");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sch_52_replicas_starting_together_serialize_on_the_lock() {
    let db = TestDb::new("sch52").await;
    let (a, b) = (db.store().await, db.store().await);
    let request = MigrateRequest::default();
    let (ra, rb) = tokio::join!(a.migrate(&request), b.migrate(&request));
    let mut applied = vec![
        ra.expect("first replica").applied,
        rb.expect("second replica").applied,
    ];
    applied.sort();
    assert_eq!(
        applied,
        vec![
            vec![],
            queuebox_store::BUNDLED_VERSIONS
                .iter()
                .map(|v| v.version)
                .collect::<Vec<_>>()
        ]
    );
    assert_eq!(
        db.history().await.len(),
        queuebox_store::BUNDLED_VERSIONS.len()
    );
    db.drop().await;
}

/// `Applied <n> migration(s): <versions>` for every bundled version (SCH-57).
fn applied_line() -> String {
    let versions: Vec<String> = queuebox_store::BUNDLED_VERSIONS
        .iter()
        .map(|v| v.version.to_string())
        .collect();
    format!(
        "Applied {} migration(s): {}",
        versions.len(),
        versions.join(", ")
    )
}
