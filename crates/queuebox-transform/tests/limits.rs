//! The limits and results of one evaluation through the pool (TRF-4, TRF-10, TRF-13..15).

use std::time::{Duration, Instant};

use queuebox_transform::{Expression, Failure, Limits, Pool, Variables};
use serde_json::{Value, json};

fn limits(ms: u64, depth: usize) -> Limits {
    Limits {
        timeout: Duration::from_millis(ms),
        max_depth: depth,
    }
}

async fn eval(pool: &Pool, src: &str, input: Value, l: Limits) -> Result<Value, Failure> {
    let e = Expression::compile(src, l).expect("compiles");
    pool.evaluate(&e, input, Variables::outbox_stage("m-1", "orders", 0))
        .await
}

#[tokio::test]
async fn trf_41_a_self_calling_function_stops_on_depth_or_time_and_the_process_survives() {
    let pool = Pool::new(2).unwrap();
    let start = Instant::now();
    let r = eval(
        &pool,
        "( $f := function(){ $f() }; $f() )",
        json!({}),
        limits(100, 100),
    )
    .await;
    assert!(
        start.elapsed() < Duration::from_millis(150),
        "{:?}",
        start.elapsed()
    );
    let failure = r.unwrap_err();
    assert!(
        matches!(
            failure,
            Failure::Depth { levels: 100 } | Failure::Timeout { ms: 100 }
        ),
        "{failure:?}"
    );
    // The pool still evaluates after it.
    assert_eq!(
        eval(&pool, "1 + 1", json!({}), limits(100, 100)).await,
        Ok(json!(2))
    );
}

#[tokio::test]
async fn trf_10_deep_recursion_stops_on_the_depth_limit_without_overflowing_a_stack() {
    let pool = Pool::new(1).unwrap();
    // Non-tail recursion a million levels deep: only the depth limit can stop it in time.
    let src = "( $d := function($n){ $n = 0 ? 0 : 1 + $d($n - 1) }; $d(1000000) )";
    let r = eval(&pool, src, json!({}), limits(5_000, 1_000)).await;
    assert_eq!(r, Err(Failure::Depth { levels: 1_000 }));
    assert_eq!(
        r.unwrap_err().reason(),
        "The expression nested deeper than 1000 levels."
    );
    // A very deep but allowed evaluation fits the big stack.
    let r = eval(
        &pool,
        "( $d := function($n){ $n = 0 ? 0 : 1 + $d($n - 1) }; $d(3000) )",
        json!({}),
        limits(5_000, 20_000),
    )
    .await;
    assert_eq!(r, Ok(json!(3000)));
}

#[tokio::test]
async fn trf_10_a_loop_without_recursion_depth_is_stopped_by_the_time_limit() {
    let pool = Pool::new(1).unwrap();
    let start = Instant::now();
    // A big sort of a range: long-running work without deep nesting.
    let src = "$count($sort([1..900000].($string($)), function($a, $b){ $a < $b }))";
    let r = eval(&pool, src, json!({}), limits(50, 100)).await;
    let took = start.elapsed();
    assert_eq!(r, Err(Failure::Timeout { ms: 50 }));
    assert_eq!(
        r.unwrap_err().reason(),
        "The expression ran longer than 50 ms."
    );
    assert!(took < Duration::from_millis(100), "stopped after {took:?}");
}

#[tokio::test]
async fn trf_10_a_large_range_fails_on_the_sequence_limit() {
    let pool = Pool::new(1).unwrap();
    let r = eval(&pool, "[1..2000000]", json!({}), limits(5_000, 100)).await;
    assert_eq!(r, Err(Failure::Sequence));
    assert_eq!(
        r.unwrap_err().reason(),
        "The expression produced a sequence longer than 1000000 items."
    );
}

#[tokio::test]
async fn trf_10_a_result_over_16_mib_fails_on_the_size_limit() {
    let pool = Pool::new(1).unwrap();
    // 20 strings of 1 MiB each: 20 MiB of JSON.
    let r = eval(
        &pool,
        "( $s := $pad('', 1048576, 'x'); [1..20].$s )",
        json!({}),
        limits(5_000, 100),
    )
    .await;
    assert_eq!(r, Err(Failure::Size), "{r:?}");
    assert_eq!(
        r.unwrap_err().reason(),
        "The result exceeds 16777216 bytes."
    );
}

#[tokio::test]
async fn trf_15_results_that_are_not_json_values_are_failures() {
    let pool = Pool::new(1).unwrap();
    let l = limits(100, 100);
    assert_eq!(
        eval(&pool, "nothing.here", json!({"a": 1}), l).await,
        Err(Failure::NoValue)
    );
    assert_eq!(
        eval(&pool, "function($x){ $x }", json!({}), l).await,
        Err(Failure::Function)
    );
    let engine = eval(&pool, "a + 1", json!({"a": "x"}), l)
        .await
        .unwrap_err();
    assert!(
        engine.reason().starts_with("T2001: "),
        "{}",
        engine.reason()
    );
    // TRF-14: null is a valid result.
    assert_eq!(
        eval(&pool, "a", json!({"a": null}), l).await,
        Ok(Value::Null)
    );
}

#[tokio::test]
async fn trf_13_now_is_one_instant_per_evaluation_and_timestamp_is_it() {
    let pool = Pool::new(1).unwrap();
    let src = "( $a := $now(); $b := $sum([1..50000]); [$a, $now(), $timestamp] )";
    let r = eval(&pool, src, json!({}), limits(1_000, 100))
        .await
        .unwrap();
    assert_eq!(r[0], r[1]);
    assert_eq!(r[0], r[2]);
    let ts = r[2].as_str().unwrap();
    assert_eq!(ts.len(), 24, "{ts}");
    assert!(ts.ends_with('Z'));
}

#[tokio::test]
async fn trf_4_evaluations_run_on_the_pool_threads_and_wait_for_a_free_one() {
    let pool = Pool::new(2).unwrap();
    assert_eq!(pool.threads(), 2);
    // Four slow evaluations on two threads: they all finish, the last ones after waiting.
    let slow = Expression::compile("$count([1..300000].($ * 2))", limits(10_000, 100)).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let pool = pool.clone();
        let slow = slow.clone();
        tasks.push(tokio::spawn(async move {
            pool.evaluate(&slow, json!({}), Variables::none()).await
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), Ok(json!(300000)));
    }
}

#[test]
fn trf_39_a_compile_error_gives_the_engine_code_and_message() {
    let err = queuebox_transform::check("Account.Order[").unwrap_err();
    assert!(err.to_string().starts_with("S0"), "{err}");
    assert!(queuebox_transform::check("a.b").is_ok());
}
