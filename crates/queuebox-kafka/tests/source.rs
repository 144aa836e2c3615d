//! The Kafka source against the real broker (the shared tansu, or `QUEUEBOX_TEST_KAFKA`), fed
//! by the standard client confluent-kafka, with an intake whose outcomes the test decides
//! (inbox.md §10.5: INB-64..67). The engine's intake and the database run behind the source in
//! the binary's end-to-end tests (crates/queuebox/tests/kafka_e2e.rs).

mod support;

#[path = "../../queuebox-nats/tests/support/intake.rs"]
mod intake;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use intake::{ScriptedIntake, new_row};
use queuebox_core::intake::IntakeOutcome;
use queuebox_core::{Intake, Source};
use queuebox_kafka::{KafkaSource, KafkaSourceSettings};
use support::{Record, TestTopic, config, eventually, py_publish, shared_bootstrap, unique};
use tokio_util::sync::CancellationToken;

fn source(topic: &TestTopic, group: &str, extra: &str) -> KafkaSource {
    let config = config(&format!(
        "sources:\n  orders:\n    type: kafka\n    consumption: pull\n    bootstrapServers: {}\n    topics: [{}]\n    groupId: {group}\n{extra}",
        topic.bootstrap, topic.name
    ));
    KafkaSource::new(KafkaSourceSettings::from_config(&config.sources["orders"]).unwrap())
}

