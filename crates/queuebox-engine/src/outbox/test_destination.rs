//! A destination for the poller's unit tests: accepts every message and holds no connection.

use queuebox_core::{Destination, DestinationType, Outcome, OutgoingMessage, ReadinessComponent};

pub(crate) struct Accepting {
    name: String,
}

impl Accepting {
    pub(crate) fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
        }
    }
}

#[async_trait::async_trait]
impl Destination for Accepting {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> DestinationType {
        DestinationType::Log
    }

    async fn publish(&self, _: &OutgoingMessage) -> Outcome {
        Outcome::Delivered
    }

    fn readiness(&self) -> Vec<ReadinessComponent> {
        Vec::new()
    }

    async fn close(&self) {}
}
