//! The schema-stage checks of the suite (schema.md SCH-49, SCH-55, SCH-56, SCH-61): migrate,
//! baseline refusals and the guard, on a fresh namespace each.

use std::collections::BTreeMap;

use queuebox_core::{SqlIdentifier, TableLayout};

use super::{ConformanceFactory, migrated};
use crate::error::StoreError;
use crate::guard::{SchemaNeeds, SchemaProblem};
use crate::versions::{HIGHEST_VERSION, MigrateRequest};

fn problems_of(result: Result<(), StoreError>) -> Vec<SchemaProblem> {
    match result {
        Err(StoreError::SchemaMismatch { problems }) => problems,
        other => panic!("expected a schema mismatch, got {other:?}"),
    }
}

/// SCH-48/49/59: the first run applies every version, a second run applies nothing, and the
/// guard passes after both.
pub(crate) async fn sch_49_second_migrate_applies_nothing(factory: &dyn ConformanceFactory) {
    let db = factory.fresh("sch49").await;
    let store = db.store(TableLayout::default()).await;
    let first = store
        .migrate(&MigrateRequest::default())
        .await
        .expect("first migrate");
    assert_eq!(
        first.applied,
        crate::BUNDLED_VERSIONS
            .iter()
            .map(|v| v.version)
            .collect::<Vec<_>>()
    );
    assert_eq!(first.database_version, Some(HIGHEST_VERSION));
    let second = store
        .migrate(&MigrateRequest::default())
        .await
        .expect("second migrate");
    assert!(
        second.applied.is_empty(),
        "second run applied {:?}",
        second.applied
    );
    assert!(second.baselined.is_empty());
    assert_eq!(second.database_version, Some(HIGHEST_VERSION));
    assert!(second.checksum_mismatches.is_empty());
    assert_eq!(second.newer_version, None);
    store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect("guard after migrate");
    db.cleanup().await;
}

/// SCH-60/61: an empty namespace has neither table, and the history records neither.
pub(crate) async fn sch_61_guard_reports_missing_tables_without_history(
    factory: &dyn ConformanceFactory,
) {
    let db = factory.fresh("sch61empty").await;
    let store = db.store(TableLayout::default()).await;
    let problems = problems_of(store.check_schema(&SchemaNeeds::notify(false)).await);
    assert_eq!(problems.len(), 2, "{problems:?}");
    for problem in &problems {
        assert!(
            matches!(
                problem,
                SchemaProblem::MissingTable {
                    recorded: false,
                    ..
                }
            ),
            "{problem:?}"
        );
    }
    db.cleanup().await;
}

/// SCH-60/61: a dropped column is reported with its table, its column and a statement.
pub(crate) async fn sch_61_guard_reports_dropped_column(factory: &dyn ConformanceFactory) {
    let db = factory.fresh("sch61col").await;
    let store = db.store(TableLayout::default()).await;
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    db.drop_column("inbox", "headers").await;
    let err = store
        .check_schema(&SchemaNeeds::notify(false))
        .await
        .expect_err("guard must fail");
    assert!(
        err.to_string().starts_with(
            "the schema does not fit this QueueBox (1 problem). Fix each one and start QueueBox again.\n- table "
        ),
        "{err}"
    );
    let problems = problems_of(Err(err));
    match problems.as_slice() {
        [SchemaProblem::MissingColumn { table, column, .. }] => {
            assert!(table.contains("inbox"), "{table}");
            assert!(column.contains("headers"), "{column}");
        }
        other => panic!("expected one missing column, got {other:?}"),
    }
    db.cleanup().await;
}

