//! Reading `destinations` and `routes` (config.md §9) with the rules CFG-97..105 that stay
//! within one destination or route.

use queuebox_core::Secret;
use queuebox_core::template::{Template, TemplateFields};

use crate::mask::mask_url;
use crate::model::HeaderName;
use crate::model_destination::{
    Address, AddressColumn, CircuitBreaker, DeliveryMode, Destination, DestinationKind,
    DestinationRateLimit, ExchangeType, HttpDestination, KafkaDestination, LogDestination,
    NatsDestination, RabbitmqDestination,
};
use crate::node::Node;
use crate::parse_common::{
    KAFKA_SECURITY_KEYS, read_host_ports, read_kafka_security, read_nats_credentials,
    read_nats_servers, read_transform, read_type,
};
use crate::parse_dest_auth::read_destination_auth;
use crate::parse_urls::{amqp_url, has_dot_segment, http_url};
use crate::read::{Cx, Sec, join};
use crate::values::{self as v, Range};

const TYPES: &[&str] = &["http", "kafka", "log", "nats", "rabbitmq"];
const SHARED: &[&str] = &[
    "type",
    "headers",
    "transform",
    "rateLimit",
    "circuitBreaker",
];

pub(crate) const OWN_KEYS: &[(&str, &[&str])] = &[
    ("http", &["baseUrl", "path", "timeoutMs", "auth", "signing"]),
    (
        "rabbitmq",
        &[
            "url",
            "exchange",
            "exchangeFrom",
            "exchangeType",
            "routingKeyTemplate",
            "deliveryMode",
        ],
    ),
    (
        "kafka",
        &[
            "bootstrapServers",
            "topic",
            "topicFrom",
            "keyTemplate",
            "timeoutMs",
            "securityProtocol",
            "saslMechanism",
            "saslUsername",
            "saslPassword",
        ],
    ),
    (
        "nats",
        &[
            "servers",
            "subject",
            "subjectFrom",
            "jetStream",
            "timeoutMs",
            "username",
            "password",
            "token",
        ],
    ),
    ("log", &["file"]),
];

/// DST-8: names only QueueBox sets.
const RESERVED: &[&str] = &["x-message-id", "x-topic", "x-attempt", "x-message-key"];
const RESERVED_HTTP: &[&str] = &[
    "content-type",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "upgrade",
    "te",
    "trailer",
    "expect",
    "content-encoding",
];

pub(crate) fn is_reserved(name: &str, http: bool) -> bool {
    let lower = name.to_ascii_lowercase();
    RESERVED.contains(&lower.as_str()) || (http && RESERVED_HTTP.contains(&lower.as_str()))
}

/// One destination at `path`; `None` when its type is missing or unknown.
pub(crate) fn read_destination(
    cx: &mut Cx<'_>,
    name: &str,
    path: &str,
    node: &Node,
) -> Option<Destination> {
    let mut s = Sec::open(cx, path, Some(node));
    let Some(ty) = read_type(cx, &mut s, TYPES) else {
        s.all();
        return None;
    };
    let headers = read_headers(cx, &mut s, ty == "http");
    let transform_node = s.node("transform");
    let transform = read_transform(cx, &s.at("transform"), transform_node);
    let rate_limit = read_rate_limit(cx, &mut s);
    let circuit_breaker = read_circuit_breaker(cx, &mut s);
    let kind = match ty {
        "http" => read_http(cx, &mut s).map(DestinationKind::Http),
        "rabbitmq" => read_rabbitmq(cx, &mut s).map(DestinationKind::Rabbitmq),
        "kafka" => read_kafka(cx, &mut s).map(DestinationKind::Kafka),
        "nats" => read_nats(cx, &mut s).map(DestinationKind::Nats),
        _ => {
            let file = s
                .node("file")
                .and_then(|n| v::non_blank(cx, &s.at("file"), n));
            Some(DestinationKind::Log(LogDestination {
                file: file.map(|f| cx.cwd.join(f)),
            }))
        }
    };
    let mut known = SHARED.to_vec();
    known.extend(
        OWN_KEYS
            .iter()
            .find(|(t, _)| *t == ty)
            .map(|(_, k)| *k)
            .unwrap_or_default(),
    );
    s.finish_typed(cx, Some(ty), &known, OWN_KEYS);
    Some(Destination {
        name: name.to_owned(),
        kind: kind?,
        headers,
        transform,
        rate_limit,
        circuit_breaker,
    })
}

/// `rateLimit` (CFG-49b): `messagesPerSecond` required, `burst` defaults to it.
fn read_rate_limit(cx: &mut Cx<'_>, s: &mut Sec<'_>) -> Option<DestinationRateLimit> {
    let path = s.at("rateLimit");
    let node = s.node("rateLimit")?;
    let mut r = Sec::open(cx, &path, Some(node));
    let rate = match r.node("messagesPerSecond") {
        Some(n) => v::uint(cx, &r.at("messagesPerSecond"), n, Range::Positive),
        None => {
            cx.error(&r.at("messagesPerSecond"), "required in rateLimit");
            None
        }
    };
    let burst = r
        .node("burst")
        .map(|n| v::uint(cx, &r.at("burst"), n, Range::Positive));
    r.finish(cx, &["messagesPerSecond", "burst"]);
    let messages_per_second = rate?;
    Some(DestinationRateLimit {
        messages_per_second,
        burst: match burst {
            Some(burst) => burst?,
            None => messages_per_second,
        },
    })
}

