//! The suite's concurrency, audit and error hooks in PostgreSQL's SQL: a second session with an
//! open transaction, a trigger that records the outbox's state changes, inbox rows written by
//! hand, an application table, and the lock-wait and unreachable-database stores.

use std::collections::BTreeMap;

use async_trait::async_trait;
use queuebox_core::TableLayout;
use queuebox_store::conformance::{InboxFixture, NewOutboxRow, OpenTransaction, OutboxTransition};
use queuebox_store::{Consumption, Store, StoreError};
use queuebox_store_postgres::PgStore;
use tokio_postgres::{Client, NoTls};
use uuid::Uuid;

use crate::support::{self, TestDb, config_for, target};

/// A session of its own in the test schema, in an open transaction.
pub(crate) struct PgOpenTransaction(Client);

#[async_trait]
impl OpenTransaction for PgOpenTransaction {
    async fn commit(self: Box<Self>) {
        self.0.batch_execute("COMMIT").await.expect("commit");
    }
}

fn us(column: &str) -> String {
    format!("(extract(epoch from {column}) * 1000000)::bigint")
}

impl TestDb {
    /// Another session in the test schema, with a transaction begun.
    pub(crate) async fn open_session(&self) -> Client {
        let (client, connection) = tokio_postgres::connect(&support::base_url(), NoTls)
            .await
            .expect("connect a second session");
        tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path TO \"{}\"; BEGIN", self.schema))
            .await
            .expect("begin in the second session");
        client
    }

    pub(crate) async fn hook_insert_outbox_uncommitted(
        &self,
        row: &NewOutboxRow,
    ) -> Box<dyn OpenTransaction> {
        let session = self.open_session().await;
        session
            .execute(
                "INSERT INTO outbox (id, topic, key, payload, headers, max_attempts) \
                 VALUES ($1, $2, $3, $4::text::jsonb, $5::text::jsonb, $6)",
                &[
                    &row.id,
                    &row.topic,
                    &row.key,
                    &row.payload,
                    &row.headers,
                    &row.max_attempts,
                ],
            )
            .await
            .expect("insert in an open transaction");
        Box::new(PgOpenTransaction(session))
    }

    pub(crate) async fn hook_change_inbox_state_uncommitted(
        &self,
        id: Uuid,
        state: &str,
    ) -> Box<dyn OpenTransaction> {
        let session = self.open_session().await;
        let n = session
            .execute("UPDATE inbox SET state = $2 WHERE id = $1", &[&id, &state])
            .await
            .expect("change the state in an open transaction");
        assert_eq!(n, 1, "inbox row {id} exists");
        Box::new(PgOpenTransaction(session))
    }

    pub(crate) async fn hook_audit_outbox_transitions(&self) {
        self.exec(
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
                             OLD.claimed_at, NEW.claimed_at, NEW.claim_token,
                             NEW.lease_expires_at, statement_timestamp(), clock_timestamp());
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE TRIGGER audit_outbox AFTER INSERT OR UPDATE ON outbox
                 FOR EACH ROW EXECUTE FUNCTION audit_outbox();",
        )
        .await;
    }

    pub(crate) async fn hook_outbox_transitions(&self) -> Vec<OutboxTransition> {
        let sql = format!(
            "SELECT id, from_state, to_state, {}, {}, {}, {}, new_token, {}, {}, {} \
             FROM transitions ORDER BY n",
            us("old_updated"),
            us("new_updated"),
            us("old_claimed"),
            us("new_claimed"),
            us("new_lease"),
            us("stmt_at"),
            us("trig_at"),
        );
        let rows = self.admin.query(&sql, &[]).await.expect("read transitions");
        rows.iter()
            .map(|r| OutboxTransition {
                id: r.get(0),
                from: r.get(1),
                to: r.get(2),
                old_updated_at: r.get(3),
                new_updated_at: r.get(4),
                old_claimed_at: r.get(5),
                new_claimed_at: r.get(6),
                new_claim_token: r.get(7),
                new_lease_expires_at: r.get(8),
                statement_at: r.get(9),
                recorded_at: r.get(10),
            })
            .collect()
    }

    pub(crate) async fn hook_insert_inbox_fixtures(&self, rows: &[InboxFixture]) {
        let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
        let sources: Vec<&str> = rows.iter().map(|r| r.source.as_str()).collect();
        let keys: Vec<&str> = rows.iter().map(|r| r.idempotency_key.as_str()).collect();
        let consumptions: Vec<&str> = rows
            .iter()
            .map(|r| match r.consumption {
                Consumption::Push => "push",
                Consumption::Pull => "pull",
            })
            .collect();
        let states: Vec<&str> = rows.iter().map(|r| r.state).collect();
        let scheduled: Vec<i64> = rows.iter().map(|r| r.scheduled_ago_ms).collect();
        let created: Vec<i64> = rows.iter().map(|r| r.created_ago_ms).collect();
        let tokens: Vec<Option<Uuid>> = rows.iter().map(|r| r.claim.map(|c| c.0)).collect();
        let leases: Vec<Option<i64>> = rows.iter().map(|r| r.claim.map(|c| c.1)).collect();
        self.admin
            .execute(
                "INSERT INTO inbox (id, source, idempotency_key, payload, consumption, state, \
                                    scheduled_at, created_at, claimed_at, claim_token, \
                                    lease_expires_at, processed_at) \
                 SELECT r.id, r.source, r.key, '{}', r.consumption, r.state, \
                        now() - r.scheduled_ms * interval '1 millisecond', \
                        now() - r.created_ms * interval '1 millisecond', \
                        CASE WHEN r.token IS NOT NULL THEN now() END, r.token, \
                        now() + r.lease_ms * interval '1 millisecond', \
                        CASE WHEN r.state = 'processed' THEN now() END \
                 FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], \
                             $6::int8[], $7::int8[], $8::uuid[], $9::int8[]) \
                      AS r(id, source, key, consumption, state, scheduled_ms, created_ms, \
                           token, lease_ms)",
                &[
                    &ids,
                    &sources,
                    &keys,
                    &consumptions,
                    &states,
                    &scheduled,
                    &created,
                    &tokens,
                    &leases,
                ],
            )
            .await
            .expect("insert inbox fixtures");
    }

    pub(crate) async fn hook_set_inbox_claim(&self, id: Uuid, token: Uuid, lease_ms: i64) {
        let n = self
            .admin
            .execute(
                "UPDATE inbox SET claim_token = $2, \
                 lease_expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond' \
                 WHERE id = $1",
                &[&id, &token, &lease_ms],
            )
            .await
            .expect("set the claim");
        assert_eq!(n, 1, "inbox row {id} exists");
    }

    pub(crate) async fn hook_create_application_table(&self) {
        self.exec(
            "CREATE TABLE app_events (id serial PRIMARY KEY, state text, created_at timestamptz, \
                                      updated_at timestamptz); \
             INSERT INTO app_events (state, created_at, updated_at) \
             SELECT s, now() - interval '10 days', now() - interval '10 days' \
             FROM unnest(ARRAY['processed', 'dead', 'sent']) s;",
        )
        .await;
    }

    pub(crate) async fn hook_application_table_states(&self) -> BTreeMap<String, i64> {
        self.admin
            .query("SELECT state, count(*) FROM app_events GROUP BY state", &[])
            .await
            .expect("read the application table")
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }

    pub(crate) async fn hook_store_with_short_lock_wait(
        &self,
        layout: TableLayout,
    ) -> Box<dyn Store> {
        let mut t = target(&self.schema);
        t.options = Some(format!(
            "-c search_path={} -c lock_timeout=100",
            self.schema
        ));
        let store = PgStore::connect(&config_for(t, layout, 10_000))
            .await
            .expect("connect");
        Box::new(store)
    }

    pub(crate) async fn hook_lock_outbox(&self) -> Box<dyn OpenTransaction> {
        let session = self.open_session().await;
        session
            .batch_execute("LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE")
            .await
            .expect("lock the outbox");
        Box::new(PgOpenTransaction(session))
    }

    pub(crate) async fn hook_unreachable_store_error(&self) -> StoreError {
        let mut down = target(&self.schema);
        down.port = 1;
        PgStore::connect(&config_for(down, TableLayout::default(), 300))
            .await
            .expect_err("nobody listens on port 1")
    }
}
