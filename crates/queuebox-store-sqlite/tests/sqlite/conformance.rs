//! The store-independent suite of `queuebox-store`, run against SQLite (a file database in a
//! temporary folder per test), with the suite's set-up and inspection steps in SQLite's SQL.

use std::collections::BTreeMap;

use async_trait::async_trait;
use queuebox_core::database::SqliteTarget;
use queuebox_core::{SqlIdentifier, TableLayout};
use queuebox_store::conformance::{
    ConformanceDatabase, ConformanceFactory, InboxFixture, InboxSnapshot, NewOutboxRow,
    OpenTransaction, OutboxSnapshot, OutboxTransition,
};
use queuebox_store::{Claim, Consumption, Store, StoreError};
use queuebox_store_sqlite::SqliteStore;
use rusqlite::{Connection, Row, params};
use uuid::Uuid;

use crate::support::{NOW, TestDb, config_for, connection};

pub(crate) struct SqliteFactory;

#[async_trait]
impl ConformanceFactory for SqliteFactory {
    async fn fresh(&self, test_name: &str) -> Box<dyn ConformanceDatabase> {
        Box::new(TestDb::new(&format!("conf_{test_name}")))
    }
}

fn q(name: &SqlIdentifier) -> String {
    format!("\"{name}\"")
}

/// Microseconds since the epoch of a stored time (whole milliseconds on SQLite).
fn micros_of(text: &str) -> i64 {
    let ms = parse_ms(text).unwrap_or_else(|| panic!("not a time in the fixed form: {text}"));
    ms * 1000
}

fn parse_ms(text: &str) -> Option<i64> {
    // The fixed form (schema.md SCH-3), parsed here: the store's own parser is private.
    let b = text.as_bytes();
    if b.len() != 24 || b[10] != b'T' || b[23] != b'Z' {
        return None;
    }
    let n = |from: usize, len: usize| text.get(from..from + len)?.parse::<i64>().ok();
    let (y, m, d) = (n(0, 4)?, n(5, 2)?, n(8, 2)?);
    let (hh, mm, ss, ms) = (n(11, 2)?, n(14, 2)?, n(17, 2)?, n(20, 3)?);
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = if y2 >= 0 { y2 } else { y2 - 399 } / 400;
    let yoe = y2 - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((((days * 24 + hh) * 60 + mm) * 60 + ss) * 1000 + ms)
}

fn micros(row: &Row<'_>, i: usize) -> rusqlite::Result<i64> {
    Ok(micros_of(&row.get::<_, String>(i)?))
}

fn opt_micros(row: &Row<'_>, i: usize) -> rusqlite::Result<Option<i64>> {
    Ok(row.get::<_, Option<String>>(i)?.map(|t| micros_of(&t)))
}

fn uuid_at(row: &Row<'_>, i: usize) -> rusqlite::Result<Uuid> {
    Ok(Uuid::parse_str(&row.get::<_, String>(i)?).expect("a UUID"))
}

fn opt_uuid_at(row: &Row<'_>, i: usize) -> rusqlite::Result<Option<Uuid>> {
    Ok(row
        .get::<_, Option<String>>(i)?
        .map(|t| Uuid::parse_str(&t).expect("a UUID")))
}

/// A connection of its own with a transaction begun (`BEGIN IMMEDIATE`: SQLite's one writer).
struct SqliteOpenTransaction(Connection);

#[async_trait]
impl OpenTransaction for SqliteOpenTransaction {
    async fn commit(self: Box<Self>) {
        self.0.execute_batch("COMMIT").expect("commit");
    }
}

impl TestDb {
    fn ids(&self, table: &SqlIdentifier, id: &SqlIdentifier) -> Vec<Uuid> {
        let sql = format!("SELECT {} FROM {} ORDER BY 1", q(id), q(table));
        let conn = self.admin.lock().expect("admin");
        let mut stmt = conn.prepare(&sql).expect("prepare");
        let mut ids: Vec<Uuid> = stmt
            .query_map([], |r| uuid_at(r, 0))
            .expect("read ids")
            .collect::<Result<_, _>>()
            .expect("ids");
        ids.sort();
        ids
    }

