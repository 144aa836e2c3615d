package inbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Contract tests of pull.md §14, one per PULL-C case id (clients/contract/cases.json).

func TestPullC1_EveryFieldReachesTheHandler(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C1", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		full := f.insert(row{ref: "key-full", aggregateID: sp("agg-1"), eventType: sp("order.created"),
			payload: `{"n":1,"text":"hé"}`, headers: `{"x-tenant":"acme","content-type":"application/json"}`,
			correlationID: sp("corr-1"), index: 0})
		bare := f.insert(row{ref: "key-bare", index: 1})
		var mu sync.Mutex
		got := map[string]Message{}
		startWorker(t, f.db, Options{}, func(ctx context.Context, m Message, tx Tx) error {
			mu.Lock()
			got[m.ID] = m
			mu.Unlock()
			return nil
		})
		f.waitState(full, "processed", 10*time.Second)
		f.waitState(bare, "processed", 10*time.Second)
		mu.Lock()
		defer mu.Unlock()
		var createdAt dbTime
		if err := f.db.QueryRow(f.q(`SELECT created_at FROM inbox WHERE id = $1`), full).Scan(&createdAt); err != nil {
			t.Fatal(err)
		}
		created := createdAt.t
		m := got[full]
		if m.ID != full || m.Source != sourceFor(t, "s") || m.IdempotencyKey != "key-full" || *m.AggregateID != "agg-1" ||
			*m.EventType != "order.created" || *m.CorrelationID != "corr-1" || m.Attempt != 0 ||
			!m.CreatedAt.Equal(created) || m.CreatedAt.Location() != time.UTC {
			t.Errorf("full message: %+v", m)
		}
		var payload any
		if err := json.Unmarshal(m.Payload, &payload); err != nil || !reflect.DeepEqual(payload, map[string]any{"n": 1.0, "text": "hé"}) {
			t.Errorf("payload %s", m.Payload)
		}
		if !reflect.DeepEqual(m.Headers, map[string]string{"x-tenant": "acme", "content-type": "application/json"}) {
			t.Errorf("headers %v", m.Headers)
		}
		b := got[bare]
		if b.AggregateID != nil || b.EventType != nil || b.CorrelationID != nil || b.Attempt != 0 || b.Headers == nil || len(b.Headers) != 0 {
			t.Errorf("bare message: %+v", b)
		}
		// The message type exposes no token.
		typ := reflect.TypeOf(Message{})
		for i := 0; i < typ.NumField(); i++ {
			if n := typ.Field(i).Name; n == "Token" || n == "ClaimToken" {
				t.Errorf("Message exposes %s", n)
			}
		}
		if len(reflect.ValueOf(Message{}).Interface().(Message).ID) != 0 {
			t.Error("unexpected")
		}
	})
}

func runC2(t *testing.T, s Schema) {
	f := newFixture(t, s)
	id := f.insert(row{})
	startWorker(t, f.db, Options{Schema: s}, func(ctx context.Context, m Message, tx Tx) error {
		return f.insertApp(ctx, tx, m.ID, "done")
	})
	f.waitState(id, "processed", 10*time.Second)
	st := f.get(id)
	if f.appRows(id) != 1 || !st.processed.Valid || st.token.Valid || st.lease.Valid {
		t.Errorf("app rows %d, state %+v", f.appRows(id), st)
	}
}

func TestPullC2_HandlerWritesAndCompletionCommitTogether(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C2", func(t *testing.T) {
		t.Parallel()
		runC2(t, Schema{})
	})
}

func runC3(t *testing.T, logger Logger) {
	f := newFixture(t, Schema{})
	id := f.insert(row{})
	var calls int32
	startWorker(t, f.db, Options{Logger: logger, RetryPolicy: policy(t, 5, time.Minute, time.Minute, 0)},
		func(ctx context.Context, m Message, tx Tx) error {
			atomic.AddInt32(&calls, 1)
			if err := f.insertApp(ctx, tx, m.ID, "x"); err != nil {
				return err
			}
			return errors.New("handler failed")
		})
	waitFor(t, 10*time.Second, "the failure", func() bool { return f.get(id).attempt == 1 })
	if n := f.appRows(id); n != 0 {
		t.Errorf("%d application rows left", n)
	}
	if st := f.get(id); st.state == "processed" {
		t.Errorf("row is processed")
	}
}

