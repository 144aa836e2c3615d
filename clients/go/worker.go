package inbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// ConnSource lends a dedicated connection on request (PULL-34). *sql.DB satisfies it. The
// worker never uses a single connection for everything: the claim, each renewal tick, each
// handler transaction and each failure write take their own.
type ConnSource interface {
	Conn(ctx context.Context) (*sql.Conn, error)
}

// Purpose tells a ConnSource what a connection is for; read it with PurposeOf(ctx).
type Purpose string

// The purposes of the worker's connections.
const (
	PurposeClaim   Purpose = "claim"
	PurposeRenew   Purpose = "renew"
	PurposeHandler Purpose = "handler"
	PurposeFailure Purpose = "failure"
)

type purposeKey struct{}

// PurposeOf returns the purpose the worker attached to the context it passes to
// ConnSource.Conn ("" when there is none).
func PurposeOf(ctx context.Context) Purpose {
	p, _ := ctx.Value(purposeKey{}).(Purpose)
	return p
}

func withPurpose(ctx context.Context, p Purpose) context.Context {
	return context.WithValue(ctx, purposeKey{}, p)
}

// claimTimeout is the client-side timeout of a claim (PULL-20): never less than 30 s.
const claimTimeout = 30 * time.Second

// writeTimeout bounds a failure write on its own connection.
const writeTimeout = 30 * time.Second

// Worker runs the pull loop of pull.md §7 for one source.
type Worker struct {
	db      ConnSource
	cfg     *config
	sql     *statements
	handler Handler

	mu       sync.Mutex
	running  bool
	stopCh   chan struct{} // closed by the stop request of the current run
	stopOnce *sync.Once
}

// NewWorker validates the options (before any connection is opened) and builds a worker. Its
// errors wrap ErrInvalidOptions, ErrUnsupportedDialect, ErrNoConnSource or ErrNoHandler.
func NewWorker(db ConnSource, opts Options, handler Handler) (*Worker, error) {
	cfg, err := opts.validate()
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, ErrNoConnSource
	}
	if handler == nil {
		return nil, ErrNoHandler
	}
	st, err := renderStatements(cfg.dialect, cfg.names)
	if err != nil {
		return nil, err
	}
	return &Worker{db: db, cfg: cfg, sql: st, handler: handler}, nil
}

// Stop asks a running Run to stop (PULL-48): no claim starts after it, rows whose handler has
// not started are abandoned, running handlers get the shutdown grace. Stop is idempotent; a
// Stop while no Run is active does nothing (PULL-51).
func (w *Worker) Stop() {
	w.mu.Lock()
	ch, once := w.stopCh, w.stopOnce
	w.mu.Unlock()
	if ch != nil {
		once.Do(func() { close(ch) })
	}
}

// Run claims and handles messages until ctx is done or Stop is called, then shuts down
// gracefully and returns nil. It returns an error (ErrAlreadyRunning) only when the worker is
// already running.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return ErrAlreadyRunning
	}
	w.running = true
	stopCh := make(chan struct{})
	once := &sync.Once{}
	w.stopCh, w.stopOnce = stopCh, once
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running = false
		w.stopCh, w.stopOnce = nil, nil
		w.mu.Unlock()
	}()

	// A cancelled ctx is a stop request.
	runDone := make(chan struct{})
	defer close(runDone)
	go func() {
		select {
		case <-ctx.Done():
			once.Do(func() { close(stopCh) })
		case <-runDone:
		}
	}()

	// The grace context: cancelled when the shutdown grace expires after a stop request. It
	// keeps the values of ctx but not its cancellation.
	graceCtx, graceCancel := context.WithCancel(detached{ctx})
	defer graceCancel()
	var graceExpired int32
	go func() {
		select {
		case <-stopCh:
		case <-runDone:
			return
		}
		t := time.NewTimer(w.cfg.shutdownGrace)
		defer t.Stop()
		select {
		case <-t.C:
			atomic.StoreInt32(&graceExpired, 1)
			graceCancel()
		case <-runDone:
		}
	}()

	r := &run{w: w, stopCh: stopCh, graceCtx: graceCtx, graceExpired: &graceExpired, base: detached{ctx}}
	for {
		if r.stopped() {
			return nil
		}
		rows, err := w.claim(r.base)
		if err != nil {
			w.log(LevelWarn, "The claim failed.", nil, err, nil)
			if !r.sleep(w.cfg.pollInterval) {
				return nil
			}
			continue
		}
		if len(rows) == 0 {
			if !r.sleep(w.cfg.pollInterval) {
				return nil
			}
			continue
		}
		r.runBatch(rows)
	}
}

