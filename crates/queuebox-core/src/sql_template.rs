//! The one grammar of QueueBox's SQL files, the store's `queries/` and the pull contract's
//! statements alike (clients/contract/README.md, "Loading a statement"), and its renderer:
//! `--` comment lines, `{name}` identifier placeholders written inside the dialect's quotes
//! (`"{outbox}"`, `` `{outbox}` ``, `[{outbox}]`), and `:name` parameters, mapped to the driver's
//! style (`$n` in a canonical order, `?` per occurrence, or named).
//!
//! Identifiers arrive as [`SqlIdentifier`]s, validated when the configuration was read, and
//! every placeholder must sit between the dialect's quotes, so no configured text reaches the
//! SQL unquoted. A placeholder or a parameter the caller did not name is an error of the file,
//! reported when the store starts, never a statement that fails later.

use crate::SqlIdentifier;

/// How a dialect quotes an identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quotes {
    pub open: char,
    pub close: char,
}

impl Quotes {
    /// PostgreSQL and SQLite: `"name"`.
    pub const DOUBLE: Self = Self {
        open: '"',
        close: '"',
    };
    /// MySQL and MariaDB: `` `name` ``.
    pub const BACKTICK: Self = Self {
        open: '`',
        close: '`',
    };
    /// SQL Server: `[name]`.
    pub const BRACKETS: Self = Self {
        open: '[',
        close: ']',
    };
}

/// How the driver takes parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamStyle {
    /// PostgreSQL: `$1`, `$2`, …; each distinct name gets the number of its place in the
    /// canonical order, and every occurrence of it the same number.
    Numbered,
    /// MySQL: `?` for every occurrence, bound in order of appearance.
    Positional,
    /// SQLite `:name`, SQL Server `@name`: the name with this prefix.
    Named { prefix: char },
}

/// A dialect: its quotes and its parameter style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dialect {
    pub quotes: Quotes,
    pub params: ParamStyle,
}

impl Dialect {
    pub const POSTGRES: Self = Self {
        quotes: Quotes::DOUBLE,
        params: ParamStyle::Numbered,
    };
    pub const MYSQL: Self = Self {
        quotes: Quotes::BACKTICK,
        params: ParamStyle::Positional,
    };
    pub const SQLITE: Self = Self {
        quotes: Quotes::DOUBLE,
        params: ParamStyle::Named { prefix: ':' },
    };
    pub const SQLSERVER: Self = Self {
        quotes: Quotes::BRACKETS,
        params: ParamStyle::Named { prefix: '@' },
    };
}

/// A rendered statement and the order in which the caller binds its values: for
/// [`ParamStyle::Numbered`] the canonical order, for [`ParamStyle::Positional`] one entry per
/// occurrence, for [`ParamStyle::Named`] each name once, as it first appears.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    pub sql: String,
    pub binds: Vec<String>,
}

/// Why a file cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("the placeholder {{{0}}} names no table or column")]
    UnknownPlaceholder(String),
    #[error("the placeholder {{{0}}} is not inside the dialect's quotes")]
    UnquotedPlaceholder(String),
    #[error("the parameter :{0} is not in the statement's parameter order")]
    UnknownParameter(String),
    #[error("the parameter order names :{0}, which the statement does not use")]
    UnusedParameter(String),
}

/// Renders a file: drops its comment lines, puts the bare identifier of each `{name}` (looked
/// up in `names`) between the quotes the file already has, and maps its `:name` parameters.
/// `order` is the canonical parameter order; every parameter of the text must be in it, and
/// every name in it must be used.
pub fn render(
    template: &str,
    names: &[(&str, &SqlIdentifier)],
    order: &[&str],
    dialect: Dialect,
) -> Result<Rendered, TemplateError> {
    let body = drop_comments(template);
    let with_names = substitute_identifiers(&body, names, dialect.quotes)?;
    map_parameters(&with_names, order, dialect.params)
}

