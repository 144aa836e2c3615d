//! Statement facts of the outbox requirements that only PostgreSQL's own tools can show (outbox.md
//! OUT-1: a database clock shadowed in the test schema; OUT-17: row locks held by another
//! session and the claim's single transaction by `xmin`; OUT-11: the claim's buffer reads on a
//! table without statistics), against the real server, each test in
//! a schema of its own. The store-neutral ones (OUT-5, OUT-9, OUT-10, OUT-38, OUT-47) are in
//! the conformance suite.

#[allow(dead_code)]
#[path = "postgres/support.rs"]
mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use queuebox_core::TableLayout;
use queuebox_store::{Claim, ClaimedRow, MigrateRequest, OutboxStore, SchemaStore, TerminalWrite};
use queuebox_store_postgres::PgStore;
use support::TestDb;
use tokio_postgres::{Client, NoTls};
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(30);
const DAY_US: i64 = 86_400_000_000;

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

/// Inserts one row as an application does (one statement, one transaction); returns its id.
async fn insert(db: &TestDb, topic: &str, key: Option<&str>) -> Uuid {
    db.admin
        .query_one(
            "INSERT INTO outbox (topic, key, payload) VALUES ($1, $2, '{}') RETURNING id",
            &[&topic, &key],
        )
        .await
        .expect("insert an outbox row")
        .get(0)
}

/// Another session in the test schema, as another application connection.
async fn session(db: &TestDb) -> Client {
    let (client, connection) = tokio_postgres::connect(&support::base_url(), NoTls)
        .await
        .expect("connect a second session");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("SET search_path TO \"{}\"", db.schema))
        .await
        .expect("search_path");
    client
}

/// The columns these tests read back, times in µs since the epoch.
#[derive(Clone, Debug, PartialEq)]
struct Snap {
    state: String,
    attempt: i32,
    sequence: i64,
    scheduled_at: i64,
    updated_at: i64,
    claimed_at: Option<i64>,
    claim_token: Option<Uuid>,
    lease_expires_at: Option<i64>,
}

fn us(column: &str) -> String {
    format!("(extract(epoch from {column}) * 1000000)::bigint")
}

async fn snap(db: &TestDb, id: Uuid) -> Snap {
    let sql = format!(
        "SELECT state, attempt, sequence, {}, {}, {}, claim_token, {} FROM outbox WHERE id = $1",
        us("scheduled_at"),
        us("updated_at"),
        us("claimed_at"),
        us("lease_expires_at"),
    );
    let r = db.admin.query_one(&sql, &[&id]).await.expect("read a row");
    Snap {
        state: r.get(0),
        attempt: r.get(1),
        sequence: r.get(2),
        scheduled_at: r.get(3),
        updated_at: r.get(4),
        claimed_at: r.get(5),
        claim_token: r.get(6),
        lease_expires_at: r.get(7),
    }
}

fn host_now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_micros() as i64
}

fn ids(rows: &[ClaimedRow]) -> Vec<Uuid> {
    rows.iter().map(|r| r.claim.id.0).collect()
}

fn claim_of(rows: &[ClaimedRow], id: Uuid) -> Claim {
    rows.iter()
        .find(|r| r.claim.id.0 == id)
        .unwrap_or_else(|| panic!("{id} was claimed"))
        .claim
}

