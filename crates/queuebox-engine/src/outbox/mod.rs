//! The outbox poller (outbox.md §5–§12): claims batches of rows, publishes up to `concurrency`
//! at once, renews the leases of what it holds, writes each outcome fenced and batched,
//! reclaims expired leases, refreshes the pending gauges, wakes early on a signal, and shuts
//! down by releasing unstarted rows and waiting, bounded, for the publishes in flight.
//!
//! Shape: `run` drives the claim loop itself and owns one `JoinSet` of its helper loops
//! (dispatcher, writer, renewal, reclaim, gauges); every helper stops on a token and is joined
//! before `run` returns, so nothing outlives the poller (OPS-30).

mod claim;
mod dispatch;
mod guard;
mod held;
mod renew;
mod route;
mod row;
mod run;
mod upkeep;
mod writer;

#[cfg(test)]
mod test_destination;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use queuebox_core::Destination;
use queuebox_core::redact::redact;
use queuebox_core::retry::RetryPolicy;
use queuebox_store::{Claim, OutboxStore};
use tokio::sync::{Notify, mpsc};
use tokio::task::{Id, JoinError, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Level;

pub use guard::{
    BreakerSettings, CircuitState, DestinationGuard, GuardSettings, RateLimitSettings,
};
pub use route::{OutboxTransforms, Route, no_route_reason, route};
pub use row::correlation_id;

use crate::error::EngineError;
use dispatch::DestHandles;
use held::HeldRows;
use queuebox_telemetry::{Metrics, Table};
use row::row_event;

/// The engine's outbox settings; the binary maps `outbox.*` of the configuration to them.
#[derive(Clone, Debug, PartialEq)]
pub struct OutboxSettings {
    pub poll_interval: Duration,
    pub batch_size: u32,
    pub concurrency: usize,
    pub retry: RetryPolicy,
    pub claim_timeout: Duration,
    pub pending_gauge_interval: Duration,
    pub shutdown_timeout: Duration,
    /// `outbox.keyRunLength` (OUT-13a): most rows of one key a claim cycle takes in a run; 1
    /// is one row per key in flight.
    pub key_run_length: u32,
}

impl Default for OutboxSettings {
    /// The defaults of outbox.md §2.
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_millis(100),
            batch_size: 100,
            concurrency: 8,
            retry: RetryPolicy {
                base_delay_ms: 1000,
                max_delay_ms: 60_000,
            },
            claim_timeout: Duration::from_millis(300_000),
            pending_gauge_interval: Duration::from_millis(5000),
            shutdown_timeout: Duration::from_millis(30_000),
            key_run_length: 32,
        }
    }
}

/// Readiness of the poller: whether its `run` is going. Cheap to clone; take it before `run`.
#[derive(Clone, Debug, Default)]
pub struct PollerHealth {
    running: Arc<AtomicBool>,
}

impl PollerHealth {
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }
}

/// Sets the health flag for the life of `run`, whichever way it ends.
struct Running(PollerHealth);

impl Running {
    fn start(health: &PollerHealth) -> Self {
        health.running.store(true, Ordering::Relaxed);
        Self(health.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Relaxed);
    }
}

/// What every part of the poller reads.
pub(crate) struct PollerContext {
    store: Arc<dyn OutboxStore>,
    routes: Vec<Route>,
    settings: OutboxSettings,
    metrics: Metrics,
    held: HeldRows,
    handles: HashMap<String, DestHandles>,
}

impl PollerContext {
    /// The room a publish must have left on its lease to start (held.rs).
    fn lease_margin(&self) -> Duration {
        held::lease_margin(self.settings.claim_timeout)
    }

    fn handles(&self, destination: &dyn Destination) -> DestHandles {
        self.handles
            .get(destination.name())
            .cloned()
            .unwrap_or_else(|| DestHandles::new(&self.metrics, destination))
    }
}

/// The outbox poller of one replica.
pub struct OutboxPoller {
    shared: Arc<PollerContext>,
    wake: Arc<Notify>,
    health: PollerHealth,
}

impl OutboxPoller {
    /// `wake` ends the poller's idle wait (OUT-56): the relay and the replay call `notify_one`
    /// after they commit outbox rows.
    pub fn new(
        store: Arc<dyn OutboxStore>,
        routes: Vec<Route>,
        settings: OutboxSettings,
        metrics: Metrics,
        wake: Arc<Notify>,
    ) -> Self {
        let handles = routes
            .iter()
            .map(|r| {
                (
                    r.destination.name().to_owned(),
                    DestHandles::new(&metrics, r.destination.as_ref()),
                )
            })
            .collect();
        let shared = PollerContext {
            store,
            routes,
            settings,
            metrics,
            held: HeldRows::new(),
            handles,
        };
        Self {
            shared: Arc::new(shared),
            wake,
            health: PollerHealth::default(),
        }
    }

