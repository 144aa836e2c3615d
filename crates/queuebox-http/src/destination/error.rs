//! `DestinationError`: why an HTTP or `log` destination cannot be built at start.
//!
//! A publish never returns an error: it returns an `Outcome` (DST-3). These errors stop the
//! start, so each one names the configuration key it is about and never a secret value.

use std::net::IpAddr;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DestinationError {
    #[error("destinations.{destination}.{key}: {reason}")]
    InvalidUrl {
        destination: String,
        key: &'static str,
        reason: String,
    },

    #[error(
        "destinations.{destination}.path: the segment '{segment}' is not allowed (no '.' or '..' segment)"
    )]
    DotSegment {
        destination: String,
        segment: String,
    },

    #[error(
        "destinations.{destination}.{key}: '{header}' is a reserved header name; only QueueBox sets it"
    )]
    ReservedHeader {
        destination: String,
        key: &'static str,
        header: String,
    },

    #[error("destinations.{destination}.{key}: the header '{header}' cannot be sent: {reason}")]
    InvalidHeader {
        destination: String,
        key: &'static str,
        header: String,
        reason: &'static str,
    },

    #[error("destinations.{destination}.auth.username: must not contain ':'")]
    BasicUsernameColon { destination: String },

    #[error("destinations.{destination}.auth.extraParams: '{param}' is set by QueueBox itself")]
    ReservedOAuth2Param { destination: String, param: String },

    #[error(
        "destinations.{destination}.signing.secret: not a Standard Webhooks secret (whsec_ followed by base64)"
    )]
    SigningSecret { destination: String },

    #[error("could not build the HTTP client: {0}")]
    Client(String),

    #[error("destinations.{destination}.file: cannot open '{}' for appending: {source}", path.display())]
    LogFile {
        destination: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "{key}: the host '{host}' resolves to the non-public address {address}, and http.blockPrivateAddresses is true"
    )]
    PrivateAddress {
        key: String,
        host: String,
        address: IpAddr,
    },
}