/// OUT-1: the lease, the due test, the retry time and `updated_at` come from the database clock
/// inside the statement, never from the replica's clock. The sessions of this store see a
/// database clock one day ahead of the host (a `clock_timestamp()` of the test schema that
/// shadows `pg_catalog`'s), so every value written must be a day ahead of the host clock.
#[tokio::test]
async fn out_1_lease_due_test_retry_time_and_updated_at_come_from_the_database_clock() {
    let (db, _) = migrated("out1").await;
    db.exec(
        "CREATE FUNCTION clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE \
         AS $$ SELECT pg_catalog.clock_timestamp() + interval '1 day' $$",
    )
    .await;
    let mut target = support::target(&db.schema);
    target.options = Some(format!("-c search_path={},pg_catalog", db.schema));
    let store = PgStore::connect(&support::config_for(target, TableLayout::default(), 30_000))
        .await
        .expect("connect the store with the shifted database clock");

    // Due by the database clock only (an hour ahead of the host), and due by neither.
    let due = insert(&db, "t", None).await;
    let later = insert(&db, "t", None).await;
    db.exec(&format!(
        "UPDATE outbox SET scheduled_at = pg_catalog.now() + interval '1 hour' WHERE id = '{due}';\
         UPDATE outbox SET scheduled_at = pg_catalog.now() + interval '2 days' WHERE id = '{later}'"
    ))
    .await;

    let lease = Duration::from_millis(45_000);
    let host_before = host_now_us();
    let claimed = store.claim(10, lease).await.expect("claim");
    let host_after = host_now_us();
    assert_eq!(
        ids(&claimed),
        vec![due],
        "the due test uses the database clock"
    );
    let row = snap(&db, due).await;
    let claimed_at = row.claimed_at.expect("claimed_at");
    let slack = 5_000_000;
    assert!(
        claimed_at >= host_before + DAY_US - slack && claimed_at <= host_after + DAY_US + slack,
        "claimed_at {claimed_at} is not the database clock (host {host_before}..{host_after})"
    );
    let lease_us = row.lease_expires_at.expect("lease") - claimed_at;
    // Both are read from the clock in the one claim statement: the lease is the timeout (the
    // two clock reads of one row may be a microsecond or so apart, never 1 ms).
    assert!(
        (44_999_000..45_001_000).contains(&lease_us),
        "lease_expires_at - claimed_at = {lease_us} µs"
    );
    assert!(
        (row.updated_at - claimed_at).abs() < 1_000,
        "updated_at {} vs claimed_at {claimed_at}",
        row.updated_at
    );

    // A renewal: database clock + the lease.
    let claim = claim_of(&claimed, due);
    let host = host_now_us();
    assert_eq!(
        store
            .renew(&[claim], Duration::from_secs(60))
            .await
            .expect("renew"),
        vec![claim]
    );
    let renewed = snap(&db, due).await.lease_expires_at.expect("lease");
    let ahead = renewed - host - DAY_US - 60_000_000;
    assert!(
        (-slack..slack).contains(&ahead),
        "renewed lease off the database clock by {ahead} µs"
    );

    // A retry: scheduled_at = database clock + delay, updated_at = database clock.
    let host = host_now_us();
    let written = store
        .finish(&[TerminalWrite::Retry {
            claim,
            attempt: 1,
            delay: Duration::from_millis(5_000),
            error: "boom".into(),
        }])
        .await
        .expect("finish");
    assert_eq!(written, vec![claim]);
    let row = snap(&db, due).await;
    assert_eq!((row.state.as_str(), row.attempt), ("pending", 1));
    let ahead = row.updated_at - host - DAY_US;
    assert!(
        (-slack..slack).contains(&ahead),
        "updated_at off the database clock by {ahead} µs"
    );
    let delay_us = row.scheduled_at - row.updated_at;
    assert!(
        (4_999_000..5_001_000).contains(&delay_us),
        "scheduled_at - updated_at = {delay_us} µs"
    );
    assert_eq!(snap(&db, later).await.state, "pending");
    db.drop().await;
}

