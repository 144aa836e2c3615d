//! One claimed batch (RLY-7, RLY-9, RLY-12, RLY-15): forwards the rows one at a time in claim
//! order while a renewal beside it extends the leases every `claimTimeoutMs / 3`, skips the rows
//! whose claim was lost, and at shutdown finishes the forward in progress and releases the rest.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use queuebox_core::redact::redact;
use queuebox_store::{Claim, RelayRow};
use tokio_util::sync::CancellationToken;
use tracing::Level;

use super::RelayContext;
use super::forward::{RelayLog, forwarded_row, relay_event, render_topic};
use crate::repeat::RepeatLog;
use queuebox_telemetry::{InboxStatus, Table};

/// How a batch went.
pub struct BatchEnd {
    /// A forward failed (RLY-12): the next claim waits `pollIntervalMs`.
    pub failed: bool,
}

/// The rate limits (OPS-36) that outlive one batch.
#[derive(Default)]
pub struct Logs {
    renewals: RepeatLog,
    forwards: RepeatLog,
}

/// The claims of the batch not yet ended, shared by the forward and the renewal (never locked
/// across an `.await`).
#[derive(Default)]
struct BatchClaims {
    inner: Mutex<BatchClaimsInner>,
}

#[derive(Default)]
struct BatchClaimsInner {
    /// Claimed, forward not started.
    waiting: HashMap<Claim, RelayLog>,
    /// The forward in progress. Its own fenced write decides whether its claim is lost, so the
    /// renewal never judges it (a renewal can see it already `processed`).
    forwarding: Option<Claim>,
}

impl BatchClaims {
    fn lock(&self) -> std::sync::MutexGuard<'_, BatchClaimsInner> {
        // A panic while locked cannot leave the map half-changed; go on with what it holds.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every claim the renewal extends.
    fn claims(&self) -> Vec<Claim> {
        let inner = self.lock();
        inner
            .waiting
            .keys()
            .copied()
            .chain(inner.forwarding)
            .collect()
    }

    /// Moves `claim` to in progress; `false` when the renewal found it lost.
    fn start(&self, claim: Claim) -> bool {
        let mut inner = self.lock();
        let held = inner.waiting.remove(&claim).is_some();
        inner.forwarding = held.then_some(claim);
        held
    }

    fn finish(&self) {
        self.lock().forwarding = None;
    }

    /// Removes the waiting claims among `missing`; the forward in progress is not one.
    fn take_lost(&self, missing: &[Claim]) -> Vec<RelayLog> {
        let mut inner = self.lock();
        missing
            .iter()
            .filter_map(|c| inner.waiting.remove(c))
            .collect()
    }

    fn take_waiting(&self) -> Vec<(Claim, RelayLog)> {
        self.lock().waiting.drain().collect()
    }
}

/// Forwards `rows` (RLY-9) and returns when each is forwarded, dead, released or lost. After
/// `stop` it starts no further row and releases the unstarted ones (RLY-15).
pub async fn forward(
    shared: &RelayContext,
    rows: Vec<RelayRow>,
    stop: &CancellationToken,
    logs: &mut Logs,
) -> BatchEnd {
    if rows.is_empty() {
        return BatchEnd { failed: false };
    }
    let held = BatchClaims::default();
    held.lock().waiting = rows
        .iter()
        .map(|row| (row.claim, RelayLog::of(row)))
        .collect();
    let Logs { renewals, forwards } = logs;
    let forwarding = async {
        let mut failed = false;
        let mut forwarded = 0usize;
        for row in rows {
            if stop.is_cancelled() {
                break;
            }
            if !held.start(row.claim) {
                continue;
            }
            failed |= !forward_one(shared, row, forwards, &mut forwarded).await;
            held.finish();
        }
        if forwarded > 0 {
            // OUT-56, coalesced: one wake-up for the batch's forwards once they are committed,
            // not one per row, so a stream of forwards costs about one outbox claim per relay
            // batch instead of one per row (issue 16 item 3).
            shared.outbox_wake.notify_one();
        }
        failed
    };
    let failed = tokio::select! {
        failed = forwarding => failed,
        never = renew(shared, &held, renewals) => match never {},
    };
    let unstarted = held.take_waiting();
    if !unstarted.is_empty() {
        release_unstarted(shared, unstarted).await;
    }
    BatchEnd { failed }
}

