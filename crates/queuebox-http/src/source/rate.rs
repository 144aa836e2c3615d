//! The per-source token bucket of INB-13 / OPS-14: capacity N, starts full, refills
//! continuously at N per 60 s, one token per request that reaches step 3.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// One token in bucket units: the bucket gains N units per nanosecond, so a token takes
/// 60 s / N to come back. Integers keep `Retry-After` exact (no float rounding up a second).
const UNITS_PER_TOKEN: u128 = 60_000_000_000;

/// One bucket per source and replica, shared by every caller of that source.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    /// N: units gained per nanosecond, and the capacity in tokens.
    per_minute: u128,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    units: u128,
    refilled_at: Instant,
}

impl TokenBucket {
    pub(crate) fn per_minute(requests_per_minute: u32) -> Self {
        let per_minute = u128::from(requests_per_minute.max(1));
        Self {
            per_minute,
            state: Mutex::new(State {
                units: per_minute * UNITS_PER_TOKEN,
                refilled_at: Instant::now(),
            }),
        }
    }

    /// Takes one token, or says how long until the next one.
    pub(crate) fn take(&self) -> Result<(), Duration> {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> Result<(), Duration> {
        // Held for a few integer operations only, never across an await.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let elapsed = now.saturating_duration_since(state.refilled_at).as_nanos();
        let capacity = self.per_minute * UNITS_PER_TOKEN;
        state.units = state
            .units
            .saturating_add(elapsed.saturating_mul(self.per_minute))
            .min(capacity);
        state.refilled_at = now;
        if state.units >= UNITS_PER_TOKEN {
            state.units -= UNITS_PER_TOKEN;
            Ok(())
        } else {
            let missing = UNITS_PER_TOKEN - state.units;
            let nanos = missing.div_ceil(self.per_minute);
            Err(Duration::from_nanos(
                u64::try_from(nanos).unwrap_or(u64::MAX),
            ))
        }
    }
}

/// `Retry-After`: whole seconds until the next token, rounded up, at least 1.
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    let whole = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    whole.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inb_13_bucket_starts_full_and_refuses_the_next_request() {
        let bucket = TokenBucket::per_minute(60);
        let now = Instant::now();
        for _ in 0..60 {
            assert!(bucket.take_at(now).is_ok());
        }
        let wait = bucket.take_at(now).unwrap_err();
        assert_eq!(retry_after_secs(wait), 1);
    }

    #[test]
    fn inb_13_refill_is_continuous() {
        let bucket = TokenBucket::per_minute(2); // one token per 30 s
        let start = Instant::now();
        assert!(bucket.take_at(start).is_ok());
        assert!(bucket.take_at(start).is_ok());
        let wait = bucket.take_at(start).unwrap_err();
        assert_eq!(retry_after_secs(wait), 30);
        // Half a token after 15 s: still refused, 15 s to go.
        let wait = bucket.take_at(start + Duration::from_secs(15)).unwrap_err();
        assert_eq!(retry_after_secs(wait), 15);
        assert!(bucket.take_at(start + Duration::from_secs(30)).is_ok());
        // Never more than the capacity, however long the pause.
        let later = start + Duration::from_secs(3600);
        assert!(bucket.take_at(later).is_ok());
        assert!(bucket.take_at(later).is_ok());
        assert!(bucket.take_at(later).is_err());
    }

    #[test]
    fn inb_13_retry_after_rounds_up_and_is_at_least_one() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
    }
}
