//! Issue 17 defects 5 and 7 through the binary on PostgreSQL: while an outside session holds
//! `LOCK TABLE inbox`, the HTTP intake holds at most `inbox.maxPendingBytes` of bodies (the
//! requests beyond it get 503 with `Retry-After` at once), a request waiting for the database
//! gets 503 after `inbox.storageWaitMs` instead of hanging, readiness says the database is
//! `stuck`, and after the lock every message that a sender resends is stored exactly once.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::pg::TestSchema;
use support::service::Service;

/// 8 bodies of this size fit in the bound below, a 9th does not.
const BODY: usize = 500_000;
const PENDING: usize = 4_194_304;
const STORAGE_WAIT_MS: u64 = 1500;
const SENDERS: usize = 20;

/// A body of exactly `BODY` bytes with this id.
fn body(id: usize) -> Vec<u8> {
    let head = format!("{{\"id\":\"m{id}\",\"pad\":\"");
    let tail = "\"}";
    let mut bytes = head.into_bytes();
    bytes.resize(BODY - tail.len(), b'x');
    bytes.extend_from_slice(tail.as_bytes());
    bytes
}

#[derive(Debug)]
struct Outcome {
    status: u16,
    retry_after: Option<String>,
    body: String,
    took: Duration,
    /// Answered before the body was sent: the bound refused it on the declared length.
    before_body: bool,
}

/// Sends the head, and the body only if no answer came within a second: a request the bound
/// refuses is answered on its declared length, so its body is never sent (a server that closes
/// a connection with unread bytes resets it, and the answer could be lost).
fn post(port: u16, id: usize) -> Outcome {
    let started = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let body = body(id);
    write!(
        stream,
        "POST /inbox/orders HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut raw = Vec::new();
    let mut first = [0_u8; 4096];
    let before_body = match stream.read(&mut first) {
        Ok(n) if n > 0 => {
            raw.extend_from_slice(&first[..n]);
            true
        }
        _ => {
            stream.write_all(&body).unwrap();
            false
        }
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let _ = stream.read_to_end(&mut raw);
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let retry_after = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("retry-after")
            .then(|| value.trim().to_owned())
    });
    Outcome {
        status,
        retry_after,
        body: body.to_owned(),
        took,
        before_body,
    }
}

fn rss_high_water_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn issue_17_intake_memory_and_storage_wait_are_bounded_while_the_database_is_stuck() {
    let schema = TestSchema::create("intake_bounds").await;
    let yaml = format!(
        "database:\n  url: \"{}\"\nserver:\n  httpPort: 0\ninbox:\n  maxBodyBytes: 1048576\n  \
         maxPendingBytes: {PENDING}\n  storageWaitMs: {STORAGE_WAIT_MS}\n  relay:\n    enabled: false\n\
         sources:\n  orders:\n    path: /orders\n    idempotencyKeyPath: $.id\n    consumption: pull\n",
        schema.queuebox_url()
    );
    let mut service = Service::start("intake-bounds", &yaml);
    let port = service.port;
    assert_eq!(post(port, 0).status, 202, "a first message is stored");

    // An outside session holds the table: every insert waits (for QueueBox's own 5 s
    // lock_timeout, then fails), while `SELECT 1` still answers.
    let (locker, connection) =
        tokio_postgres::connect(&support::pg::server_url(), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    locker
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE {}.inbox IN ACCESS EXCLUSIVE MODE",
            schema.name
        ))
        .await
        .unwrap();

    let senders: Vec<_> = (1..=SENDERS)
        .map(|id| std::thread::spawn(move || (id, post(port, id))))
        .collect();
    // Readiness while the requests wait: `SELECT 1` answers, the intake's insert does not.
    tokio::time::sleep(Duration::from_millis(STORAGE_WAIT_MS + 2000)).await;
    let (ready_status, ready_body) = service.get("/health/ready");
    let outcomes: Vec<(usize, Outcome)> = senders.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(ready_status, 503, "{ready_body}");
    let ready: serde_json::Value = serde_json::from_str(&ready_body).unwrap();
    assert_eq!(
        ready["components"]["database"],
        serde_json::json!({"status": "down", "reason": "stuck"}),
        "{ready_body}"
    );

    let overloaded: Vec<_> = outcomes
        .iter()
        .filter(|(_, o)| o.body.contains("Too many requests waiting to be stored"))
        .collect();
    let timed_out: Vec<_> = outcomes
        .iter()
        .filter(|(_, o)| o.body.contains("The database did not answer in time"))
        .collect();
    for (id, outcome) in &outcomes {
        assert_eq!(outcome.status, 503, "m{id}: {outcome:?}");
        assert!(outcome.retry_after.is_some(), "m{id}: {outcome:?}");
    }
    // The bound holds exactly 8 bodies of 500,000 bytes; the other 12 never send theirs.
    assert_eq!(timed_out.len(), PENDING / BODY, "{outcomes:#?}");
    assert_eq!(overloaded.len(), SENDERS - PENDING / BODY, "{outcomes:#?}");
    for (id, outcome) in &overloaded {
        assert!(
            outcome.before_body,
            "m{id} was refused on its declared length"
        );
        assert_eq!(outcome.retry_after.as_deref(), Some("1"));
        assert!(
            outcome.took < Duration::from_millis(1000),
            "m{id}: {outcome:?}"
        );
    }
    for (id, outcome) in &timed_out {
        assert!(!outcome.before_body);
        assert_eq!(outcome.retry_after.as_deref(), Some("2"));
        // storageWaitMs, not the database's 5 s lock_timeout (nor a hang).
        assert!(
            outcome.took >= Duration::from_millis(STORAGE_WAIT_MS)
                && outcome.took < Duration::from_millis(4500),
            "m{id}: {outcome:?}"
        );
    }

    locker.batch_execute("COMMIT").await.unwrap();
    // After the lock: every sender sends again until it is told its message is stored; each
    // message is then in the inbox exactly once.
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in 1..=SENDERS {
        loop {
            let outcome = post(port, id);
            match outcome.status {
                202 | 200 => break,
                503 | 500 if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                _ => panic!("m{id} after the lock: {outcome:?}"),
            }
        }
    }
    let rows = schema
        .client()
        .query(
            "SELECT idempotency_key, count(*) FROM inbox GROUP BY idempotency_key",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), SENDERS + 1, "every message is stored");
    assert!(
        rows.iter().all(|r| r.get::<_, i64>(1) == 1),
        "each message exactly once"
    );
    let (status, body) = service.get("/health/ready");
    assert_eq!(status, 200, "readiness recovers after the lock: {body}");
    if let Some(kib) = rss_high_water_kib(service.pid()) {
        // Informative only: the assertion above is on the counts, not on the allocator.
        eprintln!("queuebox VmHWM during the run: {} MiB", kib / 1024);
    }
    service.drain_log();
    assert!(
        service.has_log("request(s) got 503 and are asked to come back"),
        "the bound's refusals are logged"
    );
    drop(service);
    schema.drop().await;
}
