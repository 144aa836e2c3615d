//! Blocks that several sections share: transform blocks (CFG-80), source and admin auth
//! (CFG-73), Kafka security (CFG-99), NATS credentials (CFG-100) and server lists.

use crate::model::{
    HeaderName, HmacAlgorithm, HmacAuth, InboundAuth, OnError, PresetAuth, SignaturePayloadFormat,
    TransformConfig, WebhookPreset,
};
use crate::model_destination::{
    KafkaSasl, KafkaSecurity, NatsCredentials, SaslMechanism, SecurityProtocol,
};
use crate::node::Node;
use crate::read::{Cx, Sec};
use crate::values::{self as v, Range};

pub(crate) const TRANSFORM_KEYS: &[&str] = &["expression", "timeoutMs", "maxDepth", "onError"];

/// A transform block at `path` (CFG-80).
pub(crate) fn read_transform(
    cx: &mut Cx<'_>,
    path: &str,
    node: Option<&Node>,
) -> Option<TransformConfig> {
    let node = node?;
    let mut s = Sec::open(cx, path, Some(node));
    let expression = match s.node("expression") {
        Some(n) => v::expression(cx, &s.at("expression"), n),
        None => {
            cx.error(&s.at("expression"), "required");
            None
        }
    };
    let timeout_ms = s
        .node("timeoutMs")
        .and_then(|n| v::ms(cx, &s.at("timeoutMs"), n, Range::Positive))
        .unwrap_or(100);
    let max_depth = s
        .node("maxDepth")
        .and_then(|n| v::uint(cx, &s.at("maxDepth"), n, Range::Positive))
        .unwrap_or(100);
    let on_error = s
        .node("onError")
        .and_then(|n| {
            let words = [
                ("Fail", OnError::Fail),
                ("Skip", OnError::Skip),
                ("Dead", OnError::Dead),
            ];
            v::enumeration(cx, &s.at("onError"), n, &words, &["Fail", "Skip", "Dead"])
        })
        .unwrap_or(OnError::Fail);
    s.finish(cx, TRANSFORM_KEYS);
    Some(TransformConfig {
        expression: expression.unwrap_or_default(),
        timeout_ms,
        max_depth,
        on_error,
    })
}

pub(crate) const INBOUND_AUTH_TYPES: &[(&str, &[&str])] = &[
    ("api-key", &["key", "headerName"]),
    ("bearer", &["token"]),
    (
        "hmac",
        &[
            "secret",
            "headerName",
            "algorithm",
            "signaturePrefix",
            "timestampHeader",
            "timestampTolerance",
            "signaturePayloadFormat",
        ],
    ),
];

/// The sender presets (CFG-73a): only the secret, and the replay window where the signature
/// covers a timestamp.
pub(crate) const PRESET_AUTH_TYPES: &[(&str, &[&str])] = &[
    ("github", &["secret"]),
    ("shopify", &["secret"]),
    ("slack", &["secret", "timestampTolerance"]),
    ("standard-webhooks", &["secret", "timestampTolerance"]),
    ("stripe", &["secret", "timestampTolerance"]),
];

const PRESETS: [WebhookPreset; 5] = [
    WebhookPreset::Stripe,
    WebhookPreset::Github,
    WebhookPreset::StandardWebhooks,
    WebhookPreset::Shopify,
    WebhookPreset::Slack,
];

/// Which auth kinds a block accepts: sources take the sender presets, `admin` does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AuthKinds {
    Source,
    Admin,
}

