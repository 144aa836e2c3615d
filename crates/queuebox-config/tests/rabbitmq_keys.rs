//! Every key of the RabbitMQ source (CFG-75, inbox.md §2.4) and destination (CFG-51,
//! destinations.md §5.1) validated at once, with the messages `queuebox check` prints; the
//! password of an AMQP URL masked when printed (CFG-23, DST-5).

mod common;

use common::*;
use queuebox_config::{DestinationKind, SourceKind};

#[test]
fn cfg_51_cfg_75_every_rabbitmq_key_is_checked_and_all_errors_are_reported_at_once() {
    let lines = errors(&with_db(
        r#"sources:
  a:
    type: rabbitmq
    queueName: " "
    prefetchCount: 70000
    declareQueue: "yes"
    consumption: pull
  b:
    type: rabbitmq
    connectionUrl: http://rabbit:5672
    queueName: q
    prefetchCount: 0
    consumption: pull
destinations:
  d1:
    type: rabbitmq
    exchange: e
    deliveryMode: durable
  d2:
    type: rabbitmq
    url: amqp://rabbit
    exchangeFrom: region
  d3:
    type: rabbitmq
    url: amqp://rabbit
  d4:
    type: rabbitmq
    url: amqp://rabbit
    exchange: "x.{{ region }}"
    routingKeyTemplate: "{{ payload. }}"
    headers:
      X-Attempt: "1"
"#,
    ));
    assert_eq!(
        lines,
        [
            "- destinations.d1.deliveryMode: must be one of persistent, transient, got \"durable\"",
            "- destinations.d1.url: required for type rabbitmq",
            "- destinations.d2.exchangeFrom: must be aggregate_type, topic or key",
            "- destinations.d3: set exchange or exchangeFrom",
            "- destinations.d4.exchange: unknown placeholder {{ region }}; use topic, key, aggregateType, payload.<path>, data.<path>",
            "- destinations.d4.headers.X-Attempt: a reserved header name; only QueueBox sets it",
            "- destinations.d4.routingKeyTemplate: has a payload placeholder without a path",
            "- sources.a.connectionUrl: required for type rabbitmq",
            "- sources.a.declareQueue: expected true or false, got \"yes\"",
            "- sources.a.prefetchCount: must be between 1 and 65535, got 70000",
            "- sources.a.queueName: must not be blank",
            "- sources.b.connectionUrl: must be an amqp:// or amqps:// URI with a host",
            "- sources.b.prefetchCount: must be between 1 and 65535, got 0",
        ]
    );
}

#[test]
fn inb_60_inb_61_the_defaults_and_the_masked_urls() {
    let loaded = ok(&with_db(
        "sources:\n  q:\n    type: rabbitmq\n    connectionUrl: amqp://queuebox:hunter2@rabbit:5672/%2f\n    queueName: q\n    consumption: pull\ndestinations:\n  d:\n    type: rabbitmq\n    url: amqps://queuebox:hunter2@rabbit:5671/%2f\n    exchange: e\n",
    ));
    let SourceKind::Rabbitmq(source) = &loaded.config.sources["q"].kind else {
        panic!("a rabbitmq source")
    };
    assert_eq!(source.prefetch_count, 10);
    assert!(!source.declare_queue);
    assert_eq!(source.masked_url, "amqp://queuebox:***@rabbit:5672/%2f");
    let DestinationKind::Rabbitmq(destination) = &loaded.config.destinations["d"].kind else {
        panic!("a rabbitmq destination")
    };
    assert_eq!(
        destination.masked_url,
        "amqps://queuebox:***@rabbit:5671/%2f"
    );
    assert_eq!(destination.routing_key_template.as_str(), "{{ topic }}");
    assert_eq!(
        destination.delivery_mode,
        queuebox_config::DeliveryMode::Persistent
    );
    assert_eq!(
        destination.exchange_type,
        queuebox_config::ExchangeType::Topic
    );
}
