//! `NatsError`: why a NATS destination or source cannot be built or started. A publish never
//! returns one (it answers an `Outcome`, DST-3); these stop the start, so each names the key it
//! is about and never a secret or a URL that may carry one.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NatsError {
    /// OPS-25: a server URL that does not parse is not printed, because it can carry a password.
    #[error(
        "a server of 'servers' cannot be parsed; the URL is not printed because it can carry a password"
    )]
    UnparsableServer,

    #[error("cannot open the NATS connection: {0}")]
    Connect(String),

    #[error(
        "destinations.{destination}.headers: '{header}' is a reserved header name; only QueueBox sets it"
    )]
    ReservedHeader { destination: String, header: String },

    #[error(
        "destinations.{destination}.headers: the header '{header}' cannot be sent on NATS: {reason}"
    )]
    InvalidHeader {
        destination: String,
        header: String,
        reason: &'static str,
    },
}
