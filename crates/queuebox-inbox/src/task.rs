//! Spawned tasks owned by their handle: dropping the handle aborts the task, so no task of the
//! worker outlives the future that started it (a dropped `Worker::run` leaves nothing behind).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::task::{JoinError, JoinHandle};

/// A task spawned on the current runtime that is aborted when this handle is dropped. Awaiting
/// the handle waits for the task, like a [`JoinHandle`].
pub(crate) struct OwnedTask<T>(JoinHandle<T>);

impl<T: Send + 'static> OwnedTask<T> {
    pub(crate) fn spawn(task: impl Future<Output = T> + Send + 'static) -> Self {
        Self(tokio::spawn(task))
    }
}

impl<T> Future for OwnedTask<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for OwnedTask<T> {
    fn drop(&mut self) {
        // A no-op for a task that has finished.
        self.0.abort();
    }
}
