//! `StoreError`: every way a store can fail, with the reason texts of schema.md SCH-57/SCH-61
//! and the start-up action phrase (operations.md OPS-25) each failure belongs to.

use std::fmt;

use crate::guard::SchemaProblem;

/// The start-up step a store failure ends. The binary prints
/// `QueueBox could not <phrase>. Reason: <StoreError>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreAction {
    /// Opening the pool and waiting for the database (OPS-24 step 8).
    Connect,
    /// `queuebox migrate` and `database.migrate: true` (step 9).
    Migrate,
    /// The schema guard (step 10).
    CheckSchema,
    /// Any later use of the database (readiness, the engine's statements).
    UseDatabase,
}

impl StoreAction {
    /// The phrase after `QueueBox could not`.
    pub fn phrase(self) -> &'static str {
        match self {
            Self::Connect => "connect to the database",
            Self::Migrate => "apply the migrations",
            Self::CheckSchema => "check the database schema",
            Self::UseDatabase => "use the database",
        }
    }
}

impl fmt::Display for StoreAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.phrase())
    }
}

/// What a caller can do about a failure: the engine asks [`StoreError::kind`] to choose between
/// retrying soon, waiting for the database to come back, isolating a row, and giving up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreErrorKind {
    /// The statement lost a race with another transaction and nothing was written: a lock
    /// conflict, a deadlock, a serialization failure, a lock or statement timeout (PostgreSQL
    /// 40P01, 40001, 55P03, 57014; SQLite `SQLITE_BUSY`; MySQL 1205, 1213). The same call may
    /// succeed when tried again.
    Transient,
    /// The database cannot be used now: the connection was lost or refused, no pooled
    /// connection came in time, the server is shutting down or out of resources. Every call
    /// fails until it comes back.
    Outage,
    /// The database refused the data itself; the same data fails every time (see
    /// [`StoreError::DataRejected`]).
    DataRejected,
    /// Anything else: the schema or the configuration does not fit, a migration refusal, or a
    /// statement failure of no known class. Trying again does not help.
    Other,
}

/// A store failure. `Display` is the *reason* only; every text is already redacted (no password,
/// no connection string, no raw driver error chain: OPS-25, CFG-43).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database did not answer before `database.startupTimeoutMs` ran out (SCH-57).
    #[error("{host_port} did not answer within {waited_ms} ms: {reason}")]
    NotReachable {
        host_port: String,
        waited_ms: u64,
        reason: String,
    },

    /// The database answered with a refusal that waiting does not change (a wrong password, a
    /// role or database that does not exist, TLS refused, a server too old): the start stops at
    /// once with the server's reason and what to change (issue 14 item 1).
    #[error("{host_port}: {reason}. {fix}")]
    Refused {
        host_port: String,
        reason: String,
        fix: String,
    },

    /// The connection settings cannot be used (a TLS file that cannot be read, a target of
    /// another database type).
    #[error("{reason}")]
    BadTarget { reason: String },

    /// SCH-55: renamed tables or columns are never migrated.
    #[error(
        "QueueBox migrates only the default table and column names. These keys rename one: {}. Create the tables yourself (see the schema page) and keep database.migrate: false.",
        keys.join(", ")
    )]
    RenamedNames { keys: Vec<String> },

    /// SCH-47: another process kept the migration lock for the whole wait.
    #[error(
        "Another process holds the migration lock; QueueBox waited {waited_ms} ms. Nothing changed."
    )]
    LockTimeout { waited_ms: u64 },

    /// SCH-53.
    #[error(
        "QueueBox tables exist without a migration history. Run queuebox migrate --baseline <version> with the last version you applied by hand."
    )]
    TablesWithoutHistory,

    /// SCH-56: `--baseline` needs a database without a history.
    #[error(
        "The database already has a migration history (version {version}). --baseline applies only to a database without one. Nothing changed."
    )]
    BaselineWithHistory { version: u32 },

    /// SCH-56: `--baseline` needs at least one of the two tables. Names are quoted as the store
    /// quotes them.
    #[error(
        "Neither table {outbox} nor {inbox} exists, so there is nothing to baseline. Run \"queuebox migrate\" without --baseline. Nothing changed."
    )]
    BaselineWithoutTables { outbox: String, inbox: String },

    /// SCH-56/57: a `--baseline` value outside 1..=highest. The binary normally rejects it as a
    /// usage error before it reaches the store; this is the same text, for safety.
    #[error("--baseline needs a whole number from 1 to {highest}, got \"{given}\".")]
    BaselineOutOfRange { given: u32, highest: u32 },

    /// SCH-57: one version failed; its transaction rolled back.
    #[error(
        "Migration {version} ({description}) failed: {reason}. Versions before {version} stay applied."
    )]
    MigrationFailed {
        version: u32,
        description: &'static str,
        reason: String,
    },

    /// SCH-61: the schema guard found problems; every one is listed, one per line.
    #[error("{}", SchemaMismatchText(problems))]
    SchemaMismatch { problems: Vec<SchemaProblem> },

    /// A statement lost a race with another transaction ([`StoreErrorKind::Transient`]).
    #[error("{during} failed: {reason}")]
    Transient {
        action: StoreAction,
        during: &'static str,
        reason: String,
    },

    /// The database could not be used ([`StoreErrorKind::Outage`]).
    #[error("{during} failed: {reason}")]
    Outage {
        action: StoreAction,
        during: &'static str,
        reason: String,
    },

    /// A statement failed outside the cases above. `during` says what QueueBox was doing.
    #[error("{during} failed: {reason}")]
    Database {
        action: StoreAction,
        during: &'static str,
        reason: String,
    },

    /// The database refused the data of the statement (on PostgreSQL, SQLSTATE class 22, a
    /// data exception: for example `\u0000` in a JSON string, which `jsonb` cannot hold). The
    /// same data fails the same way every time, so a caller that wrote several rows in one
    /// statement writes them one by one to find the row at fault.
    #[error("{during} failed: {reason}")]
    DataRejected {
        action: StoreAction,
        during: &'static str,
        reason: String,
    },
}

