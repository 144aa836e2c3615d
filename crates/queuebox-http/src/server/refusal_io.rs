//! The JSON body of hyper's own refusals (issue 17 defect 7, OPS-7): a request whose head hyper
//! cannot parse (bad framing, a bad header, a head beyond hyper's hard caps, a URI too long) is
//! answered by hyper itself, before any service runs, with an empty body. This wrapper around a
//! connection's socket recognises that answer as hyper writes it (a 4xx head with
//! `content-length: 0` and no `content-type`, which no route of QueueBox writes) and writes the
//! same status with the `{"error":"<text>"}` body every other answer has instead.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::respond::{HEADERS_TOO_LARGE, JSON, error_body};

pub(crate) const BAD_REQUEST: &str = "Bad request";
pub(crate) const URI_TOO_LONG: &str = "URI too long";

/// A socket whose empty-bodied 4xx answers get the JSON error body.
pub(crate) struct RefusalShaping<T> {
    inner: T,
    /// The replacement being written, how much of it is written, and the length of hyper's
    /// own bytes it stands for (reported as written once the replacement is out).
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<T> RefusalShaping<T> {
    pub(crate) fn new(inner: T) -> Self {
        Self {
            inner,
            pending: None,
        }
    }
}

/// The JSON answer for `written` when it is exactly the head of an empty-bodied 4xx answer
/// without a content type, with nothing after the head.
pub(crate) fn replacement(written: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(written).ok()?;
    let head = text.strip_suffix("\r\n\r\n")?;
    if head.contains("\r\n\r\n") {
        return None;
    }
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let rest = status_line
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| status_line.strip_prefix("HTTP/1.0 "))?;
    let version = &status_line[..8];
    let code = rest.get(..3)?;
    let message = match code {
        "400" => BAD_REQUEST,
        "414" => URI_TOO_LONG,
        "431" => HEADERS_TOO_LARGE,
        _ => return None,
    };
    let mut empty = false;
    let mut date = None;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" if value == "0" => empty = true,
            "content-type" | "content-length" | "transfer-encoding" => return None,
            "date" => date = Some(value),
            _ => {}
        }
    }
    if !empty {
        return None;
    }
    let body = error_body(message);
    let mut answer = format!(
        "{version} {rest}\r\ncontent-type: {JSON}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if let Some(date) = date {
        answer.push_str(&format!("date: {date}\r\n"));
    }
    answer.push_str("\r\n");
    answer.push_str(&body);
    Some(answer.into_bytes())
}

impl<T: AsyncRead + Unpin> AsyncRead for RefusalShaping<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for RefusalShaping<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.pending.is_none() {
            match replacement(buf) {
                Some(answer) => this.pending = Some((answer, 0, buf.len())),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        // hyper calls again with the same bytes after a Pending: the replacement goes on.
        let (answer, written, claimed) = this.pending.as_mut().expect("set above");
        while *written < answer.len() {
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &answer[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        let claimed = *claimed;
        this.pending = None;
        Poll::Ready(Ok(claimed))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    // Not vectored: hyper then writes each head as one contiguous buffer, which is what
    // `replacement` reads. QueueBox's answers are small; the copy costs nothing that matters.
    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_empty_refusals_get_the_json_body_and_nothing_else_changes() {
        let date = "date: Wed, 02 Dec 2026 06:00:00 GMT";
        let hyper_400 = format!("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n{date}\r\n\r\n");
        let shaped = String::from_utf8(replacement(hyper_400.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            shaped,
            format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 23\r\n\
                 connection: close\r\n{date}\r\n\r\n{{\"error\":\"Bad request\"}}"
            )
        );
        let hyper_431 = "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        assert!(
            String::from_utf8(replacement(hyper_431.as_bytes()).unwrap())
                .unwrap()
                .ends_with("{\"error\":\"Request headers too large\"}")
        );
        for kept in [
            // A route's own answers carry a content type, or a body, or another status.
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 5\r\n\r\n",
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\nextra",
            "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 400 Bad Request\r\n\r\n",
            "not http at all",
        ] {
            assert_eq!(replacement(kept.as_bytes()), None, "{kept:?}");
        }
    }
}
