//! Statement facts of the outbox requirements, one test per id (outbox.md OUT-1, OUT-5, OUT-9,
//! OUT-10, OUT-17, OUT-38, OUT-47), against the real PostgreSQL server, each test in a schema of its own.

#[allow(dead_code)]
#[path = "postgres/support.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
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
    rows.iter().map(|r| r.claim.id).collect()
}

fn claim_of(rows: &[ClaimedRow], id: Uuid) -> Claim {
    rows.iter()
        .find(|r| r.claim.id == id)
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

/// OUT-5: the database assigns `sequence` at insert time; values are unique and increase in
/// insert order (not id order, not commit order), and a row keeps its value through claim,
/// retry, reclaim, sent and a replay.
#[tokio::test]
async fn out_5_sequence_increases_in_insert_order_and_is_kept_for_life() {
    let (db, store) = migrated("out5").await;
    // Ids in descending order, so id order is the reverse of insert order.
    let mut order: Vec<Uuid> = (0..5).map(|_| Uuid::new_v4()).collect();
    order.sort();
    order.reverse();
    for id in &order {
        db.admin
            .execute(
                "INSERT INTO outbox (id, topic, payload) VALUES ($1, 't', '{}')",
                &[id],
            )
            .await
            .expect("insert");
    }
    // Inserted first, committed last: the value is taken at insert time.
    let other = session(&db).await;
    other.batch_execute("BEGIN").await.expect("begin");
    let early: Uuid = other
        .query_one(
            "INSERT INTO outbox (topic, payload) VALUES ('t', '{}') RETURNING id",
            &[],
        )
        .await
        .expect("insert in an open transaction")
        .get(0);
    let late = insert(&db, "t", None).await;
    other.batch_execute("COMMIT").await.expect("commit");
    order.push(early);
    order.push(late);

    let mut sequences = Vec::new();
    for id in &order {
        sequences.push(snap(&db, *id).await.sequence);
    }
    assert!(
        sequences.windows(2).all(|w| w[0] < w[1]),
        "sequence follows insert order: {sequences:?}"
    );

    // Kept through every write QueueBox makes.
    let first = order[0];
    let kept = sequences[0];
    let claimed = store.claim(1, LEASE).await.expect("claim");
    assert_eq!(claimed[0].sequence, kept);
    let claim = claim_of(&claimed, first);
    store
        .finish(&[TerminalWrite::Retry {
            claim,
            attempt: 1,
            delay: Duration::ZERO,
            error: "e".into(),
        }])
        .await
        .expect("retry");
    assert_eq!(snap(&db, first).await.sequence, kept);
    let claimed = store
        .claim(10, Duration::from_millis(50))
        .await
        .expect("claim again");
    assert_eq!(claimed.len(), order.len());
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(
        store.reclaim_expired().await.expect("reclaim"),
        order.len() as u64
    );
    assert_eq!(snap(&db, first).await.sequence, kept);
    let claimed = store.claim(10, LEASE).await.expect("claim a third time");
    for row in &claimed {
        assert_eq!(
            row.sequence,
            sequences[order.iter().position(|id| *id == row.claim.id).unwrap()]
        );
    }
    store
        .finish(&[TerminalWrite::Sent {
            claim: claim_of(&claimed, first),
        }])
        .await
        .expect("sent");
    assert_eq!(snap(&db, first).await.state, "sent");
    // A replay by hand (OUT-50's columns) keeps it too.
    db.exec(&format!(
        "UPDATE outbox SET state = 'pending', attempt = 0, scheduled_at = clock_timestamp(), \
         updated_at = clock_timestamp(), last_error = NULL, claimed_at = NULL \
         WHERE id = '{first}'"
    ))
    .await;
    assert_eq!(snap(&db, first).await.sequence, kept);
    // Distinct over the whole table.
    let distinct: i64 = db
        .admin
        .query_one(
            "SELECT count(DISTINCT sequence) - count(*) FROM outbox",
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(distinct, 0);
    db.drop().await;
}

/// Records every state change of an outbox row (and every insert) with the columns OUT-10
/// speaks of, the statement start and the clock when the row was written.
async fn audit_transitions(db: &TestDb) {
    db.exec(
        "CREATE TABLE transitions (
             n bigserial PRIMARY KEY, id uuid, from_state text, to_state text,
             old_updated timestamptz, new_updated timestamptz,
             old_claimed timestamptz, new_claimed timestamptz,
             new_token uuid, new_lease timestamptz,
             stmt_at timestamptz, trig_at timestamptz);
         CREATE FUNCTION audit_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF TG_OP = 'INSERT' THEN
                 INSERT INTO transitions (id, to_state, new_updated, new_claimed, new_token,
                                          new_lease, stmt_at, trig_at)
                 VALUES (NEW.id, NEW.state, NEW.updated_at, NEW.claimed_at, NEW.claim_token,
                         NEW.lease_expires_at, statement_timestamp(), clock_timestamp());
             ELSIF OLD.state IS DISTINCT FROM NEW.state THEN
                 INSERT INTO transitions (id, from_state, to_state, old_updated, new_updated,
                                          old_claimed, new_claimed, new_token, new_lease,
                                          stmt_at, trig_at)
                 VALUES (NEW.id, OLD.state, NEW.state, OLD.updated_at, NEW.updated_at,
                         OLD.claimed_at, NEW.claimed_at, NEW.claim_token, NEW.lease_expires_at,
                         statement_timestamp(), clock_timestamp());
             END IF;
             RETURN NULL;
         END $$;
         CREATE TRIGGER audit_outbox AFTER INSERT OR UPDATE ON outbox
             FOR EACH ROW EXECUTE FUNCTION audit_outbox();",
    )
    .await;
}

/// Drives every statement of the store over six rows, including fenced writes that must do
/// nothing (a stale token, a row no longer processing). Returns the rows, named.
async fn every_statement(db: &TestDb, store: &PgStore) -> BTreeMap<&'static str, Uuid> {
    let mut rows = BTreeMap::new();
    // `expired` is claimed alone with a short lease, the others together.
    rows.insert("expired", insert(db, "t", None).await);
    let short = store
        .claim(1, Duration::from_millis(100))
        .await
        .expect("claim");
    assert_eq!(ids(&short), vec![rows["expired"]]);
    for name in ["sent", "retried", "dead", "released", "stale"] {
        rows.insert(name, insert(db, "t", None).await);
    }
    let claimed = store.claim(10, LEASE).await.expect("claim");
    assert_eq!(claimed.len(), 5);
    let c = |name: &str| claim_of(&claimed, rows[name]);
    let renewed = store
        .renew(&[c("sent"), c("stale")], LEASE)
        .await
        .expect("renew");
    assert_eq!(renewed.len(), 2);
    let forged = Claim {
        id: rows["stale"],
        token: Uuid::new_v4(),
    };
    let written = store
        .finish(&[
            TerminalWrite::Sent { claim: c("sent") },
            TerminalWrite::Retry {
                claim: c("retried"),
                attempt: 1,
                delay: Duration::ZERO,
                error: "e".into(),
            },
            TerminalWrite::Dead {
                claim: c("dead"),
                attempt: 1,
                error: "e".into(),
            },
            TerminalWrite::Sent { claim: forged },
        ])
        .await
        .expect("finish");
    assert_eq!(written.len(), 3, "the stale token writes nothing");
    assert_eq!(
        store.release(&[c("released")]).await.expect("release"),
        vec![c("released")]
    );
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 1);
    // Fenced writes on rows that left processing change nothing.
    let none = store
        .finish(&[
            TerminalWrite::Retry {
                claim: c("sent"),
                attempt: 1,
                delay: Duration::ZERO,
                error: "late".into(),
            },
            TerminalWrite::Sent { claim: c("dead") },
            TerminalWrite::Dead {
                claim: c("released"),
                attempt: 9,
                error: "late".into(),
            },
        ])
        .await
        .expect("late finish");
    assert!(none.is_empty());
    assert!(
        store
            .release(&[c("retried"), c("sent")])
            .await
            .expect("late release")
            .is_empty()
    );
    assert!(
        store
            .renew(&[c("dead"), c("released")], LEASE)
            .await
            .expect("late renew")
            .is_empty()
    );
    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 0);
    // The rows back in pending are claimed again and sent; `stale` too.
    let again = store.claim(10, LEASE).await.expect("claim again");
    let again_ids: BTreeSet<Uuid> = ids(&again).into_iter().collect();
    let expected: BTreeSet<Uuid> = ["retried", "released", "expired"]
        .iter()
        .map(|n| rows[n])
        .collect();
    assert_eq!(again_ids, expected);
    let mut sends: Vec<TerminalWrite> = again
        .iter()
        .map(|r| TerminalWrite::Sent { claim: r.claim })
        .collect();
    sends.push(TerminalWrite::Sent { claim: c("stale") });
    assert_eq!(store.finish(&sends).await.expect("finish").len(), 4);
    rows
}