func TestPullC3_NoWriteIsLeftWhenTheHandlerFails(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C3", func(t *testing.T) {
		t.Parallel()
		runC3(t, nil)
	})
}

func TestPullC4_CompletionOnZeroRowsRollsBack(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C4", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		log := &capture{}
		var thief string
		handled := make(chan struct{})
		startWorker(t, f.db, Options{Lease: 600 * time.Second, Logger: log}, func(ctx context.Context, m Message, tx Tx) error {
			thief = f.steal(m.ID)
			err := f.insertApp(ctx, tx, m.ID, "x")
			close(handled)
			return err
		})
		<-handled
		waitFor(t, 10*time.Second, "the completion log", func() bool {
			return log.has("The completion affected no row, so the work was rolled back.")
		})
		st := f.get(id)
		if f.appRows(id) != 0 || st.state != "processing" || st.token.String != thief {
			t.Errorf("app rows %d, state %+v, thief %s", f.appRows(id), st, thief)
		}
	})
}

func TestPullC5_NoMessageGoesToTwoWorkers(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C5", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		ids := map[string]bool{}
		for i := 0; i < 20; i++ {
			ids[f.insert(row{index: i})] = true
		}
		var mu sync.Mutex
		seen := map[string]int{}
		h := func(ctx context.Context, m Message, tx Tx) error {
			mu.Lock()
			seen[m.ID]++
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			return nil
		}
		a := startWorker(t, f.db, Options{BatchSize: 3}, h)
		b := startWorker(t, f.db, Options{BatchSize: 3}, h)
		waitFor(t, 20*time.Second, "20 rows handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 20 })
		a.stop(t)
		b.stop(t)
		for id, n := range seen {
			if !ids[id] || n != 1 {
				t.Errorf("%s handled %d times", id, n)
			}
		}
	})
}

func TestPullC6_OwnershipLastsAcrossALongHandler(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C6", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		var first, second int32
		startWorker(t, f.db, Options{Lease: time.Second}, func(ctx context.Context, m Message, tx Tx) error {
			atomic.AddInt32(&first, 1)
			select {
			case <-time.After(3 * time.Second):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		waitFor(t, 5*time.Second, "the first handler", func() bool { return atomic.LoadInt32(&first) == 1 })
		startWorker(t, f.db, Options{Lease: time.Second, PollInterval: 100 * time.Millisecond}, func(ctx context.Context, m Message, tx Tx) error {
			atomic.AddInt32(&second, 1)
			return nil
		})
		f.waitState(id, "processed", 10*time.Second)
		if atomic.LoadInt32(&first) != 1 || atomic.LoadInt32(&second) != 0 {
			t.Errorf("first %d, second %d", first, second)
		}
	})
}

func TestPullC7_ALostRenewalCancelsTheHandler(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C7", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		var thief string
		var stolenAt, cancelledAt time.Time
		done := make(chan struct{})
		startWorker(t, f.db, Options{Lease: time.Second}, func(ctx context.Context, m Message, tx Tx) error {
			thief = f.steal(m.ID)
			stolenAt = time.Now()
			select {
			case <-ctx.Done():
				cancelledAt = time.Now()
			case <-time.After(10 * time.Second):
			}
			close(done)
			return ctx.Err()
		})
		<-done
		if cancelledAt.IsZero() {
			t.Fatal("the handler was never cancelled")
		}
		limit := 2*(time.Second/3) + 500*time.Millisecond
		if d := cancelledAt.Sub(stolenAt); d > limit {
			t.Errorf("cancelled %s after the theft, limit %s", d, limit)
		}
		time.Sleep(200 * time.Millisecond)
		st := f.get(id)
		if st.state != "processing" || st.token.String != thief || st.processed.Valid {
			t.Errorf("state %+v", st)
		}
	})
}

func TestPullC8_AnAbandonedMessageComesBack(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C8", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		in := make(chan struct{}, 1)
		a := startWorker(t, f.db, Options{Lease: time.Second, ShutdownGrace: time.Nanosecond}, func(ctx context.Context, m Message, tx Tx) error {
			in <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		})
		<-in
		a.stop(t)
		if st := f.get(id); st.state != "processing" || st.attempt != 0 {
			t.Fatalf("after stop: %+v", st)
		}
		got := make(chan int, 1)
		startWorker(t, f.db, Options{Lease: time.Second}, func(ctx context.Context, m Message, tx Tx) error {
			select {
			case got <- m.Attempt:
			default:
			}
			return nil
		})
		select {
		case a := <-got:
			if a != 0 {
				t.Errorf("attempt %d", a)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the second worker never received the row")
		}
		f.waitState(id, "processed", 5*time.Second)
	})
}