impl StoreError {
    /// The start-up action this failure ends (OPS-25).
    pub fn action(&self) -> StoreAction {
        match self {
            Self::NotReachable { .. } | Self::Refused { .. } | Self::BadTarget { .. } => {
                StoreAction::Connect
            }
            Self::RenamedNames { .. }
            | Self::LockTimeout { .. }
            | Self::TablesWithoutHistory
            | Self::BaselineWithHistory { .. }
            | Self::BaselineWithoutTables { .. }
            | Self::BaselineOutOfRange { .. }
            | Self::MigrationFailed { .. } => StoreAction::Migrate,
            Self::SchemaMismatch { .. } => StoreAction::CheckSchema,
            Self::Transient { action, .. }
            | Self::Outage { action, .. }
            | Self::Database { action, .. }
            | Self::DataRejected { action, .. } => *action,
        }
    }

    /// Whether trying again can help, and when (see [`StoreErrorKind`]).
    pub fn kind(&self) -> StoreErrorKind {
        match self {
            Self::Transient { .. } => StoreErrorKind::Transient,
            Self::NotReachable { .. } | Self::Outage { .. } => StoreErrorKind::Outage,
            Self::DataRejected { .. } => StoreErrorKind::DataRejected,
            Self::BadTarget { .. }
            | Self::Refused { .. }
            | Self::RenamedNames { .. }
            | Self::LockTimeout { .. }
            | Self::TablesWithoutHistory
            | Self::BaselineWithHistory { .. }
            | Self::BaselineWithoutTables { .. }
            | Self::BaselineOutOfRange { .. }
            | Self::MigrationFailed { .. }
            | Self::SchemaMismatch { .. }
            | Self::Database { .. } => StoreErrorKind::Other,
        }
    }

    /// A failed statement as the variant of its kind; the store classifies the driver error.
    pub fn statement(
        kind: StoreErrorKind,
        action: StoreAction,
        during: &'static str,
        reason: String,
    ) -> Self {
        match kind {
            StoreErrorKind::Transient => Self::Transient {
                action,
                during,
                reason,
            },
            StoreErrorKind::Outage => Self::Outage {
                action,
                during,
                reason,
            },
            StoreErrorKind::DataRejected => Self::DataRejected {
                action,
                during,
                reason,
            },
            StoreErrorKind::Other => Self::Database {
                action,
                during,
                reason,
            },
        }
    }

    /// The whole start-up line: `QueueBox could not <action>. Reason: <reason>`.
    pub fn startup_line(&self) -> String {
        format!(
            "QueueBox could not {}. Reason: {self}",
            self.action().phrase()
        )
    }
}

/// The reason text of SCH-61: a count line, then one line per problem.
struct SchemaMismatchText<'a>(&'a [SchemaProblem]);

