//! The push relay (inbox.md §11, RLY-1..16): claims due push rows of the configured sources,
//! forwards them one at a time into the outbox, renews its leases while it does, reclaims
//! expired leases, refreshes the oldest-pending gauge, wakes early when a source stores a push
//! row, and at shutdown releases what it has not started.
//!
//! Shape: one task. `run` is the claim loop; the upkeep queries (reclaim, gauge) run between
//! claims because each is due at most every few seconds, and the renewal runs beside the forward
//! of a batch only (`batch.rs`), because that is the only time the relay holds claims.

mod batch;
pub(crate) mod forward;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use queuebox_core::redact::redact;
use queuebox_core::template::Template;
use queuebox_store::RelayStore;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use forward::{identity_headers, render_topic};

use crate::error::EngineError;
use crate::repeat::RepeatLog;
use queuebox_telemetry::Metrics;

/// The relay's settings; the binary maps `inbox.relay.*` (CFG-48) to them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelaySettings {
    pub poll_interval: Duration,
    pub batch_size: u32,
    pub claim_timeout: Duration,
    pub pending_gauge_interval: Duration,
    /// `inbox.relay.maxAttempts`, else `outbox.maxAttempts` (RLY-10).
    pub max_attempts: i32,
}

impl Default for RelaySettings {
    /// The defaults of CFG-48 (with `outbox.maxAttempts` at its default, 5).
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_millis(100),
            batch_size: 100,
            claim_timeout: Duration::from_millis(300_000),
            pending_gauge_interval: Duration::from_millis(5000),
            max_attempts: 5,
        }
    }
}

/// A configured push source: its name (the `inbox.source` value) and its relay `topic`.
#[derive(Clone, Debug)]
pub struct RelaySource {
    pub name: String,
    /// Parsed with `TemplateFields::Source`.
    pub topic: Template,
}

/// Readiness of the relay (OPS-18 `inbox-relay`): whether its `run` is going.
#[derive(Clone, Debug, Default)]
pub struct RelayHealth {
    running: Arc<AtomicBool>,
}

impl RelayHealth {
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }
}

/// Sets the health flag for the life of `run`, whichever way it ends.
struct Running(RelayHealth);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Relaxed);
    }
}

/// What the claim loop and the batch both read.
pub(crate) struct RelayContext {
    store: Arc<dyn RelayStore>,
    topics: HashMap<String, Template>,
    settings: RelaySettings,
    metrics: Metrics,
    outbox_wake: Arc<Notify>,
}

/// The push relay of one replica (RLY-1: at most one per replica).
pub struct Relay {
    shared: RelayContext,
    sources: Vec<String>,
    wake: Arc<Notify>,
    health: RelayHealth,
}

impl Relay {
    /// `wake` ends the relay's idle wait (RLY-14: the intake calls `notify_one` after it stores
    /// a push row); `outbox_wake` is the outbox poller's, notified once after the forwards of each
    /// relay batch commit (OUT-56, coalesced per batch).
    pub fn new(
        store: Arc<dyn RelayStore>,
        sources: Vec<RelaySource>,
        settings: RelaySettings,
        metrics: Metrics,
        wake: Arc<Notify>,
        outbox_wake: Arc<Notify>,
    ) -> Self {
        let topics: HashMap<String, Template> =
            sources.into_iter().map(|s| (s.name, s.topic)).collect();
        let mut names: Vec<String> = topics.keys().cloned().collect();
        names.sort_unstable();
        Self {
            shared: RelayContext {
                store,
                topics,
                settings,
                metrics,
                outbox_wake,
            },
            sources: names,
            wake,
            health: RelayHealth::default(),
        }
    }

    pub fn health(&self) -> RelayHealth {
        self.health.clone()
    }

    /// Runs until `cancel`, then stops as RLY-15 says and returns `Ok`. Database failures never
    /// end it: they are logged (OPS-36) and retried after the poll interval.
    pub async fn run(self, cancel: CancellationToken) -> Result<(), EngineError> {
        check(&self.shared.settings)?;
        self.health.running.store(true, Ordering::Relaxed);
        let _running = Running(self.health.clone());
        let shared = &self.shared;
        let settings = &shared.settings;
        let mut upkeep = Upkeep::default();
        let mut claim_failures = RepeatLog::default();
        let mut logs = batch::Logs::default();
        loop {
            if cancel.is_cancelled() {
                break;
            }
            upkeep.run(shared).await;
            // Never raced with `cancel`: a claim dropped after its commit would leave rows
            // `processing` that nobody holds until their lease expires. The batch releases
            // them instead when the shutdown has begun.
            let claimed = if self.sources.is_empty() {
                Ok(Vec::new())
            } else {
                let lease = settings.claim_timeout;
                shared
                    .store
                    .relay_claim(settings.batch_size, lease, &self.sources)
                    .await
            };
            let rows = match claimed {
                Ok(rows) => rows,
                Err(err) => {
                    // RLY-6: transient; a wake-up does not shorten the wait.
                    if let Some(repeats) = claim_failures.failure(Instant::now()) {
                        tracing::warn!(
                            error = %redact(&err.to_string()),
                            repeats,
                            "Claiming inbox messages for the relay failed. QueueBox tries again after the poll interval."
                        );
                    }
                    pause(&cancel, None, settings.poll_interval).await;
                    continue;
                }
            };
            if let Some(repeats) = claim_failures.success() {
                tracing::info!(
                    repeats,
                    "Claiming inbox messages for the relay works again."
                );
            }
            let full = rows.len() >= settings.batch_size as usize;
            let end = batch::forward(shared, rows, &cancel, &mut logs).await;
            if cancel.is_cancelled() {
                break;
            }
            if end.failed {
                // RLY-12: a failed forward is not retried at once.
                pause(&cancel, None, settings.poll_interval).await;
            } else if !full {
                pause(&cancel, Some(&self.wake), settings.poll_interval).await;
            }
        }
        tracing::info!("The inbox relay stopped.");
        Ok(())
    }
}

