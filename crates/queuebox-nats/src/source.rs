//! The NATS JetStream source (inbox.md §10.6): a durable pull consumer on an existing stream
//! (INB-70, INB-71), fetched `batchSize` at a time with a 1 s wait; each message is submitted
//! to the intake in fetch order and acknowledged, or negatively acknowledged, only after the
//! insert that holds it committed or failed, in the same order (INB-54, INB-72).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_nats::Client;
use async_nats::jetstream::ErrorCode;
use async_nats::jetstream::consumer::pull::Config as PullConfig;
use async_nats::jetstream::consumer::{AckPolicy, PullConsumer};
use async_nats::jetstream::context::{ConsumerInfoErrorKind, GetStreamErrorKind};
use async_nats::jetstream::message::{AckKind, Acker};
use async_nats::jetstream::{self, stream::ConsumerErrorKind};
use futures_util::StreamExt;
use queuebox_config::SourceKind;
use queuebox_core::intake::{IntakeOutcome, Receipt};
use queuebox_core::redact::redacted_error_text;
use queuebox_core::source::{SOURCE_STOP_GRACE, SourceError};
use queuebox_core::{ComponentDown, Intake, ReadinessComponent, Source, SourceName};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::connection::{ConnectionSettings, is_connected, wait_connected};
use crate::convert::received_message;

/// INB-72: the wait of one fetch.
const FETCH_WAIT: Duration = Duration::from_secs(1);
/// How long `prepare` waits for the first connection before leaving the source to keep trying
/// in the background (INB-74).
const PREPARE_WAIT: Duration = Duration::from_secs(5);
/// The pause between two attempts to bind to the stream and consumer after a failure, and after
/// a fetch that failed.
const RETRY_PAUSE: Duration = Duration::from_secs(5);
/// After a storage failure the fetch loop waits this long, so a failing database is not asked
/// again at once for every message JetStream redelivers.
const STORAGE_FAILURE_PAUSE: Duration = Duration::from_secs(1);
/// How much longer than FETCH_WAIT a fetch may take before it counts as lost.
const BATCH_MARGIN: Duration = Duration::from_secs(2);
/// The fewest fetched messages that may wait for their acknowledgement (more when two fetches
/// of `batchSize` hold more). The intake's writer combines what is queued while its previous
/// insert commits, up to 256 rows an insert; with only two fetches of 50 waiting, the fetch
/// loop stopped while an insert committed, so each insert held at most one or two fetches and
/// the rate was one commit per 50 to 100 messages (docs/benchmarks.md, "NATS JetStream").
const IN_FLIGHT_FLOOR: usize = 512;

/// The consumer settings of one source (CFG-77).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerSettings {
    pub stream: String,
    pub durable: String,
    pub filter_subject: Option<String>,
    pub ack_wait: Duration,
    pub batch_size: usize,
}

/// A NATS source, built from its configuration by the binary's wiring.
pub struct NatsSource {
    name: SourceName,
    consumer: ConsumerSettings,
    connection: ConnectionSettings,
    shared: Arc<Shared>,
}

/// What the source's task and its readiness component share.
#[derive(Default)]
struct Shared {
    client: OnceLock<Client>,
    /// The fetch loop is bound to the consumer and its last fetch worked.
    fetching: AtomicBool,
    /// A storage failure was negatively acknowledged; the next fetch waits first.
    storage_failed: AtomicBool,
}

/// Why the source cannot bind to its consumer now.
#[derive(Debug)]
enum BindError {
    /// The stream does not exist (INB-71): reported with its remedy; stops a start.
    MissingStream(String),
    /// The durable exists as a push consumer, which a fetch cannot read; stops a start.
    NotPull(String),
    /// The broker cannot be asked now (not connected, a timeout): the source keeps trying.
    Unavailable(String),
}