func TestPullC9_ARetryRecordsTheAttemptAndTheBackoff(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C9", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		startWorker(t, f.db, Options{RetryPolicy: policy(t, 5, time.Minute, time.Minute, 0)}, func(ctx context.Context, m Message, tx Tx) error {
			return errors.New("boom")
		})
		waitFor(t, 10*time.Second, "the retry", func() bool { return f.get(id).attempt == 1 })
		var later bool
		if err := f.db.QueryRow(f.q(`SELECT scheduled_at > `+f.nowPlus("$1")+` FROM inbox WHERE id = $2`), int64(30000), id).Scan(&later); err != nil {
			t.Fatal(err)
		}
		st := f.get(id)
		if st.state != "pending" || st.attempt != 1 || !contains(st.lastError.String, "boom") || !later {
			t.Errorf("state %+v, scheduled later %v", st, later)
		}
	})
}

func TestPullC10_DeadLetterAtTheCeiling(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C10", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{attempt: 3})
		startWorker(t, f.db, Options{RetryPolicy: policy(t, 3, time.Second, time.Second, 0)}, func(ctx context.Context, m Message, tx Tx) error {
			return errors.New("fails")
		})
		f.waitState(id, "dead", 10*time.Second)
		if st := f.get(id); st.attempt != 4 || !st.lastError.Valid {
			t.Errorf("state %+v", st)
		}
	})
}

func TestPullC11_AStaleTokenChangesNothing(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C11", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		current := f.steal(id)
		if _, err := f.db.Exec(f.q(`UPDATE inbox SET state = 'processing' WHERE id = $1`), id); err != nil {
			t.Fatal(err)
		}
		w, err := NewWorker(f.db, Options{Source: sourceFor(t, "s"), Dialect: dialectOf(t)}, func(context.Context, Message, Tx) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		before := f.snapshot(id)
		old := newToken()
		ctx := context.Background()
		for name, run := range map[string]func() (int64, error){
			"complete": func() (int64, error) {
				return w.exec(ctx, PurposeFailure, time.Minute, w.sql.complete, map[string]any{"id": id, "token": old})
			},
			"retry": func() (int64, error) {
				return w.exec(ctx, PurposeFailure, time.Minute, w.sql.retry, map[string]any{"delay_ms": int64(0), "error": "e", "id": id, "token": old})
			},
			"dead": func() (int64, error) {
				return w.exec(ctx, PurposeFailure, time.Minute, w.sql.dead, map[string]any{"error": "e", "id": id, "token": old})
			},
			"renew": func() (int64, error) {
				return w.exec(ctx, PurposeRenew, time.Minute, w.sql.renew, map[string]any{"lease_ms": int64(1000), "id": id, "token": old})
			},
		} {
			n, err := run()
			if err != nil || n != 0 {
				t.Errorf("%s: %d rows, %v", name, n, err)
			}
		}
		if after := f.snapshot(id); after != before || f.get(id).token.String != current {
			t.Errorf("row changed:\n%s\n%s", before, after)
		}
	})
}

func (f *fixture) snapshot(id string) string {
	if f.dialect != PostgreSQL {
		var due dbTime
		if err := f.db.QueryRow(f.q(`SELECT scheduled_at FROM inbox WHERE id = $1`), id).Scan(&due); err != nil {
			f.t.Fatal(err)
		}
		return fmt.Sprintf("%+v due %s", f.get(id), due.t)
	}
	var s string
	if err := f.db.QueryRow(`SELECT row_to_json(i)::text FROM inbox i WHERE id = $1`, id).Scan(&s); err != nil {
		f.t.Fatal(err)
	}
	return s
}

func TestPullC12_StopClaimsNothingNewAndAbandonsInFlightWork(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C12", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		a := f.insert(row{index: 0})
		b := f.insert(row{index: 1})
		in := make(chan struct{}, 2)
		w := startWorker(t, f.db, Options{BatchSize: 1, Lease: time.Minute, ShutdownGrace: time.Nanosecond}, func(ctx context.Context, m Message, tx Tx) error {
			in <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		})
		<-in
		w.stop(t)
		sa, sb := f.get(a), f.get(b)
		if sa.state != "processing" || sb.state != "pending" {
			t.Errorf("first %+v, second %+v", sa, sb)
		}
	})
}

