//! The transform stages (transforms.md §2, §5): one configured transform block, compiled once,
//! run on the evaluation pool, its failure counted and logged the one way every stage does
//! (TRF-21, TRF-22, TRF-24), and the stage's `onError` handed back for the caller's table
//! (TRF-17): the source pipeline for the inbox, the publish path for the outbox.

use queuebox_telemetry::{Metrics, TransformStrategy};
use queuebox_transform::{Expression, Pool, Variables};
use serde_json::Value;

pub use queuebox_transform::{CompileError, Limits};

/// `onError` of a transform block (TRF-9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnError {
    Fail,
    Skip,
    Dead,
}

impl OnError {
    fn label(self) -> TransformStrategy {
        match self {
            OnError::Fail => TransformStrategy::Fail,
            OnError::Skip => TransformStrategy::Skip,
            OnError::Dead => TransformStrategy::Dead,
        }
    }
}

/// Where a transform runs (TRF-5), for the log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Source,
    Route,
    Destination,
}

impl Stage {
    fn as_str(self) -> &'static str {
        match self {
            Stage::Source => "source",
            Stage::Route => "route",
            Stage::Destination => "destination",
        }
    }
}

/// One transform block, ready to run.
#[derive(Clone)]
pub struct StageTransform {
    stage: Stage,
    /// The block's configuration path, such as `routes[1].transform` (TRF-22).
    path: String,
    expression: Expression,
    on_error: OnError,
    pool: Pool,
    metrics: Metrics,
}

/// What a failed stage asks of its caller: the strategy (never `Skip`, which the stage handles
/// itself) and the `last_error` / response text `Transform failed: <reason>` (TRF-21).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub on_error: OnError,
    pub error: String,
}

/// The ids of the message a stage runs on, for the log line (TRF-22).
pub struct MessageIds<'a> {
    pub source: Option<&'a str>,
    pub message_id: Option<&'a str>,
    pub idempotency_key: Option<&'a str>,
    pub correlation_id: &'a str,
}

impl std::fmt::Debug for StageTransform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageTransform")
            .field("stage", &self.stage)
            .field("path", &self.path)
            .field("expression", &self.expression)
            .field("on_error", &self.on_error)
            .finish()
    }
}

impl StageTransform {
    /// Compiles `expression` once (TRF-3); the error is the engine's reason.
    pub fn compile(
        stage: Stage,
        path: impl Into<String>,
        expression: &str,
        limits: Limits,
        on_error: OnError,
        pool: Pool,
        metrics: Metrics,
    ) -> Result<Self, CompileError> {
        Ok(Self {
            stage,
            path: path.into(),
            expression: Expression::compile(expression, limits)?,
            on_error,
            pool,
            metrics,
        })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Runs the stage on `input`: `Ok(Some(output))` on success, `Ok(None)` after a failure
    /// with `Skip` (the caller keeps its input, TRF-17), `Err` for `Fail` and `Dead`.
    pub async fn run(
        &self,
        input: Value,
        variables: Variables,
        ids: &MessageIds<'_>,
    ) -> Result<Option<Value>, Rejected> {
        let failure = match self.pool.evaluate(&self.expression, input, variables).await {
            Ok(output) => return Ok(Some(output)),
            Err(failure) => failure,
        };
        let reason = failure.reason();
        self.metrics.transform_failures(self.on_error.label()).inc();
        // TRF-22: the ids, never the payload; the reason is redacted already (TRF-16).
        tracing::warn!(
            stage = self.stage.as_str(),
            path = %self.path,
            strategy = self.on_error.label().as_str(),
            reason = %reason,
            source = ids.source,
            messageId = ids.message_id,
            idempotencyKey = ids.idempotency_key,
            correlationId = ids.correlation_id,
            "The transform failed."
        );
        match self.on_error {
            OnError::Skip => Ok(None),
            on_error => Err(Rejected {
                on_error,
                error: format!("Transform failed: {reason}"),
            }),
        }
    }
}
