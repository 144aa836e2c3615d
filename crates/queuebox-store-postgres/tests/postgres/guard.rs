//! The start-up schema guard on PostgreSQL (schema.md SCH-38, SCH-60..63): exact lines, mapped
//! names, and fixes that really fix.

use queuebox_core::{SqlIdentifier, TableLayout};
use queuebox_store::{MigrateRequest, SchemaNeeds, SchemaStore, StoreAction};

use crate::support::TestDb;

const SEQUENCE_LINE: &str = "- table \"outbox\" has no column \"sequence\". Add it: CREATE SEQUENCE IF NOT EXISTS outbox_sequence_seq AS BIGINT; ALTER TABLE \"outbox\" ADD COLUMN \"sequence\" BIGINT NOT NULL DEFAULT nextval('outbox_sequence_seq');";
const UNIQUE_LINE: &str = "- table \"inbox\" has no unique constraint on (\"source\", \"idempotency_key\"), so it cannot reject repeats. Add it: ALTER TABLE \"inbox\" ADD CONSTRAINT uq_inbox_source_idempotency UNIQUE (\"source\", \"idempotency_key\");";
const HEAD: &str =
    "QueueBox could not check the database schema. Reason: the schema does not fit this QueueBox";

async fn migrated(name: &str) -> (TestDb, queuebox_store_postgres::PgStore) {
    let db = TestDb::new(name).await;
    let store = db.store().await;
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    (db, store)
}

/// Runs the statement after `Add it: ` in a problem line.
async fn apply_fix(db: &TestDb, line: &str) {
    let (_, statement) = line.split_once("Add it: ").expect("line has a fix");
    db.exec(statement).await;
}

#[tokio::test]
async fn sch_61_dropped_sequence_column_gives_the_exact_line_and_fix() {
    let (db, store) = migrated("sch61seq").await;
    db.exec("ALTER TABLE outbox DROP COLUMN sequence").await;
    let err = store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect_err("guard fails");
    assert_eq!(err.action(), StoreAction::CheckSchema);
    assert_eq!(
        err.startup_line(),
        format!("{HEAD} (1 problem). Fix each one and start QueueBox again.\n{SEQUENCE_LINE}")
    );
    apply_fix(&db, SEQUENCE_LINE).await;
    store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect("fixed");
    db.drop().await;
}

#[tokio::test]
async fn sch_63_dropped_unique_constraint_gives_the_exact_line_and_fix() {
    let (db, store) = migrated("sch63").await;
    db.exec("ALTER TABLE inbox DROP CONSTRAINT uq_inbox_source_idempotency")
        .await;
    let err = store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect_err("guard fails");
    assert_eq!(
        err.to_string(),
        format!(
            "the schema does not fit this QueueBox (1 problem). Fix each one and start QueueBox again.\n{UNIQUE_LINE}"
        )
    );
    apply_fix(&db, UNIQUE_LINE).await;
    store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect("fixed");
    db.drop().await;
}

#[tokio::test]
async fn sch_61_two_problems_are_reported_at_once_as_in_the_spec() {
    let (db, store) = migrated("sch61two").await;
    db.exec("ALTER TABLE outbox DROP COLUMN sequence; ALTER TABLE inbox DROP CONSTRAINT uq_inbox_source_idempotency")
        .await;
    let err = store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect_err("guard fails");
    assert_eq!(
        err.startup_line(),
        format!(
            "{HEAD} (2 problems). Fix each one and start QueueBox again.\n{SEQUENCE_LINE}\n{UNIQUE_LINE}"
        )
    );
    db.drop().await;
}

#[tokio::test]
async fn sch_60_unique_index_counts_but_a_partial_one_does_not() {
    let (db, store) = migrated("sch60idx").await;
    db.exec(
        "ALTER TABLE inbox DROP CONSTRAINT uq_inbox_source_idempotency; \
         CREATE UNIQUE INDEX partial_key ON inbox (source, idempotency_key) WHERE state = 'pending'",
    )
    .await;
    let err = store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect_err("partial index is not enough");
    assert!(err.to_string().ends_with(UNIQUE_LINE), "{err}");
    db.exec("CREATE UNIQUE INDEX full_key ON inbox (idempotency_key, source)")
        .await;
    store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect("a unique index in either order passes");
    db.drop().await;
}

