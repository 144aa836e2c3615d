//! The contract SQL (clients/contract/<dialect>/*.sql), embedded so this client cannot drift,
//! rendered once per worker: `{name}` placeholders become mapped identifiers, and `:name`
//! parameters take the dialect's style (clients/contract/README.md): `$n` in the canonical order
//! on PostgreSQL, `?` per occurrence on MySQL/MariaDB, `:name` kept on SQLite.
//!
//! The files are embedded from this crate's `contract/` folder, a copy of `clients/contract/`:
//! `cargo package` cannot include files outside the crate, and a packaged crate must build on
//! its own. `tests/copies.rs` fails when a copy differs from its original.

use crate::db::SqlValue;
use crate::options::{Dialect, OptionsError, Schema};

macro_rules! contract {
    ($dialect:literal, $name:literal) => {
        include_str!(concat!("../contract/", $dialect, "/", $name, ".sql"))
    };
}

/// The canonical parameter order of each statement (clients/contract/README.md). Every claim
/// file of a dialect takes the claim's five values; a step binds those it names.
const CLAIM: &[&str] = &["source", "batch", "lease_ms", "cand_limit", "token"];
const RENEW: &[&str] = &["lease_ms", "id", "token"];
const COMPLETE: &[&str] = &["id", "token"];
const RETRY: &[&str] = &["delay_ms", "error", "id", "token"];
const DEAD: &[&str] = &["error", "id", "token"];
/// The batch handler's Complete: `:ids` first, like Complete's `:id`.
const COMPLETE_BATCH: &[&str] = &["ids", "token"];

/// One driver parameter slot of a rendered statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// The value at this index of the canonical order.
    Value(usize),
    /// MySQL's `:ids`: one `?` per claimed id (pull.md §5.3).
    Ids,
}

/// A rendered statement: its text for the driver and how canonical values map to its slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    text: String,
    order: &'static [&'static str],
    slots: Vec<Slot>,
}

impl Statement {
    /// The text for the driver. On MySQL a statement with `:ids` still holds that marker; see
    /// [`Statement::bind_ids`].
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The parameter names in driver order (`ids` where MySQL expands the id list).
    pub fn slot_names(&self) -> Vec<&'static str> {
        self.slots
            .iter()
            .map(|s| match s {
                Slot::Value(i) => self.order[*i],
                Slot::Ids => "ids",
            })
            .collect()
    }

    /// The driver's parameter values, from the values in canonical order.
    pub fn bind(&self, canonical: &[SqlValue]) -> Vec<SqlValue> {
        self.bind_ids(canonical, &[]).1
    }

    /// The text with `:ids` expanded to one `?` per id, and the values in driver order.
    pub fn bind_ids(&self, canonical: &[SqlValue], ids: &[SqlValue]) -> (String, Vec<SqlValue>) {
        let mut values = Vec::with_capacity(self.slots.len() + ids.len());
        for slot in &self.slots {
            match slot {
                Slot::Value(i) => values.push(canonical[*i].clone()),
                Slot::Ids => values.extend(ids.iter().cloned()),
            }
        }
        let text = if self.slots.contains(&Slot::Ids) {
            self.text.replace(":ids", &vec!["?"; ids.len()].join(", "))
        } else {
            self.text.clone()
        };
        (text, values)
    }
}

impl std::ops::Deref for Statement {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

/// The MySQL/MariaDB claim sequence around its select (pull.md §5.3, steps 1, 4, 5 and 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MysqlClaim {
    pub lock: Statement,
    pub update: Statement,
    pub fetch: Statement,
    pub unlock: Statement,
}

/// The five statements of PULL-11, plus the batch handler's Complete, ready for the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statements {
    /// PostgreSQL and SQLite: the claim statement. MySQL/MariaDB: the select of step 3, with
    /// the other steps in [`Statements::mysql_claim`].
    pub claim: Statement,
    /// MySQL/MariaDB only: the lock, update, fetch and unlock steps of the claim.
    pub mysql_claim: Option<MysqlClaim>,
    pub renew: Statement,
    pub complete: Statement,
    pub retry: Statement,
    pub dead: Statement,
    /// The batch handler's Complete of every row of a batch in one statement, fenced per row
    /// (`complete-batch.sql`). `:ids` binds as one text on PostgreSQL (joined by `,`) and
    /// SQLite (a JSON array), and expands to one `?` per id on MySQL/MariaDB.
    pub complete_batch: Statement,
}

