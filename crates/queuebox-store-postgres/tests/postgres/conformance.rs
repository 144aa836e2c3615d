//! The store-independent suite of `queuebox-store`, run against PostgreSQL, with the suite's
//! set-up and inspection steps written in PostgreSQL's SQL.

use std::collections::BTreeMap;

use async_trait::async_trait;
use queuebox_core::{SqlIdentifier, TableLayout};
use queuebox_store::conformance::{
    ConformanceDatabase, ConformanceFactory, InboxFixture, InboxSnapshot, NewOutboxRow,
    OpenTransaction, OutboxSnapshot, OutboxTransition,
};
use queuebox_store::{Claim, Store, StoreError};
use uuid::Uuid;

use crate::support::TestDb;

pub(crate) struct PgFactory;

#[async_trait]
impl ConformanceFactory for PgFactory {
    async fn fresh(&self, test_name: &str) -> Box<dyn ConformanceDatabase> {
        Box::new(TestDb::new(&format!("conf_{test_name}")).await)
    }
}

fn q(name: &SqlIdentifier) -> String {
    format!("\"{name}\"")
}

/// A timestamptz column as microseconds since the epoch.
fn micros(column: &SqlIdentifier) -> String {
    format!("(extract(epoch from {}) * 1000000)::bigint", q(column))
}

impl TestDb {
    /// Every id of a table, sorted.
    async fn ids(&self, table: &SqlIdentifier, id: &SqlIdentifier) -> Vec<Uuid> {
        let sql = format!("SELECT {} FROM {} ORDER BY 1", q(id), q(table));
        self.admin
            .query(&sql, &[])
            .await
            .expect("read ids")
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}

#[async_trait]
impl ConformanceDatabase for TestDb {
    async fn store(&self, layout: TableLayout) -> Box<dyn Store> {
        Box::new(self.store_with(layout).await)
    }

    async fn drop_column(&self, table: &str, column: &str) {
        self.exec(&format!("ALTER TABLE \"{table}\" DROP COLUMN \"{column}\""))
            .await;
    }

    async fn create_outbox_by_hand(&self, layout: &TableLayout) {
        self.exec(queuebox_store_postgres::bundled_sql(1).expect("v1"))
            .await;
        for (_, default, column) in layout.outbox.entries() {
            if column.as_str() != default {
                self.exec(&format!(
                    "ALTER TABLE outbox RENAME COLUMN \"{default}\" TO {}",
                    q(column)
                ))
                .await;
            }
        }
        if layout.outbox_table.as_str() != "outbox" {
            self.exec(&format!(
                "ALTER TABLE outbox RENAME TO {}",
                q(&layout.outbox_table)
            ))
            .await;
        }
    }

    async fn insert_minimal_outbox(&self, topic: &str) -> Result<(), String> {
        let sql = r#"INSERT INTO "outbox" ("topic", "payload") VALUES ($1, '{}')"#;
        match self.admin.execute(sql, &[&topic]).await {
            Ok(_) => Ok(()),
            Err(e) => Err(e.as_db_error().map_or(e.to_string(), |d| {
                format!("{} ({:?})", d.message(), d.constraint())
            })),
        }
    }

