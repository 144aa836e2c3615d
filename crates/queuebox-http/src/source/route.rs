//! One HTTP source prepared for its route: what only HTTP needs (the path, authentication, the
//! headers it keeps, the rate limit), computed once at start from the validated configuration
//! (config.md §12, inbox.md §3). Everything about the message itself is the engine's pipeline.

use queuebox_config::{Source, SourceKind};
use queuebox_core::SourceName;

use super::auth::{AuthConfigError, Authenticator};
use super::headers::HeaderPolicy;
use super::rate::TokenBucket;

/// A source this route cannot run. The configuration checks prevent both.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceRouteError {
    #[error("sources.{name}: type {kind} is not an http source")]
    NotHttp { name: String, kind: &'static str },
    #[error("sources.{name}.auth: {error}")]
    Auth {
        name: String,
        error: AuthConfigError,
    },
}

/// One `http` source, ready to serve `POST <basePath><path>`.
#[derive(Debug)]
pub struct HttpSourceRoute {
    pub(crate) name: SourceName,
    pub(crate) route: String,
    pub(crate) auth: Authenticator,
    pub(crate) headers: HeaderPolicy,
    pub(crate) rate_limit: Option<TokenBucket>,
}

impl HttpSourceRoute {
    pub fn from_config(source: &Source) -> Result<Self, SourceRouteError> {
        let SourceKind::Http(http) = &source.kind else {
            return Err(SourceRouteError::NotHttp {
                name: source.name.clone(),
                kind: source.kind.type_name(),
            });
        };
        let auth = Authenticator::from_config(http.auth.as_ref()).map_err(|error| {
            SourceRouteError::Auth {
                name: source.name.clone(),
                error,
            }
        })?;
        Ok(Self {
            name: SourceName::new(source.name.clone()),
            route: http.route.clone(),
            auth,
            headers: HeaderPolicy::new(&withheld(source, http.auth.as_ref())),
            rate_limit: source
                .rate_limit
                .map(|limit| TokenBucket::per_minute(limit.requests_per_minute)),
        })
    }

    /// `POST` path: `inbox.basePath` + `path`.
    pub fn route(&self) -> &str {
        &self.route
    }

    /// The source name stored in `inbox.source`.
    pub fn source_name(&self) -> &SourceName {
        &self.name
    }
}

/// The auth headers the source never stores (INB-21). With `storeRawBody: true` a signature
/// header (`hmac` and the sender presets) is kept beside the raw body, so a consumer can verify
/// the stored message again with the secret (issue 15): a signature is an HMAC of this one body,
/// not a credential. An `api-key` header is a credential and is never kept.
fn withheld(
    source: &Source,
    auth: Option<&queuebox_config::InboundAuth>,
) -> Vec<queuebox_config::HeaderName> {
    match auth {
        Some(queuebox_config::InboundAuth::Hmac(_) | queuebox_config::InboundAuth::Preset(_))
            if source.store_raw_body =>
        {
            Vec::new()
        }
        Some(auth) => auth.credential_headers(),
        None => Vec::new(),
    }
}
