//! One claimed row before and after its publish (outbox.md §6, §7): the row checks and routing
//! that can end it at once (OUT-19 steps 1–2), the message it publishes, the terminal write its
//! outcome asks for (OUT-28..31), and the fields every log line about it carries (OUT-61).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use queuebox_core::redact::redact;
use queuebox_core::retry::{Attempt, FailureFate, MaxAttempts, RetryPolicy};
use queuebox_core::row_check::check_row;
use queuebox_core::{Destination, Outcome, OutgoingMessage};
use queuebox_store::{Claim, ClaimedRow, TerminalWrite};
use uuid::Uuid;

use super::route::{OutboxTransforms, Route, route};

/// The header that carries the correlation id (OPS-37), matched in any letter case.
const CORRELATION_HEADER: &str = "x-correlation-id";
/// OPS-38 bounds a received correlation id to this many characters; a row written directly by an
/// application is not bounded by anyone, so the log field applies the same bound.
const CORRELATION_MAX_CHARS: usize = 128;

/// The identity of one row in log lines (OUT-61, OPS-34). Holds no payload and no header value
/// other than the correlation id, which OPS-34 asks for (OPS-35).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowLog {
    pub message_id: Uuid,
    pub topic: String,
    /// Set once the row is routed.
    pub destination: Option<String>,
    pub attempt: i32,
    pub correlation_id: String,
}

/// Logs one event about one row with the OUT-61 fields. The level must be a `tracing::Level`
/// constant; further `field = value` pairs and the message follow the row.
macro_rules! row_event {
    ($level:expr, $row:expr, $($rest:tt)+) => {{
        let row: &$crate::outbox::row::RowLog = &$row;
        ::tracing::event!(
            $level,
            messageId = %row.message_id,
            topic = %row.topic,
            destination = row.destination.as_deref(),
            attempt = row.attempt,
            correlationId = %row.correlation_id,
            $($rest)+
        )
    }};
}
pub(crate) use row_event;

/// OPS-34: the `X-Correlation-Id` header (any letter case), else the row id. Control characters
/// are dropped and the text bounded, as OPS-38 does at receipt, so a row written by hand cannot
/// forge log lines; an empty result counts as absent.
pub fn correlation_id(message_id: Uuid, headers: &[(String, String)]) -> String {
    headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(CORRELATION_HEADER))
        .map(|(_, value)| {
            let clean: String = value.chars().filter(|c| !c.is_control()).collect();
            clean
                .trim()
                .chars()
                .take(CORRELATION_MAX_CHARS)
                .collect::<String>()
        })
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| message_id.to_string())
}

/// What the poller does with a row it just claimed.
// `Publish` is the common case and moves into the dispatcher's queue; boxing it would add an
// allocation per row to save stack space on the rare `Dead`.
#[allow(clippy::large_enum_variant)]
pub enum Prepared {
    /// OUT-7 / OUT-23: `dead` at once with `attempt` unchanged, no delivery.
    Dead { write: TerminalWrite, log: RowLog },
    /// Ready for a publish slot.
    Publish {
        message: OutgoingMessage,
        destination: Arc<dyn Destination>,
        transforms: OutboxTransforms,
        max_attempts: i32,
        log: RowLog,
    },
}

/// OUT-19 steps 1–2 (check, route) and the message of step 6. The transforms (steps 3–4) run
/// in the publish slot (`dispatch`), on every attempt; address templates (step 5) belong to the
/// connectors.
pub fn prepare(row: ClaimedRow, routes: &[Route]) -> Prepared {
    let claim = row.claim;
    let mut log = RowLog {
        message_id: claim.id.0,
        topic: row.topic,
        destination: None,
        attempt: row.attempt,
        correlation_id: claim.id.to_string(),
    };
    let headers = match check_row(&row.payload, &row.headers) {
        Ok(headers) => headers,
        Err(reason) => return dead_at_once(claim, log, reason.to_string()),
    };
    log.correlation_id = correlation_id(claim.id.0, &headers);
    let (destination, transforms) = match route(routes, &log.topic) {
        Ok(route) => (Arc::clone(&route.destination), route.transforms.clone()),
        Err(reason) => return dead_at_once(claim, log, reason),
    };
    log.destination = Some(destination.name().to_owned());
    let message = OutgoingMessage {
        id: claim.id.0,
        topic: log.topic.clone(),
        key: row.key.filter(|k| !k.is_empty()),
        aggregate_type: row.aggregate_type,
        attempt: row.attempt,
        headers,
        payload: row.payload,
        stored_payload: None,
    };
    Prepared::Publish {
        message,
        destination,
        transforms,
        max_attempts: row.max_attempts,
        log,
    }
}