/// RLY-7: `claimTimeoutMs / 3`, rounded down, at least 1 ms.
pub fn renew_period(claim_timeout: Duration) -> Duration {
    Duration::from_millis((claim_timeout.as_millis() / 3) as u64).max(Duration::from_millis(1))
}

/// Renews every held claim each period until dropped (when the forward of the batch ends).
async fn renew(
    shared: &RelayContext,
    held: &BatchClaims,
    failures: &mut RepeatLog,
) -> std::convert::Infallible {
    let lease = shared.settings.claim_timeout;
    let period = renew_period(lease);
    loop {
        tokio::time::sleep(period).await;
        let claims = held.claims();
        if claims.is_empty() {
            continue;
        }
        match shared.store.relay_renew(&claims, lease).await {
            Ok(renewed) => {
                if let Some(repeats) = failures.success() {
                    tracing::info!(repeats, "Renewing the inbox relay leases works again.");
                }
                let renewed: HashSet<Claim> = renewed.into_iter().collect();
                let missing: Vec<Claim> = claims
                    .into_iter()
                    .filter(|c| !renewed.contains(c))
                    .collect();
                for log in held.take_lost(&missing) {
                    lost(shared, &log, "its lease could not be renewed");
                }
            }
            // A failed renewal is not a lost claim; if none succeeds the lease expires and the
            // fenced forward finds out.
            Err(err) => {
                if let Some(repeats) = failures.failure(Instant::now()) {
                    tracing::warn!(
                        error = %redact(&err.to_string()),
                        repeats,
                        rows = claims.len(),
                        "Renewing the inbox relay leases failed. QueueBox tries again at the next renewal."
                    );
                }
            }
        }
    }
}

/// RLY-7: the relay stops work on the row and writes nothing more; its new owner forwards it.
fn lost(shared: &RelayContext, log: &RelayLog, why: &str) {
    shared.metrics.claims_lost(Table::Inbox).inc();
    relay_event!(
        Level::WARN,
        log,
        reason = why,
        "The relay's claim on the inbox message was lost. QueueBox writes nothing more for it; its new owner forwards it."
    );
}

/// RLY-9 for one row; `false` when the forward failed (RLY-12).
async fn forward_one(
    shared: &RelayContext,
    row: RelayRow,
    failures: &mut RepeatLog,
    forwarded: &mut usize,
) -> bool {
    let claim = row.claim;
    let mut log = RelayLog::of(&row);
    let Some(template) = shared.topics.get(&row.source) else {
        // The claim asks only for configured sources (RLY-2); a row of another one is a store
        // bug, returned unchanged rather than guessed at.
        let reason = format!(
            "The source '{}' is not configured for the relay.",
            row.source
        );
        return fail(shared, claim, &log, reason, failures).await;
    };
    let topic = match render_topic(template, &row.source, row.event_type.as_deref()) {
        Ok(topic) => topic,
        Err(invalid) => return dead(shared, claim, &log, &invalid, failures).await,
    };
    let outbox_row = match forwarded_row(&row, topic, shared.settings.max_attempts) {
        Ok(outbox_row) => outbox_row,
        Err(err) => return fail(shared, claim, &log, err.to_string(), failures).await,
    };
    log.message_id = Some(outbox_row.id);
    match shared.store.relay_forward(claim, &outbox_row).await {
        Ok(true) => {
            if let Some(repeats) = failures.success() {
                tracing::info!(repeats, "Forwarding inbox messages works again.");
            }
            shared.metrics.inbox_messages(InboxStatus::Forwarded).inc();
            // OUT-56: the batch wakes the poller once its forwards are done (`forward`).
            *forwarded += 1;
            relay_event!(
                Level::DEBUG,
                log,
                topic = %outbox_row.topic,
                "Forwarded the inbox message to the outbox."
            );
            true
        }
        // RLY-9 step 2: the fence failed and the outbox insert rolled back with it.
        Ok(false) => {
            log.message_id = None;
            lost(shared, &log, "the forward found the claim taken");
            true
        }
        Err(err) => {
            log.message_id = None;
            fail(shared, claim, &log, err.to_string(), failures).await
        }
    }
}