// detached keeps the values of a parent context but never its cancellation or deadline.
type detached struct{ parent context.Context }

func (detached) Deadline() (time.Time, bool) { return time.Time{}, false }
func (detached) Done() <-chan struct{}       { return nil }
func (detached) Err() error                  { return nil }
func (d detached) Value(key any) any         { return d.parent.Value(key) }

type run struct {
	w            *Worker
	stopCh       chan struct{}
	graceCtx     context.Context
	graceExpired *int32
	base         context.Context
}

func (r *run) stopped() bool {
	select {
	case <-r.stopCh:
		return true
	default:
		return false
	}
}

// sleep waits d; a stop request interrupts it at once (PULL-37). It reports false on stop.
func (r *run) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stopCh:
		return false
	}
}

// claimed is one claimed row while the worker holds it.
type claimed struct {
	msg        Message
	token      string
	scheduled  time.Time
	payloadErr bool
	lost       int32 // set by the renewal when the lease is lost
	ctx        context.Context
	cancel     context.CancelFunc
	renewStop  chan struct{}
	renewDone  chan struct{}
	stopOnce   sync.Once
}

func newToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func candLimit(batch int) int {
	c := 3 * batch
	if c < 50 {
		c = 50
	}
	if c > 500 {
		c = 500
	}
	return c
}

// claim runs the claim alone in its own short READ COMMITTED transaction and commits before any
// handler starts (PULL-21). A stop request does not interrupt a claim in flight.
func (w *Worker) claim(base context.Context) ([]*claimed, error) {
	ctx, cancel := context.WithTimeout(base, claimTimeout)
	defer cancel()
	conn, err := w.db.Conn(withPurpose(ctx, PurposeClaim))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck
	token := newToken()
	rows, err := tx.QueryContext(ctx, w.sql.claim, w.cfg.source, int64(w.cfg.batchSize), w.cfg.leaseMs, int64(candLimit(w.cfg.batchSize)), token)
	if err != nil {
		return nil, err
	}
	var out []*claimed
	for rows.Next() {
		var (
			c                  claimed
			agg, evt, corr     sql.NullString
			payload, headers   []byte
			attempt            int64
			scheduled, created time.Time
		)
		if err := rows.Scan(&c.msg.ID, &c.msg.Source, &c.msg.IdempotencyKey, &agg, &evt, &payload, &attempt, &corr, &headers, &scheduled, &created); err != nil {
			rows.Close()
			return nil, err
		}
		c.token = token
		c.msg.AggregateID = nullable(agg)
		c.msg.EventType = nullable(evt)
		c.msg.CorrelationID = nullable(corr)
		c.msg.Attempt = int(attempt)
		c.msg.CreatedAt = created.UTC()
		c.scheduled = scheduled
		if json.Valid(payload) {
			c.msg.Payload = json.RawMessage(payload)
		} else {
			c.payloadErr = true
		}
		h, herr := parseHeaders(headers)
		if herr != nil {
			h = map[string]string{}
		}
		c.msg.Headers = h
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, err
	}
	rows.Close()
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.scheduled.Equal(b.scheduled) {
			return a.scheduled.Before(b.scheduled)
		}
		if !a.msg.CreatedAt.Equal(b.msg.CreatedAt) {
			return a.msg.CreatedAt.Before(b.msg.CreatedAt)
		}
		return a.msg.ID < b.msg.ID
	})
	return out, nil
}