    fn open_transaction(&self) -> Connection {
        let conn = connection(&self.file);
        conn.execute_batch("BEGIN IMMEDIATE")
            .expect("begin in the second connection");
        conn
    }

    fn rename_by_hand(
        &self,
        table: &str,
        entries: Vec<(&str, &str, &SqlIdentifier)>,
        to: &SqlIdentifier,
    ) {
        for (_, default, column) in entries {
            if column.as_str() != default {
                self.exec(&format!(
                    "ALTER TABLE {table} RENAME COLUMN \"{default}\" TO {}",
                    q(column)
                ));
            }
        }
        if to.as_str() != table {
            self.exec(&format!("ALTER TABLE {table} RENAME TO {}", q(to)));
        }
    }
}

#[async_trait]
impl ConformanceDatabase for TestDb {
    async fn store(&self, layout: TableLayout) -> Box<dyn Store> {
        Box::new(self.store_with(layout, 10_000).await)
    }

    async fn drop_column(&self, table: &str, column: &str) {
        self.exec(&format!("ALTER TABLE \"{table}\" DROP COLUMN \"{column}\""));
    }

    async fn create_outbox_by_hand(&self, layout: &TableLayout) {
        self.exec(queuebox_store_sqlite::bundled_sql(1).expect("v1"));
        self.rename_by_hand("outbox", layout.outbox.entries(), &layout.outbox_table);
    }

    async fn insert_minimal_outbox(&self, topic: &str) -> Result<(), String> {
        let conn = self.admin.lock().expect("admin");
        conn.execute(
            r#"INSERT INTO "outbox" ("topic", "payload") VALUES (?1, '{}')"#,
            params![topic],
        )
        .map(drop)
        .map_err(|e| e.to_string())
    }

    async fn insert_outbox(&self, layout: &TableLayout, rows: &[NewOutboxRow]) {
        let c = &layout.outbox;
        let sql = format!(
            "INSERT INTO {} ({}, {}, {}, {}, {}, {}, {}, {}, {}, {}) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, \
                     strftime('%Y-%m-%dT%H:%M:%fZ', ?8, printf('%+.3f seconds', ?9 / 1000.0)), ?8, ?8)",
            q(&layout.outbox_table),
            q(&c.id),
            q(&c.topic),
            q(&c.key),
            q(&c.payload),
            q(&c.headers),
            q(&c.aggregate_type),
            q(&c.max_attempts),
            q(&c.scheduled_at),
            q(&c.created_at),
            q(&c.updated_at),
        );
        let mut conn = self.admin.lock().expect("admin");
        // One transaction and one clock reading: every row gets the same base time, and
        // sequence follows the slice.
        let tx = conn.transaction().expect("begin");
        let base: String = tx
            .query_row(&format!("SELECT {NOW}"), [], |r| r.get(0))
            .expect("now");
        for row in rows {
            tx.execute(
                &sql,
                params![
                    row.id.to_string(),
                    row.topic,
                    row.key,
                    row.payload,
                    row.headers,
                    row.aggregate_type,
                    row.max_attempts,
                    base,
                    row.scheduled_in_ms,
                ],
            )
            .unwrap_or_else(|e| panic!("insert outbox row: {e}"));
        }
        tx.commit().expect("commit");
    }

