//! The write-combining writer of the intake (inbox.md §9, INB-49/50, INB-65, INB-72): every
//! source's rows go to one writer task, which stores the first waiting row plus everything
//! already queued in ONE `insert_batch` (one transaction) and answers each row only after that
//! call returned, i.e. after the commit. Throughput then grows with the number of concurrent
//! senders instead of being bounded by one fsync per message, and no source ever acknowledges a
//! message before it is durable. Rows are stored in the order they were queued; a group queued
//! together (a Kafka poll) is taken whole and never split while it fits in one insert. A row
//! whose data the database refuses is answered as its source's [`WhenRefused`] says.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use queuebox_core::intake::{IntakeOutcome, Refusal, StoredState};
use queuebox_core::redact::redact;
use queuebox_store::{Consumption, InsertOutcome, IntakeStore, NewInboxRow, StoreError};
use queuebox_telemetry::{InboxStatus, Metrics, RejectionReason};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::error::EngineError;
use crate::pipeline::dead_row_rejection;
use crate::repeat::RepeatLog;

use super::refused::{WhenRefused, stored_dead};

/// The writer's sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterSettings {
    /// The most rows one `insert_batch` stores (for example 256).
    pub max_batch: usize,
    /// Places in the queue (a row, or a group of rows queued together); a caller beyond this
    /// waits for room (backpressure).
    pub queue: usize,
}

impl Default for WriterSettings {
    fn default() -> Self {
        Self {
            max_batch: 256,
            queue: 1024,
        }
    }
}

/// One caller waiting for its row.
struct Request {
    row: NewInboxRow,
    answer: oneshot::Sender<IntakeOutcome>,
    on_refusal: OnRefusal,
}

/// [`WhenRefused`], plus the answer for the dead row stored in a refused row's place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnRefusal {
    TellTheSender,
    StoreDead,
    /// The row is already the dead row of a refused message: a refusal now leaves the message
    /// not stored, and its broker delivers it again.
    NotStored,
}

impl From<WhenRefused> for OnRefusal {
    fn from(when: WhenRefused) -> Self {
        match when {
            WhenRefused::TellTheSender => Self::TellTheSender,
            WhenRefused::StoreDead => Self::StoreDead,
        }
    }
}

/// What a caller puts in the queue: one row, or a group that is taken out of the queue as a
/// whole, so the writer never starts an insert with only the head of a group.
enum Queued {
    /// Boxed: a row is about 270 bytes, and the queue's places are as large as their largest
    /// kind.
    One(Box<Request>),
    Group(Vec<Request>),
}

impl Queued {
    fn into_requests(self, into: &mut Vec<Request>) {
        match self {
            Self::One(request) => into.push(*request),
            Self::Group(requests) => into.extend(requests),
        }
    }
}

/// The callers' side: cheap to clone.
#[derive(Clone)]
pub struct WriterHandle {
    queue: mpsc::Sender<Queued>,
}

impl WriterHandle {
    /// Queues one row (waiting while the queue is full; never dropping a row) and returns the
    /// receiver of its outcome, which the writer sends after the transaction that holds the row
    /// committed (or failed). Rows queued one after another are stored in that order. A
    /// dropped receiver does not withdraw the row: it is stored anyway, and a redelivery is
    /// then a duplicate. `Err` when the writer stopped taking rows: nothing was stored.
    pub async fn queue(
        &self,
        row: NewInboxRow,
        when_refused: WhenRefused,
    ) -> Result<oneshot::Receiver<IntakeOutcome>, Stopped> {
        let (answer, wait) = oneshot::channel();
        let on_refusal = when_refused.into();
        self.queue
            .send(Queued::One(Box::new(Request {
                row,
                answer,
                on_refusal,
            })))
            .await
            .map_err(|_| Stopped)?;
        Ok(wait)
    }

