//! Every SQL text of the store, embedded from `migrations/` and `queries/` (one statement per
//! file, in the grammar of `queuebox_core::sql_template`), rendered once per store with
//! SQLite's quotes and `:name` parameters, and the checksum the history records for a
//! migration (SCH-23). No state is ever a parameter (SCH-9).

use queuebox_core::sql_template::{self, Dialect};
use queuebox_core::{SqlIdentifier, TableLayout};
use queuebox_store::StoreError;
use sha2::{Digest, Sha256};

const MIGRATION_1: &str = include_str!("../migrations/0001_create_outbox.sql");
const MIGRATION_2: &str = include_str!("../migrations/0002_create_inbox.sql");
// Issue 14 item 7; the number is reserved in crates/queuebox-store/src/versions.rs.
const MIGRATION_3: &str = include_str!("../migrations/0003_outbox_topic_not_empty.sql");
const MIGRATION_4: &str = include_str!("../migrations/0004_add_inbox_raw_body.sql");
// The admin lists' order (ADM-11); the number is listed in crates/queuebox-store/src/versions.rs.
const MIGRATION_5: &str = include_str!("../migrations/0005_outbox_state_created_index.sql");

/// The SQLite text of a bundled version (schema.md §5.4).
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

/// `{outbox}` and every outbox column by its default name.
fn outbox_names(layout: &TableLayout) -> Vec<(&'static str, &SqlIdentifier)> {
    let mut names = vec![("outbox", &layout.outbox_table)];
    names.extend(
        layout
            .outbox
            .entries()
            .into_iter()
            .map(|(_, default, column)| (default, column)),
    );
    names
}

/// `{inbox}` and every inbox column by its default name.
fn inbox_names(layout: &TableLayout) -> Vec<(&'static str, &SqlIdentifier)> {
    let mut names = vec![("inbox", &layout.inbox_table)];
    names.extend(
        layout
            .inbox
            .entries()
            .into_iter()
            .map(|(_, default, column)| (default, column)),
    );
    names
}

/// The catalog and history statements name no mapped table.
fn no_names(_: &TableLayout) -> Vec<(&'static str, &SqlIdentifier)> {
    Vec::new()
}

/// Renders one bundled file. A file that does not render is a defect of this build, reported
/// when the store opens.
fn render(
    file: &'static str,
    template: &str,
    names: &[(&str, &SqlIdentifier)],
    order: &[&str],
) -> Result<String, StoreError> {
    sql_template::render(template, names, order, Dialect::SQLITE)
        .map(|rendered| rendered.sql)
        .map_err(|err| StoreError::BadTarget {
            reason: format!("the bundled statement {file} cannot be rendered: {err}"),
        })
}

const OUTBOX_FILTER: &[&str] = &[
    "ids",
    "topics",
    "key",
    "created_after",
    "created_before",
    "error_contains",
];
const INBOX_FILTER: &[&str] = &[
    "ids",
    "sources",
    "consumption",
    "event_type",
    "aggregate_id",
    "idempotency_key",
    "created_after",
    "created_before",
    "error_contains",
];

macro_rules! statements {
    ($($field:ident = $file:literal, $names:ident, [$($param:expr),* $(,)?];)*) => {
        /// Every query file, rendered for one layout.
        #[derive(Debug)]
        pub(crate) struct Statements {
            $(pub(crate) $field: String,)*
        }

        impl Statements {
            pub(crate) fn new(layout: &TableLayout) -> Result<Self, StoreError> {
                Ok(Self {
                    $($field: {
                        let parts: &[&[&str]] = &[$(&$param[..]),*];
                        let order: Vec<&str> = parts.concat();
                        render(
                            $file,
                            include_str!(concat!("../queries/", $file)),
                            &$names(layout),
                            &order,
                        )?
                    },)*
                })
            }
        }

        /// Every query file as written, for the file checks.
        #[cfg(test)]
        pub(crate) const FILES: &[(&str, &str)] = &[
            $(($file, include_str!(concat!("../queries/", $file))),)*
        ];
    };
}

