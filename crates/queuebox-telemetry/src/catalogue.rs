//! The metric catalogue (operations.md §5.2) as data: family names as constants, and one
//! [`FamilySpec`] per family with its type, label names, HELP text (the meaning column) and
//! presence rule. Rendering and the tests both read this table, so it is the one place to edit.

use std::fmt;

/// The Prometheus type of a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Summary,
}

impl MetricType {
    /// The word of the `# TYPE` line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Summary => "summary",
        }
    }
}

impl fmt::Display for MetricType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a family first appears in a scrape (MET-7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    /// From the first scrape, value 0, with every listed label value.
    AtStart,
    /// A series appears once something moves it.
    FirstUse,
}

/// One row of the §5.2 table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FamilySpec {
    pub name: &'static str,
    pub metric_type: MetricType,
    /// Label names, in exposition order (configured-name labels first).
    pub labels: &'static [&'static str],
    pub help: &'static str,
    pub presence: Presence,
}

pub const INFO: &str = "queuebox_info";
pub const UPTIME_SECONDS: &str = "queuebox_uptime_seconds";
pub const OUTBOX_MESSAGES_TOTAL: &str = "queuebox_outbox_messages_total";
pub const OUTBOX_MESSAGES_PENDING: &str = "queuebox_outbox_messages_pending";
pub const OUTBOX_OLDEST_PENDING_AGE_SECONDS: &str = "queuebox_outbox_oldest_pending_age_seconds";
pub const INBOX_OLDEST_PENDING_AGE_SECONDS: &str = "queuebox_inbox_oldest_pending_age_seconds";
pub const OUTBOX_MESSAGES_RECLAIMED_TOTAL: &str = "queuebox_outbox_messages_reclaimed_total";
pub const CLAIMS_LOST_TOTAL: &str = "queuebox_claims_lost_total";
pub const OUTBOX_PROCESS_ERRORS_TOTAL: &str = "queuebox_outbox_process_errors_total";
pub const OUTBOX_PROCESSING_DURATION_SECONDS: &str = "queuebox_outbox_processing_duration_seconds";
pub const OUTBOX_PUBLISH_DURATION_SECONDS: &str = "queuebox_outbox_publish_duration_seconds";
pub const OUTBOX_DESTINATION_MESSAGES_TOTAL: &str = "queuebox_outbox_destination_messages_total";
pub const OUTBOX_QUEUE_DEPTH: &str = "queuebox_outbox_queue_depth";
pub const OUTBOX_DESTINATION_CIRCUIT_STATE: &str = "queuebox_outbox_destination_circuit_state";
pub const OUTBOX_DESTINATION_HELD_TOTAL: &str = "queuebox_outbox_destination_held_total";
pub const HTTP_PUBLISH_RESPONSES_TOTAL: &str = "queuebox_http_publish_responses_total";
pub const TRANSFORM_FAILURES_TOTAL: &str = "queuebox_transform_failures_total";
pub const INBOX_MESSAGES_TOTAL: &str = "queuebox_inbox_messages_total";
pub const INBOX_RELAY_ERRORS_TOTAL: &str = "queuebox_inbox_relay_errors_total";
pub const INBOX_REJECTIONS_TOTAL: &str = "queuebox_inbox_rejections_total";
pub const INBOX_FILTERED_TOTAL: &str = "queuebox_inbox_filtered_total";
pub const CLEANUP_MESSAGES_DELETED_TOTAL: &str = "queuebox_cleanup_messages_deleted_total";
pub const CLEANUP_DURATION_SECONDS: &str = "queuebox_cleanup_duration_seconds";
pub const CLEANUP_LAST_RUN_TIMESTAMP: &str = "queuebox_cleanup_last_run_timestamp";
pub const DB_POOL_CONNECTIONS: &str = "queuebox_db_pool_connections";
pub const DB_POOL_CONNECTIONS_MAX: &str = "queuebox_db_pool_connections_max";
pub const DB_POOL_PENDING: &str = "queuebox_db_pool_pending";
pub const DB_POOL_ACQUIRE_TIMEOUTS_TOTAL: &str = "queuebox_db_pool_acquire_timeouts_total";
pub const DB_POOL_ACQUIRE_DURATION_SECONDS: &str = "queuebox_db_pool_acquire_duration_seconds";
pub const DB_POOL_USAGE_DURATION_SECONDS: &str = "queuebox_db_pool_usage_duration_seconds";
// Operator gauges beyond §5.2 (issue 13 part 4, issue 14 items 9-12).
pub const OUTBOX_OLDEST_PENDING_CREATED_AGE_SECONDS: &str =
    "queuebox_outbox_oldest_pending_created_age_seconds";
