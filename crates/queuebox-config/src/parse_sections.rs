//! Reading the small sections: `server`, `outbox`, `inbox`, `http`, `admin`, `retention`, `log`
//! (config.md §5, §7, §8, §10, §11, §13, §14), with their own cross-key rules.

use crate::model::{
    AdminConfig, CaptureMode, HttpConfig, InboxConfig, LogConfig, LogFormat, LogLevel,
    OutboxConfig, RelayConfig, ServerConfig,
};
use crate::node::Node;
use crate::parse_common::{AuthKinds, read_inbound_auth};
use crate::read::{Cx, Sec, get};
use crate::values::{self as v, Range};

pub(crate) fn read_server(cx: &mut Cx<'_>, node: Option<&Node>) -> ServerConfig {
    let mut s = Sec::open(cx, "server", node);
    let port = |cx: &mut Cx<'_>, p: &str, n: &Node| {
        v::int(cx, p, n, Range::Between(0, 65535)).and_then(|x| u16::try_from(x).ok())
    };
    let http_port = get!(cx, s, "httpPort", 8080, |p, n| port(cx, &p, n));
    let management_port = get!(cx, s, "managementPort", None, |p, n| port(cx, &p, n)
        .map(Some));
    let max_connections = get!(cx, s, "maxConnections", 1024, |p, n| v::uint(
        cx,
        &p,
        n,
        Range::Between(1, 1_000_000)
    ));
    s.finish(cx, &["httpPort", "managementPort", "maxConnections"]);
    // CFG-95.
    if management_port == Some(http_port)
        && http_port != 0
        && !cx.any_bad(&["server.httpPort", "server.managementPort"])
    {
        cx.error("server.managementPort", "the same port as server.httpPort");
    }
    ServerConfig {
        http_port,
        management_port,
        max_connections,
    }
}

pub(crate) fn read_outbox(
    cx: &mut Cx<'_>,
    node: Option<&Node>,
    is_postgres: Option<bool>,
) -> OutboxConfig {
    let mut s = Sec::open(cx, "outbox", node);
    let ms = |cx: &mut Cx<'_>, p: &str, n: &Node| v::ms(cx, p, n, Range::Positive);
    let count = |cx: &mut Cx<'_>, p: &str, n: &Node| v::uint(cx, p, n, Range::Positive);
    let poll_interval_ms = get!(cx, s, "pollIntervalMs", 100, |p, n| ms(cx, &p, n));
    let batch_size = get!(cx, s, "batchSize", 100, |p, n| count(cx, &p, n));
    let concurrency = get!(cx, s, "concurrency", 8, |p, n| count(cx, &p, n));
    let retry_base_delay_ms = get!(cx, s, "retryBaseDelayMs", 1000, |p, n| ms(cx, &p, n));
    let retry_max_delay_ms = get!(cx, s, "retryMaxDelayMs", 60_000, |p, n| ms(cx, &p, n));
    let max_attempts = get!(cx, s, "maxAttempts", 5, |p, n| count(cx, &p, n));
    let claim_timeout_ms = get!(cx, s, "claimTimeoutMs", 300_000, |p, n| ms(cx, &p, n));
    let pending_gauge_interval_ms =
        get!(cx, s, "pendingGaugeIntervalMs", 5000, |p, n| ms(cx, &p, n));
    let shutdown_timeout_ms = get!(cx, s, "shutdownTimeoutMs", 30_000, |p, n| ms(cx, &p, n));
    let key_run_length = get!(cx, s, "keyRunLength", 32, |p, n| count(cx, &p, n));
    let capture_node = s.node("capture");
    let mut capture = Sec::open(cx, "outbox.capture", capture_node);
    let capture_mode = get!(cx, capture, "mode", CaptureMode::Polling, |p, n| {
        let words = [
            ("polling", CaptureMode::Polling),
            ("notify", CaptureMode::Notify),
        ];
        v::enumeration(cx, &p, n, &words, &["polling", "notify"])
    });
    capture.finish(cx, &["mode"]);
    s.finish(
        cx,
        &[
            "pollIntervalMs",
            "batchSize",
            "concurrency",
            "retryBaseDelayMs",
            "retryMaxDelayMs",
            "maxAttempts",
            "claimTimeoutMs",
            "pendingGaugeIntervalMs",
            "shutdownTimeoutMs",
            "keyRunLength",
            "capture",
        ],
    );
    // CFG-92: skipped while database.type is itself in error (`None`).
    if capture_mode == CaptureMode::Notify && is_postgres == Some(false) {
        cx.error(
            "outbox.capture.mode",
            "notify needs database.type postgresql",
        );
    }
    // CFG-93.
    if retry_max_delay_ms < retry_base_delay_ms
        && !cx.any_bad(&["outbox.retryMaxDelayMs", "outbox.retryBaseDelayMs"])
    {
        cx.error(
            "outbox.retryMaxDelayMs",
            format!(
                "must be at least outbox.retryBaseDelayMs ({retry_base_delay_ms}), got {retry_max_delay_ms}"
            ),
        );
    }
    OutboxConfig {
        poll_interval_ms,
        batch_size,
        concurrency,
        retry_base_delay_ms,
        retry_max_delay_ms,
        max_attempts,
        claim_timeout_ms,
        pending_gauge_interval_ms,
        shutdown_timeout_ms,
        key_run_length,
        capture_mode,
    }
}

