//! Inbound authentication of an HTTP source on the raw body bytes (INB-14..20, OPS-15/16):
//! bearer token, API key, HMAC signature, and the senders' own formats (`presets`). Every
//! secret comparison is constant-time (SEC-8).

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, HeaderName};
use hmac::{Hmac, Mac};
use queuebox_config::{HmacAlgorithm, HmacAuth, InboundAuth, SignaturePayloadFormat};
use queuebox_core::Secret;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

pub(crate) use super::presets::PresetCheck;

/// Below this a timestamp counts in seconds, from it on in milliseconds (INB-19).
const MILLIS_FROM: i64 = 100_000_000_000;

/// Why a request was refused: the 401 message, which never carries a value (INB-10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AuthFailure(pub(crate) String);

impl AuthFailure {
    pub(super) fn new(text: &str) -> Self {
        Self(text.to_owned())
    }
}

/// The auth check of one source, prepared at start.
#[derive(Debug)]
pub(crate) enum Authenticator {
    Open,
    /// Only the token's digest is kept: the comparison is between digests anyway (SEC-8).
    Bearer {
        token_digest: [u8; 32],
    },
    ApiKey {
        header: HeaderName,
        /// The configured spelling, for `Missing <headerName> header`.
        display: String,
        key_digest: [u8; 32],
    },
    Hmac(Box<HmacCheck>),
    Preset(Box<PresetCheck>),
}

#[derive(Debug)]
pub(crate) struct HmacCheck {
    /// Several during a rotation; a signature made with any of them passes (INB-17).
    secrets: Vec<Secret>,
    header: HeaderName,
    display: String,
    algorithm: HmacAlgorithm,
    prefix: String,
    timestamp_header: Option<HeaderName>,
    tolerance_ms: u64,
    payload_format: SignaturePayloadFormat,
}

/// A configured header name that `http` cannot hold (the configuration validates tokens, so
/// this is a wiring mistake, reported at start).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthConfigError {
    #[error("auth header name {0:?} is not a valid HTTP header name")]
    HeaderName(String),
    #[error("signaturePayloadFormat TIMESTAMP_DOT_BODY needs timestampHeader")]
    TimestampDotBodyWithoutHeader,
    #[error("secret of type standard-webhooks is not base64 (with or without the whsec_ prefix)")]
    StandardWebhooksSecret,
}

pub(crate) fn header_name(name: &str) -> Result<HeaderName, AuthConfigError> {
    HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes())
        .map_err(|_| AuthConfigError::HeaderName(name.to_owned()))
}

impl Authenticator {
    pub(crate) fn from_config(auth: Option<&InboundAuth>) -> Result<Self, AuthConfigError> {
        Ok(match auth {
            None => Self::Open,
            Some(InboundAuth::Bearer { token }) => Self::Bearer {
                token_digest: sha256(token.expose().as_bytes()),
            },
            Some(InboundAuth::ApiKey { key, header_name }) => Self::ApiKey {
                header: header_name_of(header_name)?,
                display: header_name.as_str().to_owned(),
                key_digest: sha256(key.expose().as_bytes()),
            },
            Some(InboundAuth::Hmac(hmac)) => Self::Hmac(Box::new(HmacCheck::from_config(hmac)?)),
            Some(InboundAuth::Preset(preset)) => {
                Self::Preset(Box::new(PresetCheck::from_config(preset)?))
            }
        })
    }

    /// INB-14: runs at step 5 on the raw body bytes.
    pub(crate) fn check(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), AuthFailure> {
        match self {
            Self::Open => Ok(()),
            Self::Bearer { token_digest } => {
                let value = last(headers, &axum::http::header::AUTHORIZATION)
                    .ok_or_else(|| AuthFailure::new("Missing Authorization header"))?;
                match bearer_credentials(value) {
                    Some(presented) if digest_eq(presented, token_digest) => Ok(()),
                    _ => Err(AuthFailure::new("Invalid bearer token")),
                }
            }
            Self::ApiKey {
                header,
                display,
                key_digest,
            } => {
                let value = last(headers, header)
                    .ok_or_else(|| AuthFailure(format!("Missing {display} header")))?;
                if digest_eq(value.trim_ascii(), key_digest) {
                    Ok(())
                } else {
                    Err(AuthFailure::new("Invalid API key"))
                }
            }
            Self::Hmac(check) => check.check(headers, body, now_ms()),
            Self::Preset(check) => check.check(headers, body, now_ms()),
        }
    }
}

