//! OAuth2 client-credentials tokens for HTTP destinations (DST-30): the token request, the
//! cache shared per (tokenUrl, clientId, scope, extraParams), and single-flight refresh.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queuebox_core::Secret;
use queuebox_core::redact::{error_text, redact};
use reqwest::header::{ACCEPT, CONTENT_TYPE, USER_AGENT};
use tokio::time::Instant;
use url::Url;

use super::body::{deadline_after, read_at_most};
use super::classify::cut;
use super::http::USER_AGENT_VALUE;

/// A cached token is reused until this long before it expires (DST-30 step 3).
pub(crate) const REFRESH_SKEW: Duration = Duration::from_secs(30);
/// `expires_in` when the response has none (DST-30 step 2).
const DEFAULT_EXPIRES_IN: u64 = 3600;
/// Caps `expires_in` so `Instant` arithmetic cannot overflow; a year-long token is simply
/// refreshed once a year.
const MAX_EXPIRES_IN: u64 = 365 * 24 * 3600;
/// A successful token response larger than this is not a token response.
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;

/// Destinations with the same four values share one token (DST-30 step 3).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TokenKey {
    pub token_url: String,
    pub client_id: String,
    pub scope: Option<String>,
    pub extra_params: Vec<(String, String)>,
}

/// All cache entries, shared by every HTTP destination through `SharedHttp`.
#[derive(Default)]
pub(crate) struct TokenCache {
    entries: Mutex<HashMap<TokenKey, Arc<TokenEntry>>>,
}

impl TokenCache {
    /// The entry for `key`, created on first use. Publishers keep the `Arc`, so the map lock
    /// is only taken at start.
    pub(crate) fn entry(&self, key: TokenKey) -> Arc<TokenEntry> {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.entry(key).or_default().clone()
    }
}

/// One cache entry. The async mutex is the single flight: whoever holds it is the one token
/// request in flight, and the others wait for its result.
#[derive(Default)]
pub(crate) struct TokenEntry {
    state: tokio::sync::Mutex<EntryState>,
    /// Bumped when a token request finishes. A publish that saw it move while it waited takes
    /// that request's result instead of sending a request of its own.
    generation: AtomicU64,
}

#[derive(Default)]
struct EntryState {
    token: Option<CachedToken>,
    last_failure: Option<String>,
}

struct CachedToken {
    value: Secret,
    /// `None`: not to be reused (`expires_in` ≤ 30 s).
    reuse_until: Option<Instant>,
}

impl CachedToken {
    fn reusable(&self) -> bool {
        self.reuse_until.is_some_and(|until| Instant::now() < until)
    }
}

/// Everything needed to send the token request of one destination.
pub(crate) struct TokenRequest {
    pub client: reqwest::Client,
    pub token_url: Url,
    pub client_id: String,
    pub client_secret: Secret,
    pub scope: Option<String>,
    pub extra_params: Vec<(String, String)>,
    pub timeout: Duration,
    pub max_error_body_bytes: usize,
}

impl TokenEntry {
    /// A token to send: the cached one while it may be reused, else a new one. `Err` is the
    /// complete failure text of DST-30 step 5, already redacted.
    pub(crate) async fn token(&self, request: &TokenRequest) -> Result<Secret, String> {
        let seen = self.generation.load(Ordering::Acquire);
        let mut state = self.state.lock().await;
        if let Some(token) = state.token.as_ref().filter(|t| t.reusable()) {
            return Ok(token.value.clone());
        }
        if self.generation.load(Ordering::Acquire) != seen
            && let Some(failure) = &state.last_failure
        {
            return Err(failure.clone());
        }
        let sent_at = Instant::now();
        let result = request.fetch().await;
        match &result {
            Ok((value, expires_in)) => {
                let reuse_until = expires_in
                    .checked_sub(REFRESH_SKEW)
                    .filter(|d| !d.is_zero())
                    .and_then(|d| sent_at.checked_add(d));
                state.token = Some(CachedToken {
                    value: value.clone(),
                    reuse_until,
                });
                state.last_failure = None;
            }
            Err(failure) => {
                state.token = None;
                state.last_failure = Some(failure.clone());
            }
        }
        self.generation.fetch_add(1, Ordering::Release);
        result.map(|(value, _)| value)
    }

    /// DST-30 step 6: after a 401, drop the token that was sent, unless another publish has
    /// already replaced it with a newer one.
    pub(crate) async fn invalidate(&self, sent: &Secret) {
        let mut state = self.state.lock().await;
        if state.token.as_ref().is_some_and(|t| t.value == *sent) {
            state.token = None;
        }
    }
}

