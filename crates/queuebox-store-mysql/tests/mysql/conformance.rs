//! The store-independent suite of `queuebox-store`, run against MariaDB / MySQL, with the
//! suite's set-up and inspection steps written in MySQL's SQL.

use std::collections::BTreeMap;

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Row, TxOpts, Value};
use queuebox_core::{SqlIdentifier, TableLayout};
use queuebox_store::conformance::{
    ConformanceDatabase, ConformanceFactory, InboxFixture, InboxSnapshot, NewOutboxRow,
    OpenTransaction, OutboxSnapshot, OutboxTransition,
};
use queuebox_store::{Claim, Store, StoreError};
use uuid::Uuid;

use crate::support::TestDb;

pub(crate) struct MysqlFactory;

#[async_trait]
impl ConformanceFactory for MysqlFactory {
    async fn fresh(&self, test_name: &str) -> Box<dyn ConformanceDatabase> {
        Box::new(TestDb::new(&format!("conf_{test_name}")).await)
    }
}

pub(crate) fn q(name: &SqlIdentifier) -> String {
    format!("`{name}`")
}

/// A DATETIME(6) column (UTC) as microseconds since the epoch.
pub(crate) fn us(column: &str) -> String {
    format!("TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {column})")
}

fn micros(column: &SqlIdentifier) -> String {
    us(&q(column))
}

pub(crate) fn uuid_of(text: Option<String>) -> Option<Uuid> {
    text.map(|t| Uuid::parse_str(&t).expect("a UUID column"))
}

pub(crate) fn get<T: mysql_async::prelude::FromValue>(row: &Row, i: usize) -> T {
    row.get_opt::<T, usize>(i)
        .unwrap_or_else(|| panic!("column {i} missing"))
        .unwrap_or_else(|e| panic!("column {i}: {e}"))
}

impl TestDb {
    /// Every id of a table, sorted.
    async fn ids(&self, table: &SqlIdentifier, id: &SqlIdentifier) -> Vec<Uuid> {
        let sql = format!("SELECT {} FROM {}", q(id), q(table));
        let texts: Vec<String> = self.conn().await.query(sql).await.expect("read ids");
        let mut ids: Vec<Uuid> = texts
            .iter()
            .map(|t| Uuid::parse_str(t).expect("id"))
            .collect();
        ids.sort();
        ids
    }

    /// Runs `sql` (no parameters) and renames the default names of the table as the layout
    /// says, as an operator who created the tables by hand does.
    async fn create_by_hand(
        &self,
        sql: &str,
        default_table: &str,
        table: &SqlIdentifier,
        columns: Vec<(&'static str, &'static str, &SqlIdentifier)>,
    ) {
        self.exec(sql).await;
        for (_, default, column) in columns {
            if column.as_str() != default {
                self.exec(&format!(
                    "ALTER TABLE `{default_table}` RENAME COLUMN `{default}` TO {}",
                    q(column)
                ))
                .await;
            }
        }
        if table.as_str() != default_table {
            self.exec(&format!("RENAME TABLE `{default_table}` TO {}", q(table)))
                .await;
        }
    }
}

#[async_trait]
impl ConformanceDatabase for TestDb {
    async fn store(&self, layout: TableLayout) -> Box<dyn Store> {
        Box::new(self.store_with(layout).await)
    }

    async fn drop_column(&self, table: &str, column: &str) {
        self.exec(&format!("ALTER TABLE `{table}` DROP COLUMN `{column}`"))
            .await;
    }

    async fn create_outbox_by_hand(&self, layout: &TableLayout) {
        let sql = queuebox_store_mysql::bundled_sql(1).expect("v1");
        self.create_by_hand(sql, "outbox", &layout.outbox_table, layout.outbox.entries())
            .await;
    }

    async fn insert_minimal_outbox(&self, topic: &str) -> Result<(), String> {
        let mut conn = self.conn().await;
        conn.exec_drop(
            "INSERT INTO `outbox` (`topic`, `payload`) VALUES (?, '{}')",
            (topic,),
        )
        .await
        .map_err(|e| e.to_string())
    }

