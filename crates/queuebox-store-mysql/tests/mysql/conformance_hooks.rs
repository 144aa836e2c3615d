//! The suite's concurrency, audit and error hooks in MySQL's SQL: a second session with an
//! open transaction, triggers that record the outbox's state changes, inbox rows written by
//! hand, and the lock-wait and unreachable-database stores.

use async_trait::async_trait;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};
use queuebox_core::TableLayout;
use queuebox_store::conformance::{InboxFixture, NewOutboxRow, OpenTransaction, OutboxTransition};
use queuebox_store::{Consumption, Store, StoreError};
use queuebox_store_mysql::MysqlStore;
use uuid::Uuid;

use crate::conformance::{get, us, uuid_of};
use crate::support::{TestDb, config_for, db_opts, target};

/// A session of its own in the test database, in an open transaction (or holding a table
/// lock); `end` is what commits it.
pub(crate) struct MysqlOpenTransaction {
    conn: Conn,
    end: &'static str,
}

#[async_trait]
impl OpenTransaction for MysqlOpenTransaction {
    async fn commit(self: Box<Self>) {
        let Self { mut conn, end } = *self;
        conn.query_drop(end).await.expect("commit");
        let _ = conn.disconnect().await;
    }
}

impl TestDb {
    /// Another session in the test database, outside every pool.
    pub(crate) async fn open_session(&self) -> Conn {
        Conn::new(db_opts(&self.database))
            .await
            .expect("connect a second session")
    }

    pub(crate) async fn hook_insert_outbox_uncommitted(
        &self,
        row: &NewOutboxRow,
    ) -> Box<dyn OpenTransaction> {
        let mut session = self.open_session().await;
        session.query_drop("BEGIN").await.expect("begin");
        session
            .exec_drop(
                "INSERT INTO outbox (id, topic, `key`, payload, headers, max_attempts) \
                 VALUES (?, ?, ?, ?, ?, ?)",
                (
                    row.id.to_string(),
                    row.topic.as_str(),
                    row.key.as_deref(),
                    row.payload.as_str(),
                    row.headers.as_str(),
                    row.max_attempts,
                ),
            )
            .await
            .expect("insert in an open transaction");
        Box::new(MysqlOpenTransaction {
            conn: session,
            end: "COMMIT",
        })
    }

    pub(crate) async fn hook_change_inbox_state_uncommitted(
        &self,
        id: Uuid,
        state: &str,
    ) -> Box<dyn OpenTransaction> {
        let mut session = self.open_session().await;
        session.query_drop("BEGIN").await.expect("begin");
        session
            .exec_drop(
                "UPDATE inbox SET state = ? WHERE id = ?",
                (state, id.to_string()),
            )
            .await
            .expect("change the state in an open transaction");
        assert_eq!(session.affected_rows(), 1, "inbox row {id} exists");
        Box::new(MysqlOpenTransaction {
            conn: session,
            end: "COMMIT",
        })
    }

    /// Two row triggers: every insert, and every update that changes `state`. `stmt_at` is
    /// UTC_TIMESTAMP(6), which in a trigger is the start of the triggering statement;
    /// `trig_at` is SYSDATE(6), the clock when the row is recorded (the session is UTC).
    pub(crate) async fn hook_audit_outbox_transitions(&self) {
        self.exec(
            "CREATE TABLE transitions (
                 n BIGINT AUTO_INCREMENT PRIMARY KEY, id CHAR(36), from_state VARCHAR(50),
                 to_state VARCHAR(50), old_updated DATETIME(6), new_updated DATETIME(6),
                 old_claimed DATETIME(6), new_claimed DATETIME(6), new_token CHAR(36),
                 new_lease DATETIME(6), stmt_at DATETIME(6), trig_at DATETIME(6))",
        )
        .await;
        self.exec(
            "CREATE TRIGGER audit_outbox_insert AFTER INSERT ON outbox FOR EACH ROW
                 INSERT INTO transitions (id, to_state, new_updated, new_claimed, new_token,
                                          new_lease, stmt_at, trig_at)
                 VALUES (NEW.id, NEW.state, NEW.updated_at, NEW.claimed_at, NEW.claim_token,
                         NEW.lease_expires_at, UTC_TIMESTAMP(6), SYSDATE(6))",
        )
        .await;
        self.exec(
            "CREATE TRIGGER audit_outbox_update AFTER UPDATE ON outbox FOR EACH ROW
             BEGIN
                 IF NOT (OLD.state <=> NEW.state) THEN
                     INSERT INTO transitions (id, from_state, to_state, old_updated, new_updated,
                                              old_claimed, new_claimed, new_token, new_lease,
                                              stmt_at, trig_at)
                     VALUES (NEW.id, OLD.state, NEW.state, OLD.updated_at, NEW.updated_at,
                             OLD.claimed_at, NEW.claimed_at, NEW.claim_token,
                             NEW.lease_expires_at, UTC_TIMESTAMP(6), SYSDATE(6));
                 END IF;
             END",
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
        let rows: Vec<Row> = self
            .conn()
            .await
            .query(sql)
            .await
            .expect("read transitions");
        rows.iter()
            .map(|r| OutboxTransition {
                id: uuid_of(Some(get(r, 0))).expect("id"),
                from: get(r, 1),
                to: get(r, 2),
                old_updated_at: get(r, 3),
                new_updated_at: get(r, 4),
                old_claimed_at: get(r, 5),
                new_claimed_at: get(r, 6),
                new_claim_token: uuid_of(get(r, 7)),
                new_lease_expires_at: get(r, 8),
                statement_at: get(r, 9),
                recorded_at: get(r, 10),
            })
            .collect()
    }

