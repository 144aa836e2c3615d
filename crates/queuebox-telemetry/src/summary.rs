//! Summary series (MET-4): quantiles 0.5, 0.95 and 0.99 over a sliding window of about 60 s,
//! plus `_sum` and `_count` over the process lifetime, in bounded memory whatever the rate.
//!
//! The approximation, stated honestly:
//! - Time is cut into buckets of 10 s, aligned to the registry's creation; the window is the
//!   current bucket plus the 5 before it. So the quantiles cover between 50 and 60 s of history
//!   (never more than 60 s), and an observation leaves the window whole-bucket at a time.
//! - Each bucket keeps at most `RESERVOIR` observations, chosen by reservoir sampling (every
//!   observation of the bucket has the same chance to be kept). A kept sample stands for
//!   `seen / kept` observations, so a busy bucket weighs as much as it should against a quiet
//!   one. Below `RESERVOIR` observations per bucket the quantiles are exact (nearest rank).
//! - Memory per series: 6 × `RESERVOIR` × 8 bytes, fixed.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::handles::TimeBase;

/// The quantiles exposed, in exposition order.
pub(crate) const QUANTILES: [f64; 3] = [0.5, 0.95, 0.99];
const BUCKET_SECS: u64 = 10;
const BUCKETS: u64 = 6;
const RESERVOIR: usize = 256;

#[derive(Debug, Default)]
struct Bucket {
    /// Which 10-s slot since the origin this bucket currently holds.
    slot: u64,
    /// Observations the bucket received (kept or not).
    seen: u64,
    samples: Vec<f64>,
}

#[derive(Debug)]
struct State {
    buckets: [Bucket; BUCKETS as usize],
    sum: f64,
    count: u64,
    /// xorshift64 state: reservoir sampling needs uniformity, not unpredictability, and a
    /// dependency for that is not worth it.
    rng: u64,
}

impl Default for State {
    fn default() -> Self {
        Self {
            buckets: Default::default(),
            sum: 0.0,
            count: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
        }
    }
}

impl State {
    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    fn observe(&mut self, elapsed: Duration, value: f64) {
        self.sum += value;
        self.count += 1;
        let slot = elapsed.as_secs() / BUCKET_SECS;
        let index = (slot % BUCKETS) as usize;
        if self.buckets[index].slot != slot {
            let bucket = &mut self.buckets[index];
            bucket.slot = slot;
            bucket.seen = 0;
            bucket.samples.clear();
        }
        let random = self.next_random();
        let bucket = &mut self.buckets[index];
        bucket.seen += 1;
        if bucket.samples.len() < RESERVOIR {
            bucket.samples.push(value);
        } else {
            // Algorithm R: keep the n-th observation with probability RESERVOIR / n.
            let pick = (random % bucket.seen) as usize;
            if pick < RESERVOIR {
                bucket.samples[pick] = value;
            }
        }
    }

    fn snapshot(&self, elapsed: Duration) -> SummarySnapshot {
        let current = elapsed.as_secs() / BUCKET_SECS;
        let mut weighted: Vec<(f64, f64)> = Vec::new();
        for bucket in &self.buckets {
            let live = bucket.seen > 0 && bucket.slot <= current && current - bucket.slot < BUCKETS;
            if live {
                let weight = bucket.seen as f64 / bucket.samples.len() as f64;
                weighted.extend(bucket.samples.iter().map(|&v| (v, weight)));
            }
        }
        weighted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total: f64 = weighted.iter().map(|(_, w)| w).sum();
        let quantiles = QUANTILES.map(|q| weighted_quantile(&weighted, total, q));
        SummarySnapshot {
            quantiles,
            sum: self.sum,
            count: self.count,
        }
    }
}

/// Nearest rank over weighted samples sorted by value; NaN for an empty window, as Prometheus
/// clients report a quantile with no data.
fn weighted_quantile(sorted: &[(f64, f64)], total: f64, q: f64) -> f64 {
    let target = q * total;
    let mut cumulative = 0.0;
    for &(value, weight) in sorted {
        cumulative += weight;
        if cumulative >= target {
            return value;
        }
    }
    // Rounding can leave the sum a hair under the target; the largest sample is then the answer.
    sorted.last().map_or(f64::NAN, |&(value, _)| value)
}

