//! Runs the shared redaction corpus (`clients/contract/redaction-corpus.json`, pull.md PULL-70)
//! and the input-bound case PULL-C31 against the server's `redact` (operations.md SEC-5).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use queuebox_core::redact::{
    INPUT_BOUND, MAX_LENGTH, TRUNCATION_MARKER, redact, redact_cut, remember_secret,
};
use serde::Deserialize;

/// The corpus format versions this test understands.
const KNOWN_VERSION: u64 = 1;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Corpus {
    version: u64,
    input_bound: usize,
    max_length: usize,
    truncation_marker: String,
    cases: Vec<Case>,
    configured_secret_cases: Vec<ConfiguredCase>,
}

/// A case of the server's own step: the configuration's secrets (issue 17 defect 4).
#[derive(Deserialize)]
struct ConfiguredCase {
    name: String,
    configured: Vec<String>,
    input: String,
    expected: String,
    secrets: Vec<String>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    input: String,
    expected: String,
    secrets: Vec<String>,
}

fn corpus() -> Corpus {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../clients/contract/redaction-corpus.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let corpus: Corpus = serde_json::from_str(&text)
        .unwrap_or_else(|err| panic!("{} is not a valid corpus: {err}", path.display()));
    assert_eq!(
        corpus.version, KNOWN_VERSION,
        "unknown redaction corpus version {}; this test knows version {KNOWN_VERSION}",
        corpus.version
    );
    corpus
}

#[test]
fn corpus_limits_equal_the_implementation_constants() {
    let corpus = corpus();
    assert_eq!(corpus.input_bound, INPUT_BOUND, "inputBound");
    assert_eq!(corpus.max_length, MAX_LENGTH, "maxLength");
    assert_eq!(
        corpus.truncation_marker, TRUNCATION_MARKER,
        "truncationMarker"
    );
}

#[test]
fn corpus_case_names_are_unique_and_kebab_case() {
    let corpus = corpus();
    let mut seen = HashSet::new();
    for case in &corpus.cases {
        assert!(
            seen.insert(case.name.as_str()),
            "duplicate case name {}",
            case.name
        );
        let kebab = !case.name.is_empty()
            && case.name.split('-').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            });
        assert!(kebab, "case name {:?} is not kebab-case", case.name);
    }
}

#[test]
fn every_corpus_case_gives_expected_and_leaks_no_secret() {
    let corpus = corpus();
    assert!(!corpus.cases.is_empty(), "the corpus has no cases");
    let mut failures = Vec::new();
    for case in &corpus.cases {
        let output = redact(&case.input);
        if output != case.expected {
            failures.push(format!(
                "{}: output differs\n  input:    {:?}\n  expected: {:?}\n  output:   {:?}",
                case.name, case.input, case.expected, output
            ));
        }
        for secret in case
            .secrets
            .iter()
            .filter(|secret| output.contains(secret.as_str()))
        {
            failures.push(format!(
                "{}: output contains the secret {secret:?}",
                case.name
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} corpus cases failed:\n{}",
        failures.len(),
        corpus.cases.len(),
        failures.join("\n")
    );
}

/// PULL-C31: a 10 MB input of repeated `password=x@` fragments gives exactly the output of its
/// first 2512 characters, and costs about what that shorter input costs.
#[test]
fn pull_c31_ten_megabyte_input_is_bounded_before_any_rule() {
    let fragment = "password=x@";
    let huge = fragment.repeat(10 * 1024 * 1024 / fragment.len() + 1);
    let bounded: String = huge.chars().take(INPUT_BOUND).collect();
    assert!(huge.len() >= 10 * 1024 * 1024);

    let expected = redact(&bounded);
    assert_eq!(redact(&huge), expected);
    assert!(expected.chars().count() <= MAX_LENGTH);

    // The output equality above is the contract. Timing only backs it up, with a margin wide
    // enough for a loaded machine: a rule that read the whole 10 MB would be thousands of times
    // slower than one that stops at the bound.
    let time = |text: &str| {
        let start = Instant::now();
        for _ in 0..20 {
            std::hint::black_box(redact(std::hint::black_box(text)));
        }
        start.elapsed()
    };
    let bounded_cost = time(&bounded);
    let huge_cost = time(&huge);
    assert!(
        huge_cost <= bounded_cost * 10 + Duration::from_millis(200),
        "10 MB input took {huge_cost:?}, the bounded input {bounded_cost:?}"
    );
}

/// SEC-5, issue 17 defect 4: every configured secret is masked in the forms a receiver echoes
/// it (as written, JSON-escaped, percent-encoded, Base64), and values under 4 characters are
/// not. The values of all cases stay remembered in this process, so each case also shows that
/// the others' values do not disturb it.
#[test]
fn sec_5_configured_secrets_are_masked_in_every_echo_form() {
    let corpus = corpus();
    assert!(!corpus.configured_secret_cases.is_empty());
    let mut failures = Vec::new();
    for case in &corpus.configured_secret_cases {
        case.configured.iter().for_each(|v| remember_secret(v));
        let output = redact(&case.input);
        if output != case.expected {
            failures.push(format!(
                "{}: output differs\n  input:    {:?}\n  expected: {:?}\n  output:   {:?}",
                case.name, case.input, case.expected, output
            ));
        }
        for secret in case.secrets.iter().filter(|s| output.contains(s.as_str())) {
            failures.push(format!("{}: output contains {secret:?}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Issue 17 defect 4: an error body cut at `maxErrorBodyBytes` inside an echoed secret does not
/// keep the secret's start.
#[test]
fn sec_5_a_secret_cut_at_the_end_of_a_text_leaves_no_start_behind() {
    remember_secret("cut-me-somewhere-in-the-middle");
    assert_eq!(
        redact_cut("HTTP 500 - token cut-me-some"),
        "HTTP 500 - token [REDACTED]"
    );
    assert_eq!(
        redact("HTTP 500 - token cut-me-some"),
        "HTTP 500 - token cut-me-some",
        "a text that was not cut keeps a word that only starts like a secret"
    );
}
