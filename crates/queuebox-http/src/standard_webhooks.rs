//! The Standard Webhooks signature (standardwebhooks.com, spec/standard-webhooks.md), shared by
//! the `standard-webhooks` source preset (which verifies it) and the HTTP destination's
//! `signing` (which makes it): HMAC-SHA256 over `id.timestamp.body` under the secret's key,
//! written `v1,<base64>`; a secret is `whsec_` + base64 of the key bytes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The key bytes of a `whsec_…` secret. The prefix is optional, as in the reference libraries;
/// `None` when the rest is not base64.
pub(crate) fn key(secret: &str) -> Option<Vec<u8>> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    STANDARD.decode(encoded.trim()).ok()
}

/// The base64 signature (without the `v1,` prefix) of one message.
pub(crate) fn signature(key: &[u8], id: &[u8], timestamp: &[u8], body: &[u8]) -> String {
    // HMAC accepts a key of any length, so this never fails.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
    for part in [id, b".", timestamp, b".", body] {
        mac.update(part);
    }
    STANDARD.encode(mac.finalize().into_bytes())
}

/// The `webhook-signature` value: one `v1,<base64>` per key, space-separated (rotation: a
/// receiver accepts the message when any one matches).
pub(crate) fn header_value(keys: &[Vec<u8>], id: &str, timestamp: i64, body: &[u8]) -> String {
    let timestamp = timestamp.to_string();
    keys.iter()
        .map(|key| {
            format!(
                "v1,{}",
                signature(key, id.as_bytes(), timestamp.as_bytes(), body)
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's test suite, also produced by the
    /// reference Python library (`Webhook(secret).sign`).
    #[test]
    fn the_specification_example() {
        let bytes = key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            header_value(
                &[bytes],
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        assert_eq!(key("whsec_not base64!"), None);
    }
}
