//! Waiting for the database at start (config.md CFG-37, operations.md OPS-23 step 8), the same
//! for every store: tries 250 ms apart, doubling, at most 5 s apart, until
//! `database.startupTimeoutMs`. A refusal that waiting cannot change (issue 14 item 1) ends the
//! wait at once; while the database is only unreachable, a warn line every few seconds says
//! what QueueBox waits for, for how long so far, and which key sets the limit.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::StoreError;

/// The first pause between tries, doubled after each failed try up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(250);
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How often the wait says it is still waiting (the first failed try says so too).
pub const WARN_EVERY: Duration = Duration::from_secs(5);

/// One failed try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The database could not be reached or is not ready yet (refused, timed out, starting up):
    /// try again until the limit.
    Retry(String),
    /// The database answered with a permanent refusal: stop now with its reason and the fix.
    Refused { reason: String, fix: String },
}

/// Tries `try_once` until it succeeds (its value is returned), refuses, or
/// `startup_timeout_ms` runs out.
pub async fn wait_for_database<T, F, Fut>(
    host_port: &str,
    startup_timeout_ms: u64,
    mut try_once: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Attempt>>,
{
    let limit = Duration::from_millis(startup_timeout_ms);
    let started = Instant::now();
    let deadline = started + limit;
    let mut backoff = FIRST_BACKOFF;
    let mut next_warn = started;
    let mut last_reason = "no answer".to_owned();
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            break;
        }
        match tokio::time::timeout(remaining, try_once()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(Attempt::Refused { reason, fix })) => {
                return Err(StoreError::Refused {
                    host_port: host_port.to_owned(),
                    reason,
                    fix,
                });
            }
            Ok(Err(Attempt::Retry(reason))) => last_reason = reason,
            Err(_) => break,
        }
        let now = Instant::now();
        if now >= next_warn && now < deadline {
            tracing::warn!(
                "Waiting for the database at {host_port} ({last_reason}): {} s so far; the start gives up after {} s (database.startupTimeoutMs).",
                now.duration_since(started).as_secs(),
                seconds(limit),
            );
            next_warn = now + WARN_EVERY;
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(backoff.min(remaining)).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    Err(StoreError::NotReachable {
        host_port: host_port.to_owned(),
        waited_ms: startup_timeout_ms,
        reason: last_reason,
    })
}

/// Whole seconds, or one decimal below ten (a 1500 ms limit is "1.5").
fn seconds(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms.is_multiple_of(1000) || ms >= 10_000 {
        (ms / 1000).to_string()
    } else {
        format!("{:.1}", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn a_refusal_ends_the_wait_at_once_and_a_retry_waits_for_the_limit() {
        let tries = AtomicU32::new(0);
        let err = wait_for_database::<(), _, _>("db:5432", 60_000, || {
            tries.fetch_add(1, Ordering::Relaxed);
            async {
                Err(Attempt::Refused {
                    reason: "database \"x\" does not exist".into(),
                    fix: "Create it.".into(),
                })
            }
        })
        .await
        .unwrap_err();
        assert_eq!(tries.load(Ordering::Relaxed), 1);
        assert_eq!(
            err.startup_line(),
            "QueueBox could not connect to the database. Reason: db:5432: database \"x\" does not exist. Create it."
        );
        let started = Instant::now();
        let err = wait_for_database::<(), _, _>("db:5432", 1500, || async {
            Err(Attempt::Retry("Connection refused (os error 111)".into()))
        })
        .await
        .unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(1500));
        assert!(matches!(err, StoreError::NotReachable { .. }), "{err}");
    }

    #[test]
    fn the_limit_reads_in_seconds() {
        assert_eq!(seconds(Duration::from_millis(60_000)), "60");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5");
        assert_eq!(seconds(Duration::from_millis(12_345)), "12");
    }
}
