//! Statement facts of the inbox and retention requirements that are PostgreSQL's own (inbox.md
//! INB-51: `jsonb` normalization; operations.md RET-12: the catalog's indexes), against the
//! real server, each test in a schema of its own. The store-neutral ones (INB-1, INB-46, RET-3,
//! RET-8) are in the conformance suite.

#[allow(dead_code)]
#[path = "postgres/support.rs"]
mod support;

use std::time::Duration;

use queuebox_store::{
    Consumption, ForwardedRow, InsertOutcome, IntakeStore, MigrateRequest, NewInboxRow, RelayStore,
    Schedule, SchemaStore, StoredState,
};
use queuebox_store_postgres::PgStore;
use support::TestDb;
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(30);

/// A migrated test schema and one store on it.
async fn migrated(name: &str) -> (TestDb, PgStore) {
    let db = TestDb::new(name).await;
    let store = db.store().await;
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate the test schema");
    (db, store)
}

fn sources() -> Vec<String> {
    vec!["orders".to_owned()]
}

/// A push message of `orders` with this key, aggregate and payload, due at receipt.
fn message(key: &str, aggregate: Option<&str>, payload: &str) -> NewInboxRow {
    NewInboxRow {
        raw_body: None,
        id: Uuid::now_v7(),
        source: "orders".to_owned(),
        idempotency_key: key.to_owned(),
        aggregate_id: aggregate.map(str::to_owned),
        event_type: Some("order.created".to_owned()),
        payload: payload.to_owned(),
        headers: "{}".to_owned(),
        consumption: Consumption::Push,
        correlation_id: None,
        schedule: Schedule::AfterReceipt {
            delay: Duration::ZERO,
        },
        state: StoredState::Pending,
        last_error: None,
    }
}

async fn store_rows(store: &PgStore, rows: &[NewInboxRow]) -> Vec<Uuid> {
    let outcomes = store.insert_batch(rows).await.expect("insert");
    outcomes
        .iter()
        .map(|o| match o {
            InsertOutcome::Stored(id) => *id,
            InsertOutcome::Duplicate => panic!("unexpected duplicate: {outcomes:?}"),
        })
        .collect()
}

fn forwarded() -> ForwardedRow {
    ForwardedRow {
        id: Uuid::now_v7(),
        topic: "order.created".to_owned(),
        key: None,
        payload: "{}".to_owned(),
        headers: "{}".to_owned(),
        max_attempts: 5,
    }
}

/// INB-51: the payload column holds the body text as received, as `jsonb` normalizes it: the
/// stored value equals the text cast to `jsonb` (numbers keep their digits and scale, the last
/// of two equal keys wins, Unicode escapes are decoded), and the relay reads it back as that
/// text.
#[tokio::test]
async fn inb_51_the_payload_is_stored_as_received_jsonb_normalized() {
    let (db, store) = migrated("inb51").await;
    let bodies = [
        r#"{"id":"x","amount":12345678901234567890.1230,"n":2.50,"big":1e400}"#,
        "{ \"b\" : 1 ,\n \"a\" : [1, 2.0, \"\\u00e9\\n\"], \"b\": 2 }",
        r#"[1, "two", null, true, {"z": {}}]"#,
        r#""just a string""#,
    ];
    for (i, body) in bodies.iter().enumerate() {
        let id = store_rows(&store, &[message(&format!("k{i}"), None, body)]).await[0];
        let row = db
            .admin
            .query_one(
                "SELECT payload::text, $2::text::jsonb::text, payload = $2::text::jsonb \
                 FROM inbox WHERE id = $1",
                &[&id, body],
            )
            .await
            .unwrap();
        let (stored, normalized, equal): (String, String, bool) =
            (row.get(0), row.get(1), row.get(2));
        assert!(equal, "{body}: stored {stored}");
        assert_eq!(stored, normalized, "{body}");
        let claimed = store.relay_claim(1, LEASE, &sources()).await.unwrap();
        assert_eq!(claimed.len(), 1);
        assert_eq!(
            claimed[0].payload, normalized,
            "the relay reads what was stored"
        );
        assert!(
            store
                .relay_forward(claimed[0].claim, &forwarded())
                .await
                .unwrap()
        );
    }
    // The digits survive exactly: nothing went through a float.
    let first: String = db
        .admin
        .query_one(
            "SELECT payload ->> 'amount' FROM inbox WHERE idempotency_key = 'k0'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(first, "12345678901234567890.1230");
    db.drop().await;
}

/// The key columns, in order, of every index of `table`.
async fn index_columns(db: &TestDb, table: &str) -> Vec<(String, Vec<String>, bool)> {
    db.admin
        .query(
            "SELECT ic.relname::text, \
                    ARRAY(SELECT a.attname::text \
                          FROM unnest(i.indkey[0:i.indnkeyatts - 1]) WITH ORDINALITY k(attnum, ord) \
                          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
                          ORDER BY k.ord), \
                    i.indpred IS NULL \
             FROM pg_index i \
             JOIN pg_class ic ON ic.oid = i.indexrelid \
             JOIN pg_class t ON t.oid = i.indrelid \
             JOIN pg_namespace n ON n.oid = t.relnamespace \
             WHERE n.nspname = $1 AND t.relname = $2",
            &[&db.schema, &table],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// RET-12: the schema provides the indexes the DELETEs need: outbox `(state, updated_at)` and
/// inbox `(state, created_at)`, as the leading key columns of a full (not partial) index.
#[tokio::test]
async fn ret_12_the_schema_has_the_indexes_the_retention_deletes_need() {
    let (db, _store) = migrated("ret12").await;
    for (table, columns) in [
        ("outbox", ["state", "updated_at"]),
        ("inbox", ["state", "created_at"]),
    ] {
        let indexes = index_columns(&db, table).await;
        let found = indexes
            .iter()
            .find(|(_, keys, full)| *full && keys.len() >= 2 && keys[..2] == columns);
        assert!(
            found.is_some(),
            "{table}: no full index whose leading keys are {columns:?}: {indexes:?}"
        );
    }
    db.drop().await;
}
