//! Rate limiting of a repeated failure in a background loop (operations.md OPS-36): the first
//! failure is logged, then at most one line per 30 s with the number of repeats since the last
//! line, so a database outage does not flood the log at every poll.

use std::time::{Duration, Instant};

/// OPS-36: at most one line per this window for one repeated failure.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(30);

/// The state of one kind of failure of one loop.
#[derive(Debug)]
pub struct RepeatLog {
    window: Duration,
    last_line: Option<Instant>,
    /// Failures not logged since the last line.
    repeats: u64,
}

impl Default for RepeatLog {
    fn default() -> Self {
        Self::new(REPEAT_WINDOW)
    }
}

impl RepeatLog {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            last_line: None,
            repeats: 0,
        }
    }

    /// A failure at `now`: `Some(repeats since the last line)` when it should be logged.
    pub fn failure(&mut self, now: Instant) -> Option<u64> {
        match self.last_line {
            Some(at) if now.saturating_duration_since(at) < self.window => {
                self.repeats += 1;
                None
            }
            _ => {
                self.last_line = Some(now);
                Some(std::mem::take(&mut self.repeats))
            }
        }
    }

    /// The loop succeeded: the next failure is a new one and is logged at once. Returns how many
    /// failures went unlogged since the last line, when the streak had any.
    pub fn success(&mut self) -> Option<u64> {
        let was_failing = self.last_line.take().is_some();
        let repeats = std::mem::take(&mut self.repeats);
        was_failing.then_some(repeats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_36_first_failure_then_one_line_per_window_with_the_repeat_count() {
        let mut log = RepeatLog::default();
        let t0 = Instant::now();
        assert_eq!(log.failure(t0), Some(0));
        for s in 1..30 {
            assert_eq!(log.failure(t0 + Duration::from_secs(s)), None);
        }
        assert_eq!(log.failure(t0 + Duration::from_secs(30)), Some(29));
        assert_eq!(log.failure(t0 + Duration::from_secs(31)), None);
        assert_eq!(log.success(), Some(1));
        assert_eq!(log.success(), None);
        assert_eq!(log.failure(t0 + Duration::from_secs(32)), Some(0));
    }
}