pub(crate) fn read_inbox(
    cx: &mut Cx<'_>,
    node: Option<&Node>,
    outbox_max_attempts: u32,
) -> InboxConfig {
    let mut s = Sec::open(cx, "inbox", node);
    let base_path = get!(cx, s, "basePath", "/inbox".to_owned(), |p, n| {
        v::string(cx, &p, n).and_then(|text| match check_base_path(&text) {
            Ok(()) => Some(text),
            Err(message) => {
                cx.error_at(&p, n, message);
                None
            }
        })
    });
    let max_body_bytes = get!(cx, s, "maxBodyBytes", 1_048_576, |p, n| v::ms(
        cx,
        &p,
        n,
        Range::Positive
    ));
    let max_pending_bytes = get!(cx, s, "maxPendingBytes", 67_108_864, |p, n| {
        v::ms(cx, &p, n, Range::Positive).and_then(|bytes| {
            if bytes < max_body_bytes {
                cx.error_at(
                    &p,
                    n,
                    format!("must be at least inbox.maxBodyBytes ({max_body_bytes}), got {bytes}"),
                );
                None
            } else {
                Some(bytes)
            }
        })
    });
    let storage_wait_ms = get!(cx, s, "storageWaitMs", 10_000, |p, n| v::ms(
        cx,
        &p,
        n,
        Range::Positive
    ));
    let relay_node = s.node("relay");
    let mut r = Sec::open(cx, "inbox.relay", relay_node);
    let ms = |cx: &mut Cx<'_>, p: &str, n: &Node| v::ms(cx, p, n, Range::Positive);
    let relay = RelayConfig {
        enabled: get!(cx, r, "enabled", true, |p, n| v::boolean(cx, &p, n)),
        poll_interval_ms: get!(cx, r, "pollIntervalMs", 100, |p, n| ms(cx, &p, n)),
        batch_size: get!(cx, r, "batchSize", 100, |p, n| v::uint(
            cx,
            &p,
            n,
            Range::Positive
        )),
        claim_timeout_ms: get!(cx, r, "claimTimeoutMs", 300_000, |p, n| ms(cx, &p, n)),
        pending_gauge_interval_ms: get!(cx, r, "pendingGaugeIntervalMs", 5000, |p, n| ms(
            cx, &p, n
        )),
        max_attempts: get!(cx, r, "maxAttempts", outbox_max_attempts, |p, n| {
            v::uint(cx, &p, n, Range::Positive)
        }),
    };
    r.finish(
        cx,
        &[
            "enabled",
            "pollIntervalMs",
            "batchSize",
            "claimTimeoutMs",
            "pendingGaugeIntervalMs",
            "maxAttempts",
        ],
    );
    s.finish(
        cx,
        &[
            "basePath",
            "maxBodyBytes",
            "maxPendingBytes",
            "storageWaitMs",
            "relay",
        ],
    );
    InboxConfig {
        base_path,
        max_body_bytes,
        max_pending_bytes,
        storage_wait_ms,
        relay,
    }
}

