//! The rules of the start-up schema guard (schema.md SCH-60..63), independent of the database:
//! what the catalog must show, and how each problem is worded. A store reads its catalog into
//! [`SchemaFacts`] and supplies the fix statements through [`SchemaDialect`].

use std::collections::BTreeSet;
use std::fmt;

use queuebox_core::{SqlIdentifier, Table, TableLayout};

use crate::versions::{INBOX_VERSION, NOTIFY_OBJECT_NAME, OUTBOX_VERSION, RAW_BODY_VERSION};

/// The inbox column of `storeRawBody` (migration version 4). Never mapped: config.md's
/// `columnMapping` has no key for it, so every statement names it literally.
pub const RAW_BODY_COLUMN: &str = "raw_body";

/// What the configuration needs of the schema beyond the mapped columns, which every
/// configuration needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaNeeds {
    /// `outbox.capture.mode: notify`: the notify trigger (SCH-24).
    pub notify: bool,
    /// The sources with `storeRawBody: true` (issue 15 item 4): they need the inbox's
    /// `raw_body` column, or their first message would fail its insert.
    pub raw_body_sources: Vec<String>,
}

impl SchemaNeeds {
    /// The mapped columns, and the notify trigger when `notify`; no `raw_body`.
    pub fn notify(notify: bool) -> Self {
        Self {
            notify,
            raw_body_sources: Vec::new(),
        }
    }
}

/// What the catalog says about one table that exists.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableFacts {
    /// Column names as stored in the catalog.
    pub columns: BTreeSet<String>,
    /// The column sets of every unique constraint and full (non-partial, non-expression)
    /// unique index.
    pub unique_keys: Vec<BTreeSet<String>>,
    /// Names of the enabled triggers on the table.
    pub enabled_triggers: BTreeSet<String>,
}

/// Everything the guard reads (SCH-60), for the mapped table names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaFacts {
    /// `None` when the (mapped) outbox table does not exist.
    pub outbox: Option<TableFacts>,
    pub inbox: Option<TableFacts>,
    /// Versions recorded in `queuebox_schema_history` (empty when it does not exist).
    pub recorded_versions: Vec<u32>,
}

/// How a missing column can be added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ColumnFix {
    /// The statement(s) that add it (SCH-62).
    Statement(String),
    /// SQLite cannot add it to an existing table.
    Rebuild,
}

/// The database-specific text of the guard's messages.
pub trait SchemaDialect: Send + Sync {
    /// A name quoted as the store quotes it in its SQL (SCH-10).
    fn quote(&self, name: &SqlIdentifier) -> String;

    /// How to add the column of this mapping key (config.md CFG-44/45) to the table (SCH-62).
    fn add_column(
        &self,
        table: Table,
        key: &str,
        table_name: &SqlIdentifier,
        column: &SqlIdentifier,
    ) -> ColumnFix;

    /// The statement that adds the inbox's unique constraint (SCH-63).
    fn add_unique(
        &self,
        table_name: &SqlIdentifier,
        source: &SqlIdentifier,
        idempotency_key: &SqlIdentifier,
    ) -> String;

    /// The notify function and trigger for this outbox table (SCH-24), on one line. `None` when
    /// the database has no notify mode.
    fn notify_statements(&self, table_name: &SqlIdentifier) -> Option<String>;

    /// The statement that adds the nullable [`RAW_BODY_COLUMN`] to the inbox table, as
    /// migration version 4 does.
    fn add_raw_body(&self, table_name: &SqlIdentifier) -> String;
}

/// One problem the guard found. Names are already quoted; `Display` is the line of SCH-61.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaProblem {
    /// `recorded`: the migration history records the version that creates the table.
    MissingTable {
        table: String,
        recorded: bool,
    },
    MissingColumn {
        table: String,
        column: String,
        fix: ColumnFix,
    },
    MissingUnique {
        table: String,
        source: String,
        idempotency_key: String,
        statement: String,
    },
    MissingNotifyTrigger {
        table: String,
        statement: String,
    },
    /// `sources`: the configured sources with `storeRawBody: true`, comma-separated.
    MissingRawBody {
        table: String,
        sources: String,
        statement: String,
    },
}

