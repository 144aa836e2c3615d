package inbox

import "time"

// Level is the level of a log line (PULL-53).
type Level int

// Log levels.
const (
	LevelDebug Level = iota
	LevelInfo
	LevelWarn
	LevelError
)

func (l Level) String() string {
	switch l {
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarn:
		return "warn"
	default:
		return "error"
	}
}

// Fields are the structured fields of a log line: source, messageId, attempt, correlationId,
// error (redacted) and, for a retry, delayMs. The token and the payload never appear.
type Fields map[string]any

// Logger receives the worker's log lines. Without one the worker prints nothing.
type Logger interface {
	Log(level Level, msg string, fields Fields)
}

// LoggerFunc adapts a function to Logger.
type LoggerFunc func(level Level, msg string, fields Fields)

// Log calls f.
func (f LoggerFunc) Log(level Level, msg string, fields Fields) { f(level, msg, fields) }

func (w *Worker) log(level Level, msg string, m *claimed, err error, extra Fields) {
	if w.cfg.logger == nil {
		return
	}
	f := Fields{"source": w.cfg.source}
	if m != nil {
		f["messageId"] = m.msg.ID
		f["attempt"] = m.msg.Attempt
		if m.msg.CorrelationID != nil {
			f["correlationId"] = *m.msg.CorrelationID
		}
	}
	if err != nil {
		f["error"] = RedactedErrorText(err)
	}
	for k, v := range extra {
		if d, ok := v.(time.Duration); ok {
			v = int64(d / time.Millisecond)
		}
		f[k] = v
	}
	w.cfg.logger.Log(level, msg, f)
}