/// `inbox.basePath` (CFG-47): `/`, or a source-path-like prefix without a trailing `/`.
fn check_base_path(text: &str) -> Result<(), String> {
    if text == "/" {
        return Ok(());
    }
    crate::parse_filter::check_source_path(text)
}

pub(crate) fn read_http(cx: &mut Cx<'_>, node: Option<&Node>) -> HttpConfig {
    let mut s = Sec::open(cx, "http", node);
    let config = HttpConfig {
        max_error_body_bytes: get!(cx, s, "maxErrorBodyBytes", 2048, |p, n| v::ms(
            cx,
            &p,
            n,
            Range::Positive
        )),
        block_private_addresses: get!(cx, s, "blockPrivateAddresses", false, |p, n| v::boolean(
            cx, &p, n
        )),
    };
    s.finish(cx, &["maxErrorBodyBytes", "blockPrivateAddresses"]);
    config
}

pub(crate) fn read_admin(cx: &mut Cx<'_>, node: Option<&Node>) -> AdminConfig {
    let mut s = Sec::open(cx, "admin", node);
    let enabled = get!(cx, s, "enabled", false, |p, n| v::boolean(cx, &p, n));
    let auth_set = s.has("auth");
    let auth_node = s.node("auth");
    let auth = read_inbound_auth(cx, "admin.auth", auth_node, AuthKinds::Admin);
    let insecure = get!(cx, s, "insecure", false, |p, n| v::boolean(cx, &p, n));
    let config = AdminConfig {
        enabled,
        auth,
        insecure,
        max_transform_timeout_ms: get!(cx, s, "maxTransformTimeoutMs", 1000, |p, n| {
            v::ms(cx, &p, n, Range::Positive)
        }),
        max_payload_bytes: get!(cx, s, "maxPayloadBytes", 65_536, |p, n| v::ms(
            cx,
            &p,
            n,
            Range::Positive
        )),
    };
    s.finish(
        cx,
        &[
            "enabled",
            "auth",
            "insecure",
            "maxTransformTimeoutMs",
            "maxPayloadBytes",
        ],
    );
    // CFG-96.
    if enabled && !auth_set && !cx.any_bad(&["admin.enabled", "admin.insecure"]) {
        if insecure {
            cx.warn("admin.auth", "The admin API runs without authentication.");
        } else {
            cx.error(
                "admin.auth",
                "The admin API is enabled without authentication. Set admin.auth (bearer, api-key or hmac), set admin.insecure: true for a local test, or set admin.enabled: false.",
            );
        }
    }
    config
}

pub(crate) fn read_log(cx: &mut Cx<'_>, node: Option<&Node>) -> LogConfig {
    let mut s = Sec::open(cx, "log", node);
    let format = get!(cx, s, "format", LogFormat::Json, |p, n| {
        let words = [("json", LogFormat::Json), ("text", LogFormat::Text)];
        v::enumeration(cx, &p, n, &words, &["json", "text"])
    });
    let level = get!(cx, s, "level", LogLevel::Info, |p, n| {
        let words = [
            ("error", LogLevel::Error),
            ("warn", LogLevel::Warn),
            ("info", LogLevel::Info),
            ("debug", LogLevel::Debug),
            ("trace", LogLevel::Trace),
        ];
        v::enumeration(
            cx,
            &p,
            n,
            &words,
            &["error", "warn", "info", "debug", "trace"],
        )
    });
    s.finish(cx, &["format", "level"]);
    LogConfig { format, level }
}
