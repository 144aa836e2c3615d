//! The one place that turns what the broker answered to a publish into an `Outcome`
//! (DST-36), and says whether the channel may be used again (DST-33).

use lapin::Confirmation;
use queuebox_core::Outcome;
use queuebox_core::redact::redact;

/// Every failure text of this destination starts with this (DST-36).
pub(crate) const FAILED: &str = "RabbitMQ publish failed: ";

/// The longest wait for the confirm of one publish (DST-36).
pub(crate) const CONFIRM_TIMEOUT_MS: u64 = 5000;

/// What happened to one publish after it left QueueBox.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The broker confirmed (ack or nack), with the returned message when it was unroutable.
    Confirmed(Confirm),
    /// No confirm within [`CONFIRM_TIMEOUT_MS`].
    NoConfirm,
    /// The channel or the connection failed (the declaration, the publish or the wait);
    /// `reason` is the client's error text, not yet redacted.
    ChannelError(String),
}

/// What a publisher confirm said, without the returned message's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Confirm {
    Ack,
    Nack,
    /// `mandatory` and no queue bound: the broker returned the message, then confirmed it.
    Returned,
    /// The channel is not in confirm mode.
    NotRequested,
}

impl From<Confirmation> for Confirm {
    fn from(confirmation: Confirmation) -> Self {
        match confirmation {
            Confirmation::Ack(Some(_)) | Confirmation::Nack(Some(_)) => Self::Returned,
            Confirmation::Ack(None) => Self::Ack,
            Confirmation::Nack(None) => Self::Nack,
            Confirmation::NotRequested => Self::NotRequested,
        }
    }
}

/// The outcome of one publish, and whether its channel is still fit for the next one.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Classified {
    pub outcome: Outcome,
    pub keep_channel: bool,
}

/// DST-36: success only for a confirm that carries no returned message.
pub(crate) fn classify(
    message_id: &str,
    exchange: &str,
    routing_key: &str,
    answer: Answer,
) -> Classified {
    let failed = |text: String, keep_channel| Classified {
        outcome: Outcome::failed(redact(&format!("{FAILED}{text}"))),
        keep_channel,
    };
    match answer {
        Answer::Confirmed(Confirm::Ack) => Classified {
            outcome: Outcome::Delivered,
            keep_channel: true,
        },
        // It reached nobody, so it is never `sent`.
        Answer::Confirmed(Confirm::Returned) => failed(
            format!(
                "Message {message_id} is unroutable on exchange {exchange} with routing key {routing_key}"
            ),
            true,
        ),
        Answer::Confirmed(Confirm::Nack) => failed(
            "Publish not confirmed: the broker rejected the message".to_owned(),
            true,
        ),
        // A channel that is not in confirm mode can confirm nothing: a defect of the channel
        // set-up, reported as a failure so the row is never `sent` unconfirmed.
        Answer::Confirmed(Confirm::NotRequested) => failed(
            "Publish not confirmed: the channel is not in confirm mode".to_owned(),
            false,
        ),
        // A confirm that arrives later must not be taken for the next message's: the channel
        // goes.
        Answer::NoConfirm => failed(
            format!("Publish not confirmed within {CONFIRM_TIMEOUT_MS} ms"),
            false,
        ),
        Answer::ChannelError(reason) => failed(reason, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::message::{BasicReturnMessage, Delivery};

    fn returned() -> BasicReturnMessage {
        BasicReturnMessage {
            delivery: Delivery::mock(0, "events".into(), "k".into(), false, b"{}".to_vec()),
            reply_code: 312,
            reply_text: "NO_ROUTE".into(),
        }
    }

    fn text(classified: &Classified) -> &str {
        match &classified.outcome {
            Outcome::Failed { reason, .. } => reason,
            Outcome::Delivered => panic!("expected a failure"),
        }
    }

    #[test]
    fn dst_36_a_confirm_without_a_return_is_success() {
        let c = classify("id", "events", "k", Answer::Confirmed(Confirm::Ack));
        assert_eq!(
            c,
            Classified {
                outcome: Outcome::Delivered,
                keep_channel: true
            }
        );
    }

    #[test]
    fn dst_36_a_returned_message_is_unroutable_even_when_confirmed() {
        let c = classify(
            "0b6f",
            "events",
            "order.created",
            Answer::Confirmed(Confirmation::Ack(Some(returned())).into()),
        );
        assert_eq!(
            text(&c),
            "RabbitMQ publish failed: Message 0b6f is unroutable on exchange events with routing key order.created"
        );
        assert!(c.keep_channel);
    }

    #[test]
    fn dst_36_a_negative_confirm_fails() {
        let c = classify("id", "e", "k", Answer::Confirmed(Confirm::Nack));
        assert_eq!(
            text(&c),
            "RabbitMQ publish failed: Publish not confirmed: the broker rejected the message"
        );
    }

    #[test]
    fn dst_36_no_confirm_in_time_fails_and_discards_the_channel() {
        let c = classify("id", "e", "k", Answer::NoConfirm);
        assert_eq!(
            text(&c),
            "RabbitMQ publish failed: Publish not confirmed within 5000 ms"
        );
        assert!(!c.keep_channel);
    }

    #[test]
    fn dst_33_dst_4_a_channel_error_is_redacted_and_discards_the_channel() {
        let c = classify(
            "id",
            "e",
            "k",
            Answer::ChannelError("IO error: amqp://queuebox:hunter2@rabbit:5672 reset".into()),
        );
        assert!(!text(&c).contains("hunter2"), "{}", text(&c));
        assert!(text(&c).starts_with(FAILED));
        assert!(!c.keep_channel);
    }

    #[test]
    fn a_channel_without_confirms_never_reports_success() {
        let c = classify("id", "e", "k", Answer::Confirmed(Confirm::NotRequested));
        assert!(matches!(c.outcome, Outcome::Failed { .. }));
        assert!(!c.keep_channel);
    }
}