/// OUT-17: one claim is one `UPDATE` in one transaction whose candidates are taken `FOR UPDATE
/// SKIP LOCKED`: a row another transaction holds locked is skipped without waiting, while the
/// head test still sees it (OUT-14), and the whole batch is written by one transaction.
#[tokio::test]
async fn out_17_one_claim_statement_skips_locked_rows_without_waiting() {
    let (db, store) = migrated("out17").await;
    let locked = insert(&db, "t", None).await;
    let mut free_ids = Vec::new();
    for _ in 0..4 {
        free_ids.push(insert(&db, "t", None).await);
    }
    let head = insert(&db, "t", Some("k")).await;
    let second = insert(&db, "t", Some("k")).await;

    let holder = session(&db).await;
    holder.batch_execute("BEGIN").await.expect("begin");
    holder
        .query(
            "SELECT id FROM outbox WHERE id = ANY($1) FOR UPDATE",
            &[&vec![locked, head]],
        )
        .await
        .expect("lock two rows");

    let started = Instant::now();
    let claimed = tokio::time::timeout(Duration::from_secs(3), store.claim(10, LEASE))
        .await
        .expect("the claim does not wait for the row locks")
        .expect("claim");
    assert!(started.elapsed() < Duration::from_secs(2));
    let got: BTreeSet<Uuid> = ids(&claimed).into_iter().collect();
    let want: BTreeSet<Uuid> = free_ids.iter().copied().collect();
    assert_eq!(
        got, want,
        "locked rows are skipped, and the locked head still holds back its key"
    );
    assert_eq!(snap(&db, second).await.state, "pending");
    let transactions: i64 = db
        .admin
        .query_one(
            "SELECT count(DISTINCT xmin::text) FROM outbox WHERE state = 'processing'",
            &[],
        )
        .await
        .expect("xmin")
        .get(0);
    assert_eq!(
        transactions, 1,
        "the whole batch is written by one transaction"
    );

    holder.batch_execute("ROLLBACK").await.expect("rollback");
    let rest: BTreeSet<Uuid> = ids(&store.claim(10, LEASE).await.expect("claim"))
        .into_iter()
        .collect();
    assert_eq!(rest, [locked, head].into_iter().collect());
    db.drop().await;
}

/// The bundled claim statement with the default names and literal arguments, as EXPLAIN needs it.
fn claim_sql_with(limit: u32, lease_ms: u64) -> String {
    statement_with(
        include_str!("../queries/outbox/claim.sql"),
        &[
            (":limit::bigint", format!("{limit}::bigint")),
            (":lease_ms::bigint", format!("{lease_ms}::bigint")),
        ],
    )
}

/// OUT-11 / issue 16: the claim's cost must not depend on the planner having statistics. On a
/// table that was never analyzed (new, or autovacuum off), the planner once joined the picked
/// ids to the pending rows in a nested loop that ran the whole head-of-key test again for each
/// pending row: 100 rows claimed out of 600 read about 15,000 buffers, where computing the picked
/// ids once reads about 2,000–3,000. Buffers, unlike time, do not depend on the machine's load.
#[tokio::test]
async fn out_11_a_claim_without_statistics_reads_its_candidates_once() {
    let (db, _store) = migrated("claim_plan").await;
    // 500 delivered rows and 100 pending ones of 100 keys, inserted as applications do, never
    // analyzed (the test server runs with autovacuum off; ANALYZE is never run here).
    for _ in 0..5 {
        db.exec(
            "INSERT INTO outbox (topic, key, payload) \
             SELECT 't', 'k' || (i % 100), '{}' FROM generate_series(1, 100) AS g(i)",
        )
        .await;
    }
    db.exec("UPDATE outbox SET state = 'sent'").await;
    db.exec(
        "INSERT INTO outbox (topic, key, payload) \
         SELECT 't', 'k' || (i % 100), '{}' FROM generate_series(1, 100) AS g(i)",
    )
    .await;
    let analyzed: Option<f32> = db
        .admin
        .query_one(
            "SELECT reltuples FROM pg_class WHERE oid = 'outbox'::regclass",
            &[],
        )
        .await
        .expect("reltuples")
        .get(0);
    assert_eq!(analyzed, Some(-1.0), "the table must have no statistics");

    db.exec("BEGIN").await;
    let plan: serde_json::Value = db
        .admin
        .query_one(
            &format!(
                "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) {}",
                claim_sql_with(100, 30_000)
            ),
            &[],
        )
        .await
        .expect("explain the claim")
        .get(0);
    db.exec("ROLLBACK").await;
    let top = &plan[0]["Plan"];
    assert_eq!(
        top["Actual Rows"], 100,
        "the claim takes one row of each key"
    );
    let hits = top["Shared Hit Blocks"].as_u64().expect("buffer counts");
    assert!(
        hits < 6_000,
        "a claim of 100 rows out of 600 read {hits} buffers: the candidates are read more than once"
    );
    db.drop().await;
}

