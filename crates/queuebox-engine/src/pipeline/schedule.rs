//! `scheduled_at` of a message (INB-41..45): the initial delay after the receipt, or after the
//! publish time taken from a header, a body path, or the broker's own time. The database adds
//! the receipt time itself (INB-44); this only chooses the [`Schedule`].

use std::time::Duration;

use queuebox_core::jsonpath::JsonPath;
use queuebox_core::publish_time::{publish_time_of_text, publish_time_of_value};
use queuebox_core::{HeaderName, ReceivedHeaders};
use queuebox_store::Schedule;
use serde_json::Value;

/// The publish-time rule of one source, fixed at start.
#[derive(Clone, Debug)]
pub(crate) struct ScheduleRule {
    pub(crate) initial_delay: Duration,
    /// `scheduledAtHeader`, looked up in any letter case.
    pub(crate) header: Option<HeaderName>,
    pub(crate) paths: Vec<JsonPath>,
    /// Whether the broker's own time is a step (INB-42 step 3: broker sources only).
    pub(crate) broker_time: bool,
}

/// What the rule reads of one message.
pub(crate) struct Timed<'a> {
    pub(crate) headers: &'a ReceivedHeaders,
    pub(crate) payload: &'a Value,
    pub(crate) broker_time_ms: Option<i64>,
    pub(crate) source: &'a str,
    pub(crate) correlation_id: &'a str,
}

impl ScheduleRule {
    /// INB-41/42: without a publish-time key, receipt + delay; with one, the first valid
    /// publish time (header, paths, the broker's time), else the receipt time.
    pub(crate) fn schedule(&self, message: &Timed<'_>) -> Schedule {
        let delay = self.initial_delay;
        if self.header.is_none() && self.paths.is_empty() {
            return Schedule::AfterReceipt { delay };
        }
        let warn = |step: &str| {
            // INB-43: one line per unusable value; never the value itself.
            tracing::warn!(
                source = message.source,
                correlationId = message.correlation_id,
                step,
                "The publish time from {step} is not an ISO-8601 date-time with an offset nor \
                 an integer; trying the next step"
            );
        };
        let after = |publish_epoch_ms| Schedule::AfterPublish {
            publish_epoch_ms,
            delay,
        };
        if let Some(name) = &self.header
            && let Some(text) = message.headers.get(name.as_str())
        {
            match publish_time_of_text(text) {
                Some(at) => return after(at),
                None => warn(&format!("header {name}")),
            }
        }
        for path in &self.paths {
            match path.get(message.payload) {
                None | Some(Value::Null) => continue,
                Some(value) => match publish_time_of_value(value) {
                    Some(at) => return after(at),
                    None => warn(&format!("path {path}")),
                },
            }
        }
        match message.broker_time_ms {
            Some(at) if self.broker_time => after(at),
            _ => Schedule::AfterReceipt { delay },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(header: Option<&str>, paths: &[&str], broker_time: bool) -> ScheduleRule {
        ScheduleRule {
            initial_delay: Duration::from_secs(30),
            header: header.map(|h| HeaderName::parse(h).unwrap()),
            paths: paths.iter().map(|p| JsonPath::parse(p).unwrap()).collect(),
            broker_time,
        }
    }

    fn schedule(
        rule: &ScheduleRule,
        header: Option<&str>,
        body: &str,
        broker: Option<i64>,
    ) -> Schedule {
        let headers: ReceivedHeaders = header
            .map(|v| ("X-Published-At".to_owned(), v.to_owned()))
            .into_iter()
            .collect();
        let payload: Value = serde_json::from_str(body).unwrap();
        rule.schedule(&Timed {
            headers: &headers,
            payload: &payload,
            broker_time_ms: broker,
            source: "s",
            correlation_id: "c",
        })
    }

    const DELAY: Duration = Duration::from_secs(30);

    #[test]
    fn inb_41_without_a_publish_time_key_the_delay_runs_from_the_receipt() {
        let r = rule(None, &[], true);
        assert_eq!(
            schedule(&r, Some("1790000000"), r#"{"at":1790000000}"#, Some(5)),
            Schedule::AfterReceipt { delay: DELAY }
        );
    }

    #[test]
    fn inb_42_header_then_paths_then_the_broker_time_then_the_receipt() {
        let r = rule(Some("x-published-at"), &["$.at", "$.sentAt"], true);
        let at = |ms| Schedule::AfterPublish {
            publish_epoch_ms: ms,
            delay: DELAY,
        };
        assert_eq!(
            schedule(&r, Some("1790000000"), "{}", Some(7)),
            at(1_790_000_000_000)
        );
        assert_eq!(
            schedule(
                &r,
                Some("yesterday"),
                r#"{"at":null,"sentAt":"2026-09-21T10:00:00Z"}"#,
                None
            ),
            at(1_789_984_800_000)
        );
        assert_eq!(schedule(&r, None, r#"{"at":"soon"}"#, Some(7)), at(7));
        assert_eq!(
            schedule(&r, None, "{}", None),
            Schedule::AfterReceipt { delay: DELAY }
        );
        let http = rule(Some("x-published-at"), &[], false);
        assert_eq!(
            schedule(&http, None, "{}", Some(7)),
            Schedule::AfterReceipt { delay: DELAY },
            "the broker time is no step of an http source"
        );
    }
}
