//! The crate carries copies of files that live elsewhere in the repository, because `cargo
//! package` cannot include files outside the crate and the packaged crate must build on its own:
//! the contract SQL (`contract/` from `clients/contract/`) and the redaction module (`src/redact*`
//! from `crates/queuebox-core/`). These tests fail when a copy and its original differ.

use std::fs;
use std::path::{Path, PathBuf};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn repository() -> PathBuf {
    crate_dir().join("../..")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The file names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// The text below the leading `//!` module documentation, which the copy may word for its crate.
fn below_module_doc(text: &str) -> String {
    text.lines()
        .skip_while(|line| line.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every contract folder the crate embeds holds exactly the files of its original, byte for byte.
#[test]
fn the_contract_sql_equals_clients_contract() {
    let copies = crate_dir().join("contract");
    let originals = repository().join("clients/contract");
    let dialects = names(&copies);
    assert_eq!(
        dialects,
        ["mysql", "postgresql", "sqlite"],
        "the dialects this crate renders"
    );
    for dialect in dialects {
        let (copy_dir, original_dir) = (copies.join(&dialect), originals.join(&dialect));
        assert_eq!(
            names(&copy_dir),
            names(&original_dir),
            "contract/{dialect} holds the files of clients/contract/{dialect}"
        );
        for name in names(&copy_dir) {
            assert_eq!(
                read(&copy_dir.join(&name)),
                read(&original_dir.join(&name)),
                "contract/{dialect}/{name} differs from clients/contract/{dialect}/{name}: copy it again"
            );
        }
    }
}

/// The redaction module equals queuebox-core's below its module documentation, sub-modules
/// included, so the server and this client redact alike.
#[test]
fn the_redaction_module_equals_queuebox_core() {
    let copies = crate_dir().join("src");
    let originals = repository().join("crates/queuebox-core/src");
    assert_eq!(
        names(&copies.join("redact")),
        names(&originals.join("redact"))
    );
    let mut files = vec!["redact.rs".to_owned()];
    files.extend(
        names(&copies.join("redact"))
            .into_iter()
            .map(|name| format!("redact/{name}")),
    );
    for file in files {
        let (copy, original) = (read(&copies.join(&file)), read(&originals.join(&file)));
        assert_eq!(
            below_module_doc(&copy),
            below_module_doc(&original),
            "src/{file} differs from crates/queuebox-core/src/{file}: copy it again"
        );
    }
}
