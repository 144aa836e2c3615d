package inbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"
)

// Message is what a handler receives (pull.md §8). It never carries the claim token.
type Message struct {
	ID             string // canonical lower-case UUID text
	Source         string
	IdempotencyKey string
	AggregateID    *string
	EventType      *string
	Payload        json.RawMessage // the stored JSON value, as raw bytes
	Attempt        int             // failed deliveries so far; 0 on the first delivery
	CorrelationID  *string
	Headers        map[string]string // never nil
	CreatedAt      time.Time         // UTC
}

// Tx is the handler transaction, restricted to running statements: the library owns commit and
// rollback (PULL-35).
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// handlerTx is what the handler sees of its transaction: a *sql.Tx, or on SQLite a
// connection inside BEGIN IMMEDIATE (txConn).
type handlerTx struct{ tx Tx }

func (h handlerTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return h.tx.ExecContext(ctx, q, args...)
}
func (h handlerTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return h.tx.QueryContext(ctx, q, args...)
}
func (h handlerTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return h.tx.QueryRowContext(ctx, q, args...)
}

// Handler does the work for one message inside tx. ctx is cancelled when the lease is lost or
// the shutdown grace expires; a handler must honour it. Returning nil completes the message;
// returning an error rolls back and applies the retry policy.
type Handler func(ctx context.Context, msg Message, tx Tx) error

// parseHeaders turns a JSON object into a string map: a non-string value becomes its JSON text;
// NULL, empty or {} give an empty map (PULL-55).
func parseHeaders(raw []byte) (map[string]string, error) {
	out := map[string]string{}
	if len(raw) == 0 || string(raw) == "null" {
		return out, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for k, v := range m {
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			out[k] = s
		} else {
			out[k] = string(v)
		}
	}
	return out, nil
}