/// The settings `run` cannot work with; the configuration refuses them first (CFG-48).
fn check(settings: &RelaySettings) -> Result<(), EngineError> {
    let bad = |setting, value: String| {
        Err(EngineError::BadSetting {
            owner: "inbox relay",
            setting,
            value,
        })
    };
    if settings.batch_size == 0 {
        return bad("inbox.relay.batchSize", "0".into());
    }
    if settings.poll_interval.is_zero() {
        return bad("inbox.relay.pollIntervalMs", "0".into());
    }
    if settings.claim_timeout.is_zero() {
        return bad("inbox.relay.claimTimeoutMs", "0".into());
    }
    if settings.max_attempts <= 0 {
        return bad("inbox.relay.maxAttempts", settings.max_attempts.to_string());
    }
    Ok(())
}

/// Waits `poll` or until `cancel`; a `wake` ends it early when given (RLY-14).
async fn pause(cancel: &CancellationToken, wake: Option<&Notify>, poll: Duration) {
    let woken = async {
        match wake {
            Some(wake) => wake.notified().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        () = cancel.cancelled() => {}
        () = woken => {}
        () = tokio::time::sleep(poll) => {}
    }
}

/// RLY-8: at most once per `claimTimeoutMs / 5` (at least 1 ms).
pub fn reclaim_period(claim_timeout: Duration) -> Duration {
    Duration::from_millis((claim_timeout.as_millis() / 5) as u64).max(Duration::from_millis(1))
}

/// The two periodic queries between claims, each with the time of its last run.
#[derive(Default)]
struct Upkeep {
    reclaimed_at: Option<Instant>,
    gauge_at: Option<Instant>,
    reclaim_failures: RepeatLog,
    gauge_failures: RepeatLog,
}

impl Upkeep {
    /// Runs each query whose period has passed; the first call runs both (RLY-8: at start).
    async fn run(&mut self, shared: &RelayContext) {
        let settings = &shared.settings;
        if due(self.reclaimed_at, reclaim_period(settings.claim_timeout)) {
            self.reclaimed_at = Some(Instant::now());
            match shared.store.relay_reclaim_expired().await {
                Ok(count) => {
                    self.reclaim_failures.success();
                    if count > 0 {
                        tracing::info!(
                            count,
                            "Returned inbox messages whose relay lease expired to pending. They are forwarded again."
                        );
                    }
                }
                Err(err) => {
                    if let Some(repeats) = self.reclaim_failures.failure(Instant::now()) {
                        tracing::warn!(error = %redact(&err.to_string()), repeats, "Reclaiming expired inbox relay leases failed. QueueBox tries again later.");
                    }
                }
            }
        }
        // RLY-16: the gauge queries the database at most once per interval.
        if due(self.gauge_at, settings.pending_gauge_interval) {
            self.gauge_at = Some(Instant::now());
            match shared.store.inbox_oldest_pending_age().await {
                Ok(age) => {
                    self.gauge_failures.success();
                    shared.metrics.set_inbox_oldest_pending_age(age.max(0.0));
                }
                Err(err) => {
                    if let Some(repeats) = self.gauge_failures.failure(Instant::now()) {
                        tracing::warn!(error = %redact(&err.to_string()), repeats, "Refreshing the inbox oldest-pending gauge failed. It keeps its last value.");
                    }
                }
            }
        }
    }
}

fn due(last: Option<Instant>, period: Duration) -> bool {
    last.is_none_or(|at| at.elapsed() >= period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rly_8_reclaim_period_is_a_fifth_and_at_least_1_ms() {
        assert_eq!(
            reclaim_period(Duration::from_millis(300_000)),
            Duration::from_secs(60)
        );
        assert_eq!(
            reclaim_period(Duration::from_millis(3)),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn rly_8_and_16_a_query_is_due_at_start_and_then_after_its_period() {
        assert!(due(None, Duration::from_secs(60)));
        assert!(!due(Some(Instant::now()), Duration::from_secs(60)));
        let earlier = Instant::now() - Duration::from_secs(61);
        assert!(due(Some(earlier), Duration::from_secs(60)));
    }

    #[test]
    fn cfg_48_settings_the_relay_cannot_run_with_are_refused() {
        assert!(check(&RelaySettings::default()).is_ok());
        let zero_batch = RelaySettings {
            batch_size: 0,
            ..RelaySettings::default()
        };
        assert_eq!(
            check(&zero_batch).unwrap_err().to_string(),
            "The inbox relay cannot run with inbox.relay.batchSize = 0."
        );
        let no_attempts = RelaySettings {
            max_attempts: 0,
            ..RelaySettings::default()
        };
        assert!(check(&no_attempts).is_err());
    }
}
