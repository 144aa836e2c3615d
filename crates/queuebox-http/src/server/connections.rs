//! The bound on the open connections of one port (`server.maxConnections`, issue 17 defect 5).
//!
//! Each connection costs a task and its buffers whether it sends anything or not, so idle and
//! slowloris connections could otherwise grow the memory without limit (the body bytes are
//! bounded apart, by `inbox.maxPendingBytes`). At the bound the accept loop stops accepting
//! until a connection closes: a new connection then waits in the system's listen backlog, which
//! costs the process nothing, and is served as soon as a slot frees, with no error for a client
//! that waits. Accepting and answering 503 at once was the other choice; it was not taken
//! because every refused connection would still cost an accept, a write and a close, a flood
//! would keep the loop busy, and closing a socket with an unread request resets it, so the
//! client often would not even read the 503.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use queuebox_telemetry::GaugeHandle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// At most one warning per port this often while the bound is reached.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The slots of one port.
#[derive(Debug)]
pub(crate) struct ConnectionBound {
    slots: Arc<Semaphore>,
    max: usize,
    label: &'static str,
    open: Option<GaugeHandle>,
    last_warning: Mutex<Option<Instant>>,
}

/// One connection's slot, taken before the accept; given back when dropped. The gauge counts
/// it from [`Slot::opened`] on, so a slot waiting for the next accept is not an open connection.
#[derive(Debug)]
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
    open: Option<GaugeHandle>,
    counted: bool,
}

impl Slot {
    /// A connection was accepted into this slot.
    pub(crate) fn opened(mut self) -> Self {
        if let Some(open) = &self.open {
            open.inc();
            self.counted = true;
        }
        self
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let (Some(open), true) = (&self.open, self.counted) {
            open.dec();
        }
    }
}

impl ConnectionBound {
    /// `max` connections at once on the port named `label`; `open` is its
    /// `queuebox_http_connections` series.
    pub(crate) fn new(max: usize, label: &'static str, open: Option<GaugeHandle>) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        if let Some(open) = &open {
            open.set(0.0);
        }
        Self {
            slots: Arc::new(Semaphore::new(max)),
            max,
            label,
            open,
            last_warning: Mutex::new(None),
        }
    }

    /// A free slot now, or `None` at the bound (and a warning, at most every 10 s).
    pub(crate) fn try_slot(&self) -> Option<Slot> {
        match Arc::clone(&self.slots).try_acquire_owned() {
            Ok(permit) => Some(self.slot(permit)),
            Err(_) => {
                self.warn_full();
                None
            }
        }
    }

    /// Waits for a connection to close and takes its slot.
    pub(crate) async fn next_slot(&self) -> Slot {
        // The semaphore is never closed, so the acquire only ends with a permit.
        let permit = Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .unwrap_or_else(|_| unreachable!("the connection semaphore is never closed"));
        self.slot(permit)
    }

    fn slot(&self, permit: OwnedSemaphorePermit) -> Slot {
        Slot {
            _permit: permit,
            open: self.open.clone(),
            counted: false,
        }
    }

    fn warn_full(&self) {
        let mut last = self
            .last_warning
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        tracing::warn!(
            listener = self.label,
            maxConnections = self.max,
            "The {} port holds server.maxConnections ({}) connections; new connections wait until one closes.",
            self.label,
            self.max
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_never_pass_the_bound_and_come_back_on_drop() {
        let open = GaugeHandle::default();
        let bound = ConnectionBound::new(2, "data", Some(open.clone()));
        let first = bound.try_slot().expect("a first slot").opened();
        let second = bound.try_slot().expect("a second slot");
        assert!(bound.try_slot().is_none(), "the bound is reached");
        assert_eq!(
            open.get(),
            1.0,
            "a slot waiting for its accept is no connection"
        );
        let second = second.opened();
        assert_eq!(open.get(), 2.0);
        drop(first);
        assert_eq!(open.get(), 1.0);
        let third = bound.next_slot().await.opened();
        assert!(bound.try_slot().is_none());
        drop((second, third));
        assert_eq!(open.get(), 0.0);
    }
}
