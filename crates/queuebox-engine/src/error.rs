//! `EngineError`: the ways an engine loop can stop with an error. Transient database failures are
//! never errors here: the loops log them and try again (OUT-18, OUT-42); only what the loop
//! cannot go on from ends it.

/// Why an engine loop stopped.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A setting the loop cannot run with (the configuration validates these, so this is a
    /// wiring bug, reported instead of a panic).
    #[error("The outbox poller cannot run with {setting} = 0.")]
    ZeroSetting { setting: &'static str },

    /// One of the loop's own tasks panicked or was cancelled from outside.
    #[error("The {component} task of the {owner} stopped unexpectedly: {reason}")]
    TaskFailed {
        owner: &'static str,
        component: &'static str,
        reason: String,
    },

    /// A setting of the intake, the relay or retention that the loop cannot run with (the
    /// configuration validates these; reported instead of a panic, like `ZeroSetting`).
    #[error("The {owner} cannot run with {setting} = {value}.")]
    BadSetting {
        owner: &'static str,
        setting: &'static str,
        value: String,
    },
}
