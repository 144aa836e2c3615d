//! QueueBox's metric registry and its Prometheus text exposition (operations.md §5): every family
//! of the §5.2 catalogue, typed methods for the code that moves them, and `render` for `/metrics`.
//!
//! Label values come only from fixed-set enums ([`OutboxStatus`], [`Table`], …) or from configured names (destination,
//! source), never from message data (MET-5). A scrape reads atomics and small locked maps only;
//! gauges that need the database are set by the tasks that query it (MET-6).

mod catalogue;
mod family;
mod handles;
mod labels;
mod render;
mod summary;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

pub use catalogue::*;
pub use handles::{Clock, CounterHandle, GaugeHandle, SystemClock};
pub use labels::{
    DestinationType, HeldReason, InboxStatus, OutboxStatus, PoolState, Port, PublishOutcome,
    RefusalReason, RejectionReason, StatusClass, Table, TransformStrategy,
};
pub use render::CONTENT_TYPE;
pub use summary::SummaryHandle;

use family::{Collect, EnumFamily, InfoFamily, NamedFamily, UptimeFamily};
use handles::TimeBase;
use labels::NoLabels;

/// A snapshot of the database pool, as the pool reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbPoolStatus {
    /// Connections handed out.
    pub active: u64,
    /// Connections open and waiting in the pool.
    pub idle: u64,
    /// `database.poolSize`.
    pub max: u64,
    /// Tasks waiting to acquire a connection.
    pub pending: u64,
}

/// The registry. Cheap to clone (one `Arc`); every clone moves the same series.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

type Counters<E> = EnumFamily<E, CounterHandle>;
type Gauges<E> = EnumFamily<E, GaugeHandle>;
type Summaries<E> = EnumFamily<E, SummaryHandle>;

struct Inner {
    info: InfoFamily,
    uptime: UptimeFamily,
    outbox_messages: Counters<OutboxStatus>,
    outbox_pending: Gauges<NoLabels>,
    outbox_oldest_pending_age: Gauges<NoLabels>,
    inbox_oldest_pending_age: Gauges<NoLabels>,
    outbox_reclaimed: Counters<NoLabels>,
    claims_lost: Counters<Table>,
    outbox_process_errors: Counters<NoLabels>,
    outbox_processing_duration: Summaries<NoLabels>,
    publish_duration: Summaries<DestinationType>,
    destination_messages: NamedFamily<PublishOutcome, CounterHandle>,
    queue_depth: NamedFamily<NoLabels, GaugeHandle>,
    circuit_state: NamedFamily<NoLabels, GaugeHandle>,
    destination_held: NamedFamily<HeldReason, CounterHandle>,
    http_publish_responses: Counters<StatusClass>,
    transform_failures: Counters<TransformStrategy>,
    inbox_messages: Counters<InboxStatus>,
    inbox_relay_errors: Counters<NoLabels>,
    inbox_rejections: Counters<RejectionReason>,
    inbox_filtered: NamedFamily<NoLabels, CounterHandle>,
    cleanup_deleted: Counters<Table>,
    cleanup_duration: Summaries<Table>,
    cleanup_last_run: Gauges<Table>,
    db_pool_connections: Gauges<PoolState>,
    db_pool_max: Gauges<NoLabels>,
    db_pool_pending: Gauges<NoLabels>,
    db_pool_acquire_timeouts: Counters<NoLabels>,
    db_pool_acquire_duration: Summaries<NoLabels>,
    db_pool_usage_duration: Summaries<NoLabels>,
    outbox_oldest_created_age: Gauges<NoLabels>,
    outbox_dead: Gauges<NoLabels>,
    inbox_pending: Gauges<NoLabels>,
    inbox_source_pending: NamedFamily<NoLabels, GaugeHandle>,
    inbox_oldest_created_age: Gauges<NoLabels>,
    inbox_dead: Gauges<NoLabels>,
    gauge_refresh_failures: Counters<Table>,
    gauge_last_refresh: Gauges<Table>,
    webhook_refusals: NamedFamily<RefusalReason, CounterHandle>,
    inbox_held_bytes: Gauges<NoLabels>,
    http_connections: Gauges<Port>,
}

