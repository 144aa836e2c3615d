//! The worker loop of pull.md §7.2/§7.3/§7.7: claim, run a batch, wait, and stop gracefully.

use std::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::claim::{Claimed, claim};
use crate::db::{ConnectionSource, HandlerTx};
use crate::message::InboxMessage;
use crate::options::{OptionsError, WorkerOptions};
use crate::process::{RowState, process, renew_loop};
use crate::sql::Statements;
use crate::task::OwnedTask;

/// What a handler returns: success, or the error that the retry policy judges.
pub type HandlerResult = Result<(), Box<dyn Error + Send + Sync>>;

/// A boxed, sendable future borrowing from the handler's arguments.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The application's work for one message (PULL-35). It runs statements through `tx`, must not
/// commit or roll back (the worker owns the outcome), and should return soon after `cancel`
/// fires (lease lost, or the shutdown grace expired).
///
/// Any `Fn(&InboxMessage, &mut HandlerTx, CancellationToken) -> BoxFuture<HandlerResult>` closure
/// is a handler: `|msg, tx, cancel| Box::pin(async move { ... })`.
pub trait Handler: Send + Sync + 'static {
    fn handle<'a>(
        &'a self,
        message: &'a InboxMessage,
        tx: &'a mut HandlerTx,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, HandlerResult>;
}

impl<F> Handler for F
where
    F: for<'a> Fn(
            &'a InboxMessage,
            &'a mut HandlerTx,
            CancellationToken,
        ) -> BoxFuture<'a, HandlerResult>
        + Send
        + Sync
        + 'static,
{
    fn handle<'a>(
        &'a self,
        message: &'a InboxMessage,
        tx: &'a mut HandlerTx,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, HandlerResult> {
        self(message, tx, cancel)
    }
}

/// Pins a closure to the handler signature, so Rust infers its higher-ranked lifetimes:
/// `handler_fn(|msg, tx, cancel| Box::pin(async move { ... }))`.
pub fn handler_fn<F>(f: F) -> F
where
    F: for<'a> Fn(
            &'a InboxMessage,
            &'a mut HandlerTx,
            CancellationToken,
        ) -> BoxFuture<'a, HandlerResult>
        + Send
        + Sync
        + 'static,
{
    f
}

/// The opt-in batch handler ([`Worker::run_batched`]): the application's work for every message
/// of one claim, in one transaction. The same rules as [`Handler`] hold: run statements through
/// `tx`, never commit or roll back, return soon after `cancel` fires (any message's lease lost,
/// or the shutdown grace expired). Messages arrive in claim order, at most one per aggregate.
pub trait BatchHandler: Send + Sync + 'static {
    fn handle<'a>(
        &'a self,
        messages: &'a [InboxMessage],
        tx: &'a mut HandlerTx,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, HandlerResult>;
}

impl<F> BatchHandler for F
where
    F: for<'a> Fn(
            &'a [InboxMessage],
            &'a mut HandlerTx,
            CancellationToken,
        ) -> BoxFuture<'a, HandlerResult>
        + Send
        + Sync
        + 'static,
{
    fn handle<'a>(
        &'a self,
        messages: &'a [InboxMessage],
        tx: &'a mut HandlerTx,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, HandlerResult> {
        self(messages, tx, cancel)
    }
}

/// Pins a closure to the batch handler signature, as [`handler_fn`] does for one message.
pub fn batch_handler_fn<F>(f: F) -> F
where
    F: for<'a> Fn(
            &'a [InboxMessage],
            &'a mut HandlerTx,
            CancellationToken,
        ) -> BoxFuture<'a, HandlerResult>
        + Send
        + Sync
        + 'static,
{
    f
}

pub(crate) struct Inner {
    pub options: WorkerOptions,
    pub statements: Statements,
    pub source: Arc<dyn ConnectionSource>,
    /// Fired by `stop`: no claim starts after it, waiting rows are abandoned.
    pub stop: CancellationToken,
    /// Fired when the shutdown grace expires: running handlers are cancelled and abandoned.
    pub grace: CancellationToken,
}

/// A pull worker for one source. Cloning gives another handle to the same worker (e.g. to call
/// [`Worker::stop`] from a signal handler while [`Worker::run`] runs).
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

impl Worker {
    /// Validates the options and renders the SQL, before any connection is opened (PULL-57).
    pub fn new(
        source: impl ConnectionSource,
        options: WorkerOptions,
    ) -> Result<Self, OptionsError> {
        options.validate()?;
        let statements = Statements::render(options.dialect, &options.schema)?;
        Ok(Self {
            inner: Arc::new(Inner {
                options,
                statements,
                source: Arc::new(source),
                stop: CancellationToken::new(),
                grace: CancellationToken::new(),
            }),
        })
    }

    /// Requests a graceful stop (§7.7). Idempotent; before `run` it makes `run` return at once.
    pub fn stop(&self) {
        self.inner.stop.cancel();
    }

