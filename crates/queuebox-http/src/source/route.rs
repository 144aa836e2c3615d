//! One HTTP source prepared for its route: everything the request path needs, computed once at
//! start from the validated configuration (config.md §12, inbox.md §2).

use queuebox_config::{Filter, Source, SourceKind};
use queuebox_store::Consumption;

use super::auth::{AuthConfigError, Authenticator};
use super::extract::Chain;
use super::headers::HeaderPolicy;
use super::rate::TokenBucket;
use super::schedule::ScheduleRule;

/// A source this route cannot run. The configuration checks most of these already; the rest
/// are what this build does not implement yet (transforms, JSONata), which the binary also
/// refuses at start, so none of them can surface while requests are served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceRouteError {
    #[error("sources.{name}: type {kind} is not an http source")]
    NotHttp { name: String, kind: &'static str },
    #[error("sources.{name}.transform: source transforms are not supported yet")]
    Transform { name: String },
    #[error("sources.{name}.{key}: expressions are not supported yet")]
    Expression { name: String, key: &'static str },
    #[error(
        "sources.{name}: set idempotencyKeyHeader, idempotencyKeyExpression or idempotencyKeyPath"
    )]
    NoKeyStep { name: String },
    #[error("sources.{name}.auth: {error}")]
    Auth {
        name: String,
        error: AuthConfigError,
    },
}

/// One `http` source, ready to serve `POST <basePath><path>`.
#[derive(Debug)]
pub struct HttpSourceRoute {
    pub(crate) name: String,
    pub(crate) route: String,
    pub(crate) consumption: Consumption,
    pub(crate) auth: Authenticator,
    pub(crate) headers: HeaderPolicy,
    pub(crate) filter: Filter,
    pub(crate) rate_limit: Option<TokenBucket>,
    pub(crate) key: Chain,
    pub(crate) aggregate_id: Chain,
    pub(crate) event_type: Chain,
    pub(crate) schedule: ScheduleRule,
}

impl HttpSourceRoute {
    pub fn from_config(source: &Source) -> Result<Self, SourceRouteError> {
        let name = source.name.clone();
        let SourceKind::Http(http) = &source.kind else {
            return Err(SourceRouteError::NotHttp {
                name,
                kind: source.kind.type_name(),
            });
        };
        if source.transform.is_some() {
            return Err(SourceRouteError::Transform { name });
        }
        for (key, expression) in [
            (
                "idempotencyKeyExpression",
                &source.idempotency_key_expression,
            ),
            ("aggregateIdExpression", &source.aggregate_id_expression),
            ("eventTypeExpression", &source.event_type_expression),
        ] {
            if expression.is_some() {
                return Err(SourceRouteError::Expression { name, key });
            }
        }
        if http.idempotency_key_header.is_none() && source.idempotency_key_path.is_empty() {
            return Err(SourceRouteError::NoKeyStep { name });
        }
        let auth = Authenticator::from_config(http.auth.as_ref()).map_err(|error| {
            SourceRouteError::Auth {
                name: name.clone(),
                error,
            }
        })?;
        let header = |h: &Option<queuebox_config::HeaderName>| h.as_ref().map(|h| h.to_string());
        Ok(Self {
            route: http.route.clone(),
            consumption: match source.consumption {
                queuebox_config::Consumption::Push => Consumption::Push,
                queuebox_config::Consumption::Pull => Consumption::Pull,
            },
            auth,
            headers: HeaderPolicy::new(http.auth.as_ref().and_then(|a| a.credential_header())),
            filter: source.filter.clone(),
            rate_limit: source
                .rate_limit
                .map(|limit| TokenBucket::per_minute(limit.requests_per_minute)),
            key: Chain {
                attribute: "idempotency key",
                header: header(&http.idempotency_key_header),
                paths: source.idempotency_key_path.clone(),
            },
            aggregate_id: Chain {
                attribute: "aggregate id",
                header: header(&http.aggregate_id_header),
                paths: source.aggregate_id_path.clone(),
            },
            event_type: Chain {
                attribute: "event type",
                header: header(&http.event_type_header),
                paths: source.event_type_path.clone(),
            },
            schedule: ScheduleRule {
                initial_delay: source.initial_delay,
                header: header(&source.scheduled_at_header),
                paths: source.scheduled_at_path.clone(),
            },
            name,
        })
    }

    /// The `http` sources of a configuration, in order; broker sources are skipped.
    pub fn all<'a>(
        sources: impl IntoIterator<Item = &'a Source>,
    ) -> Result<Vec<Self>, SourceRouteError> {
        sources
            .into_iter()
            .filter(|source| matches!(source.kind, SourceKind::Http(_)))
            .map(Self::from_config)
            .collect()
    }

    /// `POST` path: `inbox.basePath` + `path`.
    pub fn route(&self) -> &str {
        &self.route
    }

    /// The source name stored in `inbox.source`.
    pub fn source_name(&self) -> &str {
        &self.name
    }
}
