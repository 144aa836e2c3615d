//! SIGTERM and SIGINT as one stream of shutdown requests (OPS-26, OPS-29).

use tokio::signal::unix::{Signal, SignalKind, signal};

pub struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    pub fn install() -> std::io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next SIGTERM or SIGINT.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
