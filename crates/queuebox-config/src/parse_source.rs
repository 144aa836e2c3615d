//! Reading `sources.<name>` (config.md §12) with the rules that stay within one source:
//! CFG-106, CFG-108..110, CFG-112, CFG-113, CFG-116.

use std::time::Duration;

use queuebox_core::jsonpath::JsonPath;
use queuebox_core::template::{Template, TemplateField, TemplateFields};

use crate::model::HeaderName;
use crate::model_source::{Consumption, HttpSource, RateLimit, Source, SourceKind};
use crate::node::Node;
use crate::parse_common::{AuthKinds, read_inbound_auth, read_transform};
use crate::parse_filter::{check_source_path, read_filter};
use crate::parse_source_broker::{read_broker, read_kafka, read_nats, read_rabbitmq};
use crate::read::{Cx, Sec, index};
use crate::values::{self as v, Range};

const COMMON: &[&str] = &[
    "type",
    "consumption",
    "topic",
    "idempotencyKeyPath",
    "idempotencyKeyExpression",
    "aggregateIdPath",
    "aggregateIdExpression",
    "eventTypePath",
    "eventTypeExpression",
    "initialDelay",
    "scheduledAtHeader",
    "scheduledAtPath",
    "transform",
    "filter",
    "rateLimit",
    "storeRawBody",
];

const OWN_KEYS: &[(&str, &[&str])] = &[
    (
        "http",
        &[
            "path",
            "idempotencyKeyHeader",
            "aggregateIdHeader",
            "eventTypeHeader",
            "auth",
        ],
    ),
    (
        "rabbitmq",
        &[
            "eventTypeFromHeader",
            "attributeHeaders",
            "connectionUrl",
            "queueName",
            "prefetchCount",
            "declareQueue",
        ],
    ),
    (
        "kafka",
        &[
            "eventTypeFromHeader",
            "attributeHeaders",
            "bootstrapServers",
            "topics",
            "groupId",
            "autoOffsetReset",
            "maxPollRecords",
            "securityProtocol",
            "saslMechanism",
            "saslUsername",
            "saslPassword",
        ],
    ),
    (
        "nats",
        &[
            "eventTypeFromHeader",
            "attributeHeaders",
            "servers",
            "stream",
            "durable",
            "filterSubject",
            "ackWaitMs",
            "batchSize",
            "username",
            "password",
            "token",
        ],
    ),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Http,
    Rabbitmq,
    Kafka,
    Nats,
}

