package inbox

// The opt-in batch handler: every message of one claim goes to one handler call in one
// transaction, and all of them complete together in one fenced statement (complete-batch.sql),
// or none does. Each row keeps the single-row rules: its own renewal, its own fence inside the
// one statement, and on failure its own Retry or Dead by the retry policy (pull.md §7.6).

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
)

// BatchHandler does the work for every message of one claim (up to BatchSize, at most one per
// aggregate, in claim order) inside tx. ctx is cancelled when any message's lease is lost or
// the shutdown grace expires. Returning nil completes every message together; returning an
// error rolls back and applies the retry policy to each message.
type BatchHandler func(ctx context.Context, msgs []Message, tx Tx) error

// NewBatchWorker builds a worker with the opt-in batch handler. MaxConcurrency does not apply:
// one batch runs at a time. Its errors are NewWorker's.
func NewBatchWorker(db ConnSource, opts Options, handler BatchHandler) (*Worker, error) {
	if handler == nil {
		return nil, ErrNoHandler
	}
	w, err := NewWorker(db, opts, func(context.Context, Message, Tx) error { return nil })
	if err != nil {
		return nil, err
	}
	w.batch = handler
	return w, nil
}

// runWholeBatch runs one claimed batch through the batch handler, to an outcome for every row.
func (r *run) runWholeBatch(rows []*claimed) {
	w := r.w
	// One context for the handler: any row's lost lease (its renewal cancels it) or the grace
	// cancels the whole batch, whose work can no longer commit.
	ctx, cancel := context.WithCancel(r.graceCtx)
	defer cancel()
	for _, c := range rows {
		c.ctx, c.cancel = ctx, cancel
		r.startRenewal(c)
	}
	stopRenewals := func() {
		for _, c := range rows {
			r.stopRenewal(c)
		}
	}
	var batch []*claimed
	for _, c := range rows {
		if c.payloadErr {
			// PULL-47: the message's failure, not the handler's; the rest of the batch goes on.
			r.stopRenewal(c)
			r.fail(c, DeadLetter(), errPayloadNotJSON)
			continue
		}
		batch = append(batch, c)
	}
	if len(batch) == 0 {
		return
	}
	if r.stopped() {
		// PULL-48 step 2: the handler has not started; nothing is written.
		stopRenewals()
		for _, c := range batch {
			w.log(LevelInfo, "The shutdown abandoned the message, so it spends no attempt.", c, nil, nil)
		}
		return
	}
	abandon := func(err error) {
		for _, c := range batch {
			w.log(LevelError, "The message was abandoned.", c, err, nil)
		}
	}
	conn, err := w.conn(r.base, PurposeHandler)
	if err != nil {
		stopRenewals()
		abandon(err)
		return
	}
	defer conn.Close()
	tx, err := w.begin(r.base, conn)
	if err != nil {
		stopRenewals()
		abandon(err)
		return
	}
	defer tx.Rollback() //nolint:errcheck

	msgs := make([]Message, len(batch))
	for i, c := range batch {
		msgs[i] = c.msg
	}
	herr := callBatchHandler(w.batch, ctx, msgs, handlerTx{tx})
	graceExpired := atomic.LoadInt32(r.graceExpired) == 1
	stopRenewals()
	anyLost := false
	for _, c := range batch {
		anyLost = anyLost || atomic.LoadInt32(&c.lost) == 1
	}
	switch {
	case graceExpired:
		_ = tx.Rollback()
		for _, c := range batch {
			w.log(LevelInfo, "The shutdown abandoned the message, so it spends no attempt.", c, nil, nil)
		}
	case herr != nil:
		// Roll back first: the failure writes run outside the handler's transaction. A lost row
		// gets nothing; every row still owned fails as a single row would.
		_ = tx.Rollback()
		for _, c := range batch {
			if atomic.LoadInt32(&c.lost) == 1 {
				w.log(LevelWarn, "The lease was lost, so nothing was written.", c, herr, nil)
			} else {
				r.fail(c, w.cfg.policy.Decide(c.msg, herr), herr)
			}
		}
	case anyLost:
		// The work covers a row this worker no longer owns, and one transaction cannot keep
		// part of it: roll it all back. Rows still owned return after their lease, attempt kept.
		_ = tx.Rollback()
		for _, c := range batch {
			if atomic.LoadInt32(&c.lost) == 1 {
				w.log(LevelWarn, "The lease was lost, so the work was rolled back.", c, nil, nil)
			} else {
				w.log(LevelWarn, "Another message of the batch lost its lease, so the work was rolled back.", c, nil, nil)
			}
		}
	default:
		r.completeBatch(tx, batch, abandon)
	}
}

// completeBatch completes every row in one statement inside the handler transaction and
// commits only when the fence held for every row, so no row this worker no longer owns is
// completed (PULL-9).
func (r *run) completeBatch(tx workTx, batch []*claimed, abandon func(error)) {
	w := r.w
	ctx, cancel := context.WithTimeout(r.base, writeTimeout)
	defer cancel()
	ids := make([]string, len(batch))
	for i, c := range batch {
		ids[i] = c.msg.ID
	}
	// Every row of a batch comes from one claim call, so they share its token (PULL-13).
	values := map[string]any{"token": batch[0].token}
	var list []any
	switch w.cfg.dialect {
	case MySQL:
		for _, id := range ids {
			list = append(list, id)
		}
	case SQLite:
		b, _ := json.Marshal(ids)
		values["ids"] = string(b)
	default:
		values["ids"] = strings.Join(ids, ",")
	}
	query, args := w.sql.completeBatch.args(values, list)
	res, err := tx.ExecContext(ctx, query, args...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		_ = tx.Rollback()
		abandon(err)
		return
	}
	if n != int64(len(batch)) {
		_ = tx.Rollback()
		for _, c := range batch {
			w.log(LevelWarn, "The batch completion affected fewer rows than the batch, so the work was rolled back.", c, nil, nil)
		}
		return
	}
	if err := tx.Commit(); err != nil {
		abandon(err)
		return
	}
	for _, c := range batch {
		w.log(LevelDebug, "The message was processed.", c, nil, nil)
	}
}

// callBatchHandler runs the batch handler; a panic becomes a handler failure.
func callBatchHandler(h BatchHandler, ctx context.Context, msgs []Message, tx Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(p)
		}
	}()
	return h(ctx, msgs, tx)
}
