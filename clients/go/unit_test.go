package inbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// captureOutput runs fn while the process's stdout and stderr go to a pipe, and returns what
// was written.
func captureOutput(t *testing.T, fn func()) string {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = w, w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	func() {
		defer func() { os.Stdout, os.Stderr = oldOut, oldErr }()
		fn()
	}()
	w.Close()
	return <-done
}

func TestPullC28_OptionsAreValidated(t *testing.T) {
	ok := Options{Source: "s"}
	cases := []struct {
		mod  func(o *Options)
		want string
	}{
		{func(o *Options) { o.Source = "" }, "The source is mandatory."},
		{func(o *Options) { o.Source = "   " }, "The source is mandatory."},
		{func(o *Options) { o.Source = strings.Repeat("s", 256) }, "The source is mandatory."},
		{func(o *Options) { o.BatchSize = -1 }, "The batch size must be between 1 and 500."},
		{func(o *Options) { o.BatchSize = 501 }, "The batch size must be between 1 and 500."},
		{func(o *Options) { o.Lease = 2 * time.Millisecond }, "The lease must be between 3 ms and 2147483647 ms."},
		{func(o *Options) { o.Lease = -time.Second }, "The lease must be between 3 ms and 2147483647 ms."},
		{func(o *Options) { o.Lease = 2147483648 * time.Millisecond }, "The lease must be between 3 ms and 2147483647 ms."},
		{func(o *Options) { o.MaxConcurrency = -1 }, "The maximum concurrency must be at least 1."},
		{func(o *Options) { o.PollInterval = -time.Millisecond }, "The poll interval must be greater than 0."},
		{func(o *Options) { o.ShutdownGrace = -time.Millisecond }, "The shutdown grace must not be negative."},
		{func(o *Options) { o.Dialect = "oracle" }, "The dialect oracle is unknown. Use postgresql, sqlserver, mysql or sqlite."},
		{func(o *Options) { o.Schema.Payload = "bad-name" }, "The schema name bad-name is not a plain SQL identifier."},
		{func(o *Options) { o.Schema.Table = "bad-name" }, "The schema name bad-name is not a plain SQL identifier."},
		{func(o *Options) { o.Schema.LastError = strings.Repeat("a", 64) }, "The schema name " + strings.Repeat("a", 64) + " is not a plain SQL identifier."},
	}
	for _, c := range cases {
		o := ok
		c.mod(&o)
		// A source that panics proves no connection is opened while building.
		_, err := NewWorker(panicSource{}, o, func(ctxT, Message, Tx) error { return nil })
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
		}
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("errors.Is(%v, ErrInvalidOptions) is false", err)
		}
	}
	// Zero values mean the defaults (PULL-57); max concurrency is capped by the batch size.
	w, err := NewWorker(panicSource{}, ok, func(ctxT, Message, Tx) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	c := w.cfg
	if c.batchSize != 10 || c.lease != 30*time.Second || c.maxConcurrency != 1 || c.pollInterval != time.Second ||
		c.shutdownGrace != 30*time.Second || c.dialect != PostgreSQL || w.renewInterval() != 10*time.Second {
		t.Errorf("defaults %+v", c)
	}
	w, err = NewWorker(panicSource{}, Options{Source: "s", BatchSize: 3, MaxConcurrency: 8, Lease: 3 * time.Millisecond}, func(ctxT, Message, Tx) error { return nil })
	if err != nil || w.cfg.maxConcurrency != 3 || w.renewInterval() != time.Millisecond {
		t.Errorf("effective concurrency %v %v", w, err)
	}
	if candLimit(1) != 50 || candLimit(20) != 60 || candLimit(500) != 500 {
		t.Error("cand_limit")
	}
}

