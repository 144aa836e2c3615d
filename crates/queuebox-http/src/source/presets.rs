//! The webhook senders' own signature formats (`auth.type: stripe | github | standard-webhooks |
//! shopify | slack`, INB-20a..20f): each needs only the sender's secret. Every format is an
//! HMAC-SHA256 under the secret, over the body alone or over a timestamp and the body; the
//! formats differ in the headers, the signed bytes and the encoding. Each is checked in the
//! order of INB-20 (signature header, timestamp header, timestamp format, replay window,
//! signature); the first failure answers 401 with its message.

use axum::http::{HeaderMap, HeaderName};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use queuebox_config::{PresetAuth, WebhookPreset};
use sha2::Sha256;

use crate::standard_webhooks;

use super::auth::{AuthConfigError, AuthFailure, digest_eq, last, parse_integer, sha256};

/// The HMAC keys of one source. Debug never shows them (SEC-7).
struct Keys(Vec<Vec<u8>>);

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keys({} secret(s), redacted)", self.0.len())
    }
}

/// One source's preset check, prepared at start.
#[derive(Debug)]
pub(crate) struct PresetCheck {
    preset: WebhookPreset,
    keys: Keys,
    tolerance_ms: u64,
}

impl PresetCheck {
    pub(crate) fn from_config(auth: &PresetAuth) -> Result<Self, AuthConfigError> {
        let keys = auth
            .secrets
            .iter()
            .map(|secret| match auth.preset {
                WebhookPreset::StandardWebhooks => standard_webhooks::key(secret.expose())
                    .ok_or(AuthConfigError::StandardWebhooksSecret),
                _ => Ok(secret.expose().as_bytes().to_vec()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            preset: auth.preset,
            keys: Keys(keys),
            tolerance_ms: auth.timestamp_tolerance_ms,
        })
    }

    pub(crate) fn check(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now_ms: i64,
    ) -> Result<(), AuthFailure> {
        match self.preset {
            WebhookPreset::Stripe => self.stripe(headers, body, now_ms),
            WebhookPreset::Github => self.github(headers, body),
            WebhookPreset::StandardWebhooks => self.standard_webhooks(headers, body, now_ms),
            WebhookPreset::Shopify => self.shopify(headers, body),
            WebhookPreset::Slack => self.slack(headers, body, now_ms),
        }
    }

    /// `Stripe-Signature: t=<seconds>,v1=<hex>[,v1=<hex>…]` over `t.body`; every `v1` is a
    /// candidate (Stripe sends one per active secret while one rolls).
    fn stripe(&self, headers: &HeaderMap, body: &[u8], now_ms: i64) -> Result<(), AuthFailure> {
        let value = required(headers, "stripe-signature", "Stripe-Signature")?;
        let mut timestamp = None;
        let mut signatures = Vec::new();
        for part in value.split(|b| *b == b',') {
            match part.trim_ascii().split_at_checked(2) {
                Some((b"t=", rest)) => timestamp = Some(rest),
                _ if part.trim_ascii().starts_with(b"v1=") => {
                    signatures.push(&part.trim_ascii()[3..]);
                }
                _ => {}
            }
        }
        let (Some(timestamp), false) = (timestamp, signatures.is_empty()) else {
            return Err(AuthFailure::new("Invalid Stripe-Signature header"));
        };
        self.window(timestamp, now_ms)?;
        let matched = self.any_key(|key| {
            let expected = hex::encode(hmac(key, &[timestamp, b".", body]));
            signatures.iter().fold(false, |matched, presented| {
                digest_eq(presented, &sha256(expected.as_bytes())) | matched
            })
        });
        self.verdict(matched)
    }

    /// `X-Hub-Signature-256: sha256=<hex>` over the body.
    fn github(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), AuthFailure> {
        let presented = required(headers, "x-hub-signature-256", "X-Hub-Signature-256")?;
        let matched = self.any_key(|key| {
            let expected = format!("sha256={}", hex::encode(hmac(key, &[body])));
            digest_eq(presented.trim_ascii(), &sha256(expected.as_bytes()))
        });
        self.verdict(matched)
    }

    /// `webhook-id`, `webhook-timestamp` (seconds), `webhook-signature: v1,<base64> …` over
    /// `id.timestamp.body`; the same three under Svix's `svix-*` names are read when the
    /// `webhook-signature` header is absent. Entries of another version (`v1a`) are skipped.
    fn standard_webhooks(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now_ms: i64,
    ) -> Result<(), AuthFailure> {
        let prefix = if headers.contains_key("webhook-signature")
            || !headers.contains_key("svix-signature")
        {
            "webhook"
        } else {
            "svix"
        };
        let named = |suffix: &str| format!("{prefix}-{suffix}");
        let signature = required(headers, &named("signature"), &named("signature"))?;
        let id = required(headers, &named("id"), &named("id"))?;
        let timestamp = last(
            headers,
            &HeaderName::from_bytes(named("timestamp").as_bytes()).expect("a valid header name"),
        )
        .ok_or_else(|| AuthFailure(format!("Missing {} header", named("timestamp"))))?
        .trim_ascii();
        self.window(timestamp, now_ms)?;
        let presented: Vec<&[u8]> = signature
            .split(|b| *b == b' ')
            .filter_map(|entry| entry.strip_prefix(b"v1,"))
            .collect();
        let matched = self.any_key(|key| {
            let expected = standard_webhooks::signature(key, id, timestamp, body);
            presented.iter().fold(false, |matched, p| {
                digest_eq(p, &sha256(expected.as_bytes())) | matched
            })
        });
        self.verdict(matched)
    }

    /// `X-Shopify-Hmac-Sha256: <base64>` over the body.
    fn shopify(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), AuthFailure> {
        let presented = required(headers, "x-shopify-hmac-sha256", "X-Shopify-Hmac-Sha256")?;
        let matched = self.any_key(|key| {
            let expected = STANDARD.encode(hmac(key, &[body]));
            digest_eq(presented.trim_ascii(), &sha256(expected.as_bytes()))
        });
        self.verdict(matched)
    }

    /// `X-Slack-Signature: v0=<hex>` over `v0:timestamp:body`, with the timestamp (seconds)
    /// in `X-Slack-Request-Timestamp`.
    fn slack(&self, headers: &HeaderMap, body: &[u8], now_ms: i64) -> Result<(), AuthFailure> {
        let presented = required(headers, "x-slack-signature", "X-Slack-Signature")?;
        let timestamp = required(
            headers,
            "x-slack-request-timestamp",
            "X-Slack-Request-Timestamp",
        )?
        .trim_ascii();
        self.window(timestamp, now_ms)?;
        let matched = self.any_key(|key| {
            let expected = format!(
                "v0={}",
                hex::encode(hmac(key, &[b"v0:", timestamp, b":", body]))
            );
            digest_eq(presented.trim_ascii(), &sha256(expected.as_bytes()))
        });
        self.verdict(matched)
    }

    /// Every key is tried, so the time does not tell which one matched.
    fn any_key(&self, matches: impl Fn(&[u8]) -> bool) -> bool {
        self.keys
            .0
            .iter()
            .fold(false, |matched, key| matches(key) | matched)
    }

    fn verdict(&self, matched: bool) -> Result<(), AuthFailure> {
        if matched {
            Ok(())
        } else {
            Err(AuthFailure::new("Invalid signature"))
        }
    }

    /// The presets' timestamps are whole seconds; too old or too new when
    /// |now − timestamp| > the replay window.
    fn window(&self, timestamp: &[u8], now_ms: i64) -> Result<(), AuthFailure> {
        let seconds =
            parse_integer(timestamp).ok_or_else(|| AuthFailure::new("Invalid timestamp format"))?;
        let distance = (i128::from(now_ms) - i128::from(seconds) * 1000).unsigned_abs();
        if distance > u128::from(self.tolerance_ms) {
            return Err(AuthFailure::new("Request timestamp expired"));
        }
        Ok(())
    }
}

/// The last value of header `name` (lower case), or 401 `Missing <display> header`.
fn required<'h>(
    headers: &'h HeaderMap,
    name: &str,
    display: &str,
) -> Result<&'h [u8], AuthFailure> {
    let name = HeaderName::from_bytes(name.as_bytes()).expect("a valid header name");
    last(headers, &name).ok_or_else(|| AuthFailure(format!("Missing {display} header")))
}

