//! The Kafka source (inbox.md §10.5): one consumer in group `groupId` subscribed to `topics`,
//! with no automatic commit (INB-64). Each poll (a 500 ms wait, at most `maxPollRecords`
//! records) is submitted to the intake in offset order per partition, so the intake may write a
//! run of records in one insert (INB-65); then the offset rule INB-66 is applied record by
//! record: the unbroken run of accepted records of each partition is committed synchronously,
//! a partition whose record was not accepted is sought back to that record, and the next poll
//! waits 1 s. Partitions are committed before they are revoked.
//!
//! When librdkafka reports that every broker is lost, the source replaces its consumer: a
//! broker that comes back without the topics the old consumer was fetching crashes
//! librdkafka 2.12.1 (see [`Poller::replace_consumer`]), and a fresh consumer starts from the
//! cluster's new metadata and the group's committed offsets.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt as _;
use queuebox_config::{AutoOffsetReset, KafkaSecurity, SourceKind};
use queuebox_core::intake::{IntakeOutcome, Receipt};
use queuebox_core::source::{SOURCE_STOP_GRACE, SourceError};
use queuebox_core::{ComponentDown, Intake, ReadinessComponent, Source, SourceName};
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::OwnedMessage;
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use crate::client::{Context, base_config, error_text};
use crate::convert::received_message;

/// INB-64: the wait of one poll.
pub const POLL_WAIT: Duration = Duration::from_millis(500);
/// INB-66 rule 5: the wait after a seek-back.
pub const SEEK_BACK_PAUSE: Duration = Duration::from_secs(1);
/// How long `prepare` waits for the cluster's metadata before leaving the source to keep
/// trying in the background (INB-74).
const PREPARE_WAIT: Duration = Duration::from_secs(5);
/// The bound of one synchronous commit or seek.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The group session: a consumer that stopped heartbeating (a killed replica) leaves the group
/// after this, and its partitions go to the others. Kafka's own default (45 s) would leave the
/// partitions of a killed replica unread for that long.
const SESSION_TIMEOUT_MS: &str = "10000";
const HEARTBEAT_INTERVAL_MS: &str = "1000";

/// One `kafka` source, from configuration (CFG-76).
#[derive(Clone, Debug)]
pub struct KafkaSourceSettings {
    pub name: String,
    pub bootstrap_servers: Vec<String>,
    pub topics: Vec<String>,
    pub group_id: String,
    pub auto_offset_reset: AutoOffsetReset,
    pub max_poll_records: usize,
    pub security: KafkaSecurity,
}

impl KafkaSourceSettings {
    /// `None` when `source` is not of type `kafka`.
    pub fn from_config(source: &queuebox_config::Source) -> Option<Self> {
        let SourceKind::Kafka(kafka) = &source.kind else {
            return None;
        };
        Some(Self {
            name: source.name.clone(),
            bootstrap_servers: kafka.bootstrap_servers.clone(),
            topics: kafka.topics.clone(),
            group_id: kafka.group_id.clone(),
            auto_offset_reset: kafka.auto_offset_reset,
            max_poll_records: kafka.max_poll_records.max(1) as usize,
            security: kafka.security.clone(),
        })
    }

    /// The librdkafka settings of the consumer (INB-64, INB-68).
    pub fn consumer_config(&self) -> rdkafka::ClientConfig {
        let mut config = base_config(&self.bootstrap_servers, &self.security);
        config
            .set("group.id", &self.group_id)
            .set("client.id", format!("queuebox-source-{}", self.name))
            // INB-64: the client never commits, nor moves the stored offsets, on its own.
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set(
                "auto.offset.reset",
                match self.auto_offset_reset {
                    AutoOffsetReset::Earliest => "earliest",
                    AutoOffsetReset::Latest => "latest",
                },
            )
            .set("enable.partition.eof", "false")
            .set("session.timeout.ms", SESSION_TIMEOUT_MS)
            .set("heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS)
            .set("topic.metadata.refresh.interval.ms", METADATA_REFRESH_MS);
        config
    }
}

/// A topic and partition.
type Partition = (String, i32);

/// How often the consumer asks for the cluster's metadata: a subscribed topic that is created
/// later (or again, on a broker that came back empty) is read within this time. librdkafka's
/// default is 5 minutes.
const METADATA_REFRESH_MS: &str = "10000";

/// The client context of a source: the shared one, plus the rebalance hook of INB-66 rule 7
/// and the watch for a lost cluster.
struct SourceContext {
    base: Context,
    shared: Arc<Shared>,
}

/// What one consumer's poll loop and its callbacks share. A replaced consumer takes a new
/// one, so the revocation of the old consumer never commits for the new one.
#[derive(Default)]
struct Shared {
    /// Accepted positions not yet committed (offset + 1 of the last accepted record). The poll
    /// loop commits them after each poll; a revocation commits what is left first.
    uncommitted: Mutex<BTreeMap<Partition, i64>>,
}

impl ClientContext for SourceContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, facility: &str, message: &str) {
        self.base.log(level, facility, message);
    }

    fn stats_raw(&self, statistics: &[u8]) {
        self.base.stats_raw(statistics);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.base.error(error, reason);
    }
}

