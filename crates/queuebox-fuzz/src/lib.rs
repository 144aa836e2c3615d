//! The fuzzed entry points (issue 17, "Fuzzing"): one function per parser an attacker or a
//! careless operator reaches, each taking raw bytes and required never to panic, hang or grow
//! without bound. The cargo-fuzz targets in `fuzz/fuzz_targets/` call these; the test
//! `tests/corpus.rs` replays the committed seed corpus (`fuzz/corpus/<target>/`) through them on
//! every test run. How to run the fuzzers: docs/reliability.md.

mod config;
mod templates;
mod webhook;

pub use config::config;
pub use templates::{jsonpath, template};
pub use webhook::{intake_body, webhook_request};

/// One fuzzed entry point.
pub type Target = fn(&[u8]);

/// The targets by name, as the corpus folders and the cargo-fuzz binaries are named.
pub const TARGETS: &[(&str, Target)] = &[
    ("config", config),
    ("webhook_request", webhook_request),
    ("intake_body", intake_body),
    ("jsonpath", jsonpath),
    ("template", template),
];

/// Splits `data` at the first `marker`; all of it is the first part when there is none.
pub(crate) fn split<'a>(data: &'a [u8], marker: &[u8]) -> (&'a [u8], &'a [u8]) {
    match data.windows(marker.len()).position(|w| w == marker) {
        Some(at) => (&data[..at], &data[at + marker.len()..]),
        None => (data, &[]),
    }
}
