//! The header filter of INB-29/30: a message passes when it matches every `require` rule and
//! no `exclude` rule; a rule never matches a message that lacks its header.

use queuebox_config::{Filter, FilterRule, FilterTest};

use super::headers::ReceivedHeaders;

/// Names the first rule that stopped a message, as `require[<i>] (<header> <test>)` or
/// `exclude[<i>] (<header> <test>)`: never a value (INB-30).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FailedRule(pub(crate) String);

/// `Ok` when the message passes; runs on the stored headers only (INB-21 keeps credential
/// headers out of reach).
pub(crate) fn run(filter: &Filter, headers: &ReceivedHeaders) -> Result<(), FailedRule> {
    for (i, rule) in filter.require.iter().enumerate() {
        if !matches(rule, headers) {
            return Err(describe("require", i, rule));
        }
    }
    for (i, rule) in filter.exclude.iter().enumerate() {
        if matches(rule, headers) {
            return Err(describe("exclude", i, rule));
        }
    }
    Ok(())
}

/// INB-29: names in any letter case, values exactly.
fn matches(rule: &FilterRule, headers: &ReceivedHeaders) -> bool {
    let Some(value) = headers.get(rule.header.as_str()) else {
        return false;
    };
    match &rule.test {
        FilterTest::Equals(expected) => value == expected,
        FilterTest::In(allowed) => allowed.iter().any(|a| a == value),
        FilterTest::Matches(glob) => glob.matches(value),
        FilterTest::Exists => true,
    }
}

fn describe(list: &str, index: usize, rule: &FilterRule) -> FailedRule {
    let test = match rule.test {
        FilterTest::Equals(_) => "equals",
        FilterTest::In(_) => "in",
        FilterTest::Matches(_) => "matches",
        FilterTest::Exists => "exists",
    };
    FailedRule(format!("{list}[{index}] ({} {test})", rule.header))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap, HeaderValue};
    use queuebox_config::HeaderName;
    use queuebox_core::glob::TopicGlob;

    use crate::source::headers::HeaderPolicy;

    fn rule(header: &str, test: FilterTest) -> FilterRule {
        FilterRule {
            header: HeaderName::parse(header).unwrap(),
            test,
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> ReceivedHeaders {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        HeaderPolicy::new(None).collect(&map)
    }

    #[test]
    fn inb_29_the_four_tests() {
        let h = headers(&[("x-tenant", "acme"), ("x-topic", "orders.created")]);
        let ok = |test| matches(&rule("X-Tenant", test), &h);
        assert!(ok(FilterTest::Equals("acme".into())));
        assert!(!ok(FilterTest::Equals("ACME".into())));
        assert!(ok(FilterTest::In(vec!["x".into(), "acme".into()])));
        assert!(!ok(FilterTest::In(vec!["x".into()])));
        assert!(ok(FilterTest::Exists));
        let glob = |g: &str| FilterTest::Matches(TopicGlob::parse(g).unwrap());
        assert!(matches(&rule("x-topic", glob("orders.*")), &h));
        assert!(!matches(&rule("x-topic", glob("payments.*")), &h));
    }

    #[test]
    fn inb_29_missing_header_blocks_require_and_passes_exclude() {
        let h = headers(&[]);
        let require = Filter {
            require: vec![rule("x-tenant", FilterTest::Exists)],
            exclude: vec![],
        };
        assert_eq!(
            run(&require, &h),
            Err(FailedRule("require[0] (x-tenant exists)".into()))
        );
        let exclude = Filter {
            require: vec![],
            exclude: vec![rule("x-test", FilterTest::Equals("1".into()))],
        };
        assert_eq!(run(&exclude, &h), Ok(()));
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
            run(&filter, &h),
            Err(FailedRule("exclude[1] (X-Env in)".into()))
        );
    }
}
