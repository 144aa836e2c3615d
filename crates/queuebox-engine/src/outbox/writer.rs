//! The terminal writes (OUT-28, OUT-31, OUT-44, OUT-45), batched: the writer takes the first
//! completion and everything already queued, writes them with one fenced `finish`, and settles
//! each row from the answer. A claim missing from the answer was lost.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuebox_core::redact::redact;
use queuebox_store::{Claim, TerminalWrite};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Level;

use super::PollerContext;
use super::row::{RowLog, row_event};
use super::run::RunRest;
use crate::repeat::RepeatLog;
use queuebox_telemetry::{OutboxStatus, Table};

/// Most terminal writes in one `finish` statement.
pub const MAX_BATCH: usize = 256;
/// OUT-45: a write that fails with a database error is retried this many times…
const FINISH_RETRIES: u32 = 5;
/// …this far apart, while the renewal keeps the lease.
const FINISH_RETRY_GAP: Duration = Duration::from_secs(1);

/// A row's terminal write, with who it is for the log.
#[derive(Debug)]
pub struct Completion {
    pub write: TerminalWrite,
    pub log: Arc<RowLog>,
    /// The rest of the row's run (run.rs): handed on once this write commits `sent` or `dead`,
    /// released on any other end.
    pub run: Option<RunRest>,
}

/// A completion not yet written, with its failed tries.
#[derive(Debug)]
pub struct Pending {
    pub completion: Completion,
    pub failures: u32,
}

/// Moves what is already queued into `batch`, up to `max` in all, without waiting.
pub fn take_ready(
    rx: &mut mpsc::UnboundedReceiver<Completion>,
    batch: &mut Vec<Pending>,
    max: usize,
) {
    while batch.len() < max {
        let Ok(completion) = rx.try_recv() else {
            return;
        };
        batch.push(Pending {
            completion,
            failures: 0,
        });
    }
}

/// Runs until `stop` (the abandon at shutdown): pending writes are then dropped unwritten, and
/// their rows come back through the reclaim (OUT-58 step 4).
pub async fn run_writer(
    shared: Arc<PollerContext>,
    mut rx: mpsc::UnboundedReceiver<Completion>,
    stop: CancellationToken,
) {
    let mut batch: Vec<Pending> = Vec::new();
    let mut db_failures = RepeatLog::default();
    loop {
        if batch.is_empty() {
            let first = tokio::select! {
                biased;
                () = stop.cancelled() => return,
                first = rx.recv() => match first {
                    Some(first) => first,
                    None => return,
                },
            };
            batch.push(Pending {
                completion: first,
                failures: 0,
            });
        }
        take_ready(&mut rx, &mut batch, MAX_BATCH);
        // A row lost or abandoned meanwhile gets no further write (OUT-43).
        batch.retain(|p| shared.held.contains(&p.completion.write.claim()));
        if batch.is_empty() {
            continue;
        }
        let writes: Vec<TerminalWrite> = batch.iter().map(|p| p.completion.write.clone()).collect();
        let answer = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            answer = shared.store.finish(&writes) => answer,
        };
        match answer {
            Ok(written) => {
                if let Some(repeats) = db_failures.success() {
                    tracing::info!(repeats, "Writing outbox outcomes works again.");
                }
                let written: HashSet<Claim> = written.into_iter().collect();
                for pending in batch.drain(..) {
                    settle(&shared, pending.completion, &written);
                }
            }
            Err(err) => {
                let error = redact(&err.to_string());
                if let Some(repeats) = db_failures.failure(Instant::now()) {
                    tracing::warn!(%error, repeats, rows = batch.len(), "Writing outbox outcomes failed. QueueBox tries again in 1 s.");
                }
                give_up_exhausted(&shared, &mut batch, &error);
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(FINISH_RETRY_GAP) => {}
                }
            }
        }
    }
}

/// OUT-45: after the fifth retry the row is no longer held: no write, an error line, and
/// `queuebox_outbox_process_errors_total`; the lease expires and the reclaim returns it.
fn give_up_exhausted(shared: &PollerContext, batch: &mut Vec<Pending>, error: &str) {
    batch.iter_mut().for_each(|p| p.failures += 1);
    batch.retain(|p| {
        if p.failures <= FINISH_RETRIES {
            return true;
        }
        if shared.held.remove(&p.completion.write.claim()).is_some() {
            shared.metrics.outbox_process_errors().inc();
            row_event!(
                Level::ERROR,
                p.completion.log,
                %error,
                outcome = outcome_word(&p.completion.write),
                "Could not write the outcome of the message after 5 retries. It stays processing until its lease expires, then it is delivered again."
            );
        }
        false
    });
}

