//! The bundled migration versions (schema.md SCH-43), the history rows that record them
//! (SCH-23), and the request and report of one `queuebox migrate`.

/// One bundled migration version. The SQL text and its checksum belong to each store, because
/// every database type has its own text (SCH-42).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BundledVersion {
    pub version: u32,
    pub description: &'static str,
}

/// Every bundled version, ascending. The same numbers and descriptions on every database type.
pub const BUNDLED_VERSIONS: &[BundledVersion] = &[
    BundledVersion {
        version: 1,
        description: "create outbox",
    },
    BundledVersion {
        version: 2,
        description: "create inbox",
    },
    // Issue 14 item 7: an INSERT with an empty topic is refused (a CHECK; triggers on SQLite).
    BundledVersion {
        version: 3,
        description: "outbox topic not empty",
    },
    BundledVersion {
        version: RAW_BODY_VERSION,
        description: "add inbox raw_body",
    },
    // Issue 13: the outbox index (state, created_at, id) of the admin lists' order (ADM-11) and
    // of the per-state counts of GET /admin/stats.
    BundledVersion {
        version: 5,
        description: "outbox state created index",
    },
];

/// The version that adds the nullable `inbox.raw_body` column of `storeRawBody` (issue 15).
pub const RAW_BODY_VERSION: u32 = 4;

/// The highest bundled version: the upper bound of `--baseline` (SCH-56).
pub const HIGHEST_VERSION: u32 = 5;

/// The history table (SCH-23). Never mapped, never renamed.
pub const SCHEMA_HISTORY_TABLE: &str = "queuebox_schema_history";

/// The name of the notify function and trigger, and of nothing else (SCH-24).
pub const NOTIFY_OBJECT_NAME: &str = "queuebox_outbox_notify";

/// The version the outbox table belongs to, and the inbox's: the guard uses them to tell a
/// table that the history records from one it does not (SCH-61).
pub const OUTBOX_VERSION: u32 = 1;
pub const INBOX_VERSION: u32 = 2;

/// `kind` of a history row (SCH-23).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistoryKind {
    /// QueueBox ran the version.
    Applied,
    /// `--baseline` recorded it without running it.
    Baseline,
}

impl HistoryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Baseline => "baseline",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "applied" => Some(Self::Applied),
            "baseline" => Some(Self::Baseline),
            _ => None,
        }
    }
}

/// One row of `queuebox_schema_history`, as far as migration needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRow {
    pub version: u32,
    pub description: String,
    /// The text of `kind`; a row written by a newer release may hold a kind this one does not
    /// know, so it is kept as read.
    pub kind: String,
    pub checksum: String,
}

/// What `queuebox migrate` (or `database.migrate: true` at start) was asked to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MigrateRequest {
    /// `--baseline N`: record versions 1..=N as applied by hand (SCH-56).
    pub baseline: Option<u32>,
    /// `outbox.capture.mode: notify`: create the notify function and trigger (SCH-25).
    pub notify: bool,
}

/// What one migration run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MigrateReport {
    /// Versions recorded as `baseline`, ascending.
    pub baselined: Vec<u32>,
    /// Versions applied now, ascending.
    pub applied: Vec<u32>,
    /// The highest recorded version after the run (`None` only when nothing is recorded).
    pub database_version: Option<u32>,
    /// Set when the history holds a version this QueueBox does not know (SCH-50).
    pub newer_version: Option<u32>,
    /// Recorded versions whose checksum differs from the bundled text (SCH-51).
    pub checksum_mismatches: Vec<u32>,
    /// `true` when this run created the notify function and trigger.
    pub notify_created: bool,
}

/// The bundled version with this number.
pub fn bundled(version: u32) -> Option<&'static BundledVersion> {
    BUNDLED_VERSIONS.iter().find(|v| v.version == version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sch_43_versions_are_ascending_and_end_at_highest() {
        let numbers: Vec<u32> = BUNDLED_VERSIONS.iter().map(|v| v.version).collect();
        assert_eq!(numbers, vec![1, 2, 3, RAW_BODY_VERSION, 5]);
        assert_eq!(numbers.last().copied(), Some(HIGHEST_VERSION));
        assert_eq!(bundled(1).map(|v| v.description), Some("create outbox"));
        assert_eq!(bundled(2).map(|v| v.description), Some("create inbox"));
        assert_eq!(
            bundled(OUTBOX_VERSION).map(|v| v.description),
            Some("create outbox")
        );
        assert_eq!(
            bundled(INBOX_VERSION).map(|v| v.description),
            Some("create inbox")
        );
    }

    #[test]
    fn sch_23_history_kinds_round_trip() {
        for kind in [HistoryKind::Applied, HistoryKind::Baseline] {
            assert_eq!(HistoryKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(HistoryKind::parse("other"), None);
    }
}