#[tokio::test]
async fn sch_62_every_missing_column_fix_is_valid_sql() {
    let (db, store) = migrated("sch62").await;
    db.exec(
        "ALTER TABLE outbox DROP COLUMN headers, DROP COLUMN key, DROP COLUMN claim_token, DROP COLUMN max_attempts; \
         ALTER TABLE inbox DROP COLUMN consumption, DROP COLUMN correlation_id, DROP COLUMN created_at",
    )
    .await;
    let err = store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect_err("guard fails");
    let text = err.to_string();
    let lines: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(lines.len(), 7, "{text}");
    assert!(lines.contains(&"- table \"outbox\" has no column \"key\". Add it: ALTER TABLE \"outbox\" ADD COLUMN \"key\" VARCHAR(255) NULL;"), "{text}");
    assert!(lines.contains(&"- table \"inbox\" has no column \"consumption\". Add it: ALTER TABLE \"inbox\" ADD COLUMN \"consumption\" VARCHAR(4) NOT NULL DEFAULT 'push';"), "{text}");
    for line in lines {
        apply_fix(&db, line).await;
    }
    store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect("every fix applied");
    db.drop().await;
}

#[tokio::test]
async fn sch_61_missing_table_with_history_says_so() {
    let (db, store) = migrated("sch61hist").await;
    db.exec("DROP TABLE inbox").await;
    let err = store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect_err("guard fails");
    assert_eq!(
        err.to_string(),
        "the schema does not fit this QueueBox (1 problem). Fix each one and start QueueBox again.\n- table \"inbox\" does not exist, although the migration history records it. Create it as the schema page shows."
    );
    db.drop().await;
}

#[tokio::test]
async fn sch_61_missing_tables_without_history_say_run_migrate() {
    let db = TestDb::new("sch61none").await;
    let store = db.store().await;
    let err = store
        .check_schema(&SchemaNeeds::notify(true))
        .await
        .expect_err("guard fails");
    assert_eq!(
        err.to_string(),
        "the schema does not fit this QueueBox (2 problems). Fix each one and start QueueBox again.\n\
         - table \"outbox\" does not exist. Run \"queuebox migrate\", or create it as the schema page shows.\n\
         - table \"inbox\" does not exist. Run \"queuebox migrate\", or create it as the schema page shows."
    );
    db.drop().await;
}

#[tokio::test]
async fn sch_38_guard_uses_mapped_names() {
    let db = TestDb::new("sch38").await;
    // Tables made by hand with other names, as an operator would (SCH-39).
    db.exec(queuebox_store_postgres::bundled_sql(1).expect("v1"))
        .await;
    db.exec(queuebox_store_postgres::bundled_sql(2).expect("v2"))
        .await;
    db.exec(
        "ALTER TABLE outbox RENAME TO events_out; \
         ALTER TABLE events_out RENAME COLUMN sequence TO seq_no; \
         ALTER TABLE inbox RENAME TO events_in; \
         ALTER TABLE events_in RENAME COLUMN source TO src",
    )
    .await;
    let id = |s: &str| SqlIdentifier::parse(s).expect("identifier");
    let mut layout = TableLayout {
        outbox_table: id("events_out"),
        inbox_table: id("events_in"),
        ..TableLayout::default()
    };
    assert!(layout.outbox.set("sequence", id("seq_no")));
    assert!(layout.inbox.set("source", id("src")));
    let store = db.store_with(layout).await;
    store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect("mapped names pass");

    db.exec("ALTER TABLE events_in DROP CONSTRAINT uq_inbox_source_idempotency")
        .await;
    let err = store
        .check_schema(&SchemaNeeds::notify(true))
        .await
        .expect_err("guard fails");
    let text = err.to_string();
    assert!(text.contains("(2 problems)"), "{text}");
    assert!(text.contains("- table \"events_out\" has no trigger queuebox_outbox_notify, which outbox.capture.mode notify needs. Add it: "), "{text}");
    assert!(
        text.contains("AFTER INSERT ON \"events_out\" FOR EACH STATEMENT"),
        "{text}"
    );
    assert!(text.ends_with("- table \"events_in\" has no unique constraint on (\"src\", \"idempotency_key\"), so it cannot reject repeats. Add it: ALTER TABLE \"events_in\" ADD CONSTRAINT uq_inbox_source_idempotency UNIQUE (\"src\", \"idempotency_key\");"), "{text}");
    for line in text.lines().skip(1) {
        apply_fix(&db, line).await;
    }
    store
        .check_schema(&SchemaNeeds::notify(true))
        .await
        .expect("fixed with mapped names");
    db.drop().await;
}
