//! The outbox statements of `queries/outbox/`, rendered once per store with the mapped table and
//! column names (`render.rs`): the files name the table `"{outbox}"` and each column by its
//! default name (`"{scheduled_at}"`), and their parameters by name (`:lease_ms`), bound in the
//! order given here.

use queuebox_core::TableLayout;
use queuebox_store::StoreError;

use crate::render::{outbox_names, render};
use crate::sql;

/// The outbox statements of one store, with its names.
#[derive(Debug)]
pub(crate) struct OutboxSql {
    pub(crate) claim: String,
    pub(crate) claim_run: String,
    pub(crate) renew: String,
    pub(crate) finish: String,
    pub(crate) release: String,
    pub(crate) reclaim: String,
    pub(crate) pending_stats: String,
}

impl OutboxSql {
    pub(crate) fn new(layout: &TableLayout) -> Result<Self, StoreError> {
        let names = outbox_names(layout);
        let fill = |file, template, order: &[&str]| render(file, template, &names, order);
        Ok(Self {
            claim: fill(
                "outbox/claim.sql",
                sql::OUTBOX_CLAIM,
                &["limit", "lease_ms"],
            )?,
            claim_run: fill(
                "outbox/claim_run.sql",
                sql::OUTBOX_CLAIM_RUN,
                &["ids", "tokens", "limits", "lease_ms"],
            )?,
            renew: fill(
                "outbox/renew.sql",
                sql::OUTBOX_RENEW,
                &["ids", "tokens", "lease_ms"],
            )?,
            finish: fill(
                "outbox/finish.sql",
                sql::OUTBOX_FINISH,
                &[
                    "ids",
                    "tokens",
                    "outcomes",
                    "attempts",
                    "delays_ms",
                    "errors",
                ],
            )?,
            release: fill(
                "outbox/release.sql",
                sql::OUTBOX_RELEASE,
                &["ids", "tokens"],
            )?,
            reclaim: fill("outbox/reclaim.sql", sql::OUTBOX_RECLAIM, &[])?,
            pending_stats: fill("outbox/pending_stats.sql", sql::OUTBOX_PENDING_STATS, &[])?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::SqlIdentifier;

    fn all(sql: &OutboxSql) -> [(&'static str, &str); 7] {
        [
            ("claim", &sql.claim),
            ("claim_run", &sql.claim_run),
            ("renew", &sql.renew),
            ("finish", &sql.finish),
            ("release", &sql.release),
            ("reclaim", &sql.reclaim),
            ("pending_stats", &sql.pending_stats),
        ]
    }

    #[test]
    fn sch_10_every_placeholder_is_known_and_quoted() {
        let sql = OutboxSql::new(&TableLayout::default()).expect("render");
        for (name, text) in all(&sql) {
            assert!(!text.contains('{') && !text.contains('}'), "{name}: {text}");
            assert!(text.contains("\"outbox\""), "{name}");
        }
        for template in [
            sql::OUTBOX_CLAIM,
            sql::OUTBOX_CLAIM_RUN,
            sql::OUTBOX_RENEW,
            sql::OUTBOX_FINISH,
            sql::OUTBOX_RELEASE,
            sql::OUTBOX_RECLAIM,
            sql::OUTBOX_PENDING_STATS,
        ] {
            assert!(
                template.starts_with("-- Locking: ") && template.contains("Isolation: "),
                "each file starts with its locking comment: {template}"
            );
        }
        // OUT-12: keyless rows (NULL or empty) need no head test.
        assert!(sql.claim.contains("f.key IS NULL OR f.key = ''"));
    }

    #[test]
    fn sch_38_mapped_names_replace_every_default() {
        let id = |s: &str| SqlIdentifier::parse(s).expect("identifier");
        let mut layout = TableLayout {
            outbox_table: id("events_out"),
            ..TableLayout::default()
        };
        assert!(layout.outbox.set("sequence", id("seq_no")));
        assert!(layout.outbox.set("state", id("status")));
        let sql = OutboxSql::new(&layout).expect("render");
        for (name, text) in all(&sql) {
            assert!(text.contains("\"events_out\""), "{name}");
            assert!(!text.contains("\"outbox\""), "{name}");
            assert!(!text.contains("\"state\""), "{name}");
            assert!(!text.contains("\"sequence\""), "{name}");
        }
        assert!(sql.claim.contains("min(p.\"seq_no\")"));
        assert!(sql.claim.contains("ORDER BY p.\"key\", p.\"seq_no\""));
    }

    #[test]
    fn sch_9_states_are_literals_never_parameters() {
        let sql = OutboxSql::new(&TableLayout::default()).expect("render");
        for (name, text) in all(&sql) {
            assert!(!text.contains("\"state\" = $"), "{name}");
        }
        assert!(
            sql.finish
                .contains("WHEN 0 THEN 'sent' WHEN 1 THEN 'pending' WHEN 2 THEN 'dead'")
        );
    }
}
