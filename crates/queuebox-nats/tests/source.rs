//! The NATS JetStream source against a real server, fed by the standard client nats-py
//! (inbox.md §10.1, §10.6, §10.7). The intake is scripted so each outcome the engine can give
//! (stored, duplicate, storage failure, shutting down) is chosen by the test; the end-to-end
//! tests of the binary run the engine's own intake on PostgreSQL.

mod support;

use std::sync::Arc;
use std::time::Duration;

use queuebox_core::intake::IntakeOutcome;
use queuebox_core::{Intake, Source};
use queuebox_nats::NatsSource;
use support::intake::{ScriptedIntake, new_row};
use support::{PrivateNats, Publish, TestStream, config, eventually, py, py_publish, shared_url};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

fn source_yaml(url: &str, stream: &TestStream, durable: &str, extra: &str) -> String {
    format!(
        "sources:\n  jobs:\n    type: nats\n    consumption: pull\n    servers: {url}\n    stream: {}\n    durable: {durable}\n{extra}",
        stream.name
    )
}

fn nats_source(yaml: &str) -> NatsSource {
    NatsSource::from_config(&config(yaml).sources["jobs"])
}

fn publish_bodies(stream: &TestStream, tail: &str, bodies: &[String]) {
    let messages: Vec<Publish> = bodies
        .iter()
        .map(|body| Publish {
            subject: stream.subject(tail),
            body: body.clone().into_bytes(),
            headers: vec![],
        })
        .collect();
    py_publish(&stream.url, &messages);
}

struct Running {
    stop: CancellationToken,
    task: JoinHandle<Result<(), queuebox_core::source::SourceError>>,
    ready: queuebox_core::ReadinessComponent,
}

impl Running {
    async fn is_ready(&self) -> bool {
        self.ready.check().await.is_ok()
    }

    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(40), self.task)
            .await
            .expect("the source stops within the grace")
            .unwrap()
            .unwrap();
    }
}

async fn start(mut source: NatsSource, intake: Arc<dyn Intake>) -> Running {
    // The source's log lines show up beside a failing test.
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_max_level(tracing::Level::INFO)
        .try_init();
    source.prepare().await.expect("prepare");
    let ready = source.readiness().remove(0);
    assert_eq!(ready.name(), "nats.jobs", "OPS-18");
    let stop = CancellationToken::new();
    let task = tokio::spawn(Box::new(source).run(intake, stop.clone()));
    Running { stop, task, ready }
}

fn consumer_info(stream: &TestStream, durable: &str) -> serde_json::Value {
    py(&stream.url, &["consumer-info", &stream.name, durable]).remove(0)
}

/// Creates a durable pull consumer on `stream` before QueueBox starts (one that exists already).
async fn create_consumer(
    stream: &TestStream,
    config: async_nats::jetstream::consumer::pull::Config,
) {
    let client = async_nats::connect(shared_url()).await.unwrap();
    async_nats::jetstream::new(client)
        .get_stream(&stream.name)
        .await
        .unwrap()
        .create_consumer(config)
        .await
        .unwrap();
}

