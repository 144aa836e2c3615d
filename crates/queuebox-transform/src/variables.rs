//! The variables a stage binds (TRF-11), and no others: a variable a stage does not bind is
//! undefined in the expression, not an error.

use serde_json::{Map, Value};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Variables {
    vars: Vec<(&'static str, Value)>,
    timestamp: bool,
    /// The evaluation's clock, when the caller fixes it (the admin transform test reports the
    /// `$timestamp` it bound); `None` reads the clock at the evaluation.
    now_ms: Option<i64>,
}

impl Variables {
    /// A key expression's: none at all (TRF-27).
    pub fn none() -> Self {
        Self::default()
    }

    /// The source stage's: `$source`, `$headers` (the stored map, credentials already left out
    /// by the source, INB-21), `$idempotencyKey`, `$eventType` (`null` when none) and
    /// `$timestamp`.
    pub fn source_stage(
        source: &str,
        headers: Map<String, Value>,
        idempotency_key: &str,
        event_type: Option<&str>,
    ) -> Self {
        Self {
            vars: vec![
                ("source", Value::from(source)),
                ("headers", Value::Object(headers)),
                ("idempotencyKey", Value::from(idempotency_key)),
                ("eventType", event_type.map_or(Value::Null, Value::from)),
            ],
            timestamp: true,
            now_ms: None,
        }
    }

    /// The route and destination stages': `$messageId`, `$topic`, `$attempt` (failed deliveries
    /// so far, 0 on the first) and `$timestamp`.
    pub fn outbox_stage(message_id: &str, topic: &str, attempt: u32) -> Self {
        Self {
            vars: vec![
                ("messageId", Value::from(message_id)),
                ("topic", Value::from(topic)),
                ("attempt", Value::from(attempt)),
            ],
            timestamp: true,
            now_ms: None,
        }
    }

    /// Fixes the evaluation's clock (`$timestamp` and `$now()`) at `ms` since the epoch.
    pub fn at_time(mut self, ms: i64) -> Self {
        self.now_ms = Some(ms);
        self
    }

    pub(crate) fn fixed_now(&self) -> Option<i64> {
        self.now_ms
    }

    pub(crate) fn binds_timestamp(&self) -> bool {
        self.timestamp
    }

    pub(crate) fn bindings(&self) -> jlens_core::Bindings {
        self.vars
            .iter()
            .map(|(name, value)| ((*name).to_owned(), value.clone()))
            .collect()
    }
}
