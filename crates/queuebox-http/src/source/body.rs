//! Reading a source request's body once, counting bytes, with a hard stop at the cap (INB-12):
//! a chunked body is refused at its first byte over `maxBodyBytes`, never buffered whole. The
//! buffer's bytes are held in the intake's [`Budget`](super::budget::Budget) before they are
//! allocated (issue 17 defect 5).

use std::future::poll_fn;
use std::pin::Pin;

use axum::body::Body;
use hyper::body::Body as _;

use super::budget::Held;

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// More than the cap arrived (413).
    TooLarge,
    /// The intake's memory bound has no room for the body (503).
    Overloaded,
    /// The body could not be read: a malformed chunk, the client went away, or the server's
    /// whole-request deadline passed (the server then answers 408 itself).
    Broken,
}

/// The whole body, at most `cap` bytes. `declared` (a `Content-Length` already checked not to
/// exceed the cap) sizes the buffer, held whole in `held` before any byte is read; a body
/// without a declared length holds its buffer's capacity as it grows.
pub(crate) async fn read_capped(
    mut body: Body,
    cap: u64,
    declared: Option<u64>,
    held: &mut Held,
) -> Result<Vec<u8>, BodyError> {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let initial = declared.map_or(0, |d| (d as usize).min(cap));
    held.grow_to(initial).map_err(|_| BodyError::Overloaded)?;
    let mut bytes = Vec::with_capacity(initial);
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|_| BodyError::Broken)?;
        // Trailers carry no body bytes.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if data.len() > cap - bytes.len() {
            return Err(BodyError::TooLarge);
        }
        let needed = bytes.len() + data.len();
        if needed > bytes.capacity() {
            // Grown as a Vec would grow (doubling, capped), but held before it is allocated.
            let capacity = needed.max(bytes.capacity().saturating_mul(2)).min(cap);
            held.grow_to(capacity).map_err(|_| BodyError::Overloaded)?;
            bytes.reserve_exact(capacity - bytes.len());
        }
        bytes.extend_from_slice(&data);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::source::budget::Budget;
    use hyper::body::{Bytes, Frame};
    use std::task::{Context, Poll};

    /// A body of separate frames, as a chunked request arrives.
    struct Chunks(std::collections::VecDeque<Vec<u8>>);

    impl hyper::body::Body for Chunks {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            Poll::Ready(
                self.0
                    .pop_front()
                    .map(|chunk| Ok(Frame::data(Bytes::from(chunk)))),
            )
        }
    }

    #[tokio::test]
    async fn inb_12_exactly_the_cap_is_read_one_more_byte_is_refused() {
        let budget = Budget::new(1000, queuebox_telemetry::GaugeHandle::default());
        let read = async |len: usize| {
            read_capped(Body::from(vec![b'a'; len]), 10, None, &mut budget.hold()).await
        };
        assert_eq!(read(10).await.map(|b| b.len()), Ok(10));
        assert_eq!(read(11).await, Err(BodyError::TooLarge));
        assert_eq!(read(0).await, Ok(Vec::new()));
    }

    #[tokio::test]
    async fn a_body_holds_its_buffer_in_the_budget_and_is_refused_beyond_it() {
        let budget = Budget::new(100, queuebox_telemetry::GaugeHandle::default());
        let mut held = budget.hold();
        let body = read_capped(Body::from(vec![b'a'; 60]), 1000, None, &mut held).await;
        assert_eq!(body.as_ref().map(Vec::len), Ok(60));
        assert!(budget.in_use() >= body.unwrap().capacity());
        // Declared: the whole length is held before a byte is read.
        let mut other = budget.hold();
        let refused = read_capped(Body::from(vec![b'a'; 50]), 1000, Some(50), &mut other);
        assert_eq!(refused.await, Err(BodyError::Overloaded));
        // Chunked, no declared length: refused when the buffer would grow past the room.
        let chunks = Chunks((0..10).map(|_| vec![b'b'; 10]).collect());
        let refused = read_capped(Body::new(chunks), 1000, None, &mut other);
        assert_eq!(refused.await, Err(BodyError::Overloaded));
        drop((held, other));
        assert_eq!(budget.in_use(), 0, "every holding came back");
    }
}