func TestPullC13_MappedNamesWork(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C13", func(t *testing.T) {
		t.Parallel()
		runC2(t, Schema{Table: "msg_in", ID: "mid", Source: "src", Consumption: "mode", State: "st",
			IdempotencyKey: "ikey", AggregateID: "agg", EventType: "etype", Payload: "body", Headers: "hdrs",
			CorrelationID: "corr", Attempt: "tries", ScheduledAt: "due_at", CreatedAt: "made_at",
			ClaimToken: "tok", ClaimedAt: "claimed", LeaseExpiresAt: "lease_end", ProcessedAt: "done_at", LastError: "err_text"})
	})
}

func TestPullC15_SecretsNeverReachLastErrorOrLogs(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C15", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		log := &capture{}
		startWorker(t, f.db, Options{Logger: log, RetryPolicy: policy(t, 5, time.Minute, time.Minute, 0)}, func(ctx context.Context, m Message, tx Tx) error {
			return errors.New("Host=db;Password=hunter2;Database=app")
		})
		waitFor(t, 10*time.Second, "the retry", func() bool { return f.get(id).attempt == 1 })
		waitFor(t, 5*time.Second, "the retry log", func() bool { return log.has("The message retries.") })
		le := f.get(id).lastError.String
		text := log.text()
		if contains(le, "hunter2") || !contains(le, "Password=[REDACTED]") || contains(text, "hunter2") || !contains(text, "Password=[REDACTED]") {
			t.Errorf("last_error %q, log %q", le, text)
		}
	})
}

func TestPullC16_NoPollingStorm(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C16", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		src := &faultySource{db: f.db}
		w := startWorker(t, src, Options{PollInterval: 200 * time.Millisecond}, func(context.Context, Message, Tx) error { return nil })
		time.Sleep(2 * time.Second)
		w.stop(t)
		if n := atomic.LoadInt64(&src.claims); n < 4 || n > 20 {
			t.Errorf("%d claims in 2 s", n)
		}
	})
}

func TestPullC17_NoMoreThanTheBatchInMemory(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C17", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		var ids []string
		for i := 0; i < 12; i++ {
			ids = append(ids, f.insert(row{index: i}))
		}
		// The worker holds a row while it is processing under its claim. Each handler counts the
		// held rows in the database (never more than the batch of 3), and each claim checks that
		// nothing is held any more: a claim never starts while a batch is in flight.
		held := func() int64 {
			var n int64
			if err := f.db.QueryRow(f.q(`SELECT count(*) FROM "{inbox}" WHERE "{state}" = 'processing'`)).Scan(&n); err != nil {
				t.Error(err)
			}
			return n
		}
		var maxHeld, heldAtClaim int64
		src := &faultySource{db: f.db, fail: func(p Purpose) error {
			if p == PurposeClaim {
				atomic.AddInt64(&heldAtClaim, held())
			}
			return nil
		}}
		s := startWorker(t, src, Options{BatchSize: 3, MaxConcurrency: 3}, func(ctx context.Context, m Message, tx Tx) error {
			n := held()
			for {
				m := atomic.LoadInt64(&maxHeld)
				if n <= m || atomic.CompareAndSwapInt64(&maxHeld, m, n) {
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
			return nil
		})
		for _, id := range ids {
			f.waitState(id, "processed", 20*time.Second)
		}
		s.stop(t)
		if m := atomic.LoadInt64(&maxHeld); m > 3 || m < 1 {
			t.Errorf("%d rows held at once, batch size 3", m)
		}
		if n := atomic.LoadInt64(&heldAtClaim); n != 0 {
			t.Errorf("claims started while %d rows were held", n)
		}
	})
}

type window struct {
	id         string
	start, end time.Time
}

