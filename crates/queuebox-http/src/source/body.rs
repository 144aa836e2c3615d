//! Reading a source request's body once, counting bytes, with a hard stop at the cap (INB-12):
//! a chunked body is refused at its first byte over `maxBodyBytes`, never buffered whole.

use std::future::poll_fn;
use std::pin::Pin;

use axum::body::Body;
use hyper::body::Body as _;

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// More than the cap arrived (413).
    TooLarge,
    /// The body could not be read: a malformed chunk, the client went away, or the server's
    /// whole-request deadline passed (the server then answers 408 itself).
    Broken,
}

/// The whole body, at most `cap` bytes. `declared` (a `Content-Length` already checked not to
/// exceed the cap) only sizes the buffer.
pub(crate) async fn read_capped(
    mut body: Body,
    cap: u64,
    declared: Option<u64>,
) -> Result<Vec<u8>, BodyError> {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut bytes = Vec::with_capacity(declared.map_or(0, |d| (d as usize).min(cap)));
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|_| BodyError::Broken)?;
        // Trailers carry no body bytes.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if data.len() > cap - bytes.len() {
            return Err(BodyError::TooLarge);
        }
        bytes.extend_from_slice(&data);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn inb_12_exactly_the_cap_is_read_one_more_byte_is_refused() {
        let read = |len: usize| read_capped(Body::from(vec![b'a'; len]), 10, None);
        assert_eq!(read(10).await.map(|b| b.len()), Ok(10));
        assert_eq!(read(11).await, Err(BodyError::TooLarge));
        assert_eq!(read(0).await, Ok(Vec::new()));
    }
}