    async fn outbox_row(&self, layout: &TableLayout, id: Uuid) -> OutboxSnapshot {
        let c = &layout.outbox;
        let sql = format!(
            "SELECT {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {NOW} \
             FROM {} WHERE {} = ?1",
            q(&c.id),
            q(&c.topic),
            q(&c.key),
            q(&c.payload),
            q(&c.headers),
            q(&c.aggregate_type),
            q(&c.state),
            q(&c.attempt),
            q(&c.max_attempts),
            q(&c.scheduled_at),
            q(&c.created_at),
            q(&c.updated_at),
            q(&c.claimed_at),
            q(&c.claim_token),
            q(&c.lease_expires_at),
            q(&c.last_error),
            q(&c.sequence),
            q(&layout.outbox_table),
            q(&c.id),
        );
        let conn = self.admin.lock().expect("admin");
        conn.query_row(&sql, [id.to_string()], |r| {
            Ok(OutboxSnapshot {
                id: uuid_at(r, 0)?,
                topic: r.get(1)?,
                key: r.get(2)?,
                payload: r.get(3)?,
                headers: r.get(4)?,
                aggregate_type: r.get(5)?,
                state: r.get(6)?,
                attempt: r.get(7)?,
                max_attempts: r.get(8)?,
                scheduled_at: micros(r, 9)?,
                created_at: micros(r, 10)?,
                updated_at: micros(r, 11)?,
                claimed_at: opt_micros(r, 12)?,
                claim_token: opt_uuid_at(r, 13)?,
                lease_expires_at: opt_micros(r, 14)?,
                last_error: r.get(15)?,
                sequence: r.get(16)?,
                read_at: micros(r, 17)?,
            })
        })
        .unwrap_or_else(|e| panic!("read outbox row {id}: {e}"))
    }

    async fn outbox_states(&self, layout: &TableLayout) -> BTreeMap<String, i64> {
        let sql = format!(
            "SELECT {s}, count(*) FROM {t} GROUP BY {s}",
            s = q(&layout.outbox.state),
            t = q(&layout.outbox_table)
        );
        let conn = self.admin.lock().expect("admin");
        let mut stmt = conn.prepare(&sql).expect("prepare");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("count states")
            .collect::<Result<_, _>>()
            .expect("states")
    }

    async fn create_inbox_by_hand(&self, layout: &TableLayout) {
        self.exec(queuebox_store_sqlite::bundled_sql(2).expect("v2"));
        self.rename_by_hand("inbox", layout.inbox.entries(), &layout.inbox_table);
    }

    async fn inbox_row(&self, layout: &TableLayout, id: Uuid) -> InboxSnapshot {
        let c = &layout.inbox;
        let sql = format!(
            "SELECT {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {NOW} \
             FROM {} WHERE {} = ?1",
            q(&c.id),
            q(&c.source),
            q(&c.idempotency_key),
            q(&c.aggregate_id),
            q(&c.event_type),
            q(&c.payload),
            q(&c.headers),
            q(&c.state),
            q(&c.consumption),
            q(&c.attempt),
            q(&c.scheduled_at),
            q(&c.created_at),
            q(&c.processed_at),
            q(&c.claimed_at),
            q(&c.claim_token),
            q(&c.lease_expires_at),
            q(&c.correlation_id),
            q(&c.last_error),
            q(&layout.inbox_table),
            q(&c.id),
        );
        let conn = self.admin.lock().expect("admin");
        conn.query_row(&sql, [id.to_string()], |r| {
            Ok(InboxSnapshot {
                id: uuid_at(r, 0)?,
                source: r.get(1)?,
                idempotency_key: r.get(2)?,
                aggregate_id: r.get(3)?,
                event_type: r.get(4)?,
                payload: r.get(5)?,
                headers: r.get(6)?,
                state: r.get(7)?,
                consumption: r.get(8)?,
                attempt: r.get(9)?,
                scheduled_at: micros(r, 10)?,
                created_at: micros(r, 11)?,
                processed_at: opt_micros(r, 12)?,
                claimed_at: opt_micros(r, 13)?,
                claim_token: opt_uuid_at(r, 14)?,
                lease_expires_at: opt_micros(r, 15)?,
                correlation_id: r.get(16)?,
                last_error: r.get(17)?,
                read_at: micros(r, 18)?,
            })
        })
        .unwrap_or_else(|e| panic!("read inbox row {id}: {e}"))
    }

    async fn inbox_ids(&self, layout: &TableLayout) -> Vec<Uuid> {
        self.ids(&layout.inbox_table, &layout.inbox.id)
    }

