//! Publish slots (OUT-53, OUT-19 step 6): claimed rows take a slot in claim order, at most
//! `concurrency` publish at once, and each publish is raced against its row's token so a lost
//! claim or an abandon at shutdown stops waiting for it (OUT-43, OUT-58).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use queuebox_core::redact::redact;
use queuebox_core::{Destination, Outcome, OutgoingMessage};
use queuebox_store::{Claim, TerminalWrite};
use queuebox_transform::Variables;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::{Id, JoinError, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Level;

use super::PollerContext;
use super::guard::{self, DestinationGuard};
use super::held::{Stage, Start};
use super::route::OutboxTransforms;
use super::row::{RowLog, jitter, row_event, terminal_write};
use super::run::RunRest;
use super::writer::Completion;
use crate::transform::{MessageIds, OnError, Rejected};
use queuebox_telemetry::{
    CounterHandle, DestinationType, GaugeHandle, Metrics, PublishOutcome, Table,
};

/// The metric series of one destination, looked up once at start (the lookup takes a lock).
#[derive(Clone)]
pub struct DestHandles {
    success: CounterHandle,
    failure: CounterHandle,
    depth: GaugeHandle,
    kind: DestinationType,
    /// The destination's rate limit and circuit breaker, when it has either (guard.rs).
    pub guard: Option<Arc<DestinationGuard>>,
}

impl DestHandles {
    pub fn new(metrics: &Metrics, destination: &dyn Destination) -> Self {
        let name = destination.name();
        Self {
            success: metrics.destination_messages_handle(name, PublishOutcome::Success),
            failure: metrics.destination_messages_handle(name, PublishOutcome::Failure),
            depth: metrics.queue_depth(name),
            kind: destination.kind(),
            guard: None,
        }
    }

    pub fn depth(&self) -> &GaugeHandle {
        &self.depth
    }
}

/// `queuebox_outbox_queue_depth{destination}` counts a row from its routing until its publish
/// ends, whichever way it ends (published, released, lost, abandoned): the drop does the `dec`.
pub struct DepthGuard(GaugeHandle);

impl DepthGuard {
    pub fn new(gauge: &GaugeHandle) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for DepthGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// One routed row waiting for a slot.
pub struct Job {
    pub claim: Claim,
    pub message: OutgoingMessage,
    pub destination: Arc<dyn Destination>,
    pub transforms: OutboxTransforms,
    pub handles: DestHandles,
    pub max_attempts: i32,
    pub log: Arc<RowLog>,
    pub token: CancellationToken,
    pub depth: DepthGuard,
    /// The rest of the row's run (run.rs), if it has one.
    pub run: Option<RunRest>,
}

/// Hands slots to jobs in the order the claim loop queued them (a FIFO channel and a fair
/// semaphore), until the claim loop closes the channel or `stop`; then waits for the publishes
/// it started, each of which ends at the latest when its token (a child of `stop`) is cancelled.
pub async fn run_dispatcher(
    shared: Arc<PollerContext>,
    mut jobs: mpsc::UnboundedReceiver<Job>,
    done: mpsc::UnboundedSender<Completion>,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(shared.settings.concurrency));
    let mut publishes = JoinSet::new();
    let mut running: HashMap<Id, (Claim, Arc<RowLog>)> = HashMap::new();
    loop {
        while let Some(joined) = publishes.try_join_next_with_id() {
            settle(&shared, &mut running, joined);
        }
        let job = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            job = jobs.recv() => match job {
                Some(job) => job,
                None => break,
            },
        };
        let permit = tokio::select! {
            biased;
            // Released at shutdown or lost while it waited: the publish never starts.
            () = job.token.cancelled() => continue,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break, // never closed
            },
        };
        // Decided under the registry lock, so a release or a lost renewal that came first wins;
        // and never past the row's local lease deadline, so a replica that stalled (a pause, a
        // SIGSTOP) does not publish a row that another replica may have delivered, with its
        // successors, meanwhile (issue 17 defect 3, OUT-43).
        match shared
            .held
            .start_publish(&job.claim, Instant::now(), shared.lease_margin())
        {
            Start::Go => {}
            Start::Gone => continue,
            Start::Expired(entry) => {
                shared.metrics.claims_lost(Table::Outbox).inc();
                row_event!(
                    Level::WARN,
                    entry.log,
                    "The lease on the message ended before its publish could start. QueueBox does not publish it and writes nothing; another replica delivers it."
                );
                continue;
            }
        }
        let who = (job.claim, Arc::clone(&job.log));
        let handle = publishes.spawn(publish(
            Arc::clone(&shared),
            job,
            permit,
            Arc::clone(&slots),
            done.clone(),
        ));
        running.insert(handle.id(), who);
    }
    while let Some(joined) = publishes.join_next_with_id().await {
        settle(&shared, &mut running, joined);
    }
}

