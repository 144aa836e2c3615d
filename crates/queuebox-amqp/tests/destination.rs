//! The `rabbitmq` destination against the real broker, read back with Python's pika
//! (destinations.md §5, §2.4, §3): confirms, returns, exchange declaration, routing keys,
//! properties and headers, concurrency, and the failures that must never count as sent.

mod support;

use std::sync::Arc;

use queuebox_amqp::{RabbitmqDestination, RabbitmqDestinationSettings};
use queuebox_config::{Address, AddressColumn, DeliveryMode, ExchangeType, Route};
use queuebox_core::glob::TopicGlob;
use queuebox_core::template::{Template, TemplateFields};
use queuebox_core::{Destination, Outcome, OutgoingMessage, Secret};
use support::{amqp_url, bound_queue, delete, get, unique};
use uuid::Uuid;

fn template(text: &str) -> Template {
    Template::parse(text, TemplateFields::Destination).unwrap()
}

fn settings(exchange: Address, kind: ExchangeType, key: &str) -> RabbitmqDestinationSettings {
    RabbitmqDestinationSettings {
        name: "events".to_owned(),
        url: Secret::new(amqp_url()),
        exchange,
        exchange_type: kind,
        routing_key_template: template(key),
        delivery_mode: DeliveryMode::Persistent,
        static_headers: vec![
            ("X-Team".to_owned(), Secret::new("payments")),
            ("x-tenant".to_owned(), Secret::new("static")),
        ],
    }
}

fn message(topic: &str) -> OutgoingMessage {
    OutgoingMessage {
        id: Uuid::now_v7(),
        topic: topic.to_owned(),
        key: Some("o-42".to_owned()),
        aggregate_type: Some("order".to_owned()),
        attempt: 2,
        headers: vec![
            ("X-Tenant".to_owned(), "acme".to_owned()),
            ("x-message-id".to_owned(), "forged".to_owned()),
        ],
        payload: r#"{"id":"o-42","region":"eu"}"#.to_owned(),
        stored_payload: None,
    }
}

fn failure(outcome: &Outcome) -> &str {
    match outcome {
        Outcome::Failed { reason, .. } => reason,
        Outcome::Delivered => panic!("expected a failure, got success"),
    }
}

#[tokio::test]
async fn dst_11_dst_21_dst_34_a_confirmed_publish_carries_the_properties_and_headers() {
    let exchange = unique("x");
    let queue = unique("q");
    bound_queue(&exchange, "topic", &queue, "events.#");
    let destination = RabbitmqDestination::new(settings(
        Address::Template(template(&exchange)),
        ExchangeType::Topic,
        "events.{{ topic }}.v1",
    ))
    .unwrap();
    let sent = message("order.created");
    assert_eq!(destination.publish(&sent).await, Outcome::Delivered);
    let got = get(&queue, 1, 5.0);
    destination.close().await;
    delete(&[&queue], &[&exchange]);
    assert_eq!(got.len(), 1, "{got:?}");
    let m = &got[0];
    assert_eq!(m["routing_key"], "events.order.created.v1");
    assert_eq!(m["exchange"], exchange.as_str());
    assert_eq!(m["body"], sent.payload.as_str(), "DST-7");
    assert_eq!(m["message_id"], sent.id.to_string().as_str());
    assert_eq!(m["content_type"], "application/json");
    assert_eq!(m["delivery_mode"], 2);
    let headers = m["headers"].as_object().unwrap();
    assert_eq!(headers["x-topic"], "order.created");
    assert_eq!(headers["x-attempt"], 2);
    assert_eq!(m["header_types"]["x-attempt"], "int");
    assert_eq!(headers["X-Tenant"], "acme", "DST-9: the row header wins");
    assert!(!headers.contains_key("x-tenant"));
    assert_eq!(headers["X-Team"], "payments", "static header");
    assert!(
        !headers.contains_key("x-message-id"),
        "DST-8: a row x-message-id is not sent"
    );
    assert!(
        !headers.contains_key("x-message-key"),
        "DST-11: no key header"
    );
    assert_eq!(headers.len(), 4, "{headers:?}");
}

