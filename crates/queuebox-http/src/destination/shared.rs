//! `SharedHttp`: what all HTTP destinations share — the reqwest clients, the OAuth2 token cache
//! (DST-29, DST-30 step 3) and the metric registry of the response counter.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use queuebox_core::redact::error_text;
use queuebox_telemetry::Metrics;

use super::DestinationError;
use super::oauth2::TokenCache;

/// What all HTTP destinations share: the clients (one per connect timeout, as reqwest sets it
/// per client), the OAuth2 token cache (DST-30 step 3) and the registry that counts their
/// responses. Build one at start.
pub struct SharedHttp {
    clients: Mutex<HashMap<Duration, reqwest::Client>>,
    pub(crate) tokens: TokenCache,
    pub(crate) metrics: Metrics,
}

impl SharedHttp {
    pub fn new(metrics: Metrics) -> Self {
        // reqwest is built with `rustls-no-provider` and takes the process-wide provider. ring
        // is the one the rest of the workspace uses; when something installed a provider
        // already, that one stays.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            clients: Mutex::new(HashMap::new()),
            tokens: TokenCache::default(),
            metrics,
        }
    }

    /// DST-29: verify certificates always (platform verifier, system roots), HTTP/2 by ALPN,
    /// pooled connections, no proxy; DST-25: never follow a redirect; DST-26: connect bound.
    pub(crate) fn client(
        &self,
        connect_timeout: Duration,
    ) -> Result<reqwest::Client, DestinationError> {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(client) = clients.get(&connect_timeout) {
            return Ok(client.clone());
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(connect_timeout)
            .build()
            .map_err(|err| DestinationError::Client(error_text(&err)))?;
        clients.insert(connect_timeout, client.clone());
        Ok(client)
    }
}
