//! The `log` destination (DST-50..53): one JSON line per delivery on standard output or
//! appended to a file, written with one write and flushed before the delivery is reported.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use queuebox_core::Secret;
use queuebox_core::redact::redact;
use queuebox_core::{Destination, DestinationType, Outcome, OutgoingMessage, ReadinessComponent};

use super::DestinationError;
use super::headers::{Groups, assemble, check_static, log_dropped};

/// One `log` destination, mapped from configuration by the binary's wiring.
#[derive(Clone, Debug)]
pub struct LogDestinationSettings {
    pub name: String,
    /// `None`: standard output.
    pub file: Option<PathBuf>,
    pub static_headers: Vec<(String, Secret)>,
}

enum Sink {
    Stdout,
    File { path: PathBuf, file: File },
}

/// A `log` destination (destinations.md §8): one JSON line per delivery.
pub struct LogDestination {
    name: String,
    static_headers: Vec<(String, Secret)>,
    /// One mutex around the sink: lines of concurrent deliveries never interleave (DST-51).
    sink: Arc<Mutex<Sink>>,
}

impl LogDestination {
    /// Opens the file for appending, creating it when missing (DST-52). A missing parent
    /// directory or a file that cannot be opened stops the start. Never truncates.
    pub fn open(settings: LogDestinationSettings) -> Result<Self, DestinationError> {
        // JSON carries any header, so only the reserved names can make a static header wrong.
        check_static(&settings.name, &settings.static_headers, &[], |_, _| None)?;
        let sink = match settings.file {
            None => Sink::Stdout,
            Some(path) => match OpenOptions::new().append(true).create(true).open(&path) {
                Ok(file) => Sink::File { path, file },
                Err(source) => {
                    return Err(DestinationError::LogFile {
                        destination: settings.name,
                        path,
                        source,
                    });
                }
            },
        };
        Ok(Self {
            name: settings.name,
            static_headers: settings.static_headers,
            sink: Arc::new(Mutex::new(sink)),
        })
    }

    /// The line of DST-50, with its `\n`. `Err` when the payload is not JSON, which the
    /// engine's row check (OUT-7) already rules out.
    fn line(&self, message: &OutgoingMessage, now: SystemTime) -> Result<String, String> {
        let payload = compact_json(&message.payload).ok_or("The payload is not valid JSON.")?;
        let id = message.id.to_string();
        let key = message.key.as_deref().filter(|key| !key.is_empty());
        let mut standard = vec![
            ("x-message-id".to_owned(), id.clone()),
            ("x-topic".to_owned(), message.topic.clone()),
            ("x-attempt".to_owned(), message.attempt.to_string()),
        ];
        if let Some(key) = key {
            standard.push(("x-message-key".to_owned(), key.to_owned()));
        }
        let assembled = assemble(
            Groups {
                standard,
                row: &message.headers,
                auth: None,
                statics: &self.static_headers,
            },
            &[],
            |_, _| true,
        );
        log_dropped(&self.name, &id, &assembled);

        // Built by hand so the member order is exactly DST-50's, whatever serde_json's map is.
        let headers = assembled
            .headers
            .iter()
            .map(|(name, value)| format!("{}:{}", json_string(name), json_string(value)))
            .collect::<Vec<_>>()
            .join(",");
        let members = [
            ("kind", json_string("delivery")),
            ("destination", json_string(&self.name)),
            ("messageId", json_string(&id)),
            // Issue 14 item 8: which id is which. `messageId` (DST-50) is the outbox row's
            // id; `outboxId` says so by name, and `inboxId` is the inbox row a push relay
            // forwarded it from (the one a webhook's 202 answer named), or null.
            ("outboxId", json_string(&id)),
            (
                "inboxId",
                message
                    .headers
                    .iter()
                    .find(|(name, _)| name.eq_ignore_ascii_case("x-inbox-id"))
                    .map_or_else(|| "null".to_owned(), |(_, value)| json_string(value)),
            ),
            ("topic", json_string(&message.topic)),
            ("key", key.map_or_else(|| "null".to_owned(), json_string)),
            (
                "aggregateType",
                message
                    .aggregate_type
                    .as_deref()
                    .map_or_else(|| "null".to_owned(), json_string),
            ),
            ("attempt", message.attempt.to_string()),
            ("headers", format!("{{{headers}}}")),
            ("payload", payload),
            ("deliveredAt", json_string(&rfc3339_millis(now))),
        ];
        let body = members
            .iter()
            .map(|(name, value)| format!("\"{name}\":{value}"))
            .collect::<Vec<_>>()
            .join(",");
        Ok(format!("{{{body}}}\n"))
    }
}

