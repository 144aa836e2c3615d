//! Lease renewal (OUT-40..43): every held claim is renewed every `claimTimeoutMs / 3` in one
//! fenced statement; a claim the answer leaves out is lost, a database error is not.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_core::redact::redact;
use queuebox_store::Claim;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::Level;

use super::PollerContext;
use super::row::row_event;
use crate::repeat::RepeatLog;
use queuebox_telemetry::Table;

/// OUT-40: `claimTimeoutMs / 3`, rounded down, at least 1 ms.
pub fn renew_period(claim_timeout: Duration) -> Duration {
    Duration::from_millis((claim_timeout.as_millis() / 3) as u64).max(Duration::from_millis(1))
}

/// Runs until `stop`, which the poller cancels only when it holds nothing more or abandons the
/// rest (OUT-58 steps 3–4).
pub async fn run_renewal(shared: Arc<PollerContext>, stop: CancellationToken) {
    let period = renew_period(shared.settings.claim_timeout);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    // A slow database must not cause a burst of renewals when it answers again.
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut failures = RepeatLog::default();
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let claims = shared.held.claims();
        if claims.is_empty() {
            continue;
        }
        // The renewed leases end claimTimeoutMs after the database ran the statement, so no
        // earlier than claimTimeoutMs after it was sent.
        let sent = Instant::now();
        let answer = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            answer = shared.store.renew(&claims, shared.settings.claim_timeout) => answer,
        };
        match answer {
            Ok(renewed) => {
                if let Some(repeats) = failures.success() {
                    tracing::info!(repeats, "Renewing the outbox leases works again.");
                }
                shared
                    .held
                    .renewed(&renewed, sent + shared.settings.claim_timeout);
                let renewed: HashSet<Claim> = renewed.into_iter().collect();
                let missing: Vec<Claim> = claims
                    .into_iter()
                    .filter(|c| !renewed.contains(c))
                    .collect();
                if !missing.is_empty() {
                    lost(&shared, &missing);
                }
            }
            // OUT-42: not a lost claim; if every renewal fails the lease simply expires.
            Err(err) => {
                if let Some(repeats) = failures.failure(Instant::now()) {
                    tracing::warn!(
                        error = %redact(&err.to_string()),
                        repeats,
                        rows = claims.len(),
                        "Renewing the outbox leases failed. QueueBox tries again at the next renewal."
                    );
                }
            }
        }
    }
}

/// OUT-43: the publish does not start or is abandoned (the token), nothing more is written.
fn lost(shared: &PollerContext, missing: &[Claim]) {
    for entry in shared.held.take_lost(missing) {
        shared.metrics.claims_lost(Table::Outbox).inc();
        row_event!(
            Level::WARN,
            entry.log,
            "The claim on the message was lost: its lease could not be renewed. QueueBox stops its publish and writes nothing; another replica delivers it again."
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_40_renewal_period_is_a_third_rounded_down_and_at_least_1_ms() {
        assert_eq!(
            renew_period(Duration::from_millis(300_000)),
            Duration::from_millis(100_000)
        );
        assert_eq!(
            renew_period(Duration::from_millis(1000)),
            Duration::from_millis(333)
        );
        assert_eq!(
            renew_period(Duration::from_millis(2)),
            Duration::from_millis(1)
        );
    }
}
