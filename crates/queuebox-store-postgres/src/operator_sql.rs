//! The operator statements of `queries/operator/`, rendered once per store with the mapped
//! names (`render.rs`), and the parameter order each is bound in: the filter parameters first,
//! in the order of [`OUTBOX_FILTER`] / [`INBOX_FILTER`], then the statement's own.

use queuebox_core::TableLayout;
use queuebox_store::StoreError;

use crate::render::{inbox_names, outbox_names, render};
use crate::sql;

/// The outbox filter parameters (ADM-13), in binding order.
pub(crate) const OUTBOX_FILTER: [&str; 6] = [
    "ids",
    "topics",
    "key",
    "created_after",
    "created_before",
    "error_contains",
];

/// The inbox filter parameters (ADM-21), in binding order.
pub(crate) const INBOX_FILTER: [&str; 9] = [
    "ids",
    "sources",
    "consumption",
    "event_type",
    "aggregate_id",
    "idempotency_key",
    "created_after",
    "created_before",
    "error_contains",
];

/// `lead`, then the filter, then `tail`.
fn order<'a>(lead: &[&'a str], filter: &[&'a str], tail: &[&'a str]) -> Vec<&'a str> {
    lead.iter().chain(filter).chain(tail).copied().collect()
}

/// The operator statements of one store, with its names.
#[derive(Debug)]
pub(crate) struct OperatorSql {
    pub(crate) outbox_list: String,
    pub(crate) outbox_show: String,
    pub(crate) outbox_replay: String,
    pub(crate) outbox_delete_one: String,
    pub(crate) outbox_delete: String,
    pub(crate) outbox_counts: String,
    pub(crate) outbox_topics: String,
    pub(crate) inbox_list: String,
    pub(crate) inbox_show: String,
    pub(crate) inbox_requeue: String,
    pub(crate) inbox_delete_one: String,
    pub(crate) inbox_delete: String,
    pub(crate) inbox_counts: String,
}

