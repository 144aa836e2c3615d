//! QueueBox's engine: the outbox poller, the inbox relay, retention and the supervisor; and the metrics they move.

pub mod error;
pub mod metrics;
pub mod outbox;

pub use error::EngineError;
