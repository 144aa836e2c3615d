//! The Kafka destination against the real broker (the shared tansu), read back by the standard
//! client confluent-kafka (destinations.md §6: DST-39..42, DST-17, DST-18, DST-40).

mod support;

use std::time::{Duration, Instant};

use queuebox_core::{Destination, Outcome, OutgoingMessage};
use queuebox_kafka::{KafkaDestination, KafkaDestinationSettings};
use support::{TestTopic, config, java_partition, shared_bootstrap};
use uuid::Uuid;

fn destination(yaml_topic: &str, bootstrap: &str, extra: &str) -> std::sync::Arc<KafkaDestination> {
    let config = config(&format!(
        "destinations:\n  events:\n    type: kafka\n    bootstrapServers: {bootstrap}\n    {yaml_topic}\n{extra}routes:\n  - topicPattern: \"**\"\n    destination: events\n"
    ));
    KafkaDestination::new(
        KafkaDestinationSettings::from_config(&config.destinations["events"]).unwrap(),
    )
    .unwrap()
}

fn row(topic: &str, key: Option<&str>, payload: &str) -> OutgoingMessage {
    OutgoingMessage {
        id: Uuid::now_v7(),
        topic: topic.to_owned(),
        key: key.map(str::to_owned),
        aggregate_type: None,
        attempt: 0,
        headers: vec![("x-tenant".into(), "acme".into())],
        payload: payload.to_owned(),
        stored_payload: None,
    }
}

