//! The `rabbitmq` source (inbox.md §10.4, §10.7): one connection per source, reconnecting every
//! 5 seconds after a loss (INB-63); one channel that consumes `queueName` with manual
//! acknowledgement and a prefetch of `prefetchCount` (INB-60). The consuming loop is the one
//! owner of the channel's acknowledgements (INB-62): it submits each delivery to the intake and
//! acknowledges from the receipt, which resolves after the commit (INB-54). The receipts that
//! resolved together are acknowledged together (`ack.rs`).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions,
    QueueDeclareOptions,
};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{FieldTable, ShortString};
use lapin::{Channel, Connection, ErrorKind};
use queuebox_config::{Source as SourceConfig, SourceKind};
use queuebox_core::intake::{IntakeOutcome, ProtocolAttributes, Settled};
use queuebox_core::source::{SOURCE_STOP_GRACE, SourceError};
use queuebox_core::{
    ComponentDown, Intake, ReadinessComponent, ReceivedMessage, Secret, Source, SourceName,
};
use tokio_util::sync::CancellationToken;

use crate::ack::{AckFrame, AckLedger};
use crate::connect::{connect, error_text};
use crate::headers::received;

/// The wait between two connection attempts (INB-63, INB-74).
pub const RECONNECT_INTERVAL: Duration = Duration::from_secs(5);

/// The pause before a message whose storing failed is handed back to the broker: the broker
/// redelivers a requeued message at once, so without it a database outage would turn into a
/// busy loop of deliveries.
pub const NACK_DELAY: Duration = Duration::from_secs(1);

/// One `rabbitmq` source, from configuration.
#[derive(Clone, Debug)]
pub struct RabbitmqSourceSettings {
    pub name: SourceName,
    pub url: Secret,
    /// `url` with its password as `***` (CFG-23), for log lines.
    pub masked_url: String,
    pub queue: String,
    pub prefetch_count: u16,
    pub declare_queue: bool,
}

impl RabbitmqSourceSettings {
    /// `None` when `source` is not of type `rabbitmq`.
    pub fn from_config(source: &SourceConfig) -> Option<Self> {
        let SourceKind::Rabbitmq(rabbitmq) = &source.kind else {
            return None;
        };
        Some(Self {
            name: SourceName::new(source.name.clone()),
            url: rabbitmq.connection_url.clone(),
            masked_url: rabbitmq.masked_url.clone(),
            queue: rabbitmq.queue_name.clone(),
            prefetch_count: rabbitmq.prefetch_count,
            declare_queue: rabbitmq.declare_queue,
        })
    }
}

/// A `rabbitmq` source.
pub struct RabbitmqSource {
    settings: RabbitmqSourceSettings,
    /// Connected, with the consumer registered: the readiness component (OPS-18).
    up: Arc<AtomicBool>,
    /// The connection `prepare` opened, handed to `run`.
    prepared: Option<Connection>,
}

/// Why a consuming session ended.
enum Ended {
    Stopped,
    /// The connection or the channel is gone, or the queue is not usable; `reason` is redacted.
    Lost(String),
}

/// What is wrong with the queue (INB-61), or with the way to it.
enum QueueProblem {
    /// The broker says the queue is missing or declared otherwise; the text has the remedy.
    Refused(String),
    Lost(String),
}

type InFlight = Pin<Box<dyn Future<Output = Settled<u64>> + Send>>;

impl RabbitmqSource {
    pub fn new(settings: RabbitmqSourceSettings) -> Self {
        Self {
            settings,
            up: Arc::new(AtomicBool::new(false)),
            prepared: None,
        }
    }

    fn error(&self, reason: String) -> SourceError {
        SourceError {
            source_name: self.settings.name.clone(),
            reason,
        }
    }

