//! TRF-1: the engine that QueueBox runs is the exact version that docs/transforms.md records as
//! pinned and as measured by the conformance harness. The version is the one the compiled engine
//! reports about itself, not a text read from a manifest, so a different engine reaching the
//! build (a loosened pin picked up by `cargo update`, a changed lock file) fails here until the
//! harness is run again and its figures are recorded for the new version.

use std::path::Path;

/// The text between `start` and the next `end` after it.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let to = text[from..].find(end)?;
    Some(&text[from..from + to])
}

#[test]
fn trf_1_the_engine_that_runs_is_the_exact_version_the_docs_record_as_pinned_and_measured() {
    let running = queuebox_transform::engine_version();
    let (name, version) = running
        .split_once(' ')
        .unwrap_or_else(|| panic!("the engine reports `<name> <version>`, got {running:?}"));
    assert_eq!(name, "jlens-core", "{running}");
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/transforms.md");
    let docs = std::fs::read_to_string(docs).unwrap();
    let pinned = between(&docs, "**`jlens-core`, pinned to `=", "`**")
        .expect("docs/transforms.md names the pin as **`jlens-core`, pinned to `=x.y.z`**");
    assert_eq!(
        version, pinned,
        "the engine that runs is {running}; docs/transforms.md says the pin is ={pinned}"
    );
    // The conformance table's row for the engine: `| `jlens-core` | <version> | <passed> ...`.
    let measured = between(&docs, "| `jlens-core` | ", " |")
        .expect("docs/transforms.md has the conformance row of jlens-core");
    assert_eq!(
        version, measured,
        "the engine that runs is {running}; the conformance figures in docs/transforms.md were \
         measured on {measured}: rerun bench/jsonata-conformance and record them"
    );
}
