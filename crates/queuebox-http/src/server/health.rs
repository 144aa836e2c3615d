//! Liveness and readiness (OPS-17..22): parallel, bounded, single-flight component checks
//! supplied by the binary, so this crate needs neither the engine nor the store.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use queuebox_core::readiness::{ComponentDown, ReadinessComponent};
use serde::Serialize;
use serde::ser::SerializeMap;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// OPS-20: each check is bounded by 3000 ms.
pub(crate) const CHECK_TIMEOUT: Duration = Duration::from_millis(3000);
/// OPS-21: a failed check warns at most once per component per 30 s.
const WARN_INTERVAL: Duration = Duration::from_secs(30);

/// The exact liveness body (OPS-17): no I/O, whatever the dependencies do.
pub(crate) const LIVENESS_BODY: &str =
    r#"{"status":"healthy","components":{"process":{"status":"up"}}}"#;

/// The `process` component: up between the end of the start and the beginning of shutdown.
#[derive(Default)]
pub(crate) struct ProcessState(AtomicU8);

const STARTING: u8 = 0;
const UP: u8 = 1;
const STOPPING: u8 = 2;

impl ProcessState {
    pub(crate) fn mark_started(&self) {
        // A shutdown that already began wins over a late "started".
        let _ = self
            .0
            .compare_exchange(STARTING, UP, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub(crate) fn begin_shutdown(&self) {
        self.0.store(STOPPING, Ordering::SeqCst);
    }

    fn status(&self) -> Result<(), ComponentDown> {
        match self.0.load(Ordering::SeqCst) {
            UP => Ok(()),
            STOPPING => Err(ComponentDown::Stopping),
            // Not started yet: the spec's reasons have no "starting"; the process is not
            // running its work, which `stopped` says.
            _ => Err(ComponentDown::Stopped),
        }
    }
}

type Outcome = Option<Result<(), ComponentDown>>;

struct Slot {
    component: ReadinessComponent,
    /// The check started by the latest probe; still running while it has no answer and its
    /// task is alive (single flight, OPS-20).
    running: Mutex<Option<Running>>,
    last_warn: Mutex<Option<Instant>>,
}

struct Running {
    outcome: watch::Receiver<Outcome>,
    task: AbortHandle,
}

/// A check left hanging must not outlive the listeners (OPS-30): the readiness goes away
/// with the last router that holds it, and takes its checks along.
impl Drop for Slot {
    fn drop(&mut self) {
        let running = self
            .running
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = running.take() {
            running.task.abort();
        }
    }
}

/// How one component came out of a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Up,
    Down(&'static str),
}

pub(crate) struct Readiness {
    process: Arc<ProcessState>,
    slots: Vec<Slot>,
}

impl Readiness {
    pub(crate) fn new(process: Arc<ProcessState>, components: Vec<ReadinessComponent>) -> Self {
        let slots = components
            .into_iter()
            .map(|component| Slot {
                component,
                running: Mutex::new(None),
                last_warn: Mutex::new(None),
            })
            .collect();
        Self { process, slots }
    }

    /// Runs one probe: `(healthy, JSON body)`.
    pub(crate) async fn probe(&self) -> (bool, String) {
        let deadline = Instant::now() + CHECK_TIMEOUT;
        // Start (or join) every check first so they all run in parallel, then wait for each
        // against the one shared deadline: the probe takes at most 3000 ms in total.
        let pending: Vec<_> = self.slots.iter().map(Slot::join_or_start).collect();
        let mut statuses = Vec::with_capacity(self.slots.len() + 1);
        statuses.push((
            "process",
            false,
            match self.process.status() {
                Ok(()) => Status::Up,
                Err(down) => Status::Down(down.reason()),
            },
        ));
        for (slot, mut outcome) in self.slots.iter().zip(pending) {
            let status =
                match tokio::time::timeout_at(deadline, outcome.wait_for(Option::is_some)).await {
                    Ok(Ok(done)) => match *done {
                        Some(Ok(())) => Status::Up,
                        Some(Err(down)) => Status::Down(down.reason()),
                        None => Status::Down("failed"),
                    },
                    // The check's task ended without an answer: it panicked.
                    Ok(Err(_)) => Status::Down("failed"),
                    Err(_) => Status::Down("timeout"),
                };
            if let Status::Down(reason) = status {
                slot.warn(reason);
            }
            statuses.push((slot.component.name(), slot.component.is_advisory(), status));
        }
        let healthy = statuses
            .iter()
            .all(|(_, advisory, status)| *advisory || *status == Status::Up);
        (healthy, render(healthy, &statuses))
    }
}

impl Slot {
    fn join_or_start(&self) -> watch::Receiver<Outcome> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(Running { outcome, .. }) = running.as_ref() {
            // No answer yet and the sender alive (a panicked check dropped it): join it.
            if outcome.borrow().is_none() && outcome.has_changed().is_ok() {
                return outcome.clone();
            }
        }
        let (tx, rx) = watch::channel(None);
        let check = self.component.check();
        // Off the request task (OPS-20): a hanging check outlives the probe that started it
        // and is joined by the next probes until it answers.
        let task = tokio::spawn(async move {
            let result = check.await;
            let _ = tx.send(Some(result));
        });
        *running = Some(Running {
            outcome: rx.clone(),
            task: task.abort_handle(),
        });
        rx
    }

    fn warn(&self, reason: &str) {
        // `stopping` is the expected state during the shutdown, not a failure to report.
        if reason == "stopping" {
            return;
        }
        let now = Instant::now();
        let mut last = self
            .last_warn
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !warn_due(*last, now) {
            return;
        }
        *last = Some(now);
        tracing::warn!(
            component = %self.component.name(),
            reason,
            "readiness component {} is down ({reason})",
            self.component.name()
        );
    }
}

/// OPS-21: at most one warn line per component per 30 s.
fn warn_due(last: Option<Instant>, now: Instant) -> bool {
    last.is_none_or(|at| now.duration_since(at) >= WARN_INTERVAL)
}

#[derive(Serialize)]
struct ComponentBody {
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    advisory: bool,
}

/// The components in probe order: serde_json's map would sort them, OPS-18 fixes the order.
struct Components<'a>(&'a [(&'a str, bool, Status)]);

impl Serialize for Components<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, advisory, status) in self.0 {
            let body = match status {
                Status::Up => ComponentBody {
                    status: "up",
                    reason: None,
                    advisory: *advisory,
                },
                Status::Down(reason) => ComponentBody {
                    status: "down",
                    reason: Some(reason),
                    advisory: *advisory,
                },
            };
            map.serialize_entry(name, &body)?;
        }
        map.end()
    }
}

fn render(healthy: bool, statuses: &[(&str, bool, Status)]) -> String {
    #[derive(Serialize)]
    struct Body<'a> {
        status: &'static str,
        components: Components<'a>,
    }
    let body = Body {
        status: if healthy { "healthy" } else { "unhealthy" },
        components: Components(statuses),
    };
    serde_json::to_string(&body).unwrap_or_else(|_| String::from(r#"{"status":"unhealthy"}"#))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_21_one_warn_per_component_per_30_s() {
        let first = Instant::now();
        assert!(warn_due(None, first));
        assert!(!warn_due(Some(first), first + Duration::from_secs(29)));
        assert!(warn_due(Some(first), first + WARN_INTERVAL));
    }

    #[test]
    fn renders_in_order_with_advisory_flag() {
        let statuses = [
            ("process", false, Status::Up),
            ("zeta", false, Status::Up),
            ("alpha", true, Status::Down("failed")),
        ];
        assert_eq!(
            render(true, &statuses),
            r#"{"status":"healthy","components":{"process":{"status":"up"},"zeta":{"status":"up"},"alpha":{"status":"down","reason":"failed","advisory":true}}}"#
        );
    }
}
