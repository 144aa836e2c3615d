//! The destination guard (issue 15 item 6): a per-destination rate limit and circuit breaker,
//! asked once before each publish and told its outcome after it, for every destination type.
//!
//! It never counts an attempt. A row it holds back either waits in memory for a short time (its
//! turn of the rate limit is at most [`HOLD_HORIZON`] away; its lease keeps being renewed, as for
//! a row waiting for a publish slot, OUT-40), or goes back to `pending` with `scheduled_at` at
//! the time it may go and `attempt` unchanged (a fenced write like a retry's, OUT-41), so a
//! destination that is down or slow never fills the replica's `batchSize` with rows it cannot
//! send while rows of other destinations wait.
//!
//! Both are per replica, like the sources' rate limit (INB-13).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use queuebox_core::Outcome;
use queuebox_core::readiness::{ComponentDown, ReadinessComponent};
use queuebox_store::TerminalWrite;
use queuebox_telemetry::{CounterHandle, GaugeHandle, HeldReason, Metrics, Table};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tracing::Level;

use super::PollerContext;
use super::dispatch::Job;
use super::held::{Stage, Start};
use super::row::row_event;
use super::writer::Completion;

/// A row whose rate-limit turn is at most this far away waits in memory; a later one goes back
/// to `pending` until its turn.
pub const HOLD_HORIZON: Duration = Duration::from_secs(1);
/// While the half-open probe is in flight, other rows go back to `pending` for this long (or the
/// open time, when shorter), then ask again.
const PROBE_WAIT: Duration = Duration::from_secs(1);
/// The failure-rate window is kept as this many buckets.
const BUCKETS: u32 = 10;

/// `rateLimit` of a destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimitSettings {
    pub messages_per_second: u32,
    /// Publishes allowed at once after an idle time; at least 1.
    pub burst: u32,
}

/// `circuitBreaker` of a destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Opens after this many failed publishes in a row.
    pub consecutive_failures: u32,
    /// Opens when, within `window`, at least `minimum_publishes` publishes ended and at least
    /// this percentage of them failed. `None`: only the consecutive rule.
    pub failure_rate_percent: Option<u32>,
    pub window: Duration,
    pub minimum_publishes: u32,
    /// How long it stays open before one probe may go.
    pub open_for: Duration,
}

/// The guard settings of one destination; both parts are off unless set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GuardSettings {
    pub rate_limit: Option<RateLimitSettings>,
    pub circuit_breaker: Option<BreakerSettings>,
}

impl GuardSettings {
    pub fn is_enabled(&self) -> bool {
        self.rate_limit.is_some() || self.circuit_breaker.is_some()
    }
}

/// What the guard says about one row about to be published.
#[derive(Debug)]
pub enum Admit {
    /// Publish now, then report the outcome on the pass.
    Go(Pass),
    /// Publish after waiting this long (the rate limit; at most [`HOLD_HORIZON`]).
    Wait(Duration, Pass),
    /// Do not publish: the row goes back to `pending` for `delay`, `attempt` unchanged.
    Defer { delay: Duration, reason: HeldReason },
}

/// The breaker's state; the gauge value is the discriminant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CircuitState {
    Closed = 0,
    Open = 1,
    HalfOpen = 2,
}

impl CircuitState {
    fn word(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half-open",
        }
    }
}

/// The rate limit, as a GCRA token bucket: `tat` is when the bucket would be full again.
#[derive(Debug)]
struct Bucket {
    interval: Duration,
    /// `(burst - 1) × interval`: how far ahead of now `tat` may run and still let a row go.
    tolerance: Duration,
    tat: Option<Instant>,
}

impl Bucket {
    fn new(rate: RateLimitSettings) -> Self {
        let interval = Duration::from_secs(1) / rate.messages_per_second.max(1);
        Self {
            interval,
            tolerance: interval * rate.burst.max(1).saturating_sub(1),
            tat: None,
        }
    }