// TestErrorsAreSentinels: every error of NewWorker, Run and NewExponentialPolicy matches its
// sentinel with errors.Is, and the texts not fixed by the specification follow Go's convention
// (lower case, no final punctuation).
func TestErrorsAreSentinels(t *testing.T) {
	h := func(ctxT, Message, Tx) error { return nil }
	check := func(what string, err, sentinel error) {
		t.Helper()
		if !errors.Is(err, sentinel) {
			t.Errorf("%s: errors.Is(%v, %v) is false", what, err, sentinel)
			return
		}
		if text := err.Error(); text != strings.ToLower(text[:1])+text[1:] || strings.HasSuffix(text, ".") {
			t.Errorf("%s: %q is not lower case without a final period", what, text)
		}
	}
	_, err := NewWorker(nil, Options{Source: "s"}, h)
	check("nil source", err, ErrNoConnSource)
	_, err = NewWorker(panicSource{}, Options{Source: "s"}, nil)
	check("nil handler", err, ErrNoHandler)
	_, err = NewWorker(panicSource{}, Options{Source: "s", Dialect: SQLServer}, h)
	check("sqlserver", err, ErrUnsupportedDialect)
	for _, bad := range []struct {
		n      int
		b, m   time.Duration
		jitter float64
	}{{0, 0, 0, 0}, {1, -1, 0, 0}, {1, 2 * time.Second, time.Second, 0}, {1, 0, 0, 1.1}} {
		_, err := NewExponentialPolicy(bad.n, bad.b, bad.m, bad.jitter)
		check(fmt.Sprintf("policy %+v", bad), err, ErrInvalidRetryPolicy)
	}
	// A second Run while one is active.
	release := make(chan struct{})
	blocked := &blockingSource{release: release, asked: make(chan struct{}, 1)}
	w, err := NewWorker(blocked, Options{Source: "s"}, h)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	<-blocked.asked // the first Run is claiming
	check("second Run", w.Run(context.Background()), ErrAlreadyRunning)
	w.Stop()
	close(release)
	if err := <-done; err != nil {
		t.Errorf("the first Run returned %v", err)
	}
}

// blockingSource refuses every connection, but only once release is closed: until then the
// first claim waits, so its Run is known to be active.
type blockingSource struct {
	release chan struct{}
	asked   chan struct{}
}

func (b *blockingSource) Conn(ctx context.Context) (*sql.Conn, error) {
	select {
	case b.asked <- struct{}{}:
	default:
	}
	<-b.release
	return nil, errors.New("no connection (test)")
}

func TestPullC29_RenderedSQLEqualsTheCanonicalText(t *testing.T) {
	mapped := Schema{Table: "msg_in", ID: "mid", Source: "src", Consumption: "mode", State: "st",
		IdempotencyKey: "ikey", AggregateID: "agg", EventType: "etype", Payload: "body", Headers: "hdrs",
		CorrelationID: "corr", Attempt: "tries", ScheduledAt: "due_at", CreatedAt: "made_at",
		ClaimToken: "tok", ClaimedAt: "claimed", LeaseExpiresAt: "lease_end", ProcessedAt: "done_at", LastError: "err_text"}
	for _, d := range []Dialect{PostgreSQL, SQLite, MySQL} {
		spec := specStatements(t, d)
		quote := `"`
		if d == MySQL {
			quote = "`"
		}
		quoted := regexp.MustCompile(quote + `([a-z_]+)` + quote)
		for _, s := range []Schema{{}, mapped} {
			names := s.names()
			m := map[string]string{}
			for _, n := range names {
				m[n[0]] = n[1]
			}
			st, err := renderStatements(d, names)
			if err != nil {
				t.Fatal(err)
			}
			rendered := map[string]stmt{"renew": st.renew, "complete": st.complete, "retry": st.retry, "dead": st.dead}
			if d == MySQL {
				rendered["claim-select"] = st.claim
				rendered["claim-lock"], rendered["claim-update"] = st.mysql.lock, st.mysql.update
				rendered["claim-fetch"], rendered["claim-unlock"] = st.mysql.fetch, st.mysql.unlock
			} else {
				rendered["claim"] = st.claim
			}
			for name, got := range rendered {
				// The driver's parameters back to :name, in the slots' order.
				text := got.text
				switch d {
				case PostgreSQL:
					for i := len(got.slots); i >= 1; i-- {
						text = strings.ReplaceAll(text, fmt.Sprintf("$%d", i), ":"+got.slots[i-1])
					}
				case MySQL:
					var slots []string
					for _, n := range got.slots {
						if n != "ids" {
							slots = append(slots, n)
						}
					}
					var b strings.Builder
					for _, c := range text {
						if c == '?' {
							b.WriteString(":" + slots[0])
							slots = slots[1:]
							continue
						}
						b.WriteRune(c)
					}
					text = b.String()
				}
				if spec == nil {
					continue
				}
				want, ok := spec[name]
				if !ok {
					t.Fatalf("%s: pull.md has no %s statement", d, name)
				}
				want = quoted.ReplaceAllStringFunc(want, func(q string) string {
					if v, ok := m[q[1:len(q)-1]]; ok {
						return quote + v + quote
					}
					return q
				})
				// The table name inside MySQL's lock name is a string literal (PULL-24).
				want = strings.ReplaceAll(want, "CONCAT('inbox'", "CONCAT('"+m["inbox"]+"'")
				if normalize(text) != normalize(want) {
					t.Errorf("%s/%s (%s): rendered text differs from pull.md §5\n got: %s\nwant: %s", d, name, m["inbox"], normalize(text), normalize(want))
				}
			}
		}
	}
	st, err := renderStatements(PostgreSQL, Schema{}.names())
	if err != nil || !contains(st.claim.text, "LIMIT $4") || !contains(st.claim.text, "LIMIT $2") || !contains(st.retry.text, `"scheduled_at" = clock_timestamp() + $1 * INTERVAL`) {
		t.Errorf("rendered statements %v %+v", err, st)
	}
	my, err := renderStatements(MySQL, Schema{}.names())
	if err != nil {
		t.Fatal(err)
	}
	text, args := my.mysql.update.args(map[string]any{"token": "t", "lease_ms": 5, "source": "s"}, []any{"a", "b"})
	if !contains(text, "IN (?, ?)") || !reflect.DeepEqual(args, []any{"t", 5, "a", "b", "s"}) {
		t.Errorf("MySQL :ids expansion: %s %v", text, args)
	}
}