    async fn outbox_ids(&self, layout: &TableLayout) -> Vec<Uuid> {
        self.ids(&layout.outbox_table, &layout.outbox.id)
    }

    async fn backdate_inbox(&self, layout: &TableLayout, id: Uuid, ms: i64) {
        let c = &layout.inbox;
        let sql = format!(
            "UPDATE {t} SET {s} = strftime('%Y-%m-%dT%H:%M:%fZ', {s}, printf('%+.3f seconds', -?2 / 1000.0)), \
             {c} = strftime('%Y-%m-%dT%H:%M:%fZ', {c}, printf('%+.3f seconds', -?2 / 1000.0)) WHERE {id} = ?1",
            t = q(&layout.inbox_table),
            s = q(&c.scheduled_at),
            c = q(&c.created_at),
            id = q(&c.id),
        );
        let conn = self.admin.lock().expect("admin");
        let n = conn
            .execute(&sql, params![id.to_string(), ms])
            .expect("backdate");
        assert_eq!(n, 1, "backdated inbox row {id} exists");
    }

    async fn backdate_outbox(&self, layout: &TableLayout, id: Uuid, ms: i64) {
        let c = &layout.outbox;
        let back = |col: &str| {
            format!(
                "{col} = strftime('%Y-%m-%dT%H:%M:%fZ', {col}, printf('%+.3f seconds', -?2 / 1000.0))"
            )
        };
        let sql = format!(
            "UPDATE {} SET {}, {}, {} WHERE {} = ?1",
            q(&layout.outbox_table),
            back(&q(&c.scheduled_at)),
            back(&q(&c.created_at)),
            back(&q(&c.updated_at)),
            q(&c.id),
        );
        let conn = self.admin.lock().expect("admin");
        let n = conn
            .execute(&sql, params![id.to_string(), ms])
            .expect("backdate");
        assert_eq!(n, 1, "backdated outbox row {id} exists");
    }

    async fn claim_by_hand(&self, layout: &TableLayout, id: Uuid, lease_ms: i64) {
        let c = &layout.inbox;
        let sql = format!(
            "UPDATE {} SET {} = 'processing', {} = ?3, {} = {NOW}, \
             {} = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', ?2 / 1000.0)) WHERE {} = ?1",
            q(&layout.inbox_table),
            q(&c.state),
            q(&c.claim_token),
            q(&c.claimed_at),
            q(&c.lease_expires_at),
            q(&c.id),
        );
        let conn = self.admin.lock().expect("admin");
        let n = conn
            .execute(
                &sql,
                params![id.to_string(), lease_ms, Uuid::new_v4().to_string()],
            )
            .expect("claim by hand");
        assert_eq!(n, 1, "claimed inbox row {id} exists");
    }

