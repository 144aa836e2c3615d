//! Readiness components (operations.md OPS-18..20): a named check that the management port's
//! `/health/ready` runs, offered by the database, the engine's tasks and every connector
//! connection (`rabbitmq.<source>`, `kafka.<destination>`, …), so no connector needs the HTTP
//! crate to report its health.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// Why a component is down; the answer's `reason` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComponentDown {
    /// The dependency answered with an error, or a connection is lost (`reason: failed`).
    Failed,
    /// The task behind the component does not run (`reason: stopped`).
    Stopped,
    /// The component is being stopped by the shutdown (`reason: stopping`).
    Stopping,
    /// A destination's circuit breaker is open or half-open (`reason: circuit-open`); only
    /// ever on an advisory component, since the receiver is down, not QueueBox.
    CircuitOpen,
    /// The dependency answers its check but has not finished work it was given in time, e.g.
    /// a database that answers `SELECT 1` while the intake's insert waits on it beyond
    /// `inbox.storageWaitMs` (`reason: stuck`).
    Stuck,
}

impl ComponentDown {
    /// The `reason` text of the readiness answer.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Failed => "failed",
            Self::Stopped => "stopped",
            Self::Stopping => "stopping",
            Self::CircuitOpen => "circuit-open",
            Self::Stuck => "stuck",
        }
    }
}

/// One run of a component's check.
pub type CheckFuture = Pin<Box<dyn Future<Output = Result<(), ComponentDown>> + Send + 'static>>;
type CheckFn = Arc<dyn Fn() -> CheckFuture + Send + Sync>;

/// One readiness component (OPS-18), e.g. `database` or `kafka.orders`.
#[derive(Clone)]
pub struct ReadinessComponent {
    name: String,
    advisory: bool,
    check: CheckFn,
}

impl ReadinessComponent {
    /// `check` runs on a task of its own for each probe that finds no check of this component
    /// still running; it bounds its own I/O where the spec gives a bound (2000 ms for
    /// `database`), and the server bounds it at 3000 ms regardless.
    pub fn new<F, Fut>(name: impl Into<String>, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), ComponentDown>> + Send + 'static,
    {
        Self {
            name: name.into(),
            advisory: false,
            check: Arc::new(move || Box::pin(check())),
        }
    }

    /// A component that is up while `up()` says so: a connection flag, a running task.
    pub fn flag(
        name: impl Into<String>,
        down: ComponentDown,
        up: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Self {
        Self::new(name, move || {
            let answer = if up() { Ok(()) } else { Err(down) };
            std::future::ready(answer)
        })
    }

    /// Reported with `"advisory":true` and never counted in the verdict (OPS-18/19).
    pub fn advisory(mut self) -> Self {
        self.advisory = true;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_advisory(&self) -> bool {
        self.advisory
    }

    /// Starts one run of the check.
    pub fn check(&self) -> CheckFuture {
        (self.check)()
    }
}

impl std::fmt::Debug for ReadinessComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadinessComponent")
            .field("name", &self.name)
            .field("advisory", &self.advisory)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn now<F: Future>(future: F) -> F::Output {
        // The flag checks are ready at once; no runtime is needed to read them.
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut future = std::pin::pin!(future);
        match future.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(value) => value,
            std::task::Poll::Pending => panic!("a flag check is ready at once"),
        }
    }

    #[test]
    fn a_flag_component_follows_its_flag_and_reports_the_given_reason() {
        let connected = Arc::new(AtomicBool::new(false));
        let seen = connected.clone();
        let component =
            ReadinessComponent::flag("rabbitmq.orders", ComponentDown::Failed, move || {
                seen.load(Ordering::SeqCst)
            });
        assert_eq!(now(component.check()), Err(ComponentDown::Failed));
        connected.store(true, Ordering::SeqCst);
        assert_eq!(now(component.check()), Ok(()));
        assert_eq!(component.name(), "rabbitmq.orders");
        assert!(!component.is_advisory());
        assert!(component.advisory().is_advisory());
    }
}