    /// How long the next row must wait for its turn; takes the turn only when `take`.
    fn turn(&mut self, now: Instant, take: impl FnOnce(Duration) -> bool) -> Option<Duration> {
        let tat = self.tat.map_or(now, |t| t.max(now));
        let allowed_at = tat.checked_sub(self.tolerance).unwrap_or(now).max(now);
        let wait = allowed_at - now;
        if take(wait) {
            self.tat = Some(tat + self.interval);
            return Some(wait);
        }
        None
    }
}

/// The failure-rate window: `BUCKETS` buckets of `window / BUCKETS` each.
#[derive(Debug)]
struct Window {
    span: Duration,
    /// (bucket number since `epoch`, publishes, failures)
    buckets: Vec<(u64, u32, u32)>,
    epoch: Instant,
}

impl Window {
    fn new(window: Duration, now: Instant) -> Self {
        Self {
            span: (window / BUCKETS).max(Duration::from_millis(1)),
            buckets: Vec::new(),
            epoch: now,
        }
    }

    fn record(&mut self, now: Instant, failed: bool) -> (u32, u32) {
        let n =
            (now.saturating_duration_since(self.epoch).as_nanos() / self.span.as_nanos()) as u64;
        self.buckets.retain(|(b, _, _)| b + u64::from(BUCKETS) > n);
        match self.buckets.last_mut() {
            Some((b, total, failures)) if *b == n => {
                *total += 1;
                *failures += u32::from(failed);
            }
            _ => self.buckets.push((n, 1, u32::from(failed))),
        }
        self.buckets
            .iter()
            .fold((0, 0), |(t, f), (_, bt, bf)| (t + bt, f + bf))
    }

    fn clear(&mut self) {
        self.buckets.clear();
    }
}

#[derive(Debug)]
struct Breaker {
    settings: BreakerSettings,
    state: CircuitState,
    consecutive: u32,
    window: Window,
    open_until: Instant,
    probe_out: bool,
}

#[derive(Debug)]
struct Inner {
    bucket: Option<Bucket>,
    breaker: Option<Breaker>,
}

/// The guard of one destination. Cheap to share; every method takes one short std lock, never
/// held across an `.await`.
#[derive(Debug)]
pub struct DestinationGuard {
    name: String,
    inner: Mutex<Inner>,
    state: GaugeHandle,
    held_rate: CounterHandle,
    held_open: CounterHandle,
}

/// The right to publish one row. Report the outcome with [`Pass::finish`]; a pass dropped
/// without an outcome (the claim was lost, a transform ended the row, the shutdown abandoned the
/// publish) tells the breaker nothing, and a probe dropped so lets the next row probe.
#[derive(Debug)]
pub struct Pass {
    guard: Arc<DestinationGuard>,
    probe: bool,
    done: bool,
}

impl Pass {
    /// The publish ended: `delivered` or failed (any `Outcome::Failed`, OUT-27).
    pub fn finish(self, delivered: bool) {
        self.finish_at(delivered, Instant::now());
    }

    fn finish_at(mut self, delivered: bool, now: Instant) {
        self.done = true;
        self.guard.outcome(self.probe, delivered, now);
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        if !self.done && self.probe {
            self.guard.probe_dropped();
        }
    }
}