fn bodies(n: usize, label: &str) -> Vec<String> {
    (0..n)
        .map(|i| format!(r#"{{"id":"{label}-{i}"}}"#))
        .collect()
}

/// INB-72, INB-54: messages are fetched and submitted in stream order, and every one is
/// acknowledged after its outcome: nothing stays pending or unacknowledged on the consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_72_messages_are_submitted_in_fetch_order_and_each_is_acknowledged() {
    let stream = TestStream::create(&shared_url(), "inb72");
    let sent = bodies(250, "ord");
    publish_bodies(&stream, "a", &sent);
    let intake = ScriptedIntake::storing();
    let running = start(
        nats_source(&source_yaml(
            &shared_url(),
            &stream,
            "qb",
            "    batchSize: 40\n",
        )),
        intake.clone(),
    )
    .await;
    eventually(Duration::from_secs(20), "every message submitted", || {
        intake.count() == sent.len()
    })
    .await;
    assert!(
        running.is_ready().await,
        "INB-73: up while the fetch loop runs"
    );
    running.stop().await;
    assert_eq!(intake.bodies(), sent, "INB-72: fetch order");
    let info = consumer_info(&stream, "qb");
    assert_eq!(info["num_ack_pending"], 0, "{info}");
    assert_eq!(info["num_pending"], 0, "{info}");
    assert_eq!(info["num_redelivered"], 0, "{info}");
}

/// INB-72: the fetch loop runs ahead of the commits. While no outcome is known it goes on
/// fetching until 512 messages wait for their acknowledgement (two fetches of `batchSize`
/// when that is more), so the intake's writer finds whole inserts queued while its previous
/// one commits; then it waits, and every message is acknowledged once its outcome comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_72_fetches_run_ahead_of_the_commits_up_to_512_messages() {
    let stream = TestStream::create(&shared_url(), "inb72ahead");
    let sent = bodies(700, "ahead");
    publish_bodies(&stream, "a", &sent);
    let (intake, gate) = ScriptedIntake::held();
    let running = start(
        nats_source(&source_yaml(
            &shared_url(),
            &stream,
            "qb",
            "    batchSize: 10\n    ackWaitMs: 60000\n",
        )),
        intake.clone(),
    )
    .await;
    eventually(
        Duration::from_secs(20),
        "512 messages fetched with no outcome known",
        || intake.count() >= 512,
    )
    .await;
    // The bound holds: beyond the 512 waiting, at most the message the acknowledger awaits and
    // the one the fetch loop holds.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ahead = intake.count();
    assert!(
        ahead <= 514,
        "{ahead} messages fetched ahead of their outcomes"
    );
    gate.add_permits(sent.len());
    eventually(Duration::from_secs(20), "every message submitted", || {
        intake.count() == sent.len()
    })
    .await;
    running.stop().await;
    assert_eq!(intake.bodies(), sent, "fetch order");
    let info = consumer_info(&stream, "qb");
    assert_eq!(info["num_ack_pending"], 0, "{info}");
    assert_eq!(info["num_redelivered"], 0, "{info}");
}

