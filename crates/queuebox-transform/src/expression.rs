//! A compiled expression with its limits (TRF-3, TRF-9, TRF-10), and the one synchronous
//! evaluation that the pool's threads run.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jlens_core::{CancelToken, Options};
use serde_json::Value;

use crate::failure::Failure;
use crate::variables::Variables;
use crate::{MAX_RESULT_BYTES, MAX_SEQUENCE_ITEMS, timestamp};

/// The per-expression limits of a transform block (TRF-9); the sequence and size limits are
/// fixed for every expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub timeout: Duration,
    pub max_depth: usize,
}

impl Limits {
    /// The fixed limits of a key expression (TRF-27), which are also a transform block's
    /// defaults (TRF-9).
    pub const KEY_EXPRESSION: Limits = Limits {
        timeout: Duration::from_millis(100),
        max_depth: 100,
    };
}

/// An expression that does not compile; the text is the engine's `<code>: <message>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CompileError(String);

/// A compiled expression: cheap to clone, shared by every thread that evaluates it.
#[derive(Clone)]
pub struct Expression {
    inner: Arc<Inner>,
}

struct Inner {
    source: String,
    compiled: jlens_core::Expression,
    /// `$type((<source>))`, evaluated only when the result is *undefined*, to tell a function
    /// result (which the engine's JSON conversion drops to *undefined*) from no value (TRF-15).
    type_probe: Option<jlens_core::Expression>,
    limits: Limits,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expression")
            .field("source", &self.inner.source)
            .field("limits", &self.inner.limits)
            .finish()
    }
}

impl Expression {
    /// Compiles `source` once (TRF-3).
    pub fn compile(source: &str, limits: Limits) -> Result<Self, CompileError> {
        let compiled = jlens_core::Expression::compile(source)
            .map_err(|e| CompileError(format!("{}: {}", e.code(), e.message())))?;
        let type_probe = jlens_core::Expression::compile(&format!("$type((\n{source}\n))")).ok();
        Ok(Self {
            inner: Arc::new(Inner {
                source: source.to_owned(),
                compiled,
                type_probe,
                limits,
            }),
        })
    }

    pub fn source(&self) -> &str {
        &self.inner.source
    }

    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// Evaluates on the calling thread, which must have a big stack (the pool's threads do).
    /// `cancel` is the backstop of the time limit (TRF-10).
    pub(crate) fn evaluate_here(
        &self,
        input: &Value,
        variables: &Variables,
        cancel: CancelToken,
    ) -> Result<Value, Failure> {
        let inner = &*self.inner;
        let now_ms = variables.fixed_now().unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0)
        });
        let mut bindings = variables.bindings();
        if variables.binds_timestamp() {
            // TRF-13: `$timestamp` is the instant that `$now()` returns in this evaluation.
            bindings = bindings.var("timestamp", timestamp::iso8601_millis(now_ms));
        }
        let options = Options::new()
            .now(now_ms)
            .timeout(inner.limits.timeout)
            .max_depth(inner.limits.max_depth)
            .max_array_length(MAX_SEQUENCE_ITEMS)
            .max_result_size(MAX_RESULT_BYTES)
            .cancel_token(cancel);
        match inner
            .compiled
            .evaluate_with(Some(input), &bindings, &options)
        {
            Ok(Some(value)) => Ok(value),
            Ok(None) => {
                let is_function = inner.type_probe.as_ref().is_some_and(|probe| {
                    matches!(
                        probe.evaluate_with(Some(input), &bindings, &options),
                        Ok(Some(Value::String(t))) if t == "function"
                    )
                });
                Err(if is_function {
                    Failure::Function
                } else {
                    Failure::NoValue
                })
            }
            Err(e) => Err(Failure::from_engine(e.code(), &e.message(), inner.limits)),
        }
    }
}
