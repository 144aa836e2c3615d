//! The intake contract (architecture.md, rule 1): a source connector hands the engine each
//! received message, in the order it must be stored, and gets back a [`Receipt`] that resolves
//! only after the insert that holds the message committed (or failed), with the message's
//! outcome. The connector acknowledges its broker from the resolved receipt and never earlier:
//! the acknowledgement handle it gave to [`submit`](trait.Intake.html#method.submit) comes back
//! only with the outcome (INB-54), so a crash before the commit makes the broker deliver the
//! message again instead of losing it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;
use uuid::Uuid;

use crate::filter::FailedRule;
use crate::headers::ReceivedHeaders;

/// `sources.<name>`: the name stored in `inbox.source`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceName(String);

impl SourceName {
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One message as a connector received it, before any rule of the inbox ran on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceivedMessage {
    pub source: SourceName,
    /// Converted by the connector as INB-25 says for its protocol (credential headers of an
    /// `http` source already withheld, INB-21).
    pub headers: ReceivedHeaders,
    /// The body bytes exactly as received.
    pub body: Vec<u8>,
    pub protocol: ProtocolAttributes,
}

/// What a protocol knows of a message beyond its headers and body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProtocolAttributes {
    /// The protocol's own message id (INB-35): the AMQP `message_id` property, the Kafka
    /// record key (text, or `base64:` + Base64), or the `Nats-Msg-Id` header.
    pub message_id: Option<String>,
    /// A correlation id the protocol carries outside the headers (INB-27): the AMQP
    /// `correlation_id` property, or the id an `http` server already gave the request.
    pub correlation_id: Option<String>,
    /// The broker's own time of the message, in ms since 1970 (INB-42 step 3).
    pub published_at_ms: Option<i64>,
}

/// How a stored message starts its life in the inbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoredState {
    /// Waits for the relay or a pull worker.
    Pending,
    /// Stored `dead`: a broker body that is not JSON (INB-56), or a transform rejection of a
    /// broker message (INB-58).
    Dead,
}

/// Why the inbox refused a message without storing it. Only an `http` source refuses (its
/// sender gets a 4xx and can correct the message); a broker source stores such a message
/// `dead` instead, because refusing it would block the partition or redeliver it for ever.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The body is not JSON (an empty body included).
    InvalidJson,
    /// No step of the idempotency-key chain gave a value; `tried` names the steps (INB-39).
    NoKey { tried: String },
    /// The source transform failed with `onError: Fail` or `Dead` on an HTTP source (TRF-17);
    /// `error` is `Transform failed: <reason>`, redacted.
    TransformFailed { error: String },
    /// The body is JSON, but beyond a limit of the parser; `limit` says which (nested deeper
    /// than 128 levels, a number beyond the range of a 64-bit float such as `1e400`).
    JsonLimit { limit: &'static str },
    /// The database refused the message's data, which fails the same way every time (on
    /// PostgreSQL: `\u0000` in a string, a number beyond `numeric`'s range); `reason` is the
    /// database's redacted reason. Nothing was stored.
    DataRejected { reason: String },
    /// A push message whose relay topic renders empty or invalid (issue 14 item 6): the relay
    /// could never forward it, so an HTTP source refuses it at receipt. `error` names the
    /// source and the missing field.
    InvalidTopic { error: String },
}

/// The outcome of one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntakeOutcome {
    /// A new row, committed, with this id.
    New { id: Uuid, state: StoredState },
    /// (`source`, `idempotency_key`) was already stored; nothing changed (INB-50).
    Duplicate,
    /// The header filter dropped it: no row (INB-30).
    Filtered { rule: FailedRule },
    /// Not stored, and never will be as sent.
    Refused(Refusal),
    /// The insert failed; nothing was committed for the message. `reason` is redacted.
    StorageFailed { reason: String },
    /// QueueBox is stopping and took nothing more; nothing was stored.
    ShuttingDown,
}

impl IntakeOutcome {
    /// Whether the outcome is durable, so the sender may be told the message was taken: a
    /// broker acknowledges exactly these (INB-54) and negatively acknowledges the rest.
    pub fn is_settled(&self) -> bool {
        match self {
            Self::New { .. } | Self::Duplicate | Self::Filtered { .. } | Self::Refused(_) => true,
            Self::StorageFailed { .. } | Self::ShuttingDown => false,
        }
    }
}

/// The engine's side of the contract. Sources call [`submit`](#method.submit) (on
/// `dyn Intake`), which wraps this.
#[async_trait::async_trait]
pub trait Intake: Send + Sync {
    /// Runs the inbox rules on the message and queues it for storing. Returns once the message
    /// holds its place in the order of storing (waiting while the queue is full): messages
    /// enqueued one after another by one caller are stored in that order.
    async fn enqueue(&self, message: ReceivedMessage) -> PendingOutcome;

    /// Enqueues the messages in their order, as one group: the writer stores the group's rows
    /// in one insert unless the group is larger than its batch (INB-65: a Kafka poll's records
    /// of one partition in one insert, instead of split wherever the writer happened to wake).
    /// This default enqueues them one by one, which keeps the order but not the group.
    async fn enqueue_all(&self, messages: Vec<ReceivedMessage>) -> Vec<PendingOutcome> {
        let mut pending = Vec::with_capacity(messages.len());
        for message in messages {
            pending.push(self.enqueue(message).await);
        }
        pending
    }
}

