//! The engine's settings from the configuration: plain field mapping, no connector, no store.

use std::time::Duration;

use queuebox_config::{Config, InboxRetentionPolicy, OutboxRetentionPolicy, RetentionConfig};
use queuebox_core::retry::RetryPolicy;
use queuebox_engine::outbox::{
    BreakerSettings, DestinationGuard, GuardSettings, OutboxSettings, RateLimitSettings,
};
use queuebox_engine::relay::{RelaySettings, RelaySource};
use queuebox_engine::retention::{RetentionSettings, TableRetention};
use queuebox_store::RetentionRule;

/// The outbox poller's settings, from `outbox.*`.
pub fn outbox_settings(config: &Config) -> OutboxSettings {
    let outbox = &config.outbox;
    OutboxSettings {
        poll_interval: Duration::from_millis(outbox.poll_interval_ms),
        batch_size: outbox.batch_size,
        concurrency: outbox.concurrency as usize,
        retry: RetryPolicy {
            base_delay_ms: outbox.retry_base_delay_ms,
            max_delay_ms: outbox.retry_max_delay_ms,
        },
        claim_timeout: Duration::from_millis(outbox.claim_timeout_ms),
        pending_gauge_interval: Duration::from_millis(outbox.pending_gauge_interval_ms),
        shutdown_timeout: Duration::from_millis(outbox.shutdown_timeout_ms),
        key_run_length: outbox.key_run_length,
    }
}

/// The guard settings of one destination, from its `rateLimit` and `circuitBreaker`.
pub fn guard_settings(destination: &queuebox_config::Destination) -> GuardSettings {
    GuardSettings {
        rate_limit: destination.rate_limit.map(|r| RateLimitSettings {
            messages_per_second: r.messages_per_second,
            burst: r.burst,
        }),
        circuit_breaker: destination.circuit_breaker.map(|b| BreakerSettings {
            consecutive_failures: b.consecutive_failures,
            failure_rate_percent: b.failure_rate_percent,
            window: Duration::from_millis(b.window_ms),
            minimum_publishes: b.minimum_publishes,
            open_for: Duration::from_millis(b.open_ms),
        }),
    }
}

/// One guard per destination that sets `rateLimit` or `circuitBreaker` (issue 15 item 6).
pub fn destination_guards(
    config: &Config,
    metrics: &queuebox_telemetry::Metrics,
) -> std::collections::HashMap<String, std::sync::Arc<DestinationGuard>> {
    config
        .destinations
        .iter()
        .filter_map(|(name, d)| {
            let settings = guard_settings(d);
            settings
                .is_enabled()
                .then(|| (name.clone(), DestinationGuard::new(name, settings, metrics)))
        })
        .collect()
}

/// The push relay's settings, from `inbox.relay.*` (CFG-48).
pub fn relay_settings(config: &Config) -> RelaySettings {
    let relay = &config.inbox.relay;
    RelaySettings {
        poll_interval: Duration::from_millis(relay.poll_interval_ms),
        batch_size: relay.batch_size,
        claim_timeout: Duration::from_millis(relay.claim_timeout_ms),
        pending_gauge_interval: Duration::from_millis(relay.pending_gauge_interval_ms),
        // CFG-48 bounds it to a positive 32-bit integer.
        max_attempts: i32::try_from(relay.max_attempts).unwrap_or(i32::MAX),
    }
}

/// Every configured source with its relay topic. The relay claims only push rows, and only of
/// these sources (RLY-2); a pull source's topic is never rendered.
pub fn relay_sources(config: &Config) -> Vec<RelaySource> {
    config
        .sources
        .values()
        .map(|source| RelaySource {
            name: source.name.clone(),
            topic: source.topic.clone(),
        })
        .collect()
}

/// CFG-83: the policies apply only with `retention.enabled: true`; `DISABLED` is `None`.
pub fn retention_settings(config: &RetentionConfig) -> RetentionSettings {
    if !config.enabled {
        return RetentionSettings::default();
    }
    let outbox = match config.outbox.policy {
        OutboxRetentionPolicy::Age(age) => Some(RetentionRule::OutboxOlderThan(age)),
        OutboxRetentionPolicy::Count(n) => Some(RetentionRule::OutboxKeepNewest(n)),
        OutboxRetentionPolicy::Disabled => None,
    };
    let inbox = match config.inbox.policy {
        InboxRetentionPolicy::Age(age) => Some(RetentionRule::InboxOlderThan(age)),
        InboxRetentionPolicy::Disabled => None,
    };
    RetentionSettings {
        outbox: outbox.map(|rule| TableRetention {
            rule,
            cleanup_interval: config.outbox.cleanup_interval,
            batch: config.outbox.batch_size,
        }),
        inbox: inbox.map(|rule| TableRetention {
            rule,
            cleanup_interval: config.inbox.cleanup_interval,
            batch: config.inbox.batch_size,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_config::{InboxRetention, OutboxRetention};

    #[test]
    fn cfg_83_settings_follow_the_configuration_only_when_enabled() {
        let mut config = RetentionConfig {
            enabled: false,
            outbox: OutboxRetention {
                policy: OutboxRetentionPolicy::Count(100),
                cleanup_interval: Duration::from_secs(60),
                batch_size: 500,
            },
            inbox: InboxRetention {
                policy: InboxRetentionPolicy::Disabled,
                cleanup_interval: Duration::from_secs(3600),
                batch_size: 1000,
            },
        };
        assert!(!retention_settings(&config).is_enabled());
        config.enabled = true;
        let settings = retention_settings(&config);
        assert_eq!(
            settings.outbox,
            Some(TableRetention {
                rule: RetentionRule::OutboxKeepNewest(100),
                cleanup_interval: Duration::from_secs(60),
                batch: 500,
            })
        );
        assert_eq!(settings.inbox, None);
    }
}