#[tokio::test]
async fn dst_36_an_unroutable_message_fails_and_the_next_one_is_delivered() {
    let exchange = unique("x");
    let queue = unique("q");
    bound_queue(&exchange, "direct", &queue, "bound");
    let destination = RabbitmqDestination::new(settings(
        Address::Template(template(&exchange)),
        ExchangeType::Direct,
        "{{ key }}",
    ))
    .unwrap();
    let mut unroutable = message("order.created");
    unroutable.key = Some("nobody".to_owned());
    let outcome = destination.publish(&unroutable).await;
    assert_eq!(
        failure(&outcome),
        format!(
            "RabbitMQ publish failed: Message {} is unroutable on exchange {exchange} with routing key nobody",
            unroutable.id
        )
    );
    let mut routable = message("order.created");
    routable.key = Some("bound".to_owned());
    assert_eq!(destination.publish(&routable).await, Outcome::Delivered);
    let got = get(&queue, 5, 1.0);
    destination.close().await;
    delete(&[&queue], &[&exchange]);
    assert_eq!(got.len(), 1, "only the routable message arrived: {got:?}");
    assert_eq!(got[0]["message_id"], routable.id.to_string().as_str());
}

#[tokio::test]
async fn dst_37_concurrent_publishes_each_get_their_own_confirm_and_return() {
    let exchange = unique("x");
    let queue = unique("q");
    bound_queue(&exchange, "direct", &queue, "bound");
    let destination = RabbitmqDestination::new(settings(
        Address::Template(template(&exchange)),
        ExchangeType::Direct,
        "{{ key }}",
    ))
    .unwrap();
    let mut tasks = Vec::new();
    for i in 0..120 {
        let destination = Arc::clone(&destination);
        tasks.push(tokio::spawn(async move {
            let mut m = message("t");
            let routable = i % 3 != 0;
            m.key = Some(if routable { "bound" } else { "nobody" }.to_owned());
            (m.id, routable, destination.publish(&m).await)
        }));
    }
    let mut delivered = Vec::new();
    for task in tasks {
        let (id, routable, outcome) = task.await.unwrap();
        match outcome {
            Outcome::Delivered => {
                assert!(
                    routable,
                    "an unroutable message {id} was reported delivered"
                );
                delivered.push(id.to_string());
            }
            Outcome::Failed { reason, .. } => {
                assert!(!routable, "a routable message {id} failed: {reason}");
                assert!(reason.contains(&id.to_string()), "{reason}");
            }
        }
    }
    let got = get(&queue, 200, 1.0);
    destination.close().await;
    delete(&[&queue], &[&exchange]);
    let mut arrived: Vec<String> = got
        .iter()
        .map(|m| m["message_id"].as_str().unwrap().to_owned())
        .collect();
    arrived.sort();
    delivered.sort();
    assert_eq!(delivered.len(), 80);
    assert_eq!(arrived, delivered);
}

#[tokio::test]
async fn dst_21_a_route_key_wins_and_its_missing_field_default_applies() {
    let exchange = unique("x");
    let queue = unique("q");
    bound_queue(&exchange, "direct", &queue, "route.eu.none");
    let destination = RabbitmqDestination::new(settings(
        Address::Template(template(&exchange)),
        ExchangeType::Direct,
        "destination.{{ topic }}",
    ))
    .unwrap();
    let route = Route {
        topic_pattern: TopicGlob::parse("**").unwrap(),
        destination: "events".to_owned(),
        routing_key_template: Some(template("route.{{ payload.region }}.{{ payload.missing }}")),
        routing_key_missing_field_default: "none".to_owned(),
        transform: None,
    };
    let routed = destination.for_route(&route);
    assert_eq!(routed.publish(&message("t")).await, Outcome::Delivered);
    let got = get(&queue, 1, 5.0);
    destination.close().await;
    delete(&[&queue], &[&exchange]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["routing_key"], "route.eu.none");
}

