//! The schema guard on SQLite (schema.md SCH-60..63): the catalog read through
//! `pragma_table_info` and `pragma_index_list` / `pragma_index_info`, and the SQLite wording of
//! the fixes (§5.4's column definitions, `CREATE UNIQUE INDEX`, the rebuild line for a column
//! SQLite cannot add).

use std::collections::BTreeSet;

use queuebox_core::{SqlIdentifier, Table, TableLayout};
use queuebox_store::{
    ColumnFix, RAW_BODY_COLUMN, SCHEMA_HISTORY_TABLE, SchemaDialect, SchemaFacts, TableFacts,
};
use rusqlite::{Connection, named_params};

use crate::sql::Statements;

pub(crate) struct SqliteDialect;

/// `"name"`: identifiers are validated (letters, digits, `_`), so they never hold a quote.
pub(crate) fn quote(name: &SqlIdentifier) -> String {
    format!("\"{name}\"")
}

/// The definition of §5.4 of each column that `ALTER TABLE ... ADD COLUMN` can add, by mapping
/// key; `None` for the columns SQLite cannot add (SCH-62): an expression default (`id` and the
/// NOT NULL times) or the `INTEGER PRIMARY KEY` `sequence`.
fn definition(table: Table, key: &str, c: &str) -> Option<String> {
    let shared = match key {
        "id" | "scheduledAt" | "createdAt" | "updatedAt" | "sequence" => return None,
        "payload" => Some(format!("TEXT NOT NULL CHECK (json_valid({c}))")),
        "headers" => Some(format!(
            "TEXT NOT NULL DEFAULT '{{}}' CHECK (json_type({c}) = 'object')"
        )),
        "attempt" => Some(format!("INTEGER NOT NULL DEFAULT 0 CHECK ({c} >= 0)")),
        "claimedAt" | "leaseExpiresAt" | "claimToken" | "lastError" => Some("TEXT".to_owned()),
        _ => None,
    };
    shared.or_else(|| match (table, key) {
        (Table::Outbox, "topic") => Some(format!("TEXT NOT NULL CHECK (length({c}) <= 255)")),
        (Table::Outbox, "key" | "aggregateType") => Some(format!("TEXT CHECK (length({c}) <= 255)")),
        (Table::Outbox, "state") => Some(format!(
            "TEXT NOT NULL DEFAULT 'pending' CHECK ({c} IN ('pending', 'processing', 'sent', 'dead'))"
        )),
        (Table::Outbox, "maxAttempts") => {
            Some(format!("INTEGER NOT NULL DEFAULT 5 CHECK ({c} > 0)"))
        }
        (Table::Inbox, "source" | "idempotencyKey") => {
            Some(format!("TEXT NOT NULL CHECK (length({c}) <= 255)"))
        }
        (Table::Inbox, "aggregateId" | "eventType") => {
            Some(format!("TEXT CHECK (length({c}) <= 255)"))
        }
        (Table::Inbox, "state") => Some(format!(
            "TEXT NOT NULL DEFAULT 'pending' CHECK ({c} IN ('pending', 'processing', 'processed', 'dead'))"
        )),
        (Table::Inbox, "consumption") => Some(format!(
            "TEXT NOT NULL DEFAULT 'push' CHECK ({c} IN ('push', 'pull'))"
        )),
        (Table::Inbox, "processedAt") => Some("TEXT".to_owned()),
        (Table::Inbox, "correlationId") => Some(format!("TEXT CHECK (length({c}) <= 128)")),
        _ => None,
    })
}

impl SchemaDialect for SqliteDialect {
    fn quote(&self, name: &SqlIdentifier) -> String {
        quote(name)
    }

    fn add_column(
        &self,
        table: Table,
        key: &str,
        table_name: &SqlIdentifier,
        column: &SqlIdentifier,
    ) -> ColumnFix {
        let c = quote(column);
        match definition(table, key, &c) {
            Some(definition) => ColumnFix::Statement(format!(
                "ALTER TABLE {} ADD COLUMN {c} {definition};",
                quote(table_name)
            )),
            None => ColumnFix::Rebuild,
        }
    }

    fn add_unique(
        &self,
        table_name: &SqlIdentifier,
        source: &SqlIdentifier,
        idempotency_key: &SqlIdentifier,
    ) -> String {
        format!(
            "CREATE UNIQUE INDEX uq_inbox_source_idempotency ON {} ({}, {});",
            quote(table_name),
            quote(source),
            quote(idempotency_key)
        )
    }