/// `circuitBreaker` (CFG-49c); every key has a default, so `circuitBreaker: {}` turns it on.
fn read_circuit_breaker(cx: &mut Cx<'_>, s: &mut Sec<'_>) -> Option<CircuitBreaker> {
    let path = s.at("circuitBreaker");
    let node = s.node("circuitBreaker")?;
    let mut b = Sec::open(cx, &path, Some(node));
    let mut ok = true;
    let mut count = |cx: &mut Cx<'_>, b: &mut Sec<'_>, key: &str, range: Range| -> Option<u32> {
        let n = b.node(key)?;
        let value = v::uint(cx, &b.at(key), n, range);
        ok &= value.is_some();
        value
    };
    let consecutive_failures = count(cx, &mut b, "consecutiveFailures", Range::Positive);
    let failure_rate_percent = count(cx, &mut b, "failureRatePercent", Range::Between(1, 100));
    let minimum_publishes = count(cx, &mut b, "minimumPublishes", Range::Positive);
    let mut ms = |cx: &mut Cx<'_>, b: &mut Sec<'_>, key: &str| -> Option<u64> {
        let n = b.node(key)?;
        let value = v::ms(cx, &b.at(key), n, Range::Positive);
        ok &= value.is_some();
        value
    };
    let window_ms = ms(cx, &mut b, "windowMs");
    let open_ms = ms(cx, &mut b, "openMs");
    b.finish(
        cx,
        &[
            "consecutiveFailures",
            "failureRatePercent",
            "windowMs",
            "minimumPublishes",
            "openMs",
        ],
    );
    ok.then_some(CircuitBreaker {
        consecutive_failures: consecutive_failures.unwrap_or(5),
        failure_rate_percent,
        window_ms: window_ms.unwrap_or(60_000),
        minimum_publishes: minimum_publishes.unwrap_or(20),
        open_ms: open_ms.unwrap_or(30_000),
    })
}

