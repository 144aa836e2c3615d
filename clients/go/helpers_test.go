package inbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/lib/pq" // registers the "postgres" database/sql driver
)

// pgURL is the test server (PULL-75), overridable by QUEUEBOX_TEST_PG_URL.
func pgURL() string {
	if u := os.Getenv("QUEUEBOX_TEST_PG_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// contractDir is clients/contract (QUEUEBOX_CONTRACT_DIR, else ../contract).
func contractDir(t testing.TB) string {
	if d := os.Getenv("QUEUEBOX_CONTRACT_DIR"); d != "" {
		return d
	}
	d, err := filepath.Abs(filepath.Join("..", "contract"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func readContract(t testing.TB, rel string) string {
	b, err := os.ReadFile(filepath.Join(contractDir(t), rel))
	if err != nil {
		t.Fatalf("read contract file %s: %v", rel, err)
	}
	return string(b)
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// fixture is one isolated schema with an inbox table and app_rows (clients/contract/fixtures).
type fixture struct {
	t      *testing.T
	schema string
	names  map[string]string // placeholder name -> mapped name
	db     *sql.DB           // connections with search_path = schema
	admin  *sql.DB
}

func newFixture(t *testing.T, s Schema) *fixture {
	t.Helper()
	f := &fixture{t: t, schema: "qb_go_" + randHex(6), names: map[string]string{}}
	for _, n := range s.names() {
		f.names[n[0]] = n[1]
	}
	admin, err := sql.Open("postgres", pgURL())
	if err != nil {
		t.Fatal(err)
	}
	f.admin = admin
	script := readContract(t, "fixtures/postgresql.sql")
	script = strings.ReplaceAll(script, "{schema}", f.schema)
	script, err = renderNames(script, s.names())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := admin.Conn(ctx)
	if err != nil {
		t.Fatalf("PostgreSQL at %s cannot be reached: %v", pgURL(), err)
	}
	// One simple-query batch: no arguments.
	if _, err := conn.ExecContext(ctx, script); err != nil {
		conn.Close()
		t.Fatalf("fixture: %v", err)
	}
	conn.Close()
	u, err := url.Parse(pgURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", f.schema)
	u.RawQuery = q.Encode()
	db, err := sql.Open("postgres", u.String())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(20)
	f.db = db
	t.Cleanup(func() {
		db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(ctx, `DROP SCHEMA IF EXISTS "`+f.schema+`" CASCADE`)
		admin.Close()
	})
	return f
}

func (f *fixture) n(name string) string { return `"` + f.names[name] + `"` }

// q renders {placeholders} of a test statement with the fixture's names.
func (f *fixture) q(text string) string {
	out, err := renderNames(text, fixtureNames(f.names))
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func fixtureNames(m map[string]string) [][2]string {
	var out [][2]string
	for k, v := range m {
		out = append(out, [2]string{k, v})
	}
	return out
}

// row describes a row to insert; zero fields take the defaults of cases.json.
type row struct {
	ref           string
	id            string
	source        string
	consumption   string
	state         string
	attempt       int
	aggregateID   *string
	eventType     *string
	correlationID *string
	payload       string // JSON text
	headers       string // JSON text
	scheduledIn   time.Duration
	index         int
}

func sp(s string) *string { return &s }

// insert inserts r and returns its id.
func (f *fixture) insert(r row) string {
	f.t.Helper()
	if r.id == "" {
		r.id = newToken()
	}
	if r.source == "" {
		r.source = "s"
	}
	if r.consumption == "" {
		r.consumption = "pull"
	}
	if r.state == "" {
		r.state = "pending"
	}
	if r.payload == "" {
		r.payload = "{}"
	}
	if r.headers == "" {
		r.headers = "{}"
	}
	if r.scheduledIn == 0 {
		r.scheduledIn = -time.Second
	}
	if r.ref == "" {
		r.ref = r.id
	}
	_, err := f.db.Exec(f.q(`INSERT INTO "{inbox}" ("{id}", "{source}", "{consumption}", "{state}", "{idempotency_key}",
		"{aggregate_id}", "{event_type}", "{payload}", "{headers}", "{correlation_id}", "{attempt}", "{scheduled_at}", "{created_at}")
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10, $11,
		clock_timestamp() + $12::bigint * interval '1 millisecond',
		clock_timestamp() - interval '60 s' + $13::bigint * interval '1 millisecond')`),
		r.id, r.source, r.consumption, r.state, r.ref, r.aggregateID, r.eventType, r.payload, r.headers,
		r.correlationID, r.attempt, int64(r.scheduledIn/time.Millisecond), int64(r.index))
	if err != nil {
		f.t.Fatalf("insert: %v", err)
	}
	return r.id
}

type rowState struct {
	state     string
	attempt   int
	lastError sql.NullString
	token     sql.NullString
	lease     sql.NullTime
	processed sql.NullTime
}

func (f *fixture) get(id string) rowState {
	f.t.Helper()
	var s rowState
	err := f.db.QueryRow(f.q(`SELECT "{state}", "{attempt}", "{last_error}", "{claim_token}"::text, "{lease_expires_at}", "{processed_at}"
		FROM "{inbox}" WHERE "{id}" = $1`), id).Scan(&s.state, &s.attempt, &s.lastError, &s.token, &s.lease, &s.processed)
	if err != nil {
		f.t.Fatalf("get %s: %v", id, err)
	}
	return s
}

func (f *fixture) appRows(id string) int {
	var n int
	if err := f.db.QueryRow(`SELECT count(*) FROM app_rows WHERE message_id = $1`, id).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// steal is "the thief": a new token and a 600 s lease, set directly.
func (f *fixture) steal(id string) string {
	tok := newToken()
	_, err := f.db.Exec(f.q(`UPDATE "{inbox}" SET "{claim_token}" = $1, "{lease_expires_at}" = clock_timestamp() + interval '600 s' WHERE "{id}" = $2`), tok, id)
	if err != nil {
		f.t.Errorf("steal: %v", err)
	}
	return tok
}

// capture is a Logger that keeps every line.
type capture struct {
	mu    sync.Mutex
	lines []logLine
}

type logLine struct {
	level  Level
	msg    string
	fields Fields
}

func (c *capture) Log(level Level, msg string, fields Fields) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, logLine{level, msg, fields})
}

func (c *capture) has(msg string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if l.msg == msg {
			return true
		}
	}
	return false
}

func (c *capture) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, l := range c.lines {
		j, _ := json.Marshal(l.fields)
		fmt.Fprintf(&b, "%s %s %s\n", l.level, l.msg, j)
	}
	return b.String()
}

// faultySource wraps a ConnSource and can fail connections by purpose; it counts claims.
type faultySource struct {
	db     ConnSource
	claims int64
	fail   func(p Purpose) error
}

func (s *faultySource) Conn(ctx context.Context) (*sql.Conn, error) {
	p := PurposeOf(ctx)
	if p == PurposeClaim {
		atomic.AddInt64(&s.claims, 1)
	}
	if s.fail != nil {
		if err := s.fail(p); err != nil {
			return nil, err
		}
	}
	return s.db.Conn(ctx)
}

// started runs w in the background; stop() requests a stop and waits for Run.
type started struct {
	w    *Worker
	done chan error
}

func startWorker(t *testing.T, src ConnSource, opts Options, h Handler) *started {
	t.Helper()
	if opts.Source == "" {
		opts.Source = "s"
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 50 * time.Millisecond
	}
	w, err := NewWorker(src, opts, h)
	if err != nil {
		t.Fatal(err)
	}
	s := &started{w: w, done: make(chan error, 1)}
	go func() { s.done <- w.Run(context.Background()) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *started) stop(t *testing.T) {
	s.w.Stop()
	select {
	case err, ok := <-s.done:
		if ok && err != nil {
			t.Errorf("Run returned %v", err)
		}
		if ok {
			close(s.done)
		}
	case <-time.After(60 * time.Second):
		t.Errorf("Run did not return within 60 s of Stop")
	}
}

// waitFor polls cond every 20 ms up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}

func (f *fixture) waitState(id, state string, d time.Duration) {
	f.t.Helper()
	waitFor(f.t, d, "row "+id+" to be "+state, func() bool { return f.get(id).state == state })
}

func insertApp(ctx context.Context, tx Tx, id, note string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO app_rows (message_id, note) VALUES ($1, $2)`, id, note)
	return err
}

func policy(t *testing.T, max int, base, maxD time.Duration, jitter float64) RetryPolicy {
	p, err := NewExponentialPolicy(max, base, maxD, jitter)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type ctxT = context.Context

// panicSource fails the test run if the worker opens a connection.
type panicSource struct{}

func (panicSource) Conn(context.Context) (*sql.Conn, error) { panic("a connection was opened") }
