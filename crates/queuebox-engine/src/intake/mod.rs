//! The engine's side of the intake contract ([`queuebox_core::Intake`]): each message runs
//! through its source's [`SourcePipeline`] on the caller's task, and the row it yields joins the
//! write-combining [`writer`] queue, in submission order; the receipt resolves when the writer
//! answers, after the commit. Outcomes decided before storing (filtered, refused) resolve at
//! once. Every intake metric is counted here or in the writer, whatever the source.

pub mod refused;
pub mod writer;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use async_trait::async_trait;
use queuebox_core::intake::{Intake, IntakeOutcome, PendingOutcome, Refusal};
use queuebox_core::{ReceivedMessage, SourceName};
use queuebox_telemetry::{Metrics, RejectionReason};

use crate::pipeline::{Admission, SourcePipeline};
use writer::WriterHandle;

/// The intake of one replica: every configured source's pipeline, and the writer.
pub struct InboxIntake {
    pipelines: HashMap<SourceName, SourcePipeline>,
    writer: WriterHandle,
    metrics: Metrics,
}

impl InboxIntake {
    pub fn new(pipelines: Vec<SourcePipeline>, writer: WriterHandle, metrics: Metrics) -> Self {
        Self {
            pipelines: pipelines
                .into_iter()
                .map(|pipeline| (pipeline.source().clone(), pipeline))
                .collect(),
            writer,
            metrics,
        }
    }

    fn count(&self, source: &SourceName, outcome: &IntakeOutcome) {
        match outcome {
            IntakeOutcome::Filtered { .. } => self.metrics.inbox_filtered(source.as_str()).inc(),
            IntakeOutcome::Refused(
                Refusal::InvalidJson
                | Refusal::NoKey { .. }
                | Refusal::JsonLimit { .. }
                | Refusal::InvalidTopic { .. },
            ) => self
                .metrics
                .inbox_rejections(RejectionReason::ExtractionFailed)
                .inc(),
            IntakeOutcome::Refused(Refusal::TransformFailed { .. }) => self
                .metrics
                .inbox_rejections(RejectionReason::TransformFailed)
                .inc(),
            // The writer counts what it stores (and the data the database refused); nothing
            // else settles before storing.
            IntakeOutcome::Refused(Refusal::DataRejected { .. })
            | IntakeOutcome::New { .. }
            | IntakeOutcome::Duplicate
            | IntakeOutcome::StorageFailed { .. }
            | IntakeOutcome::ShuttingDown => {}
        }
    }
}

#[async_trait]
impl Intake for InboxIntake {
    async fn enqueue(&self, message: ReceivedMessage) -> PendingOutcome {
        let Some(pipeline) = self.pipelines.get(&message.source) else {
            // Wiring builds a pipeline for every configured source, so this is a defect; the
            // message is not stored, and its sender is told so and tries again.
            tracing::error!(
                source = message.source.as_str(),
                "A message arrived for a source the intake does not know."
            );
            return PendingOutcome::ready(IntakeOutcome::StorageFailed {
                reason: format!("no intake for source {}", message.source),
            });
        };
        let source = message.source.clone();
        match pipeline.admit(message).await {
            Admission::Settle(outcome) => {
                self.count(&source, &outcome);
                PendingOutcome::ready(outcome)
            }
            Admission::Store(row) => match self.writer.queue(row, pipeline.when_refused()).await {
                Ok(answer) => PendingOutcome::waiting(answer),
                Err(writer::Stopped) => PendingOutcome::ready(IntakeOutcome::ShuttingDown),
            },
        }
    }

    /// Admits every message in order, then queues the rows to store as one group of the
    /// writer, so they are stored together (the outcomes settled before storing stay in their
    /// places).
    async fn enqueue_all(&self, messages: Vec<ReceivedMessage>) -> Vec<PendingOutcome> {
        let mut settled: Vec<Option<PendingOutcome>> = Vec::with_capacity(messages.len());
        let mut rows = Vec::new();
        for message in messages {
            let Some(pipeline) = self.pipelines.get(&message.source) else {
                settled.push(Some(self.enqueue(message).await));
                continue;
            };
            let source = message.source.clone();
            match pipeline.admit(message).await {
                Admission::Settle(outcome) => {
                    self.count(&source, &outcome);
                    settled.push(Some(PendingOutcome::ready(outcome)));
                }
                Admission::Store(row) => {
                    rows.push((row, pipeline.when_refused()));
                    // Its place, filled with the writer's answer below.
                    settled.push(None);
                }
            }
        }
        let mut answers = match self.writer.queue_all(rows).await {
            Ok(answers) => answers.into_iter().map(PendingOutcome::waiting).collect(),
            Err(writer::Stopped) => Vec::new(),
        }
        .into_iter();
        settled
            .into_iter()
            .map(|place| {
                place.unwrap_or_else(|| {
                    answers
                        .next()
                        .unwrap_or_else(|| PendingOutcome::ready(IntakeOutcome::ShuttingDown))
                })
            })
            .collect()
    }
}
