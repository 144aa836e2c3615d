//! The supervisor of `queuebox run`: it owns every background task, notices one that ends by
//! itself, and stops them in the order of the shutdown phases (operations.md OPS-26), each
//! stop guarded on its own (OPS-27).

use queuebox_core::redact::redact;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The kinds of background task, which the shutdown stops phase by phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskKind {
    /// One consumer per RabbitMQ, Kafka and NATS source (phase 3: all stop together).
    BrokerSource,
    /// The write-combining intake writer: stops after every source, so the messages they
    /// still submit are committed before the pool closes (OPS-28).
    IntakeWriter,
    /// The LISTEN connection of `outbox.capture.mode: notify` (OUT-57; phase 4).
    CaptureListener,
    OutboxPoller,
    InboxRelay,
    Retention,
    PoolGauges,
}

/// One background task: what it is, how it is named in log lines, its own stop signal.
struct Task {
    kind: TaskKind,
    label: String,
    cancel: CancellationToken,
    handle: JoinHandle<()>,
}

/// A task that ended: its label, and its result (`Ok` when it stopped by itself).
pub type Ended = (String, Result<(), String>);

/// Spawns background tasks; each reports to `ended` when it returns, so the supervisor notices
/// a task that stops by itself.
pub struct Tasks {
    started: Vec<Task>,
    ended: mpsc::UnboundedSender<Ended>,
}

impl Tasks {
    pub fn new() -> (Self, mpsc::UnboundedReceiver<Ended>) {
        let (ended, receiver) = mpsc::unbounded_channel();
        let tasks = Self {
            started: Vec::new(),
            ended,
        };
        (tasks, receiver)
    }

    /// `label` names the task in log lines: `the outbox poller`, `the rabbitmq consumer of
    /// source orders`.
    pub fn spawn<F>(
        &mut self,
        kind: TaskKind,
        label: impl Into<String>,
        run: impl FnOnce(CancellationToken) -> F,
    ) where
        F: Future<Output = Result<(), String>> + Send + 'static,
    {
        let label = label.into();
        let cancel = CancellationToken::new();
        let future = run(cancel.clone());
        let ended = self.ended.clone();
        let reported = label.clone();
        let handle = tokio::spawn(async move {
            let result = future.await;
            let _ = ended.send((reported, result));
        });
        self.started.push(Task {
            kind,
            label,
            cancel,
            handle,
        });
    }

    /// Stops every task of `kind` together and waits for them.
    pub async fn stop(&mut self, kind: TaskKind) {
        let (stopping, kept): (Vec<Task>, Vec<Task>) =
            self.started.drain(..).partition(|task| task.kind == kind);
        self.started = kept;
        for task in &stopping {
            task.cancel.cancel();
        }
        for task in stopping {
            if let Err(err) = task.handle.await {
                tracing::warn!(
                    "Stopping {} failed. The shutdown continues. Reason: {}",
                    task.label,
                    redact(&err.to_string())
                );
            }
        }
    }

    /// Stops what is left, kind by kind in the order of the shutdown phases.
    pub async fn stop_all(&mut self) {
        for kind in [
            TaskKind::BrokerSource,
            TaskKind::IntakeWriter,
            TaskKind::CaptureListener,
            TaskKind::OutboxPoller,
            TaskKind::InboxRelay,
            TaskKind::Retention,
            TaskKind::PoolGauges,
        ] {
            self.stop(kind).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[tokio::test]
    async fn ops_26_tasks_stop_by_kind_in_phase_order_and_one_that_ends_alone_is_reported() {
        let (mut tasks, mut ended) = Tasks::new();
        let order = Arc::new(Mutex::new(Vec::new()));
        for (kind, label) in [
            (TaskKind::Retention, "retention"),
            (TaskKind::OutboxPoller, "the outbox poller"),
            (TaskKind::BrokerSource, "the nats consumer of source a"),
            (TaskKind::IntakeWriter, "the intake"),
            (TaskKind::BrokerSource, "the nats consumer of source b"),
        ] {
            let order = Arc::clone(&order);
            tasks.spawn(kind, label, move |cancel| async move {
                cancel.cancelled().await;
                order.lock().unwrap().push(label);
                Ok(())
            });
        }
        tasks.spawn(TaskKind::PoolGauges, "the pool gauges", |_| async {
            Err("broken".to_owned())
        });
        let (label, result) = ended.recv().await.unwrap();
        assert_eq!(
            (label.as_str(), result),
            ("the pool gauges", Err("broken".to_owned()))
        );
        tasks.stop_all().await;
        let order = order.lock().unwrap().clone();
        let position = |label| order.iter().position(|l| *l == label).unwrap();
        assert!(position("the nats consumer of source a") < position("the intake"));
        assert!(position("the nats consumer of source b") < position("the intake"));
        assert!(position("the intake") < position("the outbox poller"));
        assert!(position("the outbox poller") < position("retention"));
    }
}
