//! Property tests: arbitrary expressions and inputs never panic the process and never hang it
//! (TRF-4, TRF-10). Bounded case counts keep the suite fast on two cores.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use queuebox_transform::{Expression, Limits, Pool, Variables};
use serde_json::Value;

const LIMITS: Limits = Limits {
    timeout: Duration::from_millis(50),
    max_depth: 50,
};

/// Pieces of JSONata that combine into valid, invalid and runaway expressions alike.
fn token() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "a",
        "b.c",
        "$",
        "$$",
        "*",
        "**",
        "%",
        "[",
        "]",
        "{",
        "}",
        "(",
        ")",
        ",",
        ";",
        ":",
        "?",
        ".",
        "..",
        "1",
        "0",
        "-1",
        "1e308",
        "\"s\"",
        "'t'",
        "+",
        "-",
        "*",
        "/",
        "&",
        "=",
        "!=",
        "<",
        ">",
        "and",
        "or",
        "in",
        "~>",
        "|",
        "$sum(",
        "$count(",
        "$map(",
        "$filter(",
        "$string(",
        "$split(",
        "$merge(",
        "$lookup(",
        "$sort(",
        "$reduce(",
        "$keys(",
        "$each(",
        "$spread(",
        "$zip(",
        "$pad(",
        "$repeat(",
        "$now()",
        "$eval(",
        "function($x){",
        "$x",
        "$f",
        "$f :=",
        "$f()",
        "[1..10000]",
        "[1..2000000]",
        "^(a)",
        "#$i",
        "@$o",
        "/x/",
        "$attempt",
        "$topic",
    ])
}

/// Token soup (mostly compile errors) and well-formed expressions built from valid parts (which
/// compile and run, some of them away).
fn expression() -> impl Strategy<Value = String> {
    let operand = prop::sample::select(vec![
        "a",
        "b.c",
        "$",
        "*",
        "**",
        "1",
        "-2.5",
        "\"s\"",
        "[1, 2, 3]",
        "{\"k\": a}",
        "[1..5000]",
        "$attempt",
        "$topic",
        "null",
        "true",
    ]);
    let unary = prop::sample::select(vec![
        "$sum",
        "$count",
        "$string",
        "$keys",
        "$reverse",
        "$sort",
        "$distinct",
        "$exists",
        "$boolean",
        "$not",
        "$type",
        "$length",
        "$uppercase",
        "$number",
        "$abs",
        "$spread",
    ]);
    let binary = prop::sample::select(vec![
        "+", "-", "*", "/", "%", "&", "=", "<", "and", "or", "in",
    ]);
    let leaf = operand.prop_map(str::to_owned);
    let structured = leaf.prop_recursive(4, 32, 3, move |inner| {
        let unary = unary.clone();
        let binary = binary.clone();
        prop_oneof![
            (unary, inner.clone()).prop_map(|(f, x)| format!("{f}({x})")),
            (inner.clone(), binary, inner.clone()).prop_map(|(x, op, y)| format!("({x} {op} {y})")),
            (inner.clone(), inner.clone())
                .prop_map(|(x, y)| format!("$map({x}, function($v){{ {y} }})")),
            (inner.clone(), inner.clone()).prop_map(|(x, y)| format!("{x}[{y}]")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(c, x, y)| format!("({c} ? {x} : {y})")),
            inner.clone().prop_map(|x| format!(
                "( $f := function($n){{ $n > 0 ? $f($n - 1) : {x} }}; $f(100000) )"
            )),
        ]
    });
    prop_oneof![
        prop::collection::vec(token(), 1..16).prop_map(|parts| parts.join(" ")),
        structured,
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-c]{0,3}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-c]", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Compiling anything gives an expression or a compile error, never a panic.
    #[test]
    fn compiling_arbitrary_text_never_panics(text in "\\PC{0,40}") {
        let _ = Expression::compile(&text, LIMITS);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Evaluating any expression that compiles, on any input, returns a value or a failure
    /// within its time limit plus a margin; the pool survives every case.
    #[test]
    fn evaluating_arbitrary_expressions_never_panics_or_hangs(source in expression(), input in json()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let pool = shared_pool();
        if let Ok(expression) = Expression::compile(&source, LIMITS) {
            let started = Instant::now();
            let result = runtime.block_on(pool.evaluate(
                &expression,
                input,
                Variables::outbox_stage("m", "t", 1),
            ));
            // The caller is answered by the deadline backstop at the latest (TRF-10).
            prop_assert!(started.elapsed() < Duration::from_millis(1_000), "{source}: {:?}", started.elapsed());
            if let Err(failure) = result {
                prop_assert!(!failure.reason().is_empty());
            }
        }
        // The pool still evaluates after any case.
        let check = Expression::compile("1 + 1", LIMITS).unwrap();
        let after = runtime.block_on(pool.evaluate(&check, Value::Null, Variables::none()));
        prop_assert_eq!(after, Ok(Value::from(2)));
    }
}

/// One pool for every case: a runaway left behind by the backstop finishes on its thread while
/// later cases wait for a free one, as in production.
fn shared_pool() -> &'static Pool {
    static POOL: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| Pool::new(2).unwrap())
}
