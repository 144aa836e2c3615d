//! The binary end to end on MariaDB / MySQL (docs/mysql.md): HTTP webhooks into the inbox, the
//! push relay into the outbox, the outbox poller out to an HTTP receiver, with two replicas on
//! one database and one of them killed with SIGKILL during the drain.

mod support;

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use support::mysql::TestDatabase;
use support::receiver::{Receiver, Reply};
use support::service::{Service, http_post, migrate_database};

const MESSAGES: usize = 600;
const AGGREGATES: usize = 10;

fn config(db: &TestDatabase, receiver: &Receiver) -> String {
    format!(
        r#"database:
  type: mysql
  url: "{db}"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  claimTimeoutMs: 2000
inbox:
  relay:
    pollIntervalMs: 50
    claimTimeoutMs: 2000
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    aggregateIdPath: $.orderId
    eventTypePath: $.type
destinations:
  receiver:
    type: http
    baseUrl: {url}
    timeoutMs: 1000
routes:
  - topicPattern: "**"
    destination: receiver
"#,
        db = db.queuebox_url(),
        url = receiver.url()
    )
}

async fn wait_count(db: &TestDatabase, sql: &str, expected: i64, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let n = db.count(sql).await;
        if n == expected {
            return;
        }
        assert!(Instant::now() < deadline, "{sql}: {n}, expected {expected}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// INB-10, RLY-3, RLY-13, OUT-36, OUT-46 on MySQL: 600 webhooks of 10 aggregates, posted to two
/// replicas in turn, each stored once; one replica is killed with SIGKILL while both relay and
/// deliver. Every message reaches the receiver (a redelivery keeps its X-Message-Id), each
/// aggregate in the order its webhooks were accepted, and the database ends with every inbox
/// row processed once and every outbox row sent.
#[tokio::test(flavor = "multi_thread")]
async fn mysql_two_replicas_webhook_to_receiver_in_order_and_kill_9_loses_nothing() {
    let db = TestDatabase::create("e2e").await;
    // A little work per delivery, so the drain is still going when the kill comes.
    let receiver = Receiver::start(|_, _| Reply::status(200).after(Duration::from_millis(3))).await;
    migrate_database(&format!(
        "database:\n  type: mysql\n  url: \"{}\"\n",
        db.queuebox_url()
    ));
    let cfg = config(&db, &receiver);
    let a = Service::start("my-e2e-a", &cfg);
    let b = Service::start("my-e2e-b", &cfg);
    let mut b = Some(b);
    for n in 0..MESSAGES {
        let body = format!(
            r#"{{"id": "evt-{n}", "orderId": "agg-{}", "type": "order.step", "n": {n}}}"#,
            n % AGGREGATES
        );
        // One at a time, so each webhook is stored before the next of its aggregate arrives.
        let port = match (&b, n % 2) {
            (Some(b), 1) => b.port,
            _ => a.port,
        };
        let answer = http_post(
            port,
            "/inbox/orders",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        );
        assert_eq!(answer.status, 202, "webhook {n}: {answer:?}");
        if n == MESSAGES / 2 {
            // Part-way: the repeat of a stored webhook is a duplicate on MySQL too.
            let again = http_post(
                a.port,
                "/inbox/orders",
                &[("Content-Type", "application/json")],
                body.as_bytes(),
            );
            assert_eq!(again.status, 200, "{again:?}");
        }
        if b.is_some() && receiver.count() >= 150 {
            b.take().expect("b runs").kill_hard();
        }
    }
    if let Some(b) = b.take() {
        receiver
            .wait_for(Duration::from_secs(60), "deliveries under way", |r| {
                r.len() >= 150
            })
            .await;
        b.kill_hard();
    }
    assert!(
        receiver.count() < MESSAGES,
        "the kill came during the drain ({} delivered)",
        receiver.count()
    );
    wait_count(
        &db,
        "SELECT COUNT(*) FROM outbox WHERE state = 'sent'",
        MESSAGES as i64,
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(
        db.count("SELECT COUNT(*) FROM inbox WHERE state = 'processed'")
            .await,
        MESSAGES as i64
    );
    assert_eq!(
        db.count(
            "SELECT COUNT(DISTINCT JSON_UNQUOTE(JSON_EXTRACT(headers, '$.\"x-inbox-id\"'))) \
             FROM outbox"
        )
        .await,
        MESSAGES as i64,
        "each inbox row exactly once in the outbox"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM outbox").await,
        MESSAGES as i64
    );

    let requests = receiver.requests();
    let mut seen_ids = HashSet::new();
    let mut delivered = HashSet::new();
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    for request in &requests {
        let id = request
            .header("x-message-id")
            .expect("X-Message-Id")
            .to_owned();
        let n = request.json()["n"].as_i64().expect("n");
        if !seen_ids.insert(id) {
            // A redelivery of a row the killed replica had published: same message id.
            assert!(delivered.contains(&n), "a repeat of a delivered message");
            continue;
        }
        assert!(delivered.insert(n), "message {n} under two message ids");
        let key = request.header("x-message-key").expect("key").to_owned();
        if let Some(previous) = last.insert(key.clone(), n) {
            assert!(
                n > previous,
                "aggregate {key}: {n} arrived after {previous}"
            );
        }
    }
    assert_eq!(
        delivered.len(),
        MESSAGES,
        "every webhook reached the receiver"
    );
    assert_eq!(a.stop(), Some(0));
    db.drop().await;
}