impl fmt::Display for SchemaMismatchText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        let noun = if n == 1 { "problem" } else { "problems" };
        write!(
            f,
            "the schema does not fit this QueueBox ({n} {noun}). Fix each one and start QueueBox again."
        )?;
        for problem in self.0 {
            write!(f, "\n{problem}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guard::ColumnFix;

    #[test]
    fn sch_61_two_problems_render_as_the_spec_example() {
        let err = StoreError::SchemaMismatch {
            problems: vec![
                SchemaProblem::MissingColumn {
                    table: "\"outbox\"".into(),
                    column: "\"sequence\"".into(),
                    fix: ColumnFix::Statement("CREATE SEQUENCE IF NOT EXISTS outbox_sequence_seq AS BIGINT; ALTER TABLE \"outbox\" ADD COLUMN \"sequence\" BIGINT NOT NULL DEFAULT nextval('outbox_sequence_seq');".into()),
                },
                SchemaProblem::MissingUnique {
                    table: "\"inbox\"".into(),
                    source: "\"source\"".into(),
                    idempotency_key: "\"idempotency_key\"".into(),
                    statement: "ALTER TABLE \"inbox\" ADD CONSTRAINT uq_inbox_source_idempotency UNIQUE (\"source\", \"idempotency_key\");".into(),
                },
            ],
        };
        let expected = "QueueBox could not check the database schema. Reason: the schema does not fit this QueueBox (2 problems). Fix each one and start QueueBox again.
- table \"outbox\" has no column \"sequence\". Add it: CREATE SEQUENCE IF NOT EXISTS outbox_sequence_seq AS BIGINT; ALTER TABLE \"outbox\" ADD COLUMN \"sequence\" BIGINT NOT NULL DEFAULT nextval('outbox_sequence_seq');
- table \"inbox\" has no unique constraint on (\"source\", \"idempotency_key\"), so it cannot reject repeats. Add it: ALTER TABLE \"inbox\" ADD CONSTRAINT uq_inbox_source_idempotency UNIQUE (\"source\", \"idempotency_key\");";
        assert_eq!(err.startup_line(), expected);
    }

    #[test]
    fn sch_61_one_problem_is_singular() {
        let err = StoreError::SchemaMismatch {
            problems: vec![SchemaProblem::MissingTable {
                table: "\"inbox\"".into(),
                recorded: false,
            }],
        };
        assert_eq!(
            err.to_string(),
            "the schema does not fit this QueueBox (1 problem). Fix each one and start QueueBox again.\n- table \"inbox\" does not exist. Run \"queuebox migrate\", or create it as the schema page shows."
        );
    }

    #[test]
    fn ops_25_action_phrases() {
        assert_eq!(
            StoreError::LockTimeout { waited_ms: 5 }.startup_line(),
            "QueueBox could not apply the migrations. Reason: Another process holds the migration lock; QueueBox waited 5 ms. Nothing changed."
        );
        let unreachable = StoreError::NotReachable {
            host_port: "db:5432".into(),
            waited_ms: 60000,
            reason: "connection refused".into(),
        };
        assert_eq!(
            unreachable.startup_line(),
            "QueueBox could not connect to the database. Reason: db:5432 did not answer within 60000 ms: connection refused"
        );
        assert_eq!(
            StoreError::SchemaMismatch { problems: vec![] }
                .action()
                .phrase(),
            "check the database schema"
        );
    }

    #[test]
    fn statement_errors_keep_their_kind_action_and_text() {
        for kind in [
            StoreErrorKind::Transient,
            StoreErrorKind::Outage,
            StoreErrorKind::DataRejected,
            StoreErrorKind::Other,
        ] {
            let err = StoreError::statement(
                kind,
                StoreAction::UseDatabase,
                "claiming outbox rows",
                "deadlock detected (SQLSTATE 40P01)".into(),
            );
            assert_eq!(err.kind(), kind);
            assert_eq!(err.action(), StoreAction::UseDatabase);
            assert_eq!(
                err.to_string(),
                "claiming outbox rows failed: deadlock detected (SQLSTATE 40P01)"
            );
        }
        let unreachable = StoreError::NotReachable {
            host_port: "db:5432".into(),
            waited_ms: 10,
            reason: "connection refused".into(),
        };
        assert_eq!(unreachable.kind(), StoreErrorKind::Outage);
        assert_eq!(
            StoreError::SchemaMismatch { problems: vec![] }.kind(),
            StoreErrorKind::Other
        );
    }

    #[test]
    fn sch_55_renamed_names_message_lists_every_key() {
        let err = StoreError::RenamedNames {
            keys: vec![
                "database.outboxTableName".into(),
                "database.columnMapping.inbox.source".into(),
            ],
        };
        assert_eq!(
            err.to_string(),
            "QueueBox migrates only the default table and column names. These keys rename one: database.outboxTableName, database.columnMapping.inbox.source. Create the tables yourself (see the schema page) and keep database.migrate: false."
        );
    }
}