/// A statement of `queries/` with its comments dropped, the default names written in and each
/// `:name::type` parameter replaced by the literal given.
fn statement_with(text: &str, literals: &[(&str, String)]) -> String {
    let mut sql = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\"{", "\"")
        .replace("}\"", "\"");
    for (parameter, literal) in literals {
        assert!(
            sql.contains(parameter),
            "{parameter} is not in the statement"
        );
        sql = sql.replace(parameter, literal);
    }
    sql
}

/// Every scan of the outbox table in the plan, as (node type, index name). A bitmap heap scan
/// names the indexes of its bitmap index scans, joined with `+`.
fn outbox_scans(plan: &serde_json::Value, found: &mut Vec<(String, String)>) {
    let node = plan["Node Type"].as_str().unwrap_or_default();
    if plan["Relation Name"] == "outbox" && node.ends_with("Scan") {
        let index = if node == "Bitmap Heap Scan" {
            let mut names = Vec::new();
            bitmap_indexes(plan, &mut names);
            names.join("+")
        } else {
            plan["Index Name"].as_str().unwrap_or_default().to_owned()
        };
        found.push((node.to_owned(), index));
    }
    for child in plan["Plans"].as_array().into_iter().flatten() {
        outbox_scans(child, found);
    }
}

/// The indexes that the bitmap index scans under `plan` read.
fn bitmap_indexes(plan: &serde_json::Value, names: &mut Vec<String>) {
    for child in plan["Plans"].as_array().into_iter().flatten() {
        if let Some(index) = child["Index Name"].as_str() {
            names.push(index.to_owned());
        }
        bitmap_indexes(child, names);
    }
}

async fn plan_of(db: &TestDb, sql: &str) -> serde_json::Value {
    let plan: serde_json::Value = db
        .admin
        .query_one(&format!("EXPLAIN (FORMAT JSON) {sql}"), &[])
        .await
        .unwrap_or_else(|err| panic!("explain {sql}: {err}"))
        .get(0);
    plan[0]["Plan"].clone()
}

/// OUT-28, OUT-40, OUT-42, OUT-46 / issue 16 item 4: the fenced writes find their rows by id,
/// whatever the statistics say. The state index keeps an entry for every version a row had until
/// VACUUM runs, so after a long drain its `processing` range holds one entry per row ever
/// claimed, while the statistics say almost nothing is processing. The planner then read that
/// whole range and hashed it against the ids: 11,077 buffers for a finish of 50 rows after
/// 1,000,000 rows drained, so each finish cost more than the last and the drain slowed down.
#[tokio::test]
async fn out_28_fenced_writes_after_a_long_drain_read_their_rows_by_the_primary_key() {
    let (db, _store) = migrated("fenced_plan").await;
    // 20,000 rows claimed and delivered the way the relay does it (pending, processing, sent),
    // analyzed while nothing is processing, as autovacuum would see a quiet moment.
    db.exec(
        "INSERT INTO outbox (topic, key, payload) \
         SELECT 't', 'k' || (i % 1000), '{}' FROM generate_series(1, 20000) AS g(i)",
    )
    .await;
    db.exec(
        "UPDATE outbox SET state = 'processing', claim_token = gen_random_uuid(), \
         lease_expires_at = now() + INTERVAL '1 minute', updated_at = clock_timestamp()",
    )
    .await;
    db.exec(
        "UPDATE outbox SET state = 'sent', claim_token = NULL, lease_expires_at = NULL, \
         updated_at = clock_timestamp()",
    )
    .await;
    db.exec(
        "INSERT INTO outbox (topic, key, payload) \
         SELECT 't', 'k' || i, '{}' FROM generate_series(1, 50) AS g(i)",
    )
    .await;
    db.exec("ANALYZE outbox").await;
    let ids: Vec<String> = db
        .admin
        .query("SELECT id::text FROM outbox WHERE state = 'pending'", &[])
        .await
        .expect("pending ids")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let ids = format!("'{{{}}}'::uuid[]", ids.join(","));
    let tokens = "ARRAY(SELECT gen_random_uuid() FROM generate_series(1, 50))::uuid[]".to_owned();
    let ints = |v: &str| format!("array_fill({v}, ARRAY[50])");
    let statements = [
        (
            "finish",
            statement_with(
                include_str!("../queries/outbox/finish.sql"),
                &[
                    (":ids::uuid[]", ids.clone()),
                    (":tokens::uuid[]", tokens.clone()),
                    (":outcomes::int4[]", ints("0::int4")),
                    (":attempts::int4[]", ints("1::int4")),
                    (":delays_ms::int8[]", ints("0::int8")),
                    (":errors::text[]", ints("NULL::text")),
                ],
            ),
        ),
        (
            "renew",
            statement_with(
                include_str!("../queries/outbox/renew.sql"),
                &[
                    (":ids::uuid[]", ids.clone()),
                    (":tokens::uuid[]", tokens.clone()),
                    (":lease_ms::bigint", "30000::bigint".into()),
                ],
            ),
        ),
        (
            "release",
            statement_with(
                include_str!("../queries/outbox/release.sql"),
                &[(":ids::uuid[]", ids.clone()), (":tokens::uuid[]", tokens)],
            ),
        ),
    ];
    for (name, sql) in statements {
        let mut scans = Vec::new();
        outbox_scans(&plan_of(&db, &sql).await, &mut scans);
        assert!(
            !scans.is_empty() && scans.iter().all(|(_, index)| index == "pk_outbox"),
            "the {name} must read the outbox by its primary key only, its plan reads {scans:?}"
        );
    }
    db.drop().await;
}

