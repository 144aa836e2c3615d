package inbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers the "mysql" database/sql driver
	_ "github.com/lib/pq"              // registers the "postgres" database/sql driver
	_ "github.com/mattn/go-sqlite3"    // registers the "sqlite3" database/sql driver (cgo)
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

// dialectOf is the database a test runs on: the innermost segment of its name that names a
// dialect (eachDialect's subtests are named so), else PostgreSQL.
func dialectOf(t testing.TB) Dialect {
	parts := strings.Split(t.Name(), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		switch d := Dialect(parts[i]); d {
		case PostgreSQL, MySQL, SQLite:
			return d
		}
	}
	return PostgreSQL
}

// sourceFor is the stored source name of a case's source ("s", "t"). MySQL's claim lock is a
// named lock of the whole server (queuebox_pull: + SHA-256 of "<table>:<source>", pull.md §5.3),
// so tests that run at the same time on one server use their own source names; otherwise one
// test's held lock (C19, C20) would stall the others.
func sourceFor(t testing.TB, source string) string {
	if dialectOf(t) != MySQL {
		return source
	}
	sum := sha256.Sum256([]byte(t.Name()))
	return source + "_" + hex.EncodeToString(sum[:6])
}

// eachDialect runs body as one subtest per database (postgresql, sqlite, mysql); a database
// that cases.json does not list for the case is skipped with the PULL-76 reason.
func eachDialect(t *testing.T, id string, body func(t *testing.T)) {
	listed := caseDatabases(t, id)
	for _, d := range []Dialect{PostgreSQL, SQLite, MySQL} {
		d := d
		t.Run(string(d), func(t *testing.T) {
			if !listed[string(d)] {
				t.Skipf("not applicable on %s: cases.json does not list it for %s (PULL-76)", d, id)
			}
			body(t)
		})
	}
}

func caseDatabases(t testing.TB, id string) map[string]bool {
	var cases struct {
		Cases []struct {
			ID        string   `json:"id"`
			Databases []string `json:"databases"`
		} `json:"cases"`
	}
	if err := json.Unmarshal([]byte(readContract(t, "cases.json")), &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases.Cases {
		if c.ID == id {
			out := map[string]bool{}
			for _, d := range c.Databases {
				out[d] = true
			}
			return out
		}
	}
	t.Fatalf("cases.json has no case %s", id)
	return nil
}

// mysqlDSN is the MariaDB test server (PULL-75): QUEUEBOX_TEST_MYSQL_URL
// (mysql://user:password@host:port), else root without a password on 127.0.0.1:3306.
func mysqlDSN(t testing.TB, database string) string {
	raw := os.Getenv("QUEUEBOX_TEST_MYSQL_URL")
	if raw == "" {
		raw = "mysql://root@127.0.0.1:3306"
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	user := u.User.Username()
	if p, ok := u.User.Password(); ok {
		user += ":" + p
	}
	// clientFoundRows: an UPDATE reports the rows its fence matched (PULL-10); UTC times.
	return fmt.Sprintf("%s@tcp(%s)/%s?clientFoundRows=true&parseTime=true&loc=UTC&time_zone=%%27%%2B00%%3A00%%27", user, u.Host, database)
}

// fixture is one isolated inbox table and app_rows (clients/contract/fixtures): a schema on
// PostgreSQL, a file database on SQLite, a database on MySQL/MariaDB.
type fixture struct {
	t       *testing.T
	dialect Dialect
	schema  string
	names   map[string]string // placeholder name -> mapped name
	db      *sql.DB           // the worker's connections
	admin   *sql.DB
}

func newFixture(t *testing.T, s Schema) *fixture {
	t.Helper()
	f := &fixture{t: t, dialect: dialectOf(t), schema: "qb_go_" + randHex(6), names: map[string]string{}}
	for _, n := range s.names() {
		f.names[n[0]] = n[1]
	}
	switch f.dialect {
	case SQLite:
		f.openSQLite(s)
	case MySQL:
		f.openMySQL(s)
	default:
		f.openPostgres(s)
	}
	return f
}

func (f *fixture) openPostgres(s Schema) {
	t := f.t
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
}

// statementsOf splits a fixture script into its statements (comment lines dropped).
func statementsOf(script string) []string {
	var out []string
	for _, st := range strings.Split(dropComments(script), ";\n") {
		if st = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(st), ";")); st != "" {
			out = append(out, st)
		}
	}
	return out
}

func (f *fixture) runScript(db *sql.DB, file string, s Schema) {
	script, err := renderNames(readContract(f.t, file), s.names())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, st := range statementsOf(script) {
		if _, err := db.Exec(st); err != nil {
			f.t.Fatalf("fixture statement: %v\n%s", err, st)
		}
	}
}

func (f *fixture) openSQLite(s Schema) {
	dir := f.t.TempDir()
	// No busy timeout in the DSN: the worker sets its own on every connection (pull.md §5.4).
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "inbox.db"))
	if err != nil {
		f.t.Fatal(err)
	}
	f.db, f.admin = db, db
	f.runScript(db, "fixtures/sqlite.sql", s)
	f.t.Cleanup(func() { db.Close() })
}

