//! QueueBox's JSONata engine adapter (transforms.md): every transform and key expression is
//! compiled once at start ([`Expression::compile`], TRF-3) and evaluated on a bounded pool of
//! blocking threads with big stacks ([`Pool`], TRF-4), never on the async runtime's workers, with
//! the time, depth, sequence and size limits of TRF-10. The result is checked as TRF-14/15 say
//! and every failure text is redacted (TRF-16). The stages (source, route, destination) and their
//! `onError` strategies live in the engine crate; this crate evaluates.
//!
//! The engine is `jlens-core`, pinned to one exact version (TRF-1; docs/transforms.md says why it
//! and not the crate the specification names).

mod expression;
mod failure;
mod key;
mod pool;
mod timestamp;
mod variables;

pub use expression::{CompileError, Expression, Limits};
pub use failure::Failure;
pub use key::{KeyCandidate, key_value};
pub use pool::Pool;
pub use variables::Variables;

/// The pinned engine itself, for the conformance harness (bench/jsonata-conformance), so that
/// the harness always measures the version QueueBox runs.
pub use jlens_core as engine;

/// The engine's name and version as the compiled engine reports them itself (`jlens-core 0.26.0`,
/// from the header of an audited evaluation, which the engine stamps with its own package
/// version), so a test can hold the engine that actually runs against the version that
/// docs/transforms.md records as pinned and measured (TRF-1).
pub fn engine_version() -> String {
    let probe = jlens_core::Expression::compile("1").expect("a literal compiles");
    let (_, audit) = probe.evaluate_audited(
        None,
        &jlens_core::Bindings::new(),
        &jlens_core::Options::default(),
        &jlens_core::audit::AuditOptions::decisions(),
    );
    audit.header.engine
}

/// The fixed ceiling on the items of one result sequence (TRF-10).
pub const MAX_SEQUENCE_ITEMS: usize = 1_000_000;
/// The fixed ceiling on the serialized size of a result, in bytes (TRF-10).
pub const MAX_RESULT_BYTES: usize = 16_777_216;

/// `$timestamp`'s text for an instant in milliseconds since the epoch (TRF-11).
pub fn timestamp_text(ms: i64) -> String {
    timestamp::iso8601_millis(ms)
}

/// Checks that `source` compiles, for the configuration loader (TRF-39): the reason is the
/// engine's `<code>: <message>`.
pub fn check(source: &str) -> Result<(), CompileError> {
    Expression::compile(source, Limits::KEY_EXPRESSION).map(|_| ())
}
