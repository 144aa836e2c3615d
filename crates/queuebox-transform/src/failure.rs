//! Why an evaluation did not give a JSON value (TRF-10, TRF-15), with the texts of the
//! specification; every text is redacted before it leaves this crate (TRF-16).

use crate::expression::Limits;
use crate::{MAX_RESULT_BYTES, MAX_SEQUENCE_ITEMS};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// *undefined*, for example a path that matches nothing.
    NoValue,
    /// A function, which is not JSON.
    Function,
    /// Infinity or NaN (the engine's D1001).
    NotFinite,
    /// Ran past `timeoutMs` (the engine's deadline check, or the cancellation backstop).
    Timeout { ms: u128 },
    /// Nested deeper than `maxDepth`.
    Depth { levels: usize },
    /// A result sequence longer than [`MAX_SEQUENCE_ITEMS`].
    Sequence,
    /// A result larger than [`MAX_RESULT_BYTES`] as JSON.
    Size,
    /// Any other engine error: `code` such as `T2001`, and its message.
    Engine { code: String, message: String },
    /// The pool is gone (QueueBox is stopping) or its thread died.
    Unavailable,
}

impl Failure {
    /// Classifies an engine error: the limits first, by their codes (jlens-core reports an array
    /// or result over its size limit as `U1001` with a message that says so).
    pub(crate) fn from_engine(code: &str, message: &str, limits: Limits) -> Self {
        match code {
            "D1012" | "U1003" => Failure::Timeout {
                ms: limits.timeout.as_millis(),
            },
            "D1011" => Failure::Depth {
                levels: limits.max_depth,
            },
            "D1001" => Failure::NotFinite,
            "D2014" => Failure::Sequence,
            "U1001" if message.starts_with("An array would exceed the size limit") => {
                Failure::Sequence
            }
            "U1001" if message.contains("would exceed the size limit of") => Failure::Size,
            _ => Failure::Engine {
                code: code.to_owned(),
                message: message.to_owned(),
            },
        }
    }

    /// Whether the failure is a limit hit (TRF-10) rather than a result or engine error.
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            Failure::Timeout { .. } | Failure::Depth { .. } | Failure::Sequence | Failure::Size
        )
    }

    /// The reason text of TRF-10 / TRF-15, redacted (TRF-16).
    pub fn reason(&self) -> String {
        let text = match self {
            Failure::NoValue => "The expression produced no value.".to_owned(),
            Failure::Function => "The expression produced a function, not JSON.".to_owned(),
            Failure::NotFinite => "The expression produced a number that is not finite.".to_owned(),
            Failure::Timeout { ms } => format!("The expression ran longer than {ms} ms."),
            Failure::Depth { levels } => {
                format!("The expression nested deeper than {levels} levels.")
            }
            Failure::Sequence => format!(
                "The expression produced a sequence longer than {MAX_SEQUENCE_ITEMS} items."
            ),
            Failure::Size => format!("The result exceeds {MAX_RESULT_BYTES} bytes."),
            Failure::Engine { code, message } => format!("{code}: {message}"),
            Failure::Unavailable => "The transform engine is stopping.".to_owned(),
        };
        queuebox_core::redact::redact(&text)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason())
    }
}

impl std::error::Error for Failure {}
