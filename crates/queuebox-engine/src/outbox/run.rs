//! Runs of one key (OUT-13a, issue 16 item 4): after a claim that left room, the poller claims
//! up to `outbox.keyRunLength - 1` further head rows of each keyed row it got, all leased to this
//! replica, and delivers them strictly one after another: the next row of a run goes to a
//! publish slot only after the previous one's `sent` (or `dead`) is committed. Any other end of
//! a row of a run (a retry, a lost claim, a write given up, a release at shutdown) ends the run:
//! its unstarted rows leave and go back to `pending` with no attempt counted, so nothing
//! overtakes the row that did not finish, and per-key order holds exactly as with one row per
//! key in flight.
//!
//! Why release instead of holding the rest while the failed row waits its backoff: a held
//! `processing` row of the key would keep the failed row itself from being claimed again
//! (OUT-13 rule 3), and the rest would sit leased for the whole backoff; released, they are
//! `pending` behind a `pending` head row that is not due, which OUT-13 already orders.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use queuebox_core::redact::redact;
use queuebox_store::{Claim, ClaimedRow, RunStart};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Level;

use super::PollerContext;
use super::dispatch::Job;
use super::held::Entry;
use super::row::row_event;
use super::writer::Completion;
use queuebox_telemetry::Table;

/// A claimed row, ready to go: to a publish slot, or straight to the writer (no route, an
/// invalid row: OUT-19 steps 1–2).
pub enum Step {
    /// Boxed: a job is large, and a run holds up to `keyRunLength` steps.
    Publish(Box<Job>),
    Ready(Completion),
}

impl Step {
    fn claim(&self) -> Claim {
        match self {
            Self::Publish(job) => job.claim,
            Self::Ready(completion) => completion.write.claim(),
        }
    }
}

/// Where the next row of a run goes, and where the rows of a run that ended early go.
#[derive(Clone)]
pub struct RunOutlets {
    pub jobs: mpsc::UnboundedSender<Job>,
    pub completions: mpsc::UnboundedSender<Completion>,
    pub releases: mpsc::UnboundedSender<Vec<(Claim, Entry)>>,
}

/// The rows of a run after the one now on its way, in `sequence` order. It travels with that
/// row (its job, then its completion); only the writer, after the row's `sent` or `dead` is
/// committed, hands the next row on ([`RunRest::hand_on`]). Dropped any other way, it ends the
/// run: its rows stop being held and are released (the `Drop`).
pub struct RunRest {
    steps: VecDeque<Step>,
    shared: Arc<PollerContext>,
    outlets: RunOutlets,
}

impl std::fmt::Debug for RunRest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRest")
            .field("rows", &self.steps.len())
            .finish_non_exhaustive()
    }
}

impl RunRest {
    pub fn new(steps: VecDeque<Step>, shared: Arc<PollerContext>, outlets: RunOutlets) -> Self {
        Self {
            steps,
            shared,
            outlets,
        }
    }

    /// The previous row of the run is committed `sent` or `dead`: the next one goes on, carrying
    /// the rest of the run.
    pub fn hand_on(mut self) {
        let Some(step) = self.steps.pop_front() else {
            return;
        };
        let rest = (!self.steps.is_empty()).then(|| RunRest {
            steps: std::mem::take(&mut self.steps),
            shared: Arc::clone(&self.shared),
            outlets: self.outlets.clone(),
        });
        // A closed channel means the poller is stopping: the step is dropped, and with it the
        // rest of the run, which the drop releases.
        match step {
            Step::Publish(mut job) => {
                job.run = rest;
                let _ = self.outlets.jobs.send(*job);
            }
            Step::Ready(mut completion) => {
                completion.run = rest;
                let _ = self.outlets.completions.send(completion);
            }
        }
    }
}

impl Drop for RunRest {
    /// The run ended before these rows: they leave at once (so the counts and the renewal stop
    /// counting them) and go to the release loop.
    fn drop(&mut self) {
        if self.steps.is_empty() {
            return;
        }
        let claims: Vec<Claim> = self.steps.iter().map(Step::claim).collect();
        let taken = self.shared.held.take(&claims);
        self.steps.clear();
        if !taken.is_empty() {
            let _ = self.outlets.releases.send(taken);
        }
    }
}

/// How many more rows each keyed row of a claim may take, in claim order, within `room` (so
/// OUT-53 still bounds what a replica holds): up to `run_length - 1` each, until the room is
/// used.
pub fn run_starts(rows: &[ClaimedRow], room: usize, run_length: u32) -> Vec<RunStart> {
    let per_run = run_length.saturating_sub(1);
    let mut left = u32::try_from(room).unwrap_or(u32::MAX);
    let mut starts = Vec::new();
    for row in rows {
        if per_run == 0 || left == 0 {
            break;
        }
        if row.key.as_deref().is_some_and(|k| !k.is_empty()) {
            let limit = per_run.min(left);
            starts.push(RunStart {
                after: row.claim,
                limit,
            });
            left -= limit;
        }
    }
    starts
}