    fn notify_statements(&self, _table_name: &SqlIdentifier) -> Option<String> {
        None
    }

    fn add_raw_body(&self, table_name: &SqlIdentifier) -> String {
        // A nullable column without a default: one that SQLite can add to an existing table.
        format!(
            "ALTER TABLE {} ADD COLUMN {RAW_BODY_COLUMN} BLOB NULL;",
            quote(table_name)
        )
    }
}

fn table_facts(
    conn: &Connection,
    sql: &Statements,
    name: &str,
) -> rusqlite::Result<Option<TableFacts>> {
    let exists: i64 = conn
        .prepare_cached(&sql.table_exists)?
        .query_row(named_params! {":name": name}, |r| r.get(0))?;
    if exists == 0 {
        return Ok(None);
    }
    let columns = conn
        .prepare_cached(&sql.columns)?
        .query_map(named_params! {":name": name}, |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<BTreeSet<String>>>()?;
    let indexes = conn
        .prepare_cached(&sql.unique_indexes)?
        .query_map(named_params! {":name": name}, |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    let mut unique_keys = Vec::new();
    for index in indexes {
        let names = conn
            .prepare_cached(&sql.index_columns)?
            .query_map(named_params! {":name": index}, |r| {
                r.get::<_, Option<String>>(0)
            })?
            .collect::<rusqlite::Result<Vec<Option<String>>>>()?;
        // An expression index cannot reject every repeat of the pair (SCH-60 item 3).
        if let Some(cols) = names.into_iter().collect::<Option<BTreeSet<String>>>() {
            unique_keys.push(cols);
        }
    }
    Ok(Some(TableFacts {
        columns,
        unique_keys,
        // SQLite has no notify trigger to look for.
        enabled_triggers: BTreeSet::new(),
    }))
}

/// Everything the guard checks, read from the catalog.
pub(crate) fn read_facts(
    conn: &Connection,
    sql: &Statements,
    layout: &TableLayout,
) -> rusqlite::Result<SchemaFacts> {
    let history: i64 = conn
        .prepare_cached(&sql.table_exists)?
        .query_row(named_params! {":name": SCHEMA_HISTORY_TABLE}, |r| r.get(0))?;
    let recorded_versions = if history > 0 {
        conn.prepare_cached(&sql.history_versions)?
            .query_map([], |r| r.get::<_, i64>(0))?
            .collect::<rusqlite::Result<Vec<i64>>>()?
            .into_iter()
            .filter_map(|v| u32::try_from(v).ok())
            .collect()
    } else {
        Vec::new()
    };
    Ok(SchemaFacts {
        outbox: table_facts(conn, sql, layout.outbox_table.as_str())?,
        inbox: table_facts(conn, sql, layout.inbox_table.as_str())?,
        recorded_versions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sch_62_columns_with_an_expression_default_need_a_rebuild() {
        let layout = TableLayout::default();
        for (key, _, column) in layout.outbox.entries() {
            let fix = SqliteDialect.add_column(Table::Outbox, key, &layout.outbox_table, column);
            let rebuild = matches!(
                key,
                "id" | "scheduledAt" | "createdAt" | "updatedAt" | "sequence"
            );
            assert_eq!(fix == ColumnFix::Rebuild, rebuild, "outbox {key}: {fix:?}");
        }
        for (key, _, column) in layout.inbox.entries() {
            let fix = SqliteDialect.add_column(Table::Inbox, key, &layout.inbox_table, column);
            let rebuild = matches!(key, "id" | "scheduledAt" | "createdAt");
            assert_eq!(fix == ColumnFix::Rebuild, rebuild, "inbox {key}: {fix:?}");
        }
        assert_eq!(
            SqliteDialect.add_column(
                Table::Inbox,
                "headers",
                &layout.inbox_table,
                &layout.inbox.headers
            ),
            ColumnFix::Statement(
                "ALTER TABLE \"inbox\" ADD COLUMN \"headers\" TEXT NOT NULL DEFAULT '{}' CHECK (json_type(\"headers\") = 'object');".into()
            )
        );
    }

    #[test]
    fn sch_63_unique_statement_is_a_unique_index() {
        let layout = TableLayout::default();
        assert_eq!(
            SqliteDialect.add_unique(
                &layout.inbox_table,
                &layout.inbox.source,
                &layout.inbox.idempotency_key
            ),
            "CREATE UNIQUE INDEX uq_inbox_source_idempotency ON \"inbox\" (\"source\", \"idempotency_key\");"
        );
    }
}