    async fn insert_outbox(&self, layout: &TableLayout, rows: &[NewOutboxRow]) {
        let c = &layout.outbox;
        let sql = format!(
            "INSERT INTO {} ({}, {}, {}, {}, {}, {}, {}, {}) \
             VALUES (?, ?, ?, ?, ?, ?, ?, @t + INTERVAL ? * 1000 MICROSECOND)",
            q(&layout.outbox_table),
            q(&c.id),
            q(&c.topic),
            q(&c.key),
            q(&c.payload),
            q(&c.headers),
            q(&c.aggregate_type),
            q(&c.max_attempts),
            q(&c.scheduled_at),
        );
        let mut conn = self.conn().await;
        // One transaction and one clock reading: every row has the same insert time, and
        // sequence follows the slice.
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .expect("begin");
        tx.query_drop("SET @t = UTC_TIMESTAMP(6)")
            .await
            .expect("clock");
        for row in rows {
            tx.exec_drop(
                &sql,
                (
                    row.id.to_string(),
                    row.topic.as_str(),
                    row.key.as_deref(),
                    row.payload.as_str(),
                    row.headers.as_str(),
                    row.aggregate_type.as_deref(),
                    row.max_attempts,
                    row.scheduled_in_ms,
                ),
            )
            .await
            .unwrap_or_else(|e| panic!("insert outbox row: {e}"));
        }
        tx.commit().await.expect("commit");
    }

    async fn outbox_row(&self, layout: &TableLayout, id: Uuid) -> OutboxSnapshot {
        let c = &layout.outbox;
        let sql = format!(
            "SELECT {}, {}, {}, CAST({} AS CHAR), CAST({} AS CHAR), {}, {}, {}, {}, \
                    {}, {}, {}, {}, {}, {}, {}, {}, {} \
             FROM {} WHERE {} = ?",
            q(&c.id),
            q(&c.topic),
            q(&c.key),
            q(&c.payload),
            q(&c.headers),
            q(&c.aggregate_type),
            q(&c.state),
            q(&c.attempt),
            q(&c.max_attempts),
            micros(&c.scheduled_at),
            micros(&c.created_at),
            micros(&c.updated_at),
            micros(&c.claimed_at),
            q(&c.claim_token),
            micros(&c.lease_expires_at),
            q(&c.last_error),
            q(&c.sequence),
            us("UTC_TIMESTAMP(6)"),
            q(&layout.outbox_table),
            q(&c.id),
        );
        let row: Row = self
            .conn()
            .await
            .exec_first(sql, (id.to_string(),))
            .await
            .unwrap_or_else(|e| panic!("read outbox row {id}: {e}"))
            .unwrap_or_else(|| panic!("outbox row {id} exists"));
        OutboxSnapshot {
            id: uuid_of(Some(get(&row, 0))).expect("id"),
            topic: get(&row, 1),
            key: get(&row, 2),
            payload: get(&row, 3),
            headers: get(&row, 4),
            aggregate_type: get(&row, 5),
            state: get(&row, 6),
            attempt: get(&row, 7),
            max_attempts: get(&row, 8),
            scheduled_at: get(&row, 9),
            created_at: get(&row, 10),
            updated_at: get(&row, 11),
            claimed_at: get(&row, 12),
            claim_token: uuid_of(get(&row, 13)),
            lease_expires_at: get(&row, 14),
            last_error: get(&row, 15),
            sequence: get(&row, 16),
            read_at: get(&row, 17),
        }
    }

    async fn outbox_states(&self, layout: &TableLayout) -> BTreeMap<String, i64> {
        let sql = format!(
            "SELECT {s}, COUNT(*) FROM {t} GROUP BY {s}",
            s = q(&layout.outbox.state),
            t = q(&layout.outbox_table)
        );
        let rows: Vec<(String, i64)> = self.conn().await.query(sql).await.expect("count states");
        rows.into_iter().collect()
    }