/// Every line whose first non-blank characters are `--` goes; nothing else is a comment.
fn drop_comments(template: &str) -> String {
    template
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
}

/// `{` + `[a-z_]+` + `}`: so the JSON literal `'{}'` is not a placeholder.
fn substitute_identifiers(
    text: &str,
    names: &[(&str, &SqlIdentifier)],
    quotes: Quotes,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let len = after
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(after.len());
        if len == 0 || !after[len..].starts_with('}') {
            out.push_str(&rest[..=open]);
            rest = after;
            continue;
        }
        let name = &after[..len];
        let quoted =
            rest[..open].ends_with(quotes.open) && after[len + 1..].starts_with(quotes.close);
        if !quoted {
            return Err(TemplateError::UnquotedPlaceholder(name.to_owned()));
        }
        let identifier = names
            .iter()
            .find(|(placeholder, _)| *placeholder == name)
            .map(|(_, identifier)| identifier)
            .ok_or_else(|| TemplateError::UnknownPlaceholder(name.to_owned()))?;
        out.push_str(&rest[..open]);
        out.push_str(identifier.as_str());
        rest = &after[len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `:` + `[a-z_][a-z0-9_]*`, where the `:` is neither preceded nor followed by another `:`
/// (so the cast `::text` is not a parameter).
fn map_parameters(
    text: &str,
    order: &[&str],
    style: ParamStyle,
) -> Result<Rendered, TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut binds: Vec<String> = Vec::new();
    let mut used = vec![false; order.len()];
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        let starts_param = bytes[i] == b':'
            && (i == 0 || bytes[i - 1] != b':')
            && bytes
                .get(i + 1)
                .is_some_and(|&b| b.is_ascii_lowercase() || b == b'_');
        if !starts_param {
            i += 1;
            continue;
        }
        let start = i + 1;
        let end = text[start..]
            .find(|c: char| !is_name_char(c))
            .map_or(text.len(), |n| start + n);
        let name = &text[start..end];
        let place = order
            .iter()
            .position(|o| *o == name)
            .ok_or_else(|| TemplateError::UnknownParameter(name.to_owned()))?;
        used[place] = true;
        out.push_str(&text[copied..i]);
        match style {
            ParamStyle::Numbered => out.push_str(&format!("${}", place + 1)),
            ParamStyle::Positional => {
                out.push('?');
                binds.push(name.to_owned());
            }
            ParamStyle::Named { prefix } => {
                out.push(prefix);
                out.push_str(name);
                if !binds.iter().any(|b| b == name) {
                    binds.push(name.to_owned());
                }
            }
        }
        i = end;
        copied = end;
    }
    out.push_str(&text[copied..]);
    if let Some(unused) = used.iter().position(|u| !u) {
        return Err(TemplateError::UnusedParameter(order[unused].to_owned()));
    }
    if style == ParamStyle::Numbered {
        binds = order.iter().map(|&o| o.to_owned()).collect();
    }
    Ok(Rendered { sql: out, binds })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> SqlIdentifier {
        SqlIdentifier::parse(s).expect("identifier")
    }

    const RENEW: &str = "-- Locking: the row lock. Isolation: READ COMMITTED.\n\
        UPDATE \"{inbox}\" SET \"{lease_expires_at}\" = now() + :lease_ms * INTERVAL '1 millisecond'\n  \
        -- an indented comment :nope {nope}\n\
        WHERE \"{id}\" = :id AND \"{claim_token}\" = :token AND :id IS NOT NULL";

    fn names() -> Vec<(&'static str, SqlIdentifier)> {
        vec![
            ("inbox", id("events_in")),
            ("lease_expires_at", id("lease_until")),
            ("id", id("id")),
            ("claim_token", id("claim_token")),
        ]
    }

    fn render_with(dialect: Dialect, order: &[&str]) -> Result<Rendered, TemplateError> {
        let owned = names();
        let names: Vec<(&str, &SqlIdentifier)> = owned.iter().map(|(n, i)| (*n, i)).collect();
        render(RENEW, &names, order, dialect)
    }

    #[test]
    fn numbered_parameters_follow_the_canonical_order_and_repeat_their_number() {
        let r = render_with(Dialect::POSTGRES, &["lease_ms", "id", "token"]).unwrap();
        assert_eq!(
            r.sql,
            "UPDATE \"events_in\" SET \"lease_until\" = now() + $1 * INTERVAL '1 millisecond'\n\
             WHERE \"id\" = $2 AND \"claim_token\" = $3 AND $2 IS NOT NULL"
        );
        assert_eq!(r.binds, ["lease_ms", "id", "token"]);
    }

    #[test]
    fn positional_parameters_bind_once_per_occurrence() {
        let r = render_with(Dialect::MYSQL, &["lease_ms", "id", "token"]);
        // The file quotes with double quotes, so the MySQL dialect refuses it.
        assert_eq!(r, Err(TemplateError::UnquotedPlaceholder("inbox".into())));
        let text = "SELECT `{id}` FROM `{inbox}` WHERE `{id}` = :id AND :token = :id";
        let owned = names();
        let names: Vec<(&str, &SqlIdentifier)> = owned.iter().map(|(n, i)| (*n, i)).collect();
        let r = render(text, &names, &["id", "token"], Dialect::MYSQL).unwrap();
        assert_eq!(
            r.sql,
            "SELECT `id` FROM `events_in` WHERE `id` = ? AND ? = ?"
        );
        assert_eq!(r.binds, ["id", "token", "id"]);
    }

    #[test]
    fn named_parameters_keep_or_prefix_the_name() {
        let r = render_with(Dialect::SQLITE, &["lease_ms", "id", "token"]).unwrap();
        assert!(
            r.sql
                .contains("= :id AND \"claim_token\" = :token AND :id IS"),
            "{}",
            r.sql
        );
        assert_eq!(r.binds, ["lease_ms", "id", "token"]);
        let text = "DELETE FROM [{inbox}] WHERE [{id}] = :id";
        let owned = names();
        let names: Vec<(&str, &SqlIdentifier)> = owned.iter().map(|(n, i)| (*n, i)).collect();
        let r = render(text, &names, &["id"], Dialect::SQLSERVER).unwrap();
        assert_eq!(r.sql, "DELETE FROM [events_in] WHERE [id] = @id");
    }

    #[test]
    fn casts_json_braces_and_comments_are_not_placeholders_or_parameters() {
        let text = "-- :commented {commented}\nSELECT :a::bigint, '{}'::jsonb, x::text, ':'";
        let r = render(text, &[], &["a"], Dialect::POSTGRES).unwrap();
        assert_eq!(r.sql, "SELECT $1::bigint, '{}'::jsonb, x::text, ':'");
    }

    #[test]
    fn every_fault_of_a_file_is_named() {
        assert_eq!(
            render("SELECT \"{nope}\"", &[], &[], Dialect::POSTGRES),
            Err(TemplateError::UnknownPlaceholder("nope".into()))
        );
        let outbox = id("outbox");
        assert_eq!(
            render(
                "SELECT * FROM {outbox}",
                &[("outbox", &outbox)],
                &[],
                Dialect::POSTGRES
            ),
            Err(TemplateError::UnquotedPlaceholder("outbox".into()))
        );
        assert_eq!(
            render("SELECT :a", &[], &[], Dialect::POSTGRES),
            Err(TemplateError::UnknownParameter("a".into()))
        );
        assert_eq!(
            render("SELECT :a", &[], &["a", "b"], Dialect::POSTGRES),
            Err(TemplateError::UnusedParameter("b".into()))
        );
        assert_eq!(
            TemplateError::UnknownPlaceholder("x".into()).to_string(),
            "the placeholder {x} names no table or column"
        );
    }
}
