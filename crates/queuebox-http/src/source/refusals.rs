//! Refused webhooks made visible (issue 14 item 9): every error answer of a source counts in
//! `queuebox_inbox_webhook_refusals_total{source,reason}`, and is logged at info, at most one
//! line per source every [`LOG_EVERY`] (the line says how many it stands for).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use queuebox_telemetry::{CounterHandle, Metrics, RefusalReason};

use super::respond::Answer;

/// At most one info line per source in this period.
pub(crate) const LOG_EVERY: Duration = Duration::from_secs(10);

/// The refusal counters and the log limiter of one source.
pub(crate) struct Refusals {
    source: String,
    counters: Vec<CounterHandle>,
    log: Mutex<LogState>,
}

#[derive(Default)]
struct LogState {
    last: Option<Instant>,
    /// Refusals since the last line, not logged.
    quiet: u64,
}

impl Refusals {
    pub(crate) fn new(metrics: &Metrics, source: &str) -> Self {
        let counters = RefusalReason::ALL
            .iter()
            .map(|reason| metrics.webhook_refusals(source, *reason))
            .collect();
        Self {
            source: source.to_owned(),
            counters,
            log: Mutex::new(LogState::default()),
        }
    }

    /// Counts the refusal and, at most once per period, logs it with the request's
    /// correlation id (INB-76: every line about a message carries it).
    pub(crate) fn record(&self, reason: RefusalReason, answer: &Answer, correlation_id: &str) {
        self.counters[reason as usize].inc();
        if let Some(also) = self.may_log(Instant::now()) {
            tracing::info!(
                source = %self.source,
                correlationId = correlation_id,
                reason = reason.as_str(),
                detail = %detail(answer),
                alsoRefused = also,
                "A webhook request was refused. queuebox_inbox_webhook_refusals_total counts every refusal; this line is written at most once per 10 s per source."
            );
        }
    }

    /// `Some(refusals not logged since the last line)` when a line may be written now.
    fn may_log(&self, now: Instant) -> Option<u64> {
        let mut state = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        if state
            .last
            .is_some_and(|last| now.duration_since(last) < LOG_EVERY)
        {
            state.quiet += 1;
            return None;
        }
        state.last = Some(now);
        Some(std::mem::take(&mut state.quiet))
    }
}

/// The refusal's own text, as the client is answered (never the body).
fn detail(answer: &Answer) -> String {
    match answer {
        Answer::Unauthorized(text) => text.clone(),
        Answer::TooLarge(cap) => format!("body over {cap} bytes"),
        Answer::RateLimited { retry_after_secs } => format!("retry after {retry_after_secs} s"),
        Answer::JsonLimit(limit) => (*limit).to_owned(),
        Answer::TransformFailed(text) | Answer::DataRejected(text) => text.clone(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_period_and_the_line_counts_the_quiet_ones() {
        let refusals = Refusals::new(&Metrics::new("test"), "stripe");
        let start = Instant::now();
        assert_eq!(refusals.may_log(start), Some(0));
        assert_eq!(refusals.may_log(start + Duration::from_secs(1)), None);
        assert_eq!(refusals.may_log(start + Duration::from_secs(9)), None);
        assert_eq!(refusals.may_log(start + LOG_EVERY), Some(2));
    }

    #[test]
    fn every_refusal_counts_by_reason() {
        let metrics = Metrics::new("test");
        let refusals = Refusals::new(&metrics, "stripe");
        for _ in 0..3 {
            refusals.record(
                RefusalReason::Unauthorized,
                &Answer::Unauthorized("Invalid signature".into()),
                "c-1",
            );
        }
        refusals.record(RefusalReason::TooLarge, &Answer::TooLarge(10), "c-2");
        let text = metrics.render();
        assert!(
            text.contains(
                "queuebox_inbox_webhook_refusals_total{source=\"stripe\",reason=\"unauthorized\"} 3"
            ),
            "{text}"
        );
        assert!(text.contains(
            "queuebox_inbox_webhook_refusals_total{source=\"stripe\",reason=\"too_large\"} 1"
        ));
        assert!(!text.contains("reason=\"rate_limited\""), "first use only");
    }
}