/// SCH-55: renamed names are refused, and nothing is created.
pub(crate) async fn sch_55_renamed_names_refused_and_nothing_created(
    factory: &dyn ConformanceFactory,
) {
    let db = factory.fresh("sch55").await;
    let layout = TableLayout {
        outbox_table: SqlIdentifier::parse("events_out").expect("valid identifier"),
        ..TableLayout::default()
    };
    let renamed = db.store(layout).await;
    match renamed.migrate(&MigrateRequest::default()).await {
        Err(StoreError::RenamedNames { keys }) => {
            assert_eq!(keys, vec!["database.outboxTableName".to_owned()]);
        }
        other => panic!("expected the renamed-names refusal, got {other:?}"),
    }
    let plain = db.store(TableLayout::default()).await;
    let problems = problems_of(plain.check_schema(&SchemaNeeds::notify(false)).await);
    assert_eq!(problems.len(), 2, "something was created: {problems:?}");
    db.cleanup().await;
}

/// SCH-56: `--baseline` with neither table changes nothing; a plain migrate then works.
pub(crate) async fn sch_56_baseline_without_tables_refused(factory: &dyn ConformanceFactory) {
    let db = factory.fresh("sch56none").await;
    let store = db.store(TableLayout::default()).await;
    let request = MigrateRequest {
        baseline: Some(1),
        notify: false,
    };
    let err = store.migrate(&request).await.expect_err("must refuse");
    assert!(
        matches!(err, StoreError::BaselineWithoutTables { .. }),
        "{err:?}"
    );
    assert!(err.to_string().ends_with(
        "exists, so there is nothing to baseline. Run \"queuebox migrate\" without --baseline. Nothing changed."
    ));
    let report = store
        .migrate(&MigrateRequest::default())
        .await
        .expect("plain migrate");
    assert_eq!(
        report.applied,
        crate::BUNDLED_VERSIONS
            .iter()
            .map(|v| v.version)
            .collect::<Vec<_>>()
    );
    db.cleanup().await;
}

/// SCH-56: `--baseline` on a database with a history is refused with its version.
pub(crate) async fn sch_56_baseline_with_history_refused(factory: &dyn ConformanceFactory) {
    let db = factory.fresh("sch56hist").await;
    let store = db.store(TableLayout::default()).await;
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    let request = MigrateRequest {
        baseline: Some(1),
        notify: false,
    };
    let err = store.migrate(&request).await.expect_err("must refuse");
    assert_eq!(
        err.to_string(),
        format!(
            "The database already has a migration history (version {}). --baseline applies only to a database without one. Nothing changed.",
            crate::HIGHEST_VERSION
        )
    );
    db.cleanup().await;
}

/// SCH-56: a baseline past the highest bundled version is refused before any database work.
pub(crate) async fn sch_56_baseline_out_of_range_refused(factory: &dyn ConformanceFactory) {
    let db = factory.fresh("sch56range").await;
    let store = db.store(TableLayout::default()).await;
    for bad in [0, HIGHEST_VERSION + 1] {
        let request = MigrateRequest {
            baseline: Some(bad),
            notify: false,
        };
        let err = store.migrate(&request).await.expect_err("must refuse");
        assert_eq!(
            err.to_string(),
            format!("--baseline needs a whole number from 1 to {HIGHEST_VERSION}, got \"{bad}\".")
        );
    }
    let problems = problems_of(store.check_schema(&SchemaNeeds::notify(false)).await);
    assert_eq!(problems.len(), 2, "something was created: {problems:?}");
    db.cleanup().await;
}

/// Version 3 (outbox topic not empty): the application's minimal INSERT with an empty topic is
/// refused by the database itself, naming `ck_outbox_topic` (a CHECK; triggers on SQLite), and
/// one with a topic is stored.
pub(crate) async fn sch_43_version_3_refuses_an_empty_topic(factory: &dyn ConformanceFactory) {
    let (db, _store) = migrated(factory, "v3topic").await;
    let refused = db.insert_minimal_outbox("").await;
    let text = refused.expect_err("an empty topic is refused");
    assert!(text.contains("ck_outbox_topic"), "{text}");
    db.insert_minimal_outbox("orders.created")
        .await
        .expect("a topic is stored");
    let layout = TableLayout::default();
    assert_eq!(
        db.outbox_states(&layout).await,
        BTreeMap::from([("pending".to_owned(), 1)]),
        "only the row with a topic"
    );
    db.cleanup().await;
}