func nullable(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	v := s.String
	return &v
}

// runBatch handles a claimed batch with min(maxConcurrency, batchSize, len) slots in claim order
// and returns when every message has an outcome (PULL-36, PULL-38).
func (r *run) runBatch(rows []*claimed) {
	w := r.w
	// Renewal starts for every row as soon as the claim commits (PULL-39).
	for _, c := range rows {
		c.ctx, c.cancel = context.WithCancel(r.graceCtx)
		r.startRenewal(c)
	}
	slots := w.cfg.maxConcurrency
	if len(rows) < slots {
		slots = len(rows)
	}
	sem := make(chan struct{}, slots)
	var wg sync.WaitGroup
	for _, c := range rows {
		acquired := false
		if !r.stopped() {
			select {
			case sem <- struct{}{}:
				acquired = !r.stopped()
				if !acquired {
					<-sem
				}
			case <-r.stopCh:
			}
		}
		if !acquired {
			// Stop: abandon a row whose handler has not started; nothing is written.
			r.stopRenewal(c)
			c.cancel()
			w.log(LevelInfo, "The shutdown abandoned the message, so it spends no attempt.", c, nil, nil)
			continue
		}
		if atomic.LoadInt32(&c.lost) == 1 {
			// Lost while waiting: its handler is never called, nothing is written.
			<-sem
			r.stopRenewal(c)
			c.cancel()
			continue
		}
		wg.Add(1)
		go func(c *claimed) {
			defer wg.Done()
			defer func() { <-sem }()
			defer c.cancel()
			r.process(c)
		}(c)
	}
	wg.Wait()
}

// renewInterval is max(1 ms, floor(leaseMs / 3)) (PULL-43).
func (w *Worker) renewInterval() time.Duration {
	d := time.Duration(w.cfg.leaseMs/3) * time.Millisecond
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}

func (r *run) startRenewal(c *claimed) {
	c.renewStop = make(chan struct{})
	c.renewDone = make(chan struct{})
	go r.renewLoop(c)
}

// stopRenewal stops the row's renewal and waits for a renewal statement in flight.
func (r *run) stopRenewal(c *claimed) {
	c.stopOnce.Do(func() { close(c.renewStop) })
	<-c.renewDone
}

func (r *run) renewLoop(c *claimed) {
	w := r.w
	defer close(c.renewDone)
	interval := w.renewInterval()
	t := time.NewTicker(interval)
	defer t.Stop()
	timeout := w.cfg.lease
	if timeout < time.Second {
		timeout = time.Second
	}
	if timeout > writeTimeout {
		timeout = writeTimeout
	}
	for {
		select {
		case <-c.renewStop:
			return
		case <-t.C:
		}
		select {
		case <-c.renewStop:
			return
		default:
		}
		n, err := w.exec(r.base, PurposeRenew, timeout, w.sql.renew, w.cfg.leaseMs, c.msg.ID, c.token)
		switch {
		case err != nil && !errors.Is(err, errNoRowCount):
			w.log(LevelWarn, "The renewal failed.", c, err, nil)
		case n == 1:
		default:
			atomic.StoreInt32(&c.lost, 1)
			w.log(LevelWarn, "The lease was lost to another worker.", c, nil, nil)
			c.cancel()
			return
		}
	}
}

var errNoRowCount = errors.New("the driver reported no affected-row count")

// errPayloadNotJSON is the failure of PULL-47. Its text is what the specification requires in
// last_error, so it keeps the specification's capital letter and full stop; it is never returned.
var errPayloadNotJSON = errors.New("The payload is not valid JSON.")

// exec runs one statement in autocommit mode on its own connection and returns the affected
// rows.
func (w *Worker) exec(base context.Context, p Purpose, timeout time.Duration, query string, args ...any) (int64, error) {
	ctx, cancel := context.WithTimeout(base, timeout)
	defer cancel()
	conn, err := w.db.Conn(withPurpose(ctx, p))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	res, err := conn.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, errNoRowCount
	}
	return n, nil
}