impl ConsumerContext for SourceContext {
    /// INB-66 rule 7: the poll loop finishes the records of a poll (their outcomes and the
    /// commit) before it polls again, and librdkafka calls this only from a poll; so by now
    /// no record is in progress, and the positions still uncommitted of the revoked partitions
    /// are committed here, before they go.
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(revoked) = rebalance else {
            return;
        };
        let mut list = TopicPartitionList::new();
        {
            let mut uncommitted = self
                .shared
                .uncommitted
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for element in revoked.elements() {
                let key = (element.topic().to_owned(), element.partition());
                if let Some(position) = uncommitted.remove(&key) {
                    let _ = list.add_partition_offset(&key.0, key.1, Offset::Offset(position));
                }
            }
        }
        if list.count() > 0
            && let Err(err) = consumer.commit(&list, CommitMode::Sync)
        {
            tracing::warn!(
                source = %self.base.owner,
                "Kafka source: the commit before a revocation failed ({}); the records are read again and the inbox drops them as duplicates",
                error_text(&err)
            );
        }
        tracing::info!(
            source = %self.base.owner,
            partitions = revoked.count(),
            "Kafka source: partitions revoked"
        );
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(assigned) = rebalance {
            tracing::info!(
                source = %self.base.owner,
                partitions = assigned.count(),
                "Kafka source: partitions assigned"
            );
        }
    }
}

/// A Kafka source, built from its configuration by the binary's wiring.
pub struct KafkaSource {
    name: SourceName,
    settings: KafkaSourceSettings,
    /// The subscription was made (INB-69).
    subscribed: Arc<AtomicBool>,
    /// A broker of the cluster is connected, as the current consumer last saw (INB-69).
    broker_up: Arc<AtomicBool>,
    client: Option<Client>,
}

/// One consumer and what its callbacks share with the poll loop.
struct Client {
    consumer: Arc<StreamConsumer<SourceContext>>,
    shared: Arc<Shared>,
}

impl KafkaSource {
    pub fn new(settings: KafkaSourceSettings) -> Self {
        Self {
            name: SourceName::new(&settings.name),
            settings,
            subscribed: Arc::new(AtomicBool::new(false)),
            broker_up: Arc::new(AtomicBool::new(false)),
            client: None,
        }
    }

    /// The consumer, created and subscribed on first use.
    fn client(&mut self) -> Result<(Arc<StreamConsumer<SourceContext>>, Arc<Shared>), SourceError> {
        if self.client.is_none() {
            let client =
                subscribe(&self.settings, &self.name, &self.broker_up).map_err(|reason| {
                    SourceError {
                        source_name: self.name.clone(),
                        reason,
                    }
                })?;
            self.subscribed.store(true, Ordering::SeqCst);
            self.client = Some(client);
        }
        let client = self.client.as_ref().expect("created above");
        Ok((Arc::clone(&client.consumer), Arc::clone(&client.shared)))
    }
}

/// Creates a consumer and subscribes (no network yet: librdkafka connects in the background
/// and keeps reconnecting, INB-74).
fn subscribe(
    settings: &KafkaSourceSettings,
    name: &SourceName,
    broker_up: &Arc<AtomicBool>,
) -> Result<Client, String> {
    let mut base = Context::new(format!("source {name}"));
    base.broker_up = Arc::clone(broker_up);
    let shared = Arc::new(Shared::default());
    let context = SourceContext {
        base,
        shared: Arc::clone(&shared),
    };
    let consumer: StreamConsumer<SourceContext> = settings
        .consumer_config()
        .create_with_context(context)
        .map_err(|err| format!("the Kafka consumer cannot be created: {}", error_text(&err)))?;
    let topics: Vec<&str> = settings.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics).map_err(|err| {
        format!(
            "cannot subscribe to {}: {}",
            settings.topics.join(", "),
            error_text(&err)
        )
    })?;
    tracing::info!(
        source = name.as_str(),
        group = settings.group_id.as_str(),
        "Kafka source subscribed to {} on {}",
        settings.topics.join(", "),
        settings.bootstrap_servers.join(",")
    );
    Ok(Client {
        consumer: Arc::new(consumer),
        shared,
    })
}