impl TokenRequest {
    /// DST-30 steps 1 and 2: one form POST, no redirect (the shared client follows none),
    /// bounded by the destination's timeout.
    async fn fetch(&self) -> Result<(Secret, Duration), String> {
        let deadline = deadline_after(self.timeout);
        let fail = |detail: &str| redact(&format!("OAuth2 token request failed: {detail}"));
        let timed_out = || fail(&format!("timeout after {}ms", self.timeout.as_millis()));

        // Built in its own scope: the serializer is not `Send` and must not live across an await.
        let form = {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "client_credentials")
                .append_pair("client_id", &self.client_id)
                .append_pair("client_secret", self.client_secret.expose());
            if let Some(scope) = &self.scope {
                form.append_pair("scope", scope);
            }
            form.extend_pairs(&self.extra_params);
            form.finish()
        };
        let send = self
            .client
            .post(self.token_url.clone())
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .header(USER_AGENT, USER_AGENT_VALUE)
            .body(form)
            .send();
        let response = match tokio::time::timeout_at(deadline, send).await {
            Err(_) => return Err(timed_out()),
            Ok(Err(err)) if err.is_timeout() => return Err(timed_out()),
            Ok(Err(err)) => return Err(fail(&error_text(&err.without_url()))),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        let limit = if status.is_success() {
            MAX_TOKEN_RESPONSE_BYTES
        } else {
            self.max_error_body_bytes
        };
        let Ok(body) = tokio::time::timeout_at(deadline, read_at_most(response, limit)).await
        else {
            return Err(timed_out());
        };
        if !status.is_success() {
            let body = redact(&String::from_utf8_lossy(&body));
            let body = cut(&body, self.max_error_body_bytes);
            let mut text = format!("HTTP {}", status.as_u16());
            if !body.trim().is_empty() {
                text.push_str(" - ");
                text.push_str(body);
            }
            return Err(fail(&text));
        }
        parse_token_response(&body).map_err(fail)
    }
}

/// DST-30 step 2: a JSON object with a non-empty string `access_token`; `expires_in` optional
/// (a number, or a numeric string as some servers send it); `token_type` ignored.
fn parse_token_response(body: &[u8]) -> Result<(Secret, Duration), &'static str> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| "the response is not a JSON object")?;
    let object = value
        .as_object()
        .ok_or("the response is not a JSON object")?;
    let token = object
        .get("access_token")
        .and_then(serde_json::Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or("the response has no access_token")?;
    let expires_in = match object.get("expires_in") {
        None | Some(serde_json::Value::Null) => DEFAULT_EXPIRES_IN,
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .ok_or("expires_in is not a number of seconds")?,
        Some(serde_json::Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| "expires_in is not a number of seconds")?,
        Some(_) => return Err("expires_in is not a number of seconds"),
    };
    Ok((
        Secret::new(token),
        Duration::from_secs(expires_in.min(MAX_EXPIRES_IN)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dst_30_token_response_with_default_expiry() {
        let (token, expires) =
            parse_token_response(br#"{"access_token":"abc","token_type":"x"}"#).unwrap();
        assert_eq!(token.expose(), "abc");
        assert_eq!(expires, Duration::from_secs(3600));
    }

    #[test]
    fn dst_30_expires_in_as_number_or_numeric_string() {
        let (_, e) = parse_token_response(br#"{"access_token":"a","expires_in":31}"#).unwrap();
        assert_eq!(e, Duration::from_secs(31));
        let (_, e) = parse_token_response(br#"{"access_token":"a","expires_in":"60"}"#).unwrap();
        assert_eq!(e, Duration::from_secs(60));
        let (_, e) = parse_token_response(br#"{"access_token":"a","expires_in":1e300}"#).unwrap();
        assert_eq!(e, Duration::from_secs(MAX_EXPIRES_IN));
    }

    #[test]
    fn dst_30_anything_else_is_a_token_failure() {
        for body in [
            &b"not json"[..],
            br#"["access_token"]"#,
            br#"{"access_token":""}"#,
            br#"{"access_token":5}"#,
            br#"{"token":"a"}"#,
            br#"{"access_token":"a","expires_in":-1}"#,
            br#"{"access_token":"a","expires_in":true}"#,
        ] {
            assert!(
                parse_token_response(body).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[tokio::test]
    async fn dst_30_a_token_with_expires_in_at_most_30_is_never_reused() {
        let token = CachedToken {
            value: Secret::new("a"),
            reuse_until: None,
        };
        assert!(!token.reusable());
        let token = CachedToken {
            value: Secret::new("a"),
            reuse_until: Some(Instant::now() + Duration::from_secs(5)),
        };
        assert!(token.reusable());
    }

    #[test]
    fn dst_30_same_four_values_share_one_entry() {
        let cache = TokenCache::default();
        let key = |scope: Option<&str>| TokenKey {
            token_url: "https://idp/token".into(),
            client_id: "c".into(),
            scope: scope.map(str::to_owned),
            extra_params: vec![("audience".into(), "a".into())],
        };
        assert!(Arc::ptr_eq(
            &cache.entry(key(None)),
            &cache.entry(key(None))
        ));
        assert!(!Arc::ptr_eq(
            &cache.entry(key(None)),
            &cache.entry(key(Some("s")))
        ));
    }
}