/// INB-54 (conformance: "NATS: a failed store is redelivered"): a storage failure is
/// negatively acknowledged and JetStream redelivers at once, long before `ackWaitMs`; the
/// second delivery is stored and acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_54_a_storage_failure_is_negatively_acknowledged_and_redelivered_at_once() {
    let stream = TestStream::create(&shared_url(), "inb54nak");
    let intake = ScriptedIntake::new(|message, delivery| {
        if message.body.starts_with(br#"{"id":"fail"#) && delivery == 1 {
            IntakeOutcome::StorageFailed {
                reason: "the test made the insert fail".into(),
            }
        } else if delivery == 1 {
            new_row()
        } else {
            IntakeOutcome::Duplicate
        }
    });
    let running = start(
        nats_source(&source_yaml(
            &shared_url(),
            &stream,
            "qb",
            "    ackWaitMs: 60000\n",
        )),
        intake.clone(),
    )
    .await;
    let started = std::time::Instant::now();
    publish_bodies(
        &stream,
        "a",
        &[
            r#"{"id":"fail-1"}"#.to_owned(),
            r#"{"id":"ok-1"}"#.to_owned(),
        ],
    );
    eventually(Duration::from_secs(15), "the failed message again", || {
        intake.deliveries_of(r#"{"id":"fail-1"}"#) == 2
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "redelivered by the nak, not by the 60 s ackWait"
    );
    running.stop().await;
    assert_eq!(intake.deliveries_of(r#"{"id":"ok-1"}"#), 1);
    let info = consumer_info(&stream, "qb");
    assert_eq!(info["num_ack_pending"], 0, "{info}");
    assert_eq!(info["num_pending"], 0, "{info}");
}

/// INB-54 (conformance: "an acknowledged message does not return after ackWaitMs").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_54_an_acknowledged_message_does_not_return_after_ack_wait() {
    let stream = TestStream::create(&shared_url(), "inb54ack");
    let intake = ScriptedIntake::storing();
    let running = start(
        nats_source(&source_yaml(
            &shared_url(),
            &stream,
            "qb",
            "    ackWaitMs: 1000\n",
        )),
        intake.clone(),
    )
    .await;
    let sent = bodies(5, "acked");
    publish_bodies(&stream, "a", &sent);
    eventually(Duration::from_secs(10), "five messages", || {
        intake.count() == 5
    })
    .await;
    // Three ack waits: an unacknowledged message would have come back by now.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(intake.count(), 5, "{:?}", intake.bodies());
    running.stop().await;
}

/// INB-71, INB-74: a missing stream stops the start with an error that names it and the fix;
/// QueueBox never creates it.
#[tokio::test]
async fn inb_71_a_missing_stream_stops_the_start_with_its_remedy() {
    let missing = support::unique("missing");
    let mut source = nats_source(&format!(
        "sources:\n  jobs:\n    type: nats\n    consumption: pull\n    servers: {}\n    stream: {missing}\n    durable: qb\n",
        shared_url()
    ));
    let err = source.prepare().await.expect_err("a missing stream");
    assert_eq!(err.source_name.as_str(), "jobs");
    assert_eq!(
        err.reason,
        format!(
            "the JetStream stream '{missing}' does not exist. Create the stream; QueueBox never creates it"
        )
    );
    let answer = py(&shared_url(), &["stream-exists", &missing]);
    assert_eq!(
        answer[0]["exists"], false,
        "QueueBox never creates the stream"
    );
}

/// INB-71: a missing durable is created as a pull consumer with explicit acknowledgement,
/// `ackWait` = `ackWaitMs` and the filter subject; only the filtered subject is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_71_the_durable_is_created_with_explicit_ack_ack_wait_and_the_filter() {
    let stream = TestStream::create(&shared_url(), "inb71c");
    let filter = stream.subject("wanted");
    let intake = ScriptedIntake::storing();
    let running = start(
        nats_source(&source_yaml(
            &shared_url(),
            &stream,
            "qbfiltered",
            &format!("    ackWaitMs: 2500\n    filterSubject: {filter}\n"),
        )),
        intake.clone(),
    )
    .await;
    let info = consumer_info(&stream, "qbfiltered");
    assert_eq!(info["ack_policy"], "explicit", "{info}");
    assert_eq!(info["ack_wait"], 2.5, "{info}");
    assert_eq!(info["filter_subject"], filter.as_str(), "{info}");
    publish_bodies(&stream, "other", &bodies(3, "other"));
    publish_bodies(&stream, "wanted", &bodies(2, "wanted"));
    eventually(Duration::from_secs(10), "the wanted messages", || {
        intake.count() == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    running.stop().await;
    assert_eq!(intake.bodies(), bodies(2, "wanted"));
}

/// INB-71: an existing consumer is used as it is, even with other settings (its ackWait stays).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_71_an_existing_consumer_with_other_settings_is_used_as_it_is() {
    let stream = TestStream::create(&shared_url(), "inb71e");
    create_consumer(
        &stream,
        async_nats::jetstream::consumer::pull::Config {
            durable_name: Some("existing".into()),
            ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(7),
            ..Default::default()
        },
    )
    .await;
    let intake = ScriptedIntake::storing();
    let running = start(
        nats_source(&source_yaml(
            &shared_url(),
            &stream,
            "existing",
            "    ackWaitMs: 1000\n",
        )),
        intake.clone(),
    )
    .await;
    publish_bodies(&stream, "a", &bodies(3, "existing"));
    eventually(Duration::from_secs(10), "three messages", || {
        intake.count() == 3
    })
    .await;
    running.stop().await;
    assert_eq!(consumer_info(&stream, "existing")["ack_wait"], 7.0);
}

/// INB-72 with an existing consumer whose `max_ack_pending` (20) is below the fetch loop's
/// window (512): JetStream stops handing out messages at 20 unacknowledged, and the fetches
/// only slow down. Nothing stalls, nothing is redelivered, and the order holds (docs/nats.md,
/// "What is acknowledged, and when").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_72_a_max_ack_pending_below_the_window_only_slows_the_fetches() {
    let stream = TestStream::create(&shared_url(), "inb72map");
    create_consumer(
        &stream,
        async_nats::jetstream::consumer::pull::Config {
            durable_name: Some("narrow".into()),
            ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(60),
            max_ack_pending: 20,
            ..Default::default()
        },
    )
    .await;
    let sent = bodies(300, "narrow");
    publish_bodies(&stream, "a", &sent);
    let (intake, gate) = ScriptedIntake::held();
    let running = start(
        nats_source(&source_yaml(
            &shared_url(),
            &stream,
            "narrow",
            "    batchSize: 10\n",
        )),
        intake.clone(),
    )
    .await;
    eventually(
        Duration::from_secs(20),
        "20 messages fetched with no outcome known",
        || intake.count() >= 20,
    )
    .await;
    // The set-up this test is about: two fetch waits (1 s each) later, the server still holds
    // back every message beyond the 20 that wait for their acknowledgement.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let ahead = intake.count();
    assert_eq!(
        ahead, 20,
        "the consumer was to let out 20 unacknowledged messages, and {ahead} came"
    );
    gate.add_permits(sent.len());
    eventually(Duration::from_secs(30), "every message submitted", || {
        intake.count() == sent.len()
    })
    .await;
    running.stop().await;
    assert_eq!(intake.bodies(), sent, "fetch order");
    let info = consumer_info(&stream, "narrow");
    assert_eq!(info["num_ack_pending"], 0, "{info}");
    assert_eq!(info["num_pending"], 0, "{info}");
    assert_eq!(info["num_redelivered"], 0, "{info}");
}

/// Two replicas that share one durable share the work: every message is submitted once in
/// all, and each replica gets a part of them (issue 10; INB §2.4 `durable`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_sharing_a_durable_store_every_message_once() {
    let stream = TestStream::create(&shared_url(), "replicas");
    let sent = bodies(300, "shared");
    let yaml = source_yaml(&shared_url(), &stream, "shared", "    batchSize: 5\n");
    let first = ScriptedIntake::storing();
    let second = ScriptedIntake::storing();
    let a = start(nats_source(&yaml), first.clone()).await;
    let b = start(nats_source(&yaml), second.clone()).await;
    // Both replicas have a pull request waiting before the messages arrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    publish_bodies(&stream, "a", &sent);
    eventually(Duration::from_secs(30), "every message", || {
        first.count() + second.count() >= sent.len()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.stop().await;
    b.stop().await;
    let mut all = first.bodies();
    all.extend(second.bodies());
    all.sort();
    let mut expected = sent.clone();
    expected.sort();
    assert_eq!(all, expected, "each message once, none lost");
    assert!(
        first.count() > 0 && second.count() > 0,
        "both replicas took work: {} and {}",
        first.count(),
        second.count()
    );
}

/// INB-75: on stop, the messages in progress finish and are acknowledged within the grace;
/// what was refused because QueueBox is stopping is not acknowledged and comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_75_stop_finishes_messages_in_progress_with_their_acknowledgements() {
    let stream = TestStream::create(&shared_url(), "inb75");
    let (intake, gate) = ScriptedIntake::held();
    let running = start(
        nats_source(&source_yaml(
            &shared_url(),
            &stream,
            "qb",
            "    ackWaitMs: 60000\n",
        )),
        intake.clone(),
    )
    .await;
    publish_bodies(&stream, "a", &bodies(6, "inflight"));
    eventually(Duration::from_secs(10), "six submitted", || {
        intake.count() == 6
    })
    .await;
    running.stop.cancel();
    // The outcomes arrive after the stop began: the source still acknowledges them.
    tokio::time::sleep(Duration::from_millis(300)).await;
    gate.add_permits(6);
    tokio::time::timeout(Duration::from_secs(40), running.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let info = consumer_info(&stream, "qb");
    assert_eq!(info["num_ack_pending"], 0, "all six acknowledged: {info}");
    assert_eq!(info["num_pending"], 0, "{info}");

    // A message the intake refused as shutting down is negatively acknowledged, so it is
    // delivered again to the next consumer of the durable.
    let refusing = ScriptedIntake::new(|_, _| IntakeOutcome::ShuttingDown);
    let stopping = start(
        nats_source(&source_yaml(&shared_url(), &stream, "qb", "")),
        refusing.clone(),
    )
    .await;
    publish_bodies(&stream, "a", &bodies(1, "late"));
    eventually(Duration::from_secs(10), "the late message", || {
        refusing.count() >= 1
    })
    .await;
    stopping.stop().await;
    let next = ScriptedIntake::storing();
    let again = start(
        nats_source(&source_yaml(&shared_url(), &stream, "qb", "")),
        next.clone(),
    )
    .await;
    eventually(Duration::from_secs(10), "the late message again", || {
        next.bodies().contains(&bodies(1, "late")[0])
    })
    .await;
    again.stop().await;
}

/// INB-73, INB-74: while the broker is down the readiness component `nats.<source>` is down;
/// the source reconnects by itself and messages published after the restart arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_73_readiness_follows_an_outage_and_the_source_reconnects_by_itself() {
    let mut server = PrivateNats::start();
    let stream = TestStream::create(&server.url(), "inb73");
    let intake = ScriptedIntake::storing();
    let running = start(
        nats_source(&source_yaml(&server.url(), &stream, "qb", "")),
        intake.clone(),
    )
    .await;
    publish_bodies(&stream, "a", &bodies(3, "before"));
    eventually(Duration::from_secs(10), "the first three", || {
        intake.count() == 3
    })
    .await;
    assert!(running.is_ready().await);
    server.halt();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while running.is_ready().await {
        assert!(std::time::Instant::now() < deadline, "readiness stayed up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.resume();
    let after = bodies(3, "after");
    publish_bodies(&stream, "a", &after);
    eventually(
        Duration::from_secs(30),
        "the three after the restart",
        || {
            let seen = intake.bodies();
            after.iter().all(|body| seen.contains(body))
        },
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !running.is_ready().await {
        assert!(
            std::time::Instant::now() < deadline,
            "readiness stayed down"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    running.stop().await;
    // A server killed hard may lose the consumer's state; the source then binds a new one,
    // which reads the stream from its start again: repeats, never a loss.
    let mut seen = intake.bodies();
    seen.sort();
    seen.dedup();
    let mut expected = bodies(3, "before");
    expected.extend(after);
    expected.sort();
    assert_eq!(seen, expected);
}

/// INB-74: a broker that cannot be reached does not stop the start; the source reports
/// itself down and starts reading once the broker is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inb_74_an_unreachable_broker_does_not_stop_the_start() {
    let mut server = PrivateNats::start();
    let stream = TestStream::create(&server.url(), "inb74");
    server.halt();
    let intake = ScriptedIntake::storing();
    let running = start(
        nats_source(&source_yaml(&server.url(), &stream, "qb", "")),
        intake.clone(),
    )
    .await;
    assert!(!running.is_ready().await);
    server.resume();
    publish_bodies(&stream, "a", &bodies(2, "late"));
    eventually(Duration::from_secs(30), "both messages", || {
        intake.count() == 2
    })
    .await;
    running.stop().await;
}
