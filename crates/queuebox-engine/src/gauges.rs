//! The inbox operator gauges (issue 14 items 10-12): pending rows in total and per configured
//! source, the age of the oldest pending row by `created_at`, dead rows; and, for both tables,
//! the staleness signals (`queuebox_gauge_refresh_failures_total`,
//! `queuebox_gauge_last_refresh_timestamp`). The outbox ones are refreshed with the pending
//! gauges by the poller (`outbox::upkeep`).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use queuebox_core::redact::redact;
use queuebox_store::{InboxBacklog, RelayStore};
use queuebox_telemetry::{GaugeHandle, Metrics, Table};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::repeat::RepeatLog;

/// The inbox backlog gauges of one replica.
pub struct InboxGauges {
    store: Arc<dyn RelayStore>,
    metrics: Metrics,
    /// One series per configured source (MET-5: rows of other sources count in the total only).
    sources: Vec<(String, GaugeHandle)>,
    interval: Duration,
}

impl InboxGauges {
    /// `sources`: the configured source names, push and pull; `interval`:
    /// `inbox.relay.pendingGaugeIntervalMs`.
    pub fn new(
        store: Arc<dyn RelayStore>,
        metrics: Metrics,
        sources: impl IntoIterator<Item = String>,
        interval: Duration,
    ) -> Self {
        let sources = sources
            .into_iter()
            .map(|name| {
                let gauge = metrics.inbox_source_pending(&name);
                gauge.set(0.0);
                (name, gauge)
            })
            .collect();
        Self {
            store,
            metrics,
            sources,
            interval: interval.max(Duration::from_millis(1)),
        }
    }

    /// Queries at most once per interval until `stop`; a failed refresh keeps the last values
    /// and counts in `queuebox_gauge_refresh_failures_total{component="inbox"}`.
    pub async fn run(self, stop: CancellationToken) {
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut failures = RepeatLog::default();
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            match self.store.inbox_backlog().await {
                Ok(backlog) => {
                    failures.success();
                    self.publish(&backlog);
                    self.metrics
                        .gauges_refreshed(Table::Inbox, SystemTime::now());
                }
                Err(err) => {
                    self.metrics.gauge_refresh_failures(Table::Inbox).inc();
                    if let Some(repeats) = failures.failure(Instant::now()) {
                        tracing::warn!(error = %redact(&err.to_string()), repeats, "Refreshing the inbox backlog gauges failed. They keep their last value; queuebox_gauge_last_refresh_timestamp says how old it is.");
                    }
                }
            }
        }
    }

    fn publish(&self, backlog: &InboxBacklog) {
        self.metrics.set_inbox_backlog(
            u64::try_from(backlog.pending()).unwrap_or(0),
            backlog.oldest_created_age_seconds().max(0.0),
            u64::try_from(backlog.dead).unwrap_or(0),
        );
        for (name, gauge) in &self.sources {
            let pending = backlog
                .sources
                .iter()
                .find(|s| &s.source == name)
                .map_or(0, |s| s.pending);
            gauge.set(pending as f64);
        }
    }
}
