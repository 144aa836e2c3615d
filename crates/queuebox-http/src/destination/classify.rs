//! What one HTTP exchange means for the delivery: the single `classify` function (success on
//! 2xx only, failure texts of DST-28, `Retry-After` of DST-27), and the metric status class.

use std::time::{Duration, SystemTime};

use queuebox_core::destination::Outcome;
use queuebox_core::redact::{redact, redact_cut};

/// What came back from one publish attempt, before it is judged.
#[derive(Debug)]
pub(crate) enum Exchange<'a> {
    /// A final status with its `Retry-After` header (if any) and the kept start of the body
    /// (only read for a non-2xx status).
    Response {
        status: u16,
        retry_after: Option<&'a str>,
        body: &'a [u8],
    },
    /// The `timeoutMs` budget ran out (connect, send, headers or error body).
    Timeout,
    /// Connection, TLS or protocol error, already rendered as text.
    Transport(&'a str),
}

/// Limits and clock that `classify` needs; the clock is a field so date tests are exact.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub timeout: Duration,
    pub max_error_body_bytes: usize,
    pub now: SystemTime,
}

/// The one place that turns an exchange into an `Outcome` (architecture rule 1). Retry and
/// dead-letter decisions stay with the engine; this only says delivered or failed, and why.
pub(crate) fn classify(exchange: Exchange<'_>, limits: Limits) -> Outcome {
    match exchange {
        // DST-25: every 2xx completes the delivery; the body is ignored.
        Exchange::Response {
            status: 200..=299, ..
        } => Outcome::Delivered,
        // DST-25/28: any other final status (1xx that surfaced, 3xx never followed, 4xx, 5xx).
        Exchange::Response {
            status,
            retry_after,
            body,
        } => {
            let max = limits.max_error_body_bytes;
            let mut text = format!("HTTP {status}");
            if let Some(phrase) = reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|code| code.canonical_reason())
            {
                text.push_str(": ");
                text.push_str(phrase);
            }
            let kept = &body[..body.len().min(max)];
            // A body that fills the limit may have been cut inside an echoed secret.
            let text_of_body = String::from_utf8_lossy(kept);
            let redacted = if body.len() >= max {
                redact_cut(&text_of_body)
            } else {
                redact(&text_of_body)
            };
            let body_text = cut(&redacted, max);
            if !body_text.trim().is_empty() {
                text.push_str(" - ");
                text.push_str(body_text);
            }
            // DST-27: Retry-After only counts on 429 and 503.
            let retry_after = match status {
                429 | 503 => retry_after.and_then(|value| parse_retry_after(value, limits.now)),
                _ => None,
            };
            Outcome::Failed {
                reason: cut(&text, max).to_owned(),
                retry_after,
            }
        }
        Exchange::Timeout => Outcome::failed(timeout_text(limits.timeout)),
        Exchange::Transport(error) => Outcome::failed(redact(&format!("Publish failed: {error}"))),
    }
}

/// DST-26: the text of every timeout, with the configured `timeoutMs`.
pub(crate) fn timeout_text(timeout: Duration) -> String {
    format!("Request timeout after {}ms", timeout.as_millis())
}

