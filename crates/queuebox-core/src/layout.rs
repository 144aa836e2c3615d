//! The names of the outbox and inbox tables and of their columns, after `database.columnMapping`.

use std::fmt;

/// A validated SQL identifier: a letter or `_`, then letters, digits and `_`, at most 63
/// characters (config.md §2). Stores always quote it, so it can never carry SQL of its own.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SqlIdentifier(String);

/// Why a text is not an SQL identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentifierError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most 63 characters, got {0}")]
    TooLong(usize),
    #[error("must start with a letter or _ and hold only letters, digits and _")]
    BadCharacter,
}

impl SqlIdentifier {
    pub fn parse(text: &str) -> Result<Self, IdentifierError> {
        let mut chars = text.chars();
        let Some(first) = chars.next() else {
            return Err(IdentifierError::Empty);
        };
        if !(first.is_ascii_alphabetic() || first == '_')
            || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(IdentifierError::BadCharacter);
        }
        let len = text.chars().count();
        if len > 63 {
            return Err(IdentifierError::TooLong(len));
        }
        Ok(Self(text.to_owned()))
    }

    /// For the built-in default names, which are valid by construction.
    fn known(text: &'static str) -> Self {
        Self(text.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SqlIdentifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! column_set {
    ($(#[$meta:meta])* $name:ident { $($field:ident => $key:literal, $default:literal;)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name {
            $(pub $field: SqlIdentifier,)+
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $($field: SqlIdentifier::known($default),)+ }
            }
        }

        impl $name {
            /// Every column as (mapping key, default column name, mapped column name), in the
            /// order of the schema page.
            pub fn entries(&self) -> Vec<(&'static str, &'static str, &SqlIdentifier)> {
                vec![$(($key, $default, &self.$field),)+]
            }

            /// The mapping keys that `database.columnMapping` accepts for this table.
            pub const KEYS: &'static [&'static str] = &[$($key,)+];

            /// Sets the column of one mapping key; `false` when the key is unknown.
            pub fn set(&mut self, key: &str, column: SqlIdentifier) -> bool {
                match key {
                    $($key => { self.$field = column; true })+
                    _ => false,
                }
            }
        }
    };
}

column_set!(
    /// Outbox column names (config.md CFG-44, schema.md SCH-11).
    OutboxColumns {
        id => "id", "id";
        topic => "topic", "topic";
        key => "key", "key";
        payload => "payload", "payload";
        headers => "headers", "headers";
        aggregate_type => "aggregateType", "aggregate_type";
        state => "state", "state";
        attempt => "attempt", "attempt";
        max_attempts => "maxAttempts", "max_attempts";
        scheduled_at => "scheduledAt", "scheduled_at";
        created_at => "createdAt", "created_at";
        updated_at => "updatedAt", "updated_at";
        claimed_at => "claimedAt", "claimed_at";
        claim_token => "claimToken", "claim_token";
        lease_expires_at => "leaseExpiresAt", "lease_expires_at";
        last_error => "lastError", "last_error";
        sequence => "sequence", "sequence";
    }
);

column_set!(
    /// Inbox column names (config.md CFG-45, schema.md SCH-16).
    InboxColumns {
        id => "id", "id";
        source => "source", "source";
        idempotency_key => "idempotencyKey", "idempotency_key";
        aggregate_id => "aggregateId", "aggregate_id";
        event_type => "eventType", "event_type";
        payload => "payload", "payload";
        headers => "headers", "headers";
        state => "state", "state";
        consumption => "consumption", "consumption";
        attempt => "attempt", "attempt";
        scheduled_at => "scheduledAt", "scheduled_at";
        created_at => "createdAt", "created_at";
        processed_at => "processedAt", "processed_at";
        claimed_at => "claimedAt", "claimed_at";
        claim_token => "claimToken", "claim_token";
        lease_expires_at => "leaseExpiresAt", "lease_expires_at";
        correlation_id => "correlationId", "correlation_id";
        last_error => "lastError", "last_error";
    }
);

/// The two tables QueueBox works on, with their mapped names (schema.md §8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableLayout {
    pub outbox_table: SqlIdentifier,
    pub inbox_table: SqlIdentifier,
    pub outbox: OutboxColumns,
    pub inbox: InboxColumns,
}

impl Default for TableLayout {
    fn default() -> Self {
        Self {
            outbox_table: SqlIdentifier::known("outbox"),
            inbox_table: SqlIdentifier::known("inbox"),
            outbox: OutboxColumns::default(),
            inbox: InboxColumns::default(),
        }
    }
}

impl TableLayout {
    /// The configuration paths that rename a table or a column, for the refusal to migrate
    /// renamed names (CFG-89, SCH-55). A key set to its default name is not a rename.
    pub fn renamed_keys(&self) -> Vec<String> {
        let mut keys = Vec::new();
        if self.outbox_table.as_str() != "outbox" {
            keys.push("database.outboxTableName".to_owned());
        }
        if self.inbox_table.as_str() != "inbox" {
            keys.push("database.inboxTableName".to_owned());
        }
        for (key, default, column) in self.outbox.entries() {
            if column.as_str() != default {
                keys.push(format!("database.columnMapping.outbox.{key}"));
            }
        }
        for (key, default, column) in self.inbox.entries() {
            if column.as_str() != default {
                keys.push(format!("database.columnMapping.inbox.{key}"));
            }
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfg_24_sql_identifier_rules() {
        assert!(SqlIdentifier::parse("outbox").is_ok());
        assert!(SqlIdentifier::parse("_Outbox_2").is_ok());
        assert_eq!(SqlIdentifier::parse(""), Err(IdentifierError::Empty));
        assert_eq!(
            SqlIdentifier::parse("2outbox"),
            Err(IdentifierError::BadCharacter)
        );
        assert_eq!(
            SqlIdentifier::parse("out-box"),
            Err(IdentifierError::BadCharacter)
        );
        assert_eq!(
            SqlIdentifier::parse("a\"; drop"),
            Err(IdentifierError::BadCharacter)
        );
        assert_eq!(
            SqlIdentifier::parse(&"a".repeat(64)),
            Err(IdentifierError::TooLong(64))
        );
        assert!(SqlIdentifier::parse(&"a".repeat(63)).is_ok());
    }

    #[test]
    fn cfg_89_renamed_keys_ignores_defaults_spelled_out() {
        let mut layout = TableLayout::default();
        assert!(layout.renamed_keys().is_empty());
        assert!(
            layout
                .outbox
                .set("key", SqlIdentifier::parse("key").unwrap())
        );
        assert!(layout.renamed_keys().is_empty());
        assert!(
            layout
                .outbox
                .set("key", SqlIdentifier::parse("msg_key").unwrap())
        );
        layout.inbox_table = SqlIdentifier::parse("events_in").unwrap();
        assert_eq!(
            layout.renamed_keys(),
            vec![
                "database.inboxTableName",
                "database.columnMapping.outbox.key"
            ]
        );
        assert!(!layout.inbox.set("nope", SqlIdentifier::parse("x").unwrap()));
    }
}