fn outcome_word(write: &TerminalWrite) -> &'static str {
    match write {
        TerminalWrite::Sent { .. } => "sent",
        TerminalWrite::Retry { .. } => "retry",
        TerminalWrite::Hold { .. } => "hold",
        TerminalWrite::Dead { .. } => "dead",
    }
}

/// One row's answer: written (count, time, log) or lost (OUT-44).
fn settle(shared: &PollerContext, completion: Completion, written: &HashSet<Claim>) {
    let Completion { write, log, run } = completion;
    let claim = write.claim();
    let Some(entry) = shared.held.remove(&claim) else {
        return;
    };
    let metrics = &shared.metrics;
    if !written.contains(&claim) {
        // The line first, then the counter: whoever sees the count (an alert, a test) finds
        // the line that names the message already written.
        match write {
            TerminalWrite::Sent { .. } => row_event!(
                Level::ERROR,
                log,
                "Duplicate delivery: the message was published, but its claim was lost before it was marked sent. Another replica delivers it again."
            ),
            TerminalWrite::Retry { .. }
            | TerminalWrite::Hold { .. }
            | TerminalWrite::Dead { .. } => row_event!(
                Level::WARN,
                log,
                outcome = outcome_word(&write),
                "The claim on the message was lost before its outcome was written. Its new owner decides."
            ),
        }
        metrics.claims_lost(Table::Outbox).inc();
        return;
    }
    metrics
        .outbox_processing_duration()
        .observe_duration(entry.claimed_at.elapsed());
    // OUT-13a: the next row of a run goes out only now that this one is committed `sent` or
    // `dead`; after a retry the rest of the run must not overtake it, so it is released (the
    // drop of `run`).
    if matches!(
        write,
        TerminalWrite::Sent { .. } | TerminalWrite::Dead { .. }
    ) && let Some(run) = run
    {
        run.hand_on();
    }
    match write {
        TerminalWrite::Sent { .. } => {
            metrics.outbox_messages(OutboxStatus::Sent).inc();
            row_event!(Level::DEBUG, log, "Message delivered.");
        }
        // Logged by the guard when it held the row; a hold counts no outcome.
        TerminalWrite::Hold { .. } => {}
        TerminalWrite::Retry {
            attempt,
            delay,
            error,
            ..
        } => {
            metrics.outbox_messages(OutboxStatus::Failed).inc();
            row_event!(
                Level::WARN,
                log,
                %error,
                nextAttempt = attempt,
                retryInMs = delay.as_millis() as u64,
                "Delivery failed. The message will be retried."
            );
        }
        TerminalWrite::Dead { attempt, error, .. } => {
            metrics.outbox_messages(OutboxStatus::Dead).inc();
            row_event!(
                Level::ERROR,
                log,
                %error,
                deadAttempt = attempt,
                "The message is dead. It stays in the outbox until it is replayed or deleted."
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_store::{ClaimToken, RowId};
    use uuid::Uuid;

    fn completion() -> Completion {
        let id = Uuid::new_v4();
        Completion {
            write: TerminalWrite::Sent {
                claim: Claim {
                    id: RowId(id),
                    token: ClaimToken(Uuid::new_v4()),
                },
            },
            log: Arc::new(RowLog {
                message_id: id,
                topic: "t".into(),
                destination: None,
                attempt: 0,
                correlation_id: id.to_string(),
            }),
            run: None,
        }
    }

    #[test]
    fn completions_already_queued_join_one_batch_up_to_the_cap() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        for _ in 0..300 {
            tx.send(completion()).unwrap();
        }
        let mut batch = Vec::new();
        take_ready(&mut rx, &mut batch, MAX_BATCH);
        assert_eq!(batch.len(), MAX_BATCH);
        batch.clear();
        take_ready(&mut rx, &mut batch, MAX_BATCH);
        assert_eq!(batch.len(), 300 - MAX_BATCH);
        take_ready(&mut rx, &mut batch, MAX_BATCH);
        assert_eq!(batch.len(), 300 - MAX_BATCH, "nothing waits for more");
    }
}