    async fn create_inbox_by_hand(&self, layout: &TableLayout) {
        let sql = queuebox_store_mysql::bundled_sql(2).expect("v2");
        self.create_by_hand(sql, "inbox", &layout.inbox_table, layout.inbox.entries())
            .await;
    }

    async fn inbox_row(&self, layout: &TableLayout, id: Uuid) -> InboxSnapshot {
        let c = &layout.inbox;
        let sql = format!(
            "SELECT {}, {}, {}, {}, {}, CAST({} AS CHAR), CAST({} AS CHAR), {}, {}, {}, \
                    {}, {}, {}, {}, {}, {}, {}, {}, {} \
             FROM {} WHERE {} = ?",
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
            micros(&c.scheduled_at),
            micros(&c.created_at),
            micros(&c.processed_at),
            micros(&c.claimed_at),
            q(&c.claim_token),
            micros(&c.lease_expires_at),
            q(&c.correlation_id),
            q(&c.last_error),
            us("UTC_TIMESTAMP(6)"),
            q(&layout.inbox_table),
            q(&c.id),
        );
        let row: Row = self
            .conn()
            .await
            .exec_first(sql, (id.to_string(),))
            .await
            .unwrap_or_else(|e| panic!("read inbox row {id}: {e}"))
            .unwrap_or_else(|| panic!("inbox row {id} exists"));
        InboxSnapshot {
            id: uuid_of(Some(get(&row, 0))).expect("id"),
            source: get(&row, 1),
            idempotency_key: get(&row, 2),
            aggregate_id: get(&row, 3),
            event_type: get(&row, 4),
            payload: get(&row, 5),
            headers: get(&row, 6),
            state: get(&row, 7),
            consumption: get(&row, 8),
            attempt: get(&row, 9),
            scheduled_at: get(&row, 10),
            created_at: get(&row, 11),
            processed_at: get(&row, 12),
            claimed_at: get(&row, 13),
            claim_token: uuid_of(get(&row, 14)),
            lease_expires_at: get(&row, 15),
            correlation_id: get(&row, 16),
            last_error: get(&row, 17),
            read_at: get(&row, 18),
        }
    }

    async fn inbox_ids(&self, layout: &TableLayout) -> Vec<Uuid> {
        self.ids(&layout.inbox_table, &layout.inbox.id).await
    }

    async fn outbox_ids(&self, layout: &TableLayout) -> Vec<Uuid> {
        self.ids(&layout.outbox_table, &layout.outbox.id).await
    }

    async fn backdate_inbox(&self, layout: &TableLayout, id: Uuid, ms: i64) {
        let c = &layout.inbox;
        let sql = format!(
            "UPDATE {t} SET {s} = {s} - INTERVAL ? * 1000 MICROSECOND, \
             {c} = {c} - INTERVAL ? * 1000 MICROSECOND WHERE {id} = ?",
            t = q(&layout.inbox_table),
            s = q(&c.scheduled_at),
            c = q(&c.created_at),
            id = q(&c.id),
        );
        let mut conn = self.conn().await;
        conn.exec_drop(sql, (ms, ms, id.to_string()))
            .await
            .expect("backdate");
        assert_eq!(conn.affected_rows(), 1, "backdated inbox row {id} exists");
    }

    async fn backdate_outbox(&self, layout: &TableLayout, id: Uuid, ms: i64) {
        let c = &layout.outbox;
        let sql = format!(
            "UPDATE {t} SET {s} = {s} - INTERVAL ? * 1000 MICROSECOND, \
             {c} = {c} - INTERVAL ? * 1000 MICROSECOND, \
             {u} = {u} - INTERVAL ? * 1000 MICROSECOND WHERE {id} = ?",
            t = q(&layout.outbox_table),
            s = q(&c.scheduled_at),
            c = q(&c.created_at),
            u = q(&c.updated_at),
            id = q(&c.id),
        );
        let mut conn = self.conn().await;
        conn.exec_drop(sql, (ms, ms, ms, id.to_string()))
            .await
            .expect("backdate");
        assert_eq!(conn.affected_rows(), 1, "backdated outbox row {id} exists");
    }