    /// Runs the loop until [`Worker::stop`]; returns once every handler has returned and every
    /// renewal has stopped.
    ///
    /// Dropping the returned future (e.g. the losing branch of a `select!`) ends every task it
    /// started: running handlers are dropped mid-way and their transactions roll back, renewals
    /// stop, and the claimed rows come back after their lease with `attempt` unchanged, as after
    /// a crash (PULL-52). Prefer [`Worker::stop`], which lets running handlers finish.
    pub async fn run<H: Handler>(&self, handler: H) {
        let handler = Arc::new(handler);
        self.run_loop(|inner, rows| {
            let handler = handler.clone();
            async move { run_batch(&inner, rows, &handler).await }
        })
        .await
    }

    /// Like [`Worker::run`], but with the opt-in batch handler: each claim's rows (up to
    /// `batch_size`, distinct aggregates) go to one handler call in one transaction, and
    /// complete together in one fenced statement, or none does (README, "Batch handler").
    /// `max_concurrency` does not apply: the handler runs one batch at a time.
    pub async fn run_batched<H: BatchHandler>(&self, handler: H) {
        let handler = Arc::new(handler);
        self.run_loop(|inner, rows| {
            let handler = handler.clone();
            async move { crate::batch::run(&inner, rows, &*handler).await }
        })
        .await
    }

    /// The claim loop of PULL-36, shared by both handler kinds; `batch` gives each non-empty
    /// claim its outcomes.
    async fn run_loop<F, Fut>(&self, batch: F)
    where
        F: Fn(Arc<Inner>, Vec<Claimed>) -> Fut,
        Fut: Future<Output = ()>,
    {
        let inner = &self.inner;
        // Every task below is owned by this future (an `OwnedTask` or a `JoinSet`), never
        // detached, so dropping the future cannot leave a task renewing leases behind.
        let _grace_timer = OwnedTask::spawn(grace_timer(inner.clone()));
        while !inner.stop.is_cancelled() {
            match claim(inner).await {
                Err(e) => {
                    tracing::warn!(
                        source = %inner.options.source,
                        error = %crate::redacted(&*e),
                        "The claim failed."
                    );
                    self.pause().await;
                }
                Ok(rows) if rows.is_empty() => self.pause().await,
                // The next claim starts at once, and only after the whole batch has an outcome,
                // so no more than one batch is ever held (PULL-36, PULL-38).
                Ok(rows) => batch(inner.clone(), rows).await,
            }
        }
    }

    /// Waits `poll_interval`; a stop request ends the wait at once (PULL-37).
    async fn pause(&self) {
        tokio::select! {
            _ = self.inner.stop.cancelled() => {}
            _ = tokio::time::sleep(self.inner.options.poll_interval) => {}
        }
    }
}

async fn grace_timer(inner: Arc<Inner>) {
    inner.stop.cancelled().await;
    tokio::time::sleep(inner.options.shutdown_grace).await;
    inner.grace.cancel();
}

/// Runs one claimed batch in `min(max_concurrency, batch)` slots, in claim order (§7.3).
async fn run_batch<H: Handler>(inner: &Arc<Inner>, rows: Vec<Claimed>, handler: &Arc<H>) {
    // `min(max_concurrency, batch, rows)`; 1 on SQLite (PULL-28, PULL-38).
    let slots = Arc::new(Semaphore::new(
        inner.options.effective_concurrency().min(rows.len()),
    ));
    // Renewal starts for every row as soon as the claim commits, so a row that waits for a
    // slot keeps its lease (PULL-39).
    let started: Vec<_> = rows
        .into_iter()
        .map(|row| {
            let state = Arc::new(RowState {
                lost: AtomicBool::new(false),
                cancel: inner.grace.child_token(),
                renew_stop: CancellationToken::new(),
            });
            let renewal = OwnedTask::spawn(renew_loop(
                inner.clone(),
                row.message.id,
                row.token,
                row.message.clone(),
                state.clone(),
            ));
            (row, state, renewal)
        })
        .collect();
    let mut running = JoinSet::new();
    for (row, state, renewal) in started {
        let permit = tokio::select! {
            biased;
            _ = inner.stop.cancelled() => None,
            permit = slots.clone().acquire_owned() => permit.ok(),
        };
        let lost = state.lost.load(std::sync::atomic::Ordering::SeqCst);
        match permit {
            // Not started and stopping, or lost while waiting: write nothing (PULL-39, PULL-48).
            Some(permit) if !lost && !inner.stop.is_cancelled() => {
                running.spawn(process(
                    inner.clone(),
                    row,
                    state,
                    renewal,
                    handler.clone(),
                    permit,
                ));
            }
            _ => {
                state.renew_stop.cancel();
                let _ = renewal.await;
            }
        }
    }
    while let Some(done) = running.join_next().await {
        // A panicking handler unwinds its task: its connection closes (rolling back) and its
        // renewal stops; the row returns after its lease like any library failure (PULL-52).
        if let Err(e) = done {
            tracing::error!(
                source = %inner.options.source,
                error = if e.is_panic() { "The handler panicked." } else { "The task was cancelled." },
                "The message was abandoned."
            );
        }
    }
}
