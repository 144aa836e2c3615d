//! The HTTP destination (DST-23..31): settings, the shared client and token cache, and the
//! publisher that sends one `POST` per delivery.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use queuebox_core::Secret;
use queuebox_core::redact::error_text;
use queuebox_core::{Destination, DestinationType, Outcome, OutgoingMessage, ReadinessComponent};
use queuebox_telemetry::Metrics;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use url::Url;

use super::DestinationError;
use super::body::{deadline_after, drain_in_background, read_at_most};
use super::classify::{Exchange, Limits, classify};
use super::headers::{Groups, RESERVED_HTTP, assemble, check_static, is_reserved, log_dropped};
use super::oauth2::{TokenEntry, TokenKey, TokenRequest};
use super::shared::SharedHttp;
use super::target::{check_base, join};
use crate::standard_webhooks;

/// `User-Agent` sent unless a row or static header sets one (DST-11).
pub(crate) const USER_AGENT_VALUE: &str = concat!("queuebox/", env!("CARGO_PKG_VERSION"));

/// One `http` destination, mapped from configuration by the binary's wiring.
#[derive(Clone, Debug)]
pub struct HttpDestinationSettings {
    pub name: String,
    pub base_url: Url,
    pub path: String,
    /// `timeoutMs`: the whole exchange; connection setup gets half of it (DST-26).
    pub timeout: Duration,
    pub static_headers: Vec<(String, Secret)>,
    pub auth: Option<HttpAuth>,
    /// `signing` (DST-31a): the Standard Webhooks secrets (`whsec_…`), one signature each;
    /// empty when deliveries are not signed.
    pub signing: Vec<Secret>,
    /// `http.maxErrorBodyBytes` (CFG-62).
    pub max_error_body_bytes: usize,
}

/// The `auth` block of an HTTP destination (DST-30, DST-31).
#[derive(Clone, Debug)]
pub enum HttpAuth {
    Basic {
        username: String,
        password: Secret,
    },
    Header {
        name: String,
        value: Secret,
    },
    OAuth2 {
        client_id: String,
        client_secret: Secret,
        token_url: Url,
        scope: Option<String>,
        extra_params: Vec<(String, String)>,
    },
}

impl HttpDestinationSettings {
    /// The URLs that DST-32 checks, each with the configuration key an error names.
    pub fn private_address_targets(&self) -> Vec<(String, Url)> {
        let mut targets = vec![(
            format!("destinations.{}.baseUrl", self.name),
            self.base_url.clone(),
        )];
        if let Some(HttpAuth::OAuth2 { token_url, .. }) = &self.auth {
            targets.push((
                format!("destinations.{}.auth.tokenUrl", self.name),
                token_url.clone(),
            ));
        }
        targets
    }
}

enum Auth {
    /// Basic or header auth: the same header on every request.
    Fixed { name: String, value: Secret },
    OAuth2 {
        entry: Arc<TokenEntry>,
        request: Box<TokenRequest>,
    },
}

/// An HTTP destination (destinations.md §4): one `POST` per delivery.
pub struct HttpDestination {
    name: String,
    url: Url,
    timeout: Duration,
    max_error_body_bytes: usize,
    client: reqwest::Client,
    static_headers: Vec<(String, Secret)>,
    auth: Option<Auth>,
    /// DST-31a: the key bytes of the signing secrets; empty when not signing.
    signing: SigningKeys,
    /// `queuebox_http_publish_responses_total{status_class}` (DST-29).
    metrics: Metrics,
}

/// The Standard Webhooks keys of one destination. Debug never shows them (SEC-7).
struct SigningKeys(Vec<Vec<u8>>);

impl SigningKeys {
    /// DST-31a: `webhook-id` (the outbox id, stable across attempts), `webhook-timestamp`
    /// (this attempt's time, in seconds) and `webhook-signature` over `id.timestamp.body`.
    fn headers(&self, message: &OutgoingMessage) -> Option<[(&'static str, String); 3]> {
        if self.0.is_empty() {
            return None;
        }
        let id = message.id.to_string();
        let timestamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs() as i64);
        let signature =
            standard_webhooks::header_value(&self.0, &id, timestamp, message.payload.as_bytes());
        Some([
            ("webhook-id", id),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signature),
        ])
    }
}