/// One source at `path`; `None` when its type is unknown or a required key is missing.
pub(crate) fn read_source(
    cx: &mut Cx<'_>,
    name: &str,
    path: &str,
    node: &Node,
    base_path: &str,
) -> Option<Source> {
    let mut s = Sec::open(cx, path, Some(node));
    let kind = match s.node("type") {
        None => Kind::Http,
        Some(n) => {
            let words = [
                ("http", Kind::Http),
                ("rabbitmq", Kind::Rabbitmq),
                ("kafka", Kind::Kafka),
                ("nats", Kind::Nats),
            ];
            let Some(kind) = v::enumeration(
                cx,
                &s.at("type"),
                n,
                &words,
                &["http", "rabbitmq", "kafka", "nats"],
            ) else {
                s.all();
                return None;
            };
            kind
        }
    };
    let type_name = match kind {
        Kind::Http => "http",
        Kind::Rabbitmq => "rabbitmq",
        Kind::Kafka => "kafka",
        Kind::Nats => "nats",
    };
    let consumption = s
        .node("consumption")
        .and_then(|n| {
            let words = [("push", Consumption::Push), ("pull", Consumption::Pull)];
            v::enumeration(cx, &s.at("consumption"), n, &words, &["push", "pull"])
        })
        .unwrap_or(Consumption::Push);
    let topic_path = s.at("topic");
    let topic_set = s.has("topic");
    let topic = match s.node("topic") {
        Some(n) => v::template(cx, &topic_path, n, TemplateFields::Source).and_then(|t| {
            // CFG-109: a push source needs a topic that is not blank.
            if consumption == Consumption::Push && t.as_str().trim().is_empty() {
                cx.error_at(&topic_path, n, "must not be blank");
                return None;
            }
            Some(t)
        }),
        None => {
            let default = if kind == Kind::Http {
                "{{ eventType }}"
            } else {
                "{{ source }}"
            };
            Template::parse(default, TemplateFields::Source).ok()
        }
    };
    let paths = |cx: &mut Cx<'_>, s: &mut Sec<'_>, key: &str| {
        s.node(key)
            .and_then(|n| v::path_list(cx, &s.at(key), n))
            .unwrap_or_default()
    };
    let expr = |cx: &mut Cx<'_>, s: &mut Sec<'_>, key: &str| {
        s.node(key).and_then(|n| v::expression(cx, &s.at(key), n))
    };
    let mut idempotency_key_path = paths(cx, &mut s, "idempotencyKeyPath");
    if kind != Kind::Http && !s.has("idempotencyKeyPath") {
        idempotency_key_path = JsonPath::parse("$.id").into_iter().collect();
    }
    let idempotency_key_expression = expr(cx, &mut s, "idempotencyKeyExpression");
    let aggregate_id_path = paths(cx, &mut s, "aggregateIdPath");
    let aggregate_id_expression = expr(cx, &mut s, "aggregateIdExpression");
    let event_type_path = paths(cx, &mut s, "eventTypePath");
    let event_type_expression = expr(cx, &mut s, "eventTypeExpression");
    let initial_delay = s
        .node("initialDelay")
        .and_then(|n| v::duration(cx, &s.at("initialDelay"), n))
        .unwrap_or(Duration::ZERO);
    let scheduled_at_header = s
        .node("scheduledAtHeader")
        .and_then(|n| v::header_name(cx, &s.at("scheduledAtHeader"), n));
    let scheduled_at_path = paths(cx, &mut s, "scheduledAtPath");
    let transform_node = s.node("transform");
    let transform = read_transform(cx, &s.at("transform"), transform_node);
    let filter_node = s.node("filter");
    let filter = read_filter(cx, &s.at("filter"), filter_node);
    let rate_limit = read_rate_limit(cx, &mut s, kind == Kind::Http);

    // CFG-113.
    let delay_path = s.at("initialDelay");
    let scheduled: Vec<&str> = ["scheduledAtHeader", "scheduledAtPath"]
        .into_iter()
        .filter(|k| s.has(k))
        .collect();
    if !scheduled.is_empty() && initial_delay.is_zero() && !cx.is_bad(&delay_path) {
        let keys = match scheduled.as_slice() {
            [one] => format!("{one} is set"),
            _ => "scheduledAtHeader and scheduledAtPath are set".to_owned(),
        };
        cx.error(&delay_path, format!("must be greater than 0s when {keys}"));
    }
    // CFG-112.
    if consumption == Consumption::Pull && topic_set && !cx.is_bad(&topic_path) {
        cx.warn(&topic_path, "unused, because consumption is pull");
    }

    let has_event_type = s.has("eventTypePath") || s.has("eventTypeExpression");
    let source_kind = match kind {
        Kind::Http => read_http_source(cx, &mut s, base_path),
        Kind::Rabbitmq | Kind::Kafka | Kind::Nats => {
            let broker = read_broker(cx, &mut s);
            // CFG-110, broker form.
            if consumption == Consumption::Push
                && uses_event_type(topic.as_ref())
                && !has_event_type
                && !broker.event_type_from_header
                && !cx.is_bad(&s.at("eventTypeFromHeader"))
            {
                cx.error(
                    &topic_path,
                    "uses {{ eventType }}, so set eventTypePath, eventTypeExpression or eventTypeFromHeader",
                );
            }
            match kind {
                Kind::Rabbitmq => read_rabbitmq(cx, &mut s, broker).map(SourceKind::Rabbitmq),
                Kind::Kafka => read_kafka(cx, &mut s, broker).map(SourceKind::Kafka),
                _ => read_nats(cx, &mut s, broker).map(SourceKind::Nats),
            }
        }
    };
    if kind == Kind::Http
        && consumption == Consumption::Push
        && uses_event_type(topic.as_ref())
        && !has_event_type
        && !s.has("eventTypeHeader")
    {
        // CFG-110, http form.
        cx.error(
            &topic_path,
            "uses {{ eventType }}, so set eventTypePath, eventTypeHeader or eventTypeExpression",
        );
    }
    // CFG-108 for the filter headers of an http source.
    if let Some(SourceKind::Http(http)) = &source_kind {
        for (list, rules) in [("require", &filter.require), ("exclude", &filter.exclude)] {
            for (i, rule) in rules.iter().enumerate() {
                let p = format!("{}.{list}", s.at("filter"));
                check_key_header(cx, &format!("{}.header", index(&p, i)), &rule.header, http);
            }
        }
        if let Some(h) = &scheduled_at_header {
            check_key_header(cx, &s.at("scheduledAtHeader"), h, http);
        }
    }
    let store_raw_body = s
        .node("storeRawBody")
        .and_then(|n| v::boolean(cx, &s.at("storeRawBody"), n))
        .unwrap_or(false);
    let mut known = COMMON.to_vec();
    known.extend(
        OWN_KEYS
            .iter()
            .find(|(t, _)| *t == type_name)
            .map(|(_, k)| *k)
            .unwrap_or_default(),
    );
    s.finish_typed(cx, Some(type_name), &known, OWN_KEYS);
    Some(Source {
        name: name.to_owned(),
        kind: source_kind?,
        consumption,
        topic: topic?,
        idempotency_key_path,
        idempotency_key_expression,
        aggregate_id_path,
        aggregate_id_expression,
        event_type_path,
        event_type_expression,
        initial_delay,
        scheduled_at_header,
        scheduled_at_path,
        transform,
        filter,
        rate_limit,
        store_raw_body,
    })
}

