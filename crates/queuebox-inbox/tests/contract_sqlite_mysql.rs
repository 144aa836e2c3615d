//! The pull contract cases of pull.md §14 (clients/contract/cases.json) on SQLite (a temporary
//! file database) and on MySQL/MariaDB (a database per test), one test per case id and database,
//! named `sqlite::pull_c<N>_…` and `mysql::pull_c<N>_…`. A case that does not run on a database
//! (PULL-76) has a test there that is `#[ignore]`d with the reason. The unit cases that involve no
//! database (C30, C31, C32) and the release case (C14, PostgreSQL) are proven in tests/contract.rs.

mod embedded;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use embedded::{
    Captured, Db, Kind, NewRow, Probe, Shared, spawn_run, spawn_run_batched, stop_and_join,
};
use queuebox_inbox::{
    ConnectionSource, DefaultRetryPolicy, FailureAction, InboxMessage, Purpose, RetryPolicy,
    Schema, SqlValue as V, Worker, batch_handler_fn, handler_fn,
};
use uuid::Uuid;

const SECOND: Duration = Duration::from_secs(1);

type Seen = Arc<Mutex<Vec<InboxMessage>>>;

fn seen() -> Seen {
    Arc::new(Mutex::new(Vec::new()))
}

/// A handler that records each message and, when `insert`, writes an application row.
fn recording(
    seen: Seen,
    insert: bool,
    fail: Option<&'static str>,
    sleep: Duration,
) -> impl queuebox_inbox::Handler {
    handler_fn(move |m, tx, _cancel| {
        let seen = seen.clone();
        Box::pin(async move {
            seen.lock().unwrap().push(m.clone());
            if insert {
                tx.execute(
                    "INSERT INTO app_rows (message_id) VALUES (?)",
                    &[m.id.into()],
                )
                .await?;
            }
            tokio::time::sleep(sleep).await;
            match fail {
                Some(text) => Err(text.into()),
                None => Ok(()),
            }
        })
    })
}

fn policy(max: u32, base: u64, maxd: u64) -> Arc<dyn RetryPolicy> {
    Arc::new(
        DefaultRetryPolicy::new(
            max,
            Duration::from_millis(base),
            Duration::from_millis(maxd),
            0.0,
        )
        .unwrap(),
    )
}

/// A handler that waits on its cancellation signal (and records that it started).
fn waits_for_cancel(started: Arc<AtomicUsize>) -> impl queuebox_inbox::Handler {
    handler_fn(move |_m, _tx, cancel| {
        let started = started.clone();
        Box::pin(async move {
            started.fetch_add(1, Ordering::SeqCst);
            cancel.cancelled().await;
            Err("cancelled".into())
        })
    })
}

async fn wait_count(n: &AtomicUsize, at_least: usize) {
    let end = Instant::now() + 10 * SECOND;
    while n.load(Ordering::SeqCst) < at_least && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(n.load(Ordering::SeqCst) >= at_least, "handler started");
}

