//! Lock conflicts on MySQL / MariaDB are transient failures that change nothing, and the same
//! call succeeds when tried again (the engine's writer retries a failed terminal write after
//! 1 s, the claim after its poll interval): a deadlock (1213) and a lock wait timeout (1205),
//! provoked by a second session on the real server. Also the migration lock (SCH-47).

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use queuebox_core::TableLayout;
use queuebox_store::conformance::NewOutboxRow;
use queuebox_store::{
    Claim, MigrateRequest, OutboxStore, SchemaStore, StoreError, StoreErrorKind, TerminalWrite,
};
use queuebox_store_mysql::MysqlStore;

use crate::support::{TestDb, config_for, target};

const LEASE: Duration = Duration::from_secs(60);

/// A migrated database with two due keyless rows, both claimed by `store`, in claim order.
async fn two_claimed(name: &str) -> (TestDb, MysqlStore, Vec<Claim>) {
    use queuebox_store::conformance::ConformanceDatabase;
    let db = TestDb::new(name).await;
    let store = db.store().await;
    store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate");
    db.insert_outbox(
        &TableLayout::default(),
        &[NewOutboxRow::new("t"), NewOutboxRow::new("t")],
    )
    .await;
    let claimed = store.claim(10, LEASE).await.expect("claim");
    assert_eq!(claimed.len(), 2);
    let claims = claimed.iter().map(|r| r.claim).collect();
    (db, store, claims)
}

async fn states(db: &TestDb) -> Vec<(String, Option<String>)> {
    db.conn()
        .await
        .query("SELECT state, claim_token FROM outbox ORDER BY sequence")
        .await
        .expect("read states")
}

/// A deadlock between the store's terminal write and another session: the store's small
/// transaction is the victim (InnoDB rolls back the one that changed fewer rows), its answer is
/// a transient error, no row changed, and the same write succeeds once the other session is
/// done. Nothing is lost: both rows end `sent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_41_a_deadlock_is_transient_changes_nothing_and_the_retry_writes_every_row() {
    let (db, store, claims) = two_claimed("deadlock").await;
    let (a, b) = (claims[0], claims[1]);
    db.exec("CREATE TABLE heavy (n INT)").await;
    let mut other = db.open_session().await;
    other.query_drop("BEGIN").await.expect("begin");
    // The other transaction has written many rows, so it is never the deadlock's victim.
    other
        .query_drop(
            "INSERT INTO heavy WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s \
             WHERE n < 1000) SELECT n FROM s",
        )
        .await
        .expect("write many rows");
    other
        .exec_drop(
            "SELECT id FROM outbox WHERE id = ? FOR UPDATE",
            (b.id.0.to_string(),),
        )
        .await
        .expect("lock row b");
    // The store locks a (the first claim of its batch), then waits for b.
    let writer = store.clone();
    let finish = tokio::spawn(async move {
        writer
            .finish(&[
                TerminalWrite::Sent { claim: a },
                TerminalWrite::Sent { claim: b },
            ])
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Now the other session wants a: a cycle, which InnoDB breaks at once.
    other
        .exec_drop(
            "SELECT id FROM outbox WHERE id = ? FOR UPDATE",
            (a.id.0.to_string(),),
        )
        .await
        .expect("the other session gets row a once the store's transaction is rolled back");
    let err = finish
        .await
        .expect("join")
        .expect_err("the store's transaction is the victim");
    assert_eq!(err.kind(), StoreErrorKind::Transient, "{err}");
    assert!(err.to_string().contains("MySQL error 1213"), "{err}");
    other.query_drop("COMMIT").await.expect("commit");
    let _ = other.disconnect().await;
    let tokens: Vec<Option<String>> = states(&db).await.into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        states(&db)
            .await
            .iter()
            .map(|(s, _)| s.as_str())
            .collect::<Vec<_>>(),
        vec!["processing", "processing"],
        "the failed write changed nothing"
    );
    assert!(tokens.iter().all(Option::is_some));
    let written = store
        .finish(&[
            TerminalWrite::Sent { claim: a },
            TerminalWrite::Sent { claim: b },
        ])
        .await
        .expect("the retry succeeds");
    assert_eq!(written, vec![a, b]);
    assert_eq!(
        states(&db).await,
        vec![("sent".to_owned(), None), ("sent".to_owned(), None)]
    );
    db.drop().await;
}

