//! Runs JSONata engines against JSONata's own reference test suite and prints the pass rate per
//! group and overall (docs/transforms.md). The suite is read at run time from the shared folder,
//! never copied into the project.
//!
//! `--floor P` makes the run fail when the overall pass rate of the engine falls below P percent:
//! scripts/test.sh uses it so that an engine change that loses conformance fails the build.

mod engines;
mod suite;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use engines::Engine;
use suite::{Case, Expected};

/// What one evaluation gave.
#[derive(Debug)]
pub enum Outcome {
    Value(serde_json::Value),
    Undefined,
    /// An error with its JSONata code, when the engine gives one.
    Error(Option<String>),
}

/// A case that runs longer than this is counted as failed and left behind: an engine that
/// hangs must not hang the harness.
const CASE_WATCHDOG: Duration = Duration::from_secs(10);

fn main() -> anyhow::Result<()> {
    let mut suite_dir: Option<PathBuf> = None;
    let mut engine_names: Vec<String> = Vec::new();
    let mut floor: Option<f64> = None;
    let mut verbose = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--suite" => suite_dir = Some(args.next().context("--suite needs a folder")?.into()),
            "--engine" => engine_names.push(args.next().context("--engine needs a name")?),
            "--floor" => floor = Some(args.next().context("--floor needs a percentage")?.parse()?),
            "--verbose" => verbose = true,
            other => bail!(
                "unknown argument {other}; use --suite DIR --engine NAME|all [--floor PERCENT] [--verbose]"
            ),
        }
    }
    let suite_dir = suite_dir.unwrap_or_else(default_suite_dir);
    let cases = suite::load(&suite_dir)
        .with_context(|| format!("reading the JSONata test suite in {}", suite_dir.display()))?;
    if engine_names.is_empty() || engine_names.iter().any(|n| n == "all") {
        engine_names = engines::available()
            .iter()
            .map(|e| e.name().to_owned())
            .collect();
    }
    let mut below_floor = Vec::new();
    for name in &engine_names {
        let engine = engines::by_name(name).with_context(|| {
            format!(
                "unknown or not built engine {name}; built: {}",
                engines::available()
                    .iter()
                    .map(|e| e.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let rate = run_engine(engine, &cases, verbose);
        if let Some(floor) = floor
            && rate < floor
        {
            below_floor.push(format!("{name}: {rate:.2}% < floor {floor:.2}%"));
        }
    }
    if !below_floor.is_empty() {
        bail!("conformance below the floor: {}", below_floor.join("; "));
    }
    Ok(())
}

/// `../shared/conformance/jsonata/test-suite` beside the checkout, or `QUEUEBOX_JSONATA_SUITE`.
fn default_suite_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("QUEUEBOX_JSONATA_SUITE") {
        return dir.into();
    }
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // bench/jsonata-conformance -> checkout root -> its parent holds shared/.
    let root = here.ancestors().nth(2).unwrap_or(&here).to_path_buf();
    let beside = root.join("../shared/conformance/jsonata/test-suite");
    if beside.is_dir() {
        return beside;
    }
    PathBuf::from("/work/shared/conformance/jsonata/test-suite")
}

/// Runs every case, prints the per-group table and the overall line, returns the pass rate.
fn run_engine(engine: &'static dyn Engine, cases: &[Case], verbose: bool) -> f64 {
    let started = Instant::now();
    let mut groups: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut passed_all = 0;
    let mut hung = 0;
    let mut panicked = 0;
    for case in cases {
        let verdict = run_case(engine, case);
        let entry = groups.entry(case.group.as_str()).or_default();
        entry.1 += 1;
        match verdict {
            Verdict::Pass => {
                entry.0 += 1;
                passed_all += 1;
            }
            Verdict::Fail(why) => {
                if verbose {
                    println!("FAIL {} {}: {why}", engine.name(), case.id);
                }
            }
            Verdict::Panic => {
                panicked += 1;
                if verbose {
                    println!("PANIC {} {}", engine.name(), case.id);
                }
            }
            Verdict::Hang => {
                hung += 1;
                if verbose {
                    println!("HANG {} {}", engine.name(), case.id);
                }
            }
        }
    }
    println!("engine {}", engine.name());
    println!("| group | passed | cases | rate |");
    println!("|---|---|---|---|");
    for (group, (p, n)) in &groups {
        println!(
            "| {group} | {p} | {n} | {:.1}% |",
            100.0 * *p as f64 / *n as f64
        );
    }
    let rate = 100.0 * passed_all as f64 / cases.len() as f64;
    println!(
        "overall {}: {passed_all} of {} cases passed ({rate:.2}%), {panicked} panicked, {hung} hung, {:.1} s",
        engine.name(),
        cases.len(),
        started.elapsed().as_secs_f64()
    );
    rate
}

enum Verdict {
    Pass,
    Fail(String),
    Panic,
    Hang,
}

/// Runs one case on its own thread (big stack, panics caught, a watchdog for hangs).
fn run_case(engine: &'static dyn Engine, case: &Case) -> Verdict {
    if let Expected::Unreadable(why) = &case.expected {
        return Verdict::Fail(why.clone());
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let job = case.clone();
    let spawned = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                engine.evaluate(
                    &job.expr,
                    job.input.as_ref(),
                    &job.bindings,
                    job.timelimit,
                    job.depth,
                )
            }));
            let _ = tx.send(result);
        });
    if spawned.is_err() {
        return Verdict::Fail("could not start a thread".into());
    }
    let outcome = match rx.recv_timeout(CASE_WATCHDOG) {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_)) => return Verdict::Panic,
        Err(_) => return Verdict::Hang,
    };
    judge(&case.expected, case.unordered, outcome)
}

fn judge(expected: &Expected, unordered: bool, outcome: Outcome) -> Verdict {
    match (expected, outcome) {
        (Expected::Value(want), Outcome::Value(got)) => {
            if json_equal(want, &got, unordered) {
                Verdict::Pass
            } else {
                Verdict::Fail(format!("expected {want}, got {got}"))
            }
        }
        (Expected::Undefined, Outcome::Undefined) => Verdict::Pass,
        (Expected::Error(want), Outcome::Error(Some(got))) if want == &got => Verdict::Pass,
        (Expected::Error(want), Outcome::Error(got)) => {
            Verdict::Fail(format!("expected error {want}, got error {got:?}"))
        }
        (want, got) => Verdict::Fail(format!("expected {want:?}, got {got:?}")),
    }
}

/// JSON equality with numbers compared as numbers (`1` equals `1.0`, as in JavaScript, where
/// both are the same double); no tolerance, as JSONata's own runner compares with deep equality.
fn json_equal(a: &serde_json::Value, b: &serde_json::Value, unordered: bool) -> bool {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y
        }
        (V::Array(x), V::Array(y)) if unordered => {
            x.len() == y.len() && {
                let mut used = vec![false; y.len()];
                x.iter().all(|xi| {
                    (0..y.len()).any(|j| {
                        if !used[j] && json_equal(xi, &y[j], false) {
                            used[j] = true;
                            true
                        } else {
                            false
                        }
                    })
                })
            }
        }
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q, false))
        }
        (V::Object(x), V::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w, false)))
        }
        _ => a == b,
    }
}