/// RLY-9 step 1: an invalid topic sends the row to `dead`, writing nothing to the outbox.
async fn dead(
    shared: &RelayContext,
    claim: Claim,
    log: &RelayLog,
    invalid: &str,
    failures: &mut RepeatLog,
) -> bool {
    // The text holds the source name and event type only; redacted like every stored error.
    let error = redact(invalid);
    match shared.store.relay_dead(claim, &error).await {
        Ok(true) => {
            relay_event!(Level::WARN, log, error = %error, "The relay topic of the inbox message is invalid. The message is dead.");
            true
        }
        Ok(false) => {
            lost(shared, log, "marking it dead found the claim taken");
            true
        }
        Err(err) => fail(shared, claim, log, err.to_string(), failures).await,
    }
}

/// RLY-12: one fenced write back to `pending` with the redacted error, `attempt` and
/// `scheduled_at` unchanged, so the row keeps its place in its aggregate.
async fn fail(
    shared: &RelayContext,
    claim: Claim,
    log: &RelayLog,
    error: String,
    failures: &mut RepeatLog,
) -> bool {
    shared.metrics.inbox_relay_errors().inc();
    let error = redact(&error);
    if let Some(repeats) = failures.failure(Instant::now()) {
        relay_event!(
            Level::WARN,
            log,
            error = %error,
            repeats,
            "Forwarding the inbox message to the outbox failed. It returns to pending and is forwarded again."
        );
    }
    match shared.store.relay_release(&[claim], Some(&error)).await {
        Ok(released) if released.is_empty() => {
            lost(shared, log, "the release found the claim taken")
        }
        Ok(_) => {}
        Err(err) => relay_event!(
            Level::WARN,
            log,
            error = %redact(&err.to_string()),
            "Returning the inbox message to pending failed. It returns when its lease expires."
        ),
    }
    false
}

/// RLY-15: the claimed rows whose forward has not started go back to `pending`, fenced, with
/// nothing else changed. A failure leaves them to the reclaim (RLY-8).
async fn release_unstarted(shared: &RelayContext, unstarted: Vec<(Claim, RelayLog)>) {
    let claims: Vec<Claim> = unstarted.iter().map(|(c, _)| *c).collect();
    match shared.store.relay_release(&claims, None).await {
        Ok(released) => {
            let released: HashSet<Claim> = released.into_iter().collect();
            for (claim, log) in &unstarted {
                if !released.contains(claim) {
                    lost(shared, log, "the release at shutdown found the claim taken");
                }
            }
            tracing::info!(
                count = released.len(),
                "Returned claimed inbox messages whose forward had not started to pending."
            );
        }
        Err(err) => tracing::warn!(
            error = %redact(&err.to_string()),
            count = claims.len(),
            "Returning unstarted inbox messages to pending failed. They return when their leases expire."
        ),
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use queuebox_store::{ClaimToken, RowId};

    fn claim() -> Claim {
        Claim {
            id: RowId(Uuid::now_v7()),
            token: ClaimToken(Uuid::new_v4()),
        }
    }

    fn log(claim: Claim) -> RelayLog {
        RelayLog {
            inbox_id: claim.id.0,
            source: "s".into(),
            correlation_id: claim.id.to_string(),
            message_id: None,
        }
    }

    #[test]
    fn rly_7_renewal_period_is_a_third_rounded_down_and_at_least_1_ms() {
        assert_eq!(
            renew_period(Duration::from_millis(300_000)),
            Duration::from_secs(100)
        );
        assert_eq!(
            renew_period(Duration::from_millis(2)),
            Duration::from_millis(1)
        );
    }

    #[test]
    fn rly_7_a_renewal_never_judges_the_forward_in_progress_and_a_lost_row_is_skipped() {
        let (a, b, c) = (claim(), claim(), claim());
        let held = BatchClaims::default();
        held.lock().waiting = [a, b, c].into_iter().map(|x| (x, log(x))).collect();
        assert!(held.start(a));
        assert_eq!(held.claims().len(), 3, "the row in progress is renewed too");
        let lost = held.take_lost(&[a, b]);
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].inbox_id, b.id.0);
        held.finish();
        assert!(!held.start(b), "a lost row is not forwarded");
        assert!(held.start(c));
        held.finish();
        assert!(held.take_waiting().is_empty());
    }
}