/// OUT-9: QueueBox makes only the transitions of the table (insert → pending, pending →
/// processing, processing → sent / pending / dead); fenced writes on a row that is not
/// `processing` make none, and no other state value is written.
#[tokio::test]
async fn out_9_the_store_makes_only_the_listed_transitions() {
    let (db, store) = migrated("out9").await;
    audit_transitions(&db).await;
    let rows = every_statement(&db, &store).await;

    let allowed: BTreeSet<(Option<&str>, &str)> = [
        (None, "pending"),
        (Some("pending"), "processing"),
        (Some("processing"), "sent"),
        (Some("processing"), "pending"),
        (Some("processing"), "dead"),
    ]
    .into_iter()
    .collect();
    let recorded = db
        .admin
        .query(
            "SELECT id, from_state, to_state FROM transitions ORDER BY n",
            &[],
        )
        .await
        .expect("read transitions");
    let mut paths: BTreeMap<Uuid, Vec<String>> = BTreeMap::new();
    for r in &recorded {
        let (from, to): (Option<String>, String) = (r.get(1), r.get(2));
        assert!(
            allowed.contains(&(from.as_deref(), to.as_str())),
            "transition {from:?} -> {to} is not in the table"
        );
        paths.entry(r.get(0)).or_default().push(to);
    }
    let path = |name: &str| paths[&rows[name]].join(" > ");
    let twice = "pending > processing > pending > processing > sent";
    assert_eq!(path("sent"), "pending > processing > sent");
    assert_eq!(path("stale"), "pending > processing > sent");
    assert_eq!(path("dead"), "pending > processing > dead");
    assert_eq!(path("retried"), twice);
    assert_eq!(path("released"), twice);
    assert_eq!(path("expired"), twice);
    db.drop().await;
}

