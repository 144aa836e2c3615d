//! The bound on the memory of the HTTP intake (issue 17 defect 5): the bytes of request bodies
//! that all HTTP sources hold at once, being received or waiting for the database, never pass
//! `inbox.maxPendingBytes`. A request whose body would pass it gets 503 with `Retry-After`
//! instead of a buffer; its bytes are given back when its message is stored, refused or failed
//! (not merely when the request is answered: a message still queued for the database holds
//! its bytes until the writer is done with it). The bytes held now are the gauge
//! `queuebox_inbox_held_bytes`; the refusals count in `queuebox_inbox_webhook_refusals_total`
//! with `reason="overloaded"`.

use std::sync::Arc;

use queuebox_telemetry::GaugeHandle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The shared pool of bytes. One per process (every source route shares it).
#[derive(Clone, Debug)]
pub(crate) struct Budget {
    bytes: Arc<Semaphore>,
    held_bytes: GaugeHandle,
    #[cfg(test)]
    total: usize,
}

/// The pool is spent: the request is answered 503.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Exhausted;

impl Budget {
    /// `held_bytes` follows every holding and giving back.
    pub(crate) fn new(total: u64, held_bytes: GaugeHandle) -> Self {
        let total = usize::try_from(total)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        held_bytes.set(0.0);
        Self {
            bytes: Arc::new(Semaphore::new(total)),
            held_bytes,
            #[cfg(test)]
            total,
        }
    }

    /// A holding of nothing yet, grown as the body arrives.
    pub(crate) fn hold(&self) -> Held {
        Held {
            bytes: Arc::clone(&self.bytes),
            held_bytes: self.held_bytes.clone(),
            permit: None,
            held: 0,
        }
    }

    /// The bytes held now by every request together.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.total - self.bytes.available_permits()
    }
}

/// The bytes one request holds; given back when dropped.
#[derive(Debug)]
pub(crate) struct Held {
    bytes: Arc<Semaphore>,
    held_bytes: GaugeHandle,
    permit: Option<OwnedSemaphorePermit>,
    held: usize,
}

impl Held {
    /// Holds `total` bytes in all (more than now, or nothing changes). Never waits: a pool
    /// without room refuses at once, and what was already held stays held until the drop.
    pub(crate) fn grow_to(&mut self, total: usize) -> Result<(), Exhausted> {
        let Some(more) = total.checked_sub(self.held).filter(|more| *more > 0) else {
            return Ok(());
        };
        let more32 = u32::try_from(more).map_err(|_| Exhausted)?;
        let permit = Arc::clone(&self.bytes)
            .try_acquire_many_owned(more32)
            .map_err(|_| Exhausted)?;
        match &mut self.permit {
            Some(held) => held.merge(permit),
            None => self.permit = Some(permit),
        }
        self.held = total;
        self.held_bytes.add(more as f64);
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // The permit goes back with the struct; the gauge follows it.
        if self.held > 0 {
            self.held_bytes.sub(self.held as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holdings_never_pass_the_total_and_come_back_on_drop() {
        let gauge = GaugeHandle::default();
        let budget = Budget::new(100, gauge.clone());
        let mut first = budget.hold();
        assert_eq!(first.grow_to(60), Ok(()));
        assert_eq!(first.grow_to(40), Ok(()), "shrinking asks nothing");
        let mut second = budget.hold();
        assert_eq!(second.grow_to(41), Err(Exhausted));
        assert_eq!(budget.in_use(), 60, "a refused growth holds nothing more");
        assert_eq!(second.grow_to(40), Ok(()));
        assert_eq!(budget.in_use(), 100);
        assert_eq!(gauge.get(), 100.0, "the gauge follows the holdings");
        assert_eq!(first.grow_to(61), Err(Exhausted));
        drop(first);
        assert_eq!(budget.in_use(), 40);
        assert_eq!(gauge.get(), 40.0);
        assert_eq!(second.grow_to(100), Ok(()));
        drop(second);
        assert_eq!(budget.in_use(), 0);
        assert_eq!(gauge.get(), 0.0);
    }
}