    async fn insert_outbox(&self, layout: &TableLayout, rows: &[NewOutboxRow]) {
        let c = &layout.outbox;
        let sql = format!(
            "INSERT INTO {} ({}, {}, {}, {}, {}, {}, {}, {}) \
             VALUES ($1, $2, $3, $4::text::jsonb, $5::text::jsonb, $6, $7, \
                     now() + $8::bigint * INTERVAL '1 millisecond')",
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
        // One transaction: now() is the same for every row, and sequence follows the slice.
        self.exec("BEGIN").await;
        for row in rows {
            self.admin
                .execute(
                    &sql,
                    &[
                        &row.id,
                        &row.topic,
                        &row.key,
                        &row.payload,
                        &row.headers,
                        &row.aggregate_type,
                        &row.max_attempts,
                        &row.scheduled_in_ms,
                    ],
                )
                .await
                .unwrap_or_else(|e| panic!("insert outbox row: {e}"));
        }
        self.exec("COMMIT").await;
    }

    async fn outbox_row(&self, layout: &TableLayout, id: Uuid) -> OutboxSnapshot {
        let c = &layout.outbox;
        let sql = format!(
            "SELECT {}, {}::text, {}::text, {}::text, {}::text, {}::text, {}::text, {}, {}, \
                    {}, {}, {}, {}, {}, {}, {}, {}, \
                    (extract(epoch from clock_timestamp()) * 1000000)::bigint \
             FROM {} WHERE {} = $1",
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
            q(&layout.outbox_table),
            q(&c.id),
        );
        let r = self
            .admin
            .query_one(&sql, &[&id])
            .await
            .unwrap_or_else(|e| panic!("read outbox row {id}: {e}"));
        OutboxSnapshot {
            id: r.get(0),
            topic: r.get(1),
            key: r.get(2),
            payload: r.get(3),
            headers: r.get(4),
            aggregate_type: r.get(5),
            state: r.get(6),
            attempt: r.get(7),
            max_attempts: r.get(8),
            scheduled_at: r.get(9),
            created_at: r.get(10),
            updated_at: r.get(11),
            claimed_at: r.get(12),
            claim_token: r.get(13),
            lease_expires_at: r.get(14),
            last_error: r.get(15),
            sequence: r.get(16),
            read_at: r.get(17),
        }
    }

    async fn outbox_states(&self, layout: &TableLayout) -> BTreeMap<String, i64> {
        let sql = format!(
            "SELECT {s}::text, count(*) FROM {t} GROUP BY {s}",
            s = q(&layout.outbox.state),
            t = q(&layout.outbox_table)
        );
        self.admin
            .query(&sql, &[])
            .await
            .expect("count states")
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }

    async fn create_inbox_by_hand(&self, layout: &TableLayout) {
        self.exec(queuebox_store_postgres::bundled_sql(2).expect("v2"))
            .await;
        for (_, default, column) in layout.inbox.entries() {
            if column.as_str() != default {
                self.exec(&format!(
                    "ALTER TABLE inbox RENAME COLUMN \"{default}\" TO {}",
                    q(column)
                ))
                .await;
            }
        }
        if layout.inbox_table.as_str() != "inbox" {
            self.exec(&format!(
                "ALTER TABLE inbox RENAME TO {}",
                q(&layout.inbox_table)
            ))
            .await;
        }
    }

    async fn inbox_row(&self, layout: &TableLayout, id: Uuid) -> InboxSnapshot {
        let c = &layout.inbox;
        let sql = format!(
            "SELECT {}, {}::text, {}::text, {}::text, {}::text, {}::text, {}::text, {}::text, \
                    {}::text, {}, {}, {}, {}, {}, {}, {}, {}::text, {}, \
                    (extract(epoch from clock_timestamp()) * 1000000)::bigint \
             FROM {} WHERE {} = $1",
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
            q(&layout.inbox_table),
            q(&c.id),
        );
        let r = self
            .admin
            .query_one(&sql, &[&id])
            .await
            .unwrap_or_else(|e| panic!("read inbox row {id}: {e}"));
        InboxSnapshot {
            id: r.get(0),
            source: r.get(1),
            idempotency_key: r.get(2),
            aggregate_id: r.get(3),
            event_type: r.get(4),
            payload: r.get(5),
            headers: r.get(6),
            state: r.get(7),
            consumption: r.get(8),
            attempt: r.get(9),
            scheduled_at: r.get(10),
            created_at: r.get(11),
            processed_at: r.get(12),
            claimed_at: r.get(13),
            claim_token: r.get(14),
            lease_expires_at: r.get(15),
            correlation_id: r.get(16),
            last_error: r.get(17),
            read_at: r.get(18),
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
            "UPDATE {t} SET {s} = {s} - $2::bigint * INTERVAL '1 millisecond', \
             {c} = {c} - $2::bigint * INTERVAL '1 millisecond' WHERE {id} = $1",
            t = q(&layout.inbox_table),
            s = q(&c.scheduled_at),
            c = q(&c.created_at),
            id = q(&c.id),
        );
        let n = self
            .admin
            .execute(&sql, &[&id, &ms])
            .await
            .expect("backdate");
        assert_eq!(n, 1, "backdated inbox row {id} exists");
    }

    async fn backdate_outbox(&self, layout: &TableLayout, id: Uuid, ms: i64) {
        let c = &layout.outbox;
        let sql = format!(
            "UPDATE {t} SET {s} = {s} - $2::bigint * INTERVAL '1 millisecond', \
             {c} = {c} - $2::bigint * INTERVAL '1 millisecond', \
             {u} = {u} - $2::bigint * INTERVAL '1 millisecond' WHERE {id} = $1",
            t = q(&layout.outbox_table),
            s = q(&c.scheduled_at),
            c = q(&c.created_at),
            u = q(&c.updated_at),
            id = q(&c.id),
        );
        let n = self
            .admin
            .execute(&sql, &[&id, &ms])
            .await
            .expect("backdate");
        assert_eq!(n, 1, "backdated outbox row {id} exists");
    }

    async fn claim_by_hand(&self, layout: &TableLayout, id: Uuid, lease_ms: i64) {
        let c = &layout.inbox;
        let sql = format!(
            "UPDATE {} SET {} = 'processing', {} = gen_random_uuid(), {} = clock_timestamp(), \
             {} = clock_timestamp() + $2::bigint * INTERVAL '1 millisecond' WHERE {} = $1",
            q(&layout.inbox_table),
            q(&c.state),
            q(&c.claim_token),
            q(&c.claimed_at),
            q(&c.lease_expires_at),
            q(&c.id),
        );
        let n = self
            .admin
            .execute(&sql, &[&id, &lease_ms])
            .await
            .expect("claim by hand");
        assert_eq!(n, 1, "claimed inbox row {id} exists");
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
        self.hook_set_inbox_claim(claim.id.0, claim.token.0, lease_ms)
            .await;
    }

    async fn create_application_table(&self) {
        self.hook_create_application_table().await;
    }

    async fn application_table_states(&self) -> BTreeMap<String, i64> {
        self.hook_application_table_states().await
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

// The whole suite: one #[tokio::test] per case, named after it.
queuebox_store::conformance_tests!(PgFactory);