func TestPullC18_OneMessagePerAggregateInFlight(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C18", func(t *testing.T) {
		t.Parallel()
		t.Run("a", func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, Schema{})
			var ids []string
			for i := 0; i < 4; i++ {
				ids = append(ids, f.insert(row{aggregateID: sp("A"), index: i}))
			}
			var mu sync.Mutex
			var wins []window
			h := func(ctx context.Context, m Message, tx Tx) error {
				s := time.Now()
				time.Sleep(200 * time.Millisecond)
				mu.Lock()
				wins = append(wins, window{m.ID, s, time.Now()})
				mu.Unlock()
				return nil
			}
			startWorker(t, f.db, Options{BatchSize: 4, MaxConcurrency: 4}, h)
			startWorker(t, f.db, Options{BatchSize: 4, MaxConcurrency: 4}, h)
			for _, id := range ids {
				f.waitState(id, "processed", 20*time.Second)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(wins) != 4 {
				t.Fatalf("%d windows", len(wins))
			}
			for i := range wins {
				if wins[i].id != ids[i] {
					t.Errorf("handled out of creation order: %v", wins)
				}
				if i > 0 && wins[i].start.Before(wins[i-1].end) {
					t.Errorf("windows %d and %d overlap", i-1, i)
				}
			}
		})
		t.Run("b", func(t *testing.T) {
			t.Parallel()
			if dialectOf(t) == SQLite {
				t.Skip("not applicable on sqlite: C18(b) needs concurrency 2, and the effective concurrency is 1 (PULL-76)")
			}
			f := newFixture(t, Schema{})
			var ids []string
			for i := 0; i < 4; i++ {
				agg := "A"
				if i%2 == 1 {
					agg = "B"
				}
				ids = append(ids, f.insert(row{aggregateID: sp(agg), index: i}))
			}
			var cur, peak int32
			startWorker(t, f.db, Options{BatchSize: 4, MaxConcurrency: 4}, concurrencyHandler(&cur, &peak))
			for _, id := range ids {
				f.waitState(id, "processed", 20*time.Second)
			}
			if p := atomic.LoadInt32(&peak); p != 2 {
				t.Errorf("peak concurrency %d", p)
			}
		})
	})
}

func concurrencyHandler(cur, peak *int32) Handler {
	return func(ctx context.Context, m Message, tx Tx) error {
		v := atomic.AddInt32(cur, 1)
		for {
			p := atomic.LoadInt32(peak)
			if v <= p || atomic.CompareAndSwapInt32(peak, p, v) {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
		atomic.AddInt32(cur, -1)
		return nil
	}
}

// holdClaimLock holds the claim lock from an outside session until release is called: the
// per-source named lock on MySQL (GET_LOCK, taken at once), BEGIN IMMEDIATE on SQLite.
func (f *fixture) holdClaimLock(source string) (release func()) {
	ctx := context.Background()
	conn, err := f.db.Conn(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	lock := "CONCAT('queuebox_pull:', LEFT(SHA2(CONCAT('" + f.names["inbox"] + "', ':', ?), 256), 40))"
	if f.dialect == MySQL {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK("+lock+", 0)", source).Scan(&got); err != nil || got.Int64 != 1 {
			f.t.Fatalf("the outside session did not get the lock: %v %v", got, err)
		}
	} else if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		f.t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if f.dialect == MySQL {
				_, _ = conn.ExecContext(ctx, "SELECT RELEASE_LOCK("+lock+")", source)
			} else {
				_, _ = conn.ExecContext(ctx, "ROLLBACK")
			}
			conn.Close()
		})
	}
	f.t.Cleanup(release)
	return release
}

func TestPullC19_AClaimLockFailureIsTransient(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C19", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		release := f.holdClaimLock(sourceFor(t, "s"))
		log := &capture{}
		startWorker(t, f.db, Options{Logger: log}, func(context.Context, Message, Tx) error { return nil })
		hold := 35 * time.Second
		if f.dialect == SQLite {
			hold = 25 * time.Second
		}
		for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(time.Second) {
			if st := f.get(id); st.state != "pending" || st.attempt != 0 || st.lastError.Valid {
				t.Fatalf("while the lock is held: %+v", st)
			}
		}
		if !log.has("The claim failed.") {
			t.Errorf("no claim failure logged: %s", log.text())
		}
		release()
		f.waitState(id, "processed", 30*time.Second)
		if st := f.get(id); st.attempt != 0 {
			t.Errorf("state %+v", st)
		}
	})
}

func TestPullC20_TheLockTimeoutBeatsTheCallersDeadline(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C20", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		f.insert(row{})
		f.holdClaimLock(sourceFor(t, "s"))
		w, err := NewWorker(f.db, Options{Source: sourceFor(t, "s"), Dialect: dialectOf(t)}, func(context.Context, Message, Tx) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		_, err = w.claim(ctx)
		took := time.Since(start)
		if !errors.Is(err, errLock) || took > 15*time.Second {
			t.Errorf("after %s: %v (want the GET_LOCK error within 15 s)", took, err)
		}
	})
}

