//! The start-up contract shared by `run` and `migrate` (operations.md OPS-23..25): each step
//! has an action phrase, and a failed step ends the start with one redacted line (a
//! configuration that does not load is printed whole, as `check` prints it).

use std::fmt;
use std::path::PathBuf;

use queuebox_config::LoadOptions;
use queuebox_core::redact::redact;

/// A failed start-up step: `QueueBox could not <action>. Reason: <reason>` (OPS-25).
#[derive(Debug)]
pub struct StartError {
    pub action: String,
    pub reason: String,
}

impl StartError {
    /// The reason passes through the shared redaction (SEC-5) before anyone sees it.
    pub fn new(action: impl Into<String>, reason: impl fmt::Display) -> Self {
        Self {
            action: action.into(),
            reason: redact(&reason.to_string()),
        }
    }
}

impl StartError {
    /// A failure whose lines were already logged (a start that ran its shutdown, OPS-25).
    pub fn reported() -> Self {
        Self {
            action: String::new(),
            reason: String::new(),
        }
    }

    pub fn is_reported(&self) -> bool {
        self.action.is_empty()
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "QueueBox could not {}. Reason: {}",
            self.action, self.reason
        )
    }
}

/// The environment as QueueBox reads it. Variables that are not valid UTF-8 cannot name or set a
/// key, so they are left out.
pub fn environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// The `QUEUEBOX_` variables that [`environment`] leaves out because their name or value is
/// not valid UTF-8, by their name with the bad bytes replaced; the configuration refuses them.
pub fn not_utf8_settings() -> Vec<String> {
    use std::os::unix::ffi::OsStrExt as _;
    std::env::vars_os()
        .filter(|(k, _)| k.as_bytes().starts_with(b"QUEUEBOX_"))
        .filter(|(k, v)| k.to_str().is_none() || v.to_str().is_none())
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect()
}

pub fn load_options(config: Option<PathBuf>, env: Vec<(String, String)>) -> LoadOptions {
    LoadOptions {
        config_path: config,
        env,
        not_utf8: not_utf8_settings(),
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        etc_path: PathBuf::from("/etc/queuebox/queuebox.yml"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_25_failure_line_is_redacted() {
        let err = StartError::new(
            "connect to the database",
            "db:5432 refused: password=hunter2",
        );
        assert_eq!(
            err.to_string(),
            "QueueBox could not connect to the database. Reason: db:5432 refused: password=[REDACTED]"
        );
    }
}