    async fn insert_outbox_uncommitted(&self, row: &NewOutboxRow) -> Box<dyn OpenTransaction> {
        let session = self.open_transaction();
        session
            .execute(
                "INSERT INTO outbox (id, topic, \"key\", payload, headers, max_attempts) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    row.id.to_string(),
                    row.topic,
                    row.key,
                    row.payload,
                    row.headers,
                    row.max_attempts
                ],
            )
            .expect("insert in an open transaction");
        Box::new(SqliteOpenTransaction(session))
    }

    async fn change_inbox_state_uncommitted(
        &self,
        id: Uuid,
        state: &str,
    ) -> Box<dyn OpenTransaction> {
        let session = self.open_transaction();
        let n = session
            .execute(
                "UPDATE inbox SET state = ?2 WHERE id = ?1",
                params![id.to_string(), state],
            )
            .expect("change the state in an open transaction");
        assert_eq!(n, 1, "inbox row {id} exists");
        Box::new(SqliteOpenTransaction(session))
    }

    async fn audit_outbox_transitions(&self) {
        // SQLite's 'now' is one instant for the whole statement, triggers included: the
        // statement's clock and the recording clock are the same reading.
        self.exec(&format!(
            "CREATE TABLE transitions (
                 n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, from_state TEXT, to_state TEXT,
                 old_updated TEXT, new_updated TEXT, old_claimed TEXT, new_claimed TEXT,
                 new_token TEXT, new_lease TEXT, stmt_at TEXT, trig_at TEXT);
             CREATE TRIGGER audit_outbox_insert AFTER INSERT ON outbox BEGIN
                 INSERT INTO transitions (id, to_state, new_updated, new_claimed, new_token,
                                          new_lease, stmt_at, trig_at)
                 VALUES (NEW.id, NEW.state, NEW.updated_at, NEW.claimed_at, NEW.claim_token,
                         NEW.lease_expires_at, {NOW}, {NOW});
             END;
             CREATE TRIGGER audit_outbox_update AFTER UPDATE ON outbox
                 WHEN OLD.state IS NOT NEW.state BEGIN
                 INSERT INTO transitions (id, from_state, to_state, old_updated, new_updated,
                                          old_claimed, new_claimed, new_token, new_lease,
                                          stmt_at, trig_at)
                 VALUES (NEW.id, OLD.state, NEW.state, OLD.updated_at, NEW.updated_at,
                         OLD.claimed_at, NEW.claimed_at, NEW.claim_token,
                         NEW.lease_expires_at, {NOW}, {NOW});
             END;"
        ));
    }

    async fn outbox_transitions(&self) -> Vec<OutboxTransition> {
        let conn = self.admin.lock().expect("admin");
        let mut stmt = conn
            .prepare(
                "SELECT id, from_state, to_state, old_updated, new_updated, old_claimed, \
                        new_claimed, new_token, new_lease, stmt_at, trig_at \
                 FROM transitions ORDER BY n",
            )
            .expect("prepare");
        stmt.query_map([], |r| {
            Ok(OutboxTransition {
                id: uuid_at(r, 0)?,
                from: r.get(1)?,
                to: r.get(2)?,
                old_updated_at: opt_micros(r, 3)?,
                new_updated_at: micros(r, 4)?,
                old_claimed_at: opt_micros(r, 5)?,
                new_claimed_at: opt_micros(r, 6)?,
                new_claim_token: opt_uuid_at(r, 7)?,
                new_lease_expires_at: opt_micros(r, 8)?,
                statement_at: micros(r, 9)?,
                recorded_at: micros(r, 10)?,
            })
        })
        .expect("read transitions")
        .collect::<Result<_, _>>()
        .expect("transitions")
    }

    async fn insert_inbox_fixtures(&self, rows: &[InboxFixture]) {
        let ago = |col: &str| {
            format!("strftime('%Y-%m-%dT%H:%M:%fZ', ?12, printf('%+.3f seconds', -{col} / 1000.0))")
        };
        let sql = format!(
            "INSERT INTO inbox (id, source, idempotency_key, payload, consumption, state, \
                                scheduled_at, created_at, claimed_at, claim_token, \
                                lease_expires_at, processed_at) \
             VALUES (?1, ?2, ?3, '{{}}', ?4, ?5, {}, {}, \
                     CASE WHEN ?8 IS NOT NULL THEN ?12 END, ?8, \
                     CASE WHEN ?9 IS NOT NULL \
                          THEN strftime('%Y-%m-%dT%H:%M:%fZ', ?12, printf('%+.3f seconds', ?9 / 1000.0)) END, \
                     CASE WHEN ?5 = 'processed' THEN ?12 END)",
            ago("?6"),
            ago("?7"),
        );
        let mut conn = self.admin.lock().expect("admin");
        let tx = conn.transaction().expect("begin");
        let base: String = tx
            .query_row(&format!("SELECT {NOW}"), [], |r| r.get(0))
            .expect("now");
        for r in rows {
            let consumption = match r.consumption {
                Consumption::Push => "push",
                Consumption::Pull => "pull",
            };
            tx.execute(
                &sql,
                params![
                    r.id.to_string(),
                    r.source,
                    r.idempotency_key,
                    consumption,
                    r.state,
                    r.scheduled_ago_ms,
                    r.created_ago_ms,
                    r.claim.map(|c| c.0.to_string()),
                    r.claim.map(|c| c.1),
                    Option::<i64>::None,
                    Option::<i64>::None,
                    base,
                ],
            )
            .unwrap_or_else(|e| panic!("insert inbox fixture: {e}"));
        }
        tx.commit().expect("commit");
    }

    async fn set_inbox_claim(&self, claim: Claim, lease_ms: i64) {
        let conn = self.admin.lock().expect("admin");
        let n = conn
            .execute(
                "UPDATE inbox SET claim_token = ?2, \
                 lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', ?3 / 1000.0)) \
                 WHERE id = ?1",
                params![claim.id.0.to_string(), claim.token.0.to_string(), lease_ms],
            )
            .expect("set the claim");
        assert_eq!(n, 1, "inbox row {} exists", claim.id.0);
    }

    async fn create_application_table(&self) {
        self.exec(
            "CREATE TABLE app_events (id INTEGER PRIMARY KEY, state TEXT, created_at TEXT, \
                                      updated_at TEXT); \
             INSERT INTO app_events (state, created_at, updated_at) \
             SELECT s.value, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-10 days'), \
                    strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-10 days') \
             FROM json_each('[\"processed\", \"dead\", \"sent\"]') s;",
        );
    }

    async fn application_table_states(&self) -> BTreeMap<String, i64> {
        let conn = self.admin.lock().expect("admin");
        let mut stmt = conn
            .prepare("SELECT state, count(*) FROM app_events GROUP BY state")
            .expect("prepare");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("read the application table")
            .collect::<Result<_, _>>()
            .expect("states")
    }

    async fn store_with_short_lock_wait(&self, layout: TableLayout) -> Box<dyn Store> {
        Box::new(self.store_with(layout, 100).await)
    }

    async fn lock_outbox(&self) -> Box<dyn OpenTransaction> {
        // The write lock of the whole file: every claim waits for it.
        Box::new(SqliteOpenTransaction(self.open_transaction()))
    }

    async fn unreachable_store_error(&self) -> StoreError {
        let missing = self.dir.join("no-such-folder").join("queuebox.db");
        let mut config = config_for(SqliteTarget::File(missing), TableLayout::default(), 1_000);
        config.startup_timeout_ms = 300;
        SqliteStore::connect(&config)
            .await
            .expect_err("the folder does not exist")
    }

    async fn cleanup(self: Box<Self>) {
        (*self).remove();
    }
}

