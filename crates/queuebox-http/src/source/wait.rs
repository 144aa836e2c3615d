//! The storage wait of the HTTP intake (issue 17 defect 7): a request waits at most
//! `inbox.storageWaitMs` for the database to store its message, then gets 503. A message
//! already queued for the writer when the time runs out stays queued (it may still be stored,
//! so a repeat of the request is then a duplicate) and keeps its bytes in the intake's memory
//! bound until the writer is done with it; one still waiting for room in the queue is dropped,
//! and nothing of it is stored.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queuebox_core::intake::IntakeOutcome;
use queuebox_core::{Intake, ReceivedMessage};
use tokio::time::{Instant, timeout_at};

use super::budget::Held;

/// The message's outcome, or `None` when the database did not settle it within `wait`.
pub(crate) async fn stored_within(
    intake: &Arc<dyn Intake>,
    message: ReceivedMessage,
    held: Held,
    wait: Duration,
) -> Option<IntakeOutcome> {
    let deadline = Instant::now() + wait;
    // Dropping the submission while it waits for room in the writer's queue withdraws the
    // message: it never got its place in the order, so nothing of it is stored.
    let mut receipt = timeout_at(deadline, intake.submit(message, ()))
        .await
        .ok()?;
    match timeout_at(deadline, &mut receipt).await {
        Ok(settled) => Some(settled.outcome),
        Err(_) => {
            // Queued: the writer will still store or fail it. Its bytes stay held until then.
            tokio::spawn(async move {
                let _ = receipt.await;
                drop(held);
            });
            None
        }
    }
}

/// At most one warn line per this long for each of the two refusals, with the count since.
const LOG_EVERY_MS: u64 = 10_000;

struct Throttle {
    last_ms: AtomicU64,
    since: AtomicU64,
}

impl Throttle {
    const fn new() -> Self {
        Self {
            last_ms: AtomicU64::new(0),
            since: AtomicU64::new(0),
        }
    }

    /// The number of refusals to report when a line is due now.
    fn due(&self) -> Option<u64> {
        self.since.fetch_add(1, Ordering::Relaxed);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let last = self.last_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < LOG_EVERY_MS {
            return None;
        }
        if self
            .last_ms
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        Some(self.since.swap(0, Ordering::Relaxed).max(1))
    }
}

static OVERLOADED: Throttle = Throttle::new();
static TIMED_OUT: Throttle = Throttle::new();

pub(crate) fn overloaded(source: &str, correlation_id: &str) {
    tracing::debug!(
        source,
        correlationId = correlation_id,
        "No room in inbox.maxPendingBytes for the body"
    );
    if let Some(requests) = OVERLOADED.due() {
        tracing::warn!(
            source,
            requests,
            "The inbox holds inbox.maxPendingBytes of request bodies; {requests} request(s) got 503 and are asked to come back."
        );
    }
}

pub(crate) fn timed_out(source: &str, correlation_id: &str, wait: Duration) {
    let wait_ms = wait.as_millis() as u64;
    tracing::debug!(
        source,
        correlationId = correlation_id,
        "The database did not store the message within inbox.storageWaitMs"
    );
    if let Some(requests) = TIMED_OUT.due() {
        tracing::warn!(
            source,
            requests,
            storageWaitMs = wait_ms,
            "The database did not store inbox messages within {wait_ms} ms; {requests} request(s) got 503 and are asked to send again."
        );
    }
}