impl HttpDestination {
    /// Checks the settings (the start-time rules of DST-8, DST-10, DST-23, DST-30, DST-31)
    /// and builds the destination. Opens no connection (DST-2).
    pub fn new(
        settings: HttpDestinationSettings,
        shared: &SharedHttp,
    ) -> Result<Self, DestinationError> {
        let name = settings.name;
        check_base(&name, "baseUrl", &settings.base_url)?;
        let url = join(&name, &settings.base_url, &settings.path)?;
        check_static(
            &name,
            &settings.static_headers,
            RESERVED_HTTP,
            carry_problem,
        )?;
        let client = shared.client(settings.timeout / 2)?;
        let auth = match settings.auth {
            None => None,
            Some(HttpAuth::Basic { username, password }) => {
                if username.contains(':') {
                    return Err(DestinationError::BasicUsernameColon { destination: name });
                }
                let encoded = base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{}", password.expose()));
                Some(Auth::Fixed {
                    name: "Authorization".to_owned(),
                    value: Secret::new(format!("Basic {encoded}")),
                })
            }
            Some(HttpAuth::Header {
                name: header,
                value,
            }) => {
                let key = "auth.headerName";
                if is_reserved(&header, RESERVED_HTTP) {
                    return Err(DestinationError::ReservedHeader {
                        destination: name,
                        key,
                        header,
                    });
                }
                if let Some(reason) = carry_problem(&header, value.expose()) {
                    return Err(DestinationError::InvalidHeader {
                        destination: name,
                        key,
                        header,
                        reason,
                    });
                }
                Some(Auth::Fixed {
                    name: header,
                    value,
                })
            }
            Some(HttpAuth::OAuth2 {
                client_id,
                client_secret,
                token_url,
                scope,
                extra_params,
            }) => {
                check_base(&name, "auth.tokenUrl", &token_url)?;
                let taken = ["grant_type", "client_id", "client_secret", "scope"];
                if let Some((param, _)) = extra_params
                    .iter()
                    .find(|(p, _)| taken.contains(&p.as_str()))
                {
                    return Err(DestinationError::ReservedOAuth2Param {
                        destination: name,
                        param: param.clone(),
                    });
                }
                let entry = shared.tokens.entry(TokenKey {
                    token_url: token_url.to_string(),
                    client_id: client_id.clone(),
                    scope: scope.clone(),
                    extra_params: extra_params.clone(),
                });
                let request = TokenRequest {
                    client: client.clone(),
                    token_url,
                    client_id,
                    client_secret,
                    scope,
                    extra_params,
                    timeout: settings.timeout,
                    max_error_body_bytes: settings.max_error_body_bytes,
                };
                Some(Auth::OAuth2 {
                    entry,
                    request: Box::new(request),
                })
            }
        };
        let signing = settings
            .signing
            .iter()
            .map(|secret| standard_webhooks::key(secret.expose()))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| DestinationError::SigningSecret {
                destination: name.clone(),
            })?;
        Ok(Self {
            name,
            url,
            timeout: settings.timeout,
            max_error_body_bytes: settings.max_error_body_bytes,
            client,
            static_headers: settings.static_headers,
            auth,
            signing: SigningKeys(signing),
            metrics: shared.metrics.clone(),
        })
    }

    /// The target URL of DST-23.
    pub fn target(&self) -> &Url {
        &self.url
    }

    /// Publishes and also returns the final status received, if any, for
    /// `queuebox_http_publish_responses_total{status_class}` (DST-29; see `status_class`).
    pub async fn publish_detailed(&self, message: &OutgoingMessage) -> (Outcome, Option<u16>) {
        let limits = |now| Limits {
            timeout: self.timeout,
            max_error_body_bytes: self.max_error_body_bytes,
            now,
        };
        // DST-30 step 5: no token, no request.
        let mut sent_token = None;
        let auth = match &self.auth {
            None => None,
            Some(Auth::Fixed { name, value }) => Some((name.as_str(), value.clone())),
            Some(Auth::OAuth2 { entry, request }) => match entry.token(request).await {
                Ok(token) => {
                    let bearer = Secret::new(format!("Bearer {}", token.expose()));
                    sent_token = Some(token);
                    Some(("Authorization", bearer))
                }
                Err(failure) => return (Outcome::failed(failure), None),
            },
        };
        let headers = match self.headers(message, auth.as_ref().map(|(n, v)| (*n, v))) {
            Ok(headers) => headers,
            Err(header) => {
                let reason =
                    format!("Publish failed: the header '{header}' cannot be sent over HTTP");
                return (
                    classify(Exchange::Transport(&reason), limits(SystemTime::now())),
                    None,
                );
            }
        };

        let deadline = deadline_after(self.timeout);
        let send = self
            .client
            .post(self.url.clone())
            .headers(headers)
            .body(message.payload.clone())
            .send();
        let response = match tokio::time::timeout_at(deadline, send).await {
            Err(_) => return (classify(Exchange::Timeout, limits(SystemTime::now())), None),
            Ok(Err(err)) if err.is_timeout() => {
                return (classify(Exchange::Timeout, limits(SystemTime::now())), None);
            }
            Ok(Err(err)) => {
                let text = error_text(&err.without_url());
                return (
                    classify(Exchange::Transport(&text), limits(SystemTime::now())),
                    None,
                );
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        if response.status().is_success() {
            // The body of a 2xx is ignored (DST-28): judged without it.
            drain_in_background(response, deadline);
            let exchange = Exchange::Response {
                status,
                retry_after: None,
                body: &[],
            };
            return (classify(exchange, limits(SystemTime::now())), Some(status));
        }
        if status == 401
            && let (Some(Auth::OAuth2 { entry, .. }), Some(token)) = (&self.auth, &sent_token)
        {
            // DST-30 step 6: the next attempt requests a new token.
            entry.invalidate(token).await;
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let read = read_at_most(response, self.max_error_body_bytes);
        let Ok(body) = tokio::time::timeout_at(deadline, read).await else {
            return (
                classify(Exchange::Timeout, limits(SystemTime::now())),
                Some(status),
            );
        };
        let exchange = Exchange::Response {
            status,
            retry_after: retry_after.as_deref(),
            body: &body,
        };
        (classify(exchange, limits(SystemTime::now())), Some(status))
    }

    /// The headers of §2 for HTTP. `Err` names a standard or auth header whose value HTTP
    /// cannot carry (a topic or key with a control character, an odd token).
    fn headers(
        &self,
        message: &OutgoingMessage,
        auth: Option<(&str, &Secret)>,
    ) -> Result<HeaderMap, String> {
        let mut standard = vec![
            ("X-Message-Id".to_owned(), message.id.to_string()),
            ("X-Topic".to_owned(), message.topic.clone()),
            ("X-Attempt".to_owned(), message.attempt.to_string()),
        ];
        if let Some(key) = message.key.as_deref().filter(|key| !key.is_empty()) {
            standard.push(("X-Message-Key".to_owned(), key.to_owned()));
        }
        standard.push(("Content-Type".to_owned(), "application/json".to_owned()));
        let assembled = assemble(
            Groups {
                standard,
                row: &message.headers,
                auth: auth.map(|(name, value)| (name, value.expose())),
                statics: &self.static_headers,
            },
            RESERVED_HTTP,
            |name, value| carry_problem(name, value).is_none(),
        );
        log_dropped(&self.name, &message.id.to_string(), &assembled);

        let mut map = HeaderMap::with_capacity(assembled.headers.len() + 1);
        for (name, value) in &assembled.headers {
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| name.clone())?;
            let mut value = HeaderValue::from_bytes(value.as_bytes()).map_err(|_| name.clone())?;
            // Never indexed by HPACK, never printed by reqwest's Debug.
            if auth.is_some_and(|(auth_name, _)| auth_name.eq_ignore_ascii_case(name)) {
                value.set_sensitive(true);
            }
            map.insert(header, value);
        }
        // DST-31a: the signature covers exactly these values, so they win over any row or
        // static header of the same name.
        if let Some(signed) = self.signing.headers(message) {
            for (name, value) in signed {
                let value = HeaderValue::from_str(&value).map_err(|_| name.to_owned())?;
                map.insert(HeaderName::from_static(name), value);
            }
        }
        if !assembled.contains("user-agent") {
            map.insert(
                reqwest::header::USER_AGENT,
                HeaderValue::from_static(USER_AGENT_VALUE),
            );
        }
        Ok(map)
    }
}

#[async_trait::async_trait]
impl Destination for HttpDestination {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> DestinationType {
        DestinationType::Http
    }

    async fn publish(&self, message: &OutgoingMessage) -> Outcome {
        let (outcome, status) = self.publish_detailed(message).await;
        if let Some(status) = status {
            self.metrics.http_publish_responses(status).inc();
        }
        outcome
    }

    /// No connection outlives a publish that readiness could watch (DST-2).
    fn readiness(&self) -> Vec<ReadinessComponent> {
        Vec::new()
    }

    /// Nothing is buffered: every publish ends with the receiver's answer.
    async fn close(&self) {}
}

/// DST-10 for HTTP: a name must be a token, a value must have no CR, LF, NUL (or another
/// control character, which the HTTP stack refuses as well). UTF-8 values are carried.
pub(crate) fn carry_problem(name: &str, value: &str) -> Option<&'static str> {
    if HeaderName::from_bytes(name.as_bytes()).is_err() {
        Some("the name is not an HTTP token")
    } else if HeaderValue::from_bytes(value.as_bytes()).is_err() {
        Some("the value contains CR, LF, NUL or another control character")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dst_10_http_carry_rules() {
        assert_eq!(carry_problem("X-Ok", "caf\u{e9} v\talue"), None);
        assert!(carry_problem("bad name", "v").is_some());
        assert!(carry_problem("X-A:", "v").is_some());
        assert!(carry_problem("", "v").is_some());
        for value in ["a\rb", "a\nb", "a\0b"] {
            assert!(carry_problem("X-A", value).is_some(), "{value:?}");
        }
    }

    #[test]
    fn dst_11_user_agent_names_the_crate_version() {
        assert_eq!(
            USER_AGENT_VALUE,
            format!("queuebox/{}", env!("CARGO_PKG_VERSION"))
        );
    }
}