fn dead_at_once(claim: Claim, log: RowLog, reason: String) -> Prepared {
    let write = TerminalWrite::Dead {
        claim,
        attempt: log.attempt,
        error: redact(&reason),
    };
    Prepared::Dead { write, log }
}

/// OUT-28..31: the terminal write an outcome asks for. The error text is redacted and cut to
/// 2000 characters by `redact` (OUT-33), whatever the connector already did.
pub fn terminal_write(
    claim: Claim,
    attempt: i32,
    max_attempts: i32,
    outcome: Outcome,
    retry: &RetryPolicy,
    jitter: f64,
) -> TerminalWrite {
    match outcome {
        Outcome::Delivered => TerminalWrite::Sent { claim },
        Outcome::Failed {
            reason,
            retry_after,
        } => match retry.fate(
            Attempt(attempt),
            MaxAttempts(max_attempts),
            retry_after,
            jitter,
        ) {
            FailureFate::Retry { attempt, delay } => TerminalWrite::Retry {
                claim,
                attempt,
                delay,
                error: redact(&reason),
            },
            FailureFate::Dead { attempt } => TerminalWrite::Dead {
                claim,
                attempt,
                error: redact(&reason),
            },
        },
    }
}

/// A uniform draw from [0, 1) for the backoff jitter (OUT-29). xorshift64* over one atomic
/// state, seeded from the clock: jitter only spreads retries apart, so it needs no cryptographic
/// quality and no dependency.
pub fn jitter() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        x = nanos | 1;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    // A lost race between two threads only repeats a draw; it never breaks the range.
    STATE.store(x, Ordering::Relaxed);
    let out = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
    (out >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::outbox::test_destination::Accepting;
    use queuebox_core::glob::TopicGlob;
    use queuebox_store::{ClaimToken, RowId};

    fn row(topic: &str, key: Option<&str>, payload: &str, headers: &str) -> ClaimedRow {
        ClaimedRow {
            claim: Claim {
                id: RowId(Uuid::new_v4()),
                token: ClaimToken(Uuid::new_v4()),
            },
            topic: topic.into(),
            key: key.map(Into::into),
            payload: payload.into(),
            headers: headers.into(),
            aggregate_type: None,
            attempt: 2,
            max_attempts: 5,
            sequence: 1,
        }
    }

    fn orders() -> Vec<Route> {
        vec![Route {
            pattern: TopicGlob::parse("order.*").unwrap(),
            destination: Arc::new(Accepting::named("orders")),
            transforms: OutboxTransforms::default(),
        }]
    }

    #[test]
    fn ops_34_correlation_id_is_the_header_in_any_case_else_the_row_id() {
        let id = Uuid::new_v4();
        let h = |n: &str, v: &str| vec![("a".to_owned(), "b".to_owned()), (n.into(), v.into())];
        assert_eq!(correlation_id(id, &h("X-CORRELATION-ID", "c-1")), "c-1");
        assert_eq!(correlation_id(id, &h("x-correlation-id", "c-2")), "c-2");
        assert_eq!(correlation_id(id, &h("x-other", "c-3")), id.to_string());
        assert_eq!(
            correlation_id(id, &h("X-Correlation-Id", " \n ")),
            id.to_string()
        );
        assert_eq!(correlation_id(id, &h("X-Correlation-Id", "a\nb")), "ab");
        let long = "x".repeat(300);
        assert_eq!(correlation_id(id, &h("X-Correlation-Id", &long)).len(), 128);
    }

    #[test]
    fn out_7_invalid_headers_go_dead_with_attempt_unchanged() {
        let r = row("order.created", None, "{}", "[1]");
        let claim = r.claim;
        let Prepared::Dead { write, log } = prepare(r, &orders()) else {
            panic!("expected dead")
        };
        assert_eq!(
            write,
            TerminalWrite::Dead {
                claim,
                attempt: 2,
                error: "The headers column is not a JSON object.".into()
            }
        );
        assert_eq!(log.destination, None);
        assert_eq!(log.correlation_id, claim.id.to_string());
    }

    #[test]
    fn out_23_no_route_goes_dead_with_the_topic_in_the_reason() {
        let r = row("invoice.paid", None, "{}", r#"{"X-Correlation-Id":"c"}"#);
        let Prepared::Dead { write, log } = prepare(r, &orders()) else {
            panic!("expected dead")
        };
        let TerminalWrite::Dead { attempt, error, .. } = write else {
            panic!("expected dead")
        };
        assert_eq!(
            (attempt, error.as_str()),
            (2, "No route matches topic 'invoice.paid'.")
        );
        assert_eq!(log.correlation_id, "c");
    }

    #[test]
    fn out_19_a_routed_row_becomes_a_message_and_an_empty_key_is_none() {
        let r = row("order.created", Some(""), r#"{"a":1}"#, r#"{"x-n":1}"#);
        let id = r.claim.id;
        let Prepared::Publish {
            message,
            destination,
            max_attempts,
            log,
            ..
        } = prepare(r, &orders())
        else {
            panic!("expected a publish")
        };
        assert_eq!(message.id, id.0);
        assert_eq!(message.key, None);
        assert_eq!(message.attempt, 2);
        assert_eq!(message.payload, r#"{"a":1}"#);
        assert_eq!(message.headers, vec![("x-n".to_owned(), "1".to_owned())]);
        assert_eq!(destination.name(), "orders");
        assert_eq!(max_attempts, 5);
        assert_eq!(log.destination.as_deref(), Some("orders"));
    }

    #[test]
    fn out_28_outcomes_become_sent_retry_or_dead() {
        let claim = Claim {
            id: RowId(Uuid::new_v4()),
            token: ClaimToken(Uuid::new_v4()),
        };
        let policy = RetryPolicy {
            base_delay_ms: 1000,
            max_delay_ms: 60_000,
        };
        assert_eq!(
            terminal_write(claim, 0, 3, Outcome::Delivered, &policy, 0.5),
            TerminalWrite::Sent { claim }
        );
        let failed = || Outcome::Failed {
            reason: "token=abc123 refused".into(),
            // Above the 2.25 s backoff of the second failure, so it sets the delay.
            retry_after: Some(Duration::from_secs(3)),
        };
        let TerminalWrite::Retry {
            attempt,
            delay,
            error,
            ..
        } = terminal_write(claim, 1, 3, failed(), &policy, 0.5)
        else {
            panic!("expected a retry")
        };
        assert_eq!((attempt, delay), (2, Duration::from_secs(3)));
        assert!(!error.contains("abc123"), "{error}");
        assert!(matches!(
            terminal_write(claim, 2, 3, failed(), &policy, 0.5),
            TerminalWrite::Dead { attempt: 3, .. }
        ));
        let TerminalWrite::Dead { error, .. } =
            terminal_write(claim, 0, 1, Outcome::failed("x".repeat(5000)), &policy, 0.0)
        else {
            panic!("expected dead")
        };
        assert_eq!(error.chars().count(), 2000);
        assert!(error.ends_with("...[truncated]"));
    }

    #[test]
    fn out_29_jitter_stays_in_unit_range_and_varies() {
        let draws: Vec<f64> = (0..1000).map(|_| jitter()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        let low = draws.iter().filter(|d| **d < 0.5).count();
        assert!((300..700).contains(&low), "{low} of 1000 below 0.5");
    }
}