async fn wait_log(logs: &Captured, text: &str, within: Duration) -> bool {
    let end = Instant::now() + within;
    while !logs.text().contains(text) {
        if Instant::now() > end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

type Windows = Arc<Mutex<Vec<(String, Instant, Instant)>>>;

fn windowed(
    windows: Windows,
    busy: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
) -> impl queuebox_inbox::Handler {
    handler_fn(move |m, _tx, _| {
        let (windows, busy, peak) = (windows.clone(), busy.clone(), peak.clone());
        Box::pin(async move {
            let now = busy.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            let start = Instant::now();
            tokio::time::sleep(Duration::from_millis(200)).await;
            busy.fetch_sub(1, Ordering::SeqCst);
            windows
                .lock()
                .unwrap()
                .push((m.idempotency_key.clone(), start, Instant::now()));
            Ok(())
        })
    })
}

fn counters() -> (Windows, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    )
}

/// PULL-C1; also proves PULL-6 and PULL-27 (UUIDs as lower-case text and UTC times round-trip),
/// PULL-54 and
/// PULL-55 (JSON text columns are parsed; nullable fields arrive as None, empty headers empty).
async fn c1(kind: Kind) {
    let db = Db::new(kind).await;
    let mut full = NewRow::new("key-full").aggregate("agg-1");
    full.event_type = Some("order.created".into());
    full.payload = serde_json::json!({"n": 1, "text": "hé"});
    full.headers = serde_json::json!({"x-tenant": "acme", "content-type": "application/json"});
    full.correlation_id = Some("corr-1".into());
    let full_id = db.insert(full).await;
    let bare_id = db.insert(NewRow::new("key-bare").created(-59_000)).await;
    let s = seen();
    let w = db.worker(db.opts());
    let run = spawn_run(&w, recording(s.clone(), false, None, Duration::ZERO));
    assert!(db.wait_all("processed", 10 * SECOND).await);
    stop_and_join(&w, run).await;
    let got = s.lock().unwrap().clone();
    let full = got.iter().find(|m| m.id == full_id).unwrap();
    assert_eq!(full.source, db.source_name("s"));
    assert_eq!(full.idempotency_key, "key-full");
    assert_eq!(full.aggregate_id.as_deref(), Some("agg-1"));
    assert_eq!(full.event_type.as_deref(), Some("order.created"));
    assert_eq!(full.payload, serde_json::json!({"n": 1, "text": "hé"}));
    assert_eq!(full.correlation_id.as_deref(), Some("corr-1"));
    assert_eq!(
        full.headers.get("x-tenant").map(String::as_str),
        Some("acme")
    );
    assert_eq!(
        full.headers.get("content-type").map(String::as_str),
        Some("application/json")
    );
    assert_eq!(full.headers.len(), 2);
    assert_eq!(full.attempt, 0);
    let stored = embedded::time(&db.created_at(full_id).await);
    assert_eq!(full.created_at, stored);
    let bare = got.iter().find(|m| m.id == bare_id).unwrap();
    assert_eq!(
        (
            bare.aggregate_id.clone(),
            bare.event_type.clone(),
            bare.correlation_id.clone()
        ),
        (None, None, None)
    );
    assert!(bare.headers.is_empty());
    assert_eq!(bare.attempt, 0);
    assert!(!format!("{full:?}").contains("token"));
}

/// PULL-C2; also proves PULL-40/41 (Complete inside the handler transaction, committed with it).
async fn c2(kind: Kind) {
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let w = db.worker(db.opts());
    let run = spawn_run(&w, recording(seen(), true, None, Duration::ZERO));
    let snap = db.wait_state(id, "processed", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    assert_eq!(db.app_rows(id).await, 1);
    assert_eq!(snap.state, "processed");
    assert!(snap.processed_at_set && snap.claim_token.is_none() && !snap.lease_set);
}

/// PULL-C3; also proves PULL-46 (the failure write lands outside the rolled-back transaction).
async fn c3(kind: Kind) {
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let w = db.worker(db.opts());
    let run = spawn_run(&w, recording(seen(), true, Some("boom"), Duration::ZERO));
    let snap = db.wait_for(id, 10 * SECOND, |s| s.attempt == 1).await;
    stop_and_join(&w, run).await;
    assert_eq!(db.app_rows(id).await, 0);
    assert_ne!(snap.state, "processed");
    assert_eq!(snap.attempt, 1);
}

/// PULL-C4; also proves PULL-9 and PULL-27 (Complete reads the latest committed row, so it sees
/// the thief's token under MySQL's REPEATABLE READ default).
async fn c4(kind: Kind) {
    let db = Arc::new(Db::new(kind).await);
    let id = db.insert(NewRow::new("a")).await;
    let mut o = db.opts();
    o.lease = Duration::from_millis(600_000);
    let w = db.worker(o);
    let thief = Arc::new(Mutex::new(None));
    let (db2, thief2) = (db.clone(), thief.clone());
    let h = handler_fn(move |m, tx, _| {
        let (db, thief) = (db2.clone(), thief2.clone());
        Box::pin(async move {
            // Read first, so the handler transaction has its snapshot before the theft.
            tx.query("SELECT count(*) FROM app_rows", &[]).await?;
            *thief.lock().unwrap() = Some(db.steal(m.id).await);
            tx.execute(db.app_insert(), &[m.id.into()]).await?;
            Ok(())
        })
    });
    let run = spawn_run(&w, h);
    let end = Instant::now() + 10 * SECOND;
    while thief.lock().unwrap().is_none() && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop_and_join(&w, run).await;
    let snap = db.row(id).await;
    assert_eq!(db.app_rows(id).await, 0);
    assert_eq!(snap.state, "processing");
    assert_eq!(snap.claim_token, *thief.lock().unwrap());
}

/// PULL-C5; also proves PULL-18 (GET_LOCK / BEGIN IMMEDIATE serialize the claims: no row goes to
/// two workers).
async fn c5(kind: Kind) {
    let db = Db::new(kind).await;
    let ids = db.insert_n(20).await;
    let mut o = db.opts();
    o.batch_size = 3;
    let s = seen();
    let (w1, w2) = (db.worker(o.clone()), db.worker(o));
    let r1 = spawn_run(&w1, recording(s.clone(), false, None, Duration::ZERO));
    let r2 = spawn_run(&w2, recording(s.clone(), false, None, Duration::ZERO));
    assert!(db.wait_all("processed", 30 * SECOND).await);
    stop_and_join(&w1, r1).await;
    stop_and_join(&w2, r2).await;
    let mut handled: Vec<Uuid> = s.lock().unwrap().iter().map(|m| m.id).collect();
    handled.sort();
    let mut want = ids;
    want.sort();
    assert_eq!(handled, want, "each id handled exactly once");
}

/// PULL-C6; on SQLite also PULL-28 (no renewal runs, yet the second worker cannot take the row:
/// the handler transaction holds the write lock).
async fn c6(kind: Kind) {
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let mut o = db.opts();
    o.lease = Duration::from_millis(1000);
    let (s1, s2) = (seen(), seen());
    let w1 = db.worker(o.clone());
    let r1 = spawn_run(&w1, recording(s1.clone(), false, None, 3 * SECOND));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let w2 = db.worker(o);
    let r2 = spawn_run(&w2, recording(s2.clone(), false, None, Duration::ZERO));
    let snap = db.wait_state(id, "processed", 15 * SECOND).await;
    stop_and_join(&w1, r1).await;
    stop_and_join(&w2, r2).await;
    assert_eq!(snap.state, "processed");
    assert_eq!(s1.lock().unwrap().len(), 1);
    assert!(
        s2.lock().unwrap().is_empty(),
        "the second worker never receives the row"
    );
}

/// PULL-C7; also proves PULL-44 (Renew on 0 rows fires the signal) on MySQL.
async fn c7(kind: Kind) {
    let db = Arc::new(Db::new(kind).await);
    let id = db.insert(NewRow::new("a")).await;
    let mut o = db.opts();
    o.lease = Duration::from_millis(1000);
    let w = db.worker(o);
    let result: Arc<Mutex<Option<(Uuid, Duration)>>> = Arc::new(Mutex::new(None));
    let (db2, res2) = (db.clone(), result.clone());
    let h = handler_fn(move |m, tx, cancel| {
        let (db, res) = (db2.clone(), res2.clone());
        Box::pin(async move {
            let thief = db.steal(m.id).await;
            let stolen_at = Instant::now();
            tokio::time::timeout(10 * SECOND, cancel.cancelled()).await?;
            *res.lock().unwrap() = Some((thief, stolen_at.elapsed()));
            tx.execute(db.app_insert(), &[m.id.into()]).await?;
            Ok(())
        })
    });
    let run = spawn_run(&w, h);
    let end = Instant::now() + 15 * SECOND;
    while result.lock().unwrap().is_none() && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop_and_join(&w, run).await;
    let (thief, waited) = result.lock().unwrap().expect("the signal fired");
    assert!(
        waited <= Duration::from_millis(1166),
        "fired after {waited:?}"
    );
    let snap = db.row(id).await;
    assert_eq!(snap.state, "processing");
    assert_eq!(snap.claim_token, Some(thief));
    assert_eq!(db.app_rows(id).await, 0);
}

/// PULL-C8; also proves PULL-49 (abandon spends no attempt).
async fn c8(kind: Kind) {
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let mut o = db.opts();
    o.lease = Duration::from_millis(1000);
    o.shutdown_grace = Duration::from_nanos(1);
    let w1 = db.worker(o.clone());
    let started = Arc::new(AtomicUsize::new(0));
    let r1 = spawn_run(&w1, waits_for_cancel(started.clone()));
    wait_count(&started, 1).await;
    stop_and_join(&w1, r1).await;
    let snap = db.row(id).await;
    assert_eq!((snap.state.as_str(), snap.attempt), ("processing", 0));
    let s = seen();
    let w2 = db.worker(o);
    let r2 = spawn_run(&w2, recording(s.clone(), false, None, Duration::ZERO));
    let snap = db.wait_state(id, "processed", 10 * SECOND).await;
    stop_and_join(&w2, r2).await;
    assert_eq!(snap.state, "processed");
    assert_eq!(s.lock().unwrap()[0].attempt, 0);
    assert_eq!(snap.attempt, 0);
}

/// PULL-C9; also proves PULL-7 (the retry time comes from the database clock plus the delay).
async fn c9(kind: Kind) {
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let mut o = db.opts();
    o.retry_policy = policy(5, 60_000, 60_000);
    let w = db.worker(o);
    let run = spawn_run(&w, recording(seen(), false, Some("boom"), Duration::ZERO));
    let snap = db.wait_for(id, 10 * SECOND, |s| s.attempt == 1).await;
    stop_and_join(&w, run).await;
    assert_eq!(snap.state, "pending");
    assert_eq!(snap.attempt, 1);
    assert!(snap.last_error.unwrap().contains("boom"));
    assert!(
        snap.scheduled_in_ms > 30_000,
        "scheduled {} ms ahead",
        snap.scheduled_in_ms
    );
}

/// PULL-C10.
async fn c10(kind: Kind) {
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a").attempt(3)).await;
    let mut o = db.opts();
    o.retry_policy = policy(3, 1000, 1000);
    let w = db.worker(o);
    let run = spawn_run(&w, recording(seen(), false, Some("boom"), Duration::ZERO));
    let snap = db.wait_state(id, "dead", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    assert_eq!((snap.state.as_str(), snap.attempt), ("dead", 4));
    assert!(snap.last_error.is_some());
}

/// PULL-C11; also proves PULL-8 (the fence refuses another token), PULL-10 and PULL-27 (MySQL reports the
/// matched rows: 0 here, 1 for an identical Renew below).
async fn c11(kind: Kind) {
    use queuebox_inbox::sql::Statements;
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let st = Statements::render(kind.dialect(), &Schema::default()).unwrap();
    let old = Uuid::new_v4();
    let mut c = db.source().connect(Purpose::Renew).await.unwrap();
    // Owned under `old`: a Renew with it matches (and on MySQL reports 1 even when it writes
    // the same value twice within a microsecond, PULL-10).
    db.hold(id, old, 60_000).await;
    let renew = |t: Uuid| st.renew.bind(&[V::Int(60_000), V::Uuid(id), V::Uuid(t)]);
    assert_eq!(c.execute(&st.renew, &renew(old)).await.unwrap(), 1);
    let thief = db.steal(id).await;
    let before = db.row(id).await;
    let (i, t, e) = (V::Uuid(id), V::Uuid(old), V::from("x"));
    let complete = c
        .execute(&st.complete, &st.complete.bind(&[i.clone(), t.clone()]))
        .await
        .unwrap();
    let retry = c
        .execute(
            &st.retry,
            &st.retry
                .bind(&[V::Int(1000), e.clone(), i.clone(), t.clone()]),
        )
        .await
        .unwrap();
    let dead = c
        .execute(&st.dead, &st.dead.bind(&[e, i, t]))
        .await
        .unwrap();
    let renewed = c.execute(&st.renew, &renew(old)).await.unwrap();
    assert_eq!((complete, retry, dead, renewed), (0, 0, 0, 0));
    let after = db.row(id).await;
    assert_eq!(after.claim_token, Some(thief));
    assert_eq!(
        (
            after.state,
            after.attempt,
            after.last_error,
            after.lease_set
        ),
        (
            before.state,
            before.attempt,
            before.last_error,
            before.lease_set
        )
    );
}

/// PULL-C12; also proves PULL-48 (stop claims nothing new and abandons in-flight work).
async fn c12(kind: Kind) {
    let db = Db::new(kind).await;
    db.insert_n(2).await;
    let mut o = db.opts();
    o.batch_size = 1;
    o.lease = Duration::from_millis(60_000);
    o.shutdown_grace = Duration::from_nanos(1);
    let w = db.worker(o);
    let started = Arc::new(AtomicUsize::new(0));
    let run = spawn_run(&w, waits_for_cancel(started.clone()));
    wait_count(&started, 1).await;
    stop_and_join(&w, run).await;
    assert_eq!(db.states().await, vec!["pending", "processing"]);
}

/// PULL-C13; also proves PULL-5, PULL-24 and PULL-27 (mapped names, quoted for the dialect, and
/// the mapped table name inside MySQL's lock name).
async fn c13(kind: Kind) {
    let schema = Schema::with_names(|n| format!("qb_{n}"), "pull_jobs");
    let db = Db::with_schema(kind, schema).await;
    let id = db.insert(NewRow::new("a")).await;
    let w = db.worker(db.opts());
    let run = spawn_run(&w, recording(seen(), true, None, Duration::ZERO));
    let snap = db.wait_state(id, "processed", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    assert_eq!(db.app_rows(id).await, 1);
    assert!(snap.processed_at_set && snap.claim_token.is_none() && !snap.lease_set);
}

/// PULL-C15; also proves PULL-64 (the redacted text reaches last_error and the logs).
async fn c15(kind: Kind) {
    let logs = Captured::default();
    let _guard = logs.install();
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let w = db.worker(db.opts());
    let run = spawn_run(
        &w,
        recording(
            seen(),
            false,
            Some("Host=db;Password=hunter2;Database=app"),
            Duration::ZERO,
        ),
    );
    let snap = db.wait_for(id, 10 * SECOND, |s| s.attempt == 1).await;
    stop_and_join(&w, run).await;
    let last_error = snap.last_error.unwrap();
    assert!(!last_error.contains("hunter2") && last_error.contains("Password=[REDACTED]"));
    let text = logs.text();
    assert!(text.contains("The message retries."), "{text}");
    assert!(text.contains("Password=[REDACTED]"));
    assert!(!text.contains("hunter2"));
}

/// PULL-C16; also proves PULL-36 (an empty batch waits the poll interval).
async fn c16(kind: Kind) {
    let db = Db::new(kind).await;
    let probe = Probe::new(&db);
    let mut o = db.opts();
    o.poll_interval = Duration::from_millis(200);
    let w = Worker::new(Shared(probe.clone()), o).unwrap();
    let run = spawn_run(&w, recording(seen(), false, None, Duration::ZERO));
    tokio::time::sleep(2 * SECOND).await;
    stop_and_join(&w, run).await;
    let claims = probe.claims.load(Ordering::SeqCst);
    assert!((4..=20).contains(&claims), "{claims} claims");
}

/// PULL-C17; also proves PULL-38; on SQLite PULL-28 (the effective batch is 1).
async fn c17(kind: Kind) {
    let db = Db::new(kind).await;
    db.insert_n(12).await;
    let probe = Probe::new(&db);
    let mut o = db.opts();
    o.batch_size = 3;
    o.max_concurrency = 3;
    let w = Worker::new(Shared(probe.clone()), o).unwrap();
    let run = spawn_run(
        &w,
        recording(seen(), false, None, Duration::from_millis(20)),
    );
    assert!(db.wait_all("processed", 30 * SECOND).await);
    stop_and_join(&w, run).await;
    let sizes = probe.claim_sizes.lock().unwrap().clone();
    let most = if kind == Kind::Sqlite { 1 } else { 3 };
    assert!(sizes.iter().all(|n| *n <= most), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), 12);
    assert_eq!(
        probe.busy_at_claim.load(Ordering::SeqCst),
        0,
        "a claim started during a batch"
    );
}

/// PULL-C18 (a): one aggregate, two workers; also proves PULL-18 (the claim lock keeps one live
/// lease per aggregate), PULL-29 and PULL-30.
async fn c18a(kind: Kind) {
    let db = Db::new(kind).await;
    for i in 0..4 {
        db.insert(
            NewRow::new(&format!("a{}", i + 1))
                .aggregate("agg")
                .created(-60_000 + i),
        )
        .await;
    }
    let mut o = db.opts();
    o.batch_size = 4;
    o.max_concurrency = 4;
    let (win, busy, peak) = counters();
    let (w1, w2) = (db.worker(o.clone()), db.worker(o));
    let r1 = spawn_run(&w1, windowed(win.clone(), busy.clone(), peak.clone()));
    let r2 = spawn_run(&w2, windowed(win.clone(), busy.clone(), peak.clone()));
    assert!(db.wait_all("processed", 30 * SECOND).await);
    stop_and_join(&w1, r1).await;
    stop_and_join(&w2, r2).await;
    let mut w = win.lock().unwrap().clone();
    w.sort_by_key(|x| x.1);
    let keys: Vec<_> = w.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(keys, ["a1", "a2", "a3", "a4"]);
    assert!(
        w.windows(2).all(|p| p[0].2 <= p[1].1),
        "handler windows overlap"
    );
}

/// PULL-C18 (b): two aggregates of two rows, one worker: peak concurrency exactly 2.
async fn c18b(kind: Kind) {
    let db = Db::new(kind).await;
    for (i, (k, a)) in [("x1", "x"), ("x2", "x"), ("y1", "y"), ("y2", "y")]
        .iter()
        .enumerate()
    {
        db.insert(NewRow::new(k).aggregate(a).created(-60_000 + i as i64))
            .await;
    }
    let mut o = db.opts();
    o.batch_size = 4;
    o.max_concurrency = 4;
    let (win, busy, peak) = counters();
    let w = db.worker(o);
    let r = spawn_run(&w, windowed(win, busy, peak.clone()));
    assert!(db.wait_all("processed", 20 * SECOND).await);
    stop_and_join(&w, r).await;
    assert_eq!(peak.load(Ordering::SeqCst), 2);
}

/// Holds the claim lock from an outside session until the returned sender is dropped or sent:
/// MySQL the per-source named lock (GET_LOCK, no timeout needed), SQLite `BEGIN IMMEDIATE`.
async fn hold_claim_lock(db: &Db) -> tokio::sync::oneshot::Sender<()> {
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let (held, is_held) = tokio::sync::oneshot::channel::<()>();
    let mut c = db.source().connect(Purpose::Failure).await.unwrap();
    let kind = db.kind;
    let table = db.schema.table.clone();
    let source = db.source_name("s");
    tokio::spawn(async move {
        match kind {
            Kind::Mysql => {
                let lock = format!(
                    "SELECT GET_LOCK(CONCAT('queuebox_pull:', LEFT(SHA2(CONCAT('{table}', ':', ?), 256), 40)), 0)"
                );
                let got = c.query(&lock, &[source.clone().into()]).await.unwrap();
                assert_eq!(got[0][0], V::Int(1), "the outside session holds the lock");
            }
            Kind::Sqlite => c.begin().await.unwrap(),
        }
        let _ = held.send(());
        let _ = released.await;
        match kind {
            Kind::Mysql => {
                let unlock = format!(
                    "SELECT RELEASE_LOCK(CONCAT('queuebox_pull:', LEFT(SHA2(CONCAT('{table}', ':', ?), 256), 40)))"
                );
                c.query(&unlock, &[source.into()]).await.unwrap();
            }
            Kind::Sqlite => c.rollback().await.unwrap(),
        }
    });
    is_held.await.unwrap();
    release
}

/// PULL-C19; also proves PULL-19 (a lock failure is transient: logged, nothing touched, retried
/// after the poll interval) and PULL-36 (`The claim failed.`).
async fn c19(kind: Kind) {
    let logs = Captured::default();
    let _guard = logs.install();
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let release = hold_claim_lock(&db).await;
    let w = db.worker(db.opts());
    let run = spawn_run(&w, recording(seen(), false, None, Duration::ZERO));
    let hold = if kind == Kind::Sqlite { 25 } else { 35 } * SECOND;
    let end = Instant::now() + hold;
    let mut observed = 0;
    while Instant::now() < end {
        tokio::time::sleep(SECOND).await;
        // Read through a plain read: on SQLite a reader does not need the write lock.
        let snap = db.row(id).await;
        assert_eq!(
            (
                snap.state.as_str(),
                snap.attempt,
                snap.last_error.as_deref()
            ),
            ("pending", 0, None)
        );
        observed += 1;
    }
    assert!(observed > 10);
    assert!(logs.text().contains("The claim failed."), "{}", logs.text());
    drop(release);
    let snap = db.wait_state(id, "processed", 30 * SECOND).await;
    stop_and_join(&w, run).await;
    assert_eq!((snap.state.as_str(), snap.attempt), ("processed", 0));
}

/// PULL-C20; also proves PULL-20 (the 10 s GET_LOCK timeout answers before a 20 s deadline,
/// with the lock error, never a deadline error).
async fn c20(kind: Kind) {
    let logs = Captured::default();
    let _guard = logs.install();
    let db = Db::new(kind).await;
    db.insert(NewRow::new("a")).await;
    let release = hold_claim_lock(&db).await;
    let w = db.worker(db.opts());
    let started = Instant::now();
    let run = spawn_run(&w, recording(seen(), false, None, Duration::ZERO));
    let deadline = 20 * SECOND;
    let failed = wait_log(&logs, "The claim failed.", deadline).await;
    let took = started.elapsed();
    stop_and_join(&w, run).await;
    drop(release);
    let text = logs.text();
    assert!(failed, "no claim failure within the deadline: {text}");
    assert!(took < 15 * SECOND, "the claim failed after {took:?}");
    assert!(
        text.contains("inbox pull claim: GET_LOCK did not acquire the per-source claim lock"),
        "{text}"
    );
    assert!(!text.contains("within 30 s"), "{text}");
}

/// PULL-C21; also proves PULL-16.
async fn c21(kind: Kind) {
    let db = Db::new(kind).await;
    let a = db.insert(NewRow::new("a")).await;
    let mut push = NewRow::new("push");
    push.consumption = "push".into();
    let push = db.insert(push).await;
    let mut other = NewRow::new("other");
    other.source = "t".into();
    let other = db.insert(other).await;
    let s = seen();
    let w = db.worker(db.opts());
    let run = spawn_run(&w, recording(s.clone(), false, None, Duration::ZERO));
    db.wait_state(a, "processed", 10 * SECOND).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop_and_join(&w, run).await;
    let ids: Vec<_> = s.lock().unwrap().iter().map(|m| m.id).collect();
    assert_eq!(ids, vec![a]);
    for id in [push, other] {
        let snap = db.row(id).await;
        assert_eq!(
            (snap.state.as_str(), snap.claim_token, snap.attempt),
            ("pending", None, 0)
        );
    }
}

/// PULL-C22; also proves PULL-6 on SQLite (text order is time order in the fixed form).
async fn c22(kind: Kind) {
    let db = Db::new(kind).await;
    let mut row = NewRow::new("a");
    row.scheduled_ms = 2_000;
    let inserted = Instant::now();
    let id = db.insert(row).await;
    let w = db.worker(db.opts());
    let run = spawn_run(&w, recording(seen(), false, None, Duration::ZERO));
    let snap = db.wait_state(id, "processed", 10 * SECOND).await;
    let at = inserted.elapsed();
    stop_and_join(&w, run).await;
    assert_eq!(snap.state, "processed");
    assert!(at >= Duration::from_millis(1_950), "handled after {at:?}");
}

/// PULL-C23.
async fn c23(kind: Kind) {
    let db = Db::new(kind).await;
    let one = db.insert(NewRow::new("one").attempt(1)).await;
    let two = db
        .insert(NewRow::new("two").attempt(2).created(-59_000))
        .await;
    let mut o = db.opts();
    o.retry_policy = policy(3, 1000, 1000);
    let w = db.worker(o);
    let run = spawn_run(&w, recording(seen(), false, Some("boom"), Duration::ZERO));
    let s1 = db.wait_for(one, 10 * SECOND, |s| s.attempt == 2).await;
    let s2 = db.wait_state(two, "dead", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    assert_eq!((s1.state.as_str(), s1.attempt), ("pending", 2));
    assert_eq!((s2.state.as_str(), s2.attempt), ("dead", 3));
}

/// PULL-C24; also proves PULL-44 (a renewal error is logged and is not a loss).
async fn c24(kind: Kind) {
    let logs = Captured::default();
    let _guard = logs.install();
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let probe = Probe::new(&db);
    *probe.fail_renew_until.lock().unwrap() = Some(Instant::now() + Duration::from_millis(900));
    let mut o = db.opts();
    o.lease = Duration::from_millis(1500);
    let w = Worker::new(Shared(probe), o).unwrap();
    let cancelled = Arc::new(AtomicUsize::new(0));
    let c2 = cancelled.clone();
    let h = handler_fn(move |_m, _tx, cancel| {
        let c = c2.clone();
        Box::pin(async move {
            tokio::time::sleep(2 * SECOND).await;
            if cancel.is_cancelled() {
                c.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        })
    });
    let run = spawn_run(&w, h);
    let snap = db.wait_state(id, "processed", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    assert!(
        logs.text().contains("The renewal failed."),
        "{}",
        logs.text()
    );
    assert_eq!(cancelled.load(Ordering::SeqCst), 0);
    assert_eq!(snap.state, "processed");
}

/// PULL-C25; also proves PULL-33.
async fn c25(kind: Kind) {
    let db = Db::new(kind).await;
    db.insert_n(4).await;
    let mut o = db.opts();
    o.batch_size = 4;
    o.max_concurrency = 4;
    let (win, busy, peak) = counters();
    let w = db.worker(o);
    let r = spawn_run(&w, windowed(win, busy, peak.clone()));
    assert!(db.wait_all("processed", 10 * SECOND).await);
    stop_and_join(&w, r).await;
    assert_eq!(peak.load(Ordering::SeqCst), 4);
}

/// PULL-C26; also proves PULL-39 (waiting rows are renewed from the claim on).
async fn c26(kind: Kind) {
    let db = Db::new(kind).await;
    db.insert_n(3).await;
    let mut o = db.opts();
    o.batch_size = 3;
    o.max_concurrency = 1;
    o.lease = Duration::from_millis(1000);
    let (s1, s2) = (seen(), seen());
    let w1 = db.worker(o.clone());
    let r1 = spawn_run(
        &w1,
        recording(s1.clone(), false, None, Duration::from_millis(800)),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    o.poll_interval = Duration::from_millis(100);
    let w2 = db.worker(o);
    let r2 = spawn_run(&w2, recording(s2.clone(), false, None, Duration::ZERO));
    assert!(db.wait_all("processed", 15 * SECOND).await);
    stop_and_join(&w1, r1).await;
    stop_and_join(&w2, r2).await;
    assert_eq!(s1.lock().unwrap().len(), 3);
    assert!(s2.lock().unwrap().is_empty());
}

/// PULL-C27; also proves PULL-52 (a library failure abandons with the attempt unchanged).
async fn c27(kind: Kind) {
    let logs = Captured::default();
    let _guard = logs.install();
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let probe = Probe::new(&db);
    probe.fail_next_handler.store(true, Ordering::SeqCst);
    let mut o = db.opts();
    o.lease = Duration::from_millis(1000);
    let w = Worker::new(Shared(probe), o).unwrap();
    let run = spawn_run(&w, recording(seen(), false, None, Duration::ZERO));
    assert!(wait_log(&logs, "The message was abandoned.", 5 * SECOND).await);
    let right_after = db.row(id).await;
    let snap = db.wait_state(id, "processed", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    assert_eq!(
        (right_after.state.as_str(), right_after.attempt),
        ("processing", 0)
    );
    assert_eq!((snap.state.as_str(), snap.attempt), ("processed", 0));
}

/// PULL-C28 with this dialect: the same rules and messages, before any connection is opened.
fn c28(kind: Kind) {
    struct Unreachable;
    #[async_trait::async_trait]
    impl ConnectionSource for Unreachable {
        async fn connect(
            &self,
            _: Purpose,
        ) -> Result<Box<dyn queuebox_inbox::Connection>, queuebox_inbox::DbError> {
            panic!("no connection may be opened while validating");
        }
    }
    let check = |edit: &dyn Fn(&mut queuebox_inbox::WorkerOptions), message: &str| {
        let mut o = queuebox_inbox::WorkerOptions::new("s");
        o.dialect = kind.dialect();
        edit(&mut o);
        let err = Worker::new(Unreachable, o)
            .err()
            .expect("invalid options are refused");
        assert_eq!(err.to_string(), message);
    };
    check(&|o| o.source = "  ".into(), "The source is mandatory.");
    check(
        &|o| o.batch_size = 501,
        "The batch size must be between 1 and 500.",
    );
    check(
        &|o| o.lease = Duration::from_millis(2),
        "The lease must be between 3 ms and 2147483647 ms.",
    );
    check(
        &|o| o.max_concurrency = 0,
        "The maximum concurrency must be at least 1.",
    );
    check(
        &|o| o.poll_interval = Duration::ZERO,
        "The poll interval must be greater than 0.",
    );
    check(
        &|o| o.schema.aggregate_id = "bad-name".into(),
        "The schema name bad-name is not a plain SQL identifier.",
    );
    let mut o = queuebox_inbox::WorkerOptions::new("s");
    o.dialect = kind.dialect();
    assert!(Worker::new(Unreachable, o).is_ok());
}

/// PULL-C29; also proves PULL-7 (the dialect's clock expressions), PULL-8 (SQLite's Complete,
/// Retry and Dead fence without the lease, Renew with it), PULL-11 and PULL-24 (`?` per
/// occurrence on MySQL, `:name` on SQLite, names quoted for the dialect, default and mapped).
fn c29(kind: Kind) {
    use queuebox_inbox::sql::{Statement, Statements};
    let (dialect, quote) = match kind {
        Kind::Sqlite => ("sqlite", '"'),
        Kind::Mysql => ("mysql", '`'),
    };
    let canonical = |name: &str| {
        let path = format!(
            "{}/tests/canonical/{dialect}-{name}.sql",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    // MySQL: each `?` back to its `:name`, in driver order.
    let unmap = |st: &Statement| {
        // `:ids` stays in the text as written; every other name is one `?`.
        let mut names = st.slot_names().into_iter().filter(|n| *n != "ids");
        let mut out = String::new();
        for c in st.text().chars() {
            match (kind, c) {
                (Kind::Mysql, '?') => {
                    out.push(':');
                    out.push_str(names.next().expect("a name per ?"));
                }
                _ => out.push(c),
            }
        }
        norm(&out)
    };
    let mapped = Schema::with_names(|n| format!("qb_{n}"), "pull_jobs");
    for schema in [Schema::default(), mapped] {
        let st = Statements::render(kind.dialect(), &schema).unwrap();
        let mut pairs = vec![
            ("renew", &st.renew),
            ("complete", &st.complete),
            ("retry", &st.retry),
            ("dead", &st.dead),
        ];
        let steps = st.mysql_claim.as_ref();
        match kind {
            Kind::Sqlite => {
                assert!(steps.is_none());
                pairs.push(("claim", &st.claim));
            }
            Kind::Mysql => {
                let steps = steps.expect("the MySQL claim steps");
                pairs.extend([
                    ("claim-lock", &steps.lock),
                    ("claim-select", &st.claim),
                    ("claim-update", &steps.update),
                    ("claim-fetch", &steps.fetch),
                    ("claim-unlock", &steps.unlock),
                ]);
            }
        }
        for (name, got) in pairs {
            let mut want = canonical(name);
            for (default, mapped) in schema.pairs() {
                want = want.replace(
                    &format!("{quote}{default}{quote}"),
                    &format!("{quote}{mapped}{quote}"),
                );
            }
            // The table name inside MySQL's lock name is a string literal (PULL-24).
            want = want.replace("CONCAT('inbox'", &format!("CONCAT('{}'", schema.table));
            assert_eq!(unmap(got), norm(&want), "{dialect}/{name}");
        }
    }
}

/// PULL-C33: PULL-C3 in a child process with no logger prints nothing (PULL-53).
fn c33(child: &str) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            child,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stray: Vec<_> = stdout
        .lines()
        .filter(|l| {
            !(l.trim().is_empty()
                || l.starts_with("running ")
                || l.starts_with("test result:")
                || l.starts_with(&format!("test {child}")))
        })
        .collect();
    assert!(stray.is_empty(), "stdout: {stray:?}");
    assert!(
        out.stderr.is_empty(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// PULL-C34; also proves PULL-55 (equal JSON values and unchanged non-ASCII text through JSON text
/// columns, MariaDB's LONGTEXT included).
async fn c34(kind: Kind) {
    let db = Db::new(kind).await;
    let text = "Zoë – 東京 🚀";
    let payloads = [
        serde_json::json!({"a": {"b": [1, 2]}}),
        serde_json::json!([1, "two", null]),
        serde_json::json!("plain"),
        serde_json::json!(12.5),
        serde_json::json!(true),
        serde_json::Value::Null,
        serde_json::json!({"name": text}),
    ];
    let mut ids = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        let mut row = NewRow::new(&format!("k{i}")).created(-60_000 + i as i64);
        row.payload = p.clone();
        row.headers = serde_json::json!({"x-name": text});
        ids.push(db.insert(row).await);
    }
    let s = seen();
    let w = db.worker(db.opts());
    let run = spawn_run(&w, recording(s.clone(), false, None, Duration::ZERO));
    assert!(db.wait_all("processed", 10 * SECOND).await);
    stop_and_join(&w, run).await;
    let got: HashMap<Uuid, InboxMessage> = s
        .lock()
        .unwrap()
        .iter()
        .map(|m| (m.id, m.clone()))
        .collect();
    for (id, p) in ids.iter().zip(&payloads) {
        assert_eq!(&got[id].payload, p);
        assert_eq!(
            got[id].headers.get("x-name").map(String::as_str),
            Some(text)
        );
    }
}

/// PULL-C35; also proves PULL-48 (a handler within the grace gets its normal outcome).
async fn c35(kind: Kind) {
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let mut o = db.opts();
    o.shutdown_grace = 10 * SECOND;
    let w = db.worker(o);
    let s = seen();
    let run = spawn_run(
        &w,
        recording(s.clone(), false, None, Duration::from_millis(500)),
    );
    let end = Instant::now() + 10 * SECOND;
    while s.lock().unwrap().is_empty() && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop_and_join(&w, run).await;
    assert_eq!(db.row(id).await.state, "processed");
}

struct AlwaysDead;
impl RetryPolicy for AlwaysDead {
    fn decide(
        &self,
        _: &InboxMessage,
        _: &(dyn std::error::Error + Send + Sync + 'static),
    ) -> FailureAction {
        FailureAction::DeadLetter
    }
}

/// PULL-C36.
async fn c36(kind: Kind) {
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let mut o = db.opts();
    o.retry_policy = Arc::new(AlwaysDead);
    let w = db.worker(o);
    let run = spawn_run(&w, recording(seen(), false, Some("boom"), Duration::ZERO));
    let snap = db.wait_state(id, "dead", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    assert_eq!((snap.state.as_str(), snap.attempt), ("dead", 1));
    assert!(snap.last_error.is_some());
}

/// PULL-C37; also proves PULL-51.
async fn c37(kind: Kind) {
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let early = db.worker(db.opts());
    early.stop();
    early.stop();
    tokio::time::timeout(
        SECOND,
        early.run(recording(seen(), false, None, Duration::ZERO)),
    )
    .await
    .expect("run returns at once");
    assert_eq!(db.row(id).await.state, "pending");
    let w = db.worker(db.opts());
    let s = seen();
    let run = spawn_run(
        &w,
        recording(s.clone(), false, None, Duration::from_millis(300)),
    );
    while s.lock().unwrap().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    w.stop();
    w.stop();
    tokio::time::timeout(10 * SECOND, run)
        .await
        .unwrap()
        .unwrap();
    w.stop();
    assert_eq!(db.row(id).await.state, "processed");
}

/// PULL-C39; also proves PULL-28 (no renewal, a 500 ms lease, and still nobody else takes the row
/// while its handler transaction holds the write lock; Complete fences on the token only).
async fn c39(kind: Kind) {
    let db = Db::new(kind).await;
    let id = db.insert(NewRow::new("a")).await;
    let mut o = db.opts();
    o.lease = Duration::from_millis(500);
    let (s1, s2) = (seen(), seen());
    let w1 = db.worker(o.clone());
    let r1 = spawn_run(
        &w1,
        recording(s1.clone(), false, None, Duration::from_millis(1500)),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let w2 = db.worker(o);
    let r2 = spawn_run(&w2, recording(s2.clone(), false, None, Duration::ZERO));
    let snap = db.wait_state(id, "processed", 15 * SECOND).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    stop_and_join(&w1, r1).await;
    stop_and_join(&w2, r2).await;
    assert_eq!(snap.state, "processed");
    assert_eq!(s1.lock().unwrap().len(), 1);
    assert!(
        s2.lock().unwrap().is_empty(),
        "the second worker never receives it"
    );
}

type Batches = Arc<Mutex<Vec<Vec<Uuid>>>>;
type Thief = Option<(Arc<Db>, Uuid, Arc<Mutex<Option<Uuid>>>)>;

/// A batch handler that records each call's ids, inserts one application row per message (after
/// the thief, when given, took its victim), and fails with `fail` if given.
fn recording_batches(
    batches: Batches,
    app_insert: &'static str,
    fail: Option<&'static str>,
    thief: Thief,
) -> impl queuebox_inbox::BatchHandler {
    batch_handler_fn(move |messages, tx, _cancel| {
        let (batches, thief) = (batches.clone(), thief.clone());
        Box::pin(async move {
            batches
                .lock()
                .unwrap()
                .push(messages.iter().map(|m| m.id).collect());
            if let Some((db, victim, stolen)) = thief {
                // Read first, so the handler transaction has its snapshot before the theft.
                tx.query("SELECT count(*) FROM app_rows", &[]).await?;
                *stolen.lock().unwrap() = Some(db.steal(victim).await);
            }
            for m in messages {
                tx.execute(app_insert, &[m.id.into()]).await?;
            }
            match fail {
                Some(text) => Err(text.into()),
                None => Ok(()),
            }
        })
    })
}

/// Three rows of three aggregates, in claim order.
async fn three_aggregates(db: &Db, attempt_of_c: i32) -> Vec<Uuid> {
    let mut ids = Vec::new();
    for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
        let row = NewRow::new(key)
            .aggregate(&format!("agg-{key}"))
            .created(-60_000 + i as i64);
        let row = if key == "c" {
            row.attempt(attempt_of_c)
        } else {
            row
        };
        ids.push(db.insert(row).await);
    }
    ids
}

/// PULL-C40: the batch handler gets the claim and one transaction; marks and app rows commit
/// together. SQLite claims one row at a time (PULL-28), so it sees three calls of one.
async fn c40(kind: Kind) {
    let db = Db::new(kind).await;
    let ids = three_aggregates(&db, 0).await;
    let w = db.worker(db.opts());
    let batches: Batches = Arc::default();
    let h = recording_batches(batches.clone(), db.app_insert(), None, None);
    let run = spawn_run_batched(&w, h);
    assert!(db.wait_all("processed", 10 * SECOND).await);
    stop_and_join(&w, run).await;
    let expected = match kind {
        Kind::Sqlite => ids.iter().map(|id| vec![*id]).collect(),
        Kind::Mysql => vec![ids.clone()],
    };
    assert_eq!(*batches.lock().unwrap(), expected);
    for id in &ids {
        let snap = db.row(*id).await;
        assert!(snap.processed_at_set && snap.claim_token.is_none() && !snap.lease_set);
        assert_eq!((db.app_rows(*id).await, snap.attempt), (1, 0));
    }
}

/// PULL-C41: a failed batch leaves no write; each row fails by the usual rules.
async fn c41(kind: Kind) {
    let db = Db::new(kind).await;
    let ids = three_aggregates(&db, 3).await;
    let mut o = db.opts();
    o.retry_policy = policy(4, 60_000, 60_000);
    let w = db.worker(o);
    let h = recording_batches(Arc::default(), db.app_insert(), Some("boom"), None);
    let run = spawn_run_batched(&w, h);
    db.wait_state(ids[2], "dead", 10 * SECOND).await;
    db.wait_for(ids[1], 10 * SECOND, |s| s.attempt == 1).await;
    db.wait_for(ids[0], 10 * SECOND, |s| s.attempt == 1).await;
    stop_and_join(&w, run).await;
    for (id, (state, attempt)) in ids
        .iter()
        .zip([("pending", 1), ("pending", 1), ("dead", 4)])
    {
        let snap = db.row(*id).await;
        assert_eq!((snap.state.as_str(), snap.attempt), (state, attempt));
        assert!(snap.last_error.unwrap().contains("boom"));
        assert!(snap.claim_token.is_none() && !snap.processed_at_set);
        assert_eq!(db.app_rows(*id).await, 0);
        if state == "pending" {
            assert!(snap.scheduled_in_ms > 30_000, "{} ms", snap.scheduled_in_ms);
        }
    }
}

/// PULL-C42: a thief takes row b during the batch handler; the fenced completion matches only
/// a and c, so the worker rolls everything back and writes nothing.
async fn c42(kind: Kind) {
    let db = Arc::new(Db::new(kind).await);
    let ids = three_aggregates(&db, 0).await;
    let mut o = db.opts();
    o.lease = Duration::from_millis(600_000);
    let w = db.worker(o);
    let batches: Batches = Arc::default();
    let stolen = Arc::new(Mutex::new(None));
    let thief = Some((db.clone(), ids[1], stolen.clone()));
    let h = recording_batches(batches.clone(), db.app_insert(), None, thief);
    let run = spawn_run_batched(&w, h);
    let end = Instant::now() + 10 * SECOND;
    while stolen.lock().unwrap().is_none() && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop_and_join(&w, run).await;
    assert_eq!(batches.lock().unwrap().len(), 1);
    let snaps = [
        db.row(ids[0]).await,
        db.row(ids[1]).await,
        db.row(ids[2]).await,
    ];
    assert_eq!(snaps[1].claim_token, *stolen.lock().unwrap());
    assert!(snaps[0].claim_token.is_some() && snaps[0].claim_token == snaps[2].claim_token);
    assert_ne!(snaps[0].claim_token, snaps[1].claim_token);
    for (id, snap) in ids.iter().zip(&snaps) {
        assert_eq!((snap.state.as_str(), snap.attempt), ("processing", 0));
        assert!(!snap.processed_at_set);
        assert_eq!(db.app_rows(*id).await, 0);
    }
}

/// One `#[tokio::test]` per case on the given database.
macro_rules! on {
    ($kind:expr; $($name:ident => $case:ident;)*) => {$(
        #[tokio::test]
        async fn $name() {
            super::$case($kind).await
        }
    )*};
}

/// The same on a two-thread runtime (two workers that must really run side by side).
macro_rules! on_two_threads {
    ($kind:expr; $($name:ident => $case:ident;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            super::$case($kind).await
        }
    )*};
}

/// The body of a case that does not run on a database: it is `#[ignore]`d with its reason, and
/// running it anyway says so rather than passing.
fn not_applicable(case: &str, db: &str) {
    panic!("{case} does not run on {db} (PULL-76): see the #[ignore] reason");
}

// ---- SQLite (begin) ----
mod sqlite {
    use super::*;
    const K: Kind = Kind::Sqlite;

    on!(K;
        pull_c1_every_field_reaches_the_handler => c1;
        pull_c2_handler_writes_and_completion_commit_together => c2;
        pull_c3_no_write_is_left_when_the_handler_fails => c3;
        pull_c6_ownership_lasts_across_a_long_handler => c6;
        pull_c8_an_abandoned_message_comes_back => c8;
        pull_c9_a_retry_records_the_attempt_and_the_backoff => c9;
        pull_c10_dead_letter_at_the_ceiling => c10;
        pull_c11_a_stale_token_changes_nothing => c11;
        pull_c12_stop_claims_nothing_new_and_abandons_in_flight_work => c12;
        pull_c13_mapped_names_work => c13;
        pull_c15_secrets_never_reach_last_error_or_logs => c15;
        pull_c16_no_polling_storm => c16;
        pull_c17_no_more_than_the_batch_in_memory => c17;
        pull_c19_a_claim_lock_failure_is_transient => c19;
        pull_c21_only_pull_rows_of_the_workers_source_are_claimed => c21;
        pull_c22_a_row_is_not_claimed_before_it_is_due => c22;
        pull_c23_the_attempt_boundary => c23;
        pull_c27_a_library_failure_abandons => c27;
        pull_c34_payloads_and_text_round_trip => c34;
        pull_c35_a_handler_that_finishes_within_the_grace_commits => c35;
        pull_c36_a_policy_dead_letter_counts_the_attempt => c36;
        pull_c37_stop_is_idempotent => c37;
        pull_c39_sqlite_a_long_handler_still_completes => c39;
        pull_c40_a_batch_handler_completes_its_batch_in_one_transaction => c40;
        pull_c41_a_failed_batch_rolls_back_and_every_row_is_retried_by_the_usual_rules => c41;
        c33_child_runs_c3 => c3;
    );
    on_two_threads!(K;
        pull_c5_no_message_goes_to_two_workers => c5;
        pull_c18_one_message_per_aggregate_in_flight_a => c18a;
    );

    #[test]
    fn pull_c28_options_are_validated() {
        c28(K);
    }

    #[test]
    fn pull_c29_rendered_sql_equals_the_canonical_text() {
        c29(K);
    }

    #[test]
    fn pull_c33_silent_by_default() {
        c33("sqlite::c33_child_runs_c3");
    }

    #[test]
    #[ignore = "not applicable on sqlite: while a handler runs, no other connection can take its row (PULL-76)"]
    fn pull_c4_completion_on_zero_rows_rolls_back_not_applicable() {
        not_applicable("PULL-C4", "sqlite");
    }
    #[test]
    #[ignore = "not applicable on sqlite: while a handler runs, no other connection can take its row or renew (PULL-76)"]
    fn pull_c7_a_lost_renewal_cancels_the_handler_not_applicable() {
        not_applicable("PULL-C7", "sqlite");
    }
    #[test]
    #[ignore = "not applicable on sqlite: C18(b) needs concurrency 2, and the effective concurrency is 1 (PULL-76); C18(a) runs above"]
    fn pull_c18_one_message_per_aggregate_in_flight_b_not_applicable() {
        not_applicable("PULL-C18 (b)", "sqlite");
    }
    #[test]
    #[ignore = "not applicable on sqlite: SQL Server and MySQL only; SQLite has no lock timeout separate from its busy timeout (PULL-76)"]
    fn pull_c20_the_lock_timeout_beats_the_callers_deadline_not_applicable() {
        not_applicable("PULL-C20", "sqlite");
    }
    #[test]
    #[ignore = "not applicable on sqlite: the worker runs no renewal (PULL-28, PULL-76)"]
    fn pull_c24_a_renewal_error_is_not_a_lost_lease_not_applicable() {
        not_applicable("PULL-C24", "sqlite");
    }
    #[test]
    #[ignore = "not applicable on sqlite: the effective concurrency is 1 (PULL-28, PULL-76)"]
    fn pull_c25_rows_without_aggregate_run_in_parallel_not_applicable() {
        not_applicable("PULL-C25", "sqlite");
    }
    #[test]
    #[ignore = "not applicable on sqlite: the effective batch is 1, so no row waits, and no renewal runs (PULL-76)"]
    fn pull_c26_waiting_rows_keep_their_lease_not_applicable() {
        not_applicable("PULL-C26", "sqlite");
    }
    #[test]
    #[ignore = "not applicable on sqlite: CHECK (json_valid(payload)) rejects invalid JSON (schema.md SCH-13, PULL-76)"]
    fn pull_c38_an_invalid_json_payload_is_dead_lettered_not_applicable() {
        not_applicable("PULL-C38", "sqlite");
    }
    #[test]
    #[ignore = "not applicable on sqlite: while a handler runs, no other connection can take a row of its batch (PULL-28)"]
    fn pull_c42_a_lost_lease_on_one_row_of_a_batch_completes_none_not_applicable() {
        not_applicable("PULL-C42", "sqlite");
    }
}
// ---- SQLite (end) ----

// ---- MySQL (begin) ----
mod mysql {
    use super::*;
    const K: Kind = Kind::Mysql;

    on!(K;
        pull_c1_every_field_reaches_the_handler => c1;
        pull_c2_handler_writes_and_completion_commit_together => c2;
        pull_c3_no_write_is_left_when_the_handler_fails => c3;
        pull_c4_completion_on_zero_rows_rolls_back => c4;
        pull_c6_ownership_lasts_across_a_long_handler => c6;
        pull_c7_a_lost_renewal_cancels_the_handler => c7;
        pull_c8_an_abandoned_message_comes_back => c8;
        pull_c9_a_retry_records_the_attempt_and_the_backoff => c9;
        pull_c10_dead_letter_at_the_ceiling => c10;
        pull_c11_a_stale_token_changes_nothing => c11;
        pull_c12_stop_claims_nothing_new_and_abandons_in_flight_work => c12;
        pull_c13_mapped_names_work => c13;
        pull_c15_secrets_never_reach_last_error_or_logs => c15;
        pull_c16_no_polling_storm => c16;
        pull_c17_no_more_than_the_batch_in_memory => c17;
        pull_c18_one_message_per_aggregate_in_flight_b => c18b;
        pull_c19_a_claim_lock_failure_is_transient => c19;
        pull_c20_the_lock_timeout_beats_the_callers_deadline => c20;
        pull_c21_only_pull_rows_of_the_workers_source_are_claimed => c21;
        pull_c22_a_row_is_not_claimed_before_it_is_due => c22;
        pull_c23_the_attempt_boundary => c23;
        pull_c24_a_renewal_error_is_not_a_lost_lease => c24;
        pull_c25_rows_without_aggregate_run_in_parallel => c25;
        pull_c27_a_library_failure_abandons => c27;
        pull_c34_payloads_and_text_round_trip => c34;
        pull_c35_a_handler_that_finishes_within_the_grace_commits => c35;
        pull_c36_a_policy_dead_letter_counts_the_attempt => c36;
        pull_c37_stop_is_idempotent => c37;
        pull_c40_a_batch_handler_completes_its_batch_in_one_transaction => c40;
        pull_c41_a_failed_batch_rolls_back_and_every_row_is_retried_by_the_usual_rules => c41;
        pull_c42_a_lost_lease_on_one_row_of_a_batch_completes_none => c42;
        c33_child_runs_c3 => c3;
    );
    on_two_threads!(K;
        pull_c5_no_message_goes_to_two_workers => c5;
        pull_c18_one_message_per_aggregate_in_flight_a => c18a;
        pull_c26_waiting_rows_keep_their_lease => c26;
    );

    #[test]
    fn pull_c28_options_are_validated() {
        c28(K);
    }

    #[test]
    fn pull_c29_rendered_sql_equals_the_canonical_text() {
        c29(K);
    }

    #[test]
    fn pull_c33_silent_by_default() {
        c33("mysql::c33_child_runs_c3");
    }

    #[test]
    #[ignore = "not applicable on mysql: the JSON column rejects invalid JSON (PULL-76)"]
    fn pull_c38_an_invalid_json_payload_is_dead_lettered_not_applicable() {
        not_applicable("PULL-C38", "mysql");
    }
    #[test]
    #[ignore = "not applicable on mysql: SQLite only (PULL-76); C6 and C26 cover long handlers with renewal here"]
    fn pull_c39_sqlite_a_long_handler_still_completes_not_applicable() {
        not_applicable("PULL-C39", "mysql");
    }
}
// ---- MySQL (end) ----

/// PULL-75 and PULL-76: every contract case of cases.json has a test for each of the two databases, which
/// runs when the case lists the database and is ignored with a reason otherwise. C14 (a
/// PostgreSQL release step) and the database-free unit cases C30–C32 are proven in contract.rs.
#[test]
fn every_contract_case_has_a_test_on_sqlite_and_mysql() {
    let cases: serde_json::Value =
        serde_json::from_str(include_str!("../../../clients/contract/cases.json")).unwrap();
    let source = include_str!("contract_sqlite_mysql.rs");
    let section = |name: &str| {
        let begin = format!("// ---- {name} (begin) ----");
        let end = format!("// ---- {name} (end) ----");
        let (a, b) = (source.rfind(&begin).unwrap(), source.rfind(&end).unwrap());
        &source[a..b]
    };
    for (db, text) in [("sqlite", section("SQLite")), ("mysql", section("MySQL"))] {
        for case in cases["cases"].as_array().unwrap() {
            let id = case["id"].as_str().unwrap();
            let n = id.strip_prefix("PULL-C").unwrap();
            if ["14", "30", "31", "32"].contains(&n) {
                continue;
            }
            let listed = case["databases"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d == db);
            let test = format!("pull_c{n}_");
            let found: Vec<&str> = text.lines().filter(|l| l.contains(&test)).collect();
            assert!(!found.is_empty(), "no {db} test for {id}");
            let all_ignored = found.iter().all(|l| l.contains("not_applicable"));
            assert_eq!(
                !all_ignored, listed,
                "{id} on {db}: runs = {}, cases.json lists it = {listed}",
                !all_ignored
            );
        }
    }
}