/// The rows of the run claim, by key, each key in `sequence` order after the row it follows.
/// A row that does not follow a row of `heads` (which the store never answers) is ignored
/// here and comes back when its lease expires.
pub fn group_runs(heads: &[ClaimedRow], rows: Vec<ClaimedRow>) -> HashMap<String, Vec<ClaimedRow>> {
    let after: HashMap<&str, i64> = heads
        .iter()
        .filter_map(|h| h.key.as_deref().map(|k| (k, h.sequence)))
        .collect();
    let mut runs: HashMap<String, Vec<ClaimedRow>> = HashMap::new();
    for row in rows {
        let Some(key) = row.key.clone() else {
            continue;
        };
        if after.get(key.as_str()).is_some_and(|s| row.sequence > *s) {
            runs.entry(key).or_default().push(row);
        }
    }
    for run in runs.values_mut() {
        run.sort_by_key(|r| r.sequence);
    }
    runs
}

/// Releases the rows of runs that ended early (fenced, `attempt` unchanged, as OUT-58 step 2),
/// until `stop`. A failure leaves them to lease expiry; their key stays in order either way,
/// because the row that ended the run is still `pending` or `processing` before them.
pub async fn run_releases(
    shared: Arc<PollerContext>,
    mut rx: mpsc::UnboundedReceiver<Vec<(Claim, Entry)>>,
    stop: CancellationToken,
) {
    loop {
        let mut rows = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            rows = rx.recv() => match rows {
                Some(rows) => rows,
                None => return,
            },
        };
        while let Ok(more) = rx.try_recv() {
            rows.extend(more);
        }
        let claims: Vec<Claim> = rows.iter().map(|(c, _)| *c).collect();
        let answer = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            answer = shared.store.release(&claims) => answer,
        };
        match answer {
            Ok(released) => {
                let released: std::collections::HashSet<Claim> = released.into_iter().collect();
                for (claim, entry) in &rows {
                    if released.contains(claim) {
                        row_event!(
                            Level::DEBUG,
                            entry.log,
                            "An earlier message of its key did not finish, so the message returned to pending unpublished, its attempt unchanged."
                        );
                    } else {
                        shared.metrics.claims_lost(Table::Outbox).inc();
                        row_event!(
                            Level::WARN,
                            entry.log,
                            "The claim on the message was lost before it could be released. Its new owner delivers it."
                        );
                    }
                }
            }
            Err(err) => tracing::warn!(
                error = %redact(&err.to_string()),
                count = claims.len(),
                "Returning the unpublished rest of a run of one key to pending failed. The rows return when their leases expire."
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_store::{ClaimToken, RowId};
    use uuid::Uuid;

    fn row(key: Option<&str>, sequence: i64) -> ClaimedRow {
        ClaimedRow {
            claim: Claim {
                id: RowId(Uuid::new_v4()),
                token: ClaimToken(Uuid::new_v4()),
            },
            topic: "t".into(),
            key: key.map(str::to_owned),
            payload: "{}".into(),
            headers: "{}".into(),
            aggregate_type: None,
            attempt: 0,
            max_attempts: 5,
            sequence,
        }
    }

    #[test]
    fn out_13a_runs_share_the_room_in_claim_order_and_skip_keyless_rows() {
        let rows = [
            row(Some("a"), 1),
            row(None, 2),
            row(Some("b"), 3),
            row(Some("c"), 4),
        ];
        let starts = run_starts(&rows, 40, 32);
        let limits: Vec<(i64, u32)> = starts
            .iter()
            .map(|s| {
                let r = rows.iter().find(|r| r.claim == s.after).unwrap();
                (r.sequence, s.limit)
            })
            .collect();
        assert_eq!(limits, vec![(1, 31), (3, 9)]);
        assert!(
            run_starts(&rows, 40, 1).is_empty(),
            "keyRunLength 1: no runs"
        );
        assert!(run_starts(&rows, 0, 32).is_empty(), "no room: no runs");
    }

    #[test]
    fn out_13a_run_rows_group_by_key_in_sequence_order_after_their_head() {
        let heads = [row(Some("a"), 10), row(Some("b"), 20)];
        let got = vec![
            row(Some("a"), 12),
            row(Some("b"), 21),
            row(Some("a"), 11),
            row(Some("a"), 9),
            row(Some("z"), 30),
        ];
        let runs = group_runs(&heads, got);
        let seqs = |k: &str| runs[k].iter().map(|r| r.sequence).collect::<Vec<_>>();
        assert_eq!(seqs("a"), vec![11, 12]);
        assert_eq!(seqs("b"), vec![21]);
        assert!(!runs.contains_key("z"));
    }
}