/// What a scrape reads from one summary series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SummarySnapshot {
    /// In the order of [`QUANTILES`].
    pub(crate) quantiles: [f64; 3],
    pub(crate) sum: f64,
    pub(crate) count: u64,
}

/// One summary series. Observing takes a short lock (the window is not a single atomic); no
/// summary is on a per-message path that a lock would slow measurably next to the I/O it times.
#[derive(Clone, Debug)]
pub struct SummaryHandle {
    state: Arc<Mutex<State>>,
    time: Arc<TimeBase>,
}

impl SummaryHandle {
    pub(crate) fn new(time: Arc<TimeBase>) -> Self {
        Self {
            state: Arc::default(),
            time,
        }
    }

    /// Records one observation, in seconds. NaN is dropped: it would poison `_sum` for the life
    /// of the process.
    pub fn observe(&self, seconds: f64) {
        if seconds.is_nan() {
            return;
        }
        let elapsed = self.time.elapsed();
        self.lock().observe(elapsed, seconds);
    }

    pub fn observe_duration(&self, duration: Duration) {
        self.observe(duration.as_secs_f64());
    }

    pub fn count(&self) -> u64 {
        self.lock().count
    }

    pub(crate) fn is_used(&self) -> bool {
        self.count() > 0
    }

    pub(crate) fn snapshot(&self) -> SummarySnapshot {
        let elapsed = self.time.elapsed();
        self.lock().snapshot(elapsed)
    }

    /// The state stays consistent even if a holder panicked (only arithmetic runs under the
    /// lock), so a poisoned lock is used as is rather than losing the metric.
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn met_4_summary_memory_is_bounded_whatever_the_rate() {
        let mut state = State::default();
        for i in 0..100_000 {
            state.observe(at(i % 60), i as f64);
        }
        let kept: usize = state.buckets.iter().map(|b| b.samples.len()).sum();
        assert!(kept <= BUCKETS as usize * RESERVOIR, "kept {kept}");
        assert_eq!(state.count, 100_000);
    }

    #[test]
    fn met_4_a_busy_bucket_weighs_by_what_it_saw_not_what_it_kept() {
        let mut state = State::default();
        for _ in 0..10_000 {
            state.observe(at(0), 1.0);
        }
        for _ in 0..10 {
            state.observe(at(10), 100.0);
        }
        // Unweighted, 256 kept ones against 10 hundreds would put p99 at 100; weighted, the ten
        // hundreds are 0.1 % of the window.
        let snapshot = state.snapshot(at(15));
        assert_eq!(snapshot.quantiles, [1.0, 1.0, 1.0]);
    }

    #[test]
    fn met_4_reservoir_keeps_a_fair_sample_of_a_bucket() {
        let mut state = State::default();
        for i in 1..=10_000 {
            state.observe(at(3), f64::from(i));
        }
        let median = state.snapshot(at(3)).quantiles[0];
        // Sampling error of the median of 256 from a uniform 1..=10000 is a few hundred.
        assert!((3_500.0..=6_500.0).contains(&median), "median {median}");
    }

    #[test]
    fn met_4_window_spans_the_current_bucket_and_the_five_before() {
        let mut state = State::default();
        state.observe(at(5), 7.0);
        assert_eq!(state.snapshot(at(59)).quantiles[0], 7.0);
        assert!(state.snapshot(at(60)).quantiles[0].is_nan());
    }

    #[test]
    fn met_4_nearest_rank_quantiles_are_exact_below_the_reservoir_size() {
        let mut state = State::default();
        for i in 1..=100 {
            state.observe(at(0), f64::from(i));
        }
        let snapshot = state.snapshot(at(0));
        assert_eq!(snapshot.quantiles, [50.0, 95.0, 99.0]);
        assert_eq!(snapshot.sum, 5050.0);
        assert_eq!(snapshot.count, 100);
    }
}
