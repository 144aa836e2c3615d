//! The outbox statements of `queries/outbox/`, rendered once per store with the mapped table and
//! column names (schema.md §8, SCH-10). The templates name the table `{outbox}` and each column
//! by its default name in braces (`{scheduled_at}`); rendering puts the quoted, validated
//! identifier of the layout in its place, so no configuration text ever reaches the SQL
//! unquoted, and no state is ever a parameter (SCH-9: the states are literals in the files).

use queuebox_core::TableLayout;

use crate::dialect::quote;
use crate::sql;

/// The outbox statements of one store, with its names.
#[derive(Debug)]
pub(crate) struct OutboxSql {
    pub(crate) claim: String,
    pub(crate) renew: String,
    pub(crate) finish: String,
    pub(crate) release: String,
    pub(crate) reclaim: String,
    pub(crate) pending_stats: String,
}

impl OutboxSql {
    pub(crate) fn new(layout: &TableLayout) -> Self {
        let names = names(layout);
        let fill = |template: &str| render(template, &names);
        Self {
            claim: fill(sql::OUTBOX_CLAIM),
            renew: fill(sql::OUTBOX_RENEW),
            finish: fill(sql::OUTBOX_FINISH),
            release: fill(sql::OUTBOX_RELEASE),
            reclaim: fill(sql::OUTBOX_RECLAIM),
            pending_stats: fill(sql::OUTBOX_PENDING_STATS),
        }
    }
}

/// (placeholder, quoted mapped name): the table, then every column by its default name.
fn names(layout: &TableLayout) -> Vec<(&'static str, String)> {
    let mut names = vec![("outbox", quote(&layout.outbox_table))];
    names.extend(
        layout
            .outbox
            .entries()
            .into_iter()
            .map(|(_, default, column)| (default, quote(column))),
    );
    names
}

/// Replaces each `{placeholder}` of a template. A brace pair that names no placeholder stays
/// as written; the unit tests make sure no template has one.
pub(crate) fn render<P: AsRef<str>>(template: &str, names: &[(P, String)]) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let replaced = after.find('}').and_then(|close| {
            let name = &after[..close];
            names
                .iter()
                .find(|(placeholder, _)| placeholder.as_ref() == name)
                .map(|(_, quoted)| (quoted, close))
        });
        match replaced {
            Some((quoted, close)) => {
                out.push_str(quoted);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::SqlIdentifier;

    fn all(sql: &OutboxSql) -> [(&'static str, &str); 6] {
        [
            ("claim", &sql.claim),
            ("renew", &sql.renew),
            ("finish", &sql.finish),
            ("release", &sql.release),
            ("reclaim", &sql.reclaim),
            ("pending_stats", &sql.pending_stats),
        ]
    }

    #[test]
    fn sch_10_every_placeholder_is_known_and_quoted() {
        let sql = OutboxSql::new(&TableLayout::default());
        for (name, text) in all(&sql) {
            assert!(!text.contains('{') && !text.contains('}'), "{name}: {text}");
            assert!(text.contains("\"outbox\""), "{name}");
            assert!(
                text.starts_with("-- "),
                "{name} starts with its locking comment"
            );
        }
        assert!(sql.claim.contains("o.\"key\" IS NULL OR o.\"key\" = ''"));
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
        let sql = OutboxSql::new(&layout);
        for (name, text) in all(&sql) {
            assert!(text.contains("\"events_out\""), "{name}");
            assert!(!text.contains("\"outbox\""), "{name}");
            assert!(!text.contains("\"state\""), "{name}");
            assert!(!text.contains("\"sequence\""), "{name}");
        }
        assert!(sql.claim.contains("p.\"seq_no\" < o.\"seq_no\""));
    }

    #[test]
    fn sch_9_states_are_literals_never_parameters() {
        let sql = OutboxSql::new(&TableLayout::default());
        for (name, text) in all(&sql) {
            assert!(!text.contains("\"state\" = $"), "{name}");
        }
        assert!(
            sql.finish
                .contains("WHEN 0 THEN 'sent' WHEN 1 THEN 'pending' WHEN 2 THEN 'dead'")
        );
    }

    #[test]
    fn render_keeps_unknown_braces() {
        let names = vec![("a", "\"x\"".to_owned())];
        assert_eq!(render("{a}{b}{", &names), "\"x\"{b}{");
    }
}