impl Inner {
    /// Every family, in catalogue order (a test holds this list to `catalogue()`).
    fn families(&self) -> [&dyn Collect; 41] {
        [
            &self.info,
            &self.uptime,
            &self.outbox_messages,
            &self.outbox_pending,
            &self.outbox_oldest_pending_age,
            &self.inbox_oldest_pending_age,
            &self.outbox_reclaimed,
            &self.claims_lost,
            &self.outbox_process_errors,
            &self.outbox_processing_duration,
            &self.publish_duration,
            &self.destination_messages,
            &self.queue_depth,
            &self.circuit_state,
            &self.destination_held,
            &self.http_publish_responses,
            &self.transform_failures,
            &self.inbox_messages,
            &self.inbox_relay_errors,
            &self.inbox_rejections,
            &self.inbox_filtered,
            &self.cleanup_deleted,
            &self.cleanup_duration,
            &self.cleanup_last_run,
            &self.db_pool_connections,
            &self.db_pool_max,
            &self.db_pool_pending,
            &self.db_pool_acquire_timeouts,
            &self.db_pool_acquire_duration,
            &self.db_pool_usage_duration,
            &self.outbox_oldest_created_age,
            &self.outbox_dead,
            &self.inbox_pending,
            &self.inbox_source_pending,
            &self.inbox_oldest_created_age,
            &self.inbox_dead,
            &self.gauge_refresh_failures,
            &self.gauge_last_refresh,
            &self.webhook_refusals,
            &self.inbox_held_bytes,
            &self.http_connections,
        ]
    }
}

impl Metrics {
    /// A registry on the system clock. `version` is the `queuebox_info` label: the binary passes
    /// its release version (`0.0.0-dev` for an untagged build). Create it at process start: it
    /// is the origin of `queuebox_uptime_seconds`.
    pub fn new(version: &str) -> Self {
        Self::with_clock(version, Arc::new(SystemClock))
    }