// The whole suite: one #[tokio::test] per case, named after it. Five cases hold a second
// writer's transaction open while QueueBox writes; SQLite has one writer for the whole file,
// so that state cannot exist there: the second write waits for the first to commit. They are
// ignored with that reason, never passed.
queuebox_store::conformance_tests!(SqliteFactory, not_applicable $ {
    out_5_sequence_increases_in_insert_order_and_is_kept_for_life =>
        "SQLite has one writer: a second insert cannot run while another transaction holds an uncommitted insert, so 'inserted first, committed last' cannot happen",
    out_38_a_lower_sequence_committed_late_goes_after_the_row_already_claimed =>
        "SQLite has one writer: a claim cannot run while an application transaction holds an uncommitted insert, so a lower sequence can never commit after a higher one",
    ret_8_two_concurrent_retention_runs_are_safe =>
        "SQLite has one writer: a retention DELETE waits for a session that holds an uncommitted change instead of skipping its row (no row locks, no SKIP LOCKED)",
    rly_3_a_held_head_row_holds_back_its_aggregate =>
        "SQLite has one writer: a session that holds a row holds the whole file, so no relay claim can run beside it; with no row locks a held row can never be skipped, so the row behind it can never go first",
    rly_8_reclaim_never_waits_for_a_row_another_session_holds =>
        "SQLite has one writer: a session that holds a row holds the whole file, so the reclaim waits for it (up to the busy timeout) instead of skipping one row",
});