impl NatsSource {
    /// # Panics
    /// When `source` is not of type `nats`: a defect of the caller.
    pub fn from_config(source: &queuebox_config::Source) -> Self {
        let SourceKind::Nats(nats) = &source.kind else {
            panic!("NatsSource::from_config needs a nats source")
        };
        Self {
            name: SourceName::new(&source.name),
            consumer: ConsumerSettings {
                stream: nats.stream.clone(),
                durable: nats.durable.clone(),
                filter_subject: nats.filter_subject.clone(),
                ack_wait: Duration::from_millis(nats.ack_wait_ms),
                batch_size: nats.batch_size.max(1) as usize,
            },
            connection: ConnectionSettings {
                servers: nats.servers.clone(),
                credentials: nats.credentials.clone(),
                name: format!("queuebox source {}", source.name),
                connect_timeout: Duration::from_secs(5),
            },
            shared: Arc::new(Shared::default()),
        }
    }

    fn error(&self, reason: String) -> SourceError {
        SourceError {
            source_name: self.name.clone(),
            reason,
        }
    }

    async fn client(&self) -> Result<Client, SourceError> {
        if let Some(client) = self.shared.client.get() {
            return Ok(client.clone());
        }
        let client = self
            .connection
            .connect()
            .await
            .map_err(|err| self.error(err.to_string()))?;
        Ok(self.shared.client.get_or_init(|| client).clone())
    }

    /// INB-71: the stream must exist; the durable pull consumer is used as it is, or created with
    /// explicit acknowledgement, `ackWait` and the filter subject.
    async fn bind(&self, js: &jetstream::Context) -> Result<PullConsumer, BindError> {
        let settings = &self.consumer;
        let stream = js.get_stream(&settings.stream).await.map_err(|err| match err.kind() {
            GetStreamErrorKind::JetStream(js_err)
                if js_err.error_code() == ErrorCode::STREAM_NOT_FOUND =>
            {
                BindError::MissingStream(format!(
                    "the JetStream stream '{}' does not exist. Create the stream; QueueBox never creates it",
                    settings.stream
                ))
            }
            _ => BindError::Unavailable(redacted_error_text(&err)),
        })?;
        match stream.consumer_info(&settings.durable).await {
            Ok(info) => {
                if info.config.deliver_subject.is_some() {
                    return Err(BindError::NotPull(format!(
                        "the consumer '{}' of stream '{}' is a push consumer; QueueBox reads a durable pull consumer. Delete it, or set another durable",
                        settings.durable, settings.stream
                    )));
                }
                let differences = differences(settings, &info.config);
                if !differences.is_empty() {
                    tracing::warn!(
                        source = self.name.as_str(),
                        "the consumer '{}' of stream '{}' exists with other settings than the configuration, and is used as it is: {}",
                        settings.durable,
                        settings.stream,
                        differences.join(", ")
                    );
                }
                stream
                    .get_consumer::<PullConfig>(&settings.durable)
                    .await
                    .map_err(|err| BindError::Unavailable(redacted_error_text(&*err)))
            }
            Err(err) if err.kind() == ConsumerInfoErrorKind::NotFound => {
                let config = PullConfig {
                    durable_name: Some(settings.durable.clone()),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: settings.ack_wait,
                    filter_subject: settings.filter_subject.clone().unwrap_or_default(),
                    ..Default::default()
                };
                let created = stream.create_consumer(config).await.map_err(|err| {
                    match err.kind() {
                        ConsumerErrorKind::JetStream(js_err)
                            if js_err.error_code() == ErrorCode::STREAM_NOT_FOUND =>
                        {
                            BindError::MissingStream(format!(
                                "the JetStream stream '{}' does not exist. Create the stream; QueueBox never creates it",
                                settings.stream
                            ))
                        }
                        _ => BindError::Unavailable(redacted_error_text(&err)),
                    }
                })?;
                tracing::info!(
                    source = self.name.as_str(),
                    "created the durable pull consumer '{}' on stream '{}'",
                    settings.durable,
                    settings.stream
                );
                Ok(created)
            }
            Err(err) if err.kind() == ConsumerInfoErrorKind::StreamNotFound => {
                Err(BindError::MissingStream(format!(
                    "the JetStream stream '{}' does not exist. Create the stream; QueueBox never creates it",
                    settings.stream
                )))
            }
            Err(err) => Err(BindError::Unavailable(redacted_error_text(&err))),
        }
    }

