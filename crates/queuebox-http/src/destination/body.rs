//! Bounded reads of a response body: QueueBox stops reading once it has what it keeps
//! (DST-28), so a huge or endless error body costs no more than `maxErrorBodyBytes`.

use std::time::Duration;

use tokio::time::Instant;

/// `now + timeout`, saturating: a configured timeout too large for the clock means "no
/// practical bound", never a panic.
pub(crate) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(now)
}

/// Reads at most `max` bytes of the body. A read error ends the read with what arrived so far:
/// the status is already known, and the body only adds detail to a failure text.
pub(crate) async fn read_at_most(mut response: reqwest::Response, max: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    while kept.len() < max {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = max - kept.len();
                kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    kept
}

/// After a 2xx the body is ignored (DST-28), but a connection is only reused once its body has
/// been read to the end. This drains a small body in the background, bounded by the publish
/// deadline, so the outcome never waits for it.
pub(crate) fn drain_in_background(response: reqwest::Response, deadline: Instant) {
    const MAX_DRAINED_BYTES: usize = 64 * 1024;
    tokio::spawn(async move {
        let _ = tokio::time::timeout_at(deadline, async move {
            let mut response = response;
            let mut drained = 0usize;
            while drained < MAX_DRAINED_BYTES {
                match response.chunk().await {
                    Ok(Some(chunk)) => drained += chunk.len(),
                    Ok(None) | Err(_) => break,
                }
            }
        })
        .await;
    });
}