    /// Queues the rows as one group, in their order, and returns the receivers of their
    /// outcomes in that order. The writer takes the whole group at once, so a group of at most
    /// `max_batch` rows is stored in one `insert_batch` (with whatever was queued before it);
    /// a larger group is stored in consecutive batches. A group takes one place of the queue.
    pub async fn queue_all(
        &self,
        rows: Vec<(NewInboxRow, WhenRefused)>,
    ) -> Result<Vec<oneshot::Receiver<IntakeOutcome>>, Stopped> {
        let (requests, waits): (Vec<Request>, Vec<_>) = rows
            .into_iter()
            .map(|(row, when_refused)| {
                let on_refusal = when_refused.into();
                let (answer, wait) = oneshot::channel();
                (
                    Request {
                        row,
                        answer,
                        on_refusal,
                    },
                    wait,
                )
            })
            .unzip();
        if requests.is_empty() {
            return Ok(waits);
        }
        self.queue
            .send(Queued::Group(requests))
            .await
            .map_err(|_| Stopped)?;
        Ok(waits)
    }

    /// Stores one row and returns its outcome after the commit (or the failure); a row whose
    /// data the database refuses is answered `Refused` ([`WhenRefused::TellTheSender`]).
    pub async fn store(&self, row: NewInboxRow) -> IntakeOutcome {
        match self.queue(row, WhenRefused::TellTheSender).await {
            // A dropped answer means the writer closed without handling the row (it was never
            // given to the store), so nothing was stored.
            Ok(wait) => wait.await.unwrap_or(IntakeOutcome::ShuttingDown),
            Err(Stopped) => IntakeOutcome::ShuttingDown,
        }
    }
}

/// How long the writer has been waiting for the store to answer one batch (issue 17 defect 7):
/// readiness reports the database stuck when that passes the storage wait, even while a
/// `SELECT 1` still answers (a table lock, a full disk, a pool with no free connection).
#[derive(Clone, Debug, Default)]
pub struct StoreWait(Arc<Mutex<Option<Instant>>>);

impl StoreWait {
    /// `None` while no batch is with the store.
    pub fn waiting_for(&self) -> Option<Duration> {
        let since = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        since.map(|since| since.elapsed())
    }

    fn begin(&self) -> StoreWaitGuard<'_> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        StoreWaitGuard(self)
    }
}

/// Ends the wait when the store answered (or the write was cancelled).
struct StoreWaitGuard<'a>(&'a StoreWait);

impl Drop for StoreWaitGuard<'_> {
    fn drop(&mut self) {
        *self.0.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// The writer stopped taking rows (shutdown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped;

/// The writer of one replica's inbox intake.
pub struct IntakeWriter {
    store: Arc<dyn IntakeStore>,
    settings: WriterSettings,
    metrics: Metrics,
    relay_wake: Arc<Notify>,
    queue: mpsc::Sender<Queued>,
    requests: mpsc::Receiver<Queued>,
    store_wait: StoreWait,
}

impl IntakeWriter {
    /// `relay_wake` is the relay's wake-up: a stored push row ends its idle wait (RLY-14).
    pub fn new(
        store: Arc<dyn IntakeStore>,
        settings: WriterSettings,
        metrics: Metrics,
        relay_wake: Arc<Notify>,
    ) -> Self {
        let (queue, requests) = mpsc::channel(settings.queue.max(1));
        Self {
            store,
            settings,
            metrics,
            relay_wake,
            queue,
            requests,
            store_wait: StoreWait::default(),
        }
    }

    /// How long the current batch has waited for the store, for readiness.
    pub fn store_wait(&self) -> StoreWait {
        self.store_wait.clone()
    }

    /// Reports its waits to `wait`, a [`StoreWait`] made before the writer (readiness is
    /// built first).
    pub fn reporting_to(mut self, wait: StoreWait) -> Self {
        self.store_wait = wait;
        self
    }

    /// A handle for the callers; take the handles before `run`.
    pub fn handle(&self) -> WriterHandle {
        WriterHandle {
            queue: self.queue.clone(),
        }
    }

    /// Writes batches until `cancel`; then refuses new rows (`ShuttingDown`), stores what is
    /// already queued, and returns. A batch already sent to the store is always awaited: its
    /// callers are answered with the real outcome.
    pub async fn run(self, cancel: CancellationToken) -> Result<(), EngineError> {
        if self.settings.max_batch == 0 {
            return Err(EngineError::BadSetting {
                owner: "inbox intake",
                setting: "max_batch",
                value: "0".into(),
            });
        }
        let Self {
            store,
            settings,
            metrics,
            relay_wake,
            queue,
            mut requests,
            store_wait,
        } = self;
        // Only the handles keep the channel open; the writer's own sender must not.
        drop(queue);
        let mut writer = Writer {
            store,
            metrics,
            relay_wake,
            failures: RepeatLog::default(),
            store_wait,
        };
        let mut queued = Vec::with_capacity(settings.max_batch);
        loop {
            let received = tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                n = requests.recv_many(&mut queued, settings.max_batch) => n,
            };
            if received == 0 {
                // Every handle is gone: nobody can send again.
                return Ok(());
            }
            writer.write_all(&mut queued, settings.max_batch).await;
        }
        // Callers waiting for room get `ShuttingDown` at once; queued rows are still stored, so
        // an HTTP request already inside its handler completes normally (OPS-28).
        requests.close();
        let mut flushed = 0;
        while requests.recv_many(&mut queued, settings.max_batch).await > 0 {
            flushed += writer.write_all(&mut queued, settings.max_batch).await;
        }
        if flushed > 0 {
            tracing::info!(
                count = flushed,
                "Stored the inbox messages queued at shutdown."
            );
        }
        Ok(())
    }
}

