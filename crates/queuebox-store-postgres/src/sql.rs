//! Every SQL text of the store, embedded from `migrations/` and `queries/`, the catalog and
//! history statements rendered once per store, and the checksum that the history records for
//! a migration (SCH-23).

use queuebox_store::StoreError;
use sha2::{Digest, Sha256};

use crate::render::render;

/// The key of the session advisory lock that serializes migration (SCH-47).
pub const MIGRATION_LOCK_KEY: i64 = 8_175_552_253_447_532_408;

const MIGRATION_1: &str = include_str!("../migrations/0001_create_outbox.sql");
const MIGRATION_2: &str = include_str!("../migrations/0002_create_inbox.sql");
// Issue 14 item 7; the number is reserved in crates/queuebox-store/src/versions.rs.
const MIGRATION_3: &str = include_str!("../migrations/0003_outbox_topic_not_empty.sql");
const MIGRATION_4: &str = include_str!("../migrations/0004_add_inbox_raw_body.sql");
// The admin lists' order (ADM-11); the number is listed in crates/queuebox-store/src/versions.rs.
const MIGRATION_5: &str = include_str!("../migrations/0005_outbox_state_created_index.sql");

/// The PostgreSQL text of a bundled version (schema.md §5.1).
pub fn bundled_sql(version: u32) -> Option<&'static str> {
    match version {
        1 => Some(MIGRATION_1),
        2 => Some(MIGRATION_2),
        3 => Some(MIGRATION_3),
        4 => Some(MIGRATION_4),
        5 => Some(MIGRATION_5),
        _ => None,
    }
}