impl DestinationGuard {
    pub fn new(name: &str, settings: GuardSettings, metrics: &Metrics) -> Arc<Self> {
        let now = Instant::now();
        let breaker = settings.circuit_breaker.map(|settings| Breaker {
            settings,
            state: CircuitState::Closed,
            consecutive: 0,
            window: Window::new(settings.window, now),
            open_until: now,
            probe_out: false,
        });
        let state = metrics.circuit_state(name);
        if breaker.is_some() {
            state.set(0.0);
        }
        Arc::new(Self {
            name: name.to_owned(),
            inner: Mutex::new(Inner {
                bucket: settings.rate_limit.map(Bucket::new),
                breaker,
            }),
            state,
            held_rate: metrics.destination_held(name, HeldReason::RateLimit),
            held_open: metrics.destination_held(name, HeldReason::CircuitOpen),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every change is a field store; a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn state(&self) -> Option<CircuitState> {
        self.lock().breaker.as_ref().map(|b| b.state)
    }

    /// The advisory readiness component `circuit.<destination>`: down (`circuit-open`) while the
    /// breaker is open or half-open. Advisory, because a receiver that is down is not a reason
    /// to take this replica out of service. `None` without a breaker.
    pub fn readiness(self: &Arc<Self>) -> Option<ReadinessComponent> {
        self.state()?;
        let me = Arc::clone(self);
        Some(
            ReadinessComponent::flag(
                format!("circuit.{}", self.name),
                ComponentDown::CircuitOpen,
                move || me.state() == Some(CircuitState::Closed),
            )
            .advisory(),
        )
    }

    /// Asked once per row, right before its publish.
    pub fn admit(self: &Arc<Self>, now: Instant) -> Admit {
        let mut inner = self.lock();
        let mut probe = false;
        if let Some(breaker) = inner.breaker.as_mut() {
            match breaker.state {
                CircuitState::Closed => {}
                CircuitState::Open if now < breaker.open_until => {
                    self.held_open.inc();
                    return Admit::Defer {
                        delay: breaker.open_until - now,
                        reason: HeldReason::CircuitOpen,
                    };
                }
                CircuitState::Open | CircuitState::HalfOpen if !breaker.probe_out => {
                    if breaker.state == CircuitState::Open {
                        self.transition(breaker, CircuitState::HalfOpen);
                    }
                    breaker.probe_out = true;
                    probe = true;
                }
                CircuitState::Open | CircuitState::HalfOpen => {
                    self.held_open.inc();
                    return Admit::Defer {
                        delay: PROBE_WAIT.min(breaker.settings.open_for),
                        reason: HeldReason::CircuitOpen,
                    };
                }
            }
        }
        let pass = Pass {
            guard: Arc::clone(self),
            probe,
            done: false,
        };
        let Some(bucket) = inner.bucket.as_mut() else {
            return Admit::Go(pass);
        };
        match bucket.turn(now, |wait| wait <= HOLD_HORIZON) {
            Some(wait) if wait.is_zero() => Admit::Go(pass),
            Some(wait) => {
                self.held_rate.inc();
                Admit::Wait(wait, pass)
            }
            None => {
                self.held_rate.inc();
                let delay = bucket_wait(bucket, now);
                drop(inner);
                // `pass` drops here: a probe that the rate limit defers lets the next row probe.
                drop(pass);
                Admit::Defer {
                    delay,
                    reason: HeldReason::RateLimit,
                }
            }
        }
    }

    fn outcome(&self, probe: bool, delivered: bool, now: Instant) {
        let mut inner = self.lock();
        let Some(breaker) = inner.breaker.as_mut() else {
            return;
        };
        if probe {
            breaker.probe_out = false;
            if delivered {
                breaker.consecutive = 0;
                breaker.window.clear();
                self.transition(breaker, CircuitState::Closed);
            } else {
                self.open(breaker, now, "the probe failed");
            }
            return;
        }
        // Publishes that started before the breaker opened and end after it say nothing more.
        if breaker.state != CircuitState::Closed {
            return;
        }
        breaker.consecutive = if delivered {
            0
        } else {
            breaker.consecutive + 1
        };
        let (total, failures) = breaker.window.record(now, !delivered);
        let settings = breaker.settings;
        if !delivered && breaker.consecutive >= settings.consecutive_failures {
            let why = format!("{} publishes in a row failed", breaker.consecutive);
            self.open(breaker, now, &why);
        } else if let Some(percent) = settings.failure_rate_percent
            && !delivered
            && total >= settings.minimum_publishes
            && u64::from(failures) * 100 >= u64::from(percent) * u64::from(total)
        {
            let why = format!(
                "{failures} of the last {total} publishes failed (failureRatePercent {percent})"
            );
            self.open(breaker, now, &why);
        }
    }

    fn probe_dropped(&self) {
        if let Some(breaker) = self.lock().breaker.as_mut() {
            breaker.probe_out = false;
        }
    }

    fn open(&self, breaker: &mut Breaker, now: Instant, why: &str) {
        breaker.open_until = now + breaker.settings.open_for;
        breaker.consecutive = 0;
        breaker.window.clear();
        let was = breaker.state;
        breaker.state = CircuitState::Open;
        self.state.set(CircuitState::Open as i64 as f64);
        tracing::warn!(
            destination = %self.name,
            from = was.word(),
            to = "open",
            reason = why,
            openMs = breaker.settings.open_for.as_millis() as u64,
            "The circuit breaker of the destination opened. Its messages wait without an attempt counted; one probe decides after the open time."
        );
    }

    fn transition(&self, breaker: &mut Breaker, to: CircuitState) {
        let was = breaker.state;
        breaker.state = to;
        self.state.set(to as i64 as f64);
        match to {
            CircuitState::HalfOpen => tracing::info!(
                destination = %self.name,
                from = was.word(),
                to = to.word(),
                "The circuit breaker of the destination is half-open: one message probes it."
            ),
            CircuitState::Closed => tracing::info!(
                destination = %self.name,
                from = was.word(),
                to = to.word(),
                "The circuit breaker of the destination closed: the probe was delivered."
            ),
            CircuitState::Open => {}
        }
    }
}

/// The call before the publish (OUT-19 step 6), from the publish task that holds `permit`.
/// `Some` carries on with the publish (and the pass to report its outcome on, when the
/// destination has a guard); `None` means the row was handed to the writer (deferred) or is no
/// longer held, and the task ends.
pub(super) async fn before_publish(
    shared: &PollerContext,
    job: &mut Option<Job>,
    permit: OwnedSemaphorePermit,
    slots: &Arc<Semaphore>,
    done: &mpsc::UnboundedSender<Completion>,
) -> Option<(Option<Pass>, OwnedSemaphorePermit)> {
    let j = job.as_ref()?;
    let Some(guard) = j.handles.guard.clone() else {
        return Some((None, permit));
    };
    match guard.admit(Instant::now()) {
        Admit::Go(pass) => Some((Some(pass), permit)),
        Admit::Wait(wait, pass) => {
            // Not publishing yet, so the slot is free for another row meanwhile (OUT-53); the
            // renewal keeps the lease (OUT-40), and the start checks it again afterwards.
            drop(permit);
            tokio::select! {
                biased;
                () = j.token.cancelled() => return None,
                () = tokio::time::sleep(wait) => {}
            }
            let permit = tokio::select! {
                biased;
                () = j.token.cancelled() => return None,
                permit = Arc::clone(slots).acquire_owned() => permit.ok()?,
            };
            match shared
                .held
                .start_publish(&j.claim, Instant::now(), shared.lease_margin())
            {
                Start::Go => Some((Some(pass), permit)),
                Start::Gone => None,
                Start::Expired(entry) => {
                    shared.metrics.claims_lost(Table::Outbox).inc();
                    row_event!(
                        Level::WARN,
                        entry.log,
                        "The lease on the message ended while the rate limit held it. QueueBox does not publish it and writes nothing; another replica delivers it."
                    );
                    None
                }
            }
        }
        Admit::Defer { delay, reason } => {
            let j = job.take()?;
            drop(permit);
            // The row keeps its last_error: a hold is no failure, and an operator must still
            // see the last real one. The hold itself is logged and counted (`held_total`).
            let write = TerminalWrite::Hold {
                claim: j.claim,
                attempt: j.message.attempt,
                delay,
            };
            row_event!(
                Level::DEBUG,
                j.log,
                reason = held_note(guard.name(), reason),
                retryInMs = delay.as_millis() as u64,
                "The destination guard held the message back. It returns to pending without an attempt counted."
            );
            drop(j.depth);
            if shared.held.advance(&j.claim, Stage::Finishing) {
                let _ = done.send(Completion {
                    write,
                    log: j.log,
                    run: j.run,
                });
            }
            None
        }
    }
}

/// The call with the outcome, after the destination answered.
pub(super) fn after_publish(pass: Option<Pass>, outcome: &Outcome) {
    if let Some(pass) = pass {
        pass.finish(matches!(outcome, Outcome::Delivered));
    }
}

/// Why the guard returned a row to `pending`, for the log (never written to `last_error`).
fn held_note(destination: &str, reason: HeldReason) -> String {
    match reason {
        HeldReason::RateLimit => format!(
            "Held by the rate limit of destination {destination}; returned to pending without an attempt counted."
        ),
        HeldReason::CircuitOpen => format!(
            "Held by the open circuit breaker of destination {destination}; returned to pending without an attempt counted."
        ),
    }
}

/// The wait of the next turn, without taking it.
fn bucket_wait(bucket: &Bucket, now: Instant) -> Duration {
    let tat = bucket.tat.map_or(now, |t| t.max(now));
    tat.checked_sub(bucket.tolerance)
        .unwrap_or(now)
        .max(now)
        .saturating_duration_since(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(settings: GuardSettings) -> (Arc<DestinationGuard>, Metrics) {
        let metrics = Metrics::new("test");
        (DestinationGuard::new("hooks", settings, &metrics), metrics)
    }

    fn breaker(consecutive: u32, percent: Option<u32>) -> GuardSettings {
        GuardSettings {
            rate_limit: None,
            circuit_breaker: Some(BreakerSettings {
                consecutive_failures: consecutive,
                failure_rate_percent: percent,
                window: Duration::from_secs(60),
                minimum_publishes: 4,
                open_for: Duration::from_secs(30),
            }),
        }
    }

    fn go(admit: Admit) -> Pass {
        match admit {
            Admit::Go(pass) => pass,
            other => panic!("expected Go, got {other:?}"),
        }
    }

    #[test]
    fn no_settings_always_go() {
        let (g, _) = guard(GuardSettings::default());
        let now = Instant::now();
        for _ in 0..1000 {
            go(g.admit(now)).finish_at(false, now);
        }
        assert_eq!(g.state(), None);
    }

    #[test]
    fn rate_limit_burst_then_one_per_interval_then_defer_beyond_the_horizon() {
        let (g, _) = guard(GuardSettings {
            rate_limit: Some(RateLimitSettings {
                messages_per_second: 10,
                burst: 3,
            }),
            circuit_breaker: None,
        });
        let now = Instant::now();
        for _ in 0..3 {
            go(g.admit(now));
        }
        let mut waits = Vec::new();
        let mut deferred = 0;
        for _ in 0..20 {
            match g.admit(now) {
                Admit::Wait(w, _) => waits.push(w),
                Admit::Defer { delay, reason } => {
                    assert_eq!(reason, HeldReason::RateLimit);
                    assert!(delay > HOLD_HORIZON, "{delay:?}");
                    deferred += 1;
                }
                Admit::Go(_) => panic!("the burst is used up"),
            }
        }
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
        assert_eq!(deferred, 10);
        // The 13 turns taken end 1.3 s on; with the burst's room of 0.2 s the next goes at once
        // 1.1 s on, and the one after it waits one interval.
        let later = now + Duration::from_millis(1100);
        assert!(matches!(g.admit(later), Admit::Go(_)));
        assert!(matches!(g.admit(later), Admit::Wait(w, _) if w == Duration::from_millis(100)));
    }

    #[test]
    fn breaker_opens_after_n_failures_in_a_row_defers_then_one_probe_closes_it() {
        let (g, metrics) = guard(breaker(3, None));
        let t0 = Instant::now();
        go(g.admit(t0)).finish_at(false, t0);
        go(g.admit(t0)).finish_at(true, t0); // a success resets the run
        for _ in 0..3 {
            go(g.admit(t0)).finish_at(false, t0);
        }
        assert_eq!(g.state(), Some(CircuitState::Open));
        let text = metrics.render();
        assert!(
            text.contains("queuebox_outbox_destination_circuit_state{destination=\"hooks\"} 1"),
            "{text}"
        );
        match g.admit(t0 + Duration::from_secs(10)) {
            Admit::Defer { delay, reason } => {
                assert_eq!(reason, HeldReason::CircuitOpen);
                assert_eq!(delay, Duration::from_secs(20));
            }
            other => panic!("{other:?}"),
        }
        let t1 = t0 + Duration::from_secs(30);
        let probe = go(g.admit(t1));
        assert_eq!(g.state(), Some(CircuitState::HalfOpen));
        assert!(
            matches!(
                g.admit(t1),
                Admit::Defer {
                    reason: HeldReason::CircuitOpen,
                    ..
                }
            ),
            "one probe at a time"
        );
        probe.finish_at(true, t1);
        assert_eq!(g.state(), Some(CircuitState::Closed));
        go(g.admit(t1)).finish_at(true, t1);
    }

    #[test]
    fn a_failed_probe_opens_again_and_a_dropped_probe_lets_another_probe() {
        let (g, _) = guard(breaker(1, None));
        let t0 = Instant::now();
        go(g.admit(t0)).finish_at(false, t0);
        let t1 = t0 + Duration::from_secs(31);
        drop(go(g.admit(t1)));
        let probe = go(g.admit(t1));
        probe.finish_at(false, t1);
        assert_eq!(g.state(), Some(CircuitState::Open));
        assert!(matches!(
            g.admit(t1 + Duration::from_secs(29)),
            Admit::Defer { .. }
        ));
        go(g.admit(t1 + Duration::from_secs(30))).finish_at(true, t1 + Duration::from_secs(30));
        assert_eq!(g.state(), Some(CircuitState::Closed));
    }

    #[test]
    fn breaker_opens_on_the_failure_rate_once_enough_publishes_ended() {
        let (g, _) = guard(breaker(100, Some(50)));
        let t0 = Instant::now();
        go(g.admit(t0)).finish_at(false, t0);
        go(g.admit(t0)).finish_at(true, t0);
        go(g.admit(t0)).finish_at(false, t0);
        assert_eq!(
            g.state(),
            Some(CircuitState::Closed),
            "3 < minimumPublishes"
        );
        go(g.admit(t0)).finish_at(false, t0);
        assert_eq!(g.state(), Some(CircuitState::Open), "3 of 4 failed");
    }

    #[test]
    fn the_failure_rate_forgets_what_left_the_window() {
        let (g, _) = guard(breaker(100, Some(50)));
        let t0 = Instant::now();
        for _ in 0..3 {
            go(g.admit(t0)).finish_at(false, t0);
        }
        let later = t0 + Duration::from_secs(61);
        go(g.admit(later)).finish_at(true, later);
        go(g.admit(later)).finish_at(true, later);
        go(g.admit(later)).finish_at(true, later);
        go(g.admit(later)).finish_at(false, later);
        assert_eq!(
            g.state(),
            Some(CircuitState::Closed),
            "1 of 4 in the window"
        );
    }

    #[test]
    fn late_outcomes_of_publishes_started_before_the_opening_change_nothing() {
        let (g, _) = guard(breaker(1, None));
        let t0 = Instant::now();
        let early = go(g.admit(t0));
        go(g.admit(t0)).finish_at(false, t0);
        early.finish_at(true, t0);
        assert_eq!(g.state(), Some(CircuitState::Open));
    }
}
