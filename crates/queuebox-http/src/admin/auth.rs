//! Authentication of an admin request (ADM-3, ADM-4): the source kinds with their checks and
//! 401 texts, except that an HMAC signs the method, the request target and the body, so a
//! captured signature cannot authorize another operation.

use axum::http::request::Parts;
use queuebox_config::InboundAuth;

use crate::source::auth::{AuthConfigError, Authenticator};

/// The admin check, prepared at start. Public so that routes merged next to the admin API (the
/// console) check a request exactly as the API does.
#[derive(Debug)]
pub struct AdminAuth {
    check: Authenticator,
    kind: &'static str,
}

impl AdminAuth {
    /// `None` is no authentication: only valid with `admin.insecure: true` (ADM-2), which the
    /// caller has checked.
    pub fn new(auth: Option<&InboundAuth>) -> Result<Self, AuthConfigError> {
        let kind = match auth {
            None => "none",
            Some(InboundAuth::Bearer { .. }) => "bearer",
            Some(InboundAuth::ApiKey { .. }) => "api-key",
            Some(InboundAuth::Hmac(_)) => "hmac",
            Some(InboundAuth::Preset(_)) => "preset",
        };
        Ok(Self {
            check: Authenticator::from_config(auth)?,
            kind,
        })
    }

    /// The type of authentication, for the log line of a change (ADM-10); never a credential.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Checks one request: `Err` holds the 401 text.
    pub fn check(&self, parts: &Parts, body: &[u8]) -> Result<(), String> {
        let signed = signed_bytes(parts, body);
        self.check
            .check(&parts.headers, &signed)
            .map_err(|failure| failure.0)
    }
}

/// ADM-4: `METHOD target\nbody`, where the target is the path and query exactly as received.
pub fn signed_bytes(parts: &Parts, body: &[u8]) -> Vec<u8> {
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path(), |pq| pq.as_str());
    let mut bytes = Vec::with_capacity(target.len() + body.len() + 16);
    bytes.extend_from_slice(parts.method.as_str().to_ascii_uppercase().as_bytes());
    bytes.push(b' ');
    bytes.extend_from_slice(target.as_bytes());
    bytes.push(b'\n');
    bytes.extend_from_slice(body);
    bytes
}