    /// INB-61: with `declareQueue: false`, a passive declaration that only asks whether the
    /// queue exists; with `true`, the declaration QueueBox owns (durable, non-exclusive, not
    /// auto-delete, no arguments). A refused declaration closes the channel.
    async fn check_queue(&self, channel: &Channel) -> Result<(), QueueProblem> {
        let queue = &self.settings.queue;
        let options = QueueDeclareOptions {
            passive: !self.settings.declare_queue,
            durable: true,
            exclusive: false,
            auto_delete: false,
            nowait: false,
        };
        let declared = channel
            .queue_declare(
                ShortString::from(queue.as_str()),
                options,
                FieldTable::default(),
            )
            .await;
        let Err(err) = declared else {
            return Ok(());
        };
        let refused = match err.kind() {
            ErrorKind::ProtocolError(amqp) => match amqp.kind() {
                AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND) => Some(format!(
                    "RabbitMQ has no queue '{queue}'. Create the queue, or set declareQueue: true"
                )),
                AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED) => Some(format!(
                    "the queue '{queue}' exists with other arguments than QueueBox declares (durable, non-exclusive, not auto-delete, no arguments): {}. Delete it or declare it yourself and set declareQueue: false",
                    amqp.get_message()
                )),
                AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED) => Some(format!(
                    "RabbitMQ refused access to the queue '{queue}': {}",
                    amqp.get_message()
                )),
                _ => None,
            },
            _ => None,
        };
        Err(match refused {
            Some(text) => QueueProblem::Refused(text),
            None => QueueProblem::Lost(error_text(&err)),
        })
    }

    /// A connection, from `prepare` or new; `Err` when the broker cannot be reached.
    async fn connection(&mut self) -> Result<Connection, String> {
        if let Some(connection) = self.prepared.take()
            && connection.status().connected()
        {
            return Ok(connection);
        }
        connect(&self.settings.url, self.settings.name.as_str()).await
    }

    /// One session on one connection: consume until `stop` or a loss.
    async fn consume(
        &self,
        connection: &Connection,
        intake: &Arc<dyn Intake>,
        stop: &CancellationToken,
    ) -> Ended {
        let lost = |err: lapin::Error| Ended::Lost(error_text(&err));
        let channel = match connection.create_channel().await {
            Ok(channel) => channel,
            Err(err) => return lost(err),
        };
        match self.check_queue(&channel).await {
            Ok(()) => {}
            Err(QueueProblem::Refused(text) | QueueProblem::Lost(text)) => {
                return Ended::Lost(text);
            }
        }
        if let Err(err) = channel
            .basic_qos(
                self.settings.prefetch_count,
                BasicQosOptions { global: false },
            )
            .await
        {
            return lost(err);
        }
        let tag = format!("queuebox-{}-{}", self.settings.name, uuid::Uuid::new_v4());
        let mut consumer = match channel
            .basic_consume(
                ShortString::from(self.settings.queue.as_str()),
                ShortString::from(tag.as_str()),
                BasicConsumeOptions {
                    no_local: false,
                    no_ack: false,
                    exclusive: false,
                    nowait: false,
                },
                FieldTable::default(),
            )
            .await
        {
            Ok(consumer) => consumer,
            Err(err) => return lost(err),
        };
        self.up.store(true, Ordering::SeqCst);
        tracing::info!(
            source = %self.settings.name,
            queue = %self.settings.queue,
            url = %self.settings.masked_url,
            "consuming from RabbitMQ"
        );
        let mut in_flight: FuturesUnordered<InFlight> = FuturesUnordered::new();
        let mut ledger = AckLedger::default();
        let ended = loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => break Ended::Stopped,
                Some(settled) = in_flight.next() => {
                    if let Err(err) = self.acknowledge(&channel, &mut ledger, settled, &mut in_flight).await {
                        break lost(err);
                    }
                }
                delivery = consumer.next() => match delivery {
                    Some(Ok(delivery)) => {
                        let (message, tag) = self.received(delivery);
                        ledger.delivered(tag);
                        let receipt = intake.submit(message, tag).await;
                        in_flight.push(Box::pin(async move {
                            let settled = receipt.await;
                            if matches!(settled.outcome, IntakeOutcome::StorageFailed { .. }) {
                                tokio::time::sleep(NACK_DELAY).await;
                            }
                            settled
                        }));
                    }
                    Some(Err(err)) => break lost(err),
                    None => break Ended::Lost("the broker cancelled the consumer".to_owned()),
                },
            }
        };
        self.up.store(false, Ordering::SeqCst);
        match ended {
            Ended::Stopped => {
                self.stop_session(&channel, &tag, ledger, in_flight).await;
                Ended::Stopped
            }
            Ended::Lost(reason) => {
                // INB-62: these acknowledgements have no channel left; the broker redelivers
                // the messages and the inbox drops the repeats as duplicates.
                if !in_flight.is_empty() {
                    tracing::warn!(
                        source = %self.settings.name,
                        dropped = in_flight.len(),
                        "acknowledgements dropped: the channel closed; RabbitMQ delivers these messages again"
                    );
                }
                Ended::Lost(reason)
            }
        }
    }

    /// INB-75: stop receiving, finish what is in progress with its acknowledgements within the
    /// grace, then close. What is left unacknowledged is delivered again later.
    async fn stop_session(
        &self,
        channel: &Channel,
        tag: &str,
        mut ledger: AckLedger,
        mut in_flight: FuturesUnordered<InFlight>,
    ) {
        if let Err(err) = channel
            .basic_cancel(ShortString::from(tag), BasicCancelOptions { nowait: false })
            .await
        {
            tracing::warn!(source = %self.settings.name, "stopping the consumer failed: {}", error_text(&err));
        }
        let deadline = tokio::time::Instant::now() + SOURCE_STOP_GRACE;
        while !in_flight.is_empty() {
            match tokio::time::timeout_at(deadline, in_flight.next()).await {
                Ok(Some(settled)) => {
                    if let Err(err) = self
                        .acknowledge(channel, &mut ledger, settled, &mut in_flight)
                        .await
                    {
                        tracing::warn!(source = %self.settings.name, "acknowledging at shutdown failed: {}", error_text(&err));
                        break;
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    tracing::warn!(
                        source = %self.settings.name,
                        unfinished = in_flight.len(),
                        "messages not finished within the shutdown grace stay unacknowledged; RabbitMQ delivers them again"
                    );
                    break;
                }
            }
        }
        let _ = channel.close(200, ShortString::from("shutdown")).await;
    }

    /// INB-54: `basic.ack` for a durable outcome, `basic.nack` with requeue otherwise.
    /// Settles `first` and every other receipt already resolved (they were usually committed
    /// by the same insert), hands back at once the deliveries whose storing failed, then
    /// acknowledges the committed ones in as few frames as the ledger allows.
    async fn acknowledge(
        &self,
        channel: &Channel,
        ledger: &mut AckLedger,
        first: Settled<u64>,
        in_flight: &mut FuturesUnordered<InFlight>,
    ) -> Result<(), lapin::Error> {
        let mut next = Some(first);
        while let Some(settled) = next {
            if settled.outcome.is_settled() {
                ledger.settled(settled.ack, true);
            } else {
                if let IntakeOutcome::StorageFailed { reason } = &settled.outcome {
                    tracing::warn!(
                        source = %self.settings.name,
                        "storing a message failed; it goes back to the queue: {reason}"
                    );
                }
                ledger.settled(settled.ack, false);
                channel
                    .basic_nack(
                        settled.ack,
                        BasicNackOptions {
                            multiple: false,
                            requeue: true,
                        },
                    )
                    .await?;
            }
            next = in_flight.next().now_or_never().flatten();
        }
        for frame in ledger.take_frames() {
            let (tag, multiple) = match frame {
                AckFrame::One(tag) => (tag, false),
                AckFrame::UpTo(tag) => (tag, true),
            };
            channel.basic_ack(tag, BasicAckOptions { multiple }).await?;
        }
        Ok(())
    }

    /// A delivery as the intake takes it (INB-25, INB-27, INB-35, INB-42), and its tag.
    fn received(&self, delivery: Delivery) -> (ReceivedMessage, u64) {
        let properties = &delivery.properties;
        let protocol = ProtocolAttributes {
            message_id: properties
                .message_id()
                .as_ref()
                .map(|id| id.as_str().to_owned()),
            correlation_id: properties
                .correlation_id()
                .as_ref()
                .map(|id| id.as_str().to_owned()),
            published_at_ms: properties
                .timestamp()
                .and_then(|seconds| i64::try_from(seconds).ok())
                .and_then(|seconds| seconds.checked_mul(1000)),
        };
        let message = ReceivedMessage {
            source: self.settings.name.clone(),
            headers: received(properties.headers().as_ref()),
            body: delivery.data,
            protocol,
        };
        (message, delivery.delivery_tag)
    }

    /// Waits `RECONNECT_INTERVAL`, or less when `stop` comes first; `false` on stop.
    async fn pause(stop: &CancellationToken) -> bool {
        tokio::select! {
            () = stop.cancelled() => false,
            () = tokio::time::sleep(RECONNECT_INTERVAL) => true,
        }
    }
}