/// Lower-case hex SHA-256 of a migration's text.
pub fn checksum(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

pub(crate) const PING: &str = include_str!("../queries/ping.sql");
pub(crate) const SERVER_VERSION: &str = include_str!("../queries/server_version.sql");
const TABLE_OID: &str = include_str!("../queries/catalog/table_oid.sql");
const COLUMNS: &str = include_str!("../queries/catalog/columns.sql");
const UNIQUE_KEYS: &str = include_str!("../queries/catalog/unique_keys.sql");
const ENABLED_TRIGGERS: &str = include_str!("../queries/catalog/enabled_triggers.sql");
pub(crate) const HISTORY_CREATE: &str = include_str!("../queries/history/create_table.sql");
pub(crate) const HISTORY_SELECT: &str = include_str!("../queries/history/select.sql");
pub(crate) const HISTORY_VERSIONS: &str = include_str!("../queries/history/versions.sql");
const HISTORY_INSERT: &str = include_str!("../queries/history/insert.sql");
pub(crate) const MIGRATION_LOCK_WAIT: &str =
    include_str!("../queries/lock/migration_lock_wait.sql");
pub(crate) const TRY_LOCK: &str = include_str!("../queries/lock/try_lock.sql");
pub(crate) const UNLOCK: &str = include_str!("../queries/lock/unlock.sql");
pub(crate) const NOTIFY_FUNCTION: &str = include_str!("../queries/notify/create_function.sql");
pub(crate) const NOTIFY_TRIGGER: &str = include_str!("../queries/notify/create_trigger.sql");
pub(crate) const OUTBOX_CLAIM: &str = include_str!("../queries/outbox/claim.sql");
pub(crate) const OUTBOX_CLAIM_RUN: &str = include_str!("../queries/outbox/claim_run.sql");
pub(crate) const OUTBOX_RENEW: &str = include_str!("../queries/outbox/renew.sql");
pub(crate) const OUTBOX_FINISH: &str = include_str!("../queries/outbox/finish.sql");
pub(crate) const OUTBOX_RELEASE: &str = include_str!("../queries/outbox/release.sql");
pub(crate) const OUTBOX_RECLAIM: &str = include_str!("../queries/outbox/reclaim.sql");
pub(crate) const OUTBOX_PENDING_STATS: &str = include_str!("../queries/outbox/pending_stats.sql");
pub(crate) const INBOX_INSERT: &str = include_str!("../queries/inbox/insert.sql");
pub(crate) const INBOX_STORE_RAW_BODY: &str = include_str!("../queries/inbox/store_raw_body.sql");
pub(crate) const INBOX_CLAIM_LOCK: &str = include_str!("../queries/inbox/claim_lock.sql");
pub(crate) const INBOX_CLAIM: &str = include_str!("../queries/inbox/claim.sql");
pub(crate) const INBOX_RENEW: &str = include_str!("../queries/inbox/renew.sql");
pub(crate) const INBOX_FORWARD_INSERT: &str = include_str!("../queries/inbox/forward_insert.sql");
pub(crate) const INBOX_FORWARD_MARK: &str = include_str!("../queries/inbox/forward_mark.sql");
pub(crate) const INBOX_DEAD: &str = include_str!("../queries/inbox/dead.sql");
pub(crate) const INBOX_RELEASE: &str = include_str!("../queries/inbox/release.sql");
pub(crate) const INBOX_RECLAIM: &str = include_str!("../queries/inbox/reclaim.sql");
pub(crate) const INBOX_OLDEST_PENDING_AGE: &str =
    include_str!("../queries/inbox/oldest_pending_age.sql");
pub(crate) const INBOX_BACKLOG: &str = include_str!("../queries/inbox/backlog.sql");
pub(crate) const RETENTION_OUTBOX_AGE: &str = include_str!("../queries/retention/outbox_age.sql");
pub(crate) const RETENTION_OUTBOX_COUNT: &str =
    include_str!("../queries/retention/outbox_count.sql");
pub(crate) const RETENTION_INBOX_AGE: &str = include_str!("../queries/retention/inbox_age.sql");
pub(crate) const OPERATOR_OUTBOX_LIST: &str = include_str!("../queries/operator/outbox_list.sql");
pub(crate) const OPERATOR_OUTBOX_SHOW: &str = include_str!("../queries/operator/outbox_show.sql");
pub(crate) const OPERATOR_OUTBOX_REPLAY: &str =
    include_str!("../queries/operator/outbox_replay.sql");
pub(crate) const OPERATOR_OUTBOX_DELETE_ONE: &str =
    include_str!("../queries/operator/outbox_delete_one.sql");
pub(crate) const OPERATOR_OUTBOX_DELETE: &str =
    include_str!("../queries/operator/outbox_delete.sql");
pub(crate) const OPERATOR_OUTBOX_COUNTS: &str =
    include_str!("../queries/operator/outbox_counts.sql");
pub(crate) const OPERATOR_OUTBOX_TOPICS: &str =
    include_str!("../queries/operator/outbox_topics.sql");
pub(crate) const OPERATOR_INBOX_LIST: &str = include_str!("../queries/operator/inbox_list.sql");
pub(crate) const OPERATOR_INBOX_SHOW: &str = include_str!("../queries/operator/inbox_show.sql");
pub(crate) const OPERATOR_INBOX_REQUEUE: &str =
    include_str!("../queries/operator/inbox_requeue.sql");
pub(crate) const OPERATOR_INBOX_DELETE_ONE: &str =
    include_str!("../queries/operator/inbox_delete_one.sql");
pub(crate) const OPERATOR_INBOX_DELETE: &str = include_str!("../queries/operator/inbox_delete.sql");
pub(crate) const OPERATOR_INBOX_COUNTS: &str = include_str!("../queries/operator/inbox_counts.sql");

/// The catalog and history statements that take parameters, rendered once per store (they name
/// no mapped table, so every store renders them alike). The others run as written.
#[derive(Debug)]
pub(crate) struct CatalogSql {
    pub(crate) table_oid: String,
    pub(crate) columns: String,
    pub(crate) unique_keys: String,
    pub(crate) enabled_triggers: String,
    pub(crate) history_insert: String,
}

impl CatalogSql {
    pub(crate) fn new() -> Result<Self, StoreError> {
        Ok(Self {
            table_oid: render("catalog/table_oid.sql", TABLE_OID, &[], &["name"])?,
            columns: render("catalog/columns.sql", COLUMNS, &[], &["oid"])?,
            unique_keys: render("catalog/unique_keys.sql", UNIQUE_KEYS, &[], &["oid"])?,
            enabled_triggers: render(
                "catalog/enabled_triggers.sql",
                ENABLED_TRIGGERS,
                &[],
                &["oid"],
            )?,
            history_insert: render(
                "history/insert.sql",
                HISTORY_INSERT,
                &[],
                &[
                    "version",
                    "description",
                    "kind",
                    "checksum",
                    "queuebox_version",
                    "duration_ms",
                ],
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_store::BUNDLED_VERSIONS;

    #[test]
    fn sch_43_every_bundled_version_has_its_text() {
        for version in BUNDLED_VERSIONS {
            let text = bundled_sql(version.version).expect("bundled text");
            let header = format!("-- Version {}: {}", version.version, version.description);
            assert!(text.starts_with(&header), "{header}");
        }
        assert_eq!(bundled_sql(6), None);
    }

    #[test]
    fn sch_23_checksum_is_lower_case_hex_sha256() {
        assert_eq!(
            checksum(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let sum = checksum(MIGRATION_1);
        assert_eq!(sum.len(), 64);
        assert!(
            sum.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }

    #[test]
    fn every_query_file_states_its_locking_and_isolation_first() {
        for text in [
            PING,
            SERVER_VERSION,
            TABLE_OID,
            COLUMNS,
            UNIQUE_KEYS,
            ENABLED_TRIGGERS,
            HISTORY_CREATE,
            HISTORY_SELECT,
            HISTORY_VERSIONS,
            HISTORY_INSERT,
            TRY_LOCK,
            UNLOCK,
            NOTIFY_FUNCTION,
            NOTIFY_TRIGGER,
        ] {
            let first = text.lines().next().unwrap_or_default();
            assert!(
                first.starts_with("-- Locking: ") && first.contains("Isolation: "),
                "{first}"
            );
        }
    }

    #[test]
    fn catalog_statements_render_with_numbered_parameters() {
        let sql = CatalogSql::new().expect("render");
        assert!(
            sql.table_oid.contains("AND c.relname = $1"),
            "{}",
            sql.table_oid
        );
        assert!(
            sql.history_insert
                .contains("VALUES ($1, $2, $3, $4, $5, $6)")
        );
        assert!(!sql.columns.contains("--"), "comments are dropped");
    }

    #[test]
    fn sch_47_lock_statements_use_the_lock_key() {
        let key = MIGRATION_LOCK_KEY.to_string();
        assert!(TRY_LOCK.contains(&format!("pg_try_advisory_lock({key})")));
        assert!(UNLOCK.contains(&format!("pg_advisory_unlock({key})")));
    }
}
