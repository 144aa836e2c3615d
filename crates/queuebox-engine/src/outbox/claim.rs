//! The claim cycle (OUT-53, OUT-54, OUT-56, OUT-18): claim when no row waits for a slot and
//! fewer than `batchSize` are held, ask for the difference, go again at once after a full
//! answer, otherwise wait `pollIntervalMs` or a wake-up.

use std::sync::Arc;
use std::time::Instant;

use queuebox_core::redact::redact;
use queuebox_store::ClaimedRow;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::PollerContext;
use super::dispatch::{DepthGuard, Job};
use super::held::{Entry, Stage};
use super::row::{Prepared, prepare};
use super::writer::Completion;
use crate::repeat::RepeatLog;

/// Where a claimed row goes next.
pub struct Outlets {
    pub jobs: mpsc::UnboundedSender<Job>,
    pub completions: mpsc::UnboundedSender<Completion>,
    /// The parent of every row token: cancelled at the abandon (OUT-58 step 4).
    pub abandon: CancellationToken,
}

/// Runs until `stop`. A claim already sent to the database is awaited, never dropped: a claim
/// dropped after its commit would leave rows `processing` that nobody holds until their lease
/// expires. Its rows are then released like every other unstarted row.
pub async fn run_claims(
    shared: Arc<PollerContext>,
    wake: Arc<Notify>,
    outlets: Outlets,
    stop: CancellationToken,
) {
    let batch_size = shared.settings.batch_size;
    let poll = shared.settings.poll_interval;
    let mut counts = shared.held.subscribe();
    let mut failures = RepeatLog::default();
    loop {
        let ready = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            ready = counts.wait_for(|c| c.queued == 0 && (c.held as u64) < u64::from(batch_size)) => {
                ready.map(|c| *c)
            }
        };
        let Ok(now) = ready else {
            return;
        };
        let want = batch_size - u32::try_from(now.held).unwrap_or(batch_size);
        // The leases of this claim end claimTimeoutMs after the database ran it, so no earlier
        // than claimTimeoutMs after now (the local lease deadline, held.rs).
        let lease_deadline = Instant::now() + shared.settings.claim_timeout;
        match shared
            .store
            .claim(want, shared.settings.claim_timeout)
            .await
        {
            Ok(rows) => {
                if let Some(repeats) = failures.success() {
                    tracing::info!(repeats, "Claiming outbox messages works again.");
                }
                let full = rows.len() >= want as usize;
                rows.into_iter()
                    .for_each(|row| start(&shared, &outlets, row, lease_deadline));
                if full {
                    continue;
                }
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    () = wake.notified() => {}
                    () = tokio::time::sleep(poll) => {}
                }
            }
            Err(err) => {
                // OUT-18: transient; never retried at once, and a wake-up does not shorten it.
                if let Some(repeats) = failures.failure(Instant::now()) {
                    tracing::warn!(
                        error = %redact(&err.to_string()),
                        repeats,
                        "Claiming outbox messages failed. QueueBox tries again after the poll interval."
                    );
                }
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(poll) => {}
                }
            }
        }
    }
}

/// Registers a claimed row and hands it on: a row that ends at once goes to the writer, a
/// routed one queues for a publish slot in claim order (OUT-53).
fn start(shared: &PollerContext, outlets: &Outlets, row: ClaimedRow, lease_deadline: Instant) {
    let claim = row.claim;
    let claimed_at = Instant::now();
    let token = outlets.abandon.child_token();
    match prepare(row, &shared.routes) {
        Prepared::Dead { write, log } => {
            let log = Arc::new(log);
            let entry = Entry {
                stage: Stage::Finishing,
                token,
                log: Arc::clone(&log),
                claimed_at,
                lease_deadline,
            };
            shared.held.insert(claim, entry);
            let _ = outlets.completions.send(Completion { write, log });
        }
        Prepared::Publish {
            message,
            destination,
            max_attempts,
            log,
        } => {
            let log = Arc::new(log);
            let handles = shared.handles(destination.as_ref());
            let entry = Entry {
                stage: Stage::Queued,
                token: token.clone(),
                log: Arc::clone(&log),
                claimed_at,
                lease_deadline,
            };
            shared.held.insert(claim, entry);
            let job = Job {
                claim,
                message,
                depth: DepthGuard::new(handles.depth()),
                handles,
                destination,
                max_attempts,
                log,
                token,
            };
            let _ = outlets.jobs.send(job);
        }
    }
}