/// The source and admin auth block at `path` (CFG-73, CFG-97, CFG-115).
pub(crate) fn read_inbound_auth(
    cx: &mut Cx<'_>,
    path: &str,
    node: Option<&Node>,
    kinds: AuthKinds,
) -> Option<InboundAuth> {
    let node = node?;
    let mut s = Sec::open(cx, path, Some(node));
    let mut types: Vec<(&str, &[&str])> = INBOUND_AUTH_TYPES.to_vec();
    if kinds == AuthKinds::Source {
        types.extend_from_slice(PRESET_AUTH_TYPES);
        types.sort_unstable_by_key(|(t, _)| *t);
    }
    let names: Vec<&str> = types.iter().map(|(t, _)| *t).collect();
    let Some(kind) = read_type(cx, &mut s, &names) else {
        // Without a known type, the other keys cannot be judged; only the type is reported.
        s.all();
        return None;
    };
    let required = |cx: &mut Cx<'_>, s: &mut Sec<'_>, key: &str| match s.node(key) {
        Some(n) => v::required_secret(cx, &s.at(key), n),
        None => {
            cx.error(&s.at(key), format!("required for type {kind}"));
            None
        }
    };
    // `secret` of hmac and the presets: one secret, or a list during rotation.
    let secrets = |cx: &mut Cx<'_>, s: &mut Sec<'_>| match s.node("secret") {
        Some(n) => secret_list(cx, &s.at("secret"), n),
        None => {
            cx.error(&s.at("secret"), format!("required for type {kind}"));
            None
        }
    };
    let header = |cx: &mut Cx<'_>, s: &mut Sec<'_>, key: &str| {
        s.node(key).and_then(|n| v::header_name(cx, &s.at(key), n))
    };
    let auth = match kind {
        "bearer" => required(cx, &mut s, "token").map(|token| InboundAuth::Bearer { token }),
        "api-key" => {
            let key = required(cx, &mut s, "key");
            let header_name =
                header(cx, &mut s, "headerName").unwrap_or_else(|| HeaderName::known("X-API-Key"));
            key.map(|key| InboundAuth::ApiKey { key, header_name })
        }
        "hmac" => {
            let secrets = secrets(cx, &mut s);
            read_hmac(cx, &mut s, secrets)
        }
        preset => {
            let preset = PRESETS
                .into_iter()
                .find(|p| p.type_name() == preset)
                .expect("read_type returns a listed kind");
            let secrets = secrets(cx, &mut s);
            let timestamp_tolerance_ms = if preset.has_timestamp() {
                s.node("timestampTolerance")
                    .and_then(|n| v::ms(cx, &s.at("timestampTolerance"), n, Range::Positive))
                    .unwrap_or(300_000)
            } else {
                0
            };
            secrets.map(|secrets| {
                InboundAuth::Preset(PresetAuth {
                    preset,
                    secrets,
                    timestamp_tolerance_ms,
                })
            })
        }
    };
    let own = types
        .iter()
        .find(|(t, _)| *t == kind)
        .map(|(_, keys)| *keys)
        .unwrap_or_default();
    let mut known = vec!["type"];
    known.extend_from_slice(own);
    s.finish_typed(cx, Some(kind), &known, &types);
    auth
}

/// The `signing` block of an `http` destination (CFG-50a): `type: standard-webhooks` and
/// `secret`, one or a list during rotation.
pub(crate) fn read_signing(
    cx: &mut Cx<'_>,
    path: &str,
    node: Option<&Node>,
) -> Option<crate::model_destination::DeliverySigning> {
    let node = node?;
    let mut s = Sec::open(cx, path, Some(node));
    let kind = read_type(cx, &mut s, &["standard-webhooks"]);
    let secrets = match s.node("secret") {
        Some(n) => secret_list(cx, &s.at("secret"), n),
        None => {
            cx.error(&s.at("secret"), "required for type standard-webhooks");
            None
        }
    };
    s.finish(cx, &["type", "secret"]);
    kind?;
    Some(crate::model_destination::DeliverySigning { secrets: secrets? })
}

