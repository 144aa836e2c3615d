//! The load outcome types: one diagnostic line, the whole error message (CFG-28), the warning
//! list (CFG-32) and the load errors that stop before validation (CFG-2, CFG-3, CFG-5).

use std::cmp::Ordering;
use std::fmt;
use std::path::PathBuf;

/// One error or warning line: `- <path>[ (<VAR>)]: <message>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The key path (`routes[0].destination`), or the variable's name for an unknown variable.
    pub path: String,
    /// The variable that supplied the value, when it came from one (CFG-18).
    pub variable: Option<String>,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.variable {
            Some(var) => write!(f, "- {} ({}): {}", self.path, var, self.message),
            None => write!(f, "- {}: {}", self.path, self.message),
        }
    }
}

/// Every error of one load, in the order of CFG-28: key errors by path (list positions compared
/// as numbers), then unknown variables by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Orders key errors and unknown-variable errors as CFG-28 says.
    pub(crate) fn sorted(mut keys: Vec<Diagnostic>, mut variables: Vec<Diagnostic>) -> Self {
        keys.sort_by(compare_diagnostics);
        keys.dedup();
        variables.sort_by(|a, b| a.path.cmp(&b.path).then(a.message.cmp(&b.message)));
        variables.dedup();
        keys.extend(variables);
        Self(keys)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() == 1 {
            f.write_str("The configuration has 1 error. Fix it and start QueueBox again.")?;
        } else {
            write!(
                f,
                "The configuration has {} errors. Fix each one and start QueueBox again.",
                self.0.len()
            )?;
        }
        for d in &self.0 {
            write!(f, "\n{d}")?;
        }
        Ok(())
    }
}

/// The warning block of `queuebox check` (CFG-32): a count line, then one line per warning,
/// each ending with a line break.
pub fn format_warnings(warnings: &[Diagnostic]) -> String {
    let mut out = if warnings.len() == 1 {
        "The configuration has 1 warning.".to_owned()
    } else {
        format!("The configuration has {} warnings.", warnings.len())
    };
    for w in warnings {
        out.push('\n');
        out.push_str(&w.to_string());
    }
    out.push('\n');
    out
}

/// Why `load` produced no configuration.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// CFG-3.
    #[error(
        "QueueBox found no configuration. It looked for --config, QUEUEBOX_CONFIG_FILE, ./queuebox.yml and /etc/queuebox/queuebox.yml, and no QUEUEBOX_ variable sets a key."
    )]
    NotFound,
    /// CFG-2: missing, unreadable or not UTF-8.
    #[error("QueueBox could not read the configuration file {}: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
    /// CFG-5: a YAML syntax error or more than one document.
    #[error("QueueBox could not read the configuration file {}: {detail}", path.display())]
    NotYaml { path: PathBuf, detail: String },
    /// CFG-28: every validation error, in one message.
    #[error("{0}")]
    Invalid(Diagnostics),
}

impl LoadError {
    /// The exit status of `queuebox check` (CFG-32): 1 for an invalid configuration, 2 when
    /// there is none to check.
    pub fn check_exit_code(&self) -> i32 {
        match self {
            Self::Invalid(_) => 1,
            Self::NotFound | Self::Unreadable { .. } | Self::NotYaml { .. } => 2,
        }
    }
}

