//! Every SQL text of the store, embedded from `migrations/` and `queries/`, rendered once per
//! store in QueueBox's one SQL grammar (`queuebox_core::sql_template`) with MySQL's backtick
//! quotes and `?` parameters, and the checksum the history records for a migration (SCH-23).
//!
//! A rendered [`Stmt`] keeps the name of every `?` in order of appearance, so a caller binds
//! its values by name ([`Stmt::params`]) and a name used twice in a file is bound twice.

use mysql_async::{Params, Value};
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

/// The MySQL text of a bundled version (schema.md §5.3): one `CREATE TABLE IF NOT EXISTS`
/// statement each, so running it again changes nothing (SCH-45).
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

macro_rules! files {
    ($($name:ident = $path:literal;)+) => {
        $(pub(crate) const $name: (&str, &str) = ($path, include_str!(concat!("../queries/", $path)));)+
        /// Every query file, for the tests of their first comment line.
        #[cfg(test)]
        pub(crate) const ALL_FILES: &[(&str, &str)] = &[$($name),+];
    };
}

files! {
    PING = "ping.sql";
    SERVER_VERSION = "server_version.sql";
    TABLE_EXISTS = "catalog/table_exists.sql";
    COLUMNS = "catalog/columns.sql";
    UNIQUE_KEYS = "catalog/unique_keys.sql";
    ID_INDEX = "catalog/id_index.sql";
    HISTORY_CREATE = "history/create_table.sql";
    HISTORY_INSERT = "history/insert.sql";
    HISTORY_SELECT = "history/select.sql";
    HISTORY_VERSIONS = "history/versions.sql";
    GET_LOCK = "lock/get_lock.sql";
    RELEASE_LOCK = "lock/release_lock.sql";
    OUTBOX_CLAIM_SELECT = "outbox/claim_select.sql";
    OUTBOX_CLAIM_UPDATE = "outbox/claim_update.sql";
    OUTBOX_FENCE = "outbox/fence.sql";
    OUTBOX_RUN_FENCE = "outbox/run_fence.sql";
    OUTBOX_RUN_NEXT = "outbox/run_next.sql";
    OUTBOX_RENEW = "outbox/renew.sql";
    OUTBOX_FINISH = "outbox/finish.sql";
    OUTBOX_RELEASE = "outbox/release.sql";
    OUTBOX_RECLAIM_SELECT = "outbox/reclaim_select.sql";
    OUTBOX_RECLAIM = "outbox/reclaim.sql";
    OUTBOX_PENDING_STATS = "outbox/pending_stats.sql";
    INBOX_INSERT = "inbox/insert.sql";
    INBOX_STORED = "inbox/stored.sql";
    INBOX_STORE_RAW_BODY = "inbox/store_raw_body.sql";
    INBOX_CLAIM_LOCK = "inbox/claim_lock.sql";
    INBOX_CLAIM_UNLOCK = "inbox/claim_unlock.sql";
    INBOX_CLAIM_SELECT = "inbox/claim_select.sql";
    INBOX_CLAIM_UPDATE = "inbox/claim_update.sql";
    INBOX_FENCE = "inbox/fence.sql";
    INBOX_RENEW = "inbox/renew.sql";
    INBOX_RELEASE = "inbox/release.sql";
    INBOX_FORWARD_INSERT = "inbox/forward_insert.sql";
    INBOX_FORWARD_MARK = "inbox/forward_mark.sql";
    INBOX_DEAD = "inbox/dead.sql";
    INBOX_RECLAIM_SELECT = "inbox/reclaim_select.sql";
    INBOX_RECLAIM = "inbox/reclaim.sql";
    INBOX_OLDEST_PENDING_AGE = "inbox/oldest_pending_age.sql";
    INBOX_BACKLOG = "inbox/backlog.sql";
    RETENTION_OUTBOX_AGE = "retention/outbox_age.sql";
    RETENTION_OUTBOX_COUNT = "retention/outbox_count.sql";
    RETENTION_INBOX_AGE = "retention/inbox_age.sql";
    OP_OUTBOX_LIST = "operator/outbox_list.sql";
    OP_OUTBOX_SHOW = "operator/outbox_show.sql";
    OP_OUTBOX_REPLAY_SELECT = "operator/outbox_replay_select.sql";
    OP_OUTBOX_REPLAY = "operator/outbox_replay.sql";
    OP_OUTBOX_DELETE_ONE = "operator/outbox_delete_one.sql";
    OP_OUTBOX_STATE_OF = "operator/outbox_state_of.sql";
    OP_OUTBOX_DELETE_SELECT = "operator/outbox_delete_select.sql";
    OP_OUTBOX_DELETE_IDS = "operator/outbox_delete_ids.sql";
    OP_OUTBOX_COUNTS = "operator/outbox_counts.sql";
    OP_OUTBOX_TOPICS = "operator/outbox_topics.sql";
    OP_INBOX_LIST = "operator/inbox_list.sql";
    OP_INBOX_SHOW = "operator/inbox_show.sql";
    OP_INBOX_REQUEUE_SELECT = "operator/inbox_requeue_select.sql";
    OP_INBOX_REQUEUE = "operator/inbox_requeue.sql";
    OP_INBOX_DELETE_ONE = "operator/inbox_delete_one.sql";
    OP_INBOX_STATE_OF = "operator/inbox_state_of.sql";
    OP_INBOX_DELETE_SELECT = "operator/inbox_delete_select.sql";
    OP_INBOX_DELETE_IDS = "operator/inbox_delete_ids.sql";
    OP_INBOX_COUNTS = "operator/inbox_counts.sql";
}