/// Runs a blocking librdkafka call (a synchronous commit, a seek, a metadata request) without
/// stalling the other tasks of a multi-threaded runtime.
fn blocking<T>(call: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(call),
        _ => call(),
    }
}

#[async_trait::async_trait]
impl Source for KafkaSource {
    fn name(&self) -> &SourceName {
        &self.name
    }

    /// `kafka.<source>` (INB-69): up while the consumer is subscribed and connected to a broker
    /// of the cluster.
    fn readiness(&self) -> Vec<ReadinessComponent> {
        let subscribed = Arc::clone(&self.subscribed);
        let broker_up = Arc::clone(&self.broker_up);
        vec![ReadinessComponent::flag(
            format!("kafka.{}", self.name),
            ComponentDown::Failed,
            move || subscribed.load(Ordering::SeqCst) && broker_up.load(Ordering::SeqCst),
        )]
    }

    /// INB-74: a consumer that cannot be created (a setting librdkafka refuses) stops the start;
    /// a cluster that cannot be reached does not (the source keeps trying in `run`).
    async fn prepare(&mut self) -> Result<(), SourceError> {
        let (consumer, _) = self.client()?;
        let reached = blocking(|| consumer.fetch_metadata(None, PREPARE_WAIT));
        match reached {
            Ok(_) => consumer.context().base.mark_up(),
            Err(err) => tracing::warn!(
                source = self.name.as_str(),
                "Kafka source cannot reach {} yet ({}); it keeps trying in the background",
                self.settings.bootstrap_servers.join(","),
                error_text(&err)
            ),
        }
        Ok(())
    }

    async fn run(
        mut self: Box<Self>,
        intake: Arc<dyn Intake>,
        stop: CancellationToken,
    ) -> Result<(), SourceError> {
        let (consumer, shared) = self.client()?;
        self.client = None;
        let mut poller = Poller {
            name: self.name.clone(),
            settings: self.settings.clone(),
            consumer,
            shared,
            broker_up: Arc::clone(&self.broker_up),
            max_poll_records: self.settings.max_poll_records,
            blocked: HashMap::new(),
            failures: 0,
        };
        poller.run(&*intake, &stop).await;
        // INB-75: every accepted position is committed after its poll; what a failed commit
        // left is committed once more, then the consumer leaves the group and closes.
        poller.commit_uncommitted();
        self.subscribed.store(false, Ordering::SeqCst);
        let consumer = Arc::clone(&poller.consumer);
        drop(poller);
        // Closing the consumer leaves the group, which waits for the broker: off the runtime.
        let _ = tokio::task::spawn_blocking(move || {
            consumer.unsubscribe();
            drop(consumer);
        })
        .await;
        Ok(())
    }
}

/// One record of a poll: where it is, and what the intake receives.
struct Polled {
    partition: Partition,
    offset: i64,
    record: OwnedMessage,
}

/// The poll loop of one source.
struct Poller {
    name: SourceName,
    settings: KafkaSourceSettings,
    consumer: Arc<StreamConsumer<SourceContext>>,
    shared: Arc<Shared>,
    broker_up: Arc<AtomicBool>,
    max_poll_records: usize,
    /// Partitions whose seek-back failed: the record at this offset must be read again before
    /// any later record of the partition is taken (INB-66 rule 3 holds even then).
    blocked: HashMap<Partition, i64>,
    /// Poll errors in a row, so a long outage logs one warning, not one per poll.
    failures: u32,
}