fn numbered(topic: &TestTopic, from: usize, to: usize) -> Vec<Record> {
    (from..to)
        .map(|i| Record::new(&topic.name, &format!(r#"{{"id":"m-{i}"}}"#)))
        .collect()
}

struct Running {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

async fn run(mut source: KafkaSource, intake: Arc<dyn Intake>) -> Running {
    source.prepare().await.unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    let task = tokio::spawn(async move {
        Box::new(source).run(intake, token).await.unwrap();
    });
    Running { stop, task }
}

impl Running {
    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(40), self.task)
            .await
            .expect("the source stops within the grace")
            .unwrap();
    }
}

/// INB-66 (the conformance check "a failed store leaves the Kafka offset uncommitted and the
/// record is read again"), INB-54, INB-65: while the store of `m-5` fails, the group's committed
/// offset stays at 5 (the unbroken run m-0..m-4), and `m-5` is read again after each seek-back,
/// about 1 s apart (rule 5); once it is stored, the partition continues and the offset reaches
/// the end. The records of a partition reach the intake in offset order.
#[tokio::test(flavor = "multi_thread")]
async fn inb_66_a_failed_record_is_read_again_and_the_offset_stays_before_it() {
    let bootstrap = shared_bootstrap();
    let topic = TestTopic::create(&bootstrap, "fail", 1);
    let group = unique("g-fail");
    let failing = Arc::new(AtomicBool::new(true));
    let flag = Arc::clone(&failing);
    let intake = ScriptedIntake::new(move |message, delivery| {
        if message.body == br#"{"id":"m-5"}"# && flag.load(Ordering::SeqCst) {
            IntakeOutcome::StorageFailed {
                reason: "the test refuses m-5".into(),
            }
        } else if delivery == 1 {
            new_row()
        } else {
            IntakeOutcome::Duplicate
        }
    });
    py_publish(&bootstrap, &numbered(&topic, 0, 10));
    let running = run(source(&topic, &group, ""), intake.clone()).await;
    eventually(Duration::from_secs(60), "m-5 read three times", || {
        intake.deliveries_of(r#"{"id":"m-5"}"#) >= 3
    })
    .await;
    assert_eq!(topic.committed(&group), vec![5], "only the run before m-5");
    // Rule 3: a seek-back reads m-5 again first; rule 5: about one second between the reads.
    let bodies = intake.bodies();
    let first_repeat = bodies
        .iter()
        .enumerate()
        .skip(1)
        .find(|(i, b)| b.as_str() == r#"{"id":"m-5"}"# && bodies[..*i].contains(b))
        .map(|(i, _)| i)
        .unwrap();
    assert!(
        bodies[..5]
            .iter()
            .zip(0..5)
            .all(|(b, i)| b == &format!(r#"{{"id":"m-{i}"}}"#)),
        "offset order: {bodies:?}"
    );
    assert!(
        !bodies[first_repeat..]
            .iter()
            .any(|b| ["m-0", "m-1", "m-2", "m-3", "m-4"]
                .iter()
                .any(|m| b.contains(m))),
        "nothing before m-5 is read again: {bodies:?}"
    );
    let started = Instant::now();
    let before = intake.deliveries_of(r#"{"id":"m-5"}"#);
    eventually(Duration::from_secs(10), "m-5 read again", || {
        intake.deliveries_of(r#"{"id":"m-5"}"#) > before
    })
    .await;
    assert!(
        started.elapsed() <= Duration::from_millis(2500),
        "a seek-back waits about 1 s, not longer: {:?}",
        started.elapsed()
    );
    failing.store(false, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(30);
    while topic.committed(&group) != vec![10] {
        assert!(Instant::now() < deadline, "the offset never reached 10");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for i in 0..10 {
        assert!(intake.deliveries_of(&format!(r#"{{"id":"m-{i}"}}"#)) >= 1);
    }
    running.stop().await;
}

/// INB-67, INB-56, INB-66: a tombstone (a null value) reaches the intake as an empty body (which
/// the intake stores `dead`), it counts as accepted, and the next record of the partition
/// follows; INB-35: the record key is the protocol id, headers arrive as received.
#[tokio::test(flavor = "multi_thread")]
async fn inb_67_a_tombstone_is_an_empty_body_and_the_partition_goes_on() {
    let bootstrap = shared_bootstrap();
    let topic = TestTopic::create(&bootstrap, "tomb", 1);
    let group = unique("g-tomb");
    let intake = ScriptedIntake::storing();
    let mut tombstone = Record::new(&topic.name, "").key("order-7");
    tombstone.value = None;
    py_publish(
        &bootstrap,
        &[
            tombstone,
            Record::new(&topic.name, r#"{"id":"after"}"#)
                .key("order-8")
                .header("X-Tenant", "acme"),
        ],
    );
    let running = run(source(&topic, &group, ""), intake.clone()).await;
    eventually(Duration::from_secs(60), "both records", || {
        intake.count() >= 2
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while topic.committed(&group) != vec![2] {
        assert!(Instant::now() < deadline, "both records are committed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let seen = intake.seen();
    assert!(seen[0].body.is_empty(), "INB-67");
    assert_eq!(seen[0].protocol.message_id.as_deref(), Some("order-7"));
    assert_eq!(seen[1].body, br#"{"id":"after"}"#);
    assert_eq!(seen[1].protocol.message_id.as_deref(), Some("order-8"));
    assert_eq!(seen[1].headers.get("X-Tenant"), Some("acme"));
    assert!(seen[1].protocol.published_at_ms.is_some());
    running.stop().await;
}

/// INB-64, INB-66 rule 7 (issue 11: a second consumer joining the group): with records still
/// flowing, a second source of the same group joins; the partitions are rebalanced, and every
/// record reaches an intake, none is lost, and what is read twice is only what the inbox would
/// drop as a duplicate. At the end the group's committed offsets are the end of each partition.
#[tokio::test(flavor = "multi_thread")]
async fn inb_66_a_rebalance_loses_nothing() {
    let bootstrap = shared_bootstrap();
    let topic = TestTopic::create(&bootstrap, "rebal", 4);
    let group = unique("g-rebal");
    // One intake per consumer, each answering about 200 records a second, so the stream is still
    // flowing when the second consumer joins.
    let (intake_a, gate_a) = ScriptedIntake::held();
    let (intake_b, gate_b) = ScriptedIntake::held();
    let total = 6000;
    let records: Vec<Record> = (0..total)
        .map(|i| {
            let mut r = Record::new(&topic.name, &format!(r#"{{"id":"m-{i}"}}"#));
            r.partition = Some((i % 4) as i32);
            r
        })
        .collect();
    py_publish(&bootstrap, &records);
    let pacer = {
        let (gate_a, gate_b) = (Arc::clone(&gate_a), Arc::clone(&gate_b));
        tokio::spawn(async move {
            for _ in 0..4000 {
                gate_a.add_permits(10);
                gate_b.add_permits(10);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let first = run(source(&topic, &group, ""), intake_a.clone()).await;
    eventually(Duration::from_secs(60), "the first consumer reads", || {
        intake_a.count() >= 200
    })
    .await;
    let second = run(source(&topic, &group, ""), intake_b.clone()).await;
    let joined = Instant::now();
    eventually(
        Duration::from_secs(90),
        "the second consumer gets partitions",
        || intake_b.count() > 0,
    )
    .await;
    eprintln!("the rebalance took {:?}", joined.elapsed());
    let seen = |i: usize| {
        let body = format!(r#"{{"id":"m-{i}"}}"#);
        intake_a.deliveries_of(&body) + intake_b.deliveries_of(&body)
    };
    eventually(Duration::from_secs(180), "every record", || {
        (0..total).all(|i| seen(i) >= 1)
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while topic.committed(&group) != vec![1500; 4] {
        assert!(
            Instant::now() < deadline,
            "committed: {:?}",
            topic.committed(&group)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        intake_b.count() > 0,
        "the second consumer got partitions: the group was rebalanced"
    );
    // A record read by both consumers is one the inbox drops as a duplicate (the second
    // intake to see a body answers for it as the store would: new the first time only within
    // one intake, so the repeats are counted here instead).
    let repeats = intake_a.count() + intake_b.count() - total;
    eprintln!(
        "first consumer {}, second {}, read twice across the rebalance: {repeats}",
        intake_a.count(),
        intake_b.count()
    );
    pacer.abort();
    gate_a.add_permits(100_000);
    gate_b.add_permits(100_000);
    first.stop().await;
    second.stop().await;
}

/// INB-64, INB-69: one poll takes at most `maxPollRecords` records, and the next poll waits for
/// their outcomes (nothing more reaches the intake while they are open); readiness
/// `kafka.<source>` is up while the consumer is subscribed to a reachable broker.
#[tokio::test(flavor = "multi_thread")]
async fn inb_64_inb_65_a_poll_takes_at_most_max_poll_records_as_one_group_and_waits_for_their_outcomes()
 {
    let bootstrap = shared_bootstrap();
    let topic = TestTopic::create(&bootstrap, "maxpoll", 1);
    let group = unique("g-maxpoll");
    let (intake, gate) = ScriptedIntake::held();
    py_publish(&bootstrap, &numbered(&topic, 0, 10));
    let source = source(&topic, &group, "    maxPollRecords: 3\n");
    let readiness = source.readiness();
    assert_eq!(readiness.len(), 1);
    assert_eq!(readiness[0].name(), "kafka.orders");
    let running = run(source, intake.clone()).await;
    assert!(
        readiness[0].check().await.is_ok(),
        "INB-69: up once subscribed and connected"
    );
    eventually(Duration::from_secs(60), "the first poll", || {
        intake.count() >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let first = intake.count();
    assert!((1..=3).contains(&first), "at most maxPollRecords: {first}");
    gate.add_permits(100);
    eventually(Duration::from_secs(30), "every record", || {
        intake.count() >= 10
    })
    .await;
    assert_eq!(intake.count(), 10);
    // INB-65: each poll's records reach the intake as one group (one insert), never one by one.
    let groups = intake.groups();
    assert_eq!(groups.iter().sum::<usize>(), 10, "{groups:?}");
    assert!(groups.iter().all(|n| (1..=3).contains(n)), "{groups:?}");
    running.stop().await;
}