/// OUT-13a / issue 16 item 4: a run claim reads the rows it claims by the primary key, however
/// long the key's backlog. Joined to its CTE of candidates, the UPDATE was planned as a hash join
/// over a sequential scan of every pending row (the CTE's size has no bound the planner can
/// see), so each run of 31 rows cost as much as the backlog: 6,685 buffers and 67 ms with 50,000
/// pending rows of one key, and one key's 200,000 rows drained at 340 msgs/s.
#[tokio::test]
async fn out_13a_a_run_claim_behind_a_long_backlog_reads_its_rows_by_the_primary_key() {
    let (db, _store) = migrated("run_plan").await;
    db.exec(
        "INSERT INTO outbox (topic, key, payload) \
         SELECT 't', 'hot', '{}' FROM generate_series(1, 20000) AS g(i)",
    )
    .await;
    // The head of the key is held, as the claim before the run claim leaves it.
    let (head_id, head_token): (String, String) = db
        .admin
        .query_one(
            "UPDATE outbox SET state = 'processing', claim_token = gen_random_uuid(), \
             lease_expires_at = now() + INTERVAL '1 hour' \
             WHERE sequence = (SELECT min(sequence) FROM outbox) \
             RETURNING id::text, claim_token::text",
            &[],
        )
        .await
        .map(|row| (row.get(0), row.get(1)))
        .expect("hold the head of the key");
    db.exec("ANALYZE outbox").await;
    let sql = statement_with(
        include_str!("../queries/outbox/claim_run.sql"),
        &[
            (":ids::uuid[]", format!("ARRAY['{head_id}']::uuid[]")),
            (":tokens::uuid[]", format!("ARRAY['{head_token}']::uuid[]")),
            (":limits::bigint[]", "ARRAY[31]::bigint[]".into()),
            (":lease_ms::bigint", "30000::bigint".into()),
        ],
    );
    let mut scans = Vec::new();
    outbox_scans(&plan_of(&db, &sql).await, &mut scans);
    // The key's next rows come from its index range; every other read is by id.
    assert!(
        scans
            .iter()
            .any(|(_, index)| index == "idx_outbox_key_sequence")
            && scans
                .iter()
                .all(|(_, index)| index == "pk_outbox" || index == "idx_outbox_key_sequence"),
        "the run claim must read the key's range and then rows by id only, its plan reads {scans:?}"
    );
    db.drop().await;
}

