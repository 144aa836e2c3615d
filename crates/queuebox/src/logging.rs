//! QueueBox's log lines (operations.md OPS-31..33): one JSON object or one text line per event,
//! on standard error, with the format and level switchable after the configuration loads.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use queuebox_config::{LogFormat, LogLevel};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// The live logging settings. Start-up sets them twice: from `QUEUEBOX_LOG_*` before the
/// configuration loads (so a configuration error is logged in the intended format, OPS-23 step
/// 2), then from `log.format` / `log.level`.
#[derive(Clone)]
pub struct LogHandle {
    format: Arc<AtomicU8>,
    level: Arc<AtomicU8>,
}

const FORMAT_JSON: u8 = 0;
const FORMAT_TEXT: u8 = 1;

impl LogHandle {
    pub fn set(&self, format: LogFormat, level: LogLevel) {
        let format = match format {
            LogFormat::Json => FORMAT_JSON,
            LogFormat::Text => FORMAT_TEXT,
        };
        self.format.store(format, Ordering::Relaxed);
        self.level
            .store(level_rank(to_tracing(level)), Ordering::Relaxed);
    }
}

/// Installs the global subscriber with the defaults, or the `QUEUEBOX_LOG_FORMAT` and
/// `QUEUEBOX_LOG_LEVEL` values when they are valid; invalid ones are reported by the
/// configuration load itself.
pub fn init(env: &[(String, String)]) -> LogHandle {
    let handle = LogHandle {
        format: Arc::new(AtomicU8::new(FORMAT_JSON)),
        level: Arc::new(AtomicU8::new(level_rank(Level::INFO))),
    };
    let lookup = |name: &str| {
        env.iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.to_ascii_lowercase())
    };
    if lookup("QUEUEBOX_LOG_FORMAT").as_deref() == Some("text") {
        handle.format.store(FORMAT_TEXT, Ordering::Relaxed);
    }
    if let Some(level) = lookup("QUEUEBOX_LOG_LEVEL").and_then(|l| parse_level(&l)) {
        handle.level.store(level_rank(level), Ordering::Relaxed);
    }
    let layer = LineLayer {
        handle: handle.clone(),
    };
    // A second init (tests calling `main` logic twice) keeps the first subscriber.
    let _ = tracing_subscriber::registry().with(layer).try_init();
    handle
}

fn parse_level(text: &str) -> Option<Level> {
    match text {
        "error" => Some(Level::ERROR),
        "warn" => Some(Level::WARN),
        "info" => Some(Level::INFO),
        "debug" => Some(Level::DEBUG),
        "trace" => Some(Level::TRACE),
        _ => None,
    }
}

fn to_tracing(level: LogLevel) -> Level {
    match level {
        LogLevel::Error => Level::ERROR,
        LogLevel::Warn => Level::WARN,
        LogLevel::Info => Level::INFO,
        LogLevel::Debug => Level::DEBUG,
        LogLevel::Trace => Level::TRACE,
    }
}

/// Higher is more verbose.
fn level_rank(level: Level) -> u8 {
    match level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        Level::DEBUG => 4,
        Level::TRACE => 5,
    }
}

struct LineLayer {
    handle: LogHandle,
}

impl<S: Subscriber> Layer<S> for LineLayer {
    // Filtering happens here rather than in `enabled`, because `enabled` answers are cached
    // per call site and the level changes once the configuration is loaded.
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        // The RabbitMQ client logs each returned message whole (its payload included) and each
        // channel closed on purpose; the connector logs what matters itself, redacted.
        if meta.target().starts_with("lapin") || meta.target().starts_with("amq_protocol") {
            return;
        }
        // OPS-31: log.level applies to QueueBox's own events; dependencies show warn and up.
        let limit = if meta.target().starts_with("queuebox") {
            self.handle.level.load(Ordering::Relaxed)
        } else {
            level_rank(Level::WARN)
        };
        if level_rank(*meta.level()) > limit {
            return;
        }
        let mut fields = FieldCollector::default();
        event.record(&mut fields);
        let line = match self.handle.format.load(Ordering::Relaxed) {
            FORMAT_TEXT => text_line(meta.level(), meta.target(), &fields),
            _ => json_line(meta.level(), meta.target(), &fields),
        };
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(line.as_bytes());
    }
}

#[derive(Default)]
struct FieldCollector {
    message: String,
    fields: Vec<(&'static str, serde_json::Value)>,
}

impl Visit for FieldCollector {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            self.fields.push((field.name(), value.into()));
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.fields.push((field.name(), value.into()));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.fields.push((field.name(), value.into()));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.fields.push((field.name(), value.into()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = text;
        } else {
            self.fields.push((field.name(), text.into()));
        }
    }
}

fn json_line(level: &Level, target: &str, fields: &FieldCollector) -> String {
    let mut object = serde_json::Map::new();
    object.insert("timestamp".into(), rfc3339_now().into());
    object.insert("level".into(), level.as_str().into());
    object.insert("target".into(), target.into());
    object.insert("message".into(), fields.message.clone().into());
    object.insert("service".into(), "queuebox".into());
    for (name, value) in &fields.fields {
        object.insert((*name).to_owned(), value.clone());
    }
    let mut line = serde_json::Value::Object(object).to_string();
    line.push('\n');
    line
}

fn text_line(level: &Level, target: &str, fields: &FieldCollector) -> String {
    let mut line = format!(
        "{} {} {}: {}",
        rfc3339_now(),
        level.as_str(),
        target,
        fields.message
    );
    for (name, value) in &fields.fields {
        match value {
            serde_json::Value::String(text) => {
                let _ = write!(line, " {name}={text:?}");
            }
            other => {
                let _ = write!(line, " {name}={other}");
            }
        }
    }
    line.push('\n');
    line
}

/// Now as RFC 3339 UTC with milliseconds (OPS-32), without a date-time dependency.
fn rfc3339_now() -> String {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format_rfc3339_millis(since_epoch.as_millis() as i64)
}

fn format_rfc3339_millis(epoch_ms: i64) -> String {
    let days = epoch_ms.div_euclid(86_400_000);
    let ms_of_day = epoch_ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_32_timestamps_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(format_rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_rfc3339_millis(1_709_210_096_789),
            "2024-02-29T12:34:56.789Z"
        );
        assert_eq!(
            format_rfc3339_millis(4_102_444_799_999),
            "2099-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn ops_32_json_line_has_the_fixed_fields() {
        let fields = FieldCollector {
            message: "QueueBox started".into(),
            fields: vec![("version", "0.1.0".into())],
        };
        let line = json_line(&Level::INFO, "queuebox::run", &fields);
        let value: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(value["level"], "INFO");
        assert_eq!(value["target"], "queuebox::run");
        assert_eq!(value["message"], "QueueBox started");
        assert_eq!(value["service"], "queuebox");
        assert_eq!(value["version"], "0.1.0");
        assert!(value["timestamp"].as_str().unwrap().ends_with('Z'));
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
    }

    #[test]
    fn ops_33_text_line_shape() {
        let fields = FieldCollector {
            message: "Applied migration 1 (create outbox) in 3 ms.".into(),
            fields: vec![("version", 1.into())],
        };
        let line = text_line(&Level::WARN, "queuebox_store_postgres", &fields);
        let rest = line.split_once(' ').unwrap().1;
        assert_eq!(
            rest,
            "WARN queuebox_store_postgres: Applied migration 1 (create outbox) in 3 ms. version=1\n"
        );
    }
}
