//! The YAML configuration with its `${...}` placeholders and the `QUEUEBOX_*` variables merged
//! over it: everything `queuebox run` and `queuebox check` read before they trust anything.

use std::io::Write;
use std::path::PathBuf;

use queuebox_config::{LoadOptions, load};

/// `<yaml>\n%%\n<NAME=value lines>`: the YAML is the configuration file, each line of the rest
/// a variable. `load` must answer (a configuration or its errors) without panicking.
pub fn config(data: &[u8]) {
    let (yaml, env) = crate::split(data, b"\n%%\n");
    let dir = std::env::temp_dir().join(format!("queuebox-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("queuebox.yml");
    let Ok(mut out) = std::fs::File::create(&file) else {
        return;
    };
    if out.write_all(yaml).is_err() {
        return;
    }
    drop(out);
    let env = String::from_utf8_lossy(env)
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    let options = LoadOptions {
        config_path: Some(file),
        env,
        not_utf8: Vec::new(),
        cwd: dir,
        etc_path: PathBuf::from("/nonexistent/queuebox-fuzz/queuebox.yml"),
    };
    if let Err(err) = load(&options) {
        // The message is what an operator reads; building it must not panic either.
        let _ = err.to_string();
    }
}
