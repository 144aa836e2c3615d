//! Test helpers: a temporary directory built on std, and loading a YAML text with a given
//! environment, never the real process's.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use queuebox_config::{LoadError, LoadOptions, Loaded, load};

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let path =
            std::env::temp_dir().join(format!("queuebox-config-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn write(&self, name: &str, content: &str) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::fs::write(&path, content).expect("write file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Options for a temp dir as working directory, with no /etc file.
pub fn options(dir: &TempDir, config: Option<PathBuf>, vars: &[(&str, &str)]) -> LoadOptions {
    LoadOptions {
        config_path: config,
        env: env(vars),
        not_utf8: Vec::new(),
        cwd: dir.path().to_owned(),
        etc_path: dir.path().join("etc-queuebox.yml"),
    }
}

/// Loads `yaml` as the `--config` file with the given variables.
pub fn load_with(yaml: &str, vars: &[(&str, &str)]) -> Result<Loaded, LoadError> {
    let dir = TempDir::new();
    let file = dir.write("config.yml", yaml);
    load(&options(&dir, Some(file), vars))
}

pub fn load_yaml(yaml: &str) -> Result<Loaded, LoadError> {
    load_with(yaml, &[])
}

/// The error lines of an invalid configuration (panics when it is valid).
pub fn errors_with(yaml: &str, vars: &[(&str, &str)]) -> Vec<String> {
    match load_with(yaml, vars) {
        Err(LoadError::Invalid(d)) => d.0.iter().map(ToString::to_string).collect(),
        Err(other) => panic!("expected an invalid configuration, got: {other}"),
        Ok(_) => panic!("expected an invalid configuration, but it loaded"),
    }
}

pub fn errors(yaml: &str) -> Vec<String> {
    errors_with(yaml, &[])
}

/// Loads and expects success.
pub fn ok(yaml: &str) -> Loaded {
    match load_yaml(yaml) {
        Ok(l) => l,
        Err(e) => panic!("expected a valid configuration, got:\n{e}"),
    }
}

pub fn ok_with(yaml: &str, vars: &[(&str, &str)]) -> Loaded {
    match load_with(yaml, vars) {
        Ok(l) => l,
        Err(e) => panic!("expected a valid configuration, got:\n{e}"),
    }
}

pub fn warnings(yaml: &str) -> Vec<String> {
    ok(yaml).warnings.iter().map(ToString::to_string).collect()
}

/// A minimal valid database section for tests that are about something else.
pub const DB: &str = "database:\n  url: postgres://app@db:5432/app\n";

/// `DB` plus `rest`.
pub fn with_db(rest: &str) -> String {
    format!("{DB}{rest}")
}
