//! QueueBox's engine: the outbox poller, the inbox relay, retention and the supervisor; and the metrics they move.

pub mod error;
pub mod intake;
pub mod metrics;
pub mod outbox;
pub mod relay;
mod repeat;
pub mod retention;

pub use error::EngineError;