impl Poller {
    async fn run(&mut self, intake: &dyn Intake, stop: &CancellationToken) {
        while !stop.is_cancelled() {
            let records = tokio::select! {
                () = stop.cancelled() => return,
                records = self.poll() => records,
            };
            if records.is_empty() {
                continue;
            }
            let sought_back = self.handle(records, intake, stop).await;
            if sought_back {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(SEEK_BACK_PAUSE) => {}
                }
            }
        }
    }

    /// INB-64: one poll, a 500 ms wait for the first record, then what is already fetched, up
    /// to `maxPollRecords`.
    async fn poll(&mut self) -> Vec<Polled> {
        if self.consumer.context().base.lost() {
            self.replace_consumer();
        }
        self.retry_blocked_seeks();
        let mut records: Vec<OwnedMessage> = Vec::new();
        let first = tokio::time::timeout(POLL_WAIT, self.consumer.recv()).await;
        match first {
            Err(_) => return Vec::new(),
            Ok(Err(err)) => {
                self.poll_failed(&err);
                return Vec::new();
            }
            Ok(Ok(message)) => records.push(message.detach()),
        }
        while records.len() < self.max_poll_records {
            match self.consumer.recv().now_or_never() {
                Some(Ok(message)) => records.push(message.detach()),
                Some(Err(err)) => {
                    self.poll_failed(&err);
                    break;
                }
                None => break,
            }
        }
        self.failures = 0;
        // A record arrived, so a broker answers.
        self.consumer.context().base.mark_up();
        records
            .into_iter()
            .filter_map(|record| {
                let partition = (record.topic().to_owned(), record.partition());
                let offset = record.offset();
                // A partition whose seek-back did not happen yet takes nothing past the record
                // that was not accepted.
                if let Some(&from) = self.blocked.get(&partition) {
                    if offset > from {
                        return None;
                    }
                    self.blocked.remove(&partition);
                }
                Some(Polled {
                    partition,
                    offset,
                    record,
                })
            })
            .collect()
    }

    /// Replaces a consumer that lost every broker with a new one in the same group.
    ///
    /// Why: librdkafka 2.12.1 dereferences a null topic name (SIGSEGV in
    /// `rd_kafka_metadata_cache_find`, called by `rd_kafka_metadata_update_op` on its main
    /// thread) when a Fetch response carries a leader-change tag for a topic it names by an id
    /// of zero, which is what a broker that came back without the topic answers (seen with
    /// tansu 0.6). The old consumer is still fetching the partitions it was assigned; a new one
    /// fetches nothing until it has the returned cluster's metadata and a new assignment. The
    /// old consumer is unsubscribed at once, so it stops fetching, and closed on a thread of its
    /// own, since closing waits for brokers that are down. Nothing is lost: positions not yet
    /// committed are read again by the new member and the inbox drops those duplicates.
    fn replace_consumer(&mut self) {
        let new = match subscribe(&self.settings, &self.name, &self.broker_up) {
            Ok(client) => client,
            Err(reason) => {
                // Creating a consumer with settings that worked before does not fail; if it
                // does, the old one stays and the next poll tries again.
                tracing::warn!(
                    source = self.name.as_str(),
                    "Kafka source: a new consumer cannot be created ({reason}); the old one stays"
                );
                return;
            }
        };
        tracing::warn!(
            source = self.name.as_str(),
            "Kafka source lost every broker; it replaces its consumer, so a broker that comes back without its topics or offsets is read with fresh metadata (records not committed are read again and dropped as duplicates)"
        );
        let old = std::mem::replace(&mut self.consumer, new.consumer);
        self.shared = new.shared;
        self.blocked.clear();
        std::thread::Builder::new()
            .name("kafka-close".into())
            .spawn(move || {
                old.unsubscribe();
                drop(old);
            })
            .map(drop)
            .unwrap_or_else(|err| {
                tracing::warn!("the old Kafka consumer cannot be closed on a thread: {err}")
            });
    }

    fn poll_failed(&mut self, err: &KafkaError) {
        self.failures += 1;
        if self.failures == 1 {
            tracing::warn!(
                source = self.name.as_str(),
                "Kafka source: a poll failed ({}); the source keeps trying",
                error_text(err)
            );
        } else {
            tracing::debug!(
                source = self.name.as_str(),
                "Kafka source: a poll failed again ({})",
                error_text(err)
            );
        }
    }

    /// Submits the poll's records in order, then applies INB-66 to their outcomes; true when a
    /// partition was sought back.
    async fn handle(
        &mut self,
        records: Vec<Polled>,
        intake: &dyn Intake,
        stop: &CancellationToken,
    ) -> bool {
        // One group: the poll's records are stored in one insert (INB-65), not split wherever
        // the writer happens to wake between two submissions.
        let messages = records
            .iter()
            .map(|polled| (received_message(&self.name, &polled.record), ()))
            .collect();
        let receipts: Vec<(Partition, i64, Receipt<()>)> = records
            .into_iter()
            .zip(intake.submit_all(messages).await)
            .map(|(polled, receipt)| (polled.partition, polled.offset, receipt))
            .collect();
        // After a stop, the records in progress finish for at most the grace (INB-75).
        let grace = async {
            stop.cancelled().await;
            tokio::time::sleep(SOURCE_STOP_GRACE).await;
        };
        tokio::pin!(grace);
        let mut moved: BTreeMap<Partition, i64> = BTreeMap::new();
        let mut broken: BTreeMap<Partition, i64> = BTreeMap::new();
        for (partition, offset, receipt) in receipts {
            let settled = tokio::select! {
                settled = receipt => settled,
                () = &mut grace => {
                    tracing::warn!(
                        source = self.name.as_str(),
                        "Kafka source: records still in progress after {}s stay uncommitted; they are read again",
                        SOURCE_STOP_GRACE.as_secs()
                    );
                    break;
                }
            };
            // INB-66 rule 3: nothing after the first record not accepted counts in this poll.
            if broken.contains_key(&partition) {
                continue;
            }
            if settled.outcome.is_settled() {
                // Rules 1 and 2.
                moved.insert(partition, offset + 1);
            } else {
                if !matches!(settled.outcome, IntakeOutcome::ShuttingDown) {
                    tracing::debug!(
                        source = self.name.as_str(),
                        topic = partition.0.as_str(),
                        partition = partition.1,
                        offset,
                        "Kafka source: a record was not stored; its partition is read again from it"
                    );
                }
                broken.insert(partition, offset);
            }
        }
        {
            let mut uncommitted = self
                .shared
                .uncommitted
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            uncommitted.extend(moved);
        }
        // Rule 4: one synchronous commit of every partition that moved.
        self.commit_uncommitted();
        if stop.is_cancelled() {
            // The consumer closes next; the uncommitted records are read again by the next
            // member of the group.
            return false;
        }
        // Rule 3: the partitions with a record not accepted are read again from it.
        for (partition, offset) in &broken {
            self.seek(partition, *offset);
        }
        !broken.is_empty()
    }

    /// Commits every accepted position not yet committed (INB-66 rule 4; a failure is a
    /// warning, rule 6).
    fn commit_uncommitted(&self) {
        let positions = std::mem::take(
            &mut *self
                .shared
                .uncommitted
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        if positions.is_empty() {
            return;
        }
        let mut list = TopicPartitionList::new();
        for ((topic, partition), position) in &positions {
            let _ = list.add_partition_offset(topic, *partition, Offset::Offset(*position));
        }
        match blocking(|| self.consumer.commit(&list, CommitMode::Sync)) {
            Ok(()) => self.consumer.context().base.mark_up(),
            Err(err) => tracing::warn!(
                source = self.name.as_str(),
                "Kafka source: a commit failed ({}); the records are read again and the inbox drops them as duplicates",
                error_text(&err)
            ),
        }
    }

    /// INB-66 rule 3: the partition is read again from `offset`. A seek that fails (the
    /// partition is being reassigned) blocks the partition's later records until it worked.
    fn seek(&mut self, partition: &Partition, offset: i64) {
        let sought = blocking(|| {
            self.consumer.seek(
                &partition.0,
                partition.1,
                Offset::Offset(offset),
                CALL_TIMEOUT,
            )
        });
        match sought {
            Ok(()) => {
                self.blocked.remove(partition);
            }
            Err(err) => {
                tracing::debug!(
                    source = self.name.as_str(),
                    topic = partition.0.as_str(),
                    partition = partition.1,
                    offset,
                    "Kafka source: the seek-back failed ({}); trying again",
                    error_text(&err)
                );
                self.blocked.insert(partition.clone(), offset);
            }
        }
    }

    fn retry_blocked_seeks(&mut self) {
        if self.blocked.is_empty() {
            return;
        }
        let assigned = self.consumer.assignment().ok();
        let blocked: Vec<(Partition, i64)> = self.blocked.drain().collect();
        for (partition, offset) in blocked {
            // A partition that went to another member is read by it from the committed
            // position: nothing to seek here.
            let still_ours = assigned
                .as_ref()
                .is_some_and(|list| list.find_partition(&partition.0, partition.1).is_some());
            if still_ours {
                self.seek(&partition, offset);
            }
        }
    }
}