func (f *fixture) openMySQL(s Schema) {
	admin, err := sql.Open("mysql", mysqlDSN(f.t, ""))
	if err != nil {
		f.t.Fatal(err)
	}
	name := "qb_clients_go_" + randHex(6)
	if _, err := admin.Exec("CREATE DATABASE `" + name + "`"); err != nil {
		f.t.Fatalf("MariaDB cannot be reached (QUEUEBOX_TEST_MYSQL_URL or 127.0.0.1:3306): %v", err)
	}
	db, err := sql.Open("mysql", mysqlDSN(f.t, name))
	if err != nil {
		f.t.Fatal(err)
	}
	db.SetMaxOpenConns(20)
	f.db, f.admin = db, admin
	f.runScript(db, "fixtures/mysql.sql", s)
	f.t.Cleanup(func() {
		db.Close()
		_, _ = admin.Exec("DROP DATABASE IF EXISTS `" + name + "`")
		admin.Close()
	})
}

func (f *fixture) n(name string) string { return `"` + f.names[name] + `"` }

// q renders {placeholders} of a test statement with the fixture's names, and writes it for the
// dialect: PostgreSQL's $n become ? and, on MySQL, the "quotes" become backticks.
func (f *fixture) q(text string) string {
	out, err := renderNames(text, fixtureNames(f.names))
	if err != nil {
		f.t.Fatal(err)
	}
	if f.dialect != PostgreSQL {
		out = regexp.MustCompile(`\$[0-9]+`).ReplaceAllString(out, "?")
		out = strings.ReplaceAll(out, "::text", "")
	}
	if f.dialect == MySQL {
		out = strings.ReplaceAll(out, `"`, "`")
	}
	return out
}

// now is the database clock on the dialect (pull.md PULL-7).
func (f *fixture) now() string {
	switch f.dialect {
	case SQLite:
		return "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
	case MySQL:
		return "UTC_TIMESTAMP(6)"
	}
	return "clock_timestamp()"
}

// nowPlus is the database clock plus a bound number of milliseconds (one ? or $n, given).
func (f *fixture) nowPlus(param string) string {
	switch f.dialect {
	case SQLite:
		return "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', " + param + " / 1000.0))"
	case MySQL:
		return "UTC_TIMESTAMP(6) + INTERVAL " + param + " * 1000 MICROSECOND"
	}
	return "clock_timestamp() + " + param + "::bigint * interval '1 millisecond'"
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
	r.source = sourceFor(f.t, r.source)
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
	json := "$8::jsonb, $9::jsonb"
	if f.dialect != PostgreSQL {
		json = "$8, $9"
	}
	_, err := f.db.Exec(f.q(`INSERT INTO "{inbox}" ("{id}", "{source}", "{consumption}", "{state}", "{idempotency_key}",
		"{aggregate_id}", "{event_type}", "{payload}", "{headers}", "{correlation_id}", "{attempt}", "{scheduled_at}", "{created_at}")
		VALUES ($1, $2, $3, $4, $5, $6, $7, `+json+`, $10, $11, `+f.nowPlus("$12")+`, `+f.nowPlus("$13")+`)`),
		r.id, r.source, r.consumption, r.state, r.ref, r.aggregateID, r.eventType, r.payload, r.headers,
		r.correlationID, r.attempt, int64(r.scheduledIn/time.Millisecond), int64(-60000+r.index))
	if err != nil {
		f.t.Fatalf("insert: %v", err)
	}
	return r.id
}

// nullTime scans a nullable point in time as any of the drivers returns it.
type nullTime struct {
	Valid bool
	Time  time.Time
}

func (n *nullTime) Scan(v any) error {
	if v == nil {
		*n = nullTime{}
		return nil
	}
	var d dbTime
	if err := d.Scan(v); err != nil {
		return err
	}
	*n = nullTime{Valid: true, Time: d.t}
	return nil
}

type rowState struct {
	state     string
	attempt   int
	lastError sql.NullString
	token     sql.NullString
	lease     nullTime
	processed nullTime
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
	if err := f.db.QueryRow(f.q(`SELECT count(*) FROM app_rows WHERE message_id = $1`), id).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// steal is "the thief": a new token and a 600 s lease, set directly.
func (f *fixture) steal(id string) string {
	tok := newToken()
	_, err := f.db.Exec(f.q(`UPDATE "{inbox}" SET "{claim_token}" = $1, "{lease_expires_at}" = `+f.nowPlus("$2")+` WHERE "{id}" = $3`), tok, int64(600000), id)
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
	opts.Source = sourceFor(t, opts.Source)
	if opts.Dialect == "" {
		opts.Dialect = dialectOf(t)
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

// insertApp is the handler's application write, in the dialect's parameter style.
func (f *fixture) insertApp(ctx context.Context, tx Tx, id, note string) error {
	_, err := tx.ExecContext(ctx, f.q(`INSERT INTO app_rows (message_id, note) VALUES ($1, $2)`), id, note)
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