/// One rendered statement and the parameter name of each `?`, in order.
#[derive(Clone, Debug)]
pub(crate) struct Stmt {
    pub(crate) sql: String,
    binds: Vec<String>,
}

impl Stmt {
    /// The positional parameters for these named values. A name the statement uses but the
    /// caller did not give is a defect of this crate; it binds NULL, which the tests catch.
    pub(crate) fn params(&self, values: &[(&str, Value)]) -> Params {
        if self.binds.is_empty() {
            return Params::Empty;
        }
        Params::Positional(
            self.binds
                .iter()
                .map(|name| {
                    values
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                        .unwrap_or(Value::NULL)
                })
                .collect(),
        )
    }
}

/// The unique index on the id column of each table, named in the `FORCE INDEX` of the
/// statements that find rows by a JSON array of ids (see their files): `None` for a table
/// without one, whose statements then go without the hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IdIndexes {
    pub(crate) outbox: Option<SqlIdentifier>,
    pub(crate) inbox: Option<SqlIdentifier>,
}

impl Default for IdIndexes {
    /// The names of schema.md §5.3, which QueueBox's migrations create.
    fn default() -> Self {
        Self {
            outbox: SqlIdentifier::parse("uq_outbox_id").ok(),
            inbox: SqlIdentifier::parse("PRIMARY").ok(),
        }
    }
}

/// The stand-in name of a missing index, removed with its hint after rendering.
const NO_INDEX: &str = "queuebox_no_index";

/// `{outbox}` and every outbox column by its default name, and the outbox's id index.
fn names<'a>(
    layout: &'a TableLayout,
    index: &'a SqlIdentifier,
) -> Vec<(&'static str, &'a SqlIdentifier)> {
    let mut names = vec![
        ("outbox", &layout.outbox_table),
        ("inbox", &layout.inbox_table),
        ("outbox_id_index", index),
    ];
    for (_, default, column) in layout.outbox.entries() {
        names.push((default, column));
    }
    names
}

/// `{inbox}` and every inbox column by its default name, and the inbox's id index.
fn inbox_names<'a>(
    layout: &'a TableLayout,
    index: &'a SqlIdentifier,
) -> Vec<(&'static str, &'a SqlIdentifier)> {
    let mut names = vec![("inbox", &layout.inbox_table), ("inbox_id_index", index)];
    for (_, default, column) in layout.inbox.entries() {
        names.push((default, column));
    }
    names
}