/// OUT-28 / issue 16 item 4: the terminal write keeps one generic plan. One key drains row after
/// row, one `finish` a row; with its arrays as plain parameters PostgreSQL planned every
/// execution anew (0.2 ms of planning for a statement that ran in 0.16 ms), because a custom plan
/// costed for the exact array length always looked cheaper than the generic one.
#[tokio::test]
async fn out_28_the_terminal_write_keeps_a_generic_plan() {
    let (db, _store) = migrated("finish_generic").await;
    // A table of a drain's size, analyzed: on a handful of rows every plan costs the same.
    db.exec(
        "INSERT INTO outbox (topic, key, payload) \
         SELECT 't', 'k' || (i % 100), '{}' FROM generate_series(1, 100000) AS g(i)",
    )
    .await;
    db.exec("ANALYZE outbox").await;
    let sql = statement_with(
        include_str!("../queries/outbox/finish.sql"),
        &[
            (":ids::uuid[]", "$1::uuid[]".into()),
            (":tokens::uuid[]", "$2::uuid[]".into()),
            (":outcomes::int4[]", "$3::int4[]".into()),
            (":attempts::int4[]", "$4::int4[]".into()),
            (":delays_ms::int8[]", "$5::int8[]".into()),
            (":errors::text[]", "$6::text[]".into()),
        ],
    );
    let client = session(&db).await;
    let statement = client.prepare(&sql).await.expect("prepare the finish");
    for _ in 0..8 {
        let id = insert(&db, "t", Some("k")).await;
        // A fence that does not match: the write changes nothing, and is planned all the same.
        client
            .query(
                &statement,
                &[
                    &vec![id],
                    &vec![Uuid::new_v4()],
                    &vec![0i32],
                    &vec![1i32],
                    &vec![0i64],
                    &vec![None::<String>],
                ],
            )
            .await
            .expect("run the finish");
    }
    let generic: i64 = client
        .query_one(
            "SELECT COALESCE(max(generic_plans), 0) FROM pg_prepared_statements \
             WHERE statement LIKE 'UPDATE%'",
            &[],
        )
        .await
        .expect("read pg_prepared_statements")
        .get(0);
    assert!(
        generic > 0,
        "eight executions of the finish were planned one by one (no generic plan)"
    );
    db.drop().await;
}

/// Claims one new due row through the store and marks it `sent`.
async fn drain_one(db: &TestDb, store: &PgStore) {
    let id = insert(db, "t", Some("k")).await;
    let rows = store.claim(10, LEASE).await.expect("claim");
    assert_eq!(ids(&rows), vec![id], "the claim took the one due row");
    let written = store
        .finish(&[TerminalWrite::Sent {
            claim: claim_of(&rows, id),
        }])
        .await
        .expect("finish");
    assert_eq!(written.len(), 1, "the finish wrote its row");
}

/// The scans of the outbox in the plan that the store's one connection would run for its
/// prepared `finish` now: the generic plan once it has one. Asked on that connection itself,
/// because a prepared statement is visible only to its own session.
async fn finish_plan_on_the_store_connection(store: &PgStore) -> (i64, Vec<(String, String)>) {
    assert_eq!(
        store.pool().status().size,
        1,
        "the store opened one connection, so the plan read is the one its finishes use"
    );
    let client = store.pool().get().await.expect("the store's connection");
    let prepared = client
        .query_one(
            "SELECT name, generic_plans FROM pg_prepared_statements WHERE statement LIKE 'UPDATE%' \
             AND statement LIKE '%unnest%'",
            &[],
        )
        .await
        .expect("the store's prepared finish");
    let (name, generic): (String, i64) = (prepared.get(0), prepared.get(1));
    let plan: serde_json::Value = client
        .query_one(
            &format!(
                "EXPLAIN (FORMAT JSON) EXECUTE {name}(ARRAY[gen_random_uuid()], \
                 ARRAY[gen_random_uuid()], ARRAY[0], ARRAY[1], ARRAY[0::int8], ARRAY[NULL::text])"
            ),
            &[],
        )
        .await
        .expect("explain the prepared finish")
        .get(0);
    let mut scans = Vec::new();
    outbox_scans(&plan[0]["Plan"], &mut scans);
    (generic, scans)
}