func TestPullC21_OnlyPullRowsOfTheWorkersSourceAreClaimed(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C21", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		mine := f.insert(row{index: 0})
		push := f.insert(row{consumption: "push", index: 1})
		other := f.insert(row{source: "t", index: 2})
		var mu sync.Mutex
		seen := map[string]bool{}
		startWorker(t, f.db, Options{}, func(ctx context.Context, m Message, tx Tx) error {
			mu.Lock()
			seen[m.ID] = true
			mu.Unlock()
			return nil
		})
		f.waitState(mine, "processed", 10*time.Second)
		time.Sleep(300 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 1 || f.get(push).state != "pending" || f.get(other).state != "pending" || f.get(push).token.Valid || f.get(other).token.Valid {
			t.Errorf("seen %v", seen)
		}
	})
}

func TestPullC22_ARowIsNotClaimedBeforeItIsDue(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C22", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		inserted := time.Now()
		id := f.insert(row{scheduledIn: 2 * time.Second})
		var handledAt atomic.Value
		var early bool
		startWorker(t, f.db, Options{}, func(ctx context.Context, m Message, tx Tx) error {
			// Compare on the database clock as well as the local one.
			if err := tx.QueryRowContext(ctx, f.q(`SELECT `+f.now()+` < scheduled_at FROM inbox WHERE id = $1`), m.ID).Scan(&early); err != nil {
				return err
			}
			handledAt.Store(time.Now())
			return nil
		})
		f.waitState(id, "processed", 10*time.Second)
		at := handledAt.Load().(time.Time)
		if early || at.Sub(inserted) < 1900*time.Millisecond {
			t.Errorf("handled %s after insert (early on the database clock: %v)", at.Sub(inserted), early)
		}
	})
}

func TestPullC23_TheAttemptBoundary(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C23", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		one := f.insert(row{attempt: 1, index: 0})
		two := f.insert(row{attempt: 2, index: 1})
		var fails int32
		s := startWorker(t, f.db, Options{MaxConcurrency: 2, RetryPolicy: policy(t, 3, time.Second, time.Second, 0)}, func(ctx context.Context, m Message, tx Tx) error {
			atomic.AddInt32(&fails, 1)
			return errors.New("fails")
		})
		waitFor(t, 10*time.Second, "two outcomes", func() bool {
			return f.get(one).state == "pending" && f.get(one).attempt == 2 && f.get(two).state == "dead"
		})
		s.stop(t)
		if st := f.get(two); st.attempt != 3 {
			t.Errorf("second %+v", st)
		}
	})
}

func TestPullC24_ARenewalErrorIsNotALostLease(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C24", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		log := &capture{}
		var begin atomic.Value
		begin.Store(time.Time{})
		src := &faultySource{db: f.db, fail: func(p Purpose) error {
			b := begin.Load().(time.Time)
			if p == PurposeRenew && !b.IsZero() && time.Since(b) < 900*time.Millisecond {
				return errors.New("connection refused (injected)")
			}
			return nil
		}}
		var cancelled int32
		startWorker(t, src, Options{Lease: 1500 * time.Millisecond, Logger: log}, func(ctx context.Context, m Message, tx Tx) error {
			select {
			case <-time.After(2 * time.Second):
				return nil
			case <-ctx.Done():
				atomic.StoreInt32(&cancelled, 1)
				return ctx.Err()
			}
		})
		// The claim happens right after start; the renewal failures window starts now.
		begin.Store(time.Now())
		f.waitState(id, "processed", 10*time.Second)
		if !log.has("The renewal failed.") || atomic.LoadInt32(&cancelled) != 0 {
			t.Errorf("log:\n%s cancelled %d", log.text(), cancelled)
		}
	})
}

func TestPullC25_RowsWithoutAggregateRunInParallel(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C25", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		var ids []string
		for i := 0; i < 4; i++ {
			ids = append(ids, f.insert(row{index: i}))
		}
		var cur, peak int32
		startWorker(t, f.db, Options{BatchSize: 4, MaxConcurrency: 4}, concurrencyHandler(&cur, &peak))
		for _, id := range ids {
			f.waitState(id, "processed", 20*time.Second)
		}
		if p := atomic.LoadInt32(&peak); p != 4 {
			t.Errorf("peak concurrency %d", p)
		}
	})
}