/// Renders one bundled file; `order` names every parameter the file uses.
fn render(
    (file, template): (&str, &str),
    names: &[(&str, &SqlIdentifier)],
    order: &[&str],
) -> Result<Stmt, StoreError> {
    sql_template::render(template, names, order, Dialect::MYSQL)
        .map(|r| Stmt {
            sql: r.sql.replace(&format!(" FORCE INDEX (`{NO_INDEX}`)"), ""),
            binds: r.binds,
        })
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

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

/// Every statement of one store, with its layout's names.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) ping: Stmt,
    pub(crate) server_version: Stmt,
    pub(crate) table_exists: Stmt,
    pub(crate) columns: Stmt,
    pub(crate) unique_keys: Stmt,
    pub(crate) id_index: Stmt,
    pub(crate) history_create: Stmt,
    pub(crate) history_insert: Stmt,
    pub(crate) history_select: Stmt,
    pub(crate) history_versions: Stmt,
    pub(crate) get_lock: Stmt,
    pub(crate) release_lock: Stmt,
    pub(crate) outbox_claim_select: Stmt,
    pub(crate) outbox_claim_update: Stmt,
    pub(crate) outbox_fence: Stmt,
    pub(crate) outbox_run_fence: Stmt,
    pub(crate) outbox_run_next: Stmt,
    pub(crate) outbox_renew: Stmt,
    pub(crate) outbox_finish: Stmt,
    pub(crate) outbox_release: Stmt,
    pub(crate) outbox_reclaim_select: Stmt,
    pub(crate) outbox_reclaim: Stmt,
    pub(crate) outbox_pending_stats: Stmt,
    pub(crate) inbox_insert: Stmt,
    pub(crate) inbox_store_raw_body: Stmt,
    pub(crate) inbox_stored: Stmt,
    pub(crate) inbox_claim_lock: Stmt,
    pub(crate) inbox_claim_unlock: Stmt,
    pub(crate) inbox_claim_select: Stmt,
    pub(crate) inbox_claim_update: Stmt,
    pub(crate) inbox_fence: Stmt,
    pub(crate) inbox_renew: Stmt,
    pub(crate) inbox_release: Stmt,
    pub(crate) inbox_forward_insert: Stmt,
    pub(crate) inbox_forward_mark: Stmt,
    pub(crate) inbox_dead: Stmt,
    pub(crate) inbox_reclaim_select: Stmt,
    pub(crate) inbox_reclaim: Stmt,
    pub(crate) inbox_oldest_pending_age: Stmt,
    pub(crate) inbox_backlog: Stmt,
    pub(crate) retention_outbox_age: Stmt,
    pub(crate) retention_outbox_count: Stmt,
    pub(crate) retention_inbox_age: Stmt,
    pub(crate) outbox_list: Stmt,
    pub(crate) outbox_show: Stmt,
    pub(crate) outbox_replay_select: Stmt,
    pub(crate) outbox_replay: Stmt,
    pub(crate) outbox_delete_one: Stmt,
    pub(crate) outbox_state_of: Stmt,
    pub(crate) outbox_delete_select: Stmt,
    pub(crate) outbox_delete_ids: Stmt,
    pub(crate) outbox_counts: Stmt,
    pub(crate) outbox_topics: Stmt,
    pub(crate) inbox_list: Stmt,
    pub(crate) inbox_show: Stmt,
    pub(crate) inbox_requeue_select: Stmt,
    pub(crate) inbox_requeue: Stmt,
    pub(crate) inbox_delete_one: Stmt,
    pub(crate) inbox_state_of: Stmt,
    pub(crate) inbox_delete_select: Stmt,
    pub(crate) inbox_delete_ids: Stmt,
    pub(crate) inbox_counts: Stmt,
}

