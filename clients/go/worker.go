package inbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
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
	// batch is the opt-in batch handler (NewBatchWorker); nil for a per-message worker.
	batch BatchHandler

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
		if w.batch != nil {
			r.runWholeBatch(rows)
		} else {
			r.runBatch(rows)
		}
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

// errLock is the MySQL lock step's failure (pull.md §5.3); it is transient (PULL-19).
var errLock = errors.New("inbox pull claim: GET_LOCK did not acquire the per-source claim lock")

// busyTimeout is the SQLite busy timeout of every connection (PULL-18, PULL-58).
const busyTimeout = 10000

// conn takes a connection for purpose p; on SQLite it sets the busy timeout first.
func (w *Worker) conn(ctx context.Context, p Purpose) (*sql.Conn, error) {
	conn, err := w.db.Conn(withPurpose(ctx, p))
	if err != nil {
		return nil, err
	}
	if w.cfg.dialect == SQLite {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout)); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return conn, nil
}

// txConn is a transaction on SQLite: BEGIN IMMEDIATE takes the write lock at the start, which
// database/sql's BeginTx cannot ask of every driver (PULL-28).
type txConn struct {
	conn *sql.Conn
	ctx  context.Context
	open bool
}

func beginImmediate(ctx context.Context, conn *sql.Conn) (*txConn, error) {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return nil, err
	}
	return &txConn{conn: conn, ctx: ctx, open: true}, nil
}

func (t *txConn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.conn.ExecContext(ctx, q, args...)
}
func (t *txConn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.conn.QueryContext(ctx, q, args...)
}
func (t *txConn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.conn.QueryRowContext(ctx, q, args...)
}
func (t *txConn) Commit() error {
	if !t.open {
		return sql.ErrTxDone
	}
	t.open = false
	_, err := t.conn.ExecContext(t.ctx, "COMMIT")
	return err
}
func (t *txConn) Rollback() error {
	if !t.open {
		return sql.ErrTxDone
	}
	t.open = false
	_, err := t.conn.ExecContext(t.ctx, "ROLLBACK")
	return err
}

// workTx is the handler transaction the worker owns.
type workTx interface {
	Tx
	Commit() error
	Rollback() error
}

// begin starts the handler transaction: BEGIN IMMEDIATE on SQLite, the default elsewhere.
func (w *Worker) begin(ctx context.Context, conn *sql.Conn) (workTx, error) {
	if w.cfg.dialect == SQLite {
		return beginImmediate(ctx, conn)
	}
	return conn.BeginTx(ctx, nil)
}

// claim runs the claim on its own connection and commits before any handler starts
// (PULL-21): one statement in a READ COMMITTED transaction (PostgreSQL), BEGIN IMMEDIATE
// (SQLite), or the locked sequence of pull.md §5.3 (MySQL). A stop request does not interrupt a
// claim in flight.
func (w *Worker) claim(base context.Context) ([]*claimed, error) {
	ctx, cancel := context.WithTimeout(base, claimTimeout)
	defer cancel()
	conn, err := w.conn(ctx, PurposeClaim)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	token := newToken()
	values := map[string]any{
		"source": w.cfg.source, "batch": int64(w.cfg.batchSize), "lease_ms": w.cfg.leaseMs,
		"cand_limit": int64(candLimit(w.cfg.batchSize)), "token": token,
	}
	var out []*claimed
	switch w.cfg.dialect {
	case MySQL:
		out, err = w.claimMySQL(ctx, conn, values, token)
	case SQLite:
		var tx *txConn
		if tx, err = beginImmediate(ctx, conn); err != nil {
			return nil, err
		}
		defer tx.Rollback() //nolint:errcheck
		text, args := w.sql.claim.args(values, nil)
		if out, err = scanClaimed(tx.QueryContext(ctx, text, args...)); err == nil {
			err = tx.Commit()
		}
	default:
		var tx *sql.Tx
		if tx, err = conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}); err != nil {
			return nil, err
		}
		defer tx.Rollback() //nolint:errcheck
		text, args := w.sql.claim.args(values, nil)
		if out, err = scanClaimed(tx.QueryContext(ctx, text, args...)); err == nil {
			err = tx.Commit()
		}
	}
	if err != nil {
		return nil, err
	}
	for _, c := range out {
		c.token = token
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

// claimMySQL runs the seven steps of pull.md §5.3 on conn. Once the lock is held, a failure
// closes the connection instead of returning it to the pool, which releases the named lock
// (PULL-20).
func (w *Worker) claimMySQL(ctx context.Context, conn *sql.Conn, values map[string]any, token string) ([]*claimed, error) {
	m := w.sql.mysql
	text, args := m.lock.args(values, nil)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, text, args...).Scan(&got); err != nil {
		return nil, err
	}
	if !got.Valid || got.Int64 != 1 {
		return nil, errLock
	}
	out, err := func() ([]*claimed, error) {
		tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return nil, err
		}
		defer tx.Rollback() //nolint:errcheck
		text, args := w.sql.claim.args(values, nil)
		rows, err := tx.QueryContext(ctx, text, args...)
		if err != nil {
			return nil, err
		}
		var ids []any
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		var out []*claimed
		if len(ids) > 0 {
			text, args := m.update.args(values, ids)
			if _, err := tx.ExecContext(ctx, text, args...); err != nil {
				return nil, err
			}
			text, args = m.fetch.args(values, ids)
			if out, err = scanClaimed(tx.QueryContext(ctx, text, args...)); err != nil {
				return nil, err
			}
		}
		return out, tx.Commit()
	}()
	if err == nil {
		text, args := m.unlock.args(values, nil)
		_, err = conn.ExecContext(ctx, text, args...)
	}
	if err != nil {
		// driver.ErrBadConn makes database/sql close the connection, not pool it.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return nil, err
	}
	return out, nil
}

