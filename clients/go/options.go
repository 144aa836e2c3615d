package inbox

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Dialect selects the SQL that the worker runs (pull.md §5).
type Dialect string

// The dialects of PULL-56. PostgreSQL, MySQL/MariaDB and SQLite statements ship in this version.
const (
	PostgreSQL Dialect = "postgresql"
	SQLServer  Dialect = "sqlserver"
	MySQL      Dialect = "mysql"
	SQLite     Dialect = "sqlite"
)

// Defaults of PULL-56.
const (
	DefaultBatchSize      = 10
	DefaultLease          = 30 * time.Second
	DefaultMaxConcurrency = 1
	DefaultPollInterval   = time.Second
	DefaultShutdownGrace  = 30 * time.Second
	maxLeaseMs            = 2147483647
)

// Schema maps the inbox table and its pull-path columns (PULL-5). An empty field keeps the
// default name.
type Schema struct {
	Table          string
	ID             string
	Source         string
	Consumption    string
	State          string
	IdempotencyKey string
	AggregateID    string
	EventType      string
	Payload        string
	Headers        string
	CorrelationID  string
	Attempt        string
	ScheduledAt    string
	CreatedAt      string
	ClaimToken     string
	ClaimedAt      string
	LeaseExpiresAt string
	ProcessedAt    string
	LastError      string
}

// names returns the contract placeholder names ({inbox}, {id}, ...) and their mapped names, in
// the order of PULL-5 (table first).
func (s Schema) names() [][2]string {
	pick := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	return [][2]string{
		{"inbox", pick(s.Table, "inbox")},
		{"id", pick(s.ID, "id")},
		{"source", pick(s.Source, "source")},
		{"consumption", pick(s.Consumption, "consumption")},
		{"state", pick(s.State, "state")},
		{"idempotency_key", pick(s.IdempotencyKey, "idempotency_key")},
		{"aggregate_id", pick(s.AggregateID, "aggregate_id")},
		{"event_type", pick(s.EventType, "event_type")},
		{"payload", pick(s.Payload, "payload")},
		{"headers", pick(s.Headers, "headers")},
		{"correlation_id", pick(s.CorrelationID, "correlation_id")},
		{"attempt", pick(s.Attempt, "attempt")},
		{"scheduled_at", pick(s.ScheduledAt, "scheduled_at")},
		{"created_at", pick(s.CreatedAt, "created_at")},
		{"claim_token", pick(s.ClaimToken, "claim_token")},
		{"claimed_at", pick(s.ClaimedAt, "claimed_at")},
		{"lease_expires_at", pick(s.LeaseExpiresAt, "lease_expires_at")},
		{"processed_at", pick(s.ProcessedAt, "processed_at")},
		{"last_error", pick(s.LastError, "last_error")},
	}
}

// Options configure a Worker (pull.md §9). A zero BatchSize, Lease, MaxConcurrency or
// PollInterval means the default (PULL-57); a negative value is an error.
type Options struct {
	// Source is the inbox source the worker claims from. Required.
	Source string
	// BatchSize is the most rows one claim takes: 1 to 500, default 10.
	BatchSize int
	// Lease is how long a claim owns a row before renewal: 3 ms to 2147483647 ms, default 30 s.
	Lease time.Duration
	// MaxConcurrency is how many handlers run at once, default 1; the effective value is
	// min(MaxConcurrency, BatchSize). Raise it only when the handler is safe to run for two
	// aggregates at the same time.
	MaxConcurrency int
	// PollInterval is the wait after an empty or failed claim, default 1 s.
	PollInterval time.Duration
	// ShutdownGrace is how long running handlers may finish after a stop request. Zero means
	// the default of 30 s; use a tiny value such as time.Nanosecond to abandon at once.
	ShutdownGrace time.Duration
	// Dialect selects the SQL; empty means PostgreSQL.
	Dialect Dialect
	// Schema maps the table and column names; empty fields keep the default names.
	Schema Schema
	// RetryPolicy decides retry or dead letter after a handler failure; nil means the default
	// policy (PULL-60).
	RetryPolicy RetryPolicy
	// Logger receives the log lines of PULL-53; nil means silent.
	Logger Logger
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// config is the validated, defaulted form of Options.
type config struct {
	source         string
	batchSize      int
	lease          time.Duration
	leaseMs        int64
	maxConcurrency int
	pollInterval   time.Duration
	shutdownGrace  time.Duration
	dialect        Dialect
	names          [][2]string
	policy         RetryPolicy
	logger         Logger
}

// validate applies defaults and reports the first failing rule of PULL-56 with its exact
// message (an error for which errors.Is(err, ErrInvalidOptions) holds). It never opens a
// connection.
func (o Options) validate() (*config, error) {
	c := &config{source: o.Source}
	if strings.TrimSpace(o.Source) == "" || utf8.RuneCountInString(o.Source) > 255 {
		return nil, invalidOption("The source is mandatory.")
	}
	switch {
	case o.BatchSize == 0:
		c.batchSize = DefaultBatchSize
	case o.BatchSize < 1 || o.BatchSize > 500:
		return nil, invalidOption("The batch size must be between 1 and 500.")
	default:
		c.batchSize = o.BatchSize
	}
	switch {
	case o.Lease == 0:
		c.lease = DefaultLease
	case o.Lease < 3*time.Millisecond || o.Lease > maxLeaseMs*time.Millisecond:
		return nil, invalidOption("The lease must be between 3 ms and 2147483647 ms.")
	default:
		c.lease = o.Lease
	}
	c.leaseMs = int64(c.lease / time.Millisecond)
	switch {
	case o.MaxConcurrency == 0:
		c.maxConcurrency = DefaultMaxConcurrency
	case o.MaxConcurrency < 1:
		return nil, invalidOption("The maximum concurrency must be at least 1.")
	default:
		c.maxConcurrency = o.MaxConcurrency
	}
	if c.maxConcurrency > c.batchSize {
		c.maxConcurrency = c.batchSize
	}
	switch {
	case o.PollInterval == 0:
		c.pollInterval = DefaultPollInterval
	case o.PollInterval < 0:
		return nil, invalidOption("The poll interval must be greater than 0.")
	default:
		c.pollInterval = o.PollInterval
	}
	switch {
	case o.ShutdownGrace == 0:
		c.shutdownGrace = DefaultShutdownGrace
	case o.ShutdownGrace < 0:
		return nil, invalidOption("The shutdown grace must not be negative.")
	default:
		c.shutdownGrace = o.ShutdownGrace
	}
	switch o.Dialect {
	case "":
		c.dialect = PostgreSQL
	case PostgreSQL, SQLServer, MySQL, SQLite:
		c.dialect = o.Dialect
	default:
		return nil, invalidOption(fmt.Sprintf("The dialect %s is unknown. Use postgresql, sqlserver, mysql or sqlite.", o.Dialect))
	}
	c.names = o.Schema.names()
	for _, n := range c.names {
		if !identRe.MatchString(n[1]) {
			return nil, invalidOption(fmt.Sprintf("The schema name %s is not a plain SQL identifier.", n[1]))
		}
	}
	if c.dialect == SQLServer {
		return nil, unsupportedDialect(c.dialect)
	}
	if c.dialect == SQLite {
		// One row at a time: SQLite's single write lock would make a second claimed row wait
		// for the first row's handler (PULL-28).
		c.batchSize, c.maxConcurrency = 1, 1
	}
	c.policy = o.RetryPolicy
	if c.policy == nil {
		c.policy = DefaultRetryPolicy()
	}
	c.logger = o.Logger
	return c, nil
}