/// The part of the writer that stores one batch and answers it.
struct Writer {
    store: Arc<dyn IntakeStore>,
    metrics: Metrics,
    relay_wake: Arc<Notify>,
    failures: RepeatLog,
    store_wait: StoreWait,
}

impl Writer {
    /// Stores what was taken from the queue, in its order, in batches of at most `max_batch`
    /// rows; returns how many rows that was. A group that fits in one batch is never split: a
    /// batch that has no room left for it is stored first. A larger group fills batches of its
    /// own.
    async fn write_all(&mut self, queued: &mut Vec<Queued>, max_batch: usize) -> usize {
        let mut count = 0;
        let mut batch: Vec<Request> = Vec::with_capacity(max_batch);
        for item in queued.drain(..) {
            let rows = match &item {
                Queued::One(_) => 1,
                Queued::Group(requests) => requests.len(),
            };
            count += rows;
            if !batch.is_empty() && batch.len() + rows > max_batch {
                self.write(std::mem::take(&mut batch)).await;
            }
            item.into_requests(&mut batch);
            while batch.len() >= max_batch {
                let rest = batch.split_off(max_batch);
                self.write(std::mem::replace(&mut batch, rest)).await;
            }
        }
        if !batch.is_empty() {
            self.write(batch).await;
        }
        count
    }

    async fn write(&mut self, batch: Vec<Request>) {
        let (rows, callers): (Vec<NewInboxRow>, Vec<_>) = batch
            .into_iter()
            .map(|r| (r.row, (r.answer, r.on_refusal)))
            .unzip();
        let wait = self.store_wait.begin();
        let stored = self.store.insert_batch(&rows).await;
        drop(wait);
        match stored {
            Ok(outcomes) => {
                if let Some(repeats) = self.failures.success() {
                    tracing::info!(repeats, "Storing inbox messages works again.");
                }
                let answers = callers.into_iter().map(|(answer, _)| answer).collect();
                self.settle(&rows, outcomes, answers);
            }
            Err(StoreError::DataRejected { .. }) if rows.len() > 1 => {
                // One row's data is refused and the others would fail with it, again at every
                // retry of its sender: store the rows one by one, so only that row fails.
                tracing::debug!(
                    rows = rows.len(),
                    "The database refused the data of a batch; storing its rows one by one."
                );
                for (row, (answer, on_refusal)) in rows.into_iter().zip(callers) {
                    let request = Request {
                        row,
                        answer,
                        on_refusal,
                    };
                    Box::pin(self.write(vec![request])).await;
                }
            }
            Err(err) => {
                let reason = redact(&err.to_string());
                if let StoreError::DataRejected { .. } = err {
                    // Not an outage: this one message can never be stored as it is, so it is
                    // logged every time and does not count towards the outage's repeat log
                    // (issue 17 defect 7).
                    for (row, (answer, on_refusal)) in rows.into_iter().zip(callers) {
                        self.refused(row, answer, on_refusal, &reason).await;
                    }
                    return;
                }
                self.metrics
                    .inbox_rejections(RejectionReason::StorageFailed)
                    .inc_by(rows.len() as u64);
                if let Some(repeats) = self.failures.failure(Instant::now()) {
                    tracing::warn!(
                        error = %reason,
                        repeats,
                        rows = rows.len(),
                        "Storing inbox messages failed. The senders are told to send them again."
                    );
                }
                for (answer, _) in callers {
                    let _ = answer.send(IntakeOutcome::StorageFailed {
                        reason: reason.clone(),
                    });
                }
            }
        }
    }