/// A value quoted in a message: double quotes, cut to 64 characters plus `…` (CFG-28). Line
/// breaks and other control characters are escaped so that one error stays one line.
pub(crate) fn quote(value: &str) -> String {
    let mut out = String::from("\"");
    for (count, c) in value.chars().enumerate() {
        if count == 64 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('"');
    out
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Component<'a> {
    Name(&'a str),
    Position(u64),
}

/// Splits `sources.a.filter.require[10].in[0]` into names and numeric positions.
fn components(path: &str) -> Vec<Component<'_>> {
    let mut out = Vec::new();
    for segment in path.split('.') {
        let name_end = segment.find('[').unwrap_or(segment.len());
        out.push(Component::Name(&segment[..name_end]));
        let mut rest = &segment[name_end..];
        while let Some(inner) = rest.strip_prefix('[') {
            let close = inner.find(']').unwrap_or(inner.len());
            match inner[..close].parse::<u64>() {
                Ok(n) => out.push(Component::Position(n)),
                Err(_) => out.push(Component::Name(&inner[..close])),
            }
            rest = inner.get(close + 1..).unwrap_or("");
        }
    }
    out
}

fn compare_diagnostics(a: &Diagnostic, b: &Diagnostic) -> Ordering {
    components(&a.path)
        .cmp(&components(&b.path))
        .then_with(|| a.message.cmp(&b.message))
        .then_with(|| a.variable.cmp(&b.variable))
}

pub(crate) fn sort_warnings(warnings: &mut Vec<Diagnostic>) {
    warnings.sort_by(compare_diagnostics);
    warnings.dedup();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(path: &str, message: &str) -> Diagnostic {
        Diagnostic {
            path: path.into(),
            variable: None,
            message: message.into(),
        }
    }

    #[test]
    fn cfg_28_positions_sort_as_numbers_and_variables_come_last() {
        let keys = vec![
            d("routes[10].destination", "required"),
            d("routes[2].destination", "required"),
            d("outbox.batchSzie", "unknown key"),
            d("destinations.billing", "missing type"),
        ];
        let vars = vec![
            d("QUEUEBOX_B", "unknown variable"),
            d("QUEUEBOX_A", "unknown variable"),
        ];
        let all = Diagnostics::sorted(keys, vars);
        let paths: Vec<&str> = all.0.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "destinations.billing",
                "outbox.batchSzie",
                "routes[2].destination",
                "routes[10].destination",
                "QUEUEBOX_A",
                "QUEUEBOX_B"
            ]
        );
    }

    #[test]
    fn cfg_28_first_line_singular_and_plural() {
        let one = Diagnostics(vec![d("a", "x")]);
        assert_eq!(
            one.to_string(),
            "The configuration has 1 error. Fix it and start QueueBox again.\n- a: x"
        );
        let two = Diagnostics(vec![d("a", "x"), d("b", "y")]);
        assert!(two.to_string().starts_with(
            "The configuration has 2 errors. Fix each one and start QueueBox again.\n- a: x\n- b: y"
        ));
    }

    #[test]
    fn cfg_18_variable_follows_the_path() {
        let line = Diagnostic {
            path: "outbox.batchSize".into(),
            variable: Some("QUEUEBOX_OUTBOX_BATCHSIZE".into()),
            message: "must be greater than 0, got 0".into(),
        };
        assert_eq!(
            line.to_string(),
            "- outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE): must be greater than 0, got 0"
        );
    }

    #[test]
    fn cfg_28_quoted_values_are_cut_to_64_characters() {
        let long = "x".repeat(70);
        assert_eq!(quote(&long), format!("\"{}…\"", "x".repeat(64)));
        assert_eq!(quote("short"), "\"short\"");
        assert_eq!(quote(&"y".repeat(64)), format!("\"{}\"", "y".repeat(64)));
        assert_eq!(quote("a\nb"), "\"a\\nb\"");
    }

    #[test]
    fn cfg_32_check_exit_codes_and_warning_block() {
        assert_eq!(LoadError::NotFound.check_exit_code(), 2);
        assert_eq!(LoadError::Invalid(Diagnostics(vec![])).check_exit_code(), 1);
        assert_eq!(
            format_warnings(&[d("a", "w1"), d("b", "w2")]),
            "The configuration has 2 warnings.\n- a: w1\n- b: w2\n"
        );
        assert_eq!(
            format_warnings(&[d("a", "w1")]),
            "The configuration has 1 warning.\n- a: w1\n"
        );
    }
}
