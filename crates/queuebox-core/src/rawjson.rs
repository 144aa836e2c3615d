//! Exact number text for extraction (INB-37). serde_json (without `arbitrary_precision`, which
//! would change number handling for the whole binary) turns an integer beyond 64 bits or any
//! number with a fraction or exponent into an `f64`, losing digits. So the number a path
//! reaches is re-read from the body text: [`locate`] walks the raw JSON along the same definite
//! steps, and [`normalize_number`] rewrites the literal with decimal arithmetic on its digits.

use crate::jsonpath::JsonPathStep;

/// The literal would need more characters than the caller's limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong;

/// The raw text of the value that `steps` reach in `json`, which serde_json already accepted.
/// A repeated object member resolves to its last occurrence, as in serde_json's map.
pub fn locate<'a>(json: &'a str, steps: &[JsonPathStep]) -> Option<&'a str> {
    let mut scanner = Scanner {
        bytes: json.as_bytes(),
        pos: 0,
    };
    scanner.whitespace();
    for step in steps {
        scanner.pos = match step {
            JsonPathStep::Key(key) => scanner.member(json, key)?,
            JsonPathStep::Index(index) => scanner.element(*index)?,
        };
    }
    let start = scanner.pos;
    scanner.skip_value()?;
    json.get(start..scanner.pos)
}

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.whitespace();
        (self.peek()? == byte).then(|| self.pos += 1)
    }

    /// At an object: the start of the last member named `key`.
    fn member(&mut self, json: &str, key: &str) -> Option<usize> {
        self.expect(b'{')?;
        self.whitespace();
        if self.peek()? == b'}' {
            return None;
        }
        let mut found = None;
        loop {
            self.whitespace();
            let name_start = self.pos;
            self.skip_string()?;
            let name = json.get(name_start..self.pos)?;
            self.expect(b':')?;
            self.whitespace();
            let value_start = self.pos;
            self.skip_value()?;
            if name_is(name, key) {
                found = Some(value_start);
            }
            self.whitespace();
            match self.peek()? {
                b',' => self.pos += 1,
                _ => return found,
            }
        }
    }

    /// At an array: the start of element `index`.
    fn element(&mut self, index: usize) -> Option<usize> {
        self.expect(b'[')?;
        self.whitespace();
        if self.peek()? == b']' {
            return None;
        }
        for _ in 0..index {
            self.whitespace();
            self.skip_value()?;
            self.expect(b',')?;
        }
        self.whitespace();
        Some(self.pos)
    }

    /// At `"`: past the closing quote.
    fn skip_string(&mut self) -> Option<()> {
        (self.peek()? == b'"').then_some(())?;
        self.pos += 1;
        loop {
            match self.peek()? {
                b'"' => {
                    self.pos += 1;
                    return Some(());
                }
                b'\\' => self.pos += 2,
                _ => self.pos += 1,
            }
        }
    }

    /// Past one value. Containers are skipped by counting brackets, not by recursion: the text
    /// is known to be valid JSON, and a deep one must not grow the stack.
    fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.skip_string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.skip_string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => depth -= 1,
                        _ => {}
                    }
                    self.pos += 1;
                    if depth == 0 {
                        return Some(());
                    }
                }
            }
            _ => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
                ) {
                    self.pos += 1;
                }
                Some(())
            }
        }
    }
}

/// Whether a raw member name (quotes included) decodes to `key`.
fn name_is(raw: &str, key: &str) -> bool {
    if raw.contains('\\') {
        serde_json::from_str::<String>(raw).is_ok_and(|name| name == key)
    } else {
        raw.get(1..raw.len() - 1) == Some(key)
    }
}