    /// One row whose data the database refused with `reason` (redacted), as its
    /// [`WhenRefused`] says.
    async fn refused(
        &mut self,
        row: NewInboxRow,
        answer: oneshot::Sender<IntakeOutcome>,
        on_refusal: OnRefusal,
        reason: &str,
    ) {
        let (line, outcome) = match on_refusal {
            OnRefusal::StoreDead => {
                // Counted once, as storage_failed, when the dead row is stored (or refused).
                tracing::warn!(
                    error = %reason,
                    source = %row.source,
                    "The database refused a message's data. It is stored dead instead, with U+0000 replaced by U+FFFD, and acknowledged."
                );
                let request = Request {
                    row: stored_dead(row, reason),
                    answer,
                    on_refusal: OnRefusal::NotStored,
                };
                Box::pin(self.write(vec![request])).await;
                return;
            }
            OnRefusal::TellTheSender => (
                "The database refused a message's data. Its sender is told that it cannot be stored.",
                IntakeOutcome::Refused(Refusal::DataRejected {
                    reason: reason.to_owned(),
                }),
            ),
            OnRefusal::NotStored => (
                "The database refused the dead row of a message it had refused. The message is not acknowledged, and its broker delivers it again.",
                IntakeOutcome::StorageFailed {
                    reason: reason.to_owned(),
                },
            ),
        };
        self.metrics
            .inbox_rejections(RejectionReason::StorageFailed)
            .inc();
        tracing::warn!(error = %reason, source = %row.source, "{line}");
        let _ = answer.send(outcome);
    }

    /// Counts and answers a committed batch, then wakes the relay when it has new work.
    fn settle(
        &self,
        rows: &[NewInboxRow],
        outcomes: Vec<InsertOutcome>,
        answers: Vec<oneshot::Sender<IntakeOutcome>>,
    ) {
        if outcomes.len() != rows.len() {
            // A store bug; the rows it did not answer for may or may not be stored, and a
            // failure makes the sender retry, which is safe (a repeat is a duplicate).
            tracing::error!(
                rows = rows.len(),
                answers = outcomes.len(),
                "The inbox store answered a batch with the wrong number of outcomes."
            );
        }
        let mut pushed = false;
        let mut outcomes = outcomes.into_iter();
        for (row, answer) in rows.iter().zip(answers) {
            let outcome = match outcomes.next() {
                Some(outcome) => outcome,
                None => {
                    self.metrics
                        .inbox_rejections(RejectionReason::StorageFailed)
                        .inc();
                    let reason = "the store gave no outcome for the message".to_owned();
                    let _ = answer.send(IntakeOutcome::StorageFailed { reason });
                    continue;
                }
            };
            let outcome = match outcome {
                InsertOutcome::Stored(id) => {
                    match row.state {
                        StoredState::Pending => {
                            self.metrics.inbox_messages(InboxStatus::New).inc();
                            pushed |= row.consumption == Consumption::Push;
                        }
                        // INB-55: a message stored dead was not accepted as pending.
                        StoredState::Dead => {
                            self.metrics.inbox_rejections(dead_row_rejection(row)).inc();
                        }
                    }
                    IntakeOutcome::New {
                        id,
                        state: row.state,
                    }
                }
                InsertOutcome::Duplicate => {
                    self.metrics.inbox_messages(InboxStatus::Duplicate).inc();
                    IntakeOutcome::Duplicate
                }
            };
            let _ = answer.send(outcome);
        }
        if pushed {
            self.relay_wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests;