/// OUT-10: every write that changes `state` sets `updated_at` to the database clock of that
/// statement; every transition out of `processing` clears `claim_token` and
/// `lease_expires_at` and keeps `claimed_at`; a claim sets `claimed_at`, the token and the
/// lease.
#[tokio::test]
async fn out_10_every_state_change_sets_updated_at_and_the_claim_columns() {
    let (db, store) = migrated("out10").await;
    audit_transitions(&db).await;
    every_statement(&db, &store).await;
    let recorded = db
        .admin
        .query(
            "SELECT from_state, to_state, new_updated > old_updated,
                    new_updated BETWEEN stmt_at AND trig_at,
                    new_claimed IS NOT DISTINCT FROM old_claimed,
                    new_claimed BETWEEN stmt_at AND trig_at,
                    new_token IS NULL, new_lease IS NULL
             FROM transitions WHERE from_state IS NOT NULL ORDER BY n",
            &[],
        )
        .await
        .expect("read transitions");
    assert_eq!(recorded.len(), 3 * 2 + 3 * 4, "every change was recorded");
    for r in &recorded {
        let (from, to): (String, String) = (r.get(0), r.get(1));
        let what = format!("{from} -> {to}");
        assert!(r.get::<_, bool>(2), "{what}: updated_at did not move");
        assert!(
            r.get::<_, bool>(3),
            "{what}: updated_at is not the database clock of the statement"
        );
        if from == "processing" {
            assert!(r.get::<_, bool>(4), "{what}: claimed_at changed");
            assert!(r.get::<_, bool>(6), "{what}: claim_token not cleared");
            assert!(r.get::<_, bool>(7), "{what}: lease_expires_at not cleared");
        }
        if to == "processing" {
            assert!(
                r.get::<_, bool>(5),
                "{what}: claimed_at not the claim's clock"
            );
            assert!(!r.get::<_, bool>(6), "{what}: no claim_token");
            assert!(!r.get::<_, bool>(7), "{what}: no lease");
        }
    }
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

/// OUT-47: a reclaimed row keeps its `sequence`, so it is still the head of its key and the next
/// claim takes it, before the later rows of the key.
#[tokio::test]
async fn out_47_a_reclaimed_row_keeps_its_sequence_and_is_claimed_as_head() {
    let (db, store) = migrated("out47").await;
    let head = insert(&db, "t", Some("k")).await;
    let next = insert(&db, "t", Some("k")).await;
    let before = snap(&db, head).await;
    let claimed = store
        .claim(10, Duration::from_millis(100))
        .await
        .expect("claim");
    assert_eq!(ids(&claimed), vec![head]);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Expired but not yet reclaimed: still processing, still holding its key.
    assert!(store.claim(10, LEASE).await.expect("claim").is_empty());
    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 1);
    let reclaimed = snap(&db, head).await;
    assert_eq!(reclaimed.state, "pending");
    assert_eq!(reclaimed.sequence, before.sequence);
    let again = store.claim(10, LEASE).await.expect("claim again");
    assert_eq!(ids(&again), vec![head], "the reclaimed row is the head");
    assert_eq!(again[0].sequence, before.sequence);
    assert_eq!(again[0].attempt, 0);
    assert_eq!(snap(&db, next).await.state, "pending");
    db.drop().await;
}