fn header_name_of(name: &queuebox_config::HeaderName) -> Result<HeaderName, AuthConfigError> {
    header_name(name.as_str())
}

impl HmacCheck {
    fn from_config(hmac: &HmacAuth) -> Result<Self, AuthConfigError> {
        if hmac.payload_format == SignaturePayloadFormat::TimestampDotBody
            && hmac.timestamp_header.is_none()
        {
            return Err(AuthConfigError::TimestampDotBodyWithoutHeader);
        }
        Ok(Self {
            secrets: hmac.secrets.clone(),
            header: header_name_of(&hmac.header_name)?,
            display: hmac.header_name.as_str().to_owned(),
            algorithm: hmac.algorithm,
            prefix: hmac.signature_prefix.clone(),
            timestamp_header: hmac
                .timestamp_header
                .as_ref()
                .map(header_name_of)
                .transpose()?,
            tolerance_ms: hmac.timestamp_tolerance_ms,
            payload_format: hmac.payload_format,
        })
    }

    /// The checks of INB-20, in its order; the first failure answers.
    fn check(&self, headers: &HeaderMap, body: &[u8], now_ms: i64) -> Result<(), AuthFailure> {
        let signature = last(headers, &self.header)
            .ok_or_else(|| AuthFailure(format!("Missing {} header", self.display)))?;
        let timestamp = match &self.timestamp_header {
            None => None,
            Some(name) => {
                let raw = last(headers, name)
                    .ok_or_else(|| AuthFailure::new("Missing timestamp header"))?
                    .trim_ascii();
                let value = parse_integer(raw)
                    .ok_or_else(|| AuthFailure::new("Invalid timestamp format"))?;
                if !within_tolerance(value, now_ms, self.tolerance_ms) {
                    return Err(AuthFailure::new("Request timestamp expired"));
                }
                Some(raw)
            }
        };
        let signed_timestamp = match self.payload_format {
            SignaturePayloadFormat::Body => None,
            SignaturePayloadFormat::TimestampDotBody => timestamp,
        };
        let presented = signature.trim_ascii();
        // Every secret is tried, so the time does not tell which one matched.
        let matched = self.secrets.iter().fold(false, |matched, secret| {
            let mut expected = self.prefix.clone();
            expected.push_str(&hex_hmac(
                self.algorithm,
                secret.expose().as_bytes(),
                signed_timestamp,
                body,
            ));
            digest_eq(presented, &sha256(expected.as_bytes())) | matched
        });
        if matched {
            Ok(())
        } else {
            Err(AuthFailure::new("Invalid signature"))
        }
    }
}

/// INB-18: the lower-case hex HMAC of `timestamp.body` or of `body`.
fn hex_hmac(algorithm: HmacAlgorithm, key: &[u8], timestamp: Option<&[u8]>, body: &[u8]) -> String {
    macro_rules! mac {
        ($digest:ty) => {{
            // HMAC accepts a key of any length, so this never fails.
            let mut mac = <Hmac<$digest> as Mac>::new_from_slice(key).expect("any key length");
            if let Some(timestamp) = timestamp {
                mac.update(timestamp);
                mac.update(b".");
            }
            mac.update(body);
            hex::encode(mac.finalize().into_bytes())
        }};
    }
    match algorithm {
        HmacAlgorithm::HmacSha256 => mac!(Sha256),
        HmacAlgorithm::HmacSha512 => mac!(Sha512),
        HmacAlgorithm::HmacSha1 => mac!(Sha1),
    }
}