func TestPullC26_WaitingRowsKeepTheirLease(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C26", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		var ids []string
		for i := 0; i < 3; i++ {
			ids = append(ids, f.insert(row{index: i}))
		}
		var mu sync.Mutex
		byFirst, bySecond := map[string]int{}, map[string]int{}
		started := make(chan struct{}, 3)
		startWorker(t, f.db, Options{BatchSize: 3, MaxConcurrency: 1, Lease: time.Second}, func(ctx context.Context, m Message, tx Tx) error {
			mu.Lock()
			byFirst[m.ID]++
			mu.Unlock()
			started <- struct{}{}
			time.Sleep(800 * time.Millisecond)
			return nil
		})
		<-started
		startWorker(t, f.db, Options{PollInterval: 100 * time.Millisecond, Lease: time.Second}, func(ctx context.Context, m Message, tx Tx) error {
			mu.Lock()
			bySecond[m.ID]++
			mu.Unlock()
			return nil
		})
		for _, id := range ids {
			f.waitState(id, "processed", 20*time.Second)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if byFirst[id] != 1 || bySecond[id] != 0 {
				t.Errorf("%s: first %d, second %d", id, byFirst[id], bySecond[id])
			}
		}
	})
}

func TestPullC27_ALibraryFailureAbandons(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C27", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		log := &capture{}
		var failed int32
		src := &faultySource{db: f.db, fail: func(p Purpose) error {
			if p == PurposeHandler && atomic.CompareAndSwapInt32(&failed, 0, 1) {
				return errors.New("connection refused (injected)")
			}
			return nil
		}}
		var attempts []int
		var mu sync.Mutex
		startWorker(t, src, Options{Lease: time.Second, Logger: log}, func(ctx context.Context, m Message, tx Tx) error {
			mu.Lock()
			attempts = append(attempts, m.Attempt)
			mu.Unlock()
			return nil
		})
		waitFor(t, 10*time.Second, "the abandon log", func() bool { return log.has("The message was abandoned.") })
		if st := f.get(id); st.state != "processing" || st.attempt != 0 {
			t.Errorf("after abandon: %+v", st)
		}
		f.waitState(id, "processed", 10*time.Second)
		mu.Lock()
		defer mu.Unlock()
		if st := f.get(id); st.attempt != 0 || len(attempts) != 1 || attempts[0] != 0 {
			t.Errorf("state %+v, attempts %v", st, attempts)
		}
	})
}

func TestPullC33_SilentByDefault(t *testing.T) {
	// Not parallel: it captures the process's stdout and stderr.
	eachDialect(t, "PULL-C33", func(t *testing.T) {
		out := captureOutput(t, func() { runC3(t, nil) })
		if out != "" {
			t.Errorf("the worker wrote %q", out)
		}
	})
}

func TestPullC34_PayloadsAndTextRoundTrip(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C34", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		payloads := []string{`{"a":[1,2,{"b":"ünïcødé ✓"}]}`, `[1,"two",null]`, `"just a string é"`, `12.5`, `true`, `null`}
		want := map[string]string{}
		for i, p := range payloads {
			id := f.insert(row{payload: p, headers: `{"x-name":"Zoë 日本"}`, eventType: sp("ëvent"), index: i})
			want[id] = p
		}
		var mu sync.Mutex
		got := map[string]Message{}
		startWorker(t, f.db, Options{}, func(ctx context.Context, m Message, tx Tx) error {
			mu.Lock()
			got[m.ID] = m
			mu.Unlock()
			return nil
		})
		for id := range want {
			f.waitState(id, "processed", 10*time.Second)
		}
		mu.Lock()
		defer mu.Unlock()
		for id, p := range want {
			var a, b any
			m := got[id]
			if err := json.Unmarshal([]byte(p), &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(m.Payload, &b); err != nil || !reflect.DeepEqual(a, b) {
				t.Errorf("payload %s arrived as %s", p, m.Payload)
			}
			if m.Headers["x-name"] != "Zoë 日本" || *m.EventType != "ëvent" {
				t.Errorf("text changed: %v %q", m.Headers, *m.EventType)
			}
		}
	})
}