/// A publish task ended. A panic in a connector must not pin the row in the registry for ever:
/// it leaves, with no write, and its lease expires (OUT-45's "leave the row to lease expiry").
fn settle(
    shared: &PollerContext,
    running: &mut HashMap<Id, (Claim, Arc<RowLog>)>,
    joined: Result<(Id, ()), JoinError>,
) {
    let (id, failure) = match joined {
        Ok((id, ())) => (id, None),
        Err(err) => (err.id(), Some(err)),
    };
    let Some((claim, log)) = running.remove(&id) else {
        return;
    };
    if let Some(err) = failure
        && shared.held.remove(&claim).is_some()
    {
        shared.metrics.outbox_process_errors().inc();
        row_event!(
            Level::ERROR,
            log,
            error = %err,
            "The publish of the message failed unexpectedly. It stays processing until its lease expires."
        );
    }
}

async fn publish(
    shared: Arc<PollerContext>,
    job: Job,
    permit: OwnedSemaphorePermit,
    slots: Arc<Semaphore>,
    done: mpsc::UnboundedSender<Completion>,
) {
    // Issue 15 item 6: the destination's rate limit and circuit breaker may hold the row first.
    let mut job = Some(job);
    let Some((pass, permit)) =
        guard::before_publish(&shared, &mut job, permit, &slots, &done).await
    else {
        return;
    };
    let Some(job) = job else { return };
    // OUT-19 steps 3–4, on every attempt (TRF-6): the stored row is never changed, only the
    // message this attempt publishes.
    let transformed = if job.transforms.is_empty() {
        None
    } else {
        let transformed = tokio::select! {
            biased;
            () = job.token.cancelled() => return,
            transformed = transform(&job) => transformed,
        };
        match transformed {
            Ok(message) => message,
            Err(rejected) => {
                let write = rejected_write(&shared, &job, rejected);
                drop(permit);
                drop(job.depth);
                if shared.held.advance(&job.claim, Stage::Finishing) {
                    let _ = done.send(Completion {
                        write,
                        log: job.log,
                        run: job.run,
                    });
                }
                return;
            }
        }
    };
    let message = transformed.as_ref().unwrap_or(&job.message);
    let started = Instant::now();
    let outcome = tokio::select! {
        biased;
        // Lost claim or abandon: the outcome is unknown and nothing is written (OUT-43, OUT-58).
        () = job.token.cancelled() => return,
        outcome = job.destination.publish(message) => outcome,
    };
    let elapsed = started.elapsed();
    guard::after_publish(pass, &outcome);
    drop(permit);
    drop(job.depth);
    shared
        .metrics
        .publish_duration(job.handles.kind)
        .observe_duration(elapsed);
    match &outcome {
        Outcome::Delivered => job.handles.success.inc(),
        Outcome::Failed { .. } => job.handles.failure.inc(),
    }
    // OUT-20: the mark comes only now, after the destination answered.
    let write = terminal_write(
        job.claim,
        job.message.attempt,
        job.max_attempts,
        outcome,
        &shared.settings.retry,
        jitter(),
    );
    if shared.held.advance(&job.claim, Stage::Finishing) {
        // The writer only stops at the abandon, when nothing more may be written anyway.
        let _ = done.send(Completion {
            write,
            log: job.log,
            run: job.run,
        });
    }
}

/// The route stage, then the destination stage (TRF-5): each takes the previous output, a
/// `Skip` passes its input on (TRF-17). `Ok(None)` when no stage produced an output, so the
/// stored payload text is published as it is (DST-7).
async fn transform(job: &Job) -> Result<Option<OutgoingMessage>, Rejected> {
    let message = &job.message;
    let mut value: serde_json::Value =
        serde_json::from_str(&message.payload).map_err(|_| Rejected {
            // The row checks (OUT-7) let only JSON through; kept as a failure, never a panic.
            on_error: OnError::Fail,
            error: "Transform failed: The stored payload is not JSON.".to_owned(),
        })?;
    let id = message.id.to_string();
    let ids = MessageIds {
        source: None,
        message_id: Some(&id),
        idempotency_key: None,
        correlation_id: &job.log.correlation_id,
    };
    let attempt = u32::try_from(message.attempt).unwrap_or(0);
    let mut changed = false;
    for stage in [&job.transforms.route, &job.transforms.destination]
        .into_iter()
        .flatten()
    {
        let variables = Variables::outbox_stage(&id, &message.topic, attempt);
        if let Some(output) = stage.run(value.clone(), variables, &ids).await? {
            value = output;
            changed = true;
        }
    }
    if !changed {
        return Ok(None);
    }
    // TRF-8: the templates of the destination still read the payload as stored.
    Ok(Some(OutgoingMessage {
        payload: value.to_string(),
        stored_payload: Some(message.payload.clone()),
        ..message.clone()
    }))
}

/// TRF-17 for the outbox stages: `Dead` ends the row at once with `attempt` unchanged (no
/// delivery was attempted); `Fail` is a failed attempt on the normal retry path.
fn rejected_write(shared: &PollerContext, job: &Job, rejected: Rejected) -> TerminalWrite {
    match rejected.on_error {
        OnError::Dead => TerminalWrite::Dead {
            claim: job.claim,
            attempt: job.message.attempt,
            error: redact(&rejected.error),
        },
        OnError::Fail | OnError::Skip => terminal_write(
            job.claim,
            job.message.attempt,
            job.max_attempts,
            Outcome::Failed {
                reason: rejected.error,
                retry_after: None,
            },
            &shared.settings.retry,
            jitter(),
        ),
    }
}