fn uses_event_type(topic: Option<&Template>) -> bool {
    topic.is_some_and(|t| t.uses(&TemplateField::EventType))
}

/// `rateLimit` (CFG-72); on a broker source a warning (CFG-116).
fn read_rate_limit(cx: &mut Cx<'_>, s: &mut Sec<'_>, http: bool) -> Option<RateLimit> {
    let path = s.at("rateLimit");
    let node = s.node("rateLimit")?;
    let mut r = Sec::open(cx, &path, Some(node));
    let rpm = r
        .node("requestsPerMinute")
        .and_then(|n| v::uint(cx, &r.at("requestsPerMinute"), n, Range::Positive));
    r.finish(cx, &["requestsPerMinute"]);
    if !http {
        cx.warn(
            &path,
            "ignored, because only http sources have a rate limit",
        );
    }
    rpm.map(|requests_per_minute| RateLimit {
        requests_per_minute,
    })
}

pub(crate) fn required<'n>(
    cx: &mut Cx<'_>,
    s: &mut Sec<'n>,
    key: &str,
    kind: &str,
) -> Option<&'n Node> {
    let node = s.node(key);
    if node.is_none() {
        cx.error(&s.at(key), format!("required for type {kind}"));
    }
    node
}

fn read_http_source(cx: &mut Cx<'_>, s: &mut Sec<'_>, base_path: &str) -> Option<SourceKind> {
    let path = required(cx, s, "path", "http").and_then(|n| {
        let p = s.at("path");
        let text = v::string(cx, &p, n)?;
        check_source_path(&text)
            .map_err(|message| cx.error_at(&p, n, message))
            .ok()?;
        Some(text)
    });
    let header = |cx: &mut Cx<'_>, s: &mut Sec<'_>, key: &str| {
        s.node(key).and_then(|n| v::header_name(cx, &s.at(key), n))
    };
    let mut idempotency_key_header = header(cx, s, "idempotencyKeyHeader");
    let aggregate_id_header = header(cx, s, "aggregateIdHeader");
    let event_type_header = header(cx, s, "eventTypeHeader");
    let auth_node = s.node("auth");
    let auth = read_inbound_auth(cx, &s.at("auth"), auth_node, AuthKinds::Source);
    // CFG-106: some way to find the idempotency key.
    let ways = [
        "idempotencyKeyPath",
        "idempotencyKeyHeader",
        "idempotencyKeyExpression",
    ];
    // INB-31: a preset whose sender sends a delivery id (`webhook-id`, `X-GitHub-Delivery`,
    // `X-Shopify-Event-Id`)
    // makes that header the key when none of the three is set.
    let preset_key = auth.as_ref().and_then(|a| a.event_id_header());
    let configured = ways.iter().any(|k| s.has(k));
    if !configured && preset_key.is_some() {
        idempotency_key_header = preset_key;
    } else if !configured {
        let block = s.path.clone();
        cx.error(
            &block,
            "needs one of idempotencyKeyPath, idempotencyKeyHeader, idempotencyKeyExpression",
        );
    }
    let path = path?;
    let route = if base_path == "/" {
        path.clone()
    } else {
        format!("{base_path}{path}")
    };
    let source = HttpSource {
        path,
        route,
        idempotency_key_header,
        aggregate_id_header,
        event_type_header,
        auth,
    };
    // CFG-108 for the key headers.
    for (key, header) in [
        ("idempotencyKeyHeader", &source.idempotency_key_header),
        ("aggregateIdHeader", &source.aggregate_id_header),
        ("eventTypeHeader", &source.event_type_header),
    ] {
        if let Some(h) = header {
            check_key_header(cx, &s.at(key), h, &source);
        }
    }
    Some(SourceKind::Http(source))
}

/// CFG-108: a header QueueBox never keeps cannot carry a key.
fn check_key_header(cx: &mut Cx<'_>, path: &str, header: &HeaderName, source: &HttpSource) {
    if ["Authorization", "Proxy-Authorization", "Cookie"]
        .iter()
        .any(|c| header.eq_ignore_case(c))
    {
        cx.error(
            path,
            format!("{header} is a credential header, which QueueBox does not keep"),
        );
    } else if source.auth.as_ref().is_some_and(|a| {
        a.credential_headers()
            .iter()
            .any(|auth| auth.eq_ignore_case(header.as_str()))
    }) {
        cx.error(
            path,
            format!("{header} is the auth header, which QueueBox does not keep"),
        );
    }
}
