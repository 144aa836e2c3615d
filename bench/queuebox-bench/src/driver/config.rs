//! The QueueBox configuration files the driver writes: the database in the phase's schema,
//! the data port on a free port, JSON logs at `info` (no per-row lines), and, for a measured
//! QueueBox, one `http` destination to the receiver with a `**` route. No inbox source.

/// What a phase's configuration varies.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub batch_size: u32,
    /// `None` leaves `outbox.concurrency` out, so QueueBox's default applies.
    pub concurrency: Option<u32>,
    /// The receiver's port; `None` for the SQL floor (no destination).
    pub receiver_port: Option<u16>,
    /// `outbox.pollIntervalMs`; `None` leaves the default.
    pub poll_interval_ms: Option<u64>,
    /// `outbox.capture.mode: notify` (PostgreSQL LISTEN/NOTIFY wake-ups).
    pub notify: bool,
}

pub fn yaml(database_url: &str, shape: Shape) -> String {
    let mut out = format!(
        "# Written by qb-bench for one benchmark phase.\n\
         database:\n  type: postgresql\n  url: \"{database_url}\"\n\
         server:\n  httpPort: 0\n\
         log:\n  format: json\n  level: info\n\
         outbox:\n  batchSize: {}\n",
        shape.batch_size
    );
    if let Some(c) = shape.concurrency {
        out.push_str(&format!("  concurrency: {c}\n"));
    }
    if let Some(ms) = shape.poll_interval_ms {
        out.push_str(&format!("  pollIntervalMs: {ms}\n"));
    }
    if shape.notify {
        out.push_str("  capture:\n    mode: notify\n");
    }
    if let Some(port) = shape.receiver_port {
        out.push_str(&format!(
            "destinations:\n  receiver:\n    type: http\n    baseUrl: http://127.0.0.1:{port}\n    path: /events\n\
             routes:\n  - topicPattern: \"**\"\n    destination: receiver\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_concurrency_is_left_out() {
        let text = yaml(
            "postgres://x",
            Shape {
                batch_size: 100,
                concurrency: None,
                receiver_port: Some(9),
                poll_interval_ms: None,
                notify: false,
            },
        );
        assert!(!text.contains("concurrency"));
        assert!(text.contains("baseUrl: http://127.0.0.1:9"));
        let floor = yaml(
            "postgres://x",
            Shape {
                batch_size: 100,
                concurrency: Some(64),
                receiver_port: None,
                poll_interval_ms: Some(5000),
                notify: true,
            },
        );
        assert!(floor.contains("concurrency: 64") && !floor.contains("routes"));
        assert!(floor.contains("pollIntervalMs: 5000") && floor.contains("mode: notify"));
    }
}
