//! Statement facts of the inbox, relay and retention requirements, one test per id (inbox.md
//! INB-1, INB-46, INB-51; operations.md RET-3, RET-8, RET-12), against the real PostgreSQL
//! server, each test in a schema of its own.

#[allow(dead_code)]
#[path = "postgres/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queuebox_store::{
    Claim, Consumption, ForwardedRow, InsertOutcome, IntakeStore, MigrateRequest, NewInboxRow,
    RelayRow, RelayStore, RetentionRule, RetentionStore, Schedule, SchemaStore, StoredState,
};
use queuebox_store_postgres::PgStore;
use support::TestDb;
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(30);
const HOUR: Duration = Duration::from_secs(3_600);

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

fn claim_of(rows: &[RelayRow], id: Uuid) -> Claim {
    rows.iter()
        .find(|r| r.claim.id == id)
        .unwrap_or_else(|| panic!("{id} was claimed: {rows:?}"))
        .claim
}

/// `state` of every inbox row, by id.
async fn states(db: &TestDb) -> BTreeMap<Uuid, String> {
    db.admin
        .query("SELECT id, state FROM inbox", &[])
        .await
        .expect("read states")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

async fn count(db: &TestDb, sql: &str) -> i64 {
    db.admin
        .query_one(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// INB-1: the store makes only the transitions of the diagram. Every relay statement is tried
/// on rows in every state, with claims that would pass every test but the state one: a
/// `processed` or `dead` row never goes anywhere (not even back to `pending` by a reclaim of a
/// lease left expired), a `pending` row only goes to `processing` by a claim, and a
/// `processing` row only to `processed`, `dead` or `pending`.
#[tokio::test]
async fn inb_1_the_store_makes_only_the_transitions_of_the_diagram() {
    let (db, store) = migrated("inb1").await;
    let ids = store_rows(
        &store,
        &[
            message("to-processed", Some("a1"), "{}"),
            message("to-dead", Some("a2"), "{}"),
            message("to-released", Some("a3"), "{}"),
            message("to-reclaimed", Some("a4"), "{}"),
        ],
    )
    .await;
    let [processed, dead, released, reclaimed] = ids[..] else {
        unreachable!()
    };
    let all_pending: BTreeMap<Uuid, String> =
        ids.iter().map(|id| (*id, "pending".to_owned())).collect();
    assert_eq!(states(&db).await, all_pending, "[*] --> pending: stored");

    // pending --> processing: relay claim.
    let claimed = store.relay_claim(10, LEASE, &sources()).await.unwrap();
    assert_eq!(claimed.len(), 4);
    assert!(states(&db).await.values().all(|s| s == "processing"));
    let (c_processed, c_dead, c_released, c_reclaimed) = (
        claim_of(&claimed, processed),
        claim_of(&claimed, dead),
        claim_of(&claimed, released),
        claim_of(&claimed, reclaimed),
    );

    // processing --> processed, processing --> dead, processing --> pending (release, reclaim).
    assert!(
        store
            .relay_forward(c_processed, &forwarded())
            .await
            .unwrap()
    );
    assert!(store.relay_dead(c_dead, "topic empty").await.unwrap());
    assert_eq!(
        store.relay_release(&[c_released], None).await.unwrap(),
        [c_released]
    );
    db.exec(&format!(
        "UPDATE inbox SET lease_expires_at = clock_timestamp() - interval '1 second' WHERE id = '{reclaimed}'"
    ))
    .await;
    assert_eq!(store.relay_reclaim_expired().await.unwrap(), 1);
    let expected: BTreeMap<Uuid, String> = [
        (processed, "processed"),
        (dead, "dead"),
        (released, "pending"),
        (reclaimed, "pending"),
    ]
    .into_iter()
    .map(|(id, s)| (id, s.to_owned()))
    .collect();
    assert_eq!(states(&db).await, expected);

    // Put the old claims back on every row, with a live lease, as if a write had been lost: the
    // fenced statements must still refuse every row that is not `processing`.
    for (id, claim) in [
        (processed, c_processed),
        (dead, c_dead),
        (released, c_released),
        (reclaimed, c_reclaimed),
    ] {
        db.exec(&format!(
            "UPDATE inbox SET claim_token = '{}', lease_expires_at = clock_timestamp() + interval '1 hour' WHERE id = '{id}'",
            claim.token
        ))
        .await;
    }
    let stale = [c_processed, c_dead, c_released, c_reclaimed];
    for claim in stale {
        assert!(
            !store.relay_forward(claim, &forwarded()).await.unwrap(),
            "forward of a row that is not processing: {claim:?}"
        );
        assert!(
            !store.relay_dead(claim, "late").await.unwrap(),
            "dead of a row that is not processing: {claim:?}"
        );
    }
    assert!(
        store
            .relay_release(&stale, Some("late"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.relay_renew(&stale, LEASE).await.unwrap().is_empty());
    assert_eq!(
        states(&db).await,
        expected,
        "no write moved a finished or pending row"
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM outbox").await,
        1,
        "only the real forward wrote an outbox row"
    );

    // An expired lease left on a finished row: a reclaim never revives it.
    db.exec(
        "UPDATE inbox SET lease_expires_at = clock_timestamp() - interval '1 hour' \
         WHERE state IN ('processed', 'dead')",
    )
    .await;
    assert_eq!(store.relay_reclaim_expired().await.unwrap(), 0);
    // A claim takes only the two pending rows, never a processed or dead one.
    let again = store.relay_claim(10, LEASE, &sources()).await.unwrap();
    let mut taken: Vec<Uuid> = again.iter().map(|r| r.claim.id).collect();
    taken.sort();
    let mut pending = vec![released, reclaimed];
    pending.sort();
    assert_eq!(taken, pending);
    // A repeat of a finished row's key changes nothing (INB-50: no transition on a duplicate).
    let repeat = store
        .insert_batch(&[
            message("to-processed", Some("a1"), "{}"),
            message("to-dead", Some("a2"), "{}"),
        ])
        .await
        .unwrap();
    assert_eq!(repeat, [InsertOutcome::Duplicate, InsertOutcome::Duplicate]);
    let states_now = states(&db).await;
    assert_eq!(states_now[&processed], "processed");
    assert_eq!(states_now[&dead], "dead");
    db.drop().await;
}

/// INB-46: the relay claim orders rows by `scheduled_at`, then `created_at`; the id plays no
/// part before those two. Two messages of one aggregate stored in reverse publish order leave
/// in publish order.
#[tokio::test]
async fn inb_46_the_relay_claims_by_scheduled_at_then_created_at() {
    let (db, store) = migrated("inb46").await;
    // Ids in the reverse of the expected order, so an order by id would fail.
    let early = Uuid::from_u128(3);
    let tie_older = Uuid::from_u128(2);
    let tie_newer = Uuid::from_u128(1);
    db.exec(&format!(
        "INSERT INTO inbox (id, source, idempotency_key, payload, scheduled_at, created_at) VALUES \
         ('{tie_newer}', 'orders', 'k1', '{{}}', now() - interval '10 seconds', now() - interval '1 second'), \
         ('{tie_older}', 'orders', 'k2', '{{}}', now() - interval '10 seconds', now() - interval '5 seconds'), \
         ('{early}', 'orders', 'k3', '{{}}', now() - interval '20 seconds', now())"
    ))
    .await;
    let mut order = Vec::new();
    for _ in 0..3 {
        let claimed = store.relay_claim(1, LEASE, &sources()).await.unwrap();
        assert_eq!(claimed.len(), 1);
        order.push(claimed[0].claim.id);
    }
    assert_eq!(order, [early, tie_older, tie_newer]);
    let batch_order: Vec<Uuid> = {
        db.exec("UPDATE inbox SET state = 'pending', claim_token = NULL, lease_expires_at = NULL")
            .await;
        store
            .relay_claim(10, LEASE, &sources())
            .await
            .unwrap()
            .iter()
            .map(|r| r.claim.id)
            .collect()
    };
    assert_eq!(
        batch_order,
        [early, tie_older, tie_newer],
        "one batch, same order"
    );

    // One aggregate, stored in reverse publish order: the earlier publish time leaves first.
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let publish = |key: &str, ms_ago: i64| NewInboxRow {
        schedule: Schedule::AfterPublish {
            publish_epoch_ms: now_ms - ms_ago,
            delay: Duration::ZERO,
        },
        ..message(key, Some("order-9"), "{}")
    };
    let second = store_rows(&store, &[publish("published-second", 1_000)]).await[0];
    let first = store_rows(&store, &[publish("published-first", 5_000)]).await[0];
    let claimed = store.relay_claim(10, LEASE, &sources()).await.unwrap();
    assert_eq!(
        claimed.iter().map(|r| r.claim.id).collect::<Vec<_>>(),
        [first],
        "one row per aggregate, the earlier publish time"
    );
    assert!(
        store
            .relay_forward(claimed[0].claim, &forwarded())
            .await
            .unwrap()
    );
    let claimed = store.relay_claim(10, LEASE, &sources()).await.unwrap();
    assert_eq!(
        claimed.iter().map(|r| r.claim.id).collect::<Vec<_>>(),
        [second]
    );
    db.drop().await;
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

/// Inserts `n` inbox rows per (state, consumption), created 10 days ago.
async fn old_inbox_rows(db: &TestDb, n: usize) {
    db.exec(&format!(
        "INSERT INTO inbox (source, idempotency_key, payload, state, consumption, created_at, \
                            scheduled_at, claim_token, lease_expires_at) \
         SELECT 'orders', s || '-' || c || '-' || g, '{{}}', s, c, now() - interval '10 days', \
                now() - interval '10 days', \
                CASE WHEN s = 'processing' THEN gen_random_uuid() END, \
                CASE WHEN s = 'processing' THEN now() - interval '9 days' END \
         FROM unnest(ARRAY['pending', 'processing', 'processed', 'dead']) s, \
              unnest(ARRAY['push', 'pull']) c, generate_series(1, {n}) g"
    ))
    .await;
}

/// RET-3: retention never deletes a `pending` or `processing` row, whatever its age (push or
/// pull, an expired lease included), and never touches any other table: an outbox rule leaves
/// the inbox alone, an inbox rule leaves the outbox alone, and an application table with
/// QueueBox's column names is never touched.
#[tokio::test]
async fn ret_3_retention_never_deletes_pending_or_processing_and_no_other_table() {
    let (db, store) = migrated("ret3").await;
    old_inbox_rows(&db, 3).await;
    db.exec(
        "INSERT INTO outbox (topic, payload, state, created_at, updated_at, scheduled_at) \
         SELECT 't', '{}', s, now() - interval '10 days', now() - interval '10 days', \
                now() - interval '10 days' \
         FROM unnest(ARRAY['pending', 'processing', 'sent', 'dead']) s, generate_series(1, 3); \
         CREATE TABLE app_events (id serial PRIMARY KEY, state text, created_at timestamptz, \
                                  updated_at timestamptz); \
         INSERT INTO app_events (state, created_at, updated_at) \
         SELECT s, now() - interval '10 days', now() - interval '10 days' \
         FROM unnest(ARRAY['processed', 'dead', 'sent']) s;",
    )
    .await;
    let by_state = |table: &'static str| {
        let db = &db;
        async move {
            db.admin
                .query(
                    &format!("SELECT state, count(*) FROM {table} GROUP BY state ORDER BY state"),
                    &[],
                )
                .await
                .unwrap()
                .iter()
                .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
                .collect::<Vec<_>>()
        }
    };
    let outbox_before = by_state("outbox").await;
    let deleted = store
        .retention_delete(
            RetentionRule::InboxOlderThan(Duration::from_millis(1)),
            1_000,
        )
        .await
        .unwrap();
    assert_eq!(deleted, 12, "processed and dead, push and pull");
    assert_eq!(
        by_state("inbox").await,
        [("pending".to_owned(), 6), ("processing".to_owned(), 6)]
    );
    assert_eq!(
        by_state("outbox").await,
        outbox_before,
        "the inbox rule touched the outbox"
    );
    let inbox_after = by_state("inbox").await;
    for rule in [
        RetentionRule::OutboxOlderThan(Duration::from_millis(1)),
        RetentionRule::OutboxKeepNewest(1),
    ] {
        store.retention_delete(rule, 1_000).await.unwrap();
    }
    assert_eq!(
        by_state("outbox").await,
        [("pending".to_owned(), 3), ("processing".to_owned(), 3)]
    );
    assert_eq!(
        by_state("inbox").await,
        inbox_after,
        "the outbox rules touched the inbox"
    );
    assert_eq!(
        by_state("app_events").await,
        [
            ("dead".to_owned(), 1),
            ("processed".to_owned(), 1),
            ("sent".to_owned(), 1)
        ],
        "another table is never touched"
    );
    db.drop().await;
}

/// RET-8: two replicas' retention runs at the same time are safe: each DELETE re-checks its
/// conditions, no run fails, every eligible row is deleted exactly once (the counts add up),
/// and the other rows stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ret_8_two_concurrent_retention_runs_are_safe() {
    let (db, store) = migrated("ret8").await;
    old_inbox_rows(&db, 500).await;
    let eligible = count(
        &db,
        "SELECT count(*) FROM inbox WHERE state IN ('processed', 'dead')",
    )
    .await;
    assert_eq!(eligible, 2_000);
    let other = db.store().await;
    let run = |store: PgStore| {
        tokio::spawn(async move {
            let mut total = 0u64;
            let mut deletes = 0;
            loop {
                let n = store
                    .retention_delete(RetentionRule::InboxOlderThan(HOUR), 50)
                    .await
                    .expect("a concurrent DELETE never fails");
                total += n;
                deletes += 1;
                if n < 50 {
                    return (total, deletes);
                }
            }
        })
    };
    let (a, b) = (run(store), run(other));
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert_eq!(
        a.0 + b.0,
        2_000,
        "each row deleted exactly once: {a:?} {b:?}"
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM inbox WHERE state IN ('processed', 'dead')"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM inbox WHERE state IN ('pending', 'processing')"
        )
        .await,
        2_000
    );

    // A row that another session is changing while a DELETE runs is not deleted: the victim
    // read skips it, and the DELETE re-checks the state, so a requeue that commits afterwards
    // keeps its row.
    db.exec(
        "INSERT INTO inbox (source, idempotency_key, payload, state, created_at) VALUES \
         ('orders', 'requeued', '{}', 'dead', now() - interval '10 days'), \
         ('orders', 'finished', '{}', 'dead', now() - interval '10 days')",
    )
    .await;
    let (operator, connection) =
        tokio_postgres::connect(&support::base_url(), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    operator
        .batch_execute(&format!(
            "SET search_path TO \"{}\"; BEGIN; \
             UPDATE inbox SET state = 'pending' WHERE idempotency_key = 'requeued'",
            db.schema
        ))
        .await
        .unwrap();
    let third = db.store().await;
    let deleted = tokio::time::timeout(
        Duration::from_secs(3),
        third.retention_delete(RetentionRule::InboxOlderThan(HOUR), 50),
    )
    .await
    .expect("a DELETE never waits for a row another session holds")
    .unwrap();
    assert_eq!(deleted, 1, "only the row nobody holds");
    operator.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        third
            .retention_delete(RetentionRule::InboxOlderThan(HOUR), 50)
            .await
            .unwrap(),
        0,
        "the requeued row is pending now"
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM inbox WHERE idempotency_key = 'requeued' AND state = 'pending'"
        )
        .await,
        1
    );
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
