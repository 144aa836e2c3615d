//! One adapter per candidate engine: compile, bind, evaluate with the case's limits, and give the
//! result as JSON, *undefined* or an error code.

use serde_json::{Map, Value};

use crate::Outcome;

pub trait Engine: Sync {
    fn name(&self) -> &'static str;
    fn evaluate(
        &self,
        expr: &str,
        input: Option<&Value>,
        bindings: &Map<String, Value>,
        timelimit_ms: Option<u64>,
        depth: Option<usize>,
    ) -> Outcome;
}

pub fn available() -> Vec<&'static dyn Engine> {
    #[allow(unused_mut)]
    let mut all: Vec<&'static dyn Engine> = vec![&JlensCore];
    #[cfg(feature = "candidates")]
    {
        all.push(&candidates::JsonataCore);
        all.push(&candidates::JsonataRs);
        all.push(&candidates::Seuil);
    }
    all
}

pub fn by_name(name: &str) -> Option<&'static dyn Engine> {
    available().into_iter().find(|e| e.name() == name)
}

use queuebox_transform::engine as jlens_core;

/// `jlens-core`, the engine QueueBox uses (docs/transforms.md), as queuebox-transform pins it.
pub struct JlensCore;

impl Engine for JlensCore {
    fn name(&self) -> &'static str {
        "jlens-core"
    }

    fn evaluate(
        &self,
        expr: &str,
        input: Option<&Value>,
        bindings: &Map<String, Value>,
        timelimit_ms: Option<u64>,
        depth: Option<usize>,
    ) -> Outcome {
        let compiled = match jlens_core::Expression::compile(expr) {
            Ok(c) => c,
            Err(e) => return Outcome::Error(Some(e.code().to_owned())),
        };
        let bound: jlens_core::Bindings = bindings
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut options = jlens_core::Options::new();
        if let Some(ms) = timelimit_ms {
            options = options.timeout(std::time::Duration::from_millis(ms));
        }
        if let Some(depth) = depth {
            options = options.max_depth(depth);
        }
        match compiled.evaluate_with(input, &bound, &options) {
            Ok(Some(v)) => Outcome::Value(v),
            Ok(None) => Outcome::Undefined,
            Err(e) => Outcome::Error(Some(e.code().to_owned())),
        }
    }
}

#[cfg(feature = "candidates")]
mod candidates {
    use super::*;

    /// `jsonata-core`, the crate `transforms.md` TRF-1 names.
    pub struct JsonataCore;

    impl Engine for JsonataCore {
        fn name(&self) -> &'static str {
            "jsonata-core"
        }

        fn evaluate(
            &self,
            expr: &str,
            input: Option<&Value>,
            bindings: &Map<String, Value>,
            timelimit_ms: Option<u64>,
            depth: Option<usize>,
        ) -> Outcome {
            use jsonata_core::evaluator::{Context, Evaluator, EvaluatorOptions};
            use jsonata_core::value::JValue;
            let ast = match jsonata_core::parser::parse(expr) {
                Ok(a) => a,
                Err(e) => return Outcome::Error(code_prefix(&e.to_string())),
            };
            let mut context = Context::new();
            for (k, v) in bindings {
                context.bind(k.clone(), JValue::from(v.clone()));
            }
            let options = EvaluatorOptions {
                timeout_ms: timelimit_ms,
                max_stack_depth: depth,
                ..EvaluatorOptions::default()
            };
            let data = input.map_or(JValue::Undefined, |v| JValue::from(v.clone()));
            let mut evaluator = Evaluator::with_options(context, options);
            match evaluator.evaluate(&ast, &data) {
                Ok(JValue::Undefined) => Outcome::Undefined,
                Ok(v) => match v
                    .to_json_string()
                    .ok()
                    .and_then(|s| serde_json::from_str(&s).ok())
                {
                    Some(json) => Outcome::Value(json),
                    None => Outcome::Error(None),
                },
                Err(e) => Outcome::Error(e.code().map(str::to_owned)),
            }
        }
    }

    /// `jsonata-rs`, Stedi's port.
    pub struct JsonataRs;

    impl Engine for JsonataRs {
        fn name(&self) -> &'static str {
            "jsonata-rs"
        }

        fn evaluate(
            &self,
            expr: &str,
            input: Option<&Value>,
            bindings: &Map<String, Value>,
            timelimit_ms: Option<u64>,
            depth: Option<usize>,
        ) -> Outcome {
            let arena = bumpalo::Bump::new();
            let compiled = match jsonata_rs::JsonAta::new(expr, &arena) {
                Ok(c) => c,
                Err(e) => return Outcome::Error(Some(e.code().to_owned())),
            };
            let text = input.map(|v| v.to_string());
            let result = if timelimit_ms.is_some() || depth.is_some() {
                // jsonata-rs binds variables only through `evaluate`, which has no limits; the
                // limited cases of the suite bind none.
                compiled.evaluate_timeboxed(
                    text.as_deref(),
                    depth,
                    timelimit_ms.map(|t| t as usize),
                )
            } else {
                let refs: std::collections::HashMap<&str, &Value> =
                    bindings.iter().map(|(k, v)| (k.as_str(), v)).collect();
                compiled.evaluate(text.as_deref(), Some(&refs))
            };
            match result {
                Ok(v) if v.is_undefined() => Outcome::Undefined,
                Ok(v) => match serde_json::from_str(&v.serialize(false)) {
                    Ok(json) => Outcome::Value(json),
                    Err(_) => Outcome::Error(None),
                },
                Err(e) => Outcome::Error(Some(e.code().to_owned())),
            }
        }
    }

    /// `seuil`; its API returns `serde_json::Value` and so gives *undefined* as `null`.
    pub struct Seuil;

    impl Engine for Seuil {
        fn name(&self) -> &'static str {
            "seuil"
        }

        fn evaluate(
            &self,
            expr: &str,
            input: Option<&Value>,
            bindings: &Map<String, Value>,
            timelimit_ms: Option<u64>,
            depth: Option<usize>,
        ) -> Outcome {
            let compiled = match seuil::Seuil::compile(expr) {
                Ok(c) => c,
                Err(e) => return Outcome::Error(Some(e.code().to_owned())),
            };
            let mut config = seuil::EvalConfig::default();
            if let Some(ms) = timelimit_ms {
                config.time_limit_ms = Some(ms);
            }
            if let Some(depth) = depth {
                config.max_depth = Some(depth);
            }
            let null = Value::Null;
            match compiled.evaluate_with_config_and_bindings(
                input.unwrap_or(&null),
                &config,
                Some(bindings),
            ) {
                Ok(v) => Outcome::Value(v),
                Err(e) => Outcome::Error(Some(e.code().to_owned())),
            }
        }
    }

    /// The `X0000` code at the start of an error text, if any.
    fn code_prefix(text: &str) -> Option<String> {
        let b = text.as_bytes();
        (b.len() >= 5 && b[0].is_ascii_uppercase() && b[1..5].iter().all(u8::is_ascii_digit))
            .then(|| text[..5].to_owned())
    }
}