/// A required secret, or a non-empty list of them (rotation: the first is the current one,
/// the order does not matter to the check).
fn secret_list(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<Vec<queuebox_core::Secret>> {
    match &node.kind {
        crate::node::Kind::Seq(items) => {
            if items.is_empty() {
                cx.error_at(path, node, "must not be empty");
                return None;
            }
            let parsed: Vec<Option<queuebox_core::Secret>> = items
                .iter()
                .enumerate()
                .map(|(i, item)| v::required_secret(cx, &crate::read::index(path, i), item))
                .collect();
            parsed.into_iter().collect()
        }
        _ => v::required_secret(cx, path, node).map(|secret| vec![secret]),
    }
}

fn read_hmac(
    cx: &mut Cx<'_>,
    s: &mut Sec<'_>,
    secrets: Option<Vec<queuebox_core::Secret>>,
) -> Option<InboundAuth> {
    let header_name = s
        .node("headerName")
        .and_then(|n| v::header_name(cx, &s.at("headerName"), n))
        .unwrap_or_else(|| HeaderName::known("X-Signature"));
    let algorithm = s
        .node("algorithm")
        .and_then(|n| {
            let words = [
                ("HmacSHA256", HmacAlgorithm::HmacSha256),
                ("HmacSHA512", HmacAlgorithm::HmacSha512),
                ("HmacSHA1", HmacAlgorithm::HmacSha1),
            ];
            v::enumeration(
                cx,
                &s.at("algorithm"),
                n,
                &words,
                &["HmacSHA256", "HmacSHA512", "HmacSHA1"],
            )
        })
        .unwrap_or(HmacAlgorithm::HmacSha256);
    let signature_prefix = s
        .node("signaturePrefix")
        .and_then(|n| v::string(cx, &s.at("signaturePrefix"), n))
        .unwrap_or_else(|| {
            match algorithm {
                HmacAlgorithm::HmacSha256 => "sha256=",
                HmacAlgorithm::HmacSha512 => "sha512=",
                HmacAlgorithm::HmacSha1 => "sha1=",
            }
            .to_owned()
        });
    let timestamp_header = s
        .node("timestampHeader")
        .and_then(|n| v::header_name(cx, &s.at("timestampHeader"), n));
    let timestamp_tolerance_ms = s
        .node("timestampTolerance")
        .and_then(|n| v::ms(cx, &s.at("timestampTolerance"), n, Range::Positive))
        .unwrap_or(300_000);
    let format_path = s.at("signaturePayloadFormat");
    let explicit_format = s.node("signaturePayloadFormat").and_then(|n| {
        let words = [
            ("BODY", SignaturePayloadFormat::Body),
            ("body", SignaturePayloadFormat::Body),
            (
                "TIMESTAMP_DOT_BODY",
                SignaturePayloadFormat::TimestampDotBody,
            ),
            (
                "timestamp-dot-body",
                SignaturePayloadFormat::TimestampDotBody,
            ),
        ];
        v::enumeration(cx, &format_path, n, &words, &["BODY", "TIMESTAMP_DOT_BODY"])
    });
    // CFG-115.
    let header_path = s.at("timestampHeader");
    if explicit_format == Some(SignaturePayloadFormat::TimestampDotBody)
        && !s.has("timestampHeader")
        && !cx.is_bad(&header_path)
    {
        cx.error(&format_path, "TIMESTAMP_DOT_BODY needs timestampHeader");
    }
    let payload_format = explicit_format.unwrap_or(if timestamp_header.is_some() {
        SignaturePayloadFormat::TimestampDotBody
    } else {
        SignaturePayloadFormat::Body
    });
    Some(InboundAuth::Hmac(HmacAuth {
        secrets: secrets?,
        header_name,
        algorithm,
        signature_prefix,
        timestamp_header,
        timestamp_tolerance_ms,
        payload_format,
    }))
}

/// The `type` of an auth block (CFG-97): required, one of `kinds` (alphabetical).
pub(crate) fn read_type<'k>(
    cx: &mut Cx<'_>,
    s: &mut Sec<'_>,
    kinds: &[&'k str],
) -> Option<&'k str> {
    let path = s.at("type");
    let Some(node) = s.node("type") else {
        let block = s.path.clone();
        cx.error(
            &block,
            format!("missing type; set one of {}", kinds.join(", ")),
        );
        return None;
    };
    let words: Vec<(&str, &'k str)> = kinds.iter().map(|k| (*k, *k)).collect();
    v::enumeration(cx, &path, node, &words, kinds)
}

pub(crate) const KAFKA_SECURITY_KEYS: &[&str] = &[
    "securityProtocol",
    "saslMechanism",
    "saslUsername",
    "saslPassword",
];

/// Kafka security (CFG-52, CFG-99) of the block being read.
pub(crate) fn read_kafka_security(cx: &mut Cx<'_>, s: &mut Sec<'_>) -> KafkaSecurity {
    let protocol_path = s.at("securityProtocol");
    let protocol = s
        .node("securityProtocol")
        .and_then(|n| {
            let words = [
                ("PLAINTEXT", SecurityProtocol::Plaintext),
                ("SSL", SecurityProtocol::Ssl),
                ("SASL_PLAINTEXT", SecurityProtocol::SaslPlaintext),
                ("SASL_SSL", SecurityProtocol::SaslSsl),
            ];
            v::enumeration(
                cx,
                &protocol_path,
                n,
                &words,
                &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
            )
        })
        .unwrap_or(SecurityProtocol::Plaintext);
    let mechanism = s.node("saslMechanism").and_then(|n| {
        let words = [
            ("PLAIN", SaslMechanism::Plain),
            ("SCRAM-SHA-256", SaslMechanism::ScramSha256),
            ("SCRAM-SHA-512", SaslMechanism::ScramSha512),
        ];
        v::enumeration(
            cx,
            &s.at("saslMechanism"),
            n,
            &words,
            &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
        )
    });
    let username = s
        .node("saslUsername")
        .and_then(|n| v::non_blank(cx, &s.at("saslUsername"), n));
    let password = s
        .node("saslPassword")
        .and_then(|n| v::required_secret(cx, &s.at("saslPassword"), n));
    let set = [
        ("saslMechanism", s.has("saslMechanism")),
        ("saslUsername", s.has("saslUsername")),
        ("saslPassword", s.has("saslPassword")),
    ];
    if cx.is_bad(&protocol_path) {
        return KafkaSecurity {
            protocol,
            sasl: None,
        };
    }
    for (key, present) in set {
        if protocol.is_sasl() && !present {
            cx.error(
                &s.at(key),
                format!("required for securityProtocol {}", protocol.as_str()),
            );
        } else if !protocol.is_sasl() && present {
            cx.error(&s.at(key), "applies only to SASL security protocols");
        }
    }
    let sasl = match (protocol.is_sasl(), mechanism, username, password) {
        (true, Some(mechanism), Some(username), Some(password)) => Some(KafkaSasl {
            mechanism,
            username,
            password,
        }),
        _ => None,
    };
    KafkaSecurity { protocol, sasl }
}

/// NATS credentials (CFG-53, CFG-100) of the block being read.
pub(crate) fn read_nats_credentials(cx: &mut Cx<'_>, s: &mut Sec<'_>) -> NatsCredentials {
    let username = s
        .node("username")
        .and_then(|n| v::non_blank(cx, &s.at("username"), n));
    let password = s
        .node("password")
        .and_then(|n| v::secret(cx, &s.at("password"), n));
    let token = s
        .node("token")
        .and_then(|n| v::required_secret(cx, &s.at("token"), n));
    let (has_user, has_password, has_token) =
        (s.has("username"), s.has("password"), s.has("token"));
    if has_user && !has_password {
        cx.error(&s.at("username"), "needs password");
    }
    if has_password && !has_user {
        cx.error(&s.at("password"), "needs username");
    }
    if has_token && has_user {
        cx.error(&s.at("token"), "not together with username");
    }
    match (username, password, token) {
        (Some(username), Some(password), None) => {
            NatsCredentials::UserPassword { username, password }
        }
        (None, None, Some(token)) => NatsCredentials::Token(token),
        _ => NatsCredentials::None,
    }
}

/// A comma-separated list of `host:port` entries (`bootstrapServers`).
pub(crate) fn read_host_ports(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<Vec<String>> {
    let text = v::non_blank(cx, path, node)?;
    let entries: Vec<String> = text.split(',').map(|e| e.trim().to_owned()).collect();
    for entry in &entries {
        let valid = entry.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !valid {
            cx.error_at(
                path,
                node,
                format!(
                    "must be host:port entries separated by commas, got {}",
                    crate::diag::quote(entry)
                ),
            );
            return None;
        }
    }
    Some(entries)
}

/// A comma-separated list of `nats://host:port` URLs (`servers`).
pub(crate) fn read_nats_servers(cx: &mut Cx<'_>, path: &str, node: &Node) -> Option<Vec<String>> {
    let text = v::non_blank(cx, path, node)?;
    let entries: Vec<String> = text.split(',').map(|e| e.trim().to_owned()).collect();
    for entry in &entries {
        let valid = url::Url::parse(entry).is_ok_and(|u| {
            matches!(u.scheme(), "nats" | "tls") && u.host_str().is_some_and(|h| !h.is_empty())
        });
        if !valid {
            // A server URL may carry credentials, so it is shown masked.
            cx.error_at(
                path,
                node,
                format!(
                    "must be nats://host:port URLs separated by commas, got {}",
                    crate::diag::quote(&crate::mask::mask_url(entry))
                ),
            );
            return None;
        }
    }
    Some(entries)
}