    pub(crate) async fn hook_insert_inbox_fixtures(&self, rows: &[InboxFixture]) {
        let mut conn = self.conn().await;
        let mut tx = conn
            .start_transaction(mysql_async::TxOpts::default())
            .await
            .expect("begin");
        tx.query_drop("SET @t = UTC_TIMESTAMP(6)")
            .await
            .expect("clock");
        for r in rows {
            let consumption = match r.consumption {
                Consumption::Push => "push",
                Consumption::Pull => "pull",
            };
            let token = r.claim.map(|c| c.0.to_string());
            let lease = r.claim.map(|c| c.1);
            tx.exec_drop(
                "INSERT INTO inbox (id, source, idempotency_key, payload, consumption, state, \
                                    scheduled_at, created_at, claimed_at, claim_token, \
                                    lease_expires_at, processed_at) \
                 VALUES (?, ?, ?, '{}', ?, ?, \
                         @t - INTERVAL ? * 1000 MICROSECOND, \
                         @t - INTERVAL ? * 1000 MICROSECOND, \
                         CASE WHEN ? IS NOT NULL THEN @t END, ?, \
                         @t + INTERVAL ? * 1000 MICROSECOND, \
                         CASE WHEN ? = 'processed' THEN @t END)",
                (
                    r.id.to_string(),
                    r.source.as_str(),
                    r.idempotency_key.as_str(),
                    consumption,
                    r.state,
                    r.scheduled_ago_ms,
                    r.created_ago_ms,
                    token.clone(),
                    token,
                    lease,
                    r.state,
                ),
            )
            .await
            .expect("insert inbox fixture");
        }
        tx.commit().await.expect("commit");
    }

    pub(crate) async fn hook_store_with_short_lock_wait(
        &self,
        layout: TableLayout,
    ) -> Box<dyn Store> {
        // 1 s is the shortest wait MySQL and MariaDB accept for both kinds of lock: row locks
        // (innodb_lock_wait_timeout) and table locks (lock_wait_timeout).
        let store = MysqlStore::connect_with_session(
            &config_for(target(&self.database), layout, 10_000),
            &[
                "SET SESSION innodb_lock_wait_timeout = 1".to_owned(),
                "SET SESSION lock_wait_timeout = 1".to_owned(),
            ],
        )
        .await
        .expect("connect");
        Box::new(store)
    }

    /// A table lock that keeps every claim waiting (SKIP LOCKED skips locked rows, so a row
    /// lock would not): LOCK TABLES ... WRITE, held until UNLOCK TABLES.
    pub(crate) async fn hook_lock_outbox(&self) -> Box<dyn OpenTransaction> {
        let mut session = self.open_session().await;
        session
            .query_drop("LOCK TABLES outbox WRITE")
            .await
            .expect("lock the outbox");
        Box::new(MysqlOpenTransaction {
            conn: session,
            end: "UNLOCK TABLES",
        })
    }

    pub(crate) async fn hook_unreachable_store_error(&self) -> StoreError {
        let mut down = target(&self.database);
        down.port = 1;
        MysqlStore::connect(&config_for(down, TableLayout::default(), 300))
            .await
            .expect_err("nobody listens on port 1")
    }
}