/// DST-41 (issue 11): every keyed record lands on the partition that the Java client's default
/// partitioner (murmur2) picks for its key; DST-40: value, key and headers as sent, the identity
/// headers last; DST-39: the publish is acknowledged.
#[tokio::test(flavor = "multi_thread")]
async fn dst_41_a_key_lands_on_the_partition_of_the_standard_partitioner() {
    let bootstrap = shared_bootstrap();
    let topic = TestTopic::create(&bootstrap, "murmur", 6);
    let events = destination(
        &format!("topic: {}", topic.name),
        &bootstrap,
        "    headers:\n      X-Static: yes\n",
    );
    let mut sent = Vec::new();
    for i in 0..24 {
        let message = row(
            "order.created",
            Some(&format!("customer-{i}")),
            &format!(r#"{{"n":{i}}}"#),
        );
        assert_eq!(events.publish(&message).await, Outcome::Delivered);
        sent.push(message);
    }
    let records = topic.records();
    assert_eq!(records.len(), 24);
    for record in &records {
        let key = record["key"].as_str().unwrap();
        assert_eq!(
            record["partition"].as_i64().unwrap(),
            java_partition(key, 6),
            "DST-41: {key}"
        );
        let message = sent.iter().find(|m| m.key.as_deref() == Some(key)).unwrap();
        assert_eq!(record["value"], message.payload.as_str());
        let headers: Vec<(String, String)> = record["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h[0].as_str().unwrap().to_owned(),
                    h[1].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            headers,
            vec![
                ("x-tenant".to_owned(), "acme".to_owned()),
                ("X-Static".to_owned(), "yes".to_owned()),
                ("x-message-id".to_owned(), message.id.to_string()),
                ("x-topic".to_owned(), "order.created".to_owned()),
                ("x-attempt".to_owned(), "0".to_owned()),
            ],
            "DST-40"
        );
    }
    // More than one partition was used, so the check means something.
    let used: std::collections::HashSet<i64> = records
        .iter()
        .map(|r| r["partition"].as_i64().unwrap())
        .collect();
    assert!(used.len() > 2, "{used:?}");
    events.close().await;
}

/// DST-17, DST-18, DST-40: a topic template reaches two topics by aggregate type; a row with no
/// key and the default `{{ key }}` sends no key; an empty rendered topic fails with the spec's
/// text and publishes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn dst_17_dst_18_topic_templates_and_an_empty_topic() {
    let bootstrap = shared_bootstrap();
    let base = support::unique("tpl");
    let orders = TestTopic::named(&bootstrap, &format!("{base}.order"), 1);
    let invoices = TestTopic::named(&bootstrap, &format!("{base}.invoice"), 1);
    let events = destination(
        &format!("topic: \"{base}.{{{{ aggregateType }}}}\""),
        &bootstrap,
        "",
    );
    let mut order = row("t", None, r#"{"a":1}"#);
    order.aggregate_type = Some("order".into());
    let mut invoice = row("t", Some("inv-1"), r#"{"b":2}"#);
    invoice.aggregate_type = Some("invoice".into());
    assert_eq!(events.publish(&order).await, Outcome::Delivered);
    assert_eq!(events.publish(&invoice).await, Outcome::Delivered);
    let empty = destination("topic: \"{{ aggregateType }}\"", &bootstrap, "");
    let Outcome::Failed { reason, .. } = empty.publish(&row("t", None, "{}")).await else {
        panic!("an empty topic fails")
    };
    assert_eq!(
        reason,
        "Destination 'events' rendered an empty topic from template '{{ aggregateType }}'. QueueBox does not publish the message."
    );
    let order_records = orders.records();
    assert_eq!(order_records.len(), 1);
    assert!(
        order_records[0]["key"].is_null(),
        "no key: {order_records:?}"
    );
    let invoice_records = invoices.records();
    assert_eq!(invoice_records.len(), 1);
    assert_eq!(invoice_records[0]["key"], "inv-1");
    events.close().await;
    empty.close().await;
}

/// DST-42, DST-2: a broker that cannot be reached never stops the start (the producer is
/// built), and a publish fails within `timeoutMs` with the spec's text.
#[tokio::test(flavor = "multi_thread")]
async fn dst_42_an_unreachable_broker_fails_the_publish_within_the_timeout() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let events = destination(
        "topic: nowhere",
        &format!("127.0.0.1:{port}"),
        "    timeoutMs: 2000\n",
    );
    let started = Instant::now();
    let Outcome::Failed { reason, .. } = events.publish(&row("t", None, "{}")).await else {
        panic!("nothing acknowledges")
    };
    assert!(
        reason.starts_with("The publish to 'events' failed. Reason: "),
        "{reason}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(4000),
        "{:?}",
        started.elapsed()
    );
    events.close().await;
}

/// DST-37 for Kafka, DST-39, DST-42: publishes running at once (as `outbox.concurrency` runs
/// them) each get their own acknowledgement, and every acknowledged record is on the broker.
#[tokio::test(flavor = "multi_thread")]
async fn dst_39_concurrent_publishes_each_acknowledged_all_reach_the_broker() {
    let bootstrap = shared_bootstrap();
    let topic = TestTopic::create(&bootstrap, "concurrent", 1);
    let events = destination(&format!("topic: {}", topic.name), &bootstrap, "");
    let total = 2000;
    let semaphore = std::sync::Arc::new(tokio::sync::Semaphore::new(8));
    let mut tasks = Vec::new();
    for i in 0..total {
        let events = std::sync::Arc::clone(&events);
        let permit = std::sync::Arc::clone(&semaphore)
            .acquire_owned()
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            let message = row("t", None, &format!(r#"{{"n":{i}}}"#));
            let outcome = events.publish(&message).await;
            drop(permit);
            (message.id.to_string(), outcome)
        }));
    }
    let mut acknowledged = std::collections::HashSet::new();
    for task in tasks {
        let (id, outcome) = task.await.unwrap();
        assert_eq!(outcome, Outcome::Delivered);
        acknowledged.insert(id);
    }
    let records = topic.records();
    let on_broker: std::collections::HashSet<String> = records
        .iter()
        .filter_map(|r| {
            r["headers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h[0] == "x-message-id")
                .map(|h| h[1].as_str().unwrap().to_owned())
        })
        .collect();
    let missing: Vec<&String> = acknowledged.difference(&on_broker).collect();
    assert!(
        missing.is_empty(),
        "{} of {total} acknowledged records are not on the broker ({} records read)",
        missing.len(),
        records.len()
    );
    events.close().await;
}

/// The CPU time, in seconds, that this process's librdkafka broker threads (`rdk:broker<id>`)
/// have used so far. nextest runs each test in a process of its own, so these are the threads of
/// the one producer under test.
fn broker_thread_cpu_seconds() -> f64 {
    let ticks_per_second = 100.0; // USER_HZ, the unit of utime and stime on Linux
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let task = task.unwrap().path();
        let Ok(name) = std::fs::read_to_string(task.join("comm")) else {
            continue; // the thread ended meanwhile
        };
        if !name.starts_with("rdk:broker") {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(task.join("stat")) else {
            continue;
        };
        // The fields after the parenthesised name; utime and stime are fields 14 and 15.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    }
    ticks as f64 / ticks_per_second
}

/// Issue 11 (the Kafka destination's CPU per row): with `outbox.concurrency` (8) publishes
/// waiting at once, more than the idempotent producer's 5 in-flight records of a partition, the
/// broker thread must wait for an acknowledgement, not spin. With `linger.ms` 0 librdkafka 2.12
/// sets the thread's next wake-up to "now" for the records it may not send yet, and the thread
/// polled its socket without a pause until the acknowledgement came: 122 and 128 µs of CPU a
/// record in this test (load 2–3.5); with the 1 ms linger 10 to 12 µs. The bound is 4 times the
/// latter.
#[tokio::test(flavor = "multi_thread")]
async fn issue_11_waiting_publishes_do_not_spin_the_broker_thread() {
    let bootstrap = shared_bootstrap();
    let topic = TestTopic::create(&bootstrap, "spin", 1);
    let events = destination(&format!("topic: {}", topic.name), &bootstrap, "");
    // The producer connects and learns the topic first: the start is not what is measured.
    assert_eq!(
        events.publish(&row("t", None, r#"{"n":-1}"#)).await,
        Outcome::Delivered
    );
    let total = 4000;
    let before = broker_thread_cpu_seconds();
    let semaphore = std::sync::Arc::new(tokio::sync::Semaphore::new(8));
    let mut tasks = Vec::new();
    for i in 0..total {
        let events = std::sync::Arc::clone(&events);
        let permit = std::sync::Arc::clone(&semaphore)
            .acquire_owned()
            .await
            .unwrap();
        tasks.push(tokio::spawn(async move {
            let outcome = events
                .publish(&row("t", None, &format!(r#"{{"n":{i}}}"#)))
                .await;
            drop(permit);
            outcome
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), Outcome::Delivered);
    }
    let per_record_us = (broker_thread_cpu_seconds() - before) / f64::from(total) * 1e6;
    eprintln!("the broker threads used {per_record_us:.0} µs of CPU a record");
    assert!(
        per_record_us < 50.0,
        "the broker threads used {per_record_us:.0} µs of CPU a record (at most 50 expected)"
    );
    events.close().await;
}