/// A row lock held past `innodb_lock_wait_timeout` (error 1205): the renew gives up after the
/// wait with a transient error, the lease is unchanged, and the renew succeeds after the lock is
/// gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_40_a_lock_wait_timeout_is_transient_and_the_retry_renews() {
    let (db, _store, claims) = two_claimed("lockwait").await;
    let short = MysqlStore::connect_with_session(
        &config_for(target(&db.database), TableLayout::default(), 10_000),
        &["SET SESSION innodb_lock_wait_timeout = 1".to_owned()],
    )
    .await
    .expect("connect");
    let lease_of = async |db: &TestDb| -> Option<String> {
        db.conn()
            .await
            .exec_first(
                "SELECT CAST(lease_expires_at AS CHAR) FROM outbox WHERE id = ?",
                (claims[0].id.0.to_string(),),
            )
            .await
            .expect("read the lease")
    };
    let before = lease_of(&db).await;
    let mut other = db.open_session().await;
    other.query_drop("BEGIN").await.expect("begin");
    other
        .exec_drop(
            "SELECT id FROM outbox WHERE id = ? FOR UPDATE",
            (claims[0].id.0.to_string(),),
        )
        .await
        .expect("lock the row");
    let started = Instant::now();
    let err: StoreError = short
        .renew(&claims[..1], LEASE)
        .await
        .expect_err("the row is locked");
    assert_eq!(err.kind(), StoreErrorKind::Transient, "{err}");
    assert!(err.to_string().contains("MySQL error 1205"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        lease_of(&db).await,
        before,
        "the failed renew changed nothing"
    );
    other.query_drop("COMMIT").await.expect("commit");
    let _ = other.disconnect().await;
    let renewed = short.renew(&claims[..1], LEASE).await.expect("the retry");
    assert_eq!(renewed, vec![claims[0]]);
    assert_ne!(lease_of(&db).await, before);
    db.drop().await;
}

/// SCH-47: while another session holds the named lock `queuebox_migrate`, migration waits
/// `database.startupTimeoutMs` and fails with the lock message, changing nothing; once the lock
/// is released it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sch_47_migration_waits_for_the_named_lock_then_gives_up() {
    let db = TestDb::new("migratelock").await;
    let mut other = db.open_session().await;
    // The lock is server-wide, and other tests on the shared server migrate their own
    // databases at the same time: wait for it rather than fail when one holds it a moment.
    let got: Option<i64> = other
        .query_first("SELECT GET_LOCK('queuebox_migrate', 30)")
        .await
        .expect("take the lock");
    assert_eq!(got, Some(1));
    let store = MysqlStore::connect(&config_for(
        target(&db.database),
        TableLayout::default(),
        1_200,
    ))
    .await
    .expect("connect");
    let started = Instant::now();
    let err = store
        .migrate(&MigrateRequest::default())
        .await
        .expect_err("the lock is held");
    assert!(started.elapsed() >= Duration::from_millis(1_100));
    assert_eq!(
        err.to_string(),
        "Another process holds the migration lock; QueueBox waited 1200 ms. Nothing changed."
    );
    let tables: Vec<String> = db.conn().await.query("SHOW TABLES").await.expect("tables");
    assert!(tables.is_empty(), "nothing changed: {tables:?}");
    other
        .query_drop("SELECT RELEASE_LOCK('queuebox_migrate')")
        .await
        .expect("release");
    let report = store
        .migrate(&MigrateRequest::default())
        .await
        .expect("migrate after the release");
    assert_eq!(
        report.applied,
        queuebox_store::BUNDLED_VERSIONS
            .iter()
            .map(|v| v.version)
            .collect::<Vec<_>>()
    );
    // The lock went back: another session takes it at once.
    let again: Option<i64> = other
        .query_first("SELECT GET_LOCK('queuebox_migrate', 0)")
        .await
        .expect("take the lock again");
    assert_eq!(again, Some(1));
    let _ = other.disconnect().await;
    db.drop().await;
}
