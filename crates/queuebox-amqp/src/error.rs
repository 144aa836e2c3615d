//! Start-time errors of this crate's connectors: what the configuration asks for that this
//! broker cannot carry (DST-8, DST-10).

/// A destination that cannot be built. `Display` names the key path and never a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmqpConfigError {
    #[error(
        "destinations.{destination}.headers: '{header}' is a reserved header name; only QueueBox sets it"
    )]
    ReservedHeader { destination: String, header: String },
    #[error("destinations.{destination}.headers: '{header}' cannot be sent by RabbitMQ: {reason}")]
    InvalidHeader {
        destination: String,
        header: String,
        reason: &'static str,
    },
}