func TestPullC35_AHandlerThatFinishesWithinTheGraceCommits(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C35", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		in := make(chan struct{}, 1)
		w, err := NewWorker(f.db, Options{Source: sourceFor(t, "s"), Dialect: dialectOf(t), ShutdownGrace: 10 * time.Second, PollInterval: 50 * time.Millisecond}, func(ctx context.Context, m Message, tx Tx) error {
			in <- struct{}{}
			time.Sleep(500 * time.Millisecond)
			return f.insertApp(ctx, tx, m.ID, "x")
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Run(context.Background()) }()
		<-in
		w.Stop()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
		if st := f.get(id); st.state != "processed" || f.appRows(id) != 1 {
			t.Errorf("state %+v", st)
		}
	})
}

func TestPullC36_APolicyDeadLetterCountsTheAttempt(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C36", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		always := RetryPolicyFunc(func(Message, error) FailureAction { return DeadLetter() })
		startWorker(t, f.db, Options{RetryPolicy: always}, func(ctx context.Context, m Message, tx Tx) error {
			return errors.New("first delivery fails")
		})
		f.waitState(id, "dead", 10*time.Second)
		if st := f.get(id); st.attempt != 1 || !st.lastError.Valid {
			t.Errorf("state %+v", st)
		}
	})
}

func TestPullC37_StopIsIdempotent(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C37", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		in := make(chan struct{}, 1)
		w, err := NewWorker(f.db, Options{Source: sourceFor(t, "s"), Dialect: dialectOf(t), PollInterval: 50 * time.Millisecond}, func(ctx context.Context, m Message, tx Tx) error {
			in <- struct{}{}
			time.Sleep(100 * time.Millisecond)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop() // before run: nothing happens
		done := make(chan error, 2)
		go func() { done <- w.Run(context.Background()) }()
		<-in
		w.Stop()
		w.Stop()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
		select {
		case <-done:
			t.Error("Run returned twice")
		case <-time.After(200 * time.Millisecond):
		}
		w.Stop()
		if st := f.get(id); st.state != "processed" {
			t.Errorf("state %+v", st)
		}
	})
}

// TestPullC38_AnInvalidJSONPayloadIsDeadLettered also proves PULL-47. The case is SQL Server's,
// whose payload is text; QueueBox's PostgreSQL column is jsonb, which cannot hold such a row, so
// the test turns the column into text to drive the same worker path on PostgreSQL.
func TestPullC38_AnInvalidJSONPayloadIsDeadLettered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Schema{})
	id := f.insert(row{})
	for _, q := range []string{
		`ALTER TABLE "{inbox}" ALTER COLUMN "{payload}" TYPE text`,
		`UPDATE "{inbox}" SET "{payload}" = '<raw text: not json'`,
	} {
		if _, err := f.db.Exec(f.q(q)); err != nil {
			t.Fatal(err)
		}
	}
	var calls int32
	s := startWorker(t, f.db, Options{}, func(ctx context.Context, m Message, tx Tx) error {
		atomic.AddInt32(&calls, 1)
		return nil
	})
	f.waitState(id, "dead", 10*time.Second)
	s.stop(t)
	if st := f.get(id); st.lastError.String != "The payload is not valid JSON." || st.attempt != 1 {
		t.Errorf("state %+v", st)
	}
	if n := atomic.LoadInt32(&calls); n != 0 {
		t.Errorf("the handler was called %d times", n)
	}
}

func TestPullC39_SQLiteALongHandlerStillCompletes(t *testing.T) {
	t.Parallel()
	eachDialect(t, "PULL-C39", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, Schema{})
		id := f.insert(row{})
		var first, second int32
		startWorker(t, f.db, Options{Lease: 500 * time.Millisecond}, func(ctx context.Context, m Message, tx Tx) error {
			atomic.AddInt32(&first, 1)
			time.Sleep(1500 * time.Millisecond)
			return nil
		})
		time.Sleep(100 * time.Millisecond)
		startWorker(t, f.db, Options{Lease: 500 * time.Millisecond}, func(ctx context.Context, m Message, tx Tx) error {
			atomic.AddInt32(&second, 1)
			return nil
		})
		f.waitState(id, "processed", 15*time.Second)
		time.Sleep(600 * time.Millisecond)
		if a, b := atomic.LoadInt32(&first), atomic.LoadInt32(&second); a != 1 || b != 0 {
			t.Errorf("first worker %d, second worker %d (want 1, 0)", a, b)
		}
	})
}
