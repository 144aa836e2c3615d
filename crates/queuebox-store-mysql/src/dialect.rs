//! The MySQL wording of the guard's fixes (schema.md SCH-61..63): backtick quoting, the column
//! definitions of §5.3, the `sequence` statement and the unique constraint. MySQL has no
//! notify mode.

use queuebox_core::{SqlIdentifier, Table};
use queuebox_store::{ColumnFix, RAW_BODY_COLUMN, SchemaDialect};

pub(crate) struct MysqlDialect;

/// `` `name` ``: identifiers are validated (letters, digits, `_`), so they never hold a quote.
pub(crate) fn quote(name: &SqlIdentifier) -> String {
    format!("`{name}`")
}

/// Type, NULL or NOT NULL, and default of each column by mapping key (§5.3).
fn definition(table: Table, key: &str) -> Option<&'static str> {
    let shared = match key {
        "id" => Some("CHAR(36) NOT NULL DEFAULT (UUID())"),
        "payload" => Some("JSON NOT NULL"),
        "headers" => Some("JSON NOT NULL DEFAULT ('{}')"),
        "state" => Some("VARCHAR(50) NOT NULL DEFAULT 'pending'"),
        "attempt" => Some("INT NOT NULL DEFAULT 0"),
        "scheduledAt" | "createdAt" => Some("DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))"),
        "claimedAt" | "leaseExpiresAt" => Some("DATETIME(6) NULL"),
        "claimToken" => Some("CHAR(36) NULL"),
        "lastError" => Some("TEXT NULL"),
        _ => None,
    };
    shared.or(match (table, key) {
        (Table::Outbox, "topic") => Some("VARCHAR(255) NOT NULL"),
        (Table::Outbox, "key" | "aggregateType") => Some("VARCHAR(255) NULL"),
        (Table::Outbox, "maxAttempts") => Some("INT NOT NULL DEFAULT 5"),
        (Table::Outbox, "updatedAt") => Some("DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))"),
        (Table::Inbox, "source" | "idempotencyKey") => Some("VARCHAR(255) NOT NULL"),
        (Table::Inbox, "aggregateId" | "eventType") => Some("VARCHAR(255) NULL"),
        (Table::Inbox, "consumption") => Some("VARCHAR(4) NOT NULL DEFAULT 'push'"),
        (Table::Inbox, "processedAt") => Some("DATETIME(6) NULL"),
        (Table::Inbox, "correlationId") => Some("VARCHAR(128) NULL"),
        _ => None,
    })
}

impl SchemaDialect for MysqlDialect {
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
        let (t, c) = (quote(table_name), quote(column));
        if table == Table::Outbox && key == "sequence" {
            return ColumnFix::Statement(format!(
                "ALTER TABLE {t} ADD COLUMN {c} BIGINT NOT NULL AUTO_INCREMENT UNIQUE;"
            ));
        }
        // Every key of the layout has a definition (tested below); the plain type keeps the
        // message useful even for a key this table misses.
        let definition = definition(table, key).unwrap_or("TEXT NULL");
        ColumnFix::Statement(format!("ALTER TABLE {t} ADD COLUMN {c} {definition};"))
    }

    fn add_unique(
        &self,
        table_name: &SqlIdentifier,
        source: &SqlIdentifier,
        idempotency_key: &SqlIdentifier,
    ) -> String {
        format!(
            "ALTER TABLE {} ADD CONSTRAINT uq_inbox_source_idempotency UNIQUE ({}, {});",
            quote(table_name),
            quote(source),
            quote(idempotency_key)
        )
    }

    fn notify_statements(&self, _table_name: &SqlIdentifier) -> Option<String> {
        None
    }

    fn add_raw_body(&self, table_name: &SqlIdentifier) -> String {
        format!(
            "ALTER TABLE {} ADD COLUMN {RAW_BODY_COLUMN} LONGBLOB NULL;",
            quote(table_name)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::TableLayout;

    #[test]
    fn sch_62_every_column_key_has_a_definition() {
        let layout = TableLayout::default();
        for (key, _, _) in layout.outbox.entries() {
            assert!(
                key == "sequence" || definition(Table::Outbox, key).is_some(),
                "outbox {key}"
            );
        }
        for (key, _, _) in layout.inbox.entries() {
            assert!(definition(Table::Inbox, key).is_some(), "inbox {key}");
        }
    }

    #[test]
    fn sch_62_sequence_and_sch_63_unique_statements_match_the_spec() {
        let layout = TableLayout::default();
        assert_eq!(
            MysqlDialect.add_column(
                Table::Outbox,
                "sequence",
                &layout.outbox_table,
                &layout.outbox.sequence
            ),
            ColumnFix::Statement(
                "ALTER TABLE `outbox` ADD COLUMN `sequence` BIGINT NOT NULL AUTO_INCREMENT UNIQUE;"
                    .into()
            )
        );
        assert_eq!(
            MysqlDialect.add_unique(
                &layout.inbox_table,
                &layout.inbox.source,
                &layout.inbox.idempotency_key
            ),
            "ALTER TABLE `inbox` ADD CONSTRAINT uq_inbox_source_idempotency UNIQUE (`source`, `idempotency_key`);"
        );
        assert_eq!(MysqlDialect.notify_statements(&layout.outbox_table), None);
    }
}