impl fmt::Display for SchemaProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingTable {
                table,
                recorded: false,
            } => write!(
                f,
                "- table {table} does not exist. Run \"queuebox migrate\", or create it as the schema page shows."
            ),
            Self::MissingTable {
                table,
                recorded: true,
            } => write!(
                f,
                "- table {table} does not exist, although the migration history records it. Create it as the schema page shows."
            ),
            Self::MissingColumn {
                table,
                column,
                fix: ColumnFix::Statement(statement),
            } => write!(
                f,
                "- table {table} has no column {column}. Add it: {statement}"
            ),
            Self::MissingColumn {
                table,
                column,
                fix: ColumnFix::Rebuild,
            } => write!(
                f,
                "- table {table} has no column {column}. SQLite cannot add it to an existing table: rebuild the table from the CREATE TABLE statement of the schema page."
            ),
            Self::MissingUnique {
                table,
                source,
                idempotency_key,
                statement,
            } => write!(
                f,
                "- table {table} has no unique constraint on ({source}, {idempotency_key}), so it cannot reject repeats. Add it: {statement}"
            ),
            Self::MissingNotifyTrigger { table, statement } => write!(
                f,
                "- table {table} has no trigger {NOTIFY_OBJECT_NAME}, which outbox.capture.mode notify needs. Add it: {statement}"
            ),
            Self::MissingRawBody {
                table,
                sources,
                statement,
            } => write!(
                f,
                "- table {table} has no column {RAW_BODY_COLUMN}, which storeRawBody: true of source(s) {sources} needs. Run \"queuebox migrate\" (version {RAW_BODY_VERSION} adds it), or add it: {statement}"
            ),
        }
    }
}

/// Applies the checks of SCH-60 to the facts and returns every problem, outbox first.
pub fn evaluate_schema(
    layout: &TableLayout,
    facts: &SchemaFacts,
    dialect: &dyn SchemaDialect,
    needs: &SchemaNeeds,
) -> Vec<SchemaProblem> {
    let notify = needs.notify;
    let mut problems = Vec::new();
    let outbox_name = &layout.outbox_table;
    let inbox_name = &layout.inbox_table;

    match &facts.outbox {
        None => problems.push(SchemaProblem::MissingTable {
            table: dialect.quote(outbox_name),
            recorded: facts.recorded_versions.contains(&OUTBOX_VERSION),
        }),
        Some(table) => {
            for (key, _, column) in layout.outbox.entries() {
                check_column(
                    &mut problems,
                    dialect,
                    Table::Outbox,
                    key,
                    outbox_name,
                    column,
                    table,
                );
            }
            if notify
                && !table.enabled_triggers.contains(NOTIFY_OBJECT_NAME)
                && let Some(statement) = dialect.notify_statements(outbox_name)
            {
                problems.push(SchemaProblem::MissingNotifyTrigger {
                    table: dialect.quote(outbox_name),
                    statement,
                });
            }
        }
    }

    match &facts.inbox {
        None => problems.push(SchemaProblem::MissingTable {
            table: dialect.quote(inbox_name),
            recorded: facts.recorded_versions.contains(&INBOX_VERSION),
        }),
        Some(table) => {
            for (key, _, column) in layout.inbox.entries() {
                check_column(
                    &mut problems,
                    dialect,
                    Table::Inbox,
                    key,
                    inbox_name,
                    column,
                    table,
                );
            }
            let source = &layout.inbox.source;
            let idempotency_key = &layout.inbox.idempotency_key;
            let wanted: BTreeSet<String> = [
                source.as_str().to_owned(),
                idempotency_key.as_str().to_owned(),
            ]
            .into();
            // Exactly these two columns: a wider unique key would let repeats through.
            if !table.unique_keys.contains(&wanted) {
                problems.push(SchemaProblem::MissingUnique {
                    table: dialect.quote(inbox_name),
                    source: dialect.quote(source),
                    idempotency_key: dialect.quote(idempotency_key),
                    statement: dialect.add_unique(inbox_name, source, idempotency_key),
                });
            }
            // Only a configuration that stores raw bodies needs the column: a database kept at
            // version 3 by hand serves every other one.
            if !needs.raw_body_sources.is_empty() && !table.columns.contains(RAW_BODY_COLUMN) {
                problems.push(SchemaProblem::MissingRawBody {
                    table: dialect.quote(inbox_name),
                    sources: needs.raw_body_sources.join(", "),
                    statement: dialect.add_raw_body(inbox_name),
                });
            }
        }
    }
    problems
}