impl Statements {
    /// Renders the statements of `dialect` with `schema` (already validated).
    pub fn render(dialect: Dialect, schema: &Schema) -> Result<Self, OptionsError> {
        let r = |text: &str, order: &'static [&'static str]| render(dialect, text, schema, order);
        match dialect {
            Dialect::Postgresql => Ok(Self {
                claim: r(contract!("postgresql", "claim"), CLAIM),
                mysql_claim: None,
                renew: r(contract!("postgresql", "renew"), RENEW),
                complete: r(contract!("postgresql", "complete"), COMPLETE),
                retry: r(contract!("postgresql", "retry"), RETRY),
                dead: r(contract!("postgresql", "dead"), DEAD),
                complete_batch: r(contract!("postgresql", "complete-batch"), COMPLETE_BATCH),
            }),
            Dialect::Sqlite => Ok(Self {
                claim: r(contract!("sqlite", "claim"), CLAIM),
                mysql_claim: None,
                renew: r(contract!("sqlite", "renew"), RENEW),
                complete: r(contract!("sqlite", "complete"), COMPLETE),
                retry: r(contract!("sqlite", "retry"), RETRY),
                dead: r(contract!("sqlite", "dead"), DEAD),
                complete_batch: r(contract!("sqlite", "complete-batch"), COMPLETE_BATCH),
            }),
            Dialect::Mysql => Ok(Self {
                claim: r(contract!("mysql", "claim-select"), CLAIM),
                mysql_claim: Some(MysqlClaim {
                    lock: r(contract!("mysql", "claim-lock"), CLAIM),
                    update: r(contract!("mysql", "claim-update"), CLAIM),
                    fetch: r(contract!("mysql", "claim-fetch"), CLAIM),
                    unlock: r(contract!("mysql", "claim-unlock"), CLAIM),
                }),
                renew: r(contract!("mysql", "renew"), RENEW),
                complete: r(contract!("mysql", "complete"), COMPLETE),
                retry: r(contract!("mysql", "retry"), RETRY),
                dead: r(contract!("mysql", "dead"), DEAD),
                complete_batch: r(contract!("mysql", "complete-batch"), COMPLETE_BATCH),
            }),
            // The SQL Server contract files are not written yet; refuse rather than guess.
            Dialect::SqlServer => Err(OptionsError(
                "The dialect sqlserver is not supported by this version of queuebox-inbox."
                    .to_owned(),
            )),
        }
    }
}

/// Renders a contract text: drops `--` comment lines, substitutes identifiers, then parameters.
fn render(
    dialect: Dialect,
    text: &str,
    schema: &Schema,
    order: &'static [&'static str],
) -> Statement {
    let body: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect();
    let named = substitute_identifiers(&body.join("\n"), schema, &[]);
    let (text, slots) = map_parameters(dialect, &named, order);
    Statement { text, order, slots }
}

/// Renders a PostgreSQL contract text with `$n` parameters in `order`.
pub fn render_pg(text: &str, schema: &Schema, order: &'static [&'static str]) -> String {
    render(Dialect::Postgresql, text, schema, order).text
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

/// Finds every `:name` parameter (not next to another `:`, so `::text` stays) and writes it in
/// the dialect's style, returning the driver's slots.
fn map_parameters(dialect: Dialect, text: &str, order: &[&str]) -> (String, Vec<Slot>) {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut slots = Vec::new();
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
            out.push_str(&text[copied..i]);
            if dialect == Dialect::Mysql && name == "ids" {
                out.push_str(":ids");
                slots.push(Slot::Ids);
            } else {
                let n = order.iter().position(|o| *o == name).unwrap_or_else(|| {
                    panic!("parameter :{name} missing from the canonical order")
                });
                match dialect {
                    Dialect::Mysql => {
                        out.push('?');
                        slots.push(Slot::Value(n));
                    }
                    Dialect::Sqlite => {
                        // SQLite numbers `:name` by first appearance; a repeat shares it.
                        out.push(':');
                        out.push_str(name);
                        if !slots.contains(&Slot::Value(n)) {
                            slots.push(Slot::Value(n));
                        }
                    }
                    Dialect::Postgresql | Dialect::SqlServer => {
                        out.push_str(&format!("${}", n + 1));
                    }
                }
            }
            i += 1 + len;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    if matches!(dialect, Dialect::Postgresql | Dialect::SqlServer) {
        // `$n` binds the canonical values in order, each once.
        slots = (0..order.len()).map(Slot::Value).collect();
    }
    (out, slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_are_not_parameters() {
        let (text, _) = map_parameters(Dialect::Postgresql, "a::text = :id", &["id"]);
        assert_eq!(text, "a::text = $1");
    }

    #[test]
    fn mysql_binds_each_occurrence_and_expands_ids() {
        let (text, slots) =
            map_parameters(Dialect::Mysql, "a = :b AND c IN (:ids) AND d = :b", &["b"]);
        let st = Statement {
            text,
            order: &["b"],
            slots,
        };
        assert_eq!(st.slot_names(), ["b", "ids", "b"]);
        let (text, values) =
            st.bind_ids(&[SqlValue::Int(7)], &[SqlValue::Int(1), SqlValue::Int(2)]);
        assert_eq!(text, "a = ? AND c IN (?, ?) AND d = ?");
        assert_eq!(values, [7, 1, 2, 7].map(SqlValue::Int));
    }

    #[test]
    fn sqlite_keeps_names_and_binds_each_name_once() {
        let (text, slots) = map_parameters(
            Dialect::Sqlite,
            "x = '%H:%M' AND a = :b AND c = :a AND d = :b",
            &["a", "b"],
        );
        assert_eq!(text, "x = '%H:%M' AND a = :b AND c = :a AND d = :b");
        assert_eq!(slots, [Slot::Value(1), Slot::Value(0)]);
    }

    #[test]
    fn braces_that_are_not_placeholders_stay() {
        let s = substitute_identifiers("'{}' \"{inbox}\"", &Schema::default(), &[]);
        assert_eq!(s, "'{}' \"inbox\"");
    }
}
