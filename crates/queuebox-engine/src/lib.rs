//! QueueBox's engine, which owns the delivery rules (architecture.md, rule 1): the message
//! pipeline and the write-combining intake every source submits to, the outbox poller, the inbox
//! relay and retention.

pub mod error;
pub mod gauges;
pub mod intake;
pub mod outbox;
pub mod pipeline;
pub mod relay;
mod repeat;
pub mod retention;
pub mod transform;

pub use error::EngineError;