// process handles one message (PULL-40).
func (r *run) process(c *claimed) {
	w := r.w
	// 1. The handler transaction; its context is not cancelled by a stop request.
	conn, err := w.db.Conn(withPurpose(r.base, PurposeHandler))
	if err != nil {
		r.stopRenewal(c)
		w.log(LevelError, "The message was abandoned.", c, err, nil)
		return
	}
	defer conn.Close()
	tx, err := conn.BeginTx(r.base, nil)
	if err != nil {
		r.stopRenewal(c)
		w.log(LevelError, "The message was abandoned.", c, err, nil)
		return
	}
	defer tx.Rollback() //nolint:errcheck

	if c.payloadErr {
		// PULL-47: skip the handler and dead-letter.
		_ = tx.Rollback()
		r.stopRenewal(c)
		r.fail(c, DeadLetter(), errPayloadNotJSON)
		return
	}

	// 2. The handler.
	herr := callHandler(w.handler, c.ctx, c.msg, handlerTx{tx})
	graceExpired := atomic.LoadInt32(r.graceExpired) == 1
	// 3. Stop the renewal and wait for a statement in flight.
	r.stopRenewal(c)
	lost := atomic.LoadInt32(&c.lost) == 1

	// 4. The outcome.
	switch {
	case graceExpired:
		_ = tx.Rollback()
		w.log(LevelInfo, "The shutdown abandoned the message, so it spends no attempt.", c, nil, nil)
	case lost && herr != nil:
		_ = tx.Rollback()
		w.log(LevelWarn, "The lease was lost, so nothing was written.", c, herr, nil)
	case lost:
		_ = tx.Rollback()
		w.log(LevelWarn, "The lease was lost, so the work was rolled back.", c, nil, nil)
	case herr != nil:
		_ = tx.Rollback()
		r.fail(c, w.cfg.policy.Decide(c.msg, herr), herr)
	default:
		ctx, cancel := context.WithTimeout(r.base, writeTimeout)
		defer cancel()
		res, err := tx.ExecContext(ctx, w.sql.complete, c.msg.ID, c.token)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err != nil {
			_ = tx.Rollback()
			w.log(LevelError, "The message was abandoned.", c, err, nil)
			return
		}
		if n != 1 {
			_ = tx.Rollback()
			w.log(LevelWarn, "The completion affected no row, so the work was rolled back.", c, nil, nil)
			return
		}
		if err := tx.Commit(); err != nil {
			w.log(LevelError, "The message was abandoned.", c, err, nil)
			return
		}
		w.log(LevelDebug, "The message was processed.", c, nil, nil)
	}
}

// callHandler runs the handler; a panic becomes a handler failure.
func callHandler(h Handler, ctx context.Context, msg Message, tx Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the handler panicked: %v", p)
		}
	}()
	return h(ctx, msg, tx)
}

// fail writes Retry or Dead outside the rolled-back handler transaction (PULL-46).
func (r *run) fail(c *claimed, action FailureAction, cause error) {
	w := r.w
	text := RedactedErrorText(cause)
	var (
		n   int64
		err error
	)
	if action.IsDeadLetter() {
		n, err = w.exec(r.base, PurposeFailure, writeTimeout, w.sql.dead, text, c.msg.ID, c.token)
	} else {
		n, err = w.exec(r.base, PurposeFailure, writeTimeout, w.sql.retry, action.delayMs(), text, c.msg.ID, c.token)
	}
	switch {
	case err != nil:
		w.log(LevelError, "The message was abandoned.", c, err, nil)
	case n != 1:
		w.log(LevelWarn, "The failure changed nothing, because the claim was lost.", c, nil, nil)
	case action.IsDeadLetter():
		w.log(LevelError, "The message reached the dead letter.", c, cause, nil)
	default:
		w.log(LevelWarn, "The message retries.", c, cause, Fields{"delayMs": action.delayMs()})
	}
}
