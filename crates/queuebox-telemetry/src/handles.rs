//! Counter and gauge series, and the clock the time-based metrics read. A handle is an `Arc`
//! around atomics: cloning it is cheap, and moving it never takes a lock.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// Where summaries and uptime read the time; injectable so tests can move time without sleeping.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    fn now(&self) -> Instant;
}

/// The monotonic process clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// The clock and the instant the registry was created (the start of uptime and of summary
/// windows).
#[derive(Debug)]
pub(crate) struct TimeBase {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) origin: Instant,
}

impl TimeBase {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        let origin = clock.now();
        Self { clock, origin }
    }

    /// Seconds since creation, as a duration (never negative even if a test clock goes back).
    pub(crate) fn elapsed(&self) -> std::time::Duration {
        self.clock.now().saturating_duration_since(self.origin)
    }
}

/// `used` makes a first-use series appear at its first movement rather than at lookup, so code
/// may look up and keep handles at wiring time without publishing zeros for destinations never
/// published to (MET-7).
#[derive(Debug, Default)]
struct CounterCore {
    value: AtomicU64,
    used: AtomicBool,
}

/// One counter series. Counts are integers: every counter in the catalogue counts events.
#[derive(Clone, Debug, Default)]
pub struct CounterHandle(Arc<CounterCore>);

impl CounterHandle {
    pub fn inc(&self) {
        self.inc_by(1);
    }

    pub fn inc_by(&self, n: u64) {
        self.0.value.fetch_add(n, Ordering::Relaxed);
        mark_used(&self.0.used);
    }

    pub fn get(&self) -> u64 {
        self.0.value.load(Ordering::Relaxed)
    }

    pub(crate) fn is_used(&self) -> bool {
        self.0.used.load(Ordering::Relaxed)
    }

    pub(crate) fn mark_used(&self) {
        mark_used(&self.0.used);
    }
}

/// f64 stored as bits, because std has no atomic float.
#[derive(Debug, Default)]
struct GaugeCore {
    bits: AtomicU64,
    used: AtomicBool,
}

/// One gauge series.
#[derive(Clone, Debug, Default)]
pub struct GaugeHandle(Arc<GaugeCore>);

impl GaugeHandle {
    pub fn set(&self, value: f64) {
        self.0.bits.store(value.to_bits(), Ordering::Relaxed);
        mark_used(&self.0.used);
    }

    pub fn add(&self, delta: f64) {
        // A CAS loop: `fetch_update` retries if another thread moved the gauge in between.
        let _ = self
            .0
            .bits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + delta).to_bits())
            });
        mark_used(&self.0.used);
    }

    pub fn sub(&self, delta: f64) {
        self.add(-delta);
    }

    pub fn inc(&self) {
        self.add(1.0);
    }

    pub fn dec(&self) {
        self.add(-1.0);
    }

    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.bits.load(Ordering::Relaxed))
    }

    pub(crate) fn is_used(&self) -> bool {
        self.0.used.load(Ordering::Relaxed)
    }

    pub(crate) fn mark_used(&self) {
        mark_used(&self.0.used);
    }
}

/// Load before store: after the first movement the flag is only read, so the cache line stays
/// shared between cores on the hot path.
fn mark_used(flag: &AtomicBool) {
    if !flag.load(Ordering::Relaxed) {
        flag.store(true, Ordering::Relaxed);
    }
}