/// OUT-38: the order of a key is the order of `sequence` among the rows the claim can see. A row
/// whose transaction took its `sequence` first but committed after a higher-`sequence` row of the
/// same key was claimed goes out after that row: the claim never waits for it, and once it is
/// visible the processing row still holds the key (OUT-13 rule 3) until it ends.
#[tokio::test]
async fn out_38_a_lower_sequence_committed_late_goes_after_the_row_already_claimed() {
    let (db, store) = migrated("out38").await;
    // The slow writer takes its sequence first and holds its transaction open.
    let slow = session(&db).await;
    slow.batch_execute("BEGIN").await.expect("begin");
    let late: Uuid = slow
        .query_one(
            "INSERT INTO outbox (topic, key, payload) VALUES ('t', 'k', '{}') RETURNING id",
            &[],
        )
        .await
        .expect("insert the late row")
        .get(0);
    let early = insert(&db, "t", Some("k")).await;
    assert_eq!(
        visible_sequence(&db, late).await,
        None,
        "the late row is not visible before its commit"
    );

    let first = store.claim(10, LEASE).await.expect("claim");
    assert_eq!(ids(&first), vec![early], "only the committed row is seen");
    slow.batch_execute("COMMIT")
        .await
        .expect("commit the late row");
    let late_seq = visible_sequence(&db, late)
        .await
        .expect("the late row after its commit");
    assert!(
        late_seq < first[0].sequence,
        "the late row took the lower sequence ({late_seq} vs {})",
        first[0].sequence
    );
    assert!(
        store.claim(10, LEASE).await.expect("claim").is_empty(),
        "the processing row holds its key against the lower-sequence late row"
    );
    store
        .finish(&[TerminalWrite::Sent {
            claim: claim_of(&first, early),
        }])
        .await
        .expect("finish");
    let second = store.claim(10, LEASE).await.expect("claim");
    assert_eq!(
        ids(&second),
        vec![late],
        "the late row goes out after the row already claimed"
    );
    db.drop().await;
}

/// The `sequence` of `id` as a new statement sees it: None while its insert is uncommitted.
async fn visible_sequence(db: &TestDb, id: Uuid) -> Option<i64> {
    db.admin
        .query_opt("SELECT sequence FROM outbox WHERE id = $1", &[&id])
        .await
        .expect("read the sequence")
        .map(|row| row.get(0))
}