fn check_column(
    problems: &mut Vec<SchemaProblem>,
    dialect: &dyn SchemaDialect,
    kind: Table,
    key: &str,
    table_name: &SqlIdentifier,
    column: &SqlIdentifier,
    table: &TableFacts,
) {
    if !table.columns.contains(column.as_str()) {
        problems.push(SchemaProblem::MissingColumn {
            table: dialect.quote(table_name),
            column: dialect.quote(column),
            fix: dialect.add_column(kind, key, table_name, column),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct TestDialect;

    impl SchemaDialect for TestDialect {
        fn quote(&self, name: &SqlIdentifier) -> String {
            format!("\"{name}\"")
        }
        fn add_column(
            &self,
            _: Table,
            key: &str,
            table: &SqlIdentifier,
            column: &SqlIdentifier,
        ) -> ColumnFix {
            if key == "sequence" {
                ColumnFix::Rebuild
            } else {
                ColumnFix::Statement(format!("ADD {table}.{column};"))
            }
        }
        fn add_unique(&self, t: &SqlIdentifier, s: &SqlIdentifier, k: &SqlIdentifier) -> String {
            format!("UNIQUE {t}({s},{k});")
        }
        fn notify_statements(&self, t: &SqlIdentifier) -> Option<String> {
            Some(format!("TRIGGER ON {t};"))
        }
        fn add_raw_body(&self, t: &SqlIdentifier) -> String {
            format!("ADD {t}.raw_body;")
        }
    }

    fn full_facts(layout: &TableLayout) -> SchemaFacts {
        let outbox = TableFacts {
            columns: layout
                .outbox
                .entries()
                .iter()
                .map(|(_, _, c)| c.to_string())
                .collect(),
            ..TableFacts::default()
        };
        let inbox = TableFacts {
            columns: layout
                .inbox
                .entries()
                .iter()
                .map(|(_, _, c)| c.to_string())
                .collect(),
            unique_keys: vec![
                ["id".to_owned()].into(),
                [
                    layout.inbox.idempotency_key.to_string(),
                    layout.inbox.source.to_string(),
                ]
                .into(),
            ],
            ..TableFacts::default()
        };
        SchemaFacts {
            outbox: Some(outbox),
            inbox: Some(inbox),
            recorded_versions: vec![1, 2],
        }
    }

    #[test]
    fn sch_60_complete_schema_has_no_problem() {
        let layout = TableLayout::default();
        assert_eq!(
            evaluate_schema(
                &layout,
                &full_facts(&layout),
                &TestDialect,
                &SchemaNeeds::notify(false)
            ),
            vec![]
        );
    }

    #[test]
    fn sch_60_missing_tables_say_whether_history_records_them() {
        let layout = TableLayout::default();
        let facts = SchemaFacts {
            outbox: None,
            inbox: None,
            recorded_versions: vec![1],
        };
        let lines: Vec<String> =
            evaluate_schema(&layout, &facts, &TestDialect, &SchemaNeeds::notify(true))
                .iter()
                .map(ToString::to_string)
                .collect();
        assert_eq!(
            lines,
            vec![
                "- table \"outbox\" does not exist, although the migration history records it. Create it as the schema page shows.",
                "- table \"inbox\" does not exist. Run \"queuebox migrate\", or create it as the schema page shows.",
            ]
        );
    }

    #[test]
    fn sch_60_unique_key_must_be_exactly_the_two_columns() {
        let layout = TableLayout::default();
        let mut facts = full_facts(&layout);
        if let Some(inbox) = facts.inbox.as_mut() {
            inbox.unique_keys = vec![
                [
                    "source".to_owned(),
                    "idempotency_key".to_owned(),
                    "id".to_owned(),
                ]
                .into(),
            ];
        }
        let problems = evaluate_schema(&layout, &facts, &TestDialect, &SchemaNeeds::notify(false));
        assert_eq!(problems.len(), 1);
        assert_eq!(
            problems[0].to_string(),
            "- table \"inbox\" has no unique constraint on (\"source\", \"idempotency_key\"), so it cannot reject repeats. Add it: UNIQUE inbox(source,idempotency_key);"
        );
    }

    #[test]
    fn sch_38_guard_uses_mapped_names_and_reports_each_problem() {
        let mut layout = TableLayout::default();
        let id = |s: &str| SqlIdentifier::parse(s).expect("valid identifier");
        layout.outbox_table = id("events_out");
        assert!(layout.outbox.set("sequence", id("seq_no")));
        assert!(layout.inbox.set("source", id("src")));
        let mut facts = full_facts(&layout);
        if let Some(outbox) = facts.outbox.as_mut() {
            outbox.columns.remove("seq_no");
            outbox.columns.remove("topic");
        }
        let lines: Vec<String> =
            evaluate_schema(&layout, &facts, &TestDialect, &SchemaNeeds::notify(true))
                .iter()
                .map(ToString::to_string)
                .collect();
        assert_eq!(
            lines,
            vec![
                "- table \"events_out\" has no column \"topic\". Add it: ADD events_out.topic;",
                "- table \"events_out\" has no column \"seq_no\". SQLite cannot add it to an existing table: rebuild the table from the CREATE TABLE statement of the schema page.",
                "- table \"events_out\" has no trigger queuebox_outbox_notify, which outbox.capture.mode notify needs. Add it: TRIGGER ON events_out;",
            ]
        );
    }

    #[test]
    fn sch_60_raw_body_is_needed_only_by_a_source_that_stores_it() {
        let layout = TableLayout::default();
        let facts = full_facts(&layout);
        let needs = SchemaNeeds {
            notify: false,
            raw_body_sources: vec!["github".to_owned(), "stripe".to_owned()],
        };
        let lines: Vec<String> = evaluate_schema(&layout, &facts, &TestDialect, &needs)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            vec![
                "- table \"inbox\" has no column raw_body, which storeRawBody: true of source(s) github, stripe needs. Run \"queuebox migrate\" (version 4 adds it), or add it: ADD inbox.raw_body;",
            ]
        );
        let mut with_column = facts.clone();
        if let Some(inbox) = with_column.inbox.as_mut() {
            inbox.columns.insert(RAW_BODY_COLUMN.to_owned());
        }
        assert!(evaluate_schema(&layout, &with_column, &TestDialect, &needs).is_empty());
        assert!(evaluate_schema(&layout, &facts, &TestDialect, &SchemaNeeds::default()).is_empty());
    }

    #[test]
    fn sch_60_enabled_notify_trigger_passes() {
        let layout = TableLayout::default();
        let mut facts = full_facts(&layout);
        if let Some(outbox) = facts.outbox.as_mut() {
            outbox
                .enabled_triggers
                .insert(NOTIFY_OBJECT_NAME.to_owned());
        }
        assert!(
            evaluate_schema(&layout, &facts, &TestDialect, &SchemaNeeds::notify(true)).is_empty()
        );
    }
}