/// INB-15: `Bearer` in any letter case, at least one whitespace, then the token (trimmed).
fn bearer_credentials(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(6)?;
    let separated = rest.first().is_some_and(|b| matches!(b, b' ' | b'\t'));
    (scheme.eq_ignore_ascii_case(b"bearer") && separated).then(|| rest.trim_ascii())
}

/// INB-19: a decimal integer, optionally negative.
pub(super) fn parse_integer(raw: &[u8]) -> Option<i64> {
    let digits = raw.strip_prefix(b"-").unwrap_or(raw);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(raw).ok()?.parse().ok()
}

/// INB-19: seconds below 100000000000, else milliseconds; too old or too new when
/// |now − timestamp| > tolerance.
pub(super) fn within_tolerance(timestamp: i64, now_ms: i64, tolerance_ms: u64) -> bool {
    let timestamp_ms = if timestamp < MILLIS_FROM {
        i128::from(timestamp) * 1000
    } else {
        i128::from(timestamp)
    };
    (i128::from(now_ms) - timestamp_ms).unsigned_abs() <= u128::from(tolerance_ms)
}

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// The last value of a header: a repeated header counts with its last value, as stored
/// (INB-24).
pub(super) fn last<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h [u8]> {
    headers
        .get_all(name)
        .iter()
        .next_back()
        .map(|v| v.as_bytes())
}

pub(super) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// SEC-8: compares the SHA-256 digest of the presented value with the expected digest, over
/// all 32 bytes whatever differs, so neither the content nor the length of the secret shows
/// in the timing.
pub(super) fn digest_eq(presented: &[u8], expected: &[u8; 32]) -> bool {
    let presented = sha256(presented);
    let difference = presented
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inb_15_bearer_scheme_any_case_then_whitespace() {
        assert_eq!(bearer_credentials(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_credentials(b"bEaReR \t abc "), Some(&b"abc"[..]));
        assert_eq!(bearer_credentials(b"Bearerabc"), None);
        assert_eq!(bearer_credentials(b"Basic abc"), None);
        assert_eq!(bearer_credentials(b"Bear"), None);
    }

    #[test]
    fn inb_19_timestamps_in_seconds_and_milliseconds() {
        let now_ms = 1_790_000_000_000;
        assert!(within_tolerance(1_790_000_000, now_ms, 300_000));
        assert!(within_tolerance(
            1_790_000_000_000 - 300_000,
            now_ms,
            300_000
        ));
        assert!(!within_tolerance(
            1_790_000_000_000 - 300_001,
            now_ms,
            300_000
        ));
        assert!(!within_tolerance(1_790_000_301, now_ms, 300_000));
        assert!(!within_tolerance(i64::MIN, now_ms, 300_000));
        assert_eq!(parse_integer(b"-12"), Some(-12));
        assert_eq!(parse_integer(b"+12"), None);
        assert_eq!(parse_integer(b"1.5"), None);
        assert_eq!(parse_integer(b"99999999999999999999"), None);
    }

    #[test]
    fn sec_8_digest_comparison() {
        assert!(digest_eq(b"secret", &sha256(b"secret")));
        assert!(!digest_eq(b"secreT", &sha256(b"secret")));
        assert!(!digest_eq(b"", &sha256(b"secret")));
    }

    #[test]
    fn inb_18_hmac_matches_known_vectors() {
        // RFC 4231 test case 2 (key "Jefe").
        let sha256 = hex_hmac(
            HmacAlgorithm::HmacSha256,
            b"Jefe",
            None,
            b"what do ya want for nothing?",
        );
        assert_eq!(
            sha256,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let sha1 = hex_hmac(
            HmacAlgorithm::HmacSha1,
            b"Jefe",
            None,
            b"what do ya want for nothing?",
        );
        assert_eq!(sha1, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
        // Timestamp-dot-body signs the same bytes as the joined text.
        assert_eq!(
            hex_hmac(HmacAlgorithm::HmacSha512, b"k", Some(b"17"), b"{}"),
            hex_hmac(HmacAlgorithm::HmacSha512, b"k", None, b"17.{}")
        );
    }
}
