//! Figures from raw samples: `percentile_cont` as PostgreSQL computes it, the insert-to-delivery
//! join of the receiver's records with the outbox rows, and number formatting that never
//! rounds up (docs/benchmarks.md reports truncated values).

use std::collections::HashMap;

use uuid::Uuid;

use crate::receipts::Receipt;

/// PostgreSQL's `percentile_cont(p)`: linear interpolation between the two closest ranks of
/// `sorted` (ascending). `None` for no samples.
pub fn percentile_cont(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let pos = p.clamp(0.0, 1.0) * last as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * frac)
}

/// `x` cut (toward zero) to `decimals` places, printed with exactly that many.
pub fn down(x: f64, decimals: u32) -> String {
    let scale = 10f64.powi(decimals as i32);
    let cut = (x * scale).trunc() / scale;
    format!("{cut:.prec$}", prec = decimals as usize)
}

/// An integer count with thousands separators: `12,345`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Insert-to-delivery latency of one phase, from the first receipt of each row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Latency {
    /// Rows received at least once.
    pub delivered: usize,
    /// Rows in the outbox never received.
    pub missing: usize,
    /// Receipts beyond the first of a row (at-least-once redeliveries).
    pub duplicates: usize,
    /// Receipts whose id is not an outbox row of the phase.
    pub unknown: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The last first-receipt, µs since the epoch (0 when nothing arrived).
    pub last_receipt_us: i64,
    pub first_receipt_us: i64,
}

/// Joins `created_us` (row id → `created_at` in µs) with the receipts.
pub fn latency(created_us: &HashMap<Uuid, i64>, receipts: &[Receipt]) -> Latency {
    let mut first: HashMap<Uuid, i64> = HashMap::with_capacity(created_us.len());
    let mut out = Latency::default();
    for r in receipts {
        if !created_us.contains_key(&r.id) {
            out.unknown += 1;
            continue;
        }
        match first.get_mut(&r.id) {
            Some(at) => {
                out.duplicates += 1;
                *at = (*at).min(r.received_us);
            }
            None => {
                first.insert(r.id, r.received_us);
            }
        }
    }
    let mut samples: Vec<f64> = first
        .iter()
        .map(|(id, at)| (at - created_us[id]) as f64 / 1000.0)
        .collect();
    samples.sort_by(f64::total_cmp);
    out.delivered = first.len();
    out.missing = created_us.len() - first.len();
    out.p50_ms = percentile_cont(&samples, 0.5).unwrap_or(0.0);
    out.p99_ms = percentile_cont(&samples, 0.99).unwrap_or(0.0);
    out.max_ms = samples.last().copied().unwrap_or(0.0);
    out.last_receipt_us = first.values().copied().max().unwrap_or(0);
    out.first_receipt_us = first.values().copied().min().unwrap_or(0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_cont_matches_postgres() {
        // SELECT percentile_cont(p) WITHIN GROUP (ORDER BY x) FROM unnest('{1,2,3,4}') x
        let xs = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile_cont(&xs, 0.5), Some(2.5));
        assert_eq!(percentile_cont(&xs, 0.0), Some(1.0));
        assert_eq!(percentile_cont(&xs, 1.0), Some(4.0));
        assert!((percentile_cont(&xs, 0.99).unwrap() - 3.97).abs() < 1e-9);
        assert_eq!(percentile_cont(&[7.0], 0.99), Some(7.0));
        assert_eq!(percentile_cont(&[], 0.5), None);
    }

    #[test]
    fn down_never_rounds_up() {
        assert_eq!(down(9_999.99, 0), "9999");
        assert_eq!(down(0.4999, 2), "0.49");
        assert_eq!(down(249.96, 1), "249.9");
        assert_eq!(down(3.0, 1), "3.0");
    }

    #[test]
    fn grouped_puts_separators_every_three_digits() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    #[test]
    fn latency_uses_first_receipts_and_counts_the_rest() {
        let a = Uuid::from_u128(1);
        let b = Uuid::from_u128(2);
        let c = Uuid::from_u128(3);
        let created = HashMap::from([(a, 1_000), (b, 2_000), (c, 3_000)]);
        let r = |id, received_us| Receipt { id, received_us };
        let receipts = [
            r(a, 11_000),
            r(b, 4_000),
            r(a, 9_000),
            r(Uuid::from_u128(9), 1),
        ];
        let l = latency(&created, &receipts);
        assert_eq!(
            (l.delivered, l.missing, l.duplicates, l.unknown),
            (2, 1, 1, 1)
        );
        assert_eq!(l.p50_ms, 5.0); // samples 2 ms and 8 ms
        assert_eq!(l.max_ms, 8.0);
        assert_eq!(l.last_receipt_us, 9_000);
        assert_eq!(l.first_receipt_us, 4_000);
    }
}