#[async_trait::async_trait]
impl Destination for LogDestination {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> DestinationType {
        DestinationType::Log
    }

    fn readiness(&self) -> Vec<ReadinessComponent> {
        Vec::new()
    }

    /// Every line is written and flushed within its publish; nothing waits here.
    async fn close(&self) {}

    async fn publish(&self, message: &OutgoingMessage) -> Outcome {
        let line = match self.line(message, SystemTime::now()) {
            Ok(line) => line,
            Err(reason) => return Outcome::failed(reason),
        };
        let sink = Arc::clone(&self.sink);
        // Blocking file and terminal I/O stays off the async workers.
        let written = tokio::task::spawn_blocking(move || {
            let mut sink = sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let (target, result) = match &mut *sink {
                Sink::Stdout => {
                    let mut out = std::io::stdout().lock();
                    (
                        "stdout".to_owned(),
                        out.write_all(line.as_bytes()).and_then(|()| out.flush()),
                    )
                }
                Sink::File { path, file } => (
                    path.display().to_string(),
                    file.write_all(line.as_bytes()).and_then(|()| file.flush()),
                ),
            };
            result.map_err(|err| format!("Write to {target} failed: {err}"))
        })
        .await;
        match written {
            Ok(Ok(())) => Outcome::Delivered,
            Ok(Err(reason)) => Outcome::failed(redact(&reason)),
            Err(join) => Outcome::failed(redact(&format!("Write to the log failed: {join}"))),
        }
    }
}

fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// The payload as one-line JSON with its member order kept: JSON whitespace outside strings is
/// dropped (a string cannot hold a raw line break, so the result is one line). `None` when the
/// text is not JSON.
fn compact_json(text: &str) -> Option<String> {
    serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
    Some(out)
}

/// RFC 3339 UTC with milliseconds, e.g. `2026-11-30T12:00:00.123Z`.
fn rfc3339_millis(now: SystemTime) -> String {
    let millis = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let millis = u64::try_from(millis).unwrap_or(u64::MAX);
    let (days, ms_of_day) = (millis / 86_400_000, millis % 86_400_000);
    let (year, month, day) = civil_from_days(days);
    let secs = ms_of_day / 1000;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        ms_of_day % 1000
    )
}

/// Days since 1970-01-01 to a (year, month, day) of the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`, for non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(millis: u64) -> String {
        rfc3339_millis(SystemTime::UNIX_EPOCH + Duration::from_millis(millis))
    }

    #[test]
    fn dst_50_delivered_at_is_rfc3339_utc_millis() {
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_796_040_000_123), "2026-11-30T12:00:00.123Z");
        assert_eq!(at(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        assert_eq!(at(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn dst_50_payload_is_compacted_with_order_and_strings_kept() {
        let text = "{\n  \"z\": 1,\n  \"a\": \"x y\\\" \\n\",\n  \"m\": [1, 2]\n}";
        assert_eq!(
            compact_json(text).unwrap(),
            r#"{"z":1,"a":"x y\" \n","m":[1,2]}"#
        );
        assert_eq!(
            compact_json("\"only a string\"").unwrap(),
            "\"only a string\""
        );
        assert_eq!(compact_json("{not json"), None);
    }
}
