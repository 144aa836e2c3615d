//! The inbox, relay and retention statements of `queries/inbox/` and `queries/retention/`,
//! rendered once per store with the mapped names (schema.md §8, SCH-10), as `outbox_sql.rs`
//! does for the outbox. The templates name the tables `{inbox}` and `{outbox}`, each inbox
//! column by its default name in braces (`{scheduled_at}`), and each outbox column by its
//! default name after `outbox.` (`{outbox.scheduled_at}`): the forward and the outbox
//! retention statements work on the outbox, and the two tables share column names.

use queuebox_core::TableLayout;

use crate::dialect::quote;
use crate::outbox_sql::render;
use crate::sql;

/// The inbox-side statements of one store, with its names.
#[derive(Debug)]
pub(crate) struct InboxSql {
    pub(crate) insert: String,
    pub(crate) claim_lock: String,
    pub(crate) claim: String,
    pub(crate) renew: String,
    pub(crate) forward_insert: String,
    pub(crate) forward_mark: String,
    pub(crate) dead: String,
    pub(crate) release: String,
    pub(crate) reclaim: String,
    pub(crate) oldest_pending_age: String,
    pub(crate) retention_outbox_age: String,
    pub(crate) retention_outbox_count: String,
    pub(crate) retention_inbox_age: String,
}

impl InboxSql {
    pub(crate) fn new(layout: &TableLayout) -> Self {
        let names = names(layout);
        let fill = |template: &str| render(template, &names);
        Self {
            insert: fill(sql::INBOX_INSERT),
            claim_lock: fill(sql::INBOX_CLAIM_LOCK),
            claim: fill(sql::INBOX_CLAIM),
            renew: fill(sql::INBOX_RENEW),
            forward_insert: fill(sql::INBOX_FORWARD_INSERT),
            forward_mark: fill(sql::INBOX_FORWARD_MARK),
            dead: fill(sql::INBOX_DEAD),
            release: fill(sql::INBOX_RELEASE),
            reclaim: fill(sql::INBOX_RECLAIM),
            oldest_pending_age: fill(sql::INBOX_OLDEST_PENDING_AGE),
            retention_outbox_age: fill(sql::RETENTION_OUTBOX_AGE),
            retention_outbox_count: fill(sql::RETENTION_OUTBOX_COUNT),
            retention_inbox_age: fill(sql::RETENTION_INBOX_AGE),
        }
    }
}

/// (placeholder, quoted mapped name): both tables, the inbox columns by default name, the
/// outbox columns as `outbox.<default>`.
fn names(layout: &TableLayout) -> Vec<(String, String)> {
    let mut names = vec![
        ("inbox".to_owned(), quote(&layout.inbox_table)),
        ("outbox".to_owned(), quote(&layout.outbox_table)),
    ];
    names.extend(
        layout
            .inbox
            .entries()
            .into_iter()
            .map(|(_, default, column)| (default.to_owned(), quote(column))),
    );
    names.extend(
        layout
            .outbox
            .entries()
            .into_iter()
            .map(|(_, default, column)| (format!("outbox.{default}"), quote(column))),
    );
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::SqlIdentifier;

    fn all(sql: &InboxSql) -> [(&'static str, &str); 13] {
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
            ("retention_outbox_age", &sql.retention_outbox_age),
            ("retention_outbox_count", &sql.retention_outbox_count),
            ("retention_inbox_age", &sql.retention_inbox_age),
        ]
    }

    #[test]
    fn sch_10_every_placeholder_is_known_and_quoted() {
        let sql = InboxSql::new(&TableLayout::default());
        for (name, text) in all(&sql) {
            assert!(!text.contains('{') && !text.contains('}'), "{name}: {text}");
            assert!(
                text.starts_with("-- "),
                "{name} starts with its locking comment"
            );
        }
        assert!(
            sql.insert
                .contains("ON CONFLICT (\"source\", \"idempotency_key\") DO NOTHING")
        );
        assert!(sql.forward_insert.starts_with("-- ") && sql.forward_insert.contains("\"outbox\""));
    }

    #[test]
    fn sch_9_states_and_consumption_are_literals() {
        let sql = InboxSql::new(&TableLayout::default());
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
        let sql = InboxSql::new(&TableLayout::default());
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
        let sql = InboxSql::new(&layout);
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
                .contains("d.\"in_state\" IN ('processed', 'dead')")
        );
        assert!(!sql.forward_insert.contains("\"out_sequence\""), "SCH-40");
    }
}
