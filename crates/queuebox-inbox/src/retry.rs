//! Retry policies: what a failed delivery becomes (pull.md §10, PULL-60..62).

use std::error::Error;
use std::time::Duration;

use crate::message::InboxMessage;
use crate::options::{MAX_MS, OptionsError};

/// What the worker does with a message whose handler failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureAction {
    /// Make the row due again after this delay (clamped to 2147483647 ms, PULL-62).
    RetryAfter(Duration),
    /// Give up: the row becomes `dead`.
    DeadLetter,
}

/// Maps (message, error) to an action. Both Retry and Dead raise `attempt` (PULL-12).
pub trait RetryPolicy: Send + Sync + 'static {
    fn decide(
        &self,
        message: &InboxMessage,
        error: &(dyn Error + Send + Sync + 'static),
    ) -> FailureAction;
}

/// The default policy of PULL-60/61: exponential backoff with jitter, dead-letter at the ceiling.
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultRetryPolicy {
    max_attempts: u32,
    base_delay: Duration,
    max_delay: Duration,
    jitter: f64,
}

impl Default for DefaultRetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(1_000),
            max_delay: Duration::from_millis(300_000),
            jitter: 0.25,
        }
    }
}

impl DefaultRetryPolicy {
    /// Validates the parameters of PULL-60 (`baseDelay >= 0` holds by type).
    pub fn new(
        max_attempts: u32,
        base_delay: Duration,
        max_delay: Duration,
        jitter: f64,
    ) -> Result<Self, OptionsError> {
        if max_attempts < 1 {
            return Err(OptionsError(
                "The maximum attempts must be at least 1.".into(),
            ));
        }
        if max_delay < base_delay {
            return Err(OptionsError(
                "The maximum delay must be at least the base delay.".into(),
            ));
        }
        if !(0.0..=1.0).contains(&jitter) {
            return Err(OptionsError("The jitter must be between 0 and 1.".into()));
        }
        Ok(Self {
            max_attempts,
            base_delay,
            max_delay,
            jitter,
        })
    }

    /// The decision for a delivery at `attempt`, with `unit` a uniform sample in `[0, 1)`.
    pub fn decide_attempt(&self, attempt: i32, unit: f64) -> FailureAction {
        let n = i64::from(attempt.max(0)) + 1;
        if n >= i64::from(self.max_attempts) {
            return FailureAction::DeadLetter;
        }
        // 2^30 × base fits easily in f64; min(n-1, 30) keeps attempt 100 from overflowing.
        let exp = (n - 1).min(30) as i32;
        let base = self.base_delay.as_millis() as f64 * 2f64.powi(exp);
        let mut d = base.min(self.max_delay.as_millis() as f64);
        if self.jitter > 0.0 {
            d *= 1.0 + unit * self.jitter;
        }
        let ms = (d.floor() as u64).min(MAX_MS);
        FailureAction::RetryAfter(Duration::from_millis(ms))
    }
}

impl RetryPolicy for DefaultRetryPolicy {
    fn decide(
        &self,
        message: &InboxMessage,
        _: &(dyn Error + Send + Sync + 'static),
    ) -> FailureAction {
        self.decide_attempt(message.attempt, unit_random())
    }
}

/// A uniform sample in `[0, 1)` from the OS randomness behind UUIDv4, to avoid a rand dependency.
fn unit_random() -> f64 {
    let bits = uuid::Uuid::new_v4().as_u128() as u64 >> 11;
    bits as f64 / (1u64 << 53) as f64
}