    /// Binds until it works or `stop`; a failure is logged with its remedy and tried again
    /// every 5 s, with readiness down meanwhile (INB-74).
    async fn bind_until_bound(
        &self,
        js: &jetstream::Context,
        stop: &CancellationToken,
    ) -> Option<PullConsumer> {
        loop {
            match self.bind(js).await {
                Ok(consumer) => return Some(consumer),
                Err(err) => {
                    self.shared.fetching.store(false, Ordering::SeqCst);
                    let reason = match err {
                        BindError::MissingStream(reason) | BindError::NotPull(reason) => reason,
                        BindError::Unavailable(reason) => format!(
                            "cannot bind to the consumer on {} yet ({reason}); trying again",
                            self.connection.printable_servers()
                        ),
                    };
                    tracing::warn!(source = self.name.as_str(), "NATS source: {reason}");
                }
            }
            tokio::select! {
                () = stop.cancelled() => return None,
                () = tokio::time::sleep(RETRY_PAUSE) => {}
            }
        }
    }
}

/// INB-71: the settings of an existing consumer that differ from the configuration, named.
fn differences(
    settings: &ConsumerSettings,
    existing: &async_nats::jetstream::consumer::Config,
) -> Vec<String> {
    let mut out = Vec::new();
    if existing.ack_policy != AckPolicy::Explicit {
        out.push(format!(
            "ackPolicy is {:?}, not explicit",
            existing.ack_policy
        ));
    }
    if existing.ack_wait != settings.ack_wait {
        out.push(format!(
            "ackWait is {}ms, ackWaitMs is {}",
            existing.ack_wait.as_millis(),
            settings.ack_wait.as_millis()
        ));
    }
    let configured = settings.filter_subject.as_deref().unwrap_or("");
    if existing.filter_subject != configured {
        let shown = |s: &str| {
            if s.is_empty() {
                "none".to_owned()
            } else {
                format!("'{s}'")
            }
        };
        out.push(format!(
            "filterSubject is {}, the configuration says {}",
            shown(&existing.filter_subject),
            shown(configured)
        ));
    }
    out
}

#[async_trait::async_trait]
impl Source for NatsSource {
    fn name(&self) -> &SourceName {
        &self.name
    }

    /// `nats.<source>`: up while the fetch loop runs, bound to its consumer, on a live
    /// connection (INB-73, OPS-18).
    fn readiness(&self) -> Vec<ReadinessComponent> {
        let shared = Arc::clone(&self.shared);
        vec![ReadinessComponent::flag(
            format!("nats.{}", self.name),
            ComponentDown::Failed,
            move || {
                shared.fetching.load(Ordering::SeqCst)
                    && shared.client.get().is_some_and(is_connected)
            },
        )]
    }

    /// INB-74: an unreachable broker is no error (the source keeps trying while it runs); a
    /// missing stream, or a durable that is a push consumer, stops the start with its remedy.
    async fn prepare(&mut self) -> Result<(), SourceError> {
        let client = self.client().await?;
        if !wait_connected(&client, PREPARE_WAIT).await {
            tracing::warn!(
                source = self.name.as_str(),
                "NATS source cannot reach {} yet; it keeps trying in the background",
                self.connection.printable_servers()
            );
            return Ok(());
        }
        match self.bind(&jetstream::new(client)).await {
            Ok(_) => Ok(()),
            Err(BindError::MissingStream(reason) | BindError::NotPull(reason)) => {
                Err(self.error(reason))
            }
            Err(BindError::Unavailable(reason)) => {
                tracing::warn!(
                    source = self.name.as_str(),
                    "NATS source cannot bind to its consumer yet ({reason}); it keeps trying"
                );
                Ok(())
            }
        }
    }

