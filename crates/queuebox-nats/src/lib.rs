//! NATS for QueueBox: a JetStream source (a durable pull consumer per source, inbox.md §10.6)
//! and a destination (JetStream publish with acknowledgement by default, or core NATS,
//! destinations.md §7). The engine owns every delivery rule; this crate only translates.

mod classify;
pub mod connection;
pub mod convert;
mod destination;
mod error;
mod source;
mod subject;

pub use destination::NatsDestination;
pub use error::NatsError;
pub use source::{ConsumerSettings, NatsSource};
