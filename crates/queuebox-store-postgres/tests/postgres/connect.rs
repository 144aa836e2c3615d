//! Connecting and waiting for the database (config.md CFG-37/40/43, schema.md SCH-8, SCH-57).

use std::time::{Duration, Instant};

use queuebox_core::database::PgSslMode;
use queuebox_core::{Secret, TableLayout};
use queuebox_store::{SchemaStore, StoreAction, StoreError};
use queuebox_store_postgres::PgStore;

use crate::support::{TestDb, config_for, target};

#[tokio::test]
async fn sch_57_database_down_gives_host_port_reason_without_password() {
    let mut down = target("public");
    down.host = "127.0.0.1".into();
    down.port = 1;
    down.password = Secret::new("s3cr3t-Pa55");
    let config = config_for(down, TableLayout::default(), 1_500);
    let started = Instant::now();
    let err = PgStore::connect(&config)
        .await
        .expect_err("nobody listens on port 1");
    let waited = started.elapsed();
    let text = err.startup_line();
    assert!(
        text.starts_with("QueueBox could not connect to the database. Reason: 127.0.0.1:1 did not answer within 1500 ms: "),
        "{text}"
    );
    assert!(!text.contains("s3cr3t-Pa55"), "{text}");
    assert!(!text.contains("postgres://"), "{text}");
    assert!(matches!(err, StoreError::NotReachable { .. }));
    assert!(
        waited >= Duration::from_millis(1_400),
        "gave up after {waited:?}"
    );
    assert!(waited < Duration::from_secs(4), "waited {waited:?}");
}

#[tokio::test]
async fn sch_8_application_name_and_options_reach_the_session() {
    let db = TestDb::new("sch8").await;
    let mut t = target(&db.schema);
    t.application_name = "queuebox-test-sch8".into();
    let store = PgStore::connect(&config_for(t, TableLayout::default(), 10_000))
        .await
        .expect("connect");
    let client = store.pool().get().await.expect("pooled connection");
    let row = client
        .query_one(
            "SELECT current_setting('application_name'), current_schema()",
            &[],
        )
        .await
        .expect("query");
    assert_eq!(row.get::<_, String>(0), "queuebox-test-sch8");
    assert_eq!(row.get::<_, String>(1), db.schema);
    drop(client);
    store.ping().await.expect("ping");
    db.drop().await;
}

/// Whether the test server offers TLS at all (Debian's package does, with a snakeoil
/// certificate); the TLS tests need it.
async fn server_has_ssl(db: &TestDb) -> bool {
    let row = db.admin.query_one("SHOW ssl", &[]).await.expect("show ssl");
    row.get::<_, String>(0) == "on"
}

#[tokio::test]
async fn cfg_40_sslmode_require_encrypts_without_checking_the_certificate() {
    let db = TestDb::new("cfg40req").await;
    assert!(
        server_has_ssl(&db).await,
        "the test server must offer TLS (ssl = on)"
    );
    let mut t = target(&db.schema);
    t.sslmode = PgSslMode::Require;
    let store = PgStore::connect(&config_for(t, TableLayout::default(), 10_000))
        .await
        .expect("connect with TLS");
    let client = store.pool().get().await.expect("pooled connection");
    let ssl: bool = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("query")
        .get(0);
    assert!(ssl, "the connection is not encrypted");
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn cfg_40_sslmode_verify_full_rejects_an_untrusted_certificate() {
    let db = TestDb::new("cfg40full").await;
    assert!(
        server_has_ssl(&db).await,
        "the test server must offer TLS (ssl = on)"
    );
    let mut t = target(&db.schema);
    t.sslmode = PgSslMode::VerifyFull;
    let err = PgStore::connect(&config_for(t, TableLayout::default(), 800))
        .await
        .expect_err("a self-signed certificate is not trusted");
    assert_eq!(err.action(), StoreAction::Connect);
    assert!(err.to_string().contains("certificate"), "{err}");
    db.drop().await;
}
