//! The `rabbitmq` destination (destinations.md §5): one connection per destination, opened at
//! the first publish and again after a loss (DST-2, DST-33); publishes on confirm-mode
//! channels from a pool, one publish at a time per channel, so every publish waits for its own
//! confirm and is matched to its own return however many run at once (DST-37). The broker's
//! answers become an `Outcome` in `classify`; retries are the engine's.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ExchangeKind};
use queuebox_config::{
    Address, DeliveryMode, Destination as DestinationConfig, DestinationKind, ExchangeType, Route,
};
use queuebox_core::template::{Template, TemplateField, payload_field};
use queuebox_core::{
    Destination, DestinationType, Outcome, OutgoingMessage, ReadinessComponent, Secret,
};

use crate::classify::{Answer, CONFIRM_TIMEOUT_MS, FAILED, classify};
use crate::connect::{connect, error_text};
use crate::error::AmqpConfigError;
use crate::headers::{check_static, outgoing};

/// The longest routing key AMQP carries (DST-35).
const MAX_ROUTING_KEY_BYTES: usize = 255;

/// One `rabbitmq` destination, from configuration.
#[derive(Clone, Debug)]
pub struct RabbitmqDestinationSettings {
    pub name: String,
    pub url: Secret,
    pub exchange: Address,
    pub exchange_type: ExchangeType,
    pub routing_key_template: Template,
    pub delivery_mode: DeliveryMode,
    pub static_headers: Vec<(String, Secret)>,
}

impl RabbitmqDestinationSettings {
    /// `None` when `destination` is not of type `rabbitmq`.
    pub fn from_config(destination: &DestinationConfig) -> Option<Self> {
        let DestinationKind::Rabbitmq(rabbitmq) = &destination.kind else {
            return None;
        };
        Some(Self {
            name: destination.name.clone(),
            url: rabbitmq.url.clone(),
            exchange: rabbitmq.exchange.clone(),
            exchange_type: rabbitmq.exchange_type,
            routing_key_template: rabbitmq.routing_key_template.clone(),
            delivery_mode: rabbitmq.delivery_mode,
            static_headers: destination
                .headers
                .iter()
                .map(|(name, value)| (name.as_str().to_owned(), value.clone()))
                .collect(),
        })
    }
}

/// A channel of the pool, with the exchanges already declared on it (DST-34).
struct Pooled {
    channel: Channel,
    declared: HashSet<String>,
}

/// The routing key rule of one route (DST-21): its template, else the destination's, and the
/// route's `routingKeyMissingFieldDefault` for a missing field.
#[derive(Clone, Debug)]
struct KeyRule {
    template: Template,
    missing: String,
}

/// A `rabbitmq` destination.
pub struct RabbitmqDestination {
    settings: RabbitmqDestinationSettings,
    /// The one connection; replaced under this lock when it was lost, so one publish
    /// reconnects and the others wait for it.
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// Idle channels of the current connection.
    idle: Mutex<Vec<Pooled>>,
    default_key: KeyRule,
}

impl RabbitmqDestination {
    /// Checks the static headers (DST-8, DST-10). Connects nothing: a broker that cannot be
    /// reached never stops the start (DST-2).
    pub fn new(settings: RabbitmqDestinationSettings) -> Result<Arc<Self>, AmqpConfigError> {
        check_static(&settings.name, &settings.static_headers)?;
        let default_key = KeyRule {
            template: settings.routing_key_template.clone(),
            missing: String::new(),
        };
        Ok(Arc::new(Self {
            settings,
            connection: tokio::sync::Mutex::new(None),
            idle: Mutex::new(Vec::new()),
            default_key,
        }))
    }

    /// The destination as one route sees it: the route's `routingKeyTemplate`, when set, wins
    /// over the destination's, and a missing field renders as the route's
    /// `routingKeyMissingFieldDefault` (DST-14, DST-21).
    pub fn for_route(self: &Arc<Self>, route: &Route) -> Arc<dyn Destination> {
        Arc::new(RoutedRabbitmq {
            inner: Arc::clone(self),
            key: KeyRule {
                template: route
                    .routing_key_template
                    .clone()
                    .unwrap_or_else(|| self.settings.routing_key_template.clone()),
                missing: route.routing_key_missing_field_default.clone(),
            },
        })
    }