#[tokio::test]
async fn dst_17_dst_18_dst_19_dst_20_address_templates_and_exchange_from_columns() {
    let prefix = unique("x");
    let order = format!("{prefix}.order");
    let queue = unique("q");
    bound_queue(&order, "fanout", &queue, "");
    // One destination, the exchange rendered from the aggregate type.
    let by_template = RabbitmqDestination::new(settings(
        Address::Template(template(&format!("{prefix}.{{{{ aggregateType }}}}"))),
        ExchangeType::Fanout,
        "{{ topic }}",
    ))
    .unwrap();
    assert_eq!(by_template.publish(&message("t")).await, Outcome::Delivered);
    // The exchange read verbatim from the `key` column.
    let by_column = RabbitmqDestination::new(settings(
        Address::Column(AddressColumn::Key),
        ExchangeType::Fanout,
        "{{ topic }}",
    ))
    .unwrap();
    let mut keyed = message("t");
    keyed.key = Some(order.clone());
    assert_eq!(by_column.publish(&keyed).await, Outcome::Delivered);
    // DST-18: an address that renders empty fails and publishes nothing.
    let only_type = RabbitmqDestination::new(settings(
        Address::Template(template("{{ aggregateType }}")),
        ExchangeType::Fanout,
        "{{ topic }}",
    ))
    .unwrap();
    let mut no_type = message("t");
    no_type.aggregate_type = None;
    assert_eq!(
        failure(&only_type.publish(&no_type).await),
        "Destination 'events' rendered an empty exchange from template '{{ aggregateType }}'. QueueBox does not publish the message."
    );
    // DST-20: an empty column fails the same way.
    let mut no_key = message("t");
    no_key.key = None;
    assert_eq!(
        failure(&by_column.publish(&no_key).await),
        "Destination 'events' read an empty exchange from column 'key'. QueueBox does not publish the message."
    );
    let got = get(&queue, 5, 1.0);
    by_template.close().await;
    by_column.close().await;
    delete(&[&queue], &[&order]);
    assert_eq!(got.len(), 2, "{got:?}");
}

#[tokio::test]
async fn dst_34_an_exchange_of_another_type_fails_with_the_brokers_reason_then_publishing_recovers()
{
    let exchange = unique("x");
    let queue = unique("q");
    // Declared `direct` by someone else; the destination wants `topic`.
    bound_queue(&exchange, "direct", &queue, "k");
    let good = unique("x");
    let good_queue = unique("q");
    bound_queue(&good, "topic", &good_queue, "#");
    let destination = RabbitmqDestination::new(settings(
        Address::Column(AddressColumn::AggregateType),
        ExchangeType::Topic,
        "k",
    ))
    .unwrap();
    let mut clash = message("t");
    clash.aggregate_type = Some(exchange.clone());
    let outcome = destination.publish(&clash).await;
    let text = failure(&outcome);
    assert!(text.starts_with("RabbitMQ publish failed: "), "{text}");
    assert!(text.contains("PRECONDITION"), "the broker's reason: {text}");
    // DST-33: the channel that had the error is gone; the next publish opens a new one.
    let mut fine = message("t");
    fine.aggregate_type = Some(good.clone());
    assert_eq!(destination.publish(&fine).await, Outcome::Delivered);
    let got = get(&good_queue, 5, 1.0);
    destination.close().await;
    delete(&[&queue, &good_queue], &[&exchange, &good]);
    assert_eq!(got.len(), 1);
}

#[tokio::test]
async fn dst_35_a_routing_key_over_255_bytes_fails_and_transient_mode_is_delivery_mode_1() {
    let exchange = unique("x");
    let queue = unique("q");
    bound_queue(&exchange, "fanout", &queue, "");
    let mut transient = settings(
        Address::Template(template(&exchange)),
        ExchangeType::Fanout,
        "{{ payload.long }}",
    );
    transient.delivery_mode = DeliveryMode::Transient;
    let destination = RabbitmqDestination::new(transient).unwrap();
    let mut long = message("t");
    long.payload = serde_json::json!({ "long": "k".repeat(256) }).to_string();
    assert_eq!(
        failure(&destination.publish(&long).await),
        "RabbitMQ publish failed: the routing key is 256 bytes long; RabbitMQ takes at most 255"
    );
    let mut short = message("t");
    short.payload = serde_json::json!({ "long": "k".repeat(255) }).to_string();
    assert_eq!(destination.publish(&short).await, Outcome::Delivered);
    let got = get(&queue, 5, 1.0);
    destination.close().await;
    delete(&[&queue], &[&exchange]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["delivery_mode"], 1);
    assert_eq!(got[0]["routing_key"].as_str().unwrap().len(), 255);
}

#[tokio::test]
async fn dst_2_dst_4_a_broker_that_cannot_be_reached_fails_the_publish_without_the_password() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut unreachable = settings(
        Address::Template(template("x")),
        ExchangeType::Topic,
        "{{ topic }}",
    );
    unreachable.url = Secret::new(format!("amqp://queuebox:hunter2@127.0.0.1:{port}/%2f"));
    // DST-2: building it connects nothing, so it cannot fail.
    let destination = RabbitmqDestination::new(unreachable).unwrap();
    let outcome = destination.publish(&message("t")).await;
    let text = failure(&outcome);
    assert!(text.starts_with("RabbitMQ publish failed: "), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    destination.close().await;
}
