//! The SQLite-only settings (schema.md SCH-8, config.md CFG-42): a file database is switched to
//! WAL and created when missing; `sqlite::memory:` is a database of the process only.

use std::time::Duration;

use queuebox_core::TableLayout;
use queuebox_core::database::SqliteTarget;
use queuebox_store::{
    Consumption, InsertOutcome, IntakeStore, MigrateRequest, NewInboxRow, RelayStore, Schedule,
    SchemaNeeds, SchemaStore, StoredState,
};
use queuebox_store_sqlite::SqliteStore;

use crate::support::{config_for, temp_folder};

/// SCH-8, CFG-42: the file is created on first open, in WAL journal mode (which the file keeps,
/// so every other connection sees it), with `synchronous = FULL` on QueueBox's connection.
#[tokio::test]
async fn sch_8_a_new_file_is_created_in_wal_mode() {
    let dir = temp_folder("wal");
    let file = dir.join("new.db");
    assert!(!file.exists());
    let store = SqliteStore::connect(&config_for(
        SqliteTarget::File(file.clone()),
        TableLayout::default(),
        1_000,
    ))
    .await
    .expect("open");
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    assert!(file.is_file(), "created on first open");
    let other = rusqlite::Connection::open(&file).unwrap();
    let mode: String = other
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// CFG-42: `sqlite::memory:` works as a whole store in one process, and two stores on it are
/// two databases (no other connection can see it).
#[tokio::test]
async fn cfg_42_memory_database_is_private_to_its_store() {
    let config = config_for(SqliteTarget::Memory, TableLayout::default(), 1_000);
    let one = SqliteStore::connect(&config).await.expect("open");
    one.migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    let row = NewInboxRow {
        raw_body: None,
        id: uuid::Uuid::now_v7(),
        source: "orders".to_owned(),
        idempotency_key: "evt_1".to_owned(),
        aggregate_id: None,
        event_type: None,
        payload: "{}".to_owned(),
        headers: "{}".to_owned(),
        consumption: Consumption::Push,
        correlation_id: None,
        schedule: Schedule::AfterReceipt {
            delay: Duration::ZERO,
        },
        state: StoredState::Pending,
        last_error: None,
    };
    assert_eq!(
        one.insert_batch(std::slice::from_ref(&row)).await.unwrap(),
        vec![InsertOutcome::Stored(row.id)]
    );
    let claimed = one
        .relay_claim(10, Duration::from_secs(60), &["orders".to_owned()])
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let two = SqliteStore::connect(&config).await.expect("open");
    assert!(
        two.check_schema(&SchemaNeeds::notify(false)).await.is_err(),
        "a second store on sqlite::memory: has a database of its own, without tables"
    );
}