/// INB-37: the decimal text of a JSON number literal. A whole number has no fraction and no
/// exponent (`2.0` → `2`, `1e3` → `1000`, `-0` → `0`), digits are kept exactly, and a fraction
/// is written out in plain decimal without trailing zeros (`1.50` → `1.5`, `15e-3` → `0.015`).
/// `TooLong` when the text would exceed `max_len` characters.
pub fn normalize_number(literal: &str, max_len: usize) -> Result<String, TooLong> {
    let (negative, unsigned) = match literal.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, literal),
    };
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (unsigned, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = [whole, fraction].concat();
    let digits = all.trim_start_matches('0');
    let significant = digits.trim_end_matches('0');
    if significant.is_empty() {
        return Ok("0".to_owned());
    }
    // value = significant × 10^scale
    let exponent: i64 = match exponent {
        // An exponent beyond i64 makes a number far beyond any length limit.
        Some(text) => text.parse().map_err(|_| TooLong)?,
        None => 0,
    };
    let trailing_zeros = (digits.len() - significant.len()) as i64;
    let scale = exponent
        .checked_sub(fraction.len() as i64)
        .and_then(|s| s.checked_add(trailing_zeros))
        .ok_or(TooLong)?;
    let sign = if negative { "-" } else { "" };
    let n = significant.len() as i64;
    let length = sign.len() as i64
        + if scale >= 0 {
            n.saturating_add(scale)
        } else if n > -scale {
            n + 1
        } else {
            2 + -scale
        };
    if length > max_len as i64 {
        return Err(TooLong);
    }
    Ok(if scale >= 0 {
        format!("{sign}{significant}{}", "0".repeat(scale as usize))
    } else if n > -scale {
        let (int, frac) = significant.split_at((n + scale) as usize);
        format!("{sign}{int}.{frac}")
    } else {
        format!("{sign}0.{}{significant}", "0".repeat((-scale - n) as usize))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonpath::JsonPath;

    fn at<'a>(json: &'a str, path: &str) -> Option<&'a str> {
        locate(json, JsonPath::parse(path).unwrap().steps())
    }

    #[test]
    fn locate_follows_definite_steps() {
        let json = r#" { "a" : [ 1 , {"b\"c": 12345678901234567890123}, "x,]}" ], "n": -1.5e+3 } "#;
        assert_eq!(at(json, "$.a[0]"), Some("1"));
        assert_eq!(at(json, "$.a[1]['b\"c']"), Some("12345678901234567890123"));
        assert_eq!(at(json, "$.a[2]"), Some(r#""x,]}""#));
        assert_eq!(at(json, "$.n"), Some("-1.5e+3"));
        assert_eq!(at(json, "$.a[3]"), None);
        assert_eq!(at(json, "$.missing"), None);
        assert_eq!(at(json, "$.a.b"), None);
        assert_eq!(at(r#"{"k":1,"k":2}"#, "$.k"), Some("2"));
        assert_eq!(at(r#"{"\u006b":7}"#, "$.k"), Some("7"));
        assert_eq!(at("[]", "$[0]"), None);
        assert_eq!(at("{}", "$.a"), None);
    }

    #[test]
    fn inb_37_examples() {
        let n = |s| normalize_number(s, 255);
        assert_eq!(n("2.0"), Ok("2".into()));
        assert_eq!(n("1e3"), Ok("1000".into()));
        assert_eq!(n("12345678901234567890"), Ok("12345678901234567890".into()));
        assert_eq!(n("-0"), Ok("0".into()));
        assert_eq!(n("0.0e10"), Ok("0".into()));
        assert_eq!(n("1.50"), Ok("1.5".into()));
        assert_eq!(n("15e-3"), Ok("0.015".into()));
        assert_eq!(n("-1.5E+3"), Ok("-1500".into()));
        assert_eq!(n("100"), Ok("100".into()));
        assert_eq!(n("1200e-2"), Ok("12".into()));
        assert_eq!(n("1e255"), Err(TooLong));
        assert_eq!(n("1e254"), Ok(format!("1{}", "0".repeat(254))));
        assert_eq!(n("1e-300"), Err(TooLong));
        assert_eq!(n("1e99999999999999999999"), Err(TooLong));
        assert_eq!(n("0e99999999999999999999"), Ok("0".into()));
    }

    /// Property-style: every spelling of an integer normalizes to its plain digits, and every
    /// integer serde_json reads exactly agrees with the normalized text.
    #[test]
    fn inb_37_every_spelling_of_a_whole_number_gives_its_digits() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for round in 0..2000 {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let value = (seed >> (round % 60)) as i128 * if round % 3 == 0 { -1 } else { 1 };
            if value == 0 {
                continue;
            }
            let digits = value.to_string();
            let plain = digits.trim_start_matches('-');
            let sign = if value < 0 { "-" } else { "" };
            let spellings = [
                digits.clone(),
                format!("{digits}.0"),
                format!("{digits}.000e0"),
                format!("{digits}0e-1"),
                format!("{sign}{plain}00E-2"),
                format!("{sign}0.{plain}e{}", plain.len()),
                format!("{sign}{}.{}e{}", &plain[..1], &plain[1..], plain.len() - 1),
            ];
            let expected = digits.clone();
            for spelling in spellings {
                assert_eq!(
                    normalize_number(&spelling, 255),
                    Ok(expected.clone()),
                    "{spelling}"
                );
                // (`5.e0` is no JSON, but the normalization must not mind.)
                let parsed = serde_json::from_str::<serde_json::Value>(&spelling);
                if let Some(exact) = parsed.ok().and_then(|p| p.as_i64()) {
                    assert_eq!(exact.to_string(), expected, "{spelling}");
                }
            }
            // Digits past 64 bits are kept too.
            let big = format!("{plain}{plain}{plain}");
            let big = big.trim_start_matches('0');
            if !big.is_empty() {
                assert_eq!(normalize_number(big, 255).as_deref(), Ok(big));
            }
        }
    }
}