/// `Retry-After` as delta-seconds or an HTTP date (OUT-30). A past date is zero; anything
/// else is ignored. The raw delay is returned: the engine clamps it to `retryMaxDelayMs`.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Too many digits for u64 means "very long"; the engine clamps it anyway.
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Cuts `text` to at most `max` bytes, on a character boundary.
pub(crate) fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The `status_class` label of `queuebox_http_publish_responses_total` (DST-29).
pub fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        500..=599 => "5xx",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_SECS: u64 = 1_784_000_000;

    fn limits(max: usize) -> Limits {
        Limits {
            timeout: Duration::from_millis(1500),
            max_error_body_bytes: max,
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(NOW_SECS),
        }
    }

    fn response(status: u16, retry_after: Option<&str>, body: &str) -> Outcome {
        let exchange = Exchange::Response {
            status,
            retry_after,
            body: body.as_bytes(),
        };
        classify(exchange, limits(2048))
    }

    fn reason(outcome: Outcome) -> String {
        match outcome {
            Outcome::Failed { reason, .. } => reason,
            Outcome::Delivered => panic!("expected a failure"),
        }
    }

    fn retry_after(outcome: Outcome) -> Option<Duration> {
        match outcome {
            Outcome::Failed { retry_after, .. } => retry_after,
            Outcome::Delivered => panic!("expected a failure"),
        }
    }

    #[test]
    fn dst_25_every_2xx_is_delivered_and_202_equals_200() {
        for status in [200, 201, 202, 204, 299] {
            assert_eq!(
                response(status, None, "ignored"),
                Outcome::Delivered,
                "{status}"
            );
        }
    }

    #[test]
    fn dst_25_3xx_fails() {
        assert_eq!(reason(response(302, None, "")), "HTTP 302: Found");
    }

    #[test]
    fn dst_25_a_1xx_that_surfaces_as_final_fails() {
        assert_eq!(
            reason(response(101, None, "")),
            "HTTP 101: Switching Protocols"
        );
    }

    #[test]
    fn dst_28_status_text_with_reason_phrase_and_body() {
        assert_eq!(
            reason(response(503, None, "try later")),
            "HTTP 503: Service Unavailable - try later"
        );
        assert_eq!(
            reason(response(400, None, "bad")),
            "HTTP 400: Bad Request - bad"
        );
    }

    #[test]
    fn dst_28_blank_body_is_left_out() {
        assert_eq!(
            reason(response(500, None, " \n ")),
            "HTTP 500: Internal Server Error"
        );
    }

    #[test]
    fn dst_28_unknown_code_has_no_reason_phrase() {
        assert_eq!(reason(response(599, None, "x")), "HTTP 599 - x");
    }

    #[test]
    fn dst_28_body_is_redacted() {
        let text = reason(response(500, None, "login failed password=hunter2 for bob"));
        assert!(!text.contains("hunter2"), "{text}");
        assert!(
            text.starts_with("HTTP 500: Internal Server Error - login failed"),
            "{text}"
        );
    }

    #[test]
    fn dst_28_body_and_whole_text_are_cut_to_max_error_body_bytes() {
        let body = "x".repeat(100);
        let outcome = classify(
            Exchange::Response {
                status: 500,
                retry_after: None,
                body: body.as_bytes(),
            },
            limits(40),
        );
        let text = reason(outcome);
        assert_eq!(text.len(), 40);
        assert!(text.starts_with("HTTP 500: Internal Server Error - xxx"));
    }

    #[test]
    fn dst_28_invalid_utf8_is_replaced_and_cut_on_a_char_boundary() {
        let outcome = classify(
            Exchange::Response {
                status: 500,
                retry_after: None,
                body: b"ab\xffcd\xc3\xa9\xc3\xa9",
            },
            limits(44),
        );
        // 34 bytes of status text + "ab\u{fffd}cd" (7) + "é" (2) = 43; the next "é" would
        // end at 45, past the limit, so the cut falls back to the boundary at 43.
        let text = reason(outcome);
        assert_eq!(text, "HTTP 500: Internal Server Error - ab\u{fffd}cdé");
    }

    #[test]
    fn dst_26_timeout_text() {
        assert_eq!(
            reason(classify(Exchange::Timeout, limits(2048))),
            "Request timeout after 1500ms"
        );
    }

    #[test]
    fn dst_28_transport_error_text() {
        let outcome = classify(Exchange::Transport("connection refused"), limits(2048));
        assert_eq!(reason(outcome), "Publish failed: connection refused");
    }

    #[test]
    fn dst_27_retry_after_seconds_on_429_and_503() {
        assert_eq!(
            retry_after(response(429, Some("7"), "")),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(response(503, Some(" 0 "), "")),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn dst_27_retry_after_ignored_on_other_statuses() {
        assert_eq!(retry_after(response(500, Some("7"), "")), None);
        assert_eq!(retry_after(response(302, Some("7"), "")), None);
    }

    #[test]
    fn out_30_retry_after_http_date_future_and_past() {
        let future =
            httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(NOW_SECS + 90));
        assert_eq!(
            retry_after(response(503, Some(&future), "")),
            Some(Duration::from_secs(90))
        );
        let past =
            httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(NOW_SECS - 90));
        assert_eq!(
            retry_after(response(503, Some(&past), "")),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn out_30_invalid_retry_after_is_ignored() {
        for value in ["", "soon", "-5", "1.5", "Mon, 99 Foo 2020"] {
            assert_eq!(
                retry_after(response(429, Some(value), "")),
                None,
                "{value:?}"
            );
        }
    }

    #[test]
    fn dst_29_status_classes() {
        assert_eq!(status_class(100), "1xx");
        assert_eq!(status_class(202), "2xx");
        assert_eq!(status_class(302), "3xx");
        assert_eq!(status_class(404), "4xx");
        assert_eq!(status_class(599), "5xx");
        assert_eq!(status_class(600), "other");
        assert_eq!(status_class(99), "other");
    }

    #[test]
    fn cut_never_splits_a_character() {
        assert_eq!(cut("éé", 3), "é");
        assert_eq!(cut("abc", 0), "");
        assert_eq!(cut("abc", 10), "abc");
    }
}