    async fn run(
        self: Box<Self>,
        intake: Arc<dyn Intake>,
        stop: CancellationToken,
    ) -> Result<(), SourceError> {
        let client = self.client().await?;
        let js = jetstream::new(client.clone());
        // Receipts travel to the acknowledger in fetch order; the bound keeps at most two
        // fetches' worth of messages, or IN_FLIGHT_FLOOR, between the fetch and their
        // acknowledgement.
        let in_flight = (self.consumer.batch_size * 2).max(IN_FLIGHT_FLOOR);
        let (receipts, pending) = mpsc::channel(in_flight);
        let acknowledger = tokio::spawn(acknowledge(
            self.name.clone(),
            pending,
            Arc::clone(&self.shared),
        ));
        self.fetch_until_stopped(&js, &*intake, receipts, &stop)
            .await;
        // INB-75: nothing new is fetched; the messages in progress finish with their
        // acknowledgements for at most the grace, then the connection closes. A message whose
        // outcome is not known by then stays unacknowledged and comes back after ackWait.
        self.shared.fetching.store(false, Ordering::SeqCst);
        let mut acknowledger = acknowledger;
        if tokio::time::timeout(SOURCE_STOP_GRACE, &mut acknowledger)
            .await
            .is_err()
        {
            acknowledger.abort();
            tracing::warn!(
                source = self.name.as_str(),
                "NATS source: messages still in progress after {}s stay unacknowledged; JetStream delivers them again",
                SOURCE_STOP_GRACE.as_secs()
            );
        }
        // The acknowledgements are published on the connection: flush them before it closes.
        let _ = tokio::time::timeout(Duration::from_secs(5), client.flush()).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), client.drain()).await;
        Ok(())
    }
}

impl NatsSource {
    async fn fetch_until_stopped(
        &self,
        js: &jetstream::Context,
        intake: &dyn Intake,
        receipts: mpsc::Sender<Receipt<Acker>>,
        stop: &CancellationToken,
    ) {
        let Some(mut consumer) = self.bind_until_bound(js, stop).await else {
            return;
        };
        let mut failures: u32 = 0;
        while !stop.is_cancelled() {
            if self.shared.storage_failed.swap(false, Ordering::SeqCst) {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(STORAGE_FAILURE_PAUSE) => {}
                }
            }
            if !is_connected(&js.client()) {
                // No pull request while the connection is down: it would only be lost.
                self.shared.fetching.store(false, Ordering::SeqCst);
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
                continue;
            }
            let batch = consumer
                .batch()
                .max_messages(self.consumer.batch_size)
                .expires(FETCH_WAIT)
                .messages()
                .await;
            let mut batch = match batch {
                Ok(batch) => {
                    // The pull request is out on a live connection: the fetch loop runs.
                    self.shared
                        .fetching
                        .store(is_connected(&js.client()), Ordering::SeqCst);
                    batch
                }
                Err(err) => {
                    self.fetch_failed(&mut failures, &redacted_error_text(&err));
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(FETCH_WAIT) => {}
                    }
                    continue;
                }
            };
            let mut broken = None;
            // The batch ends by itself after FETCH_WAIT; a batch that outlives its deadline
            // lost its pull request (the connection dropped and came back), so it is left.
            let deadline = tokio::time::Instant::now() + FETCH_WAIT + BATCH_MARGIN;
            loop {
                let next = tokio::select! {
                    () = stop.cancelled() => {
                        release_rest(&self.name, batch).await;
                        return;
                    }
                    next = tokio::time::timeout_at(deadline, batch.next()) => next,
                };
                let message = match next {
                    Err(_elapsed) => {
                        broken = Some("the fetch got no answer in time".to_owned());
                        break;
                    }
                    Ok(None) => break,
                    Ok(Some(Ok(message))) => message,
                    Ok(Some(Err(err))) => {
                        broken = Some(redacted_error_text(&*err));
                        break;
                    }
                };
                self.shared.fetching.store(true, Ordering::SeqCst);
                let published_at_ms = message
                    .info()
                    .ok()
                    .map(|info| (info.published.unix_timestamp_nanos() / 1_000_000) as i64);
                let received = received_message(
                    &self.name,
                    message.headers.as_ref(),
                    &message.payload,
                    published_at_ms,
                );
                let (_, acker) = message.split();
                let receipt = intake.submit(received, acker).await;
                if receipts.send(receipt).await.is_err() {
                    return;
                }
            }
            match broken {
                None => {
                    failures = 0;
                    self.shared
                        .fetching
                        .store(is_connected(&js.client()), Ordering::SeqCst);
                }
                Some(reason) => {
                    self.fetch_failed(&mut failures, &reason);
                    let lower = reason.to_ascii_lowercase();
                    if lower.contains("consumer deleted") || lower.contains("no responders") {
                        // The consumer or the stream went away: bind again (INB-71, INB-74).
                        match self.bind_until_bound(js, stop).await {
                            Some(bound) => consumer = bound,
                            None => return,
                        }
                    } else {
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = tokio::time::sleep(FETCH_WAIT) => {}
                        }
                    }
                }
            }
        }
    }

    /// A failed fetch turns readiness down; the first failure of a run is a warning, repeats
    /// are debug lines, so a long outage does not flood the log.
    fn fetch_failed(&self, failures: &mut u32, reason: &str) {
        self.shared.fetching.store(false, Ordering::SeqCst);
        *failures += 1;
        if *failures == 1 {
            tracing::warn!(
                source = self.name.as_str(),
                "NATS source: a fetch failed ({reason}); the source keeps trying"
            );
        } else {
            tracing::debug!(
                source = self.name.as_str(),
                "NATS source: a fetch failed again ({reason})"
            );
        }
    }
}

