//! The Prometheus text exposition format 0.0.4: `# HELP` and `# TYPE` before each family's
//! samples, escaped label values and HELP text, and floats spelled the way Prometheus parses them.

use std::fmt::Write as _;

use super::catalogue::Presence;
use super::family::{Collect, Sample, Value};
use super::summary::QUANTILES;

/// The content type of `GET /metrics` (MET-1).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the families in the given order. A family with no series yet is left out whole
/// (first use, MET-7); at-start families always have their series, so they always render.
pub(crate) fn render(families: &[&dyn Collect]) -> String {
    let mut out = String::with_capacity(8 * 1024);
    let mut samples = Vec::new();
    for family in families {
        let spec = family.spec();
        samples.clear();
        family.collect(&mut samples);
        if samples.is_empty() && spec.presence == Presence::FirstUse {
            continue;
        }
        // `write!` to a String cannot fail; the results are ignored for that reason alone.
        let _ = writeln!(out, "# HELP {} {}", spec.name, escape_help(spec.help));
        let _ = writeln!(out, "# TYPE {} {}", spec.name, spec.metric_type);
        for sample in &samples {
            write_sample(&mut out, spec.name, sample);
        }
    }
    out
}

fn write_sample(out: &mut String, name: &str, sample: &Sample) {
    match sample.value {
        Value::Counter(n) => {
            let _ = writeln!(out, "{name}{} {n}", label_block(&sample.labels, None));
        }
        Value::Gauge(v) => {
            let _ = writeln!(
                out,
                "{name}{} {}",
                label_block(&sample.labels, None),
                float(v)
            );
        }
        Value::Summary(snapshot) => {
            for (q, v) in QUANTILES.iter().zip(snapshot.quantiles) {
                let block = label_block(&sample.labels, Some(*q));
                let _ = writeln!(out, "{name}{block} {}", float(v));
            }
            let block = label_block(&sample.labels, None);
            let _ = writeln!(out, "{name}_sum{block} {}", float(snapshot.sum));
            let _ = writeln!(out, "{name}_count{block} {}", snapshot.count);
        }
    }
}

/// `{a="x",b="y"}`, or nothing when there are no labels; `quantile` goes last, as client
/// libraries write it.
fn label_block(labels: &[(&'static str, String)], quantile: Option<f64>) -> String {
    if labels.is_empty() && quantile.is_none() {
        return String::new();
    }
    let mut block = String::from("{");
    let mut pairs: Vec<String> = labels
        .iter()
        .map(|(name, value)| format!("{name}=\"{}\"", escape_label_value(value)))
        .collect();
    if let Some(q) = quantile {
        pairs.push(format!("quantile=\"{}\"", float(q)));
    }
    block.push_str(&pairs.join(","));
    block.push('}');
    block
}

/// Label values escape backslash, double quote and line feed (text format 0.0.4).
pub(crate) fn escape_label_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            other => escaped.push(other),
        }
    }
    escaped
}

/// HELP text escapes only backslash and line feed; a quote is literal there.
pub(crate) fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Prometheus parses floats with Go's `ParseFloat`: `NaN`, `+Inf`, `-Inf`, plain decimals and
/// exponent form. Rust's `Display` never uses an exponent, which would spell 1e300 with 300
/// digits, so extreme magnitudes switch to `{:e}`.
pub(crate) fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else if v != 0.0 && (v.abs() >= 1e15 || v.abs() < 1e-5) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}