    /// A registry on the given clock (tests move time without sleeping).
    pub fn with_clock(version: &str, clock: Arc<dyn Clock>) -> Self {
        let t = &Arc::new(TimeBase::new(clock));
        let inner = Inner {
            info: InfoFamily {
                spec: spec(INFO),
                version: version.to_owned(),
            },
            uptime: UptimeFamily {
                spec: spec(UPTIME_SECONDS),
                time: Arc::clone(t),
            },
            outbox_messages: EnumFamily::new(OUTBOX_MESSAGES_TOTAL, t),
            outbox_pending: EnumFamily::new(OUTBOX_MESSAGES_PENDING, t),
            outbox_oldest_pending_age: EnumFamily::new(OUTBOX_OLDEST_PENDING_AGE_SECONDS, t),
            inbox_oldest_pending_age: EnumFamily::new(INBOX_OLDEST_PENDING_AGE_SECONDS, t),
            outbox_reclaimed: EnumFamily::new(OUTBOX_MESSAGES_RECLAIMED_TOTAL, t),
            claims_lost: EnumFamily::new(CLAIMS_LOST_TOTAL, t),
            outbox_process_errors: EnumFamily::new(OUTBOX_PROCESS_ERRORS_TOTAL, t),
            outbox_processing_duration: EnumFamily::new(OUTBOX_PROCESSING_DURATION_SECONDS, t),
            publish_duration: EnumFamily::new(OUTBOX_PUBLISH_DURATION_SECONDS, t),
            destination_messages: NamedFamily::new(OUTBOX_DESTINATION_MESSAGES_TOTAL, t),
            queue_depth: NamedFamily::new(OUTBOX_QUEUE_DEPTH, t),
            circuit_state: NamedFamily::new(OUTBOX_DESTINATION_CIRCUIT_STATE, t),
            destination_held: NamedFamily::new(OUTBOX_DESTINATION_HELD_TOTAL, t),
            http_publish_responses: EnumFamily::new(HTTP_PUBLISH_RESPONSES_TOTAL, t),
            transform_failures: EnumFamily::new(TRANSFORM_FAILURES_TOTAL, t),
            inbox_messages: EnumFamily::new(INBOX_MESSAGES_TOTAL, t),
            inbox_relay_errors: EnumFamily::new(INBOX_RELAY_ERRORS_TOTAL, t),
            inbox_rejections: EnumFamily::new(INBOX_REJECTIONS_TOTAL, t),
            inbox_filtered: NamedFamily::new(INBOX_FILTERED_TOTAL, t),
            cleanup_deleted: EnumFamily::new(CLEANUP_MESSAGES_DELETED_TOTAL, t),
            cleanup_duration: EnumFamily::new(CLEANUP_DURATION_SECONDS, t),
            cleanup_last_run: EnumFamily::new(CLEANUP_LAST_RUN_TIMESTAMP, t),
            db_pool_connections: EnumFamily::new(DB_POOL_CONNECTIONS, t),
            db_pool_max: EnumFamily::new(DB_POOL_CONNECTIONS_MAX, t),
            db_pool_pending: EnumFamily::new(DB_POOL_PENDING, t),
            db_pool_acquire_timeouts: EnumFamily::new(DB_POOL_ACQUIRE_TIMEOUTS_TOTAL, t),
            db_pool_acquire_duration: EnumFamily::new(DB_POOL_ACQUIRE_DURATION_SECONDS, t),
            db_pool_usage_duration: EnumFamily::new(DB_POOL_USAGE_DURATION_SECONDS, t),
            outbox_oldest_created_age: EnumFamily::new(
                OUTBOX_OLDEST_PENDING_CREATED_AGE_SECONDS,
                t,
            ),
            outbox_dead: EnumFamily::new(OUTBOX_MESSAGES_DEAD, t),
            inbox_pending: EnumFamily::new(INBOX_MESSAGES_PENDING, t),
            inbox_source_pending: NamedFamily::new(INBOX_SOURCE_MESSAGES_PENDING, t),
            inbox_oldest_created_age: EnumFamily::new(INBOX_OLDEST_PENDING_CREATED_AGE_SECONDS, t),
            inbox_dead: EnumFamily::new(INBOX_MESSAGES_DEAD, t),
            gauge_refresh_failures: EnumFamily::new(GAUGE_REFRESH_FAILURES_TOTAL, t),
            gauge_last_refresh: EnumFamily::new(GAUGE_LAST_REFRESH_TIMESTAMP, t),
            webhook_refusals: NamedFamily::new(INBOX_WEBHOOK_REFUSALS_TOTAL, t),
            inbox_held_bytes: EnumFamily::new(INBOX_HELD_BYTES, t),
            http_connections: EnumFamily::new(HTTP_CONNECTIONS, t),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The whole exposition, in catalogue order; serve it with [`CONTENT_TYPE`].
    pub fn render(&self) -> String {
        render::render(&self.inner.families())
    }

    // --- outbox -------------------------------------------------------------------------------

    /// `queuebox_outbox_messages_total{status}`.
    pub fn outbox_messages(&self, status: OutboxStatus) -> &CounterHandle {
        self.inner.outbox_messages.get(status)
    }

    /// Sets `queuebox_outbox_messages_pending` and `queuebox_outbox_oldest_pending_age_seconds`
    /// from one refresh query. On a failed refresh, do not call: the last value stays (MET-6).
    pub fn set_outbox_pending(&self, count: u64, oldest_age_secs: f64) {
        self.inner.outbox_pending.get(NoLabels).set(count as f64);
        let age = &self.inner.outbox_oldest_pending_age;
        age.get(NoLabels).set(oldest_age_secs);
    }

    /// `queuebox_outbox_messages_reclaimed_total`.
    pub fn outbox_reclaimed(&self) -> &CounterHandle {
        self.inner.outbox_reclaimed.get(NoLabels)
    }

    /// `queuebox_claims_lost_total{component}`.
    pub fn claims_lost(&self, table: Table) -> &CounterHandle {
        self.inner.claims_lost.get(table)
    }

    /// `queuebox_outbox_process_errors_total`.
    pub fn outbox_process_errors(&self) -> &CounterHandle {
        self.inner.outbox_process_errors.get(NoLabels)
    }

    /// `queuebox_outbox_processing_duration_seconds`.
    pub fn outbox_processing_duration(&self) -> &SummaryHandle {
        self.inner.outbox_processing_duration.get(NoLabels)
    }

    /// `queuebox_outbox_publish_duration_seconds{destination_type}`.
    pub fn publish_duration(&self, destination_type: DestinationType) -> &SummaryHandle {
        self.inner.publish_duration.get(destination_type)
    }

    /// `queuebox_outbox_destination_messages_total{destination,outcome}`. Takes a lock to find
    /// the series; a publish loop should keep [`Self::destination_messages_handle`] instead.
    pub fn destination_messages(
        &self,
        destination: &str,
        outcome: PublishOutcome,
    ) -> CounterHandle {
        self.destination_messages_handle(destination, outcome)
    }

    /// The series for a configured destination, to keep and move without a lock. Looking it up
    /// does not make it appear: it shows from its first `inc` (MET-7).
    pub fn destination_messages_handle(
        &self,
        destination: &str,
        outcome: PublishOutcome,
    ) -> CounterHandle {
        self.inner.destination_messages.get(destination, outcome)
    }

    /// `queuebox_outbox_queue_depth{destination}`, for a configured destination; keep the handle.
    /// It appears from its first `set`/`inc`/`dec`.
    pub fn queue_depth(&self, destination: &str) -> GaugeHandle {
        self.inner.queue_depth.get(destination, NoLabels)
    }

    /// `queuebox_outbox_destination_circuit_state{destination}` of a destination with a circuit
    /// breaker; keep the handle. It appears from its first `set`.
    pub fn circuit_state(&self, destination: &str) -> GaugeHandle {
        self.inner.circuit_state.get(destination, NoLabels)
    }

    /// `queuebox_outbox_destination_held_total{destination,reason}`; keep the handle.
    pub fn destination_held(&self, destination: &str, reason: HeldReason) -> CounterHandle {
        self.inner.destination_held.get(destination, reason)
    }

    /// `queuebox_http_publish_responses_total{status_class}`: pass the raw status of a response
    /// received; only its class becomes a label (MET-5).
    pub fn http_publish_responses(&self, status: u16) -> &CounterHandle {
        self.inner
            .http_publish_responses
            .get(StatusClass::of(status))
    }

    /// `queuebox_transform_failures_total{strategy}`.
    pub fn transform_failures(&self, strategy: TransformStrategy) -> &CounterHandle {
        self.inner.transform_failures.get(strategy)
    }

    // --- inbox --------------------------------------------------------------------------------

    /// `queuebox_inbox_messages_total{status}`.
    pub fn inbox_messages(&self, status: InboxStatus) -> &CounterHandle {
        self.inner.inbox_messages.get(status)
    }

    /// `queuebox_inbox_oldest_pending_age_seconds`, from the relay's refresh query.
    pub fn set_inbox_oldest_pending_age(&self, oldest_age_secs: f64) {
        self.inner
            .inbox_oldest_pending_age
            .get(NoLabels)
            .set(oldest_age_secs);
    }

    /// `queuebox_inbox_relay_errors_total`.
    pub fn inbox_relay_errors(&self) -> &CounterHandle {
        self.inner.inbox_relay_errors.get(NoLabels)
    }

    /// `queuebox_inbox_rejections_total{reason}`.
    pub fn inbox_rejections(&self, reason: RejectionReason) -> &CounterHandle {
        self.inner.inbox_rejections.get(reason)
    }

    /// `queuebox_inbox_filtered_total{source}`, for a configured source; keep the handle.
    pub fn inbox_filtered(&self, source: &str) -> CounterHandle {
        self.inner.inbox_filtered.get(source, NoLabels)
    }

    // --- retention ----------------------------------------------------------------------------

    /// `queuebox_cleanup_messages_deleted_total{table}`.
    pub fn cleanup_messages_deleted(&self, table: Table) -> &CounterHandle {
        self.inner.cleanup_deleted.get(table)
    }

    /// `queuebox_cleanup_duration_seconds{table}`.
    pub fn cleanup_duration(&self, table: Table) -> &SummaryHandle {
        self.inner.cleanup_duration.get(table)
    }

    /// `queuebox_cleanup_last_run_timestamp{table}`: the wall-clock end of a retention run.
    pub fn set_cleanup_last_run(&self, table: Table, ended_at: SystemTime) {
        // A wall clock before 1970 is a broken host; 0 says "unknown" without a panic.
        let secs = ended_at
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.inner.cleanup_last_run.get(table).set(secs);
    }

    // --- database pool ------------------------------------------------------------------------

    /// `queuebox_db_pool_connections{state}`, `_connections_max` and `_pending`, from one
    /// reading of the pool's status.
    pub fn set_db_pool(&self, status: DbPoolStatus) {
        let inner = &self.inner;
        let connections = &inner.db_pool_connections;
        connections.get(PoolState::Active).set(status.active as f64);
        connections.get(PoolState::Idle).set(status.idle as f64);
        inner.db_pool_max.get(NoLabels).set(status.max as f64);
        inner
            .db_pool_pending
            .get(NoLabels)
            .set(status.pending as f64);
    }

    /// `queuebox_db_pool_acquire_timeouts_total`.
    pub fn db_pool_acquire_timeouts(&self) -> &CounterHandle {
        self.inner.db_pool_acquire_timeouts.get(NoLabels)
    }

    /// `queuebox_db_pool_acquire_duration_seconds`.
    pub fn db_pool_acquire_duration(&self) -> &SummaryHandle {
        self.inner.db_pool_acquire_duration.get(NoLabels)
    }

    /// `queuebox_db_pool_usage_duration_seconds`.
    pub fn db_pool_usage_duration(&self) -> &SummaryHandle {
        self.inner.db_pool_usage_duration.get(NoLabels)
    }

    // --- operator gauges (beyond §5.2) ----------------------------------------------------------

    /// `queuebox_outbox_oldest_pending_created_age_seconds` and `queuebox_outbox_messages_dead`,
    /// from the same refresh as [`Self::set_outbox_pending`].
    pub fn set_outbox_backlog(&self, oldest_created_age_secs: f64, dead: u64) {
        let inner = &self.inner;
        inner
            .outbox_oldest_created_age
            .get(NoLabels)
            .set(oldest_created_age_secs);
        inner.outbox_dead.get(NoLabels).set(dead as f64);
    }

    /// `queuebox_inbox_messages_pending`, `queuebox_inbox_oldest_pending_created_age_seconds`
    /// and `queuebox_inbox_messages_dead`, from one refresh.
    pub fn set_inbox_backlog(&self, pending: u64, oldest_created_age_secs: f64, dead: u64) {
        let inner = &self.inner;
        inner.inbox_pending.get(NoLabels).set(pending as f64);
        inner
            .inbox_oldest_created_age
            .get(NoLabels)
            .set(oldest_created_age_secs);
        inner.inbox_dead.get(NoLabels).set(dead as f64);
    }

    /// `queuebox_inbox_source_messages_pending{source}`, for a configured source only (MET-5).
    pub fn inbox_source_pending(&self, source: &str) -> GaugeHandle {
        self.inner.inbox_source_pending.get(source, NoLabels)
    }

    /// A successful refresh of the table's database gauges: moves
    /// `queuebox_gauge_last_refresh_timestamp{component}` to `at`.
    pub fn gauges_refreshed(&self, table: Table, at: SystemTime) {
        let secs = at
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.inner.gauge_last_refresh.get(table).set(secs);
    }

    /// `queuebox_gauge_refresh_failures_total{component}`.
    pub fn gauge_refresh_failures(&self, table: Table) -> &CounterHandle {
        self.inner.gauge_refresh_failures.get(table)
    }

    /// `queuebox_inbox_webhook_refusals_total{source,reason}`, for a configured source; keep
    /// the handle or look it up per refusal (a refusal is not the hot path).
    pub fn webhook_refusals(&self, source: &str, reason: RefusalReason) -> CounterHandle {
        self.inner.webhook_refusals.get(source, reason)
    }

    // --- intake bounds (issue 17 defect 5) --------------------------------------------------------

    /// `queuebox_inbox_held_bytes`: moved by the intake's memory bound as bodies are held and
    /// given back.
    pub fn inbox_held_bytes(&self) -> &GaugeHandle {
        self.inner.inbox_held_bytes.get(NoLabels)
    }

    /// `queuebox_http_connections{port}`: moved by the port's accept loop.
    pub fn http_connections(&self, port: Port) -> &GaugeHandle {
        self.inner.http_connections.get(port)
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("version", &self.inner.info.version)
            .finish_non_exhaustive()
    }
}