    async fn claim_by_hand(&self, layout: &TableLayout, id: Uuid, lease_ms: i64) {
        let c = &layout.inbox;
        let sql = format!(
            "UPDATE {} SET {} = 'processing', {} = UUID(), {} = UTC_TIMESTAMP(6), \
             {} = UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND WHERE {} = ?",
            q(&layout.inbox_table),
            q(&c.state),
            q(&c.claim_token),
            q(&c.claimed_at),
            q(&c.lease_expires_at),
            q(&c.id),
        );
        let mut conn = self.conn().await;
        conn.exec_drop(sql, (lease_ms, id.to_string()))
            .await
            .expect("claim by hand");
        assert_eq!(conn.affected_rows(), 1, "claimed inbox row {id} exists");
    }

    async fn insert_outbox_uncommitted(&self, row: &NewOutboxRow) -> Box<dyn OpenTransaction> {
        self.hook_insert_outbox_uncommitted(row).await
    }

    async fn change_inbox_state_uncommitted(
        &self,
        id: Uuid,
        state: &str,
    ) -> Box<dyn OpenTransaction> {
        self.hook_change_inbox_state_uncommitted(id, state).await
    }

    async fn audit_outbox_transitions(&self) {
        self.hook_audit_outbox_transitions().await;
    }

    async fn outbox_transitions(&self) -> Vec<OutboxTransition> {
        self.hook_outbox_transitions().await
    }

    async fn insert_inbox_fixtures(&self, rows: &[InboxFixture]) {
        self.hook_insert_inbox_fixtures(rows).await;
    }

    async fn set_inbox_claim(&self, claim: Claim, lease_ms: i64) {
        let mut conn = self.conn().await;
        conn.exec_drop(
            "UPDATE inbox SET claim_token = ?, \
             lease_expires_at = UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND WHERE id = ?",
            (claim.token.0.to_string(), lease_ms, claim.id.0.to_string()),
        )
        .await
        .expect("set the claim");
        assert_eq!(conn.affected_rows(), 1, "inbox row {} exists", claim.id.0);
    }

    async fn create_application_table(&self) {
        self.exec(
            "CREATE TABLE app_events (id INT AUTO_INCREMENT PRIMARY KEY, state VARCHAR(50), \
                                      created_at DATETIME(6), updated_at DATETIME(6))",
        )
        .await;
        self.exec(
            "INSERT INTO app_events (state, created_at, updated_at) VALUES \
             ('processed', UTC_TIMESTAMP(6) - INTERVAL 10 DAY, UTC_TIMESTAMP(6) - INTERVAL 10 DAY), \
             ('dead', UTC_TIMESTAMP(6) - INTERVAL 10 DAY, UTC_TIMESTAMP(6) - INTERVAL 10 DAY), \
             ('sent', UTC_TIMESTAMP(6) - INTERVAL 10 DAY, UTC_TIMESTAMP(6) - INTERVAL 10 DAY)",
        )
        .await;
    }

    async fn application_table_states(&self) -> BTreeMap<String, i64> {
        let rows: Vec<(String, i64)> = self
            .conn()
            .await
            .query("SELECT state, COUNT(*) FROM app_events GROUP BY state")
            .await
            .expect("read the application table");
        rows.into_iter().collect()
    }

    async fn store_with_short_lock_wait(&self, layout: TableLayout) -> Box<dyn Store> {
        self.hook_store_with_short_lock_wait(layout).await
    }

    async fn lock_outbox(&self) -> Box<dyn OpenTransaction> {
        self.hook_lock_outbox().await
    }

    async fn unreachable_store_error(&self) -> StoreError {
        self.hook_unreachable_store_error().await
    }

    async fn cleanup(self: Box<Self>) {
        (*self).drop().await;
    }
}

#[allow(dead_code)]
fn _value_is_used(_: Value) {}

// The whole suite: one #[tokio::test] per case, named after it.
queuebox_store::conformance_tests!(MysqlFactory);
