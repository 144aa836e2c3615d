//! The inbox, relay and retention statements of `queries/inbox/` and `queries/retention/`,
//! rendered once per store with the mapped names (`render.rs`), as `outbox_sql.rs` does for the
//! outbox. A statement works on one table, so its placeholders name that table's columns: the
//! forward insert and the outbox retention statements are rendered with the outbox's names,
//! every other one with the inbox's.

use queuebox_core::TableLayout;
use queuebox_store::StoreError;

use crate::render::{inbox_names, outbox_names, render};
use crate::sql;

/// The inbox-side statements of one store, with its names.
#[derive(Debug)]
pub(crate) struct InboxSql {
    pub(crate) insert: String,
    pub(crate) store_raw_body: String,
    pub(crate) claim_lock: String,
    pub(crate) claim: String,
    pub(crate) renew: String,
    pub(crate) forward_insert: String,
    pub(crate) forward_mark: String,
    pub(crate) dead: String,
    pub(crate) release: String,
    pub(crate) reclaim: String,
    pub(crate) oldest_pending_age: String,
    pub(crate) backlog: String,
    pub(crate) retention_outbox_age: String,
    pub(crate) retention_outbox_count: String,
    pub(crate) retention_inbox_age: String,
}

impl InboxSql {
    pub(crate) fn new(layout: &TableLayout) -> Result<Self, StoreError> {
        let inbox = inbox_names(layout);
        let outbox = outbox_names(layout);
        let fill = |file, template, order: &[&str]| render(file, template, &inbox, order);
        let fill_outbox = |file, template, order: &[&str]| render(file, template, &outbox, order);
        Ok(Self {
            insert: fill(
                "inbox/insert.sql",
                sql::INBOX_INSERT,
                &[
                    "ids",
                    "sources",
                    "idempotency_keys",
                    "aggregate_ids",
                    "event_types",
                    "payloads",
                    "headers",
                    "consumptions",
                    "correlation_ids",
                    "publish_ms",
                    "delays_ms",
                    "states",
                    "last_errors",
                ],
            )?,
            store_raw_body: fill(
                "inbox/store_raw_body.sql",
                sql::INBOX_STORE_RAW_BODY,
                &["ids", "raw_bodies"],
            )?,
            claim_lock: fill(
                "inbox/claim_lock.sql",
                sql::INBOX_CLAIM_LOCK,
                &["table_name"],
            )?,
            claim: fill(
                "inbox/claim.sql",
                sql::INBOX_CLAIM,
                &["limit", "cand_limit", "lease_ms", "sources"],
            )?,
            renew: fill(
                "inbox/renew.sql",
                sql::INBOX_RENEW,
                &["ids", "tokens", "lease_ms"],
            )?,
            forward_insert: fill_outbox(
                "inbox/forward_insert.sql",
                sql::INBOX_FORWARD_INSERT,
                &["id", "topic", "key", "payload", "headers", "max_attempts"],
            )?,
            forward_mark: fill(
                "inbox/forward_mark.sql",
                sql::INBOX_FORWARD_MARK,
                &["id", "token"],
            )?,
            dead: fill("inbox/dead.sql", sql::INBOX_DEAD, &["id", "token", "error"])?,
            release: fill(
                "inbox/release.sql",
                sql::INBOX_RELEASE,
                &["ids", "tokens", "error"],
            )?,
            reclaim: fill("inbox/reclaim.sql", sql::INBOX_RECLAIM, &[])?,
            oldest_pending_age: fill(
                "inbox/oldest_pending_age.sql",
                sql::INBOX_OLDEST_PENDING_AGE,
                &[],
            )?,
            backlog: fill("inbox/backlog.sql", sql::INBOX_BACKLOG, &[])?,
            retention_outbox_age: fill_outbox(
                "retention/outbox_age.sql",
                sql::RETENTION_OUTBOX_AGE,
                &["max_age_ms", "batch"],
            )?,
            retention_outbox_count: fill_outbox(
                "retention/outbox_count.sql",
                sql::RETENTION_OUTBOX_COUNT,
                &["keep", "batch"],
            )?,
            retention_inbox_age: fill(
                "retention/inbox_age.sql",
                sql::RETENTION_INBOX_AGE,
                &["max_age_ms", "batch"],
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::SqlIdentifier;

    fn all(sql: &InboxSql) -> [(&'static str, &str); 14] {
        [
            ("insert", &sql.insert),
            ("claim_lock", &sql.claim_lock),
            ("claim", &sql.claim),
            ("renew", &sql.renew),
            ("forward_insert", &sql.forward_insert),
            ("forward_mark", &sql.forward_mark),
            ("dead", &sql.dead),
            ("release", &sql.release),
            ("reclaim", &sql.reclaim),
            ("oldest_pending_age", &sql.oldest_pending_age),
            ("backlog", &sql.backlog),
            ("retention_outbox_age", &sql.retention_outbox_age),
            ("retention_outbox_count", &sql.retention_outbox_count),
            ("retention_inbox_age", &sql.retention_inbox_age),
        ]
    }

    #[test]
    fn sch_10_every_placeholder_is_known_and_quoted() {
        let sql = InboxSql::new(&TableLayout::default()).expect("render");
        for (name, text) in all(&sql) {
            assert!(!text.contains('{') && !text.contains('}'), "{name}: {text}");
        }
        for template in [
            sql::INBOX_INSERT,
            sql::INBOX_CLAIM_LOCK,
            sql::INBOX_CLAIM,
            sql::INBOX_RENEW,
            sql::INBOX_FORWARD_INSERT,
            sql::INBOX_FORWARD_MARK,
            sql::INBOX_DEAD,
            sql::INBOX_RELEASE,
            sql::INBOX_RECLAIM,
            sql::INBOX_OLDEST_PENDING_AGE,
            sql::RETENTION_OUTBOX_AGE,
            sql::RETENTION_OUTBOX_COUNT,
            sql::RETENTION_INBOX_AGE,
        ] {
            assert!(
                template.starts_with("-- Locking: ") && template.contains("Isolation: "),
                "each file starts with its locking comment: {template}"
            );
        }
        assert!(
            sql.insert
                .contains("ON CONFLICT (\"source\", \"idempotency_key\") DO NOTHING")
        );
        assert!(
            sql::INBOX_FORWARD_INSERT.starts_with("-- ")
                && sql.forward_insert.contains("\"outbox\"")
        );
    }

    #[test]
    fn sch_9_states_and_consumption_are_literals() {
        let sql = InboxSql::new(&TableLayout::default()).expect("render");
        for (name, text) in all(&sql) {
            assert!(!text.contains("\"state\" = $"), "{name}");
            assert!(!text.contains("\"consumption\" = $"), "{name}");
        }
        // INB-3: every relay statement that touches rows names push rows only.
        for text in [
            &sql.claim,
            &sql.renew,
            &sql.forward_mark,
            &sql.dead,
            &sql.release,
            &sql.reclaim,
        ] {
            assert!(text.contains("\"consumption\" = 'push'"), "{text}");
        }
    }

    #[test]
    fn rly_6_claim_lock_key_names_the_table() {
        let sql = InboxSql::new(&TableLayout::default()).expect("render");
        assert!(sql.claim_lock.contains(
            "pg_advisory_xact_lock(hashtextextended('queuebox_inbox_claim_' || $1::text, 0))"
        ));
    }

    #[test]
    fn sch_38_mapped_names_replace_every_default() {
        let id = |s: &str| SqlIdentifier::parse(s).expect("identifier");
        let mut layout = TableLayout {
            inbox_table: id("events_in"),
            outbox_table: id("events_out"),
            ..TableLayout::default()
        };
        for (key, default, _) in TableLayout::default().inbox.entries() {
            assert!(layout.inbox.set(key, id(&format!("in_{default}"))));
        }
        for (key, default, _) in TableLayout::default().outbox.entries() {
            assert!(layout.outbox.set(key, id(&format!("out_{default}"))));
        }
        let sql = InboxSql::new(&layout).expect("render");
        for (name, text) in all(&sql) {
            assert!(!text.contains("\"inbox\""), "{name}");
            assert!(!text.contains("\"outbox\""), "{name}");
            let defaults = TableLayout::default();
            let columns = defaults.inbox.entries().into_iter();
            for (_, default, _) in columns.chain(defaults.outbox.entries()) {
                assert!(
                    !text.contains(&format!("\"{default}\"")),
                    "{name}: {default}"
                );
            }
        }
        assert!(
            sql.insert
                .contains("ON CONFLICT (\"in_source\", \"in_idempotency_key\") DO NOTHING")
        );
        assert!(
            sql.forward_insert
                .contains("INSERT INTO \"events_out\" (\"out_id\"")
        );
        assert!(
            sql.retention_outbox_count
                .contains("e.\"out_state\" = 'dead'")
        );
        assert!(
            sql.retention_inbox_age
                .contains("d.\"in_state\" = 'processed'")
        );
        assert!(!sql.forward_insert.contains("\"out_sequence\""), "SCH-40");
    }
}