impl OperatorSql {
    pub(crate) fn new(layout: &TableLayout) -> Result<Self, StoreError> {
        let outbox = outbox_names(layout);
        let inbox = inbox_names(layout);
        let page = ["after_created_at", "after_id", "limit"];
        let o = |file, template, order: &[&str]| render(file, template, &outbox, order);
        let i = |file, template, order: &[&str]| render(file, template, &inbox, order);
        Ok(Self {
            outbox_list: o(
                "operator/outbox_list.sql",
                sql::OPERATOR_OUTBOX_LIST,
                &order(&["state"], &OUTBOX_FILTER, &page),
            )?,
            outbox_show: o(
                "operator/outbox_show.sql",
                sql::OPERATOR_OUTBOX_SHOW,
                &["id"],
            )?,
            outbox_replay: o(
                "operator/outbox_replay.sql",
                sql::OPERATOR_OUTBOX_REPLAY,
                &order(&[], &OUTBOX_FILTER, &["chunk"]),
            )?,
            outbox_delete_one: o(
                "operator/outbox_delete_one.sql",
                sql::OPERATOR_OUTBOX_DELETE_ONE,
                &["id"],
            )?,
            outbox_delete: o(
                "operator/outbox_delete.sql",
                sql::OPERATOR_OUTBOX_DELETE,
                &order(&["state"], &OUTBOX_FILTER, &["chunk"]),
            )?,
            outbox_counts: o(
                "operator/outbox_counts.sql",
                sql::OPERATOR_OUTBOX_COUNTS,
                &[],
            )?,
            outbox_topics: o(
                "operator/outbox_topics.sql",
                sql::OPERATOR_OUTBOX_TOPICS,
                &[],
            )?,
            inbox_list: i(
                "operator/inbox_list.sql",
                sql::OPERATOR_INBOX_LIST,
                &order(&["state"], &INBOX_FILTER, &page),
            )?,
            inbox_show: i("operator/inbox_show.sql", sql::OPERATOR_INBOX_SHOW, &["id"])?,
            inbox_requeue: i(
                "operator/inbox_requeue.sql",
                sql::OPERATOR_INBOX_REQUEUE,
                &order(&[], &INBOX_FILTER, &["chunk"]),
            )?,
            inbox_delete_one: i(
                "operator/inbox_delete_one.sql",
                sql::OPERATOR_INBOX_DELETE_ONE,
                &["id"],
            )?,
            inbox_delete: i(
                "operator/inbox_delete.sql",
                sql::OPERATOR_INBOX_DELETE,
                &order(&["state"], &INBOX_FILTER, &["chunk"]),
            )?,
            inbox_counts: i("operator/inbox_counts.sql", sql::OPERATOR_INBOX_COUNTS, &[])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::SqlIdentifier;

    fn all(sql: &OperatorSql) -> [(&'static str, &str); 13] {
        [
            ("outbox_list", &sql.outbox_list),
            ("outbox_show", &sql.outbox_show),
            ("outbox_replay", &sql.outbox_replay),
            ("outbox_delete_one", &sql.outbox_delete_one),
            ("outbox_delete", &sql.outbox_delete),
            ("outbox_counts", &sql.outbox_counts),
            ("outbox_topics", &sql.outbox_topics),
            ("inbox_list", &sql.inbox_list),
            ("inbox_show", &sql.inbox_show),
            ("inbox_requeue", &sql.inbox_requeue),
            ("inbox_delete_one", &sql.inbox_delete_one),
            ("inbox_delete", &sql.inbox_delete),
            ("inbox_counts", &sql.inbox_counts),
        ]
    }

    #[test]
    fn sch_9_states_are_literals_and_claim_tokens_are_never_read() {
        let sql = OperatorSql::new(&TableLayout::default()).expect("render");
        for (name, text) in all(&sql) {
            assert!(!text.contains("\"state\" = $"), "{name}");
            assert!(!text.contains("\"consumption\" = $"), "{name}");
            assert!(!text.contains('{') && !text.contains('}'), "{name}: {text}");
        }
        for text in [
            &sql.outbox_show,
            &sql.outbox_list,
            &sql.inbox_show,
            &sql.inbox_list,
        ] {
            assert!(!text.contains("claim_token"), "ADM-12: {text}");
        }
        assert!(
            sql.outbox_replay
                .contains("t.\"state\" IN ('sent', 'dead')")
        );
        assert!(sql.inbox_requeue.contains("t.\"state\" = 'dead'"));
    }

    #[test]
    fn every_operator_file_starts_with_its_locking_comment() {
        for template in [
            sql::OPERATOR_OUTBOX_LIST,
            sql::OPERATOR_OUTBOX_SHOW,
            sql::OPERATOR_OUTBOX_REPLAY,
            sql::OPERATOR_OUTBOX_DELETE_ONE,
            sql::OPERATOR_OUTBOX_DELETE,
            sql::OPERATOR_OUTBOX_COUNTS,
            sql::OPERATOR_OUTBOX_TOPICS,
            sql::OPERATOR_INBOX_LIST,
            sql::OPERATOR_INBOX_SHOW,
            sql::OPERATOR_INBOX_REQUEUE,
            sql::OPERATOR_INBOX_DELETE_ONE,
            sql::OPERATOR_INBOX_DELETE,
            sql::OPERATOR_INBOX_COUNTS,
        ] {
            let first = template.lines().next().unwrap_or_default();
            assert!(
                first.starts_with("-- Locking: ") && first.contains("Isolation: "),
                "{first}"
            );
        }
    }

    #[test]
    fn sch_38_mapped_names_replace_every_default() {
        let id = |s: &str| SqlIdentifier::parse(s).expect("identifier");
        let mut layout = TableLayout {
            inbox_table: id("events_in"),
            outbox_table: id("events_out"),
            ..TableLayout::default()
        };
        assert!(layout.outbox.set("state", id("status")));
        assert!(layout.inbox.set("createdAt", id("received")));
        let sql = OperatorSql::new(&layout).expect("render");
        for (name, text) in all(&sql) {
            assert!(
                !text.contains("\"outbox\"") && !text.contains("\"inbox\""),
                "{name}"
            );
        }
        assert!(sql.outbox_replay.contains("UPDATE \"events_out\" t"));
        assert!(sql.outbox_delete.contains("d.\"status\" = CASE $1::int4"));
        assert!(sql.inbox_list.contains("ORDER BY i.\"received\" DESC"));
    }
}