impl dyn Intake + '_ {
    /// Submits one message and returns its receipt once the message holds its place in the
    /// order (so a Kafka partition's records can be submitted in offset order and their
    /// receipts awaited as the commits land). `ack` is whatever the connector needs to
    /// acknowledge the message (a delivery tag, a message, an offset); the receipt hands it back
    /// with the outcome, after the commit, and not before.
    pub async fn submit<A>(&self, message: ReceivedMessage, ack: A) -> Receipt<A> {
        Receipt {
            pending: self.enqueue(message).await,
            ack: Some(ack),
        }
    }

    /// [`submit`](#method.submit) for a group of messages taken together (a poll's records):
    /// the receipts come back in the messages' order, and the rows to store reach the writer
    /// as one group ([`Intake::enqueue_all`]).
    pub async fn submit_all<A>(&self, messages: Vec<(ReceivedMessage, A)>) -> Vec<Receipt<A>> {
        let (messages, acks): (Vec<ReceivedMessage>, Vec<A>) = messages.into_iter().unzip();
        let mut pending = self.enqueue_all(messages).await.into_iter();
        acks.into_iter()
            .map(|ack| Receipt {
                // An intake that answered for fewer messages than it was given is a defect; a
                // message it gave no outcome for counts as not stored, so it is never
                // acknowledged (and no later offset is committed past it).
                pending: pending
                    .next()
                    .unwrap_or_else(|| PendingOutcome::ready(IntakeOutcome::ShuttingDown)),
                ack: Some(ack),
            })
            .collect()
    }
}

/// The outcome of one enqueued message, once it is known.
pub struct PendingOutcome(Pending);

enum Pending {
    Ready(Option<IntakeOutcome>),
    Waiting(oneshot::Receiver<IntakeOutcome>),
}

impl PendingOutcome {
    /// An outcome decided before any storing (filtered, refused, shutting down).
    pub fn ready(outcome: IntakeOutcome) -> Self {
        Self(Pending::Ready(Some(outcome)))
    }

    /// An outcome the writer sends on `answer` after the commit. A dropped sender means the
    /// writer stopped before the message reached the database: nothing was stored.
    pub fn waiting(answer: oneshot::Receiver<IntakeOutcome>) -> Self {
        Self(Pending::Waiting(answer))
    }
}

impl Future for PendingOutcome {
    type Output = IntakeOutcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<IntakeOutcome> {
        match &mut self.0 {
            Pending::Ready(outcome) => {
                Poll::Ready(outcome.take().unwrap_or(IntakeOutcome::ShuttingDown))
            }
            Pending::Waiting(answer) => Pin::new(answer)
                .poll(cx)
                .map(|answer| answer.unwrap_or(IntakeOutcome::ShuttingDown)),
        }
    }
}

/// A submitted message's receipt: resolves to the outcome and the acknowledgement handle.
pub struct Receipt<A> {
    pending: PendingOutcome,
    ack: Option<A>,
}

/// A resolved receipt.
#[derive(Debug)]
pub struct Settled<A> {
    pub outcome: IntakeOutcome,
    /// The handle given to `submit`; acknowledge when `outcome.is_settled()`, else negatively.
    pub ack: A,
}

impl<A: Unpin> Future for Receipt<A> {
    type Output = Settled<A>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Settled<A>> {
        let outcome = std::task::ready!(Pin::new(&mut self.pending).poll(cx));
        match self.ack.take() {
            Some(ack) => Poll::Ready(Settled { outcome, ack }),
            // Polling a resolved receipt again is a defect of the caller (futures are not
            // polled after Ready); there is no handle left to give back.
            None => panic!("a receipt was polled after it resolved"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// An intake whose outcomes the test sends by hand, in the order of enqueueing.
    #[derive(Default)]
    struct ByHand(Mutex<Vec<oneshot::Sender<IntakeOutcome>>>);

    #[async_trait::async_trait]
    impl Intake for ByHand {
        async fn enqueue(&self, _message: ReceivedMessage) -> PendingOutcome {
            let (answer, wait) = oneshot::channel();
            self.0.lock().unwrap().push(answer);
            PendingOutcome::waiting(wait)
        }
    }

    fn message() -> ReceivedMessage {
        ReceivedMessage {
            source: SourceName::new("orders"),
            headers: ReceivedHeaders::new(),
            body: b"{}".to_vec(),
            protocol: ProtocolAttributes::default(),
        }
    }

    fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        Pin::new(future).poll(&mut cx)
    }

    #[tokio::test]
    async fn inb_54_the_ack_handle_comes_back_only_after_the_outcome_is_known() {
        let by_hand = ByHand::default();
        let intake: &dyn Intake = &by_hand;
        let mut first = intake.submit(message(), "delivery-tag-7").await;
        let second = intake.submit(message(), "delivery-tag-8").await;
        assert!(
            poll_once(&mut first).is_pending(),
            "no outcome yet, no handle"
        );
        let mut answers = std::mem::take(&mut *by_hand.0.lock().unwrap()).into_iter();
        let id = Uuid::now_v7();
        let new = IntakeOutcome::New {
            id,
            state: StoredState::Pending,
        };
        answers.next().unwrap().send(new.clone()).unwrap();
        answers
            .next()
            .unwrap()
            .send(IntakeOutcome::Duplicate)
            .unwrap();
        let settled = first.await;
        assert_eq!((settled.ack, settled.outcome), ("delivery-tag-7", new));
        let settled = second.await;
        assert_eq!(settled.ack, "delivery-tag-8");
        assert!(settled.outcome.is_settled());
    }

    #[tokio::test]
    async fn a_writer_that_stops_before_storing_gives_shutting_down_which_is_not_settled() {
        let (answer, wait) = oneshot::channel::<IntakeOutcome>();
        drop(answer);
        let outcome = PendingOutcome::waiting(wait).await;
        assert_eq!(outcome, IntakeOutcome::ShuttingDown);
        assert!(!outcome.is_settled());
        let failed = IntakeOutcome::StorageFailed { reason: "x".into() };
        assert!(!failed.is_settled());
    }
}
