//! Reading `retention` (config.md §13) with its rules CFG-117..119.

use std::time::Duration;

use crate::model::{
    InboxRetention, InboxRetentionPolicy, OutboxRetention, OutboxRetentionPolicy, RetentionConfig,
};
use crate::node::Node;
use crate::read::{Cx, Sec, get};
use crate::values::{self as v, Range};

pub(crate) fn read_retention(cx: &mut Cx<'_>, node: Option<&Node>) -> RetentionConfig {
    let mut s = Sec::open(cx, "retention", node);
    let enabled = get!(cx, s, "enabled", false, |p, n| v::boolean(cx, &p, n));
    let outbox_node = s.node("outbox");
    let (policy, cleanup_interval, batch_size) =
        read_table(cx, "retention.outbox", outbox_node, true);
    let outbox = OutboxRetention {
        policy,
        cleanup_interval,
        batch_size,
    };
    let inbox_node = s.node("inbox");
    let (policy, cleanup_interval, batch_size) =
        read_table(cx, "retention.inbox", inbox_node, false);
    let inbox = InboxRetention {
        policy: match policy {
            OutboxRetentionPolicy::Age(age) => InboxRetentionPolicy::Age(age),
            _ => InboxRetentionPolicy::Disabled,
        },
        cleanup_interval,
        batch_size,
    };
    s.finish(cx, &["enabled", "outbox", "inbox"]);
    // CFG-119.
    if !enabled && !cx.is_bad("retention.enabled") {
        for (table, off) in [
            ("outbox", outbox.policy == OutboxRetentionPolicy::Disabled),
            ("inbox", inbox.policy == InboxRetentionPolicy::Disabled),
        ] {
            let path = format!("retention.{table}.policy");
            if !off && !cx.is_bad(&path) {
                cx.warn(&path, "does nothing, because retention.enabled is false");
            }
        }
    }
    RetentionConfig {
        enabled,
        outbox,
        inbox,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    Age,
    Count,
    Disabled,
}

/// One table block of `retention` (CFG-83, CFG-117, CFG-118).
fn read_table(
    cx: &mut Cx<'_>,
    path: &str,
    node: Option<&Node>,
    outbox: bool,
) -> (OutboxRetentionPolicy, Duration, u32) {
    let mut s = Sec::open(cx, path, node);
    let policy = get!(cx, s, "policy", Policy::Disabled, |p, n| {
        if outbox {
            let words = [
                ("AGE", Policy::Age),
                ("COUNT", Policy::Count),
                ("DISABLED", Policy::Disabled),
            ];
            v::enumeration(cx, &p, n, &words, &["AGE", "COUNT", "DISABLED"])
        } else {
            let words = [("AGE", Policy::Age), ("DISABLED", Policy::Disabled)];
            v::enumeration(cx, &p, n, &words, &["AGE", "DISABLED"])
        }
    });
    let positive_duration = |cx: &mut Cx<'_>, p: &str, n: &Node| {
        let d = v::duration(cx, p, n)?;
        if d.is_zero() {
            cx.error_at(p, n, "must be greater than 0s, got 0s");
            return None;
        }
        Some(d)
    };
    let max_age = get!(cx, s, "maxAge", None, |p, n| positive_duration(cx, &p, n)
        .map(Some));
    let max_count = if outbox {
        get!(cx, s, "maxCount", None, |p, n| v::uint(
            cx,
            &p,
            n,
            Range::Positive
        )
        .map(Some))
    } else {
        None
    };
    let cleanup_interval = get!(
        cx,
        s,
        "cleanupInterval",
        Duration::from_secs(3600),
        |p, n| { positive_duration(cx, &p, n) }
    );
    let batch_size = get!(cx, s, "batchSize", 1000, |p, n| v::uint(
        cx,
        &p,
        n,
        Range::Between(1, 100_000)
    ));
    let (has_age, has_count) = (s.has("maxAge"), outbox && s.has("maxCount"));
    let mut known = vec!["policy", "maxAge", "cleanupInterval", "batchSize"];
    if outbox {
        known.push("maxCount");
    }
    s.finish(cx, &known);
    let policy_path = format!("{path}.policy");
    if cx.is_bad(&policy_path) {
        return (
            OutboxRetentionPolicy::Disabled,
            cleanup_interval,
            batch_size,
        );
    }
    // CFG-118.
    let rule = |cx: &mut Cx<'_>, key: &str, set: bool, needed: bool, word: &str| {
        let key_path = format!("{path}.{key}");
        if needed && !set {
            cx.error(&key_path, format!("required for policy {word}"));
        } else if !needed && set {
            cx.error(&key_path, format!("applies only to policy {word}"));
        }
    };
    rule(cx, "maxAge", has_age, policy == Policy::Age, "AGE");
    if outbox {
        rule(cx, "maxCount", has_count, policy == Policy::Count, "COUNT");
    }
    let resolved = match (policy, max_age, max_count) {
        (Policy::Age, Some(age), _) => OutboxRetentionPolicy::Age(age),
        (Policy::Count, _, Some(count)) => OutboxRetentionPolicy::Count(count),
        _ => OutboxRetentionPolicy::Disabled,
    };
    // A policy whose parameter is in error still counts as set for CFG-119.
    let resolved = match (resolved, policy) {
        (OutboxRetentionPolicy::Disabled, Policy::Age) => {
            OutboxRetentionPolicy::Age(Duration::ZERO)
        }
        (OutboxRetentionPolicy::Disabled, Policy::Count) => OutboxRetentionPolicy::Count(0),
        (r, _) => r,
    };
    (resolved, cleanup_interval, batch_size)
}
