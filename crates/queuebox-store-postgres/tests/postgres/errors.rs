//! The kind of a store failure (`StoreError::kind`), from failures provoked on the real server:
//! a lock wait past `lock_timeout`, a statement past `statement_timeout`, a real deadlock, a
//! session the server ends, and a pool that has no connection to lend in time.

use std::time::Duration;

use queuebox_core::TableLayout;
use queuebox_store::{
    Consumption, ForwardedRow, IntakeStore, MigrateRequest, NewInboxRow, OutboxStore, RelayStore,
    Schedule, SchemaStore, StoreError, StoreErrorKind, StoredState,
};
use queuebox_store_postgres::PgStore;
use uuid::Uuid;

use crate::support::{TestDb, config_for, target};

const LEASE: Duration = Duration::from_secs(30);

/// A migrated schema and a store on it whose sessions carry these extra settings.
async fn store_with_settings(name: &str, settings: &str) -> (TestDb, PgStore) {
    let db = TestDb::new(name).await;
    let mut t = target(&db.schema);
    t.options = Some(format!("-c search_path={} {settings}", db.schema));
    t.application_name = format!("qb-{}", db.schema);
    let mut config = config_for(t, TableLayout::default(), 10_000);
    config.pool_size = 2;
    let store = PgStore::connect(&config).await.expect("connect");
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    (db, store)
}

fn assert_kind(err: &StoreError, kind: StoreErrorKind, sqlstate: &str) {
    assert_eq!(err.kind(), kind, "{err}");
    assert!(err.to_string().contains(sqlstate), "{err}");
}

#[tokio::test]
async fn lock_timeout_55p03_is_transient_and_the_next_call_succeeds() {
    let (db, store) = store_with_settings("err_lock", "-c lock_timeout=100").await;
    db.exec("BEGIN; LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE")
        .await;
    let err = store
        .claim(10, LEASE)
        .await
        .expect_err("the table is locked");
    assert_kind(&err, StoreErrorKind::Transient, "SQLSTATE 55P03");
    db.exec("ROLLBACK").await;
    assert_eq!(store.claim(10, LEASE).await.expect("claim").len(), 0);
    db.drop().await;
}

#[tokio::test]
async fn statement_timeout_57014_is_transient() {
    let (db, store) = store_with_settings("err_stmt", "-c statement_timeout=100").await;
    db.exec("BEGIN; LOCK TABLE inbox IN ACCESS EXCLUSIVE MODE")
        .await;
    let err = store
        .relay_reclaim_expired()
        .await
        .expect_err("the statement waits past its timeout");
    assert_kind(&err, StoreErrorKind::Transient, "SQLSTATE 57014");
    db.exec("ROLLBACK").await;
    db.drop().await;
}

fn push_row(key: &str) -> NewInboxRow {
    NewInboxRow {
        raw_body: None,
        id: Uuid::now_v7(),
        source: "orders".into(),
        idempotency_key: key.into(),
        aggregate_id: None,
        event_type: None,
        payload: "{}".into(),
        headers: "{}".into(),
        consumption: Consumption::Push,
        correlation_id: None,
        schedule: Schedule::AfterReceipt {
            delay: Duration::ZERO,
        },
        state: StoredState::Pending,
        last_error: None,
    }
}

// Several threads: the forward waits on the server while the test drives the other side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_40p01_is_transient_and_rolls_the_forward_back() {
    let (db, store) = store_with_settings("err_deadlock", "").await;
    store.insert_batch(&[push_row("a")]).await.expect("insert");
    let claimed = store
        .relay_claim(1, LEASE, &["orders".to_owned()])
        .await
        .expect("claim");
    let claim = claimed[0].claim;
    let outbox_id = Uuid::now_v7();
    // The test's transaction holds the inbox row; the forward inserts its outbox row, then
    // waits for the inbox row; the test then inserts the same outbox id and waits for the
    // forward: a cycle, which the server breaks in the transaction that waited first.
    db.exec(&format!(
        "BEGIN; UPDATE inbox SET attempt = attempt WHERE id = '{}'",
        claim.id
    ))
    .await;
    let forwarding = {
        let store = store.clone();
        tokio::spawn(async move {
            let row = ForwardedRow {
                id: outbox_id,
                topic: "t".into(),
                key: None,
                payload: "{}".into(),
                headers: "{}".into(),
                max_attempts: 5,
            };
            store.relay_forward(claim, &row).await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    db.exec(&format!(
        "INSERT INTO outbox (id, topic, payload) VALUES ('{outbox_id}', 't', '{{}}')"
    ))
    .await;
    db.exec("ROLLBACK").await;
    let err = forwarding
        .await
        .expect("the forward task")
        .expect_err("the forward is the deadlock victim");
    assert_kind(&err, StoreErrorKind::Transient, "SQLSTATE 40P01");
    let outbox: i64 = db
        .admin
        .query_one("SELECT count(*) FROM outbox", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(outbox, 0, "the forward's outbox row rolled back with it");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_server_ends_is_an_outage() {
    let (db, store) = store_with_settings("err_term", "").await;
    db.exec("BEGIN; LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE")
        .await;
    let claiming = {
        let store = store.clone();
        tokio::spawn(async move { store.claim(10, LEASE).await })
    };
    // Wait until the claim waits on the lock, then end its session.
    let app = format!("qb-{}", db.schema);
    let mut ended = 0;
    for _ in 0..100 {
        ended = db
            .admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = $1 AND wait_event_type = 'Lock'",
                &[&app],
            )
            .await
            .expect("terminate")
            .len();
        if ended > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(ended, 1, "the claim's session was waiting on the lock");
    let err = claiming
        .await
        .expect("the claim task")
        .expect_err("its session ended");
    assert_eq!(err.kind(), StoreErrorKind::Outage, "{err}");
    db.exec("ROLLBACK").await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_pooled_connection_in_time_is_an_outage() {
    let db = TestDb::new("err_pool").await;
    let mut config = config_for(target(&db.schema), TableLayout::default(), 10_000);
    config.pool_size = 1;
    config.connection_timeout_ms = 200;
    let store = PgStore::connect(&config).await.expect("connect");
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    db.exec("BEGIN; LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE")
        .await;
    // The first claim holds the only connection while it waits on the lock.
    let holding = {
        let store = store.clone();
        tokio::spawn(async move { store.claim(10, LEASE).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let err = store
        .pending_stats()
        .await
        .expect_err("no connection is free");
    assert_eq!(err.kind(), StoreErrorKind::Outage, "{err}");
    assert!(
        err.to_string()
            .contains("timed out waiting for a database connection"),
        "{err}"
    );
    db.exec("ROLLBACK").await;
    holding.await.expect("task").expect("the first claim ends");
    db.drop().await;
}

#[tokio::test]
async fn a_database_nobody_answers_for_is_an_outage() {
    let mut down = target("public");
    down.port = 1;
    let err = PgStore::connect(&config_for(down, TableLayout::default(), 300))
        .await
        .expect_err("nobody listens on port 1");
    assert_eq!(err.kind(), StoreErrorKind::Outage, "{err}");
}