impl Statements {
    pub(crate) fn new(layout: &TableLayout, indexes: &IdIndexes) -> Result<Self, StoreError> {
        let none_index = SqlIdentifier::parse(NO_INDEX).map_err(|e| StoreError::BadTarget {
            reason: format!("the index stand-in is no identifier: {e}"),
        })?;
        let out = names(layout, indexes.outbox.as_ref().unwrap_or(&none_index));
        let inb = inbox_names(layout, indexes.inbox.as_ref().unwrap_or(&none_index));
        let o = |file, order: &[&str]| render(file, &out, order);
        let i = |file, order: &[&str]| render(file, &inb, order);
        let none: &[&str] = &[];
        Ok(Self {
            ping: o(PING, none)?,
            server_version: o(SERVER_VERSION, none)?,
            table_exists: o(TABLE_EXISTS, &["name"])?,
            columns: o(COLUMNS, &["name"])?,
            unique_keys: o(UNIQUE_KEYS, &["name"])?,
            id_index: o(ID_INDEX, &["name", "column"])?,
            history_create: o(HISTORY_CREATE, none)?,
            history_insert: o(
                HISTORY_INSERT,
                &[
                    "version",
                    "description",
                    "kind",
                    "checksum",
                    "queuebox_version",
                    "duration_ms",
                ],
            )?,
            history_select: o(HISTORY_SELECT, none)?,
            history_versions: o(HISTORY_VERSIONS, none)?,
            get_lock: o(GET_LOCK, &["seconds"])?,
            release_lock: o(RELEASE_LOCK, none)?,
            outbox_claim_select: o(OUTBOX_CLAIM_SELECT, &["limit"])?,
            outbox_claim_update: o(OUTBOX_CLAIM_UPDATE, &["claims", "lease_ms"])?,
            outbox_fence: o(OUTBOX_FENCE, &["claims"])?,
            outbox_run_fence: o(OUTBOX_RUN_FENCE, &["claims"])?,
            outbox_run_next: o(OUTBOX_RUN_NEXT, &["key", "seq", "limit"])?,
            outbox_renew: o(OUTBOX_RENEW, &["claims", "lease_ms"])?,
            outbox_finish: o(OUTBOX_FINISH, &["writes"])?,
            outbox_release: o(OUTBOX_RELEASE, &["claims"])?,
            outbox_reclaim_select: o(OUTBOX_RECLAIM_SELECT, none)?,
            outbox_reclaim: o(OUTBOX_RECLAIM, &["ids"])?,
            outbox_pending_stats: o(OUTBOX_PENDING_STATS, none)?,
            inbox_insert: i(INBOX_INSERT, &["rows"])?,
            inbox_stored: i(INBOX_STORED, &["ids"])?,
            inbox_store_raw_body: i(INBOX_STORE_RAW_BODY, &["raw_body", "id"])?,
            inbox_claim_lock: i(INBOX_CLAIM_LOCK, &["name"])?,
            inbox_claim_unlock: i(INBOX_CLAIM_UNLOCK, &["name"])?,
            inbox_claim_select: i(INBOX_CLAIM_SELECT, &["sources", "cand_limit"])?,
            inbox_claim_update: i(INBOX_CLAIM_UPDATE, &["claims", "lease_ms"])?,
            inbox_fence: i(INBOX_FENCE, &["claims"])?,
            inbox_renew: i(INBOX_RENEW, &["claims", "lease_ms"])?,
            inbox_release: i(INBOX_RELEASE, &["claims", "error"])?,
            inbox_forward_insert: o(
                INBOX_FORWARD_INSERT,
                &["id", "topic", "key", "payload", "headers", "max_attempts"],
            )?,
            inbox_forward_mark: i(INBOX_FORWARD_MARK, &["id", "token"])?,
            inbox_dead: i(INBOX_DEAD, &["id", "token", "error"])?,
            inbox_reclaim_select: i(INBOX_RECLAIM_SELECT, none)?,
            inbox_reclaim: i(INBOX_RECLAIM, &["ids"])?,
            inbox_oldest_pending_age: i(INBOX_OLDEST_PENDING_AGE, none)?,
            inbox_backlog: i(INBOX_BACKLOG, none)?,
            retention_outbox_age: o(RETENTION_OUTBOX_AGE, &["max_age_ms", "batch"])?,
            retention_outbox_count: o(RETENTION_OUTBOX_COUNT, &["keep", "batch"])?,
            retention_inbox_age: i(RETENTION_INBOX_AGE, &["max_age_ms", "batch"])?,
            outbox_list: o(
                OP_OUTBOX_LIST,
                &with(
                    &with(&["state"], OUTBOX_FILTER),
                    &["after_created_at", "after_id", "limit"],
                ),
            )?,
            outbox_show: o(OP_OUTBOX_SHOW, &["id"])?,
            outbox_replay_select: o(OP_OUTBOX_REPLAY_SELECT, &with(OUTBOX_FILTER, &["chunk"]))?,
            outbox_replay: o(OP_OUTBOX_REPLAY, &["ids"])?,
            outbox_delete_one: o(OP_OUTBOX_DELETE_ONE, &["id"])?,
            outbox_state_of: o(OP_OUTBOX_STATE_OF, &["id"])?,
            outbox_delete_select: o(
                OP_OUTBOX_DELETE_SELECT,
                &with(&with(&["state"], OUTBOX_FILTER), &["chunk"]),
            )?,
            outbox_delete_ids: o(OP_OUTBOX_DELETE_IDS, &["ids"])?,
            outbox_counts: o(OP_OUTBOX_COUNTS, none)?,
            outbox_topics: o(OP_OUTBOX_TOPICS, none)?,
            inbox_list: i(
                OP_INBOX_LIST,
                &with(
                    &with(&["state"], INBOX_FILTER),
                    &["after_created_at", "after_id", "limit"],
                ),
            )?,
            inbox_show: i(OP_INBOX_SHOW, &["id"])?,
            inbox_requeue_select: i(OP_INBOX_REQUEUE_SELECT, &with(INBOX_FILTER, &["chunk"]))?,
            inbox_requeue: i(OP_INBOX_REQUEUE, &["ids"])?,
            inbox_delete_one: i(OP_INBOX_DELETE_ONE, &["id"])?,
            inbox_state_of: i(OP_INBOX_STATE_OF, &["id"])?,
            inbox_delete_select: i(
                OP_INBOX_DELETE_SELECT,
                &with(&with(&["state"], INBOX_FILTER), &["chunk"]),
            )?,
            inbox_delete_ids: i(OP_INBOX_DELETE_IDS, &["ids"])?,
            inbox_counts: i(OP_INBOX_COUNTS, none)?,
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
    fn every_query_file_states_its_locking_and_isolation_first() {
        for (file, text) in ALL_FILES {
            let first = text.lines().next().unwrap_or_default();
            assert!(
                first.starts_with("-- Locking: ") && first.contains("Isolation: "),
                "{file}: {first}"
            );
        }
    }

    #[test]
    fn sch_10_every_statement_renders_with_backticks_and_question_marks() {
        let s = Statements::new(&TableLayout::default(), &IdIndexes::default()).expect("render");
        assert!(
            s.outbox_claim_select
                .sql
                .contains("o.`key` IS NULL OR o.`key` = ''")
        );
        assert!(
            s.outbox_claim_select
                .sql
                .ends_with("LIMIT ?\nFOR UPDATE SKIP LOCKED")
        );
        assert_eq!(s.inbox_release.binds, vec!["claims", "error", "error"]);
        assert!(!s.outbox_finish.sql.contains("--"), "comments are dropped");
    }

    #[test]
    fn sch_38_mapped_names_replace_every_default() {
        let id = |s: &str| SqlIdentifier::parse(s).expect("identifier");
        let mut layout = TableLayout {
            outbox_table: id("events_out"),
            inbox_table: id("events_in"),
            ..TableLayout::default()
        };
        assert!(layout.outbox.set("sequence", id("seq_no")));
        assert!(layout.inbox.set("state", id("status")));
        let s = Statements::new(&layout, &IdIndexes::default()).expect("render");
        assert!(
            s.outbox_claim_select
                .sql
                .contains("p.`seq_no` < o.`seq_no`")
        );
        assert!(s.inbox_claim_select.sql.contains("i.`status` = 'pending'"));
        assert!(!s.inbox_forward_mark.sql.contains("`inbox`"));
        assert!(s.inbox_forward_insert.sql.contains("`events_out`"));
    }

    #[test]
    fn a_missing_id_index_drops_the_hint() {
        let layout = TableLayout::default();
        let with = Statements::new(&layout, &IdIndexes::default()).expect("render");
        assert!(
            with.outbox_fence
                .sql
                .contains("STRAIGHT_JOIN `outbox` t FORCE INDEX (`uq_outbox_id`)")
        );
        assert!(with.inbox_fence.sql.contains("FORCE INDEX (`PRIMARY`)"));
        let none = IdIndexes {
            outbox: None,
            inbox: None,
        };
        let without = Statements::new(&layout, &none).expect("render");
        assert!(
            without
                .outbox_fence
                .sql
                .contains("STRAIGHT_JOIN `outbox` t\n")
        );
        assert!(!without.inbox_stored.sql.contains("FORCE INDEX"));
    }

    #[test]
    fn positional_params_follow_the_occurrences() {
        let s = Statements::new(&TableLayout::default(), &IdIndexes::default()).expect("render");
        let params = s.inbox_release.params(&[
            ("claims", Value::from("[]")),
            ("error", Value::from("boom")),
        ]);
        match params {
            Params::Positional(values) => {
                assert_eq!(
                    values,
                    vec![Value::from("[]"), Value::from("boom"), Value::from("boom")]
                );
            }
            other => panic!("positional expected: {other:?}"),
        }
    }
}