statements! {
    ping = "ping.sql", no_names, [];
    table_exists = "catalog/table_exists.sql", no_names, [["name"]];
    columns = "catalog/columns.sql", no_names, [["name"]];
    unique_indexes = "catalog/unique_indexes.sql", no_names, [["name"]];
    index_columns = "catalog/index_columns.sql", no_names, [["name"]];
    history_create = "history/create_table.sql", no_names, [];
    history_insert = "history/insert.sql", no_names, [[
        "version", "description", "kind", "checksum", "queuebox_version", "duration_ms"
    ]];
    history_select = "history/select.sql", no_names, [];
    history_versions = "history/versions.sql", no_names, [];
    outbox_claim = "outbox/claim.sql", outbox_names, [["limit", "lease_ms"]];
    outbox_claim_run = "outbox/claim_run.sql", outbox_names, [["id", "token", "limit", "lease_ms"]];
    outbox_renew = "outbox/renew.sql", outbox_names, [["claims", "lease_ms"]];
    outbox_finish = "outbox/finish.sql", outbox_names, [["writes"]];
    outbox_release = "outbox/release.sql", outbox_names, [["claims"]];
    outbox_reclaim = "outbox/reclaim.sql", outbox_names, [];
    outbox_pending_stats = "outbox/pending_stats.sql", outbox_names, [];
    inbox_insert = "inbox/insert.sql", inbox_names, [["rows"]];
    inbox_store_raw_body = "inbox/store_raw_body.sql", inbox_names, [["id", "raw_body"]];
    inbox_claim = "inbox/claim.sql", inbox_names, [["limit", "cand_limit", "lease_ms", "sources"]];
    inbox_renew = "inbox/renew.sql", inbox_names, [["claims", "lease_ms"]];
    inbox_release = "inbox/release.sql", inbox_names, [["claims", "error"]];
    inbox_dead = "inbox/dead.sql", inbox_names, [["id", "token", "error"]];
    inbox_forward_mark = "inbox/forward_mark.sql", inbox_names, [["id", "token"]];
    inbox_forward_insert = "inbox/forward_insert.sql", outbox_names, [[
        "id", "topic", "key", "payload", "headers", "max_attempts"
    ]];
    inbox_reclaim = "inbox/reclaim.sql", inbox_names, [];
    inbox_oldest_pending_age = "inbox/oldest_pending_age.sql", inbox_names, [];
    inbox_backlog = "inbox/backlog.sql", inbox_names, [];
    retention_outbox_age = "retention/outbox_age.sql", outbox_names, [["max_age_ms", "batch"]];
    retention_outbox_count = "retention/outbox_count.sql", outbox_names, [["keep", "batch"]];
    retention_inbox_age = "retention/inbox_age.sql", inbox_names, [["max_age_ms", "batch"]];
    outbox_list = "operator/outbox_list.sql", outbox_names, [
        ["state"], OUTBOX_FILTER, ["after_created_at", "after_id", "limit"]
    ];
    outbox_show = "operator/outbox_show.sql", outbox_names, [["id"]];
    outbox_replay = "operator/outbox_replay.sql", outbox_names, [OUTBOX_FILTER, ["chunk"]];
    outbox_state = "operator/outbox_state.sql", outbox_names, [["id"]];
    outbox_delete_one = "operator/outbox_delete_one.sql", outbox_names, [["id"]];
    outbox_delete = "operator/outbox_delete.sql", outbox_names, [["state"], OUTBOX_FILTER, ["chunk"]];
    outbox_counts = "operator/outbox_counts.sql", outbox_names, [];
    outbox_topics = "operator/outbox_topics.sql", outbox_names, [];
    inbox_list = "operator/inbox_list.sql", inbox_names, [
        ["state"], INBOX_FILTER, ["after_created_at", "after_id", "limit"]
    ];
    inbox_show = "operator/inbox_show.sql", inbox_names, [["id"]];
    inbox_requeue = "operator/inbox_requeue.sql", inbox_names, [INBOX_FILTER, ["chunk"]];
    inbox_state = "operator/inbox_state.sql", inbox_names, [["id"]];
    inbox_delete_one = "operator/inbox_delete_one.sql", inbox_names, [["id"]];
    inbox_delete = "operator/inbox_delete.sql", inbox_names, [["state"], INBOX_FILTER, ["chunk"]];
    inbox_counts = "operator/inbox_counts.sql", inbox_names, [];
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
    fn every_query_file_states_its_locking_and_isolation_first() {
        for (file, text) in FILES {
            let first = text.lines().next().unwrap_or_default();
            assert!(
                first.starts_with("-- Locking: ") && first.contains("Isolation: "),
                "{file}: {first}"
            );
        }
    }

    #[test]
    fn every_statement_renders_for_the_default_and_a_mapped_layout() {
        let sql = Statements::new(&TableLayout::default()).expect("render");
        assert!(
            sql.outbox_claim.contains("LIMIT :limit"),
            "{}",
            sql.outbox_claim
        );
        assert!(!sql.outbox_claim.contains("--"), "comments are dropped");
        let mut layout = TableLayout::default();
        let id = |s: &str| SqlIdentifier::parse(s).expect("identifier");
        layout.outbox_table = id("events_out");
        assert!(layout.outbox.set("sequence", id("seq_no")));
        let mapped = Statements::new(&layout).expect("render mapped");
        assert!(mapped.outbox_claim.contains("\"events_out\""));
        assert!(mapped.outbox_claim.contains("\"seq_no\""));
        assert!(!mapped.outbox_claim.contains("\"sequence\""));
    }
}
