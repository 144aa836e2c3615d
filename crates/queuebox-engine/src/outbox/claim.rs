//! The claim cycle (OUT-53, OUT-54, OUT-56, OUT-18): a prefetch. Claim whenever the rows held
//! (waiting for a slot plus publishing) are fewer than `batchSize` and at most the low-water
//! mark `max(batchSize / 2, concurrency)`, one claim at a time, asking for the difference; go
//! again as soon as that holds after a full answer, otherwise wait `pollIntervalMs`, a wake-up,
//! or a keyed row of this replica finishing. A claim that left room is followed by the run claim
//! of its keyed rows (OUT-13a, run.rs). Rows whose terminal write is still to commit do not hold
//! the next claim back, up to `batchSize` of them: beyond that the writer is behind, and the
//! claims wait for it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use queuebox_core::redact::redact;
use queuebox_store::{Claim, ClaimedRow};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::PollerContext;
use super::dispatch::{DepthGuard, Job};
use super::held::{Counts, Entry, Stage};
use super::row::{Prepared, prepare};
use super::run::{RunOutlets, RunRest, Step, group_runs, run_starts};
use super::writer::Completion;
use crate::repeat::RepeatLog;

/// Where a claimed row goes next.
pub struct Outlets {
    pub jobs: mpsc::UnboundedSender<Job>,
    pub completions: mpsc::UnboundedSender<Completion>,
    /// Where the rows of a run that ended early go to be released (run.rs).
    pub releases: mpsc::UnboundedSender<Vec<(Claim, Entry)>>,
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
    let low_water = low_water(batch_size, shared.settings.concurrency);
    let mut counts = shared.held.subscribe();
    let mut failures = RepeatLog::default();
    let mut run_failures = RepeatLog::default();
    loop {
        let ready = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            ready = counts.wait_for(|c| wants_claim(c, batch_size, low_water)) => {
                ready.map(|c| *c)
            }
        };
        let Ok(now) = ready else {
            return;
        };
        let want = batch_size - u32::try_from(now.unfinished()).unwrap_or(batch_size);
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
                // OUT-13a: the room this claim left goes to runs of its keyed rows.
                let room = (want as usize).saturating_sub(rows.len());
                let mut runs = claim_runs(&shared, &rows, room, &mut run_failures).await;
                let got = rows.len() + runs.values().map(Vec::len).sum::<usize>();
                let full = got >= want as usize;
                for row in rows {
                    let run = row
                        .key
                        .as_deref()
                        .and_then(|k| runs.remove(k))
                        .unwrap_or_default();
                    start(&shared, &outlets, row, run, lease_deadline);
                }
                if full {
                    continue;
                }
                // OUT-54: a short answer waits the poll interval, a wake-up (OUT-56/57) or a
                // keyed row of this replica leaving (the next row of its key may be eligible).
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    () = wake.notified() => {}
                    () = shared.held.keyed_row_left() => {}
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

/// OUT-54's low-water mark: `max(batchSize / 2, concurrency)`.
pub fn low_water(batch_size: u32, concurrency: usize) -> u64 {
    u64::from(batch_size / 2).max(u64::try_from(concurrency).unwrap_or(u64::MAX))
}

/// OUT-54: a claim cycle runs when fewer than `batchSize` rows are held (waiting for a slot or
/// publishing) and at most the low-water mark. Finishing rows are not held in that sense, but
/// more than `batchSize` of them means the writer falls behind: the claims wait for it rather
/// than pile up outcomes in memory, so a replica never has more than twice `batchSize` rows
/// `processing`.
pub fn wants_claim(counts: &Counts, batch_size: u32, low_water: u64) -> bool {
    let held = counts.unfinished() as u64;
    held < u64::from(batch_size)
        && held <= low_water
        && counts.finishing as u64 <= u64::from(batch_size)
}

/// The run claim after a claim (OUT-13a): runs of the keyed rows within `room`. A failure is
/// transient: the claimed rows go out alone, and the next cycle tries again.
async fn claim_runs(
    shared: &PollerContext,
    rows: &[ClaimedRow],
    room: usize,
    failures: &mut RepeatLog,
) -> HashMap<String, Vec<ClaimedRow>> {
    let starts = run_starts(rows, room, shared.settings.key_run_length);
    if starts.is_empty() {
        return HashMap::new();
    }
    match shared
        .store
        .claim_run(&starts, shared.settings.claim_timeout)
        .await
    {
        Ok(more) => {
            if let Some(repeats) = failures.success() {
                tracing::info!(repeats, "Claiming runs of one key works again.");
            }
            group_runs(rows, more)
        }
        Err(err) => {
            if let Some(repeats) = failures.failure(Instant::now()) {
                tracing::warn!(
                    error = %redact(&err.to_string()),
                    repeats,
                    "Claiming a run of outbox messages of one key failed. The claimed messages go out one per key; the next claim tries again."
                );
            }
            HashMap::new()
        }
    }
}

/// Registers a claimed row and hands it on: a row that ends at once goes to the writer, a
/// routed one queues for a publish slot in claim order (OUT-53). With a run, the head carries
/// the rest, which go out one after another (run.rs).
fn start(
    shared: &Arc<PollerContext>,
    outlets: &Outlets,
    row: ClaimedRow,
    run: Vec<ClaimedRow>,
    lease_deadline: Instant,
) {
    let last = run.len();
    // Only the last row this replica holds of a key wakes the claim loop when it leaves.
    let head = register(shared, outlets, row, lease_deadline, last == 0);
    let rest: VecDeque<Step> = run
        .into_iter()
        .enumerate()
        .map(|(i, r)| register(shared, outlets, r, lease_deadline, i + 1 == last))
        .collect();
    let rest = (!rest.is_empty()).then(|| {
        let run_outlets = RunOutlets {
            jobs: outlets.jobs.clone(),
            completions: outlets.completions.clone(),
            releases: outlets.releases.clone(),
        };
        RunRest::new(rest, Arc::clone(shared), run_outlets)
    });
    match head {
        Step::Publish(mut job) => {
            job.run = rest;
            let _ = outlets.jobs.send(*job);
        }
        Step::Ready(mut completion) => {
            completion.run = rest;
            let _ = outlets.completions.send(completion);
        }
    }
}

/// Holds a claimed row (held.rs) and makes its next step. The lease deadline of a run row is
/// its claim's, which was sent earlier than the run claim, so it is never after the real end.
fn register(
    shared: &PollerContext,
    outlets: &Outlets,
    row: ClaimedRow,
    lease_deadline: Instant,
    wakes: bool,
) -> Step {
    let claim = row.claim;
    let keyed = wakes && row.key.as_deref().is_some_and(|k| !k.is_empty());
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
                keyed,
            };
            shared.held.insert(claim, entry);
            Step::Ready(Completion {
                write,
                log,
                run: None,
            })
        }
        Prepared::Publish {
            message,
            destination,
            transforms,
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
                keyed,
            };
            shared.held.insert(claim, entry);
            Step::Publish(Box::new(Job {
                claim,
                message,
                depth: DepthGuard::new(handles.depth()),
                handles,
                destination,
                transforms,
                max_attempts,
                log,
                token,
                run: None,
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_54_the_low_water_mark_is_half_the_batch_or_the_concurrency() {
        assert_eq!(low_water(100, 8), 50);
        assert_eq!(low_water(100, 64), 64);
        assert_eq!(low_water(10, 64), 64);
        assert_eq!(low_water(1, 1), 1);
    }

    /// Rows waiting for a slot or publishing, and finishing rows.
    fn counts(unfinished: usize, finishing: usize) -> Counts {
        Counts {
            held: unfinished + finishing,
            queued: unfinished,
            finishing,
        }
    }

    #[test]
    fn out_54_a_claim_runs_at_or_below_the_low_water_mark_and_below_the_batch() {
        // batchSize 100, concurrency 8: claim again at 50 held, not at 51; never at 100.
        let lw = low_water(100, 8);
        assert!(wants_claim(&counts(0, 0), 100, lw));
        assert!(wants_claim(&counts(50, 0), 100, lw));
        assert!(!wants_claim(&counts(51, 0), 100, lw));
        // concurrency above the batch: the batch still bounds what is held (OUT-53).
        let lw = low_water(10, 64);
        assert!(wants_claim(&counts(9, 0), 10, lw));
        assert!(!wants_claim(&counts(10, 0), 10, lw));
    }

    #[test]
    fn out_54_rows_being_written_do_not_hold_the_claim_back_until_the_writer_falls_behind() {
        let lw = low_water(100, 8);
        // A whole batch published and waiting for its write: the next claim runs now.
        assert!(wants_claim(&counts(0, 100), 100, lw));
        assert!(wants_claim(&counts(50, 100), 100, lw));
        // More finishing rows than a batch: the writer is behind, the claims wait for it.
        assert!(!wants_claim(&counts(0, 101), 100, lw));
    }
}
