//! One hot key end to end (outbox.md OUT-13a, issue 16 item 4): the real `queuebox` binary, the
//! real PostgreSQL, a real HTTP receiver. Thousands of rows of one key go out in runs, across
//! two replicas and a `kill -9` of the one holding the key, in order at the receiver.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use support::pg::TestSchema;
use support::receiver::{Receiver, Reply, Request};
use support::service::Service;

const ROWS: i64 = 3000;

fn config(schema: &TestSchema, url: &str) -> String {
    format!(
        r#"database:
  url: "{db}"
  startupTimeoutMs: 10000
server:
  httpPort: 0
outbox:
  pollIntervalMs: 50
  claimTimeoutMs: 3000
  keyRunLength: 32
destinations:
  receiver:
    type: http
    baseUrl: {url}
routes:
  - topicPattern: "**"
    destination: receiver
"#,
        db = schema.queuebox_url()
    )
}

async fn count_state(schema: &TestSchema, state: &str) -> i64 {
    schema
        .client()
        .query_one("SELECT count(*) FROM outbox WHERE state = $1", &[&state])
        .await
        .unwrap()
        .get(0)
}

/// The `n` of each request, in arrival order.
fn numbers(requests: &[Request]) -> Vec<i64> {
    requests
        .iter()
        .map(|r| r.json()["n"].as_i64().expect("n"))
        .collect()
}

/// 3000 rows of one key; replica A alone takes the key and delivers part of it in runs, then B
/// starts and A is killed with SIGKILL during a publish, while it holds a run; B (and A's replacement) finish the
/// key after A's leases expire. At the receiver every row arrives, and no row arrives after a
/// later one: the sequence of `n` never goes back (a row A published but could not mark may
/// arrive twice, one right after the other, which is at-least-once delivery, OUT-46).
#[tokio::test(flavor = "multi_thread")]
async fn out_13a_one_hot_key_across_two_replicas_and_a_kill_9_arrives_in_order() {
    let schema = TestSchema::create("e2e_hotkey").await;
    // The 300th request hangs, so A is killed in the middle of a publish, holding its run.
    let receiver = Receiver::start(|_: &Request, seen| {
        if seen == 299 {
            Reply::status(200).after(Duration::from_secs(60))
        } else {
            Reply::status(200)
        }
    })
    .await;
    let cfg = config(&schema, &receiver.url());
    // A migrates the schema; the rows arrive in one commit.
    let a = Service::start("hotkey-a", &cfg);
    // Separate statements, so `sequence` follows `n` (SCH-31).
    let mut sql = String::from("BEGIN;");
    for n in 1..=ROWS {
        sql.push_str(&format!(
            "INSERT INTO outbox (topic, key, payload) VALUES ('order.updated', 'hot', '{{\"n\": {n}}}');"
        ));
    }
    sql.push_str("COMMIT;");
    schema.client().batch_execute(&sql).await.unwrap();
    receiver
        .wait_for(Duration::from_secs(600), "the first 300 deliveries", |r| {
            r.len() >= 300
        })
        .await;
    let b = Service::start("hotkey-b", &cfg);
    // A holds the key: B cannot claim any row of it while A's run is leased (OUT-13).
    a.kill_hard();
    let at_kill = receiver.count();
    assert!(
        count_state(&schema, "processing").await >= 1,
        "the killed replica left its run processing"
    );
    let a2 = Service::start("hotkey-a2", &cfg);
    receiver
        .wait_for(Duration::from_secs(600), "every row delivered", |r| {
            numbers(r).into_iter().collect::<BTreeSet<_>>().len() == ROWS as usize
        })
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while count_state(&schema, "sent").await != ROWS {
        assert!(std::time::Instant::now() < deadline, "every row sent");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let seen = numbers(&receiver.requests());
    let mut highest = 0;
    for (i, n) in seen.iter().enumerate() {
        assert!(
            *n >= highest,
            "request {i}: {n} arrived after {highest} (around: {:?})",
            &seen[i.saturating_sub(3)..(i + 3).min(seen.len())]
        );
        assert!(
            *n <= highest + 1,
            "request {i}: {n} skipped ahead of {highest}"
        );
        highest = *n;
    }
    assert_eq!(highest, ROWS);
    assert!(
        receiver.count() > at_kill,
        "the survivors delivered the rest"
    );
    let reclaimed = [&b, &a2]
        .iter()
        .map(|s| {
            s.metric("queuebox_outbox_messages_reclaimed_total")
                .unwrap_or(0.0)
        })
        .sum::<f64>();
    assert!(
        reclaimed >= 1.0,
        "the killed replica's run came back by the reclaim"
    );
    // Runs happened: a claim and its run claim each write one `claimed_at` for all their rows,
    // so the rows were claimed in far fewer statements than rows (one row per key in flight
    // would give 3000).
    let claims: i64 = schema
        .client()
        .query_one("SELECT count(DISTINCT claimed_at) FROM outbox", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        claims < ROWS / 4,
        "{claims} claim statements for {ROWS} rows"
    );
    assert_eq!(b.stop(), Some(0));
    assert_eq!(a2.stop(), Some(0));
    schema.drop().await;
}
