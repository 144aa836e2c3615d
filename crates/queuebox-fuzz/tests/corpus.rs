//! Replays the committed seed corpus of every fuzz target (`fuzz/corpus/<target>/`) through
//! its entry point, so the inputs that once found a defect, and the seeds, run on every test
//! run without libFuzzer. Each target must have seeds.

use std::path::PathBuf;

fn corpus_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

#[test]
fn every_target_replays_its_seed_corpus_without_a_panic() {
    for (name, target) in queuebox_fuzz::TARGETS {
        let dir = corpus_root().join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        files.sort();
        assert!(files.len() >= 3, "{name} has at least 3 seeds");
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{name} panics on {}", file.display());
        }
    }
}
