//! `KafkaConfigError`: why a Kafka destination cannot be built. A publish never returns one (it
//! answers an `Outcome`, DST-3); these stop the start, so each names the key it is about and
//! never a secret.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KafkaConfigError {
    #[error(
        "destinations.{destination}.headers: '{header}' is a reserved header name; only QueueBox sets it"
    )]
    ReservedHeader { destination: String, header: String },

    /// librdkafka refused a setting (for example a security protocol this build cannot use).
    #[error("{owner}: the Kafka client cannot be created: {reason}")]
    Client { owner: String, reason: String },
}
