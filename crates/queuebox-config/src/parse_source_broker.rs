//! Reading the keys of broker sources (config.md §12.4): `rabbitmq`, `kafka`, `nats` and the
//! keys they share (CFG-74..77).

use crate::model::HeaderName;
use crate::model_source::{
    AttributeHeaders, AutoOffsetReset, BrokerAttributes, KafkaSource, NatsSource, RabbitmqSource,
};
use crate::node::Node;
use crate::parse_common::{
    read_host_ports, read_kafka_security, read_nats_credentials, read_nats_servers,
};
use crate::parse_source::required;
use crate::parse_urls::amqp_url;
use crate::read::{Cx, Sec, index, list_items};
use crate::values::{self as v, Range};

pub(crate) fn read_broker(cx: &mut Cx<'_>, s: &mut Sec<'_>) -> BrokerAttributes {
    let event_type_from_header = s
        .node("eventTypeFromHeader")
        .and_then(|n| v::boolean(cx, &s.at("eventTypeFromHeader"), n))
        .unwrap_or(false);
    let node = s.node("attributeHeaders");
    let mut a = Sec::open(cx, &s.at("attributeHeaders"), node);
    let mut header = |cx: &mut Cx<'_>, key: &str, default: &'static str| {
        a.node(key)
            .and_then(|n| v::header_name(cx, &a.at(key), n))
            .unwrap_or_else(|| HeaderName::known(default))
    };
    let attribute_headers = AttributeHeaders {
        idempotency_key: header(cx, "idempotencyKey", "x-idempotency-key"),
        aggregate_id: header(cx, "aggregateId", "x-aggregate-id"),
        event_type: header(cx, "eventType", "x-event-type"),
    };
    a.finish(cx, &["idempotencyKey", "aggregateId", "eventType"]);
    BrokerAttributes {
        event_type_from_header,
        attribute_headers,
    }
}

pub(crate) fn read_rabbitmq(
    cx: &mut Cx<'_>,
    s: &mut Sec<'_>,
    broker: BrokerAttributes,
) -> Option<RabbitmqSource> {
    let url = required(cx, s, "connectionUrl", "rabbitmq")
        .and_then(|n| amqp_url(cx, &s.at("connectionUrl"), n));
    let queue_name = required(cx, s, "queueName", "rabbitmq")
        .and_then(|n| v::non_blank(cx, &s.at("queueName"), n));
    let prefetch_count = s
        .node("prefetchCount")
        .and_then(|n| v::int(cx, &s.at("prefetchCount"), n, Range::Between(1, 65535)))
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(10);
    let declare_queue = s
        .node("declareQueue")
        .and_then(|n| v::boolean(cx, &s.at("declareQueue"), n))
        .unwrap_or(false);
    let url = url?;
    Some(RabbitmqSource {
        masked_url: crate::mask::mask_url(url.expose()),
        connection_url: url,
        queue_name: queue_name?,
        prefetch_count,
        declare_queue,
        broker,
    })
}

pub(crate) fn read_kafka(
    cx: &mut Cx<'_>,
    s: &mut Sec<'_>,
    broker: BrokerAttributes,
) -> Option<KafkaSource> {
    let servers = required(cx, s, "bootstrapServers", "kafka")
        .and_then(|n| read_host_ports(cx, &s.at("bootstrapServers"), n));
    let topics =
        required(cx, s, "topics", "kafka").and_then(|n| read_topics(cx, &s.at("topics"), n));
    let group_id =
        required(cx, s, "groupId", "kafka").and_then(|n| v::non_blank(cx, &s.at("groupId"), n));
    let auto_offset_reset = s
        .node("autoOffsetReset")
        .and_then(|n| {
            let words = [
                ("earliest", AutoOffsetReset::Earliest),
                ("latest", AutoOffsetReset::Latest),
            ];
            v::enumeration(
                cx,
                &s.at("autoOffsetReset"),
                n,
                &words,
                &["earliest", "latest"],
            )
        })
        .unwrap_or(AutoOffsetReset::Earliest);
    let max_poll_records = s
        .node("maxPollRecords")
        .and_then(|n| v::uint(cx, &s.at("maxPollRecords"), n, Range::Positive))
        .unwrap_or(100);
    let security = read_kafka_security(cx, s);
    Some(KafkaSource {
        bootstrap_servers: servers?,
        topics: topics?,
        group_id: group_id?,
        auto_offset_reset,
        max_poll_records,
        security,
        broker,
    })
}

/// Kafka `topics` (CFG-76): not empty; each 1 to 249 letters, digits, `.`, `_` or `-`.
fn read_topics(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<Vec<String>> {
    let items = list_items(cx, path, node)?;
    if items.is_empty() {
        cx.error_at(path, node, "must not be empty");
        return None;
    }
    let mut topics = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = index(path, i);
        let topic = v::string(cx, &p, item)?;
        let valid = (1..=249).contains(&topic.chars().count())
            && topic
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !valid {
            cx.error_at(
                &p,
                item,
                format!(
                    "must be 1 to 249 letters, digits, ., _ or -, got {}",
                    crate::diag::quote(&topic)
                ),
            );
            return None;
        }
        topics.push(topic);
    }
    Some(topics)
}

pub(crate) fn read_nats(
    cx: &mut Cx<'_>,
    s: &mut Sec<'_>,
    broker: BrokerAttributes,
) -> Option<NatsSource> {
    let servers =
        required(cx, s, "servers", "nats").and_then(|n| read_nats_servers(cx, &s.at("servers"), n));
    let stream =
        required(cx, s, "stream", "nats").and_then(|n| v::non_blank(cx, &s.at("stream"), n));
    let durable =
        required(cx, s, "durable", "nats").and_then(|n| v::non_blank(cx, &s.at("durable"), n));
    let filter_subject = s
        .node("filterSubject")
        .and_then(|n| v::non_blank(cx, &s.at("filterSubject"), n));
    let ack_wait_ms = s
        .node("ackWaitMs")
        .and_then(|n| v::ms(cx, &s.at("ackWaitMs"), n, Range::Positive))
        .unwrap_or(30_000);
    let batch_size = s
        .node("batchSize")
        .and_then(|n| v::uint(cx, &s.at("batchSize"), n, Range::Positive))
        .unwrap_or(100);
    let credentials = read_nats_credentials(cx, s);
    Some(NatsSource {
        servers: servers?,
        stream: stream?,
        durable: durable?,
        filter_subject,
        ack_wait_ms,
        batch_size,
        credentials,
        broker,
    })
}