    async fn publish_with(&self, message: &OutgoingMessage, key: &KeyRule) -> Outcome {
        let exchange = match self.exchange(message) {
            Ok(exchange) => exchange,
            Err(text) => return Outcome::failed(text),
        };
        let routing_key = key
            .template
            .render(&key.missing, |field| field_value(message, field));
        if routing_key.len() > MAX_ROUTING_KEY_BYTES {
            return Outcome::failed(format!(
                "{FAILED}the routing key is {} bytes long; RabbitMQ takes at most {MAX_ROUTING_KEY_BYTES}",
                routing_key.len()
            ));
        }
        let mut pooled = match self.channel().await {
            Ok(pooled) => pooled,
            Err(reason) => return Outcome::failed(format!("{FAILED}{reason}")),
        };
        let answer = self
            .send(&mut pooled, message, &exchange, &routing_key)
            .await;
        let id = message.id.to_string();
        let classified = classify(&id, &exchange, &routing_key, answer);
        if classified.keep_channel {
            self.idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(pooled);
        } else {
            // DST-33: the next publish opens a new channel; closing this one is best effort.
            let channel = pooled.channel;
            tokio::spawn(async move {
                let _ = channel.close(200, ShortString::from("discarded")).await;
            });
        }
        classified.outcome
    }

    /// DST-17..20: the exchange of this row, or the failure text.
    fn exchange(&self, message: &OutgoingMessage) -> Result<String, String> {
        let name = &self.settings.name;
        match &self.settings.exchange {
            Address::Template(template) => {
                let exchange = template.render("", |field| field_value(message, field));
                if exchange.is_empty() {
                    return Err(format!(
                        "Destination '{name}' rendered an empty exchange from template '{template}'. QueueBox does not publish the message."
                    ));
                }
                Ok(exchange)
            }
            Address::Column(column) => {
                let value = match column {
                    queuebox_config::AddressColumn::AggregateType => message.aggregate_type.clone(),
                    queuebox_config::AddressColumn::Topic => Some(message.topic.clone()),
                    queuebox_config::AddressColumn::Key => message.key.clone(),
                };
                value.filter(|v| !v.is_empty()).ok_or_else(|| {
                    format!(
                        "Destination '{name}' read an empty exchange from column '{}'. QueueBox does not publish the message.",
                        column.as_str()
                    )
                })
            }
        }
    }

    /// An idle channel of the live connection, or a new one (connecting first when the
    /// connection is missing or lost).
    async fn channel(&self) -> Result<Pooled, String> {
        loop {
            let popped = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            match popped {
                Some(pooled) if pooled.channel.status().connected() => return Ok(pooled),
                Some(_) => continue,
                None => break,
            }
        }
        let connection = self.connection().await?;
        let channel = connection
            .create_channel()
            .await
            .map_err(|err| error_text(&err))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|err| error_text(&err))?;
        Ok(Pooled {
            channel,
            declared: HashSet::new(),
        })
    }

    async fn connection(&self) -> Result<Arc<Connection>, String> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref()
            && connection.status().connected()
        {
            return Ok(Arc::clone(connection));
        }
        // The old connection's channels went with it.
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let connection = Arc::new(connect(&self.settings.url, &self.settings.name).await?);
        tracing::info!(destination = %self.settings.name, "connected to RabbitMQ");
        *slot = Some(Arc::clone(&connection));
        Ok(connection)
    }

    /// Declares the exchange on this channel when it is new to it (DST-34), publishes with
    /// `mandatory` (DST-35) and waits for the confirm (DST-36).
    async fn send(
        &self,
        pooled: &mut Pooled,
        message: &OutgoingMessage,
        exchange: &str,
        routing_key: &str,
    ) -> Answer {
        if !pooled.declared.contains(exchange) {
            let declared = pooled
                .channel
                .exchange_declare(
                    ShortString::from(exchange),
                    exchange_kind(self.settings.exchange_type),
                    ExchangeDeclareOptions {
                        passive: false,
                        durable: true,
                        auto_delete: false,
                        internal: false,
                        nowait: false,
                    },
                    FieldTable::default(),
                )
                .await;
            if let Err(err) = declared {
                return Answer::ChannelError(err.to_string());
            }
            pooled.declared.insert(exchange.to_owned());
        }
        let headers = outgoing(
            &message.topic,
            message.attempt,
            &message.headers,
            &self.settings.static_headers,
        );
        let id = message.id.to_string();
        for name in &headers.reserved_dropped {
            tracing::debug!(destination = %self.settings.name, message_id = %id, "row header {name:?} has a reserved name and is not sent");
        }
        if !headers.uncarriable_dropped.is_empty() {
            tracing::warn!(destination = %self.settings.name, message_id = %id, "row headers {:?} cannot be carried by RabbitMQ and are not sent", headers.uncarriable_dropped);
        }
        let properties = BasicProperties::default()
            .with_message_id(ShortString::from(id.as_str()))
            .with_content_type(ShortString::from("application/json"))
            .with_delivery_mode(match self.settings.delivery_mode {
                DeliveryMode::Persistent => 2,
                DeliveryMode::Transient => 1,
            })
            .with_headers(headers.table);
        let published = pooled
            .channel
            .basic_publish(
                ShortString::from(exchange),
                ShortString::from(routing_key),
                BasicPublishOptions {
                    mandatory: true,
                    immediate: false,
                },
                message.payload.as_bytes(),
                properties,
            )
            .await;
        let confirm = match published {
            Ok(confirm) => confirm,
            Err(err) => return Answer::ChannelError(err.to_string()),
        };
        match tokio::time::timeout(Duration::from_millis(CONFIRM_TIMEOUT_MS), confirm).await {
            Ok(Ok(confirmation)) => Answer::Confirmed(confirmation.into()),
            Ok(Err(err)) => Answer::ChannelError(err.to_string()),
            Err(_) => Answer::NoConfirm,
        }
    }
}

