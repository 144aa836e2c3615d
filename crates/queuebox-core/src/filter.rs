//! The header filter of a source (inbox.md INB-29/30): a message passes when it matches every
//! `require` rule and no `exclude` rule; a rule never matches a message that lacks its header.
//! It runs on the received headers only, before anything reads the body.

use crate::glob::TopicGlob;
use crate::headers::{HeaderName, ReceivedHeaders};

/// `filter` of a source (CFG-78). Empty lists pass every message.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub require: Vec<FilterRule>,
    pub exclude: Vec<FilterRule>,
}

#[derive(Clone, Debug)]
pub struct FilterRule {
    pub header: HeaderName,
    pub test: FilterTest,
}

/// Exactly one test per rule (CFG-78).
#[derive(Clone, Debug)]
pub enum FilterTest {
    Equals(String),
    In(Vec<String>),
    Matches(TopicGlob),
    Exists,
}

/// Names the first rule that stopped a message, as `require[<i>] (<header> <test>)` or
/// `exclude[<i>] (<header> <test>)`: never a value (INB-30).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedRule(pub String);

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.require.is_empty() && self.exclude.is_empty()
    }

    /// `Ok` when the message passes.
    pub fn check(&self, headers: &ReceivedHeaders) -> Result<(), FailedRule> {
        for (i, rule) in self.require.iter().enumerate() {
            if !rule.matches(headers) {
                return Err(rule.describe("require", i));
            }
        }
        for (i, rule) in self.exclude.iter().enumerate() {
            if rule.matches(headers) {
                return Err(rule.describe("exclude", i));
            }
        }
        Ok(())
    }
}

impl FilterRule {
    /// INB-29: names in any letter case, values exactly.
    fn matches(&self, headers: &ReceivedHeaders) -> bool {
        let Some(value) = headers.get(self.header.as_str()) else {
            return false;
        };
        match &self.test {
            FilterTest::Equals(expected) => value == expected,
            FilterTest::In(allowed) => allowed.iter().any(|a| a == value),
            FilterTest::Matches(glob) => glob.matches(value),
            FilterTest::Exists => true,
        }
    }

    fn describe(&self, list: &str, index: usize) -> FailedRule {
        let test = match self.test {
            FilterTest::Equals(_) => "equals",
            FilterTest::In(_) => "in",
            FilterTest::Matches(_) => "matches",
            FilterTest::Exists => "exists",
        };
        FailedRule(format!("{list}[{index}] ({} {test})", self.header))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(header: &str, test: FilterTest) -> FilterRule {
        FilterRule {
            header: HeaderName::parse(header).unwrap(),
            test,
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> ReceivedHeaders {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn inb_29_the_four_tests() {
        let h = headers(&[("x-tenant", "acme"), ("x-topic", "orders.created")]);
        let ok = |test| rule("X-Tenant", test).matches(&h);
        assert!(ok(FilterTest::Equals("acme".into())));
        assert!(!ok(FilterTest::Equals("ACME".into())));
        assert!(ok(FilterTest::In(vec!["x".into(), "acme".into()])));
        assert!(!ok(FilterTest::In(vec!["x".into()])));
        assert!(ok(FilterTest::Exists));
        let glob = |g: &str| FilterTest::Matches(TopicGlob::parse(g).unwrap());
        assert!(rule("x-topic", glob("orders.*")).matches(&h));
        assert!(!rule("x-topic", glob("payments.*")).matches(&h));
    }

    #[test]
    fn inb_29_missing_header_blocks_require_and_passes_exclude() {
        let h = headers(&[]);
        let require = Filter {
            require: vec![rule("x-tenant", FilterTest::Exists)],
            exclude: vec![],
        };
        assert_eq!(
            require.check(&h),
            Err(FailedRule("require[0] (x-tenant exists)".into()))
        );
        let exclude = Filter {
            require: vec![],
            exclude: vec![rule("x-test", FilterTest::Equals("1".into()))],
        };
        assert_eq!(exclude.check(&h), Ok(()));
    }

    #[test]
    fn inb_30_names_the_first_failing_rule_without_values() {
        let h = headers(&[("x-tenant", "acme"), ("x-env", "test")]);
        let filter = Filter {
            require: vec![rule("x-tenant", FilterTest::Equals("acme".into()))],
            exclude: vec![
                rule("x-other", FilterTest::Exists),
                rule("X-Env", FilterTest::In(vec!["test".into()])),
            ],
        };
        assert_eq!(
            filter.check(&h),
            Err(FailedRule("exclude[1] (X-Env in)".into()))
        );
    }
}