// scanClaimed reads the claimed rows (PULL-22) and closes rows.
func scanClaimed(rows *sql.Rows, err error) ([]*claimed, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*claimed
	for rows.Next() {
		var (
			c                  claimed
			agg, evt, corr     sql.NullString
			payload, headers   []byte
			attempt            int64
			scheduled, created dbTime
		)
		if err := rows.Scan(&c.msg.ID, &c.msg.Source, &c.msg.IdempotencyKey, &agg, &evt, &payload, &attempt, &corr, &headers, &scheduled, &created); err != nil {
			return nil, err
		}
		c.msg.AggregateID = nullable(agg)
		c.msg.EventType = nullable(evt)
		c.msg.CorrelationID = nullable(corr)
		c.msg.Attempt = int(attempt)
		c.msg.CreatedAt = created.t.UTC()
		c.scheduled = scheduled.t
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
	return out, rows.Err()
}

// dbTime scans a point in time as each driver returns it: a time.Time, or text in SQLite's
// fixed form "YYYY-MM-DDTHH:MM:SS.SSSZ" (PULL-6) or MySQL's "YYYY-MM-DD HH:MM:SS.ffffff" (UTC).
type dbTime struct{ t time.Time }

func (d *dbTime) Scan(v any) error {
	var text string
	switch x := v.(type) {
	case time.Time:
		d.t = x
		return nil
	case []byte:
		text = string(x)
	case string:
		text = x
	default:
		return fmt.Errorf("inbox: a time column holds %T", v)
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, text); err == nil {
			d.t = t.UTC()
			return nil
		}
	}
	return fmt.Errorf("inbox: %q is not a UTC time", text)
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
	if r.w.cfg.dialect == SQLite {
		// No renewal on SQLite: while the handler transaction holds the write lock no other
		// connection can take the row or renew it (PULL-28, PULL-39).
		close(c.renewDone)
		return
	}
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
		n, err := w.exec(r.base, PurposeRenew, timeout, w.sql.renew, map[string]any{"lease_ms": w.cfg.leaseMs, "id": c.msg.ID, "token": c.token})
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
func (w *Worker) exec(base context.Context, p Purpose, timeout time.Duration, st stmt, values map[string]any) (int64, error) {
	ctx, cancel := context.WithTimeout(base, timeout)
	defer cancel()
	conn, err := w.conn(ctx, p)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	query, args := st.args(values, nil)
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
	conn, err := w.conn(r.base, PurposeHandler)
	if err != nil {
		r.stopRenewal(c)
		w.log(LevelError, "The message was abandoned.", c, err, nil)
		return
	}
	defer conn.Close()
	tx, err := w.begin(r.base, conn)
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
		query, args := w.sql.complete.args(map[string]any{"id": c.msg.ID, "token": c.token}, nil)
		res, err := tx.ExecContext(ctx, query, args...)
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
			err = panicError(p)
		}
	}()
	return h(ctx, msg, tx)
}

func panicError(p any) error { return fmt.Errorf("the handler panicked: %v", p) }

// fail writes Retry or Dead outside the rolled-back handler transaction (PULL-46).
func (r *run) fail(c *claimed, action FailureAction, cause error) {
	w := r.w
	text := RedactedErrorText(cause)
	var (
		n   int64
		err error
	)
	if action.IsDeadLetter() {
		n, err = w.exec(r.base, PurposeFailure, writeTimeout, w.sql.dead, map[string]any{"error": text, "id": c.msg.ID, "token": c.token})
	} else {
		n, err = w.exec(r.base, PurposeFailure, writeTimeout, w.sql.retry, map[string]any{"delay_ms": action.delayMs(), "error": text, "id": c.msg.ID, "token": c.token})
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