pub const OUTBOX_MESSAGES_DEAD: &str = "queuebox_outbox_messages_dead";
pub const INBOX_MESSAGES_PENDING: &str = "queuebox_inbox_messages_pending";
pub const INBOX_SOURCE_MESSAGES_PENDING: &str = "queuebox_inbox_source_messages_pending";
pub const INBOX_OLDEST_PENDING_CREATED_AGE_SECONDS: &str =
    "queuebox_inbox_oldest_pending_created_age_seconds";
pub const INBOX_MESSAGES_DEAD: &str = "queuebox_inbox_messages_dead";
pub const GAUGE_REFRESH_FAILURES_TOTAL: &str = "queuebox_gauge_refresh_failures_total";
pub const GAUGE_LAST_REFRESH_TIMESTAMP: &str = "queuebox_gauge_last_refresh_timestamp";
pub const INBOX_WEBHOOK_REFUSALS_TOTAL: &str = "queuebox_inbox_webhook_refusals_total";
// The intake's memory and connection bounds (issue 17 defect 5).
pub const INBOX_HELD_BYTES: &str = "queuebox_inbox_held_bytes";
pub const HTTP_CONNECTIONS: &str = "queuebox_http_connections";

/// Every family QueueBox exports, in the order of §5.2 (and of the exposition). MET-2: nothing
/// outside this table is ever rendered.
pub fn catalogue() -> &'static [FamilySpec] {
    &CATALOGUE
}

/// The spec of one family by name. Panics on an unknown name: every caller passes one of the
/// constants above, and a typo must fail the first test that builds a `Metrics`.
pub(crate) fn spec(name: &str) -> &'static FamilySpec {
    CATALOGUE
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("metric family {name} is not in the catalogue"))
}

const fn family(
    name: &'static str,
    metric_type: MetricType,
    labels: &'static [&'static str],
    presence: Presence,
    help: &'static str,
) -> FamilySpec {
    FamilySpec {
        name,
        metric_type,
        labels,
        help,
        presence,
    }
}

use MetricType::{Counter, Gauge, Summary};
use Presence::{AtStart, FirstUse};