/// Static headers (CFG-49, DST-8, DST-10).
fn read_headers(cx: &mut Cx<'_>, s: &mut Sec<'_>, http: bool) -> Vec<(HeaderName, Secret)> {
    let path = s.at("headers");
    let node = s.node("headers");
    let mut map = Sec::open(cx, &path, node);
    let mut out: Vec<(HeaderName, Secret)> = Vec::new();
    for (key, value) in map.all() {
        let p = join(&path, key);
        let name = match crate::model::parse_header_name(key) {
            Ok(name) => name,
            Err(message) => {
                cx.error_at(&p, value, message);
                continue;
            }
        };
        if is_reserved(key, http) {
            cx.error_at(&p, value, "a reserved header name; only QueueBox sets it");
            continue;
        }
        if let Some((earlier, _)) = out.iter().find(|(n, _)| n.eq_ignore_case(key)) {
            cx.error_at(
                &p,
                value,
                format!("the same header as {}", join(&path, earlier.as_str())),
            );
            continue;
        }
        let Some(secret) = v::secret(cx, &p, value) else {
            continue;
        };
        if secret.expose().contains(['\r', '\n', '\0']) {
            cx.error_at(&p, value, "must not contain CR, LF or NUL");
            continue;
        }
        out.push((name, secret));
    }
    out
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

fn read_http(cx: &mut Cx<'_>, s: &mut Sec<'_>) -> Option<HttpDestination> {
    let base_url =
        required(cx, s, "baseUrl", "http").and_then(|n| http_url(cx, &s.at("baseUrl"), n));
    let path = match s.node("path") {
        Some(n) => v::string(cx, &s.at("path"), n).and_then(|text| {
            if has_dot_segment(&text) {
                cx.error_at(&s.at("path"), n, "must not contain a . or .. segment");
                None
            } else {
                Some(text)
            }
        }),
        None => Some("/".to_owned()),
    };
    let timeout_ms = s
        .node("timeoutMs")
        .and_then(|n| v::ms(cx, &s.at("timeoutMs"), n, Range::Positive))
        .unwrap_or(30_000);
    let auth_node = s.node("auth");
    let auth = read_destination_auth(cx, &s.at("auth"), auth_node);
    let signing_node = s.node("signing");
    let signing = crate::parse_common::read_signing(cx, &s.at("signing"), signing_node);
    Some(HttpDestination {
        base_url: base_url?,
        path: path?,
        timeout_ms,
        auth,
        signing,
    })
}

/// An address template and its `*From` column (CFG-61, CFG-98, CFG-105).
fn read_address(cx: &mut Cx<'_>, s: &mut Sec<'_>, key: &str, from_key: &str) -> Option<Address> {
    let template_path = s.at(key);
    let template = s.node(key).and_then(|n| {
        let t = v::template(cx, &template_path, n, TemplateFields::Destination)?;
        if t.as_str().trim().is_empty() {
            cx.error_at(&template_path, n, "must not be blank");
            return None;
        }
        Some(t)
    });
    let from_path = s.at(from_key);
    let column = s.node(from_key).and_then(|n| {
        let text = v::string(cx, &from_path, n)?;
        match text.as_str() {
            "aggregate_type" => Some(AddressColumn::AggregateType),
            "topic" => Some(AddressColumn::Topic),
            "key" => Some(AddressColumn::Key),
            _ => {
                cx.error_at(&from_path, n, "must be aggregate_type, topic or key");
                None
            }
        }
    });
    let (has_template, has_column) = (s.has(key), s.has(from_key));
    if !has_template && !has_column {
        let block = s.path.clone();
        cx.error(&block, format!("set {key} or {from_key}"));
        return None;
    }
    if has_column {
        column.map(Address::Column)
    } else {
        template.map(Address::Template)
    }
}

fn key_template(cx: &mut Cx<'_>, s: &mut Sec<'_>, key: &str, default: &str) -> Option<Template> {
    match s.node(key) {
        Some(n) => v::template(cx, &s.at(key), n, TemplateFields::Destination),
        None => Template::parse(default, TemplateFields::Destination).ok(),
    }
}

fn read_rabbitmq(cx: &mut Cx<'_>, s: &mut Sec<'_>) -> Option<RabbitmqDestination> {
    let url = required(cx, s, "url", "rabbitmq").and_then(|n| amqp_url(cx, &s.at("url"), n));
    let exchange = read_address(cx, s, "exchange", "exchangeFrom");
    let exchange_type = s
        .node("exchangeType")
        .and_then(|n| {
            let words = [
                ("topic", ExchangeType::Topic),
                ("direct", ExchangeType::Direct),
                ("fanout", ExchangeType::Fanout),
            ];
            v::enumeration(
                cx,
                &s.at("exchangeType"),
                n,
                &words,
                &["topic", "direct", "fanout"],
            )
        })
        .unwrap_or(ExchangeType::Topic);
    let routing_key_template = key_template(cx, s, "routingKeyTemplate", "{{ topic }}");
    let delivery_mode = s
        .node("deliveryMode")
        .and_then(|n| {
            let words = [
                ("persistent", DeliveryMode::Persistent),
                ("transient", DeliveryMode::Transient),
            ];
            v::enumeration(
                cx,
                &s.at("deliveryMode"),
                n,
                &words,
                &["persistent", "transient"],
            )
        })
        .unwrap_or(DeliveryMode::Persistent);
    let url = url?;
    Some(RabbitmqDestination {
        masked_url: mask_url(url.expose()),
        url,
        exchange: exchange?,
        exchange_type,
        routing_key_template: routing_key_template?,
        delivery_mode,
    })
}

fn read_kafka(cx: &mut Cx<'_>, s: &mut Sec<'_>) -> Option<KafkaDestination> {
    let servers = required(cx, s, "bootstrapServers", "kafka")
        .and_then(|n| read_host_ports(cx, &s.at("bootstrapServers"), n));
    let topic = read_address(cx, s, "topic", "topicFrom");
    let key_template = key_template(cx, s, "keyTemplate", "{{ key }}");
    let timeout_ms = s
        .node("timeoutMs")
        .and_then(|n| v::ms(cx, &s.at("timeoutMs"), n, Range::AtLeast(2000)))
        .unwrap_or(30_000);
    let security = read_kafka_security(cx, s);
    debug_assert!(
        KAFKA_SECURITY_KEYS
            .iter()
            .all(|k| OWN_KEYS[2].1.contains(k))
    );
    Some(KafkaDestination {
        bootstrap_servers: servers?,
        topic: topic?,
        key_template: key_template?,
        timeout_ms,
        security,
    })
}

fn read_nats(cx: &mut Cx<'_>, s: &mut Sec<'_>) -> Option<NatsDestination> {
    let servers =
        required(cx, s, "servers", "nats").and_then(|n| read_nats_servers(cx, &s.at("servers"), n));
    let subject = read_address(cx, s, "subject", "subjectFrom");
    let jet_stream = s
        .node("jetStream")
        .and_then(|n| v::boolean(cx, &s.at("jetStream"), n))
        .unwrap_or(true);
    let timeout_ms = s
        .node("timeoutMs")
        .and_then(|n| v::ms(cx, &s.at("timeoutMs"), n, Range::Positive))
        .unwrap_or(30_000);
    let credentials = read_nats_credentials(cx, s);
    Some(NatsDestination {
        servers: servers?,
        subject: subject?,
        jet_stream,
        timeout_ms,
        credentials,
    })
}
