//! What one NATS publish means for the delivery: the single `classify` function that turns the
//! client's answer into an `Outcome` (DST-46, DST-47, DST-49). Retry and dead-letter decisions
//! stay with the engine; this only says delivered or failed, and why.

use std::time::Duration;

use queuebox_core::Outcome;
use queuebox_core::redact::redact;

/// What came back from one publish attempt, before it is judged.
#[derive(Debug)]
pub(crate) enum Answer<'a> {
    /// JetStream's acknowledgement: a stream stored the message, or found it a duplicate
    /// inside its window (`Nats-Msg-Id`, DST-48); both mean the stream holds it.
    Stored,
    /// Core NATS: published and the connection flushed (DST-47).
    Flushed,
    /// No acknowledgement or flush within `timeoutMs`.
    TimedOut(Duration),
    /// JetStream answered that no stream stores the subject.
    NoStream { subject: &'a str },
    /// The client or the server refused it (an error reply, a lost connection, a payload too
    /// big), as text.
    Refused(&'a str),
}

/// The one place that turns a publish answer into an `Outcome` (architecture rule 1).
pub(crate) fn classify(destination: &str, answer: Answer<'_>) -> Outcome {
    let failed = |reason: &str| {
        // DST-49, DST-4: the reason passes the shared redaction before it reaches last_error.
        Outcome::failed(redact(&format!(
            "The publish to '{destination}' failed. Reason: {reason}"
        )))
    };
    match answer {
        // DST-46: a duplicate acknowledgement says the stream holds the message already.
        Answer::Stored | Answer::Flushed => Outcome::Delivered,
        Answer::TimedOut(timeout) => failed(&format!(
            "no acknowledgement within {}ms",
            timeout.as_millis()
        )),
        Answer::NoStream { subject } => failed(&format!(
            "no JetStream stream stores the subject '{}'",
            subject.escape_debug()
        )),
        Answer::Refused(reason) => failed(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(outcome: Outcome) -> String {
        match outcome {
            Outcome::Failed {
                reason,
                retry_after,
            } => {
                assert_eq!(retry_after, None, "NATS never asks for a delay");
                reason
            }
            Outcome::Delivered => panic!("expected a failure"),
        }
    }

    #[test]
    fn dst_46_a_stored_acknowledgement_delivers() {
        assert_eq!(classify("events", Answer::Stored), Outcome::Delivered);
    }

    #[test]
    fn dst_47_a_core_nats_flush_delivers() {
        assert_eq!(classify("events", Answer::Flushed), Outcome::Delivered);
    }

    #[test]
    fn dst_46_no_stream_and_no_reply_in_time_fail_with_the_dst_49_text() {
        assert_eq!(
            reason(classify("events", Answer::NoStream { subject: "a.b" })),
            "The publish to 'events' failed. Reason: no JetStream stream stores the subject 'a.b'"
        );
        assert_eq!(
            reason(classify(
                "events",
                Answer::TimedOut(Duration::from_millis(1500))
            )),
            "The publish to 'events' failed. Reason: no acknowledgement within 1500ms"
        );
    }

    #[test]
    fn dst_4_dst_49_a_refusal_is_redacted() {
        let text = reason(classify(
            "events",
            Answer::Refused(
                "authorization violation for nats://app:hunter2@n:4222 password=hunter2",
            ),
        ));
        assert!(
            text.starts_with("The publish to 'events' failed. Reason: "),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
    }
}