/// OUT-28 / issue 16 item 4: a generic plan of the terminal write made while the outbox was small
/// does not outlive the table's growth. Made on a handful of rows that plan is a sequential scan,
/// and with no ANALYZE (autovacuum off, as on this machine's server) nothing tells PostgreSQL to
/// make it again, so every finish would read the whole table. The store prepares the statement
/// again on each connection every five seconds; this test fails when it keeps the first one.
#[tokio::test]
async fn out_28_a_finish_plan_made_on_a_small_outbox_is_made_again_once_it_grew() {
    let (db, store) = migrated("finish_replanned").await;
    // Five planned executions, then the generic plan, all on a table of at most eight rows.
    for _ in 0..8 {
        drain_one(&db, &store).await;
    }
    let (generic, scans) = finish_plan_on_the_store_connection(&store).await;
    assert!(
        generic > 0,
        "the finish kept a generic plan on the small table"
    );
    assert_eq!(
        scans,
        vec![("Seq Scan".to_owned(), String::new())],
        "on a small table the generic plan reads the outbox sequentially (else this test shows nothing)"
    );
    // The table grows to 100,000 rows that are not due, so the claims below skip them by the
    // pending index; nothing analyzes it.
    db.exec(
        "INSERT INTO outbox (topic, key, payload, scheduled_at) \
         SELECT 't', 'k' || (i % 100), '{}', now() + INTERVAL '1 day' \
         FROM generate_series(1, 100000) AS g(i)",
    )
    .await;
    // Past the replanning age of the statement prepared above (five seconds).
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    for _ in 0..8 {
        drain_one(&db, &store).await;
    }
    let (generic, scans) = finish_plan_on_the_store_connection(&store).await;
    assert!(
        generic > 0,
        "the finish kept a generic plan on the grown table"
    );
    assert_eq!(
        scans,
        vec![("Index Scan".to_owned(), "pk_outbox".to_owned())],
        "on the grown table the finish's plan reads its rows by the primary key"
    );
    db.drop().await;
}

/// RET-6 / issue 16 item 4: one retention DELETE reads the oldest rows of each state in index
/// order and stops at its batch. With both states in one condition the planner read and sorted
/// every old row for each batch of 1,000 (by age: a sequential scan and an on-disk sort, 303 ms a
/// batch with 1,000,000 `sent` rows; by count: a bitmap scan of every row beyond the kept ones),
/// so deleting a large backlog took time quadratic in its size.
#[tokio::test]
async fn ret_6_a_retention_batch_reads_the_oldest_rows_in_index_order() {
    let (db, _store) = migrated("retention_plan").await;
    // Each state holds many batches of old rows: with 1 % dead rows, as many as one batch, the
    // planner took a bitmap scan of all of them in 2 runs of 6, a bounded read and not the fault
    // this test is about.
    db.exec(
        "INSERT INTO outbox (topic, key, payload, state, created_at, updated_at) \
         SELECT 't', NULL, '{}', CASE WHEN i % 10 = 0 THEN 'dead' ELSE 'sent' END, \
                clock_timestamp() - INTERVAL '2 days', clock_timestamp() - INTERVAL '2 days' \
         FROM generate_series(1, 100000) AS g(i)",
    )
    .await;
    db.exec("ANALYZE outbox").await;
    let statements = [
        (
            "age",
            statement_with(
                include_str!("../queries/retention/outbox_age.sql"),
                &[
                    (":max_age_ms::bigint", "86400000::bigint".into()),
                    (":batch::bigint", "1000::bigint".into()),
                ],
            ),
        ),
        (
            "count",
            statement_with(
                include_str!("../queries/retention/outbox_count.sql"),
                &[
                    (":keep::bigint", "10::bigint".into()),
                    (":batch::bigint", "1000::bigint".into()),
                ],
            ),
        ),
    ];
    for (name, sql) in statements {
        let mut scans = Vec::new();
        outbox_scans(&plan_of(&db, &sql).await, &mut scans);
        assert!(
            scans.iter().all(|(node, _)| matches!(
                node.as_str(),
                "Index Scan" | "Index Only Scan" | "Tid Scan"
            )),
            "a retention batch by {name} must not read the whole outbox, its plan reads {scans:?}"
        );
    }
    db.drop().await;
}
