//! Tests that prove the PULL-N requirements of pull.md which no contract case (tests/contract.rs)
//! proves on PostgreSQL, named `pull_<N>_…`, plus the check that REQUIREMENTS.md names a real
//! test (or a stated reason) for every one of PULL-1..PULL-76.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuebox_inbox::sql::Statements;
use queuebox_inbox::{
    ConnectionSource, DefaultRetryPolicy, Dialect, FailureAction, InboxMessage, Purpose,
    RetryPolicy, Schema, SqlValue as V, Worker, WorkerOptions, handler_fn,
};
use support::{Captured, Db, NewRow, Probe, Shared, opts, spawn_run, stop_and_join};
use uuid::Uuid;

const SECOND: Duration = Duration::from_secs(1);

fn statements() -> Statements {
    Statements::render(Dialect::Postgresql, &Schema::default()).unwrap()
}

fn claim_params(batch: i64, lease_ms: i64, token: Uuid) -> [V; 5] {
    [
        V::from("s"),
        V::Int(batch),
        V::Int(lease_ms),
        V::Int(50),
        V::Uuid(token),
    ]
}

fn int(v: &V) -> i64 {
    match v {
        V::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// The claim token a row carries now, read on the test's own session.
async fn token_of(db: &Db, id: Uuid) -> Option<Uuid> {
    db.row(id).await.claim_token
}

/// A handler that records each message's idempotency key, in call order.
fn keys_in_order(order: Arc<Mutex<Vec<String>>>) -> impl queuebox_inbox::Handler {
    handler_fn(move |m, _tx, _| {
        let order = order.clone();
        Box::pin(async move {
            order.lock().unwrap().push(m.idempotency_key.clone());
            Ok(())
        })
    })
}

/// PULL-7: every time the statements compute or compare comes from the database clock at the
/// moment the expression runs (`clock_timestamp()`), not the transaction start and not the
/// worker: inside a transaction that has already lasted 300 ms, Claim, Renew and Retry write
/// times that are later than the transaction start by at least that much.
#[tokio::test]
async fn pull_7_statements_use_the_database_clock_when_they_run() {
    let db = Db::new().await;
    let id = db.insert(NewRow::new("a")).await;
    let st = statements();
    let mut c = db.source().connect(Purpose::Handler).await.unwrap();
    c.begin().await.unwrap();
    c.execute("SELECT pg_sleep(0.3)", &[]).await.unwrap();
    let token = Uuid::new_v4();
    let claimed = c
        .query(&st.claim, &claim_params(10, 60_000, token))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    // now() is the transaction start; the claim's times must be the clock when it ran.
    let times = "SELECT (EXTRACT(EPOCH FROM (claimed_at - now())) * 1000)::bigint,
                        (EXTRACT(EPOCH FROM (lease_expires_at - claimed_at)) * 1000)::bigint,
                        (EXTRACT(EPOCH FROM (lease_expires_at - now())) * 1000)::bigint,
                        (EXTRACT(EPOCH FROM (scheduled_at - now())) * 1000)::bigint
                   FROM inbox WHERE id = $1";
    let r = &c.query(times, &[V::Uuid(id)]).await.unwrap()[0];
    assert!(
        int(&r[0]) >= 290,
        "claimed_at is {} ms after now()",
        int(&r[0])
    );
    assert!(
        (59_990..=60_010).contains(&int(&r[1])),
        "lease = claimed_at + {} ms",
        int(&r[1])
    );
    c.execute("SELECT pg_sleep(0.3)", &[]).await.unwrap();
    let renewed = c
        .execute(&st.renew, &[V::Int(60_000), V::Uuid(id), V::Uuid(token)])
        .await
        .unwrap();
    assert_eq!(renewed, 1);
    let r = &c.query(times, &[V::Uuid(id)]).await.unwrap()[0];
    assert!(
        int(&r[2]) >= 60_000 + 590,
        "renewed lease ends {} ms after now()",
        int(&r[2])
    );
    let retried = c
        .execute(
            &st.retry,
            &[V::Int(5_000), V::from("x"), V::Uuid(id), V::Uuid(token)],
        )
        .await
        .unwrap();
    assert_eq!(retried, 1);
    let r = &c.query(times, &[V::Uuid(id)]).await.unwrap()[0];
    assert!(
        int(&r[3]) >= 5_000 + 590,
        "retry scheduled {} ms after now()",
        int(&r[3])
    );
    c.rollback().await.unwrap();
}

/// PULL-8, PULL-9, PULL-10: with the right token and a live lease Renew affects exactly 1 row
/// (also when run twice in a row); once the lease has expired, the same token changes nothing:
/// Renew, Complete, Retry and Dead each report 0 rows, as a normal result and not an error.
#[tokio::test]
async fn pull_8_the_fence_needs_the_token_and_a_live_lease() {
    let db = Db::new().await;
    let id = db.insert(NewRow::new("a")).await;
    let st = statements();
    let mut c = db.source().connect(Purpose::Claim).await.unwrap();
    let token = Uuid::new_v4();
    assert_eq!(
        c.query(&st.claim, &claim_params(10, 400, token))
            .await
            .unwrap()
            .len(),
        1
    );
    let renew = [V::Int(400), V::Uuid(id), V::Uuid(token)];
    assert_eq!(c.execute(&st.renew, &renew).await.unwrap(), 1);
    assert_eq!(c.execute(&st.renew, &renew).await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let before = db.row(id).await;
    let (i, t, e) = (V::Uuid(id), V::Uuid(token), V::from("x"));
    let counts = (
        c.execute(&st.renew, &renew).await.unwrap(),
        c.execute(&st.complete, &[i.clone(), t.clone()])
            .await
            .unwrap(),
        c.execute(&st.retry, &[V::Int(0), e.clone(), i.clone(), t.clone()])
            .await
            .unwrap(),
        c.execute(&st.dead, &[e, i, t]).await.unwrap(),
    );
    assert_eq!(counts, (0, 0, 0, 0));
    let after = db.row(id).await;
    assert_eq!(
        (
            after.state.as_str(),
            after.attempt,
            after.claim_token,
            after.last_error
        ),
        ("processing", 0, Some(token), None)
    );
    assert_eq!(after.processed_at_set, before.processed_at_set);
}

/// PULL-13 and PULL-7: each claim call binds a fresh version 4 token (also claims that return
/// nothing); every row of one claim carries that call's token; the message and the log lines
/// never show it. No claim parameter is a time: the times come from the database clock.
#[tokio::test]
async fn pull_13_each_claim_has_a_fresh_v4_token_shared_by_its_rows_and_hidden() {
    let logs = Captured::default();
    let _guard = logs.install();
    let db = Arc::new(Db::new().await);
    let first = db.insert_n(3).await;
    let rec = Probe::without_idle_check(&db);
    let w = Worker::new(Shared(rec.clone()), opts()).unwrap();
    let tokens: Arc<Mutex<BTreeMap<Uuid, Uuid>>> = Arc::default();
    let shown: Arc<Mutex<Vec<String>>> = Arc::default();
    let (db2, tokens2, shown2) = (db.clone(), tokens.clone(), shown.clone());
    let h = handler_fn(move |m, _tx, _| {
        let (db, tokens, shown) = (db2.clone(), tokens2.clone(), shown2.clone());
        Box::pin(async move {
            let token = token_of(&db, m.id)
                .await
                .expect("a claimed row has a token");
            tokens.lock().unwrap().insert(m.id, token);
            shown.lock().unwrap().push(format!("{m:?}"));
            Ok(())
        })
    });
    let run = spawn_run(&w, h);
    assert!(db.wait_all("processed", 10 * SECOND).await);
    let mut second = Vec::new();
    for i in 0..2 {
        second.push(
            db.insert(NewRow::new(&format!("late{i}")).created(-1_000 + i))
                .await,
        );
    }
    assert!(db.wait_all("processed", 10 * SECOND).await);
    stop_and_join(&w, run).await;
    let tokens = tokens.lock().unwrap().clone();
    let t1: BTreeSet<Uuid> = first.iter().map(|id| tokens[id]).collect();
    let t2: BTreeSet<Uuid> = second.iter().map(|id| tokens[id]).collect();
    assert_eq!((t1.len(), t2.len()), (1, 1), "one token per claim");
    assert_ne!(t1, t2, "a new claim has a new token");
    let bound: Vec<Uuid> = rec
        .claim_calls()
        .iter()
        .map(|p| match &p[4] {
            V::Uuid(t) => *t,
            other => panic!("token parameter {other:?}"),
        })
        .collect();
    assert!(bound.len() >= 3, "{} claims", bound.len());
    let distinct: BTreeSet<Uuid> = bound.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        bound.len(),
        "every claim call has a fresh token"
    );
    assert!(bound.iter().all(|t| t.get_version_num() == 4));
    assert!(distinct.is_superset(&t1) && distinct.is_superset(&t2));
    assert!(
        rec.claim_calls()
            .iter()
            .flatten()
            .all(|p| !matches!(p, V::Timestamp(_))),
        "no claim parameter is a worker time"
    );
    let text = logs.text();
    assert!(text.contains("The message was processed."), "{text}");
    for t in distinct {
        let t = t.to_string();
        assert!(!text.contains(&t), "a log line shows the token");
        assert!(shown.lock().unwrap().iter().all(|s| !s.contains(&t)));
    }
}

/// PULL-14 and PULL-58 (and the candidate bound of PULL-17): every claim binds
/// `cand_limit = min(max(3 × batch, 50), 500)`, derived from the batch size (it is no option),
/// with `batch` and `lease_ms` from the options.
#[tokio::test]
async fn pull_14_cand_limit_is_derived_from_the_batch_on_every_claim() {
    let db = Db::new().await;
    for (batch, want) in [
        (1, 50),
        (10, 50),
        (17, 51),
        (166, 498),
        (200, 500),
        (500, 500),
    ] {
        let rec = Probe::without_idle_check(&db);
        let mut o = opts();
        o.batch_size = batch;
        o.lease = Duration::from_millis(4_321);
        let w = Worker::new(Shared(rec.clone()), o).unwrap();
        let run = spawn_run(&w, keys_in_order(Arc::default()));
        let end = Instant::now() + 5 * SECOND;
        while rec.claim_calls().len() < 2 && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop_and_join(&w, run).await;
        let claims = rec.claim_calls();
        assert!(claims.len() >= 2);
        for p in claims {
            assert_eq!(
                (int(&p[1]), int(&p[2]), int(&p[3])),
                (i64::from(batch), 4_321, want),
                "batch {batch}"
            );
        }
    }
}

struct FarFuture;
impl RetryPolicy for FarFuture {
    fn decide(
        &self,
        _: &InboxMessage,
        _: &(dyn std::error::Error + Send + Sync + 'static),
    ) -> FailureAction {
        FailureAction::RetryAfter(Duration::from_secs(100 * 24 * 3600))
    }
}

/// PULL-15 and PULL-62: a retry delay beyond 2147483647 ms is clamped before binding (the row is
/// due about 24.8 days later, not 100 days), and `:error` is the redacted text cut to 2000
/// characters.
#[tokio::test]
async fn pull_15_the_delay_is_clamped_and_the_error_text_is_bounded() {
    let db = Db::new().await;
    let id = db.insert(NewRow::new("a")).await;
    let mut o = opts();
    o.retry_policy = Arc::new(FarFuture);
    let w = db.worker(o);
    let long = format!("failure {}", "x".repeat(5_000));
    let h = handler_fn(move |_, _, _| {
        let long = long.clone();
        Box::pin(async move { Err(long.into()) })
    });
    let run = spawn_run(&w, h);
    let snap = db.wait_for(id, 10 * SECOND, |s| s.attempt == 1).await;
    stop_and_join(&w, run).await;
    assert_eq!(snap.state, "pending");
    assert!(
        (2_147_483_647 - 60_000..=2_147_483_647).contains(&snap.scheduled_in_ms),
        "scheduled {} ms ahead",
        snap.scheduled_in_ms
    );
    let last = snap.last_error.unwrap();
    assert_eq!(last.chars().count(), 2000);
    assert!(last.starts_with("failure xxx") && last.ends_with("...[truncated]"));
}

/// The state and token another session sees while the handler runs.
type Seen21 = (String, Option<Uuid>);

/// PULL-21: the claim is one autocommit statement on its own connection (no transaction is
/// begun around it, so it is never nested), and it has committed before the handler starts:
/// another session already sees the row `processing` with the claim's token.
#[tokio::test]
async fn pull_21_the_claim_commits_before_any_handler_starts() {
    let db = Arc::new(Db::new().await);
    let id = db.insert(NewRow::new("a")).await;
    let rec = Probe::without_idle_check(&db);
    let w = Worker::new(Shared(rec.clone()), opts()).unwrap();
    let seen: Arc<Mutex<Option<Seen21>>> = Arc::default();
    let (db2, seen2) = (db.clone(), seen.clone());
    let h = handler_fn(move |m, _tx, _| {
        let (db, seen) = (db2.clone(), seen2.clone());
        Box::pin(async move {
            let snap = db.row(m.id).await;
            *seen.lock().unwrap() = Some((snap.state, snap.claim_token));
            Ok(())
        })
    });
    let run = spawn_run(&w, h);
    db.wait_state(id, "processed", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    let (state, token) = seen.lock().unwrap().clone().expect("the handler ran");
    assert_eq!(state, "processing");
    let bound: Vec<Option<Uuid>> = rec
        .claim_calls()
        .iter()
        .map(|p| match &p[4] {
            V::Uuid(t) => Some(*t),
            _ => None,
        })
        .collect();
    assert!(token.is_some() && bound.contains(&token));
    assert_eq!(rec.claim_begins.load(Ordering::SeqCst), 0);
}

/// PULL-22: the claimed rows reach the handlers in `(scheduled_at, created_at, id)` order,
/// whatever the insertion order: an earlier `scheduled_at` first even when created later, then
/// `created_at`, then `id` for rows equal in both.
#[tokio::test]
async fn pull_22_claimed_rows_arrive_in_scheduled_created_id_order() {
    let db = Db::new().await;
    // (key, id suffix, scheduled ms before the base, created ms before the base), inserted in
    // this scrambled order. Expected: scheduled_at first, then created_at, then id.
    let rows: [(&str, u128, i64, i64); 5] = [
        ("late-scheduled", 1, 10_000, 90_000),
        ("tie-id-2", 2, 20_000, 50_000),
        ("earliest", 9, 30_000, 1_000),
        ("created-first", 8, 20_000, 60_000),
        ("tie-id-1", 0, 20_000, 50_000),
    ];
    let sql = format!(
        "INSERT INTO {} (id, source, idempotency_key, consumption, state, payload,
                         scheduled_at, created_at)
         VALUES ($1, 's', $2, 'pull', 'pending', '{{}}',
                 timestamptz '2020-01-01 00:00:00+00' - $3::bigint * INTERVAL '1 millisecond',
                 timestamptz '2020-01-01 00:00:00+00' - $4::bigint * INTERVAL '1 millisecond')",
        db.t()
    );
    for (key, suffix, sched, created) in rows {
        let id = Uuid::from_u128(0x4000_8000_0000_0000_0000 + suffix);
        db.admin
            .execute(&sql, &[&id, &key, &sched, &created])
            .await
            .unwrap();
    }
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let w = db.worker(opts());
    let run = spawn_run(&w, keys_in_order(order.clone()));
    assert!(db.wait_all("processed", 10 * SECOND).await);
    stop_and_join(&w, run).await;
    assert_eq!(
        *order.lock().unwrap(),
        [
            "earliest",
            "created-first",
            "tie-id-1",
            "tie-id-2",
            "late-scheduled"
        ]
    );
}

/// The pull-path indexes of a schema: (name, definition) of every index whose predicate
/// mentions `consumption = 'pull'`.
async fn pull_indexes(client: &tokio_postgres::Client, schema: &str) -> Vec<(String, String)> {
    client
        .query(
            "SELECT indexname, indexdef FROM pg_indexes
              WHERE schemaname = $1 AND indexdef LIKE '%''pull''%' ORDER BY indexname",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

async fn inbox_columns(client: &tokio_postgres::Client, schema: &str) -> Vec<String> {
    client
        .query(
            "SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' '
                    || coalesce(column_default, '')
               FROM information_schema.columns
              WHERE table_schema = $1 AND table_name = 'inbox' ORDER BY ordinal_position",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn check_pull_indexes(found: &[(String, String)], schema: &str) {
    let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["idx_inbox_pull_busy", "idx_inbox_pull_pending"],
        "{schema}"
    );
    let busy = &found[0].1;
    let pending = &found[1].1;
    assert!(
        busy.contains("(source, aggregate_id, lease_expires_at) WHERE"),
        "{busy}"
    );
    assert!(
        busy.contains("'pull'") && busy.contains("'processing'"),
        "{busy}"
    );
    assert!(
        pending.contains("(source, scheduled_at, created_at, id) WHERE"),
        "{pending}"
    );
    assert!(
        pending.contains("'pull'") && pending.contains("'pending'"),
        "{pending}"
    );
}

/// PULL-23 (and the PULL-75 schema rule): the schema has exactly the two filtered pull-path
/// indexes, both in the test fixture and in QueueBox's own migration
/// (crates/queuebox-store-postgres/migrations/0002_create_inbox.sql), and the fixture's inbox
/// table has the same columns as the migration's.
#[tokio::test]
async fn pull_23_the_schema_has_exactly_the_two_pull_path_indexes() {
    let db = Db::new().await;
    check_pull_indexes(&pull_indexes(&db.admin, &db.schema_name).await, "fixture");
    let migration = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../queuebox-store-postgres/migrations/0002_create_inbox.sql"),
    )
    .unwrap()
        // Version 4 adds the nullable raw_body of storeRawBody; the fixture carries it too.
        + &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../queuebox-store-postgres/migrations/0004_add_inbox_raw_body.sql"),
        )
        .unwrap();
    let (client, conn) = tokio_postgres::connect(&support::pg_url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let schema = format!("qb_rs_mig_{}", Uuid::new_v4().simple());
    client
        .batch_execute(&format!(
            "CREATE SCHEMA \"{schema}\"; SET search_path TO \"{schema}\"; {migration}"
        ))
        .await
        .unwrap();
    let found = pull_indexes(&client, &schema).await;
    let fixture_cols = inbox_columns(&client, &db.schema_name).await;
    let migration_cols = inbox_columns(&client, &schema).await;
    client
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .unwrap();
    check_pull_indexes(&found, "migration");
    assert_eq!(fixture_cols.len(), 19);
    assert_eq!(fixture_cols, migration_cols);
}

type Windows = Arc<Mutex<Vec<(String, Instant, Instant)>>>;

/// A handler that sleeps 500 ms and records its window.
fn windowed(windows: Windows) -> impl queuebox_inbox::Handler {
    handler_fn(move |m, _tx, _| {
        let windows = windows.clone();
        Box::pin(async move {
            let start = Instant::now();
            tokio::time::sleep(Duration::from_millis(500)).await;
            windows
                .lock()
                .unwrap()
                .push((m.source.clone(), start, Instant::now()));
            Ok(())
        })
    })
}

/// PULL-29: the aggregate scope includes the source: a row of aggregate `A` in source `t` is
/// claimed and handled while a row of aggregate `A` in source `s` is in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_29_two_sources_use_the_same_aggregate_id_independently() {
    let db = Db::new().await;
    db.insert(NewRow::new("s-a").aggregate("A")).await;
    let mut other = NewRow::new("t-a").aggregate("A");
    other.source = "t".into();
    db.insert(other).await;
    let win: Windows = Arc::default();
    let ws = db.worker(opts());
    let mut ot = opts();
    ot.source = "t".into();
    let wt = db.worker(ot);
    let rs = spawn_run(&ws, windowed(win.clone()));
    let rt = spawn_run(&wt, windowed(win.clone()));
    assert!(db.wait_all("processed", 10 * SECOND).await);
    stop_and_join(&ws, rs).await;
    stop_and_join(&wt, rt).await;
    let w = win.lock().unwrap().clone();
    assert_eq!(w.len(), 2);
    let (a, b) = (&w[0], &w[1]);
    assert!(
        a.1 < b.2 && b.1 < a.2,
        "the two handlers of aggregate A ran one after the other"
    );
}

/// PULL-31: a retry moves the failed row into the future, and the next row of its aggregate,
/// now the first due row, is claimed and processed before it.
#[tokio::test]
async fn pull_31_after_a_retry_the_next_row_of_the_aggregate_goes_first() {
    let db = Db::new().await;
    let a1 = db.insert(NewRow::new("a1").aggregate("A")).await;
    let a2 = db
        .insert(NewRow::new("a2").aggregate("A").created(-59_000))
        .await;
    let mut o = opts();
    o.retry_policy = Arc::new(DefaultRetryPolicy::new(5, 60 * SECOND, 60 * SECOND, 0.0).unwrap());
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let o2 = order.clone();
    let h = handler_fn(move |m, _tx, _| {
        let order = o2.clone();
        Box::pin(async move {
            order.lock().unwrap().push(m.idempotency_key.clone());
            if m.idempotency_key == "a1" {
                Err("boom".into())
            } else {
                Ok(())
            }
        })
    });
    let w = db.worker(o);
    let run = spawn_run(&w, h);
    let s2 = db.wait_state(a2, "processed", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    let s1 = db.row(a1).await;
    assert_eq!(s2.state, "processed");
    assert_eq!((s1.state.as_str(), s1.attempt), ("pending", 1));
    assert!(s1.scheduled_in_ms > 30_000);
    assert_eq!(*order.lock().unwrap(), ["a1", "a2"]);
}

/// PULL-32 (and PULL-16, PULL-17, PULL-30): a crashed worker's row keeps its `scheduled_at`;
/// while its lease lives the later row of its aggregate is busy-blocked, and after the lease
/// expires the old row is the head again and is claimed (with the same `attempt`) before the
/// later row.
#[tokio::test]
async fn pull_32_an_abandoned_row_is_claimed_again_before_the_later_rows_of_its_aggregate() {
    let db = Db::new().await;
    let a1 = db.insert(NewRow::new("a1").aggregate("A")).await;
    db.insert(NewRow::new("a2").aggregate("A").created(-59_000))
        .await;
    let st = statements();
    let mut c = db.source().connect(Purpose::Claim).await.unwrap();
    let crashed = c
        .query(&st.claim, &claim_params(10, 800, Uuid::new_v4()))
        .await
        .unwrap();
    assert_eq!(crashed.len(), 1, "one head per aggregate");
    assert_eq!(crashed[0][0], V::Uuid(a1));
    // The crashed worker never writes again. While its lease lives, nothing of A is claimable.
    let blocked = c
        .query(&st.claim, &claim_params(10, 800, Uuid::new_v4()))
        .await
        .unwrap();
    assert!(blocked.is_empty());
    drop(c);
    let order: Arc<Mutex<Vec<(String, i32)>>> = Arc::default();
    let o2 = order.clone();
    let h = handler_fn(move |m, _tx, _| {
        let order = o2.clone();
        Box::pin(async move {
            order
                .lock()
                .unwrap()
                .push((m.idempotency_key.clone(), m.attempt));
            Ok(())
        })
    });
    let w = db.worker(opts());
    let run = spawn_run(&w, h);
    assert!(db.wait_all("processed", 10 * SECOND).await);
    stop_and_join(&w, run).await;
    assert_eq!(
        *order.lock().unwrap(),
        [("a1".to_owned(), 0), ("a2".to_owned(), 0)]
    );
}

/// PULL-19 and PULL-36 (step 2): a claim that fails is logged as `The claim failed.` at warn
/// level, touches no row, and is retried only after the poll interval, never at once.
#[tokio::test]
async fn pull_36_a_failed_claim_is_logged_and_waits_the_poll_interval() {
    let logs = Captured::default();
    let _guard = logs.install();
    let db = Db::new().await;
    let id = db.insert(NewRow::new("a")).await;
    let rec = Probe::without_idle_check(&db);
    rec.fail_claims.store(true, Ordering::SeqCst);
    let mut o = opts();
    o.poll_interval = Duration::from_millis(300);
    let w = Worker::new(Shared(rec.clone()), o).unwrap();
    let run = spawn_run(&w, keys_in_order(Arc::default()));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stop_and_join(&w, run).await;
    let attempts = rec.claim_calls().len();
    assert!((4..=7).contains(&attempts), "{attempts} claims in 1.5 s");
    let text = logs.text();
    let line = text
        .lines()
        .find(|l| l.contains("The claim failed."))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("WARN") && line.contains("claim connection refused"),
        "{line}"
    );
    let snap = db.row(id).await;
    assert_eq!(
        (
            snap.state.as_str(),
            snap.attempt,
            snap.claim_token,
            snap.last_error
        ),
        ("pending", 0, None, None)
    );
}

/// PULL-36 (step 4): after a non-empty batch the worker claims again at once, without waiting
/// the poll interval: three one-row batches finish well within one 5 s poll interval.
#[tokio::test]
async fn pull_36_a_full_batch_is_followed_by_the_next_claim_at_once() {
    let db = Db::new().await;
    db.insert_n(3).await;
    let mut o = opts();
    o.batch_size = 1;
    o.poll_interval = 5 * SECOND;
    let w = db.worker(o);
    let started = Instant::now();
    let run = spawn_run(&w, keys_in_order(Arc::default()));
    assert!(db.wait_all("processed", 4 * SECOND).await);
    let took = started.elapsed();
    stop_and_join(&w, run).await;
    assert!(took < 3 * SECOND, "{took:?}");
}

/// PULL-37: a stop request ends the poll-interval wait at once.
#[tokio::test]
async fn pull_37_a_stop_request_interrupts_the_poll_wait() {
    let db = Db::new().await;
    let mut o = opts();
    o.poll_interval = Duration::from_secs(60);
    let w = db.worker(o);
    let run = spawn_run(&w, keys_in_order(Arc::default()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    w.stop();
    tokio::time::timeout(2 * SECOND, run)
        .await
        .expect("run returns without waiting out the poll interval")
        .unwrap();
    assert!(asked.elapsed() < SECOND);
}

/// PULL-39: a claimed row that waits for a slot and loses its lease meanwhile is skipped: its
/// handler is never called and nothing is written for it.
#[tokio::test]
async fn pull_39_a_waiting_row_whose_lease_is_lost_is_skipped() {
    let db = Arc::new(Db::new().await);
    let ids = db.insert_n(2).await;
    let mut o = opts();
    o.batch_size = 2;
    o.max_concurrency = 1;
    o.lease = Duration::from_millis(600);
    let w = db.worker(o);
    let handled: Arc<Mutex<Vec<String>>> = Arc::default();
    let thief: Arc<Mutex<Option<Uuid>>> = Arc::default();
    let (db2, h2, t2, waiting) = (db.clone(), handled.clone(), thief.clone(), ids[1]);
    let h = handler_fn(move |m, _tx, _| {
        let (db, handled, thief) = (db2.clone(), h2.clone(), t2.clone());
        Box::pin(async move {
            handled.lock().unwrap().push(m.idempotency_key.clone());
            if m.id != waiting {
                // The waiting row is taken by someone else, then its renewal notices.
                *thief.lock().unwrap() = Some(db.steal(waiting).await);
                tokio::time::sleep(Duration::from_millis(900)).await;
            }
            Ok(())
        })
    });
    let run = spawn_run(&w, h);
    db.wait_state(ids[0], "processed", 10 * SECOND).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop_and_join(&w, run).await;
    assert_eq!(*handled.lock().unwrap(), ["k0"]);
    let snap = db.row(ids[1]).await;
    assert_eq!(
        (
            snap.state.as_str(),
            snap.attempt,
            snap.claim_token,
            snap.last_error
        ),
        ("processing", 0, *thief.lock().unwrap(), None)
    );
}

/// PULL-42: the handler transaction runs at the database's default isolation level, READ
/// COMMITTED on PostgreSQL.
#[tokio::test]
async fn pull_42_the_handler_transaction_runs_at_read_committed() {
    let db = Db::new().await;
    let id = db.insert(NewRow::new("a")).await;
    let seen: Arc<Mutex<Vec<V>>> = Arc::default();
    let s2 = seen.clone();
    let h = handler_fn(move |_m, tx, _| {
        let seen = s2.clone();
        Box::pin(async move {
            let rows = tx
                .query("SELECT current_setting('transaction_isolation')", &[])
                .await?;
            seen.lock().unwrap().extend(rows[0].clone());
            Ok(())
        })
    });
    let w = db.worker(opts());
    let run = spawn_run(&w, h);
    db.wait_state(id, "processed", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    assert_eq!(
        seen.lock().unwrap()[0],
        V::Text("read committed".to_owned())
    );
}

/// PULL-53 (and PULL-13): a log line about a message carries `source`, `messageId`, `attempt`,
/// `correlationId` and the redacted `error`, and never the claim token or the payload.
#[tokio::test]
async fn pull_53_log_lines_carry_the_fields_and_never_the_token_or_the_payload() {
    let logs = Captured::default();
    let _guard = logs.install();
    let db = Arc::new(Db::new().await);
    let mut row = NewRow::new("a");
    row.correlation_id = Some("corr-53".into());
    row.payload = serde_json::json!({"marker": "payload-marker-53"});
    let id = db.insert(row).await;
    let token: Arc<Mutex<Option<Uuid>>> = Arc::default();
    let (db2, t2) = (db.clone(), token.clone());
    let h = handler_fn(move |m, _tx, _| {
        let (db, token) = (db2.clone(), t2.clone());
        Box::pin(async move {
            *token.lock().unwrap() = token_of(&db, m.id).await;
            Err("boom password=hunter2".into())
        })
    });
    let w = db.worker(opts());
    let run = spawn_run(&w, h);
    db.wait_for(id, 10 * SECOND, |s| s.attempt == 1).await;
    stop_and_join(&w, run).await;
    let text = logs.text();
    let line = text
        .lines()
        .find(|l| l.contains("The message retries."))
        .unwrap_or_else(|| panic!("{text}"));
    for field in [
        "source=s".to_owned(),
        format!("messageId={id}"),
        "attempt=0".to_owned(),
        "correlationId=".to_owned(),
        "corr-53".to_owned(),
        "error=boom password=[REDACTED]".to_owned(),
    ] {
        assert!(line.contains(&field), "{field} missing from {line}");
    }
    let token = token.lock().unwrap().expect("token read").to_string();
    assert!(!text.contains(&token), "the token was logged");
    assert!(
        !text.contains("payload-marker-53"),
        "the payload was logged"
    );
    assert!(!text.contains("hunter2"));
}

/// PULL-55: a header value that is not a string reaches the handler as its JSON text.
#[tokio::test]
async fn pull_55_non_string_header_values_arrive_as_json_text() {
    let db = Db::new().await;
    let mut row = NewRow::new("a");
    row.headers = serde_json::json!({"n": 5, "b": true, "o": {"k": "v"}, "z": null, "s": "x"});
    let id = db.insert(row).await;
    let got: Arc<Mutex<Option<BTreeMap<String, String>>>> = Arc::default();
    let g2 = got.clone();
    let h = handler_fn(move |m, _tx, _| {
        let got = g2.clone();
        Box::pin(async move {
            *got.lock().unwrap() = Some(m.headers.clone());
            Ok(())
        })
    });
    let w = db.worker(opts());
    let run = spawn_run(&w, h);
    db.wait_state(id, "processed", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    let headers = got.lock().unwrap().clone().unwrap();
    let want: BTreeMap<String, String> = [
        ("b", "true"),
        ("n", "5"),
        ("o", r#"{"k":"v"}"#),
        ("s", "x"),
        ("z", "null"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(headers, want);
}

/// PULL-56 and PULL-60: the options' Rust names and defaults, and the default retry policy
/// (5 deliveries, 1 s base, 300 s cap, 25 % jitter).
#[test]
fn pull_56_the_options_have_their_names_and_defaults() {
    let o = WorkerOptions::new("s");
    assert_eq!(o.source, "s");
    assert_eq!(o.batch_size, 10);
    assert_eq!(o.lease, Duration::from_millis(30_000));
    assert_eq!(o.max_concurrency, 1);
    assert_eq!(o.poll_interval, Duration::from_millis(1_000));
    assert_eq!(o.shutdown_grace, Duration::from_millis(30_000));
    assert_eq!(o.dialect, Dialect::Postgresql);
    assert_eq!(o.schema, Schema::default());
    assert_eq!(o.schema.table, "inbox");
    let mut m = InboxMessage {
        id: Uuid::new_v4(),
        source: "s".into(),
        idempotency_key: "k".into(),
        aggregate_id: None,
        event_type: None,
        payload: serde_json::Value::Null,
        attempt: 0,
        correlation_id: None,
        headers: BTreeMap::new(),
        created_at: std::time::SystemTime::now(),
    };
    let err: Box<dyn std::error::Error + Send + Sync> = "x".into();
    for _ in 0..200 {
        match o.retry_policy.decide(&m, &*err) {
            FailureAction::RetryAfter(d) => assert!((1000..1250).contains(&d.as_millis())),
            FailureAction::DeadLetter => panic!("the first failure retries"),
        }
    }
    m.attempt = 3;
    match o.retry_policy.decide(&m, &*err) {
        FailureAction::RetryAfter(d) => assert!((8000..10_000).contains(&d.as_millis())),
        FailureAction::DeadLetter => panic!("the fourth failure retries"),
    }
    m.attempt = 4;
    assert_eq!(o.retry_policy.decide(&m, &*err), FailureAction::DeadLetter);
    let capped = DefaultRetryPolicy::new(100, SECOND, Duration::from_millis(300_000), 0.0).unwrap();
    assert_eq!(
        capped.decide_attempt(20, 0.0),
        FailureAction::RetryAfter(Duration::from_millis(300_000))
    );
}

fn manifest_file(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// PULL-58: the derived values are not options. The public fields of `WorkerOptions` are
/// exactly the options of PULL-56: this destructuring stops compiling when a field is added, so a
/// derived value can never become an option unnoticed. Their behaviour is proved where they act:
/// the claim timeout by `pull_20_…`, the renewal interval by `pull_43_…`, `cand_limit` by
/// `pull_14_…`.
#[test]
fn pull_58_derived_values_are_not_options() {
    let WorkerOptions {
        source: _,
        batch_size: _,
        lease: _,
        max_concurrency: _,
        poll_interval: _,
        shutdown_grace: _,
        dialect: _,
        schema: _,
        retry_policy: _,
    } = WorkerOptions::new("s");
}

/// PULL-20 and PULL-58: the claim call has a client-side timeout of 30 s, never less, and no
/// option changes it. An outside session holds an EXCLUSIVE lock on the inbox table (reads pass,
/// the claim's UPDATE waits), so the claim blocks; on the paused test clock (which advances
/// whenever the runtime is idle) the claim fails after exactly 30 s, is logged as `The claim
/// failed.`, and the row is untouched.
#[tokio::test(start_paused = true)]
async fn pull_20_a_claim_that_does_not_finish_within_30_s_fails() {
    let logs = Captured::default();
    let _guard = logs.install();
    let db = Db::new().await;
    let id = db.insert(NewRow::new("a")).await;
    let (locker, connection) = tokio_postgres::connect(&support::pg_url(), tokio_postgres::NoTls)
        .await
        .expect("PostgreSQL reachable");
    tokio::spawn(connection);
    let lock = format!("BEGIN; LOCK TABLE {} IN EXCLUSIVE MODE", db.t());
    locker.batch_execute(&lock).await.unwrap();
    let w = db.worker(opts());
    let started = tokio::time::Instant::now();
    let run = spawn_run(&w, keys_in_order(Arc::default()));
    while !logs.text().contains("The claim failed.") {
        assert!(started.elapsed() < 120 * SECOND, "no claim failed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waited = started.elapsed();
    assert!(
        (30 * SECOND..31 * SECOND).contains(&waited),
        "the claim failed after {waited:?}"
    );
    assert!(
        logs.text()
            .contains("The claim did not finish within 30 s."),
        "{}",
        logs.text()
    );
    let snap = db.row(id).await;
    assert_eq!((snap.state.as_str(), snap.attempt), ("pending", 0));
    // Release the lock before the schema is dropped; a claim that was given up may still land
    // on the server afterwards (the row then returns after its lease), which is PULL-20's point.
    locker.batch_execute("ROLLBACK").await.unwrap();
    // Back to the real clock: the claim in flight now waits for the server, not for a timer.
    tokio::time::resume();
    stop_and_join(&w, run).await;
}

/// PULL-43 and PULL-58: a held row is renewed every `max(1 ms, lease / 3)`, derived from the
/// lease (not an option), on its own connection: with a 300 ms lease, a handler that runs 1 s
/// sees about ten renewals (one per 100 ms).
#[tokio::test]
async fn pull_43_the_lease_is_renewed_every_third_of_the_lease() {
    let db = Db::new().await;
    let id = db.insert(NewRow::new("a")).await;
    let probe = Probe::without_idle_check(&db);
    let mut o = opts();
    o.lease = Duration::from_millis(300);
    let w = Worker::new(Shared(probe.clone()), o).unwrap();
    let h = handler_fn(|_m, _tx, _| {
        Box::pin(async {
            tokio::time::sleep(SECOND).await;
            Ok(())
        })
    });
    let run = spawn_run(&w, h);
    let snap = db.wait_state(id, "processed", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    assert_eq!(snap.state, "processed");
    let renewals = probe.renewals.load(Ordering::SeqCst);
    assert!((7..=11).contains(&renewals), "{renewals} renewals in 1 s");
}

/// PULL-59: with the default `max_concurrency` of 1, a worker runs one message at a time, even
/// for rows without an aggregate.
#[tokio::test]
async fn pull_59_the_default_concurrency_runs_one_message_at_a_time() {
    let db = Db::new().await;
    db.insert_n(3).await;
    let busy = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (b2, p2) = (busy.clone(), peak.clone());
    let h = handler_fn(move |_m, _tx, _| {
        let (busy, peak) = (b2.clone(), p2.clone());
        Box::pin(async move {
            let now = busy.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
            busy.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        })
    });
    let w = db.worker(opts());
    let run = spawn_run(&w, h);
    assert!(db.wait_all("processed", 10 * SECOND).await);
    stop_and_join(&w, run).await;
    assert_eq!(peak.load(Ordering::SeqCst), 1);
}

/// PULL-71: the shared corpus covers the required kinds of input, and every case meant to stay
/// unchanged (`keep-…`) expects its input unchanged.
#[test]
fn pull_71_the_redaction_corpus_covers_the_required_kinds() {
    let corpus: serde_json::Value = serde_json::from_str(&manifest_file(
        "../../clients/contract/redaction-corpus.json",
    ))
    .unwrap();
    let cases = corpus["cases"].as_array().unwrap();
    let names: BTreeSet<&str> = cases.iter().map(|c| c["name"].as_str().unwrap()).collect();
    let required = [
        // Connection strings, key/value and URI forms.
        "connstring-npgsql",
        "uri-postgres",
        // URIs with credentials.
        "uri-at-in-password",
        "uri-slash-in-password",
        "uri-space-in-password",
        "uri-two-in-one-message",
        "uri-single-slash",
        "uri-user-without-password",
        // Bearer and basic tokens, header form and bare.
        "header-authorization-bearer",
        "header-authorization-basic",
        "bare-bearer-jwt",
        "bare-basic",
        // API keys and tokens in query strings.
        "query-api-key",
        "query-access-token",
        // JSON secret fields.
        "json-secret-field",
        "json-escaped-quote",
        "json-nested-object",
        "json-number-token",
        // Header maps.
        "header-map-printed",
        // Prefixes and every separator style.
        "kv-prefix-env-var",
        "kv-key-dot-separator",
        "kv-key-hyphen-separator",
        "kv-key-no-separator",
        "kv-upper-snake-aws",
        // Truncation.
        "truncate-long",
        // Texts that must stay unchanged.
        "keep-status-line",
        "keep-password-prose",
        "keep-token-prose",
        "keep-digest-prose",
        "keep-similar-words",
        "keep-email",
        "keep-at-in-path",
        "keep-host-port-then-email",
        "keep-empty-value",
        "keep-non-ascii",
        "keep-unicode-lookalike-kelvin",
    ];
    for name in required {
        assert!(names.contains(name), "the corpus lacks {name}");
    }
    for case in cases {
        if case["name"].as_str().unwrap().starts_with("keep-") {
            assert_eq!(case["input"], case["expected"], "{}", case["name"]);
        }
    }
}

/// PULL-72: no database adapter feature is enabled by default; `postgres`, `sqlite` and `mysql`
/// exist (tests/contract_sqlite_mysql.rs runs the contract through the last two).
#[test]
fn pull_72_no_database_feature_is_enabled_by_default() {
    let manifest = manifest_file("Cargo.toml");
    let features = manifest
        .split("[features]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("[features]");
    let lines: Vec<&str> = features
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(lines.contains(&"default = []"), "{lines:?}");
    for feature in ["postgres", "sqlite", "mysql"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{feature} = ["))),
            "feature {feature}: {lines:?}"
        );
    }
}

/// PULL-73: the core depends on no database driver (the drivers are optional dependencies), and
/// releasing a connection with an open transaction rolls it back.
#[tokio::test]
async fn pull_73_the_core_needs_no_driver_and_a_released_transaction_rolls_back() {
    let manifest = manifest_file("Cargo.toml");
    let deps = manifest
        .split("\n[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("[dependencies]");
    for driver in ["tokio-postgres", "deadpool-postgres"] {
        let line = deps
            .lines()
            .find(|l| l.starts_with(driver))
            .unwrap_or_else(|| panic!("{driver}"));
        assert!(line.contains("optional = true"), "{line}");
    }
    let db = Db::new().await;
    let id = Uuid::new_v4();
    let insert = "INSERT INTO app_rows (message_id) VALUES ($1)";
    let mut c = db.source().connect(Purpose::Handler).await.unwrap();
    c.begin().await.unwrap();
    assert_eq!(c.execute(insert, &[V::Uuid(id)]).await.unwrap(), 1);
    drop(c);
    assert_eq!(db.app_rows(id).await, 0, "release rolled back");
    let mut c = db.source().connect(Purpose::Handler).await.unwrap();
    c.begin().await.unwrap();
    c.execute(insert, &[V::Uuid(id)]).await.unwrap();
    c.commit().await.unwrap();
    drop(c);
    assert_eq!(db.app_rows(id).await, 1, "commit kept the write");
}

/// The doc comment (`///` lines and the attributes between them) right above `fn <name>`.
fn doc_of(source: &str, name: &str) -> Option<String> {
    let lines: Vec<&str> = source.lines().collect();
    let at = lines.iter().position(|l| {
        let l = l.trim_start();
        let l = l.strip_prefix("pub ").unwrap_or(l);
        let l = l.strip_prefix("async ").unwrap_or(l);
        l.strip_prefix("fn ")
            .and_then(|rest| rest.strip_prefix(name))
            .is_some_and(|rest| rest.starts_with('(') || rest.starts_with('<'))
    })?;
    let mut doc = Vec::new();
    for l in lines[..at].iter().rev() {
        let t = l.trim();
        if let Some(d) = t.strip_prefix("///") {
            doc.push(d.to_owned());
        } else if !t.starts_with("#[") {
            break;
        }
    }
    doc.reverse();
    Some(doc.join("\n"))
}

/// `PULL-<n>` followed by no further digit.
fn names_id(text: &str, n: u32) -> bool {
    let id = format!("PULL-{n}");
    text.match_indices(&id).any(|(i, _)| {
        !text[i + id.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// PULL-75: this crate's table (REQUIREMENTS.md) has one row per PULL-1..PULL-76, in order;
/// every test it cites exists as `fn <name>` in the cited file, and that test's name
/// (`pull_<N>_…`) or doc comment names the requirement. A row without a test states why.
#[test]
fn every_pull_requirement_has_a_row_and_its_tests_exist() {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest.join("../..");
    let table = manifest_file("REQUIREMENTS.md");
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| PULL-")).collect();
    let ids: Vec<u32> = rows
        .iter()
        .map(|r| {
            r["| PULL-".len()..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(
        ids,
        (1..=76).collect::<Vec<_>>(),
        "one row per id, in order"
    );
    let mut files = BTreeMap::new();
    for (row, n) in rows.iter().zip(ids) {
        let cells: Vec<&str> = row.split(" | ").collect();
        assert!(cells.len() >= 2, "{row}");
        let tests = cells[1..].join(" | ");
        let cited: Vec<&str> = tests
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|c| c.contains("::"))
            .collect();
        if cited.is_empty() {
            assert!(
                tests.starts_with("not applicable on PostgreSQL: ")
                    || tests.starts_with("documentation: "),
                "PULL-{n} cites no test and gives no reason: {row}"
            );
            continue;
        }
        for c in cited {
            let (path, name) = c.rsplit_once("::").unwrap();
            let file = if path.starts_with("crates/") {
                workspace.join(path)
            } else {
                manifest.join(path)
            };
            let source = files.entry(file.clone()).or_insert_with(|| {
                std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{c}: {e}"))
            });
            let doc = doc_of(source, name).unwrap_or_else(|| panic!("PULL-{n}: no fn {c}"));
            assert!(
                name.starts_with(&format!("pull_{n}_")) || names_id(&doc, n),
                "PULL-{n}: {c} does not name the requirement"
            );
        }
    }
}

/// PULL-41 and PULL-52 (the commit fails): Complete affects the row, then COMMIT itself fails (a
/// deferred unique constraint of the application's table is checked at commit). The library treats
/// it as a library failure: `The message was abandoned.`, nothing written (the row stays
/// `processing` under the same token, `attempt` 0, and the application row is gone with the
/// rollback); after the lease expires the row comes back and, the conflict gone, is processed
/// with `attempt` still 0.
#[tokio::test]
async fn pull_41_a_failing_commit_is_a_library_failure() {
    let logs = Captured::default();
    let _guard = logs.install();
    let db = Db::new().await;
    db.admin
        .batch_execute(&format!(
            "CREATE TABLE \"{s}\".app_once (k text, CONSTRAINT app_once_k UNIQUE (k) \
             DEFERRABLE INITIALLY DEFERRED); INSERT INTO \"{s}\".app_once VALUES ('taken');",
            s = db.schema_name
        ))
        .await
        .expect("the application table");
    let id = db.insert(NewRow::new("a")).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let handler_calls = Arc::clone(&calls);
    let h = handler_fn(move |_m, tx, _cancel| {
        let calls = Arc::clone(&handler_calls);
        Box::pin(async move {
            // The first delivery writes a value that is already taken: the statement passes
            // (the check is deferred) and the COMMIT fails. The second writes a free value.
            let value = if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                "taken"
            } else {
                "free"
            };
            tx.execute("INSERT INTO app_once (k) VALUES ($1)", &[value.into()])
                .await?;
            Ok(())
        })
    });
    let mut o = opts();
    o.lease = Duration::from_millis(1000);
    let w = db.worker(o);
    let run = spawn_run(&w, h);
    let end = Instant::now() + 5 * SECOND;
    while !logs.text().contains("The message was abandoned.") && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let right_after = db.row(id).await;
    let after_failure = app_once_values(&db).await;
    let snap = db.wait_state(id, "processed", 10 * SECOND).await;
    stop_and_join(&w, run).await;
    let text = logs.text();
    assert!(text.contains("The message was abandoned."), "{text}");
    assert!(
        text.contains("app_once_k"),
        "the redacted error names the cause: {text}"
    );
    assert_eq!(
        (right_after.state.as_str(), right_after.attempt),
        ("processing", 0),
        "nothing was written for the row after the failed commit"
    );
    assert!(right_after.claim_token.is_some() && right_after.last_error.is_none());
    assert_eq!(after_failure, ["taken"], "the handler's write rolled back");
    assert_eq!((snap.state.as_str(), snap.attempt), ("processed", 0));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(app_once_values(&db).await, ["free", "taken"]);
}

/// PULL-42: an application that runs its handler transaction at REPEATABLE READ may see Complete
/// fail with a serialization error after another worker took the row over (instead of 0 rows).
/// The worker rolls back and handles it as a library failure: `The message was abandoned.`, and
/// it writes nothing: the row keeps the new owner's token and lease, `attempt` 0, no error.
#[tokio::test]
async fn pull_42_a_serialization_failure_of_complete_is_a_library_failure() {
    let logs = Captured::default();
    let _guard = logs.install();
    let db = Db::new().await;
    let id = db.insert(NewRow::new("a")).await;
    let (snapshot_taken_tx, snapshot_taken) = tokio::sync::oneshot::channel::<()>();
    let (stolen_tx, stolen) = tokio::sync::oneshot::channel::<()>();
    let signals = Arc::new(Mutex::new(Some((snapshot_taken_tx, stolen))));
    let table = db.schema.table.clone();
    let h = handler_fn(move |m, tx, _cancel| {
        let signals = Arc::clone(&signals);
        let table = table.clone();
        Box::pin(async move {
            let (taken, stolen) = signals.lock().unwrap().take().expect("one delivery");
            tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", &[])
                .await?;
            // The snapshot starts with the first query.
            tx.query(
                &format!("SELECT 1 FROM \"{table}\" WHERE id = $1"),
                &[m.id.into()],
            )
            .await?;
            taken.send(()).unwrap();
            stolen.await.unwrap();
            Ok(())
        })
    });
    let w = db.worker(opts());
    let run = spawn_run(&w, h);
    tokio::time::timeout(5 * SECOND, snapshot_taken)
        .await
        .expect("the handler ran")
        .unwrap();
    let thief = db.steal(id).await;
    stolen_tx.send(()).unwrap();
    let end = Instant::now() + 5 * SECOND;
    while !logs.text().contains("The message was abandoned.") && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop_and_join(&w, run).await;
    let text = logs.text();
    assert!(text.contains("The message was abandoned."), "{text}");
    assert!(text.contains("could not serialize access"), "{text}");
    let row = db.row(id).await;
    assert_eq!(
        (
            row.state.as_str(),
            row.attempt,
            row.claim_token,
            row.last_error
        ),
        ("processing", 0, Some(thief), None)
    );
}

/// The values of the application table of `pull_41_…`, in order.
async fn app_once_values(db: &Db) -> Vec<String> {
    let sql = format!("SELECT k FROM \"{}\".app_once ORDER BY k", db.schema_name);
    db.admin
        .query(&sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}