    /// Gives the named destinations their rate limit and circuit breaker (guard.rs); call
    /// before `run`. A name no route uses is ignored.
    pub fn with_guards(mut self, guards: &HashMap<String, Arc<DestinationGuard>>) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            for (name, handles) in &mut shared.handles {
                handles.guard = guards.get(name).cloned();
            }
        }
        self
    }

    pub fn health(&self) -> PollerHealth {
        self.health.clone()
    }

    /// Runs until `cancel`, then shuts down as OUT-58 says and returns `Ok`. Database failures
    /// never end it; only a broken helper task does (after the same shutdown).
    pub async fn run(self, cancel: CancellationToken) -> Result<(), EngineError> {
        let settings = &self.shared.settings;
        if settings.batch_size == 0 {
            return Err(EngineError::ZeroSetting {
                setting: "outbox.batchSize",
            });
        }
        if settings.concurrency == 0 {
            return Err(EngineError::ZeroSetting {
                setting: "outbox.concurrency",
            });
        }
        let _running = Running::start(&self.health);
        let shared = self.shared;
        let abandon = CancellationToken::new();
        let stop_claims = cancel.child_token();
        let (jobs, job_rx) = mpsc::unbounded_channel();
        let (completions, completion_rx) = mpsc::unbounded_channel();
        let (releases, release_rx) = mpsc::unbounded_channel();

        let mut helpers = Helpers::default();
        let s = || Arc::clone(&shared);
        helpers.spawn(
            "dispatcher",
            dispatch::run_dispatcher(s(), job_rx, completions.clone(), abandon.clone()),
        );
        helpers.spawn(
            "writer",
            writer::run_writer(s(), completion_rx, abandon.clone()),
        );
        helpers.spawn("renewal", renew::run_renewal(s(), abandon.clone()));
        helpers.spawn(
            "run releases",
            run::run_releases(s(), release_rx, abandon.clone()),
        );
        helpers.spawn("reclaim", upkeep::run_reclaim(s(), stop_claims.clone()));
        helpers.spawn(
            "pending gauges",
            upkeep::run_pending_gauges(s(), stop_claims.clone()),
        );

        let outlets = claim::Outlets {
            jobs,
            completions,
            releases,
            abandon: abandon.clone(),
        };
        let claims = claim::run_claims(s(), self.wake, outlets, stop_claims.clone());
        tokio::pin!(claims);
        let mut failure = None;
        loop {
            tokio::select! {
                () = &mut claims => break,
                Some(joined) = helpers.set.join_next_with_id() => {
                    // Reclaim and gauges end at the shutdown; any other early end is a bug that
                    // would stall the poller, so it stops the poller instead.
                    let early = !stop_claims.is_cancelled();
                    if let Some(err) = helpers.failure(joined, early) {
                        tracing::error!(error = %err, "The outbox poller stops.");
                        failure.get_or_insert(err);
                        stop_claims.cancel();
                    }
                }
            }
        }

        tracing::info!("Stopping the outbox poller.");
        release_unstarted(&shared).await;
        wait_in_flight(&shared).await;
        abandon.cancel();
        while let Some(joined) = helpers.set.join_next_with_id().await {
            if let Some(err) = helpers.failure(joined, false) {
                failure.get_or_insert(err);
            }
        }
        tracing::info!("The outbox poller stopped.");
        failure.map_or(Ok(()), Err)
    }
}

/// The helper loops, with their names for the error of one that fails.
#[derive(Default)]
struct Helpers {
    set: JoinSet<()>,
    names: HashMap<Id, &'static str>,
}

impl Helpers {
    fn spawn(&mut self, name: &'static str, task: impl Future<Output = ()> + Send + 'static) {
        let id = self.set.spawn(task).id();
        self.names.insert(id, name);
    }

    /// A helper ended: a panic always fails the poller, a normal end only when `early`.
    fn failure(&self, joined: Result<(Id, ()), JoinError>, early: bool) -> Option<EngineError> {
        let (id, reason) = match joined {
            Ok((id, ())) if early => (id, "it ended before the shutdown".to_owned()),
            Ok(_) => return None,
            Err(err) => (err.id(), err.to_string()),
        };
        Some(EngineError::TaskFailed {
            owner: "outbox poller",
            component: self.names.get(&id).copied().unwrap_or("helper"),
            reason,
        })
    }
}

/// OUT-58 step 2: every row whose publish has not started goes back to `pending` in one fenced
/// write, `attempt` unchanged (OUT-59). A failure leaves them to lease expiry.
async fn release_unstarted(shared: &PollerContext) {
    let queued = shared.held.take_queued();
    if queued.is_empty() {
        return;
    }
    let claims: Vec<Claim> = queued.iter().map(|(c, _)| *c).collect();
    match shared.store.release(&claims).await {
        Ok(released) => {
            let released: std::collections::HashSet<Claim> = released.into_iter().collect();
            for (claim, entry) in &queued {
                if !released.contains(claim) {
                    shared.metrics.claims_lost(Table::Outbox).inc();
                    row_event!(
                        Level::WARN,
                        entry.log,
                        "The claim on the message was lost before it could be released at shutdown. Its new owner delivers it."
                    );
                }
            }
            tracing::info!(
                count = released.len(),
                "Returned claimed outbox messages whose publish had not started to pending."
            );
        }
        Err(err) => tracing::warn!(
            error = %redact(&err.to_string()),
            count = claims.len(),
            "Returning unstarted outbox messages to pending failed. They return when their leases expire."
        ),
    }
}

/// OUT-58 steps 3–4: wait for the publishes in flight and their writes, renewing meanwhile;
/// after `shutdownTimeoutMs` abandon the rest, writing nothing to them.
async fn wait_in_flight(shared: &PollerContext) {
    let timeout = shared.settings.shutdown_timeout;
    let in_flight = shared.held.counts().held;
    if in_flight == 0 {
        return;
    }
    tracing::info!(
        count = in_flight,
        timeout_ms = timeout.as_millis() as u64,
        "Waiting for outbox publishes in flight."
    );
    let mut counts = shared.held.subscribe();
    let drained = tokio::time::timeout(timeout, counts.wait_for(|c| c.held == 0)).await;
    if matches!(drained, Ok(Ok(_))) {
        return;
    }
    for entry in shared.held.take_all() {
        row_event!(
            Level::WARN,
            entry.log,
            "The publish of the message did not finish within the shutdown timeout. It is abandoned and delivered again after its lease expires."
        );
    }
}