#[async_trait::async_trait]
impl Source for RabbitmqSource {
    fn name(&self) -> &SourceName {
        &self.settings.name
    }

    fn readiness(&self) -> Vec<ReadinessComponent> {
        let up = Arc::clone(&self.up);
        vec![ReadinessComponent::flag(
            format!("rabbitmq.{}", self.settings.name),
            ComponentDown::Failed,
            move || up.load(Ordering::SeqCst),
        )]
    }

    /// INB-74: a broker that cannot be reached is no error (`run` keeps trying); a queue the
    /// broker reports missing or declared otherwise (INB-61) stops the start.
    async fn prepare(&mut self) -> Result<(), SourceError> {
        let connection = match connect(&self.settings.url, self.settings.name.as_str()).await {
            Ok(connection) => connection,
            Err(reason) => {
                tracing::warn!(
                    source = %self.settings.name,
                    url = %self.settings.masked_url,
                    "RabbitMQ cannot be reached; the source retries every 5 s: {reason}"
                );
                return Ok(());
            }
        };
        let checked = match connection.create_channel().await {
            Ok(channel) => {
                let checked = self.check_queue(&channel).await;
                let _ = channel.close(200, ShortString::from("checked")).await;
                checked
            }
            Err(err) => Err(QueueProblem::Lost(error_text(&err))),
        };
        match checked {
            Ok(()) => {
                self.prepared = Some(connection);
                Ok(())
            }
            Err(QueueProblem::Refused(text)) => {
                let _ = connection.close(200, ShortString::from("refused")).await;
                Err(self.error(text))
            }
            Err(QueueProblem::Lost(reason)) => {
                tracing::warn!(source = %self.settings.name, "the RabbitMQ check did not finish; the source retries every 5 s: {reason}");
                Ok(())
            }
        }
    }

    async fn run(
        mut self: Box<Self>,
        intake: Arc<dyn Intake>,
        stop: CancellationToken,
    ) -> Result<(), SourceError> {
        while !stop.is_cancelled() {
            let connection = match self.connection().await {
                Ok(connection) => connection,
                Err(reason) => {
                    tracing::warn!(
                        source = %self.settings.name,
                        url = %self.settings.masked_url,
                        "RabbitMQ cannot be reached; retrying in 5 s: {reason}"
                    );
                    if !Self::pause(&stop).await {
                        break;
                    }
                    continue;
                }
            };
            let ended = self.consume(&connection, &intake, &stop).await;
            let _ = connection.close(200, ShortString::from("closing")).await;
            match ended {
                Ended::Stopped => break,
                Ended::Lost(reason) => {
                    tracing::warn!(
                        source = %self.settings.name,
                        queue = %self.settings.queue,
                        "RabbitMQ consumer stopped; reconnecting in 5 s: {reason}"
                    );
                    if !Self::pause(&stop).await {
                        break;
                    }
                }
            }
        }
        self.up.store(false, Ordering::SeqCst);
        Ok(())
    }
}
