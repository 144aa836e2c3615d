//! The request body with the whole-request deadline of OPS-6: a body still arriving when the
//! deadline passes ends with an error, and the service answers 408 for that request.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use hyper::body::{Body, Bytes, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The error a handler sees when it reads a body past the deadline.
#[derive(Debug, thiserror::Error)]
#[error("the request was not received in time")]
pub(crate) struct RequestTimedOut;

pub(crate) struct DeadlineBody<B> {
    inner: B,
    deadline: Instant,
    /// Created on the first read that has to wait, so a request without a body (most of
    /// them) never allocates a timer.
    sleep: Option<Pin<Box<Sleep>>>,
    /// Tells the service that this request ran out of time, whatever the handler answered.
    timed_out: Arc<AtomicBool>,
}

impl<B> DeadlineBody<B> {
    pub(crate) fn new(inner: B, deadline: Instant, timed_out: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            deadline,
            sleep: None,
            timed_out,
        }
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        // Data already there is delivered even at the deadline: only waiting is bounded.
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.as_mut().poll(cx).is_ready() {
            this.timed_out.store(true, Ordering::SeqCst);
            return Poll::Ready(Some(Err(Box::new(RequestTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
