//! Liveness beside another session's locks (issue 17 defect 2; outbox.md OUT-46, inbox.md
//! RLY-6, RLY-8): with the store's own session settings, no delivery-path statement waits
//! without a bound for a lock that a stalled replica or an operator holds, and the settings
//! that bound a frozen replica's open transaction are on every connection QueueBox opens.

use std::time::{Duration, Instant};

use queuebox_core::TableLayout;
use queuebox_store::{
    Consumption, IntakeStore, MigrateRequest, NewInboxRow, OutboxStore, RelayStore, Schedule,
    SchemaStore, StoreErrorKind, StoredState,
};
use queuebox_store_postgres::PgStore;
use uuid::Uuid;

use crate::support::TestDb;

const LEASE: Duration = Duration::from_secs(30);

/// A migrated schema and a store on it with QueueBox's own session settings (nothing added).
async fn migrated(name: &str) -> (TestDb, PgStore) {
    let db = TestDb::new(name).await;
    let store = db.store().await;
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    (db, store)
}

fn push_row(key: &str) -> NewInboxRow {
    NewInboxRow {
        raw_body: None,
        id: Uuid::now_v7(),
        source: "s".into(),
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

/// OUT-46, defect 2: the outbox reclaim skips an expired row that an outside session holds
/// `FOR UPDATE` (a frozen replica's open terminal write) and returns the others at once.
#[tokio::test]
async fn out_46_reclaim_skips_a_row_another_session_holds_for_update() {
    let (db, store) = migrated("live_reclaim").await;
    db.exec(
        "INSERT INTO outbox (topic, key, payload) \
         SELECT 't', 'k' || n, '{}' FROM generate_series(1, 3) n",
    )
    .await;
    let claimed = store.claim(10, Duration::ZERO).await.expect("claim");
    assert_eq!(claimed.len(), 3, "each row its own key");
    let held = claimed[0].claim.id.0;
    let holder = db.open_session().await;
    holder
        .execute("SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE", &[&held])
        .await
        .expect("hold the row");

    let started = Instant::now();
    let reclaimed = tokio::time::timeout(Duration::from_secs(3), store.reclaim_expired())
        .await
        .expect("the reclaim never waits for a row another session holds")
        .expect("reclaim");
    assert_eq!(reclaimed, 2, "every expired row but the held one");
    assert!(started.elapsed() < Duration::from_secs(3));

    holder.batch_execute("COMMIT").await.expect("commit");
    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 1);
    db.drop().await;
}

/// RLY-6, defect 2: a replica frozen inside its claim transaction holds the relay's claim lock;
/// another replica's claim fails as transient within the store's lock_timeout instead of waiting
/// for ever (its relay logs, waits the poll interval and tries again).
#[tokio::test]
async fn rly_6_a_claim_lock_held_by_a_frozen_session_is_a_bounded_transient_failure() {
    let (db, store) = migrated("live_claimlock").await;
    store.insert_batch(&[push_row("a")]).await.expect("store");
    let frozen = db.open_session().await;
    frozen
        .batch_execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('queuebox_inbox_claim_' || 'inbox', 0))",
        )
        .await
        .expect("take the claim lock");

    let started = Instant::now();
    let err = tokio::time::timeout(
        Duration::from_secs(20),
        store.relay_claim(10, LEASE, &["s".to_owned()]),
    )
    .await
    .expect("a claim never waits without a bound for the claim lock")
    .expect_err("the claim lock is held");
    let waited = started.elapsed();
    assert_eq!(err.kind(), StoreErrorKind::Transient, "{err}");
    assert!(
        (Duration::from_secs(4)..Duration::from_secs(8)).contains(&waited),
        "bounded by lock_timeout (5 s): waited {waited:?}"
    );

    frozen.batch_execute("COMMIT").await.expect("commit");
    let rows = store
        .relay_claim(10, LEASE, &["s".to_owned()])
        .await
        .expect("claim");
    assert_eq!(rows.len(), 1);
    db.drop().await;
}

/// Defect 2: the session settings QueueBox relies on are set on its own connections; the
/// `options` of `database.url` come after them and win.
#[tokio::test]
async fn queuebox_sets_lock_idle_and_keepalive_settings_on_its_sessions() {
    let (db, store) = migrated("live_settings").await;
    let client = store.pool().get().await.expect("a pooled connection");
    let show = |name: &'static str| {
        let client = &client;
        async move {
            let row = client
                .query_one(&format!("SHOW {name}"), &[])
                .await
                .expect("show");
            row.get::<_, String>(0)
        }
    };
    assert_eq!(show("lock_timeout").await, "5s");
    assert_eq!(show("idle_in_transaction_session_timeout").await, "10s");
    // TCP only: the test server is reached over 127.0.0.1.
    assert_eq!(show("tcp_keepalives_idle").await, "30");
    assert_eq!(show("tcp_keepalives_interval").await, "10");
    assert_eq!(show("tcp_keepalives_count").await, "3");
    drop(client);

    let mut t = crate::support::target(&db.schema);
    t.options = Some(format!("-c search_path={} -c lock_timeout=250", db.schema));
    let own = PgStore::connect(&crate::support::config_for(
        t,
        TableLayout::default(),
        10_000,
    ))
    .await
    .expect("connect");
    let client = own.pool().get().await.expect("a pooled connection");
    let row = client.query_one("SHOW lock_timeout", &[]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "250ms", "the url's options win");
    db.drop().await;
}

/// Defect 2: the server ends a session left idle inside a transaction (a frozen replica), so
/// the row it holds is free again for every other replica.
#[tokio::test]
async fn a_session_frozen_inside_a_transaction_is_ended_and_its_row_lock_released() {
    let (db, store) = migrated("live_idle").await;
    db.exec("INSERT INTO outbox (topic, key, payload) VALUES ('t', 'k', '{}')")
        .await;
    let claimed = store.claim(1, Duration::ZERO).await.expect("claim");
    let id = claimed[0].claim.id.0;
    // A connection of the store itself, as a frozen replica would hold it: in a transaction,
    // with a row lock, then silent.
    let frozen = store.pool().get().await.expect("a pooled connection");
    frozen
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM outbox WHERE id = '{id}' FOR UPDATE"
        ))
        .await
        .expect("hold the row");
    let other = db.store().await;
    assert_eq!(other.reclaim_expired().await.expect("reclaim"), 0, "held");
    let started = Instant::now();
    loop {
        if other.reclaim_expired().await.expect("reclaim") == 1 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the frozen session still holds the row after {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(8),
        "released by idle_in_transaction_session_timeout (10 s), not earlier: {waited:?}"
    );
    assert!(frozen.simple_query("SELECT 1").await.is_err(), "ended");
    db.drop().await;
}
