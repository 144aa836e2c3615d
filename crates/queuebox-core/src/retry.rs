//! The retry rule of the outbox (outbox.md OUT-28..30): how long a failed delivery waits, and
//! whether a failure used the last delivery.

use std::time::Duration;

/// `outbox.retryBaseDelayMs` and `outbox.retryMaxDelayMs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub base_delay_ms: u64,
    pub max_delay_ms: u64,
}

/// A row's `attempt`: the failed deliveries so far, 0 before the first delivery (OUT-26).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Attempt(pub i32);

/// A row's `max_attempts`: the most deliveries it gets (OUT-6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MaxAttempts(pub i32);

/// What a failed delivery does to the row (OUT-28).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureFate {
    /// Back to `pending`, due after `delay`; `attempt` becomes `attempt`.
    Retry { attempt: i32, delay: Duration },
    /// The failure used the last delivery: `dead` with this `attempt`.
    Dead { attempt: i32 },
}

impl RetryPolicy {
    /// The delay after the n-th failure (n >= 1) before jitter:
    /// `min(base × 2^(n−1), max)`, computed without overflow.
    pub fn base_delay_ms(&self, failures: i32) -> u64 {
        let exponent = failures.saturating_sub(1).clamp(0, 63) as u32;
        let factor = 1u64.checked_shl(exponent).unwrap_or(u64::MAX);
        self.base_delay_ms
            .saturating_mul(factor)
            .min(self.max_delay_ms)
    }

    /// OUT-29 with `jitter` = U drawn uniformly from [0, 1): the delay is base + U/4 × base.
    pub fn backoff(&self, failures: i32, jitter: f64) -> Duration {
        let base = self.base_delay_ms(failures);
        let extra = (base as f64 * jitter.clamp(0.0, 1.0) * 0.25) as u64;
        Duration::from_millis(base.saturating_add(extra))
    }

    /// OUT-30: a `Retry-After` delay, clamped to [0, retryMaxDelayMs], no jitter; [`Self::fate`]
    /// never lets it go below the backoff.
    pub fn retry_after(&self, requested: Duration) -> Duration {
        requested.min(Duration::from_millis(self.max_delay_ms))
    }

    /// OUT-28: the fate of a row whose delivery number `attempt` (0-based) just failed.
    /// `max_attempts` below 1 behaves as 1 (OUT-6).
    pub fn fate(
        &self,
        Attempt(attempt): Attempt,
        MaxAttempts(max_attempts): MaxAttempts,
        retry_after: Option<Duration>,
        jitter: f64,
    ) -> FailureFate {
        let failures = attempt.saturating_add(1);
        if failures >= max_attempts.max(1) {
            return FailureFate::Dead { attempt: failures };
        }
        // Issue 17 defect 7: the backoff is the floor. A Retry-After may ask for longer (up to
        // retryMaxDelayMs), never for less: a date in the past or `0` would otherwise spend
        // every delivery of the row within a fraction of a second.
        let backoff = self.backoff(failures, jitter);
        let delay = match retry_after {
            Some(requested) => self.retry_after(requested).max(backoff),
            None => backoff,
        };
        FailureFate::Retry {
            attempt: failures,
            delay,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: RetryPolicy = RetryPolicy {
        base_delay_ms: 1000,
        max_delay_ms: 60_000,
    };

    #[test]
    fn out_29_backoff_table_with_the_defaults() {
        let expected = [1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000];
        for (n, base) in (1..).zip(expected) {
            assert_eq!(DEFAULTS.base_delay_ms(n), base, "n = {n}");
            assert_eq!(DEFAULTS.backoff(n, 0.0), Duration::from_millis(base));
            assert_eq!(
                DEFAULTS.backoff(n, 1.0),
                Duration::from_millis(base + base / 4)
            );
        }
    }

    #[test]
    fn out_29_no_overflow_for_huge_failure_counts() {
        assert_eq!(DEFAULTS.base_delay_ms(i32::MAX), 60_000);
        let big = RetryPolicy {
            base_delay_ms: u64::MAX / 2,
            max_delay_ms: u64::MAX,
        };
        assert_eq!(big.base_delay_ms(10), u64::MAX);
    }

    #[test]
    fn out_30_retry_after_replaces_backoff_and_is_clamped() {
        let fate = DEFAULTS.fate(
            Attempt(0),
            MaxAttempts(5),
            Some(Duration::from_secs(2)),
            0.9,
        );
        assert_eq!(
            fate,
            FailureFate::Retry {
                attempt: 1,
                delay: Duration::from_secs(2)
            }
        );
        let fate = DEFAULTS.fate(
            Attempt(0),
            MaxAttempts(5),
            Some(Duration::from_secs(3600)),
            0.0,
        );
        assert_eq!(
            fate,
            FailureFate::Retry {
                attempt: 1,
                delay: Duration::from_secs(60)
            }
        );
    }

    /// Issue 17 defect 7: a `Retry-After` shorter than the backoff (a date in the past, `0`)
    /// never shortens it; the backoff of OUT-29 is the floor, so a row cannot go dead in a
    /// fraction of a second.
    #[test]
    fn out_30_retry_after_below_the_backoff_keeps_the_backoff() {
        let fate = DEFAULTS.fate(Attempt(2), MaxAttempts(5), Some(Duration::ZERO), 0.0);
        assert_eq!(
            fate,
            FailureFate::Retry {
                attempt: 3,
                delay: Duration::from_secs(4)
            }
        );
        let fate = DEFAULTS.fate(
            Attempt(0),
            MaxAttempts(5),
            Some(Duration::from_millis(500)),
            0.4,
        );
        assert_eq!(
            fate,
            FailureFate::Retry {
                attempt: 1,
                delay: Duration::from_millis(1100)
            },
            "the backoff with its jitter"
        );
    }

    #[test]
    fn out_28_last_delivery_makes_the_row_dead_even_with_retry_after() {
        assert_eq!(
            DEFAULTS.fate(
                Attempt(4),
                MaxAttempts(5),
                Some(Duration::from_secs(1)),
                0.0
            ),
            FailureFate::Dead { attempt: 5 }
        );
        assert_eq!(
            DEFAULTS.fate(Attempt(2), MaxAttempts(3), None, 0.0),
            FailureFate::Dead { attempt: 3 }
        );
        assert!(matches!(
            DEFAULTS.fate(Attempt(1), MaxAttempts(3), None, 0.0),
            FailureFate::Retry { attempt: 2, .. }
        ));
    }

    #[test]
    fn out_6_max_attempts_below_one_behaves_as_one() {
        assert_eq!(
            DEFAULTS.fate(Attempt(0), MaxAttempts(0), None, 0.0),
            FailureFate::Dead { attempt: 1 }
        );
        assert_eq!(
            DEFAULTS.fate(Attempt(0), MaxAttempts(-3), None, 0.0),
            FailureFate::Dead { attempt: 1 }
        );
    }
}