// HELP texts are the meaning column of §5.2 verbatim (MET-3), markdown backticks included, so
// the docs test can compare them without a translation table.
static CATALOGUE: [FamilySpec; 41] = [
    family(
        INFO,
        Gauge,
        &["version"],
        AtStart,
        "Always 1. `version` is the release version of the running build (for example `1.4.0`); an untagged build reports `0.0.0-dev`.",
    ),
    family(
        UPTIME_SECONDS,
        Gauge,
        &[],
        AtStart,
        "Seconds since the process started.",
    ),
    family(
        OUTBOX_MESSAGES_TOTAL,
        Counter,
        &["status"],
        AtStart,
        "Outbox outcomes: `sent` a row marked sent; `failed` a failed attempt that returns the row to `pending`; `dead` a row marked dead for any reason.",
    ),
    family(
        OUTBOX_MESSAGES_PENDING,
        Gauge,
        &[],
        AtStart,
        "Outbox rows in state `pending` (due or not). Refreshed at most every `outbox.pendingGaugeIntervalMs` (default 5000).",
    ),
    family(
        OUTBOX_OLDEST_PENDING_AGE_SECONDS,
        Gauge,
        &[],
        AtStart,
        "Seconds, by the database clock, since the oldest due `pending` outbox row became due (`now − scheduled_at`); 0 when there is none. Same refresh as above.",
    ),
    family(
        INBOX_OLDEST_PENDING_AGE_SECONDS,
        Gauge,
        &[],
        AtStart,
        "The same for inbox rows in state `pending`, push and pull. Refreshed at most every `inbox.relay.pendingGaugeIntervalMs` (default 5000).",
    ),
    family(
        OUTBOX_MESSAGES_RECLAIMED_TOTAL,
        Counter,
        &[],
        AtStart,
        "Outbox rows returned to `pending` after their lease expired.",
    ),
    family(
        CLAIMS_LOST_TOTAL,
        Counter,
        &["component"],
        AtStart,
        "Fenced writes that affected no row because another owner holds the row (`outbox`: a lease renewal, or the mark sent, retry or dead by the poller; `inbox`: a relay lease renewal, or the relay's processed mark).",
    ),
    family(
        OUTBOX_PROCESS_ERRORS_TOTAL,
        Counter,
        &[],
        AtStart,
        "Unexpected errors that aborted the processing of one outbox message (not publish failures).",
    ),
    family(
        OUTBOX_PROCESSING_DURATION_SECONDS,
        Summary,
        &[],
        FirstUse,
        "Time from the claim of one outbox message to its final write.",
    ),
    family(
        OUTBOX_PUBLISH_DURATION_SECONDS,
        Summary,
        &["destination_type"],
        FirstUse,
        "Duration of one publish call.",
    ),
    family(
        OUTBOX_DESTINATION_MESSAGES_TOTAL,
        Counter,
        &["destination", "outcome"],
        FirstUse,
        "Publish outcomes per destination.",
    ),
    family(
        OUTBOX_QUEUE_DEPTH,
        Gauge,
        &["destination"],
        FirstUse,
        "Messages this instance has claimed for the destination whose publish has not finished.",
    ),
    family(
        OUTBOX_DESTINATION_CIRCUIT_STATE,
        Gauge,
        &["destination"],
        FirstUse,
        "The circuit breaker of a destination with `circuitBreaker`: `0` closed, `1` open, `2` half-open (one probe decides).",
    ),
    family(
        OUTBOX_DESTINATION_HELD_TOTAL,
        Counter,
        &["destination", "reason"],
        FirstUse,
        "Messages held back before their publish without an attempt counted: `rate_limit` by the destination's `rateLimit`, `circuit_open` by its open circuit breaker.",
    ),
    family(
        HTTP_PUBLISH_RESPONSES_TOTAL,
        Counter,
        &["status_class"],
        FirstUse,
        "HTTP destination answers by class, one per response received; `other` is a status outside 100–599. A publish that got no response (timeout, connection error) is not counted here.",
    ),
    family(
        TRANSFORM_FAILURES_TOTAL,
        Counter,
        &["strategy"],
        FirstUse,
        "Transform failures by the configured strategy, every stage.",
    ),
    family(
        INBOX_MESSAGES_TOTAL,
        Counter,
        &["status"],
        AtStart,
        "`new` a row stored as `pending`; `forwarded` a push row relayed to the outbox; `duplicate` a repeat of a stored key.",
    ),
    family(
        INBOX_RELAY_ERRORS_TOTAL,
        Counter,
        &[],
        AtStart,
        "Relay cycles or forwards that failed with an error.",
    ),
    family(
        INBOX_REJECTIONS_TOTAL,
        Counter,
        &["reason"],
        FirstUse,
        "Messages the inbox did not accept as `pending`: `extraction_failed` a body that is not JSON (HTTP 400, or a broker message stored `dead`) or no idempotency key (HTTP 400); `transform_failed` a source transform rejection (HTTP 422, or a broker message stored `dead`); `storage_failed` an insert that failed (HTTP 500, or a broker message not acknowledged).",
    ),
    family(
        INBOX_FILTERED_TOTAL,
        Counter,
        &["source"],
        FirstUse,
        "Messages dropped by a source header filter.",
    ),
    family(
        CLEANUP_MESSAGES_DELETED_TOTAL,
        Counter,
        &["table"],
        FirstUse,
        "Rows deleted by retention.",
    ),
    family(
        CLEANUP_DURATION_SECONDS,
        Summary,
        &["table"],
        FirstUse,
        "Duration of one retention run for one table.",
    ),
    family(
        CLEANUP_LAST_RUN_TIMESTAMP,
        Gauge,
        &["table"],
        FirstUse,
        "Unix time in seconds when the last retention run for the table ended.",
    ),
    family(
        DB_POOL_CONNECTIONS,
        Gauge,
        &["state"],
        AtStart,
        "Connections of the database pool in use and idle.",
    ),
    family(
        DB_POOL_CONNECTIONS_MAX,
        Gauge,
        &[],
        AtStart,
        "The pool's maximum size (`database.poolSize`).",
    ),
    family(
        DB_POOL_PENDING,
        Gauge,
        &[],
        AtStart,
        "Tasks waiting to acquire a connection.",
    ),
    family(
        DB_POOL_ACQUIRE_TIMEOUTS_TOTAL,
        Counter,
        &[],
        AtStart,
        "Acquisitions that gave up after `database.connectionTimeoutMs`.",
    ),
    family(
        DB_POOL_ACQUIRE_DURATION_SECONDS,
        Summary,
        &[],
        FirstUse,
        "Time to acquire a connection.",
    ),
    family(
        DB_POOL_USAGE_DURATION_SECONDS,
        Summary,
        &[],
        FirstUse,
        "Time a connection was held before its return to the pool.",
    ),
    // Beyond §5.2: the operator gauges (issue 13 part 4, issue 14 items 9-12).
    family(
        OUTBOX_OLDEST_PENDING_CREATED_AGE_SECONDS,
        Gauge,
        &[],
        AtStart,
        "Seconds, by the database clock, since the oldest `pending` outbox row was created (`now − created_at`), due or waiting in backoff; 0 when there is none. Same refresh as `queuebox_outbox_messages_pending`.",
    ),
    family(
        OUTBOX_MESSAGES_DEAD,
        Gauge,
        &[],
        AtStart,
        "Outbox rows in state `dead`. Same refresh as `queuebox_outbox_messages_pending`.",
    ),
    family(
        INBOX_MESSAGES_PENDING,
        Gauge,
        &[],
        AtStart,
        "Inbox rows in state `pending`, push and pull, due or not. Refreshed at most every `inbox.relay.pendingGaugeIntervalMs` (default 5000).",
    ),
    family(
        INBOX_SOURCE_MESSAGES_PENDING,
        Gauge,
        &["source"],
        FirstUse,
        "Inbox rows in state `pending` of one configured source (rows of a source no longer configured count only in the total). Same refresh as `queuebox_inbox_messages_pending`.",
    ),
    family(
        INBOX_OLDEST_PENDING_CREATED_AGE_SECONDS,
        Gauge,
        &[],
        AtStart,
        "Seconds, by the database clock, since the oldest `pending` inbox row was created, due or not; 0 when there is none. Same refresh as `queuebox_inbox_messages_pending`.",
    ),
    family(
        INBOX_MESSAGES_DEAD,
        Gauge,
        &[],
        AtStart,
        "Inbox rows in state `dead`. Same refresh as `queuebox_inbox_messages_pending`.",
    ),
    family(
        GAUGE_REFRESH_FAILURES_TOTAL,
        Counter,
        &["component"],
        AtStart,
        "Refreshes of the database gauges of the table that failed; the gauges then keep their last value.",
    ),
    family(
        GAUGE_LAST_REFRESH_TIMESTAMP,
        Gauge,
        &["component"],
        FirstUse,
        "Unix time in seconds of the last successful refresh of the database gauges of the table; a value that stops moving means the gauges are stale.",
    ),
    family(
        INBOX_WEBHOOK_REFUSALS_TOTAL,
        Counter,
        &["source", "reason"],
        FirstUse,
        "Requests to an HTTP source answered with an error, by configured source and reason.",
    ),
    // Beyond §5.2: the intake's bounds (issue 17 defect 5).
    family(
        INBOX_HELD_BYTES,
        Gauge,
        &[],
        AtStart,
        "Bytes of request bodies the HTTP sources hold now, being received or waiting for the database; never above `inbox.maxPendingBytes`.",
    ),
    family(
        HTTP_CONNECTIONS,
        Gauge,
        &["port"],
        FirstUse,
        "Open HTTP connections of a port (`data`, `management`); never above `server.maxConnections`, beyond which new connections wait in the system's backlog.",
    ),
];
