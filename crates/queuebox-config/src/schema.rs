//! The shape of the configuration as variables see it (CFG-8): which segments are keys,
//! positions, names or free-form map keys. Typed blocks list the union of their kinds' keys;
//! the reader then reports a key of another kind (CFG-25).

use queuebox_core::{InboxColumns, OutboxColumns};

pub(crate) enum Shape {
    /// A scalar value.
    Leaf,
    /// A list of scalars; a variable without a position sets a list of one (CFG-11).
    LeafList,
    Section(&'static [(&'static str, &'static Shape)]),
    /// A list of sections, addressed by position (CFG-10).
    List(&'static Shape),
    /// A map of source or destination names (CFG-12).
    Names(&'static Shape),
    /// A map with free keys, lower-cased from a variable (CFG-13).
    FreeMap,
    /// A section whose keys are listed elsewhere (the column mapping).
    Keys(&'static [&'static str]),
}

use Shape::{FreeMap, Keys, Leaf, LeafList, List, Names, Section};

static TRANSFORM: Shape = Section(&[
    ("expression", &Leaf),
    ("timeoutMs", &Leaf),
    ("maxDepth", &Leaf),
    ("onError", &Leaf),
]);

static INBOUND_AUTH: Shape = Section(&[
    ("type", &Leaf),
    ("token", &Leaf),
    ("key", &Leaf),
    ("headerName", &Leaf),
    // One secret, or a list during a rotation (INB-21).
    ("secret", &LeafList),
    ("algorithm", &Leaf),
    ("signaturePrefix", &Leaf),
    ("timestampHeader", &Leaf),
    ("timestampTolerance", &Leaf),
    ("signaturePayloadFormat", &Leaf),
]);

static DESTINATION_AUTH: Shape = Section(&[
    ("type", &Leaf),
    ("clientId", &Leaf),
    ("clientSecret", &Leaf),
    ("tokenUrl", &Leaf),
    ("scope", &Leaf),
    ("extraParams", &FreeMap),
    ("username", &Leaf),
    ("password", &Leaf),
    ("headerName", &Leaf),
    ("headerValue", &Leaf),
]);

static DESTINATION: Shape = Section(&[
    ("type", &Leaf),
    ("headers", &FreeMap),
    ("transform", &TRANSFORM),
    (
        "rateLimit",
        &Section(&[("messagesPerSecond", &Leaf), ("burst", &Leaf)]),
    ),
    (
        "circuitBreaker",
        &Section(&[
            ("consecutiveFailures", &Leaf),
            ("failureRatePercent", &Leaf),
            ("windowMs", &Leaf),
            ("minimumPublishes", &Leaf),
            ("openMs", &Leaf),
        ]),
    ),
    (
        "signing",
        &Section(&[("type", &Leaf), ("secret", &LeafList)]),
    ),
    ("baseUrl", &Leaf),
    ("path", &Leaf),
    ("timeoutMs", &Leaf),
    ("auth", &DESTINATION_AUTH),
    (
        "signing",
        &Section(&[("type", &Leaf), ("secret", &LeafList)]),
    ),
    ("url", &Leaf),
    ("exchange", &Leaf),
    ("exchangeFrom", &Leaf),
    ("exchangeType", &Leaf),
    ("routingKeyTemplate", &Leaf),
    ("deliveryMode", &Leaf),
    ("bootstrapServers", &Leaf),
    ("topic", &Leaf),
    ("topicFrom", &Leaf),
    ("keyTemplate", &Leaf),
    ("securityProtocol", &Leaf),
    ("saslMechanism", &Leaf),
    ("saslUsername", &Leaf),
    ("saslPassword", &Leaf),
    ("servers", &Leaf),
    ("subject", &Leaf),
    ("subjectFrom", &Leaf),
    ("jetStream", &Leaf),
    ("username", &Leaf),
    ("password", &Leaf),
    ("token", &Leaf),
    ("file", &Leaf),
]);

static ROUTE: Shape = Section(&[
    ("topicPattern", &Leaf),
    ("destination", &Leaf),
    ("routingKeyTemplate", &Leaf),
    ("routingKeyMissingFieldDefault", &Leaf),
    ("transform", &TRANSFORM),
]);

static FILTER_RULE: Shape = Section(&[
    ("header", &Leaf),
    ("equals", &Leaf),
    ("in", &LeafList),
    ("matches", &Leaf),
    ("exists", &Leaf),
]);

static SOURCE: Shape = Section(&[
    ("type", &Leaf),
    ("consumption", &Leaf),
    ("topic", &Leaf),
    ("idempotencyKeyPath", &LeafList),
    ("idempotencyKeyExpression", &Leaf),
    ("aggregateIdPath", &LeafList),
    ("aggregateIdExpression", &Leaf),
    ("eventTypePath", &LeafList),
    ("eventTypeExpression", &Leaf),
    ("initialDelay", &Leaf),
    ("scheduledAtHeader", &Leaf),
    ("scheduledAtPath", &LeafList),
    ("transform", &TRANSFORM),
    (
        "filter",
        &Section(&[
            ("require", &List(&FILTER_RULE)),
            ("exclude", &List(&FILTER_RULE)),
        ]),
    ),
    ("rateLimit", &Section(&[("requestsPerMinute", &Leaf)])),
    ("storeRawBody", &Leaf),
    ("path", &Leaf),
    ("idempotencyKeyHeader", &Leaf),
    ("aggregateIdHeader", &Leaf),
    ("eventTypeHeader", &Leaf),
    ("auth", &INBOUND_AUTH),
    ("eventTypeFromHeader", &Leaf),
    (
        "attributeHeaders",
        &Section(&[
            ("idempotencyKey", &Leaf),
            ("aggregateId", &Leaf),
            ("eventType", &Leaf),
        ]),
    ),
    ("connectionUrl", &Leaf),
    ("queueName", &Leaf),
    ("prefetchCount", &Leaf),
    ("declareQueue", &Leaf),
    ("bootstrapServers", &Leaf),
    ("topics", &LeafList),
    ("groupId", &Leaf),
    ("autoOffsetReset", &Leaf),
    ("maxPollRecords", &Leaf),
    ("securityProtocol", &Leaf),
    ("saslMechanism", &Leaf),
    ("saslUsername", &Leaf),
    ("saslPassword", &Leaf),
    ("servers", &Leaf),
    ("stream", &Leaf),
    ("durable", &Leaf),
    ("filterSubject", &Leaf),
    ("ackWaitMs", &Leaf),
    ("batchSize", &Leaf),
    ("username", &Leaf),
    ("password", &Leaf),
    ("token", &Leaf),
]);

static RETENTION_TABLE: Shape = Section(&[
    ("policy", &Leaf),
    ("maxAge", &Leaf),
    ("maxCount", &Leaf),
    ("cleanupInterval", &Leaf),
    ("batchSize", &Leaf),
]);

pub(crate) static ROOT: Shape = Section(&[
    (
        "server",
        &Section(&[
            ("httpPort", &Leaf),
            ("managementPort", &Leaf),
            ("maxConnections", &Leaf),
        ]),
    ),
    (
        "database",
        &Section(&[
            ("type", &Leaf),
            ("url", &Leaf),
            ("username", &Leaf),
            ("password", &Leaf),
            ("poolSize", &Leaf),
            ("connectionTimeoutMs", &Leaf),
            ("startupTimeoutMs", &Leaf),
            ("migrate", &Leaf),
            ("outboxTableName", &Leaf),
            ("inboxTableName", &Leaf),
            (
                "columnMapping",
                &Section(&[
                    ("outbox", &Keys(OutboxColumns::KEYS)),
                    ("inbox", &Keys(InboxColumns::KEYS)),
                ]),
            ),
        ]),
    ),
    (
        "outbox",
        &Section(&[
            ("pollIntervalMs", &Leaf),
            ("batchSize", &Leaf),
            ("concurrency", &Leaf),
            ("retryBaseDelayMs", &Leaf),
            ("retryMaxDelayMs", &Leaf),
            ("maxAttempts", &Leaf),
            ("claimTimeoutMs", &Leaf),
            ("pendingGaugeIntervalMs", &Leaf),
            ("shutdownTimeoutMs", &Leaf),
            ("keyRunLength", &Leaf),
            ("capture", &Section(&[("mode", &Leaf)])),
        ]),
    ),
    (
        "inbox",
        &Section(&[
            ("basePath", &Leaf),
            ("maxBodyBytes", &Leaf),
            ("maxPendingBytes", &Leaf),
            ("storageWaitMs", &Leaf),
            (
                "relay",
                &Section(&[
                    ("enabled", &Leaf),
                    ("pollIntervalMs", &Leaf),
                    ("batchSize", &Leaf),
                    ("claimTimeoutMs", &Leaf),
                    ("pendingGaugeIntervalMs", &Leaf),
                    ("maxAttempts", &Leaf),
                ]),
            ),
        ]),
    ),
    (
        "http",
        &Section(&[
            ("maxErrorBodyBytes", &Leaf),
            ("blockPrivateAddresses", &Leaf),
        ]),
    ),
    (
        "admin",
        &Section(&[
            ("enabled", &Leaf),
            ("auth", &INBOUND_AUTH),
            ("insecure", &Leaf),
            ("maxTransformTimeoutMs", &Leaf),
            ("maxPayloadBytes", &Leaf),
        ]),
    ),
    ("destinations", &Names(&DESTINATION)),
    ("routes", &List(&ROUTE)),
    ("sources", &Names(&SOURCE)),
    (
        "retention",
        &Section(&[
            ("enabled", &Leaf),
            ("outbox", &RETENTION_TABLE),
            ("inbox", &RETENTION_TABLE),
        ]),
    ),
    ("log", &Section(&[("format", &Leaf), ("level", &Leaf)])),
]);

impl Shape {
    /// The keys of a section-like shape, for matching and suggestions.
    pub fn keys(&self) -> Vec<&'static str> {
        match self {
            Section(fields) => fields.iter().map(|(k, _)| *k).collect(),
            Keys(keys) => keys.to_vec(),
            _ => Vec::new(),
        }
    }

    /// The shape under `key` (matched without regard to case) and the key's spelling.
    pub fn field(&self, segment: &str) -> Option<(&'static str, &'static Shape)> {
        match self {
            Section(fields) => fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(segment))
                .map(|(k, s)| (*k, *s)),
            Keys(keys) => keys
                .iter()
                .find(|k| k.eq_ignore_ascii_case(segment))
                .map(|k| (*k, &Leaf)),
            _ => None,
        }
    }
}

