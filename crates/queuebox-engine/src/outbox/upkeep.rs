//! The poller's two periodic queries: the reclaim of expired leases (OUT-46) and the pending
//! gauges (OUT-62, MET-6). Both stop when the shutdown begins.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use queuebox_core::redact::redact;
use queuebox_telemetry::Table;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::PollerContext;
use crate::repeat::RepeatLog;

/// OUT-46: at most once per `claimTimeoutMs / 5` (at least 1 ms).
pub fn reclaim_period(claim_timeout: Duration) -> Duration {
    Duration::from_millis((claim_timeout.as_millis() / 5) as u64).max(Duration::from_millis(1))
}

/// Ticks at once, then every `period`; never bursts after a slow query.
fn ticker(period: Duration) -> tokio::time::Interval {
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker
}

/// OUT-46: once at start, then periodically; any replica may reclaim any row.
pub async fn run_reclaim(shared: Arc<PollerContext>, stop: CancellationToken) {
    let mut ticker = ticker(reclaim_period(shared.settings.claim_timeout));
    let mut failures = RepeatLog::default();
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        match shared.store.reclaim_expired().await {
            Ok(count) => {
                failures.success();
                if count > 0 {
                    shared.metrics.outbox_reclaimed().inc_by(count);
                    tracing::info!(
                        count,
                        "Returned outbox messages whose lease expired to pending. They are delivered again."
                    );
                }
            }
            Err(err) => {
                if let Some(repeats) = failures.failure(Instant::now()) {
                    tracing::warn!(error = %redact(&err.to_string()), repeats, "Reclaiming expired outbox leases failed. QueueBox tries again later.");
                }
            }
        }
    }
}

/// MET-6: the gauges query at most once per interval; a failed refresh keeps the last value.
pub async fn run_pending_gauges(shared: Arc<PollerContext>, stop: CancellationToken) {
    let mut ticker = ticker(
        shared
            .settings
            .pending_gauge_interval
            .max(Duration::from_millis(1)),
    );
    let mut failures = RepeatLog::default();
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        match shared.store.pending_stats().await {
            Ok(stats) => {
                failures.success();
                shared.metrics.set_outbox_pending(
                    u64::try_from(stats.pending).unwrap_or(0),
                    stats.oldest_due_age_seconds.max(0.0),
                );
                shared.metrics.set_outbox_backlog(
                    stats.oldest_created_age_seconds.max(0.0),
                    u64::try_from(stats.dead).unwrap_or(0),
                );
                shared
                    .metrics
                    .gauges_refreshed(Table::Outbox, SystemTime::now());
            }
            Err(err) => {
                shared.metrics.gauge_refresh_failures(Table::Outbox).inc();
                if let Some(repeats) = failures.failure(Instant::now()) {
                    tracing::warn!(error = %redact(&err.to_string()), repeats, "Refreshing the outbox pending gauges failed. They keep their last value; queuebox_gauge_last_refresh_timestamp says how old it is.");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_46_reclaim_period_is_a_fifth_and_at_least_1_ms() {
        assert_eq!(
            reclaim_period(Duration::from_millis(300_000)),
            Duration::from_secs(60)
        );
        assert_eq!(
            reclaim_period(Duration::from_millis(3)),
            Duration::from_millis(1)
        );
    }
}