func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// specStatements reads the statement texts of pull.md §5 for a dialect (QUEUEBOX_SPEC_PULL, or
// the shared spec), by contract file name; nil when the specification is not on this machine.
func specStatements(t *testing.T, d Dialect) map[string]string {
	path := os.Getenv("QUEUEBOX_SPEC_PULL")
	if path == "" {
		path = "/work/shared/spec/pull.md"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("pull.md not found at %s: comparing with the contract files only", path)
		return nil
	}
	text := string(b)
	heading, next, files := "### 5.1 PostgreSQL", "### 5.2", []string{"claim", "renew", "complete", "retry", "dead"}
	switch d {
	case MySQL:
		heading, next = "### 5.3 MySQL", "### 5.4"
		files = []string{"claim-lock", "claim-select", "claim-update", "claim-fetch", "claim-unlock", "renew", "complete", "retry", "dead"}
	case SQLite:
		heading, next = "### 5.4 SQLite", "## 6."
	}
	start := strings.Index(text, heading)
	end := strings.Index(text[start:], next) + start
	if start < 0 || end < start {
		t.Fatalf("pull.md has no %s", heading)
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(text[start:end], -1)
	if len(blocks) != len(files) {
		t.Fatalf("pull.md %s has %d sql blocks", heading, len(blocks))
	}
	out := map[string]string{}
	for i, f := range files {
		out[f] = blocks[i][1]
	}
	return out
}

func TestGeneratedSQLMatchesContract(t *testing.T) {
	for key, text := range contractSQL {
		if want := readContract(t, key+".sql"); text != want {
			t.Errorf("sql_contract.go is stale for %s.sql: run clients/go/gen.sh", key)
		}
	}
	if len(contractSQL) != 22 {
		t.Errorf("sql_contract.go has %d statements, want 6 + 6 + 10 (PULL-11 and complete-batch)", len(contractSQL))
	}
}

func TestPullC30_TheDefaultRetryPolicy(t *testing.T) {
	p := policy(t, 5, time.Second, 300*time.Second, 0)
	for a, want := range []time.Duration{1000, 2000, 4000, 8000} {
		got := p.Decide(Message{Attempt: a}, nil)
		if got.IsDeadLetter() || got.Delay() != want*time.Millisecond {
			t.Errorf("attempt %d: %+v", a, got)
		}
	}
	if !p.Decide(Message{Attempt: 4}, nil).IsDeadLetter() {
		t.Error("attempt 4 must dead-letter")
	}
	capped := policy(t, 200, time.Second, 5*time.Second, 0)
	if d := capped.Decide(Message{Attempt: 5}, nil).Delay(); d != 5*time.Second {
		t.Errorf("maxDelay cap: %s", d)
	}
	if d := capped.Decide(Message{Attempt: 100}, nil); d.IsDeadLetter() || d.Delay() != 5*time.Second {
		t.Errorf("attempt 100: %+v", d)
	}
	huge := policy(t, 1000, 1000*time.Hour, 2000000*time.Hour, 0)
	if d := huge.Decide(Message{Attempt: 100}, nil); d.delayMs() != 2147483647 || d.Delay() < 0 {
		t.Errorf("overflow: %+v", d)
	}
	j := DefaultRetryPolicy()
	for i := 0; i < 1000; i++ {
		d := j.Decide(Message{Attempt: 0}, nil).Delay()
		if d < time.Second || d >= 1250*time.Millisecond || d%time.Millisecond != 0 {
			t.Fatalf("jittered delay %s", d)
		}
	}
	for _, bad := range []struct {
		n      int
		b, m   time.Duration
		jitter float64
	}{{0, 0, 0, 0}, {1, -1, 0, 0}, {1, 2 * time.Second, time.Second, 0}, {1, 0, 0, -0.1}, {1, 0, 0, 1.1}} {
		if _, err := NewExponentialPolicy(bad.n, bad.b, bad.m, bad.jitter); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
	if RetryAfter(-time.Second).Delay() != 0 || !DeadLetter().IsDeadLetter() || RetryAfter(1500*time.Microsecond).delayMs() != 1 {
		t.Error("RetryAfter/DeadLetter")
	}
}

type corpus struct {
	Version          int    `json:"version"`
	InputBound       int    `json:"inputBound"`
	MaxLength        int    `json:"maxLength"`
	TruncationMarker string `json:"truncationMarker"`
	Cases            []struct {
		Name     string   `json:"name"`
		Input    string   `json:"input"`
		Expected string   `json:"expected"`
		Secrets  []string `json:"secrets"`
	} `json:"cases"`
}

func TestPullC31_RedactionCorpusAndTheInputBound(t *testing.T) {
	var c corpus
	if err := json.Unmarshal([]byte(readContract(t, "redaction-corpus.json")), &c); err != nil {
		t.Fatal(err)
	}
	if c.Version != 1 || c.InputBound != RedactInputBound || c.MaxLength != RedactMaxLength || c.TruncationMarker != RedactTruncationMarker {
		t.Fatalf("corpus header %d %d %d %q", c.Version, c.InputBound, c.MaxLength, c.TruncationMarker)
	}
	if len(c.Cases) == 0 {
		t.Fatal("empty corpus")
	}
	for _, k := range c.Cases {
		got := Redact(k.Input)
		if got != k.Expected {
			t.Errorf("%s: got %q, want %q", k.Name, got, k.Expected)
		}
		for _, s := range k.Secrets {
			if contains(got, s) {
				t.Errorf("%s: output contains secret %q", k.Name, s)
			}
		}
	}
	big := strings.Repeat("password=x@", 10*1024*1024/11+1)
	start := time.Now()
	got := Redact(big)
	if want := Redact(string([]rune(big)[:RedactInputBound])); got != want {
		t.Error("10 MB input: output differs from that of its first 2512 characters")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("10 MB input took %s", d)
	}
}

type selfErr struct{}

func (e *selfErr) Error() string { return "loop" }
func (e *selfErr) Unwrap() error { return e }

func TestPullC32_ErrorChainText(t *testing.T) {
	// Go (PULL-63): err.Error() of the top error only; a wrapped error already includes its causes.
	err := errors.New("l7")
	for i := 6; i >= 1; i-- {
		err = fmt.Errorf("l%d: %w", i, err)
	}
	if got := ErrorText(err); got != err.Error() || contains(got, " | caused by ") {
		t.Errorf("7 nested causes: %q", got)
	}
	if got := ErrorText(&selfErr{}); got != "loop" {
		t.Errorf("self cause: %q", got)
	}
	if got := RedactedErrorText(fmt.Errorf("connect: %w", errors.New("password=hunter2"))); got != "connect: password=[REDACTED]" {
		t.Errorf("redacted chain: %q", got)
	}
}

// TestEveryContractCaseHasATest reads cases.json and greps this package's test files for a test
// named after each case id (TestPullC<N>_...).
func TestEveryContractCaseHasATest(t *testing.T) {
	var cases struct {
		Cases []struct {
			ID string `json:"id"`
		} `json:"cases"`
	}
	if err := json.Unmarshal([]byte(readContract(t, "cases.json")), &cases); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("*_test.go")
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	var missing []string
	for _, c := range cases.Cases {
		n := strings.TrimPrefix(c.ID, "PULL-C")
		if !regexp.MustCompile(`func TestPullC` + n + `_`).MatchString(src.String()) {
			missing = append(missing, c.ID)
		}
	}
	sort.Strings(missing)
	if len(cases.Cases) == 0 || len(missing) > 0 {
		t.Errorf("%d cases, no test for %v", len(cases.Cases), missing)
	}
}
