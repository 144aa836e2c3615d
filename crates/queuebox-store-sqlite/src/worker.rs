//! The store's one connection, owned by a thread of its own. SQLite calls block (on the file,
//! and for up to the busy timeout on another process's write lock), so they never run on the
//! async runtime's worker threads: every call is a job sent to this thread, run in arrival
//! order, and answered through a oneshot channel. One connection per store is what config.md
//! says for `sqlite` (`poolSize` is not allowed): SQLite has one writer at a time anyway.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use rusqlite::Connection;
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// The thread and its queue. Dropping it (or [`Worker::close`]) ends the thread once the jobs
/// already queued have run; the connection closes with it.
pub(crate) struct Worker {
    sender: Mutex<Option<mpsc::Sender<Job>>>,
    /// Jobs sent and not yet finished (the one running included).
    in_flight: std::sync::Arc<AtomicU64>,
}

/// A failure to open the database that SQLite itself did not report.
pub(crate) fn cannot_open(message: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
        Some(message),
    )
}

impl Worker {
    /// Starts the thread and opens the connection on it; fails with the open's error.
    pub(crate) async fn start<F>(open: F) -> Result<Self, rusqlite::Error>
    where
        F: FnOnce() -> Result<Connection, rusqlite::Error> + Send + 'static,
    {
        let (sender, receiver) = mpsc::channel::<Job>();
        let (ready, opened) = oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("queuebox-sqlite".to_owned())
            .spawn(move || {
                let mut conn = match open() {
                    Ok(conn) => {
                        let _ = ready.send(Ok(()));
                        conn
                    }
                    Err(err) => {
                        let _ = ready.send(Err(err));
                        return;
                    }
                };
                while let Ok(job) = receiver.recv() {
                    job(&mut conn);
                }
            });
        if let Err(err) = spawned {
            return Err(cannot_open(format!(
                "cannot start the SQLite thread: {err}"
            )));
        }
        match opened.await {
            Ok(Ok(())) => Ok(Self {
                sender: Mutex::new(Some(sender)),
                in_flight: std::sync::Arc::new(AtomicU64::new(0)),
            }),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(cannot_open(
                "the SQLite thread ended while opening the database".to_owned(),
            )),
        }
    }

    /// Runs `job` on the connection's thread and returns its answer; `None` when the store is
    /// closed (or its thread ended).
    pub(crate) async fn run<R, F>(&self, job: F) -> Option<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> R + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let in_flight = self.in_flight.clone();
        let boxed: Job = Box::new(move |conn| {
            let result = job(conn);
            in_flight.fetch_sub(1, Ordering::Relaxed);
            let _ = answer.send(result);
        });
        {
            let guard = self.sender.lock().unwrap_or_else(|e| e.into_inner());
            let sender = guard.as_ref()?;
            self.in_flight.fetch_add(1, Ordering::Relaxed);
            if sender.send(boxed).is_err() {
                self.in_flight.fetch_sub(1, Ordering::Relaxed);
                return None;
            }
        }
        answered.await.ok()
    }

    /// Jobs sent and not yet finished.
    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Refuses every later job; the thread ends after the queued ones.
    pub(crate) fn close(&self) {
        self.sender.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}