/// INB-75 at a stop: the messages the current fetch still brings (it ends within FETCH_WAIT)
/// are negatively acknowledged unread, so JetStream gives them to another consumer at once
/// instead of after `ackWaitMs`.
async fn release_rest(
    source: &SourceName,
    mut batch: async_nats::jetstream::consumer::pull::Batch,
) {
    let deadline = tokio::time::Instant::now() + FETCH_WAIT + BATCH_MARGIN;
    let mut released = 0_usize;
    while let Ok(Some(Ok(message))) = tokio::time::timeout_at(deadline, batch.next()).await {
        if message.ack_with(AckKind::Nak(None)).await.is_ok() {
            released += 1;
        }
    }
    if released > 0 {
        tracing::info!(
            source = source.as_str(),
            "NATS source: {released} fetched message(s) not started before the stop were returned to JetStream"
        );
    }
}

/// Acknowledges each message once its receipt resolves, in fetch order (INB-72): `ack` for a
/// durable outcome, `nak` otherwise, so JetStream redelivers at once (INB-54).
async fn acknowledge(
    source: SourceName,
    mut pending: mpsc::Receiver<Receipt<Acker>>,
    shared: Arc<Shared>,
) {
    while let Some(receipt) = pending.recv().await {
        let settled = receipt.await;
        let answer = if settled.outcome.is_settled() {
            settled.ack.ack().await
        } else {
            if matches!(settled.outcome, IntakeOutcome::StorageFailed { .. }) {
                shared.storage_failed.store(true, Ordering::SeqCst);
            }
            settled.ack.ack_with(AckKind::Nak(None)).await
        };
        if let Err(err) = answer {
            // The broker redelivers an unacknowledged message after ackWait; the inbox drops
            // the repeat as a duplicate.
            tracing::warn!(
                source = source.as_str(),
                "NATS source: an acknowledgement could not be sent ({}); JetStream delivers the message again",
                redacted_error_text(&*err)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inb_71_differences_name_each_setting_that_is_not_the_configuration() {
        let settings = ConsumerSettings {
            stream: "ORDERS".into(),
            durable: "qb".into(),
            filter_subject: Some("orders.>".into()),
            ack_wait: Duration::from_secs(30),
            batch_size: 100,
        };
        let same = async_nats::jetstream::consumer::Config {
            ack_policy: AckPolicy::Explicit,
            ack_wait: Duration::from_secs(30),
            filter_subject: "orders.>".into(),
            ..Default::default()
        };
        assert!(differences(&settings, &same).is_empty());
        let other = async_nats::jetstream::consumer::Config {
            ack_policy: AckPolicy::All,
            ack_wait: Duration::from_secs(5),
            filter_subject: String::new(),
            ..Default::default()
        };
        let found = differences(&settings, &other);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(
            found[1].contains("ackWait is 5000ms, ackWaitMs is 30000"),
            "{found:?}"
        );
        assert!(
            found[2].contains("filterSubject is none, the configuration says 'orders.>'"),
            "{found:?}"
        );
    }
}