fn exchange_kind(kind: ExchangeType) -> ExchangeKind {
    match kind {
        ExchangeType::Topic => ExchangeKind::Topic,
        ExchangeType::Direct => ExchangeKind::Direct,
        ExchangeType::Fanout => ExchangeKind::Fanout,
    }
}

/// A template field of the row (DST-13); `{{ payload.… }}` reads the stored payload, never the
/// output of a transform (DST-15, TRF-8).
fn field_value(message: &OutgoingMessage, field: &TemplateField) -> Option<String> {
    match field {
        TemplateField::Topic => Some(message.topic.clone()),
        TemplateField::Key => message.key.clone().filter(|k| !k.is_empty()),
        TemplateField::AggregateType => message.aggregate_type.clone().filter(|a| !a.is_empty()),
        TemplateField::Payload(path) => {
            let payload: serde_json::Value =
                serde_json::from_str(message.template_payload()).ok()?;
            payload_field(&payload, path)
        }
        // Not a destination field: the config crate refuses it at start.
        TemplateField::Source | TemplateField::EventType => None,
    }
}

#[async_trait::async_trait]
impl Destination for RabbitmqDestination {
    fn name(&self) -> &str {
        &self.settings.name
    }

    fn kind(&self) -> DestinationType {
        DestinationType::Rabbitmq
    }

    async fn publish(&self, message: &OutgoingMessage) -> Outcome {
        self.publish_with(message, &self.default_key).await
    }

    /// None: operations.md OPS-18 lists readiness components for sources only; a destination
    /// that cannot reach its broker shows in failed deliveries and their metrics.
    fn readiness(&self) -> Vec<ReadinessComponent> {
        Vec::new()
    }

    async fn close(&self) {
        let channels = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        for pooled in channels {
            let _ = pooled
                .channel
                .close(200, ShortString::from("shutdown"))
                .await;
        }
        if let Some(connection) = self.connection.lock().await.take() {
            let _ = connection.close(200, ShortString::from("shutdown")).await;
        }
    }
}

/// A `rabbitmq` destination behind one route, with that route's routing key rule (DST-21).
/// It shares the destination's connection and channels.
pub struct RoutedRabbitmq {
    inner: Arc<RabbitmqDestination>,
    key: KeyRule,
}

#[async_trait::async_trait]
impl Destination for RoutedRabbitmq {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn kind(&self) -> DestinationType {
        DestinationType::Rabbitmq
    }

    async fn publish(&self, message: &OutgoingMessage) -> Outcome {
        self.inner.publish_with(message, &self.key).await
    }

    fn readiness(&self) -> Vec<ReadinessComponent> {
        Vec::new()
    }

    /// The destination itself is closed once, from the list of destinations.
    async fn close(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::template::TemplateFields;
    use uuid::Uuid;

    fn render(text: &str, message: &OutgoingMessage) -> String {
        Template::parse(text, TemplateFields::Destination)
            .unwrap()
            .render("?", |field| field_value(message, field))
    }

    /// TRF-33: each name renders its row value; `key` and `aggregateType` are missing when NULL
    /// or empty; `payload.…` and `data.…` read the stored payload, never a transform's output
    /// (TRF-8).
    #[test]
    fn trf_33_each_name_renders_its_row_value_and_payload_reads_the_stored_row() {
        let mut message = OutgoingMessage {
            id: Uuid::nil(),
            topic: "order.created".into(),
            key: Some("o-1".into()),
            aggregate_type: Some("order".into()),
            attempt: 0,
            headers: vec![],
            payload: r#"{"region":"us"}"#.into(),
            stored_payload: Some(r#"{"region":"eu","n":{"x":1}}"#.into()),
        };
        assert_eq!(
            render(
                "{{topic}}/{{ key }}/{{ aggregateType }}/{{ payload.region }}/{{ data.n }}",
                &message
            ),
            r#"order.created/o-1/order/eu/{"x":1}"#
        );
        message.key = Some(String::new());
        message.aggregate_type = None;
        assert_eq!(
            render("{{ key }}|{{ aggregateType }}", &message),
            "?|?",
            "an empty key and a NULL aggregate type are missing"
        );
        message.stored_payload = None;
        assert_eq!(
            render("{{ payload.region }}", &message),
            "us",
            "without a transform the payload is the stored one"
        );
    }
}