/// The JSON Schema (draft 2020-12) of the configuration file, generated from [`ROOT`], the
/// same key table the variables and the unknown-key check read, so it cannot drift from what
/// the loader accepts (issue 14 item 13). It describes the shape: every key, every section,
/// and no other key. A value is any scalar, since `${NAME}` placeholders and `file:` secrets
/// can stand for any of them; the value rules themselves are `queuebox check`'s.
pub fn json_schema() -> serde_json::Value {
    let mut schema = shape_schema(&ROOT);
    let object = schema.as_object_mut().expect("the root is a section");
    let mut head = serde_json::Map::new();
    head.insert(
        "$schema".into(),
        "https://json-schema.org/draft/2020-12/schema".into(),
    );
    head.insert("title".into(), "QueueBox configuration".into());
    head.insert(
        "description".into(),
        "Generated by `queuebox config schema` from the configuration model. Every key and section QueueBox reads; values are checked by `queuebox check`.".into(),
    );
    head.append(object);
    serde_json::Value::Object(head)
}

fn scalar() -> serde_json::Value {
    serde_json::json!({ "type": ["string", "number", "boolean", "null"] })
}

fn shape_schema(shape: &Shape) -> serde_json::Value {
    use serde_json::json;
    match shape {
        Leaf => scalar(),
        LeafList => json!({ "anyOf": [scalar(), { "type": "array", "items": scalar() }] }),
        Section(fields) => {
            let properties: serde_json::Map<String, serde_json::Value> = fields
                .iter()
                .map(|(key, shape)| ((*key).to_owned(), shape_schema(shape)))
                .collect();
            json!({ "type": "object", "properties": properties, "additionalProperties": false })
        }
        List(item) => json!({ "type": "array", "items": shape_schema(item) }),
        Names(item) => json!({ "type": "object", "additionalProperties": shape_schema(item) }),
        FreeMap => json!({ "type": "object", "additionalProperties": scalar() }),
        Keys(keys) => {
            let properties: serde_json::Map<String, serde_json::Value> = keys
                .iter()
                .map(|key| ((*key).to_owned(), scalar()))
                .collect();
            json!({ "type": "object", "properties": properties, "additionalProperties": false })
        }
    }
}
