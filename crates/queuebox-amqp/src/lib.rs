//! RabbitMQ (AMQP 0-9-1, through `lapin`) as a source (one queue per source, inbox.md §10.4)
//! and as a destination (one exchange per destination, destinations.md §5). The crate only
//! translates: the intake decides what a received message becomes, the outbox engine decides
//! retries and dead letters.

mod ack;
mod classify;
mod connect;
mod destination;
mod error;
mod headers;
mod source;

pub use destination::{RabbitmqDestination, RabbitmqDestinationSettings, RoutedRabbitmq};
pub use error::AmqpConfigError;
pub use source::{RabbitmqSource, RabbitmqSourceSettings};
