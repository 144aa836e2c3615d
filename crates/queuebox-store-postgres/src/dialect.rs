//! The PostgreSQL wording of the guard's fixes (schema.md SCH-61..63): quoting, the column
//! definitions of §5.1, the unique constraint and the notify statements of §4.

use queuebox_core::{SqlIdentifier, Table};
use queuebox_store::{ColumnFix, RAW_BODY_COLUMN, SchemaDialect};

pub(crate) struct PgDialect;

/// `"name"`: identifiers are validated (letters, digits, `_`), so they never hold a quote.
pub(crate) fn quote(name: &SqlIdentifier) -> String {
    format!("\"{name}\"")
}

/// Type, NULL or NOT NULL, and default of each column by mapping key (§5.1).
fn definition(table: Table, key: &str) -> Option<&'static str> {
    let shared = match key {
        "id" => Some("UUID NOT NULL DEFAULT gen_random_uuid()"),
        "payload" => Some("JSONB NOT NULL"),
        "headers" => Some("JSONB NOT NULL DEFAULT '{}'"),
        "state" => Some("VARCHAR(50) NOT NULL DEFAULT 'pending'"),
        "attempt" => Some("INTEGER NOT NULL DEFAULT 0"),
        "scheduledAt" | "createdAt" => Some("TIMESTAMPTZ NOT NULL DEFAULT now()"),
        "claimedAt" | "leaseExpiresAt" => Some("TIMESTAMPTZ NULL"),
        "claimToken" => Some("UUID NULL"),
        "lastError" => Some("TEXT NULL"),
        _ => None,
    };
    shared.or(match (table, key) {
        (Table::Outbox, "topic") => Some("VARCHAR(255) NOT NULL"),
        (Table::Outbox, "key" | "aggregateType") => Some("VARCHAR(255) NULL"),
        (Table::Outbox, "maxAttempts") => Some("INTEGER NOT NULL DEFAULT 5"),
        (Table::Outbox, "updatedAt") => Some("TIMESTAMPTZ NOT NULL DEFAULT now()"),
        (Table::Inbox, "source" | "idempotencyKey") => Some("VARCHAR(255) NOT NULL"),
        (Table::Inbox, "aggregateId" | "eventType") => Some("VARCHAR(255) NULL"),
        (Table::Inbox, "consumption") => Some("VARCHAR(4) NOT NULL DEFAULT 'push'"),
        (Table::Inbox, "processedAt") => Some("TIMESTAMPTZ NULL"),
        (Table::Inbox, "correlationId") => Some("VARCHAR(128) NULL"),
        _ => None,
    })
}

impl SchemaDialect for PgDialect {
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
                "CREATE SEQUENCE IF NOT EXISTS outbox_sequence_seq AS BIGINT; ALTER TABLE {t} ADD COLUMN {c} BIGINT NOT NULL DEFAULT nextval('outbox_sequence_seq');"
            ));
        }
        // Every key of the layout has a definition; a key without one would be a bug in the
        // table above, and the plain type keeps the message useful even then.
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

    fn notify_statements(&self, table_name: &SqlIdentifier) -> Option<String> {
        Some(format!(
            "CREATE OR REPLACE FUNCTION queuebox_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('queuebox_outbox', TG_TABLE_NAME); RETURN NULL; END $$; CREATE OR REPLACE TRIGGER queuebox_outbox_notify AFTER INSERT ON {} FOR EACH STATEMENT EXECUTE FUNCTION queuebox_outbox_notify();",
            quote(table_name)
        ))
    }

    fn add_raw_body(&self, table_name: &SqlIdentifier) -> String {
        format!(
            "ALTER TABLE {} ADD COLUMN {RAW_BODY_COLUMN} BYTEA NULL;",
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
    fn sch_62_sequence_statement_matches_the_spec() {
        let layout = TableLayout::default();
        let fix = PgDialect.add_column(
            Table::Outbox,
            "sequence",
            &layout.outbox_table,
            &layout.outbox.sequence,
        );
        assert_eq!(
            fix,
            ColumnFix::Statement("CREATE SEQUENCE IF NOT EXISTS outbox_sequence_seq AS BIGINT; ALTER TABLE \"outbox\" ADD COLUMN \"sequence\" BIGINT NOT NULL DEFAULT nextval('outbox_sequence_seq');".into())
        );
        let headers = PgDialect.add_column(
            Table::Inbox,
            "headers",
            &layout.inbox_table,
            &layout.inbox.headers,
        );
        assert_eq!(
            headers,
            ColumnFix::Statement(
                "ALTER TABLE \"inbox\" ADD COLUMN \"headers\" JSONB NOT NULL DEFAULT '{}';".into()
            )
        );
    }

    #[test]
    fn sch_63_unique_statement_matches_the_spec() {
        let layout = TableLayout::default();
        assert_eq!(
            PgDialect.add_unique(
                &layout.inbox_table,
                &layout.inbox.source,
                &layout.inbox.idempotency_key
            ),
            "ALTER TABLE \"inbox\" ADD CONSTRAINT uq_inbox_source_idempotency UNIQUE (\"source\", \"idempotency_key\");"
        );
    }
}
