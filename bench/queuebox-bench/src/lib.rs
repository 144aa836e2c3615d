//! The QueueBox benchmarks (docs/benchmarks.md, quality.md "Benchmarks"): the pure helpers the
//! three binaries share (receiver records, percentiles, `/proc` readings, the Markdown page) and
//! the outbox benchmark driver. Benchmarks are never timed tests; only these helpers have tests.

pub mod driver;
pub mod procfs;
pub mod receipts;
pub mod report;
pub mod stats;

use std::path::{Path, PathBuf};

/// Loads a QueueBox configuration file as `queuebox run --config` would, with no `QUEUEBOX_*`
/// variables and no /etc lookup: the benchmarks write every setting into the file.
pub fn load_config_file(path: &Path, cwd: &Path) -> anyhow::Result<queuebox_config::Config> {
    let loaded = queuebox_config::load(&queuebox_config::LoadOptions {
        config_path: Some(path.to_path_buf()),
        env: Vec::new(),
        not_utf8: Vec::new(),
        cwd: cwd.to_path_buf(),
        etc_path: PathBuf::from("/nonexistent"),
    })
    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(loaded.config)
}
