//! The plans PostgreSQL picks for the client's own statements on a table with a history, where a
//! plan that fits an empty table becomes a scan of every row completed before (autovacuum off,
//! statistics taken when the rows were inserted).

mod support;

use queuebox_inbox::sql::Statements;
use queuebox_inbox::{Dialect, Schema};
use support::Db;
use uuid::Uuid;

/// The batch handler's Complete (`complete-batch.sql`) finds its rows through the primary key,
/// never through the partial index of processing rows, whatever the statistics say: taken while
/// no row was processing, they count that index as empty, and a scan of it reads an entry for
/// every row completed since the last VACUUM (2,677 buffers for one batch of 100 after 10,000
/// rows, against a constant cost through the primary key).
#[tokio::test]
async fn the_batch_complete_reads_its_rows_by_the_primary_key_after_many_completed_rows() {
    let db = Db::new().await;
    let t = db.t();
    db.admin
        .batch_execute(&format!(
            "INSERT INTO {t} (source, idempotency_key, aggregate_id, consumption, payload)
             SELECT 's', 'k' || i, 'a' || i, 'pull', jsonb_build_object('id', i)
             FROM generate_series(1, 2100) AS i;
             ANALYZE {t};
             UPDATE {t} SET state = 'processing', claim_token = gen_random_uuid(),
                            lease_expires_at = now() + interval '1 hour';
             UPDATE {t} SET state = 'processed', claim_token = NULL, lease_expires_at = NULL
              WHERE idempotency_key NOT IN (SELECT 'k' || i FROM generate_series(1, 100) AS i);"
        ))
        .await
        .unwrap();
    let token = Uuid::new_v4();
    let ids: Vec<Uuid> = db
        .admin
        .query(
            &format!("UPDATE {t} SET claim_token = $1 WHERE state = 'processing' RETURNING id"),
            &[&token],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids.len(), 100);
    let ids_text = ids
        .iter()
        .map(Uuid::to_string)
        .collect::<Vec<_>>()
        .join(",");

    let statements = Statements::render(Dialect::Postgresql, &Schema::default()).unwrap();
    let complete = &statements.complete_batch;
    let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = complete
        .slot_names()
        .iter()
        .map(|slot| match *slot {
            "ids" => &ids_text as &(dyn tokio_postgres::types::ToSql + Sync),
            "token" => &token,
            other => panic!("complete-batch has no slot {other}"),
        })
        .collect();
    db.admin
        .batch_execute(&format!("SET search_path TO \"{}\"; BEGIN", db.schema_name))
        .await
        .unwrap();
    let plan: Vec<String> = db
        .admin
        .query(
            &format!("EXPLAIN (ANALYZE, COSTS OFF) {}", complete.text()),
            &params,
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    db.admin.batch_execute("ROLLBACK").await.unwrap();
    let plan = plan.join("\n");
    assert!(plan.contains("pk_inbox"), "{plan}");
    assert!(!plan.contains("idx_inbox_pull_busy"), "{plan}");
    // The same statement, run for real, still marks exactly the fenced batch.
    let marked = db.admin.execute(complete.text(), &params).await.unwrap();
    assert_eq!(marked, 100);
    let left: i64 = db
        .admin
        .query_one(
            &format!("SELECT count(*) FROM {t} WHERE state <> 'processed'"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);
    db.admin
        .batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", db.schema_name))
        .await
        .unwrap();
}
