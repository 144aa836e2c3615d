//! The contract SQL (clients/contract/postgresql/*.sql), embedded so this client cannot drift,
//! rendered once per worker: `{name}` placeholders become mapped identifiers, `:name`
//! parameters become `$n` in the canonical order of clients/contract/README.md.
//!
//! The files are embedded from this crate's `contract/` folder, a copy of `clients/contract/`:
//! `cargo package` cannot include files outside the crate, and a packaged crate must build on
//! its own. `tests/copies.rs` fails when a copy differs from its original.

use crate::options::{Dialect, OptionsError, Schema};

const PG_CLAIM: &str = include_str!("../contract/postgresql/claim.sql");
const PG_RENEW: &str = include_str!("../contract/postgresql/renew.sql");
const PG_COMPLETE: &str = include_str!("../contract/postgresql/complete.sql");
const PG_RETRY: &str = include_str!("../contract/postgresql/retry.sql");
const PG_DEAD: &str = include_str!("../contract/postgresql/dead.sql");

/// The five statements of PULL-11, ready for the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statements {
    pub claim: String,
    pub renew: String,
    pub complete: String,
    pub retry: String,
    pub dead: String,
}

impl Statements {
    /// Renders the statements of `dialect` with `schema` (already validated).
    pub fn render(dialect: Dialect, schema: &Schema) -> Result<Self, OptionsError> {
        if dialect != Dialect::Postgresql {
            // The other dialects' contract files are not written yet; refuse rather than guess.
            return Err(OptionsError(format!(
                "The dialect {dialect:?} is not supported by this version of queuebox-inbox."
            )));
        }
        let r = |text: &str, order: &[&str]| render_pg(text, schema, order);
        Ok(Self {
            claim: r(
                PG_CLAIM,
                &["source", "batch", "lease_ms", "cand_limit", "token"],
            ),
            renew: r(PG_RENEW, &["lease_ms", "id", "token"]),
            complete: r(PG_COMPLETE, &["id", "token"]),
            retry: r(PG_RETRY, &["delay_ms", "error", "id", "token"]),
            dead: r(PG_DEAD, &["error", "id", "token"]),
        })
    }
}

/// Renders a contract text: drops `--` comment lines, substitutes identifiers, then parameters.
pub fn render_pg(text: &str, schema: &Schema, order: &[&str]) -> String {
    let body: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect();
    let named = substitute_identifiers(&body.join("\n"), schema, &[]);
    map_parameters(&named, order)
}

/// Replaces every `{name}` placeholder (`\{[a-z_]+\}`) with its mapped identifier; `extra` adds
/// names such as the fixture's `{schema}`. An unknown placeholder is a defect of the file.
pub fn substitute_identifiers(text: &str, schema: &Schema, extra: &[(&str, &str)]) -> String {
    let pairs = schema.pairs();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let len = after
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || *b == b'_')
            .count();
        if len > 0 && after.as_bytes().get(len) == Some(&b'}') {
            let key = &after[..len];
            let value = pairs
                .iter()
                .copied()
                .chain(extra.iter().copied())
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("unknown placeholder {{{key}}} in contract SQL"));
            out.push_str(value);
            rest = &after[len + 1..];
        } else {
            out.push('{');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `:name` (not next to another `:`, so `::text` stays) becomes `$n`, n from `order`.
fn map_parameters(text: &str, order: &[&str]) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut copied) = (0, 0);
    while i < bytes.len() {
        let c = bytes[i];
        let prev_colon = i > 0 && bytes[i - 1] == b':';
        let next = bytes.get(i + 1).copied().unwrap_or(0);
        if c == b':' && !prev_colon && (next.is_ascii_lowercase() || next == b'_') {
            let len = bytes[i + 1..]
                .iter()
                .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || **b == b'_')
                .count();
            let name = &text[i + 1..i + 1 + len];
            let n = order
                .iter()
                .position(|o| *o == name)
                .unwrap_or_else(|| panic!("parameter :{name} missing from the canonical order"));
            out.push_str(&text[copied..i]);
            out.push_str(&format!("${}", n + 1));
            i += 1 + len;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_are_not_parameters() {
        assert_eq!(map_parameters("a::text = :id", &["id"]), "a::text = $1");
    }

    #[test]
    fn braces_that_are_not_placeholders_stay() {
        let s = substitute_identifiers("'{}' \"{inbox}\"", &Schema::default(), &[]);
        assert_eq!(s, "'{}' \"inbox\"");
    }
}