/// HMAC-SHA256 of the concatenated parts.
fn hmac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    // HMAC accepts a key of any length, so this never fails.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::Secret;

    fn check(preset: WebhookPreset, secrets: &[&str]) -> PresetCheck {
        PresetCheck::from_config(&PresetAuth {
            preset,
            secrets: secrets.iter().map(|s| Secret::new(*s)).collect(),
            timestamp_tolerance_ms: 300_000,
        })
        .unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    /// INB-20b: GitHub's published example (docs.github.com, "Validating webhook deliveries"):
    /// secret `It's a Secret to Everybody`, payload `Hello, World!`.
    #[test]
    fn inb_20b_github_published_test_vector() {
        let github = check(WebhookPreset::Github, &["It's a Secret to Everybody"]);
        let signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        let ok = headers(&[("x-hub-signature-256", signature)]);
        assert_eq!(github.check(&ok, b"Hello, World!", 0), Ok(()));
        assert_eq!(
            github.check(&ok, b"Hello, World?", 0),
            Err(AuthFailure::new("Invalid signature"))
        );
        let rotated = check(
            WebhookPreset::Github,
            &["new", "It's a Secret to Everybody"],
        );
        assert_eq!(rotated.check(&ok, b"Hello, World!", 0), Ok(()));
    }

    /// INB-20c: the example of the Standard Webhooks specification's test suite
    /// (msg_p5jXN8AQM9LWM0D4loKWxJek, timestamp 1614265330, body {"test": 2432232314}).
    #[test]
    fn inb_20c_standard_webhooks_specification_vector() {
        let sw = check(
            WebhookPreset::StandardWebhooks,
            &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
        );
        let now_ms = 1_614_265_330_000;
        let ok = headers(&[
            ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"),
            ("webhook-timestamp", "1614265330"),
            (
                "webhook-signature",
                "v1a,ignored v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            ),
        ]);
        assert_eq!(sw.check(&ok, br#"{"test": 2432232314}"#, now_ms), Ok(()));
        assert_eq!(
            sw.check(&ok, br#"{"test": 2432232314}"#, now_ms + 300_001),
            Err(AuthFailure::new("Request timestamp expired"))
        );
    }
}
