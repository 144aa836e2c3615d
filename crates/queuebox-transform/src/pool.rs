//! The evaluation pool (TRF-4): one blocking thread per CPU core, each with a 16 MiB stack, fed
//! from one queue. A caller awaits its result without holding an async worker; work beyond the
//! pool's size waits in the queue for a free thread. The time limit is enforced by the engine's
//! own deadline check and, as a backstop, by a cancellation the caller fires once the deadline
//! has passed since the evaluation started (TRF-10).

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jlens_core::CancelToken;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::expression::Expression;
use crate::failure::Failure;
use crate::variables::Variables;

/// Stack of each evaluation thread: twice the 8 MiB floor of TRF-4, so that the deepest
/// evaluation the engine allows (its own ceiling is above any configured `maxDepth`) cannot
/// overflow it.
const STACK_BYTES: usize = 16 << 20;

/// How long after the deadline the backstop cancels: the engine's own check fires first in the
/// normal case; the backstop catches a long step between two of its clock reads.
const BACKSTOP_GRACE: Duration = Duration::from_millis(20);

struct Job {
    expression: Expression,
    input: Value,
    variables: Variables,
    cancel: CancelToken,
    started: oneshot::Sender<()>,
    done: oneshot::Sender<Result<Value, Failure>>,
}

/// A handle on the pool; clones share the threads. The threads stop when the last handle is
/// dropped and the queue is empty.
#[derive(Clone)]
pub struct Pool {
    queue: Sender<Job>,
    threads: usize,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads)
            .finish()
    }
}

impl Pool {
    /// One thread per CPU core (TRF-4).
    pub fn per_core() -> std::io::Result<Self> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::new(cores)
    }

    pub fn new(threads: usize) -> std::io::Result<Self> {
        let threads = threads.max(1);
        let (queue, jobs) = channel::<Job>();
        let jobs = Arc::new(Mutex::new(jobs));
        for i in 0..threads {
            let jobs = Arc::clone(&jobs);
            std::thread::Builder::new()
                .name(format!("qb-transform-{i}"))
                .stack_size(STACK_BYTES)
                .spawn(move || work(&jobs))?;
        }
        Ok(Self { queue, threads })
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Evaluates `expression` on `input` with `variables` on a pool thread, within the
    /// expression's limits.
    pub async fn evaluate(
        &self,
        expression: &Expression,
        input: Value,
        variables: Variables,
    ) -> Result<Value, Failure> {
        let cancel = CancelToken::new();
        let (started_tx, started_rx) = oneshot::channel();
        let (done_tx, mut done_rx) = oneshot::channel();
        let job = Job {
            expression: expression.clone(),
            input,
            variables,
            cancel: cancel.clone(),
            started: started_tx,
            done: done_tx,
        };
        self.queue.send(job).map_err(|_| Failure::Unavailable)?;
        if started_rx.await.is_err() {
            return Err(Failure::Unavailable);
        }
        let backstop = tokio::time::sleep(expression.limits().timeout + BACKSTOP_GRACE);
        tokio::select! {
            result = &mut done_rx => result.unwrap_or(Err(Failure::Unavailable)),
            () = backstop => {
                // The caller gets its answer at the deadline; the thread stops at the engine's
                // next cancellation check (a long built-in step, such as building one large
                // array, checks only when it returns) and then takes the next job.
                cancel.cancel();
                Err(Failure::Timeout {
                    ms: expression.limits().timeout.as_millis(),
                })
            }
        }
    }
}

fn work(jobs: &Mutex<Receiver<Job>>) {
    loop {
        // The lock is held only while waiting for the next job, never while evaluating.
        let next = match jobs.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return,
        };
        let Ok(job) = next else { return };
        let Job {
            expression,
            input,
            variables,
            cancel,
            started,
            done,
        } = job;
        if started.send(()).is_err() {
            continue; // the caller gave up before it started
        }
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            expression.evaluate_here(&input, &variables, cancel)
        }))
        .unwrap_or_else(|_| {
            Err(Failure::Engine {
                code: "U0000".to_owned(),
                message: "The expression engine failed on this input.".to_owned(),
            })
        });
        let _ = done.send(result);
    }
}
