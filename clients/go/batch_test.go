package inbox

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

// Contract tests PULL-C40..C42: the opt-in batch handler (NewBatchWorker), on every database
// cases.json lists.

func startBatchWorker(t *testing.T, src ConnSource, opts Options, h BatchHandler) *started {
	t.Helper()
	opts.Source = sourceFor(t, "s")
	opts.Dialect = dialectOf(t)
	if opts.PollInterval == 0 {
		opts.PollInterval = 50 * time.Millisecond
	}
	w, err := NewBatchWorker(src, opts, h)
	if err != nil {
		t.Fatal(err)
	}
	s := &started{w: w, done: make(chan error, 1)}
	go func() { s.done <- w.Run(context.Background()) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// threeAggregates inserts rows a, b, c of three aggregates, in claim order; c at attemptOfC.
func threeAggregates(f *fixture, attemptOfC int) []string {
	return []string{
		f.insert(row{ref: "a", aggregateID: sp("agg-a"), index: 0}),
		f.insert(row{ref: "b", aggregateID: sp("agg-b"), index: 1}),
		f.insert(row{ref: "c", aggregateID: sp("agg-c"), index: 2, attempt: attemptOfC}),
	}
}

// batchRecorder records the ids of each batch handler call.
type batchRecorder struct {
	mu    sync.Mutex
	calls [][]string
}

func (b *batchRecorder) record(msgs []Message) {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	b.mu.Lock()
	b.calls = append(b.calls, ids)
	b.mu.Unlock()
}

func (b *batchRecorder) get() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]string(nil), b.calls...)
}

// On PostgreSQL the proof of one transaction is xmin: every row version written carries the id
// of the transaction that wrote it. SQLite claims one row at a time (PULL-28): three calls.
func TestPullC40_ABatchHandlerCompletesItsBatchInOneTransaction(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C40", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		ids := threeAggregates(f, 0)
		rec := &batchRecorder{}
		s := startBatchWorker(t, f.db, Options{}, func(ctx context.Context, msgs []Message, tx Tx) error {
			rec.record(msgs)
			for _, m := range msgs {
				if err := f.insertApp(ctx, tx, m.ID, "x"); err != nil {
					return err
				}
			}
			return nil
		})
		for _, id := range ids {
			f.waitState(id, "processed", 10*time.Second)
		}
		s.stop(t)
		want := [][]string{ids}
		if f.dialect == SQLite {
			want = [][]string{{ids[0]}, {ids[1]}, {ids[2]}}
		}
		if got := rec.get(); !reflect.DeepEqual(got, want) {
			t.Errorf("handler calls %v, want %v", got, want)
		}
		for _, id := range ids {
			st := f.get(id)
			if !st.processed.Valid || st.token.Valid || st.lease.Valid || st.attempt != 0 || f.appRows(id) != 1 {
				t.Errorf("row %s: %+v, app rows %d", id, st, f.appRows(id))
			}
		}
		if f.dialect == PostgreSQL {
			var n int
			if err := f.db.QueryRow(f.q(`SELECT count(DISTINCT x) FROM (SELECT xmin::text AS x FROM "{inbox}" UNION ALL SELECT xmin::text FROM app_rows) v`)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("the marks and the app rows were written by %d transactions, want 1", n)
			}
		}
	})
}

func TestPullC41_AFailedBatchRollsBackAndEveryRowIsRetriedByTheUsualRules(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C41", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		ids := threeAggregates(f, 3)
		startBatchWorker(t, f.db, Options{RetryPolicy: policy(t, 4, time.Minute, time.Minute, 0)}, func(ctx context.Context, msgs []Message, tx Tx) error {
			for _, m := range msgs {
				if err := f.insertApp(ctx, tx, m.ID, "x"); err != nil {
					return err
				}
			}
			return errors.New("boom")
		})
		waitFor(t, 10*time.Second, "every failure", func() bool {
			return f.get(ids[0]).attempt == 1 && f.get(ids[1]).attempt == 1 && f.get(ids[2]).state == "dead"
		})
		want := []struct {
			state   string
			attempt int
		}{{"pending", 1}, {"pending", 1}, {"dead", 4}}
		for i, id := range ids {
			st := f.get(id)
			if st.state != want[i].state || st.attempt != want[i].attempt || !contains(st.lastError.String, "boom") ||
				st.token.Valid || st.processed.Valid || f.appRows(id) != 0 {
				t.Errorf("row %d: %+v, app rows %d", i, st, f.appRows(id))
			}
			if want[i].state == "pending" {
				var later bool
				if err := f.db.QueryRow(f.q(`SELECT scheduled_at > `+f.nowPlus("$1")+` FROM inbox WHERE id = $2`), int64(30000), id).Scan(&later); err != nil {
					t.Fatal(err)
				}
				if !later {
					t.Errorf("row %d is due again within 30 s", i)
				}
			}
		}
	})
}

func TestPullC42_ALostLeaseOnOneRowOfABatchCompletesNone(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C42", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		ids := threeAggregates(f, 0)
		log := &capture{}
		rec := &batchRecorder{}
		var thief string
		startBatchWorker(t, f.db, Options{Lease: 600 * time.Second, Logger: log}, func(ctx context.Context, msgs []Message, tx Tx) error {
			rec.record(msgs)
			// Read first, so the handler transaction has its snapshot before the theft.
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM app_rows").Scan(&n); err != nil {
				return err
			}
			thief = f.steal(ids[1])
			for _, m := range msgs {
				if err := f.insertApp(ctx, tx, m.ID, "x"); err != nil {
					return err
				}
			}
			return nil
		})
		waitFor(t, 10*time.Second, "the batch completion log", func() bool {
			return log.has("The batch completion affected fewer rows than the batch, so the work was rolled back.")
		})
		a, b, c := f.get(ids[0]), f.get(ids[1]), f.get(ids[2])
		if len(rec.get()) != 1 || b.token.String != thief || !a.token.Valid || a.token != c.token || a.token.String == thief {
			t.Errorf("calls %d, tokens a %v b %v c %v, thief %s", len(rec.get()), a.token, b.token, c.token, thief)
		}
		for i, st := range []rowState{a, b, c} {
			if st.state != "processing" || st.attempt != 0 || st.processed.Valid || f.appRows(ids[i]) != 0 {
				t.Errorf("row %d: %+v, app rows %d", i, st, f.appRows(ids[i]))
			}
		}
	})
}
