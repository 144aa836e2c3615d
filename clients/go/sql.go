package inbox

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// stmt is one rendered statement: its text for the driver and the parameter names in the
// driver's binding order ("ids" where MySQL expands the claimed ids).
type stmt struct {
	text  string
	slots []string
}

// args returns the text (with MySQL's :ids expanded to one ? per id) and the driver's
// arguments, from the values by canonical name. With ids nil, an "ids" slot binds
// values["ids"] as one value (the batch completion on PostgreSQL and SQLite).
func (s stmt) args(values map[string]any, ids []any) (string, []any) {
	var out []any
	expand := false
	for _, name := range s.slots {
		if name == "ids" && ids != nil {
			expand = true
			out = append(out, ids...)
			continue
		}
		out = append(out, values[name])
	}
	text := s.text
	if expand {
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
		text = strings.Replace(text, ":ids", marks, 1)
	}
	return text, out
}

// mysqlClaim holds the steps of the MySQL/MariaDB claim around its select (pull.md §5.3).
type mysqlClaim struct {
	lock, update, fetch, unlock stmt
}

// statements are the five pull statements rendered for one worker (names substituted,
// parameters mapped to the driver's style) once, when the worker is built.
type statements struct {
	// claim is the claim statement (PostgreSQL, SQLite) or the select of step 3 (MySQL).
	claim                        stmt
	mysql                        *mysqlClaim
	renew, complete, retry, dead stmt
	// completeBatch is the batch handler's Complete of a whole batch (complete-batch.sql).
	completeBatch stmt
}

// Canonical parameter order of the contract (clients/contract/README.md), i.e. PULL-11. Every
// claim file of a dialect takes the claim's values.
var canonicalParams = map[string][]string{
	"claim":    {"source", "batch", "lease_ms", "cand_limit", "token"},
	"renew":    {"lease_ms", "id", "token"},
	"complete": {"id", "token"},
	"retry":    {"delay_ms", "error", "id", "token"},
	"dead":     {"error", "id", "token"},
	// The batch handler's Complete: :ids first, like Complete's :id.
	"complete-batch": {"ids", "token"},
}

var placeholderRe = regexp.MustCompile(`\{[a-z_]+\}`)

func unsupportedDialect(d Dialect) error {
	return fmt.Errorf("%w: %s (postgresql, mysql and sqlite only)", ErrUnsupportedDialect, d)
}

func renderStatements(d Dialect, names [][2]string) (*statements, error) {
	if d != PostgreSQL && d != MySQL && d != SQLite {
		return nil, unsupportedDialect(d)
	}
	var s statements
	claim := "claim"
	if d == MySQL {
		claim = "claim-select"
		s.mysql = &mysqlClaim{}
	}
	type item struct {
		file, order string
		dst         *stmt
	}
	items := []item{
		{claim, "claim", &s.claim},
		{"renew", "renew", &s.renew},
		{"complete", "complete", &s.complete},
		{"retry", "retry", &s.retry},
		{"dead", "dead", &s.dead},
		{"complete-batch", "complete-batch", &s.completeBatch},
	}
	if d == MySQL {
		items = append(items,
			item{"claim-lock", "claim", &s.mysql.lock},
			item{"claim-update", "claim", &s.mysql.update},
			item{"claim-fetch", "claim", &s.mysql.fetch},
			item{"claim-unlock", "claim", &s.mysql.unlock})
	}
	for _, it := range items {
		text := contractSQL[string(d)+"/"+it.file]
		out, err := render(d, text, names, canonicalParams[it.order])
		if err != nil {
			return nil, fmt.Errorf("inbox: contract statement %s/%s: %w", d, it.file, err)
		}
		*it.dst = out
	}
	return &s, nil
}

// render substitutes names and maps parameters in the dialect's style: $n in the canonical
// order (PostgreSQL), ? per occurrence with :ids kept for expansion (MySQL), :name kept and
// bound by first appearance (SQLite numbers :name parameters that way; a repeat shares it).
func render(d Dialect, text string, names [][2]string, order []string) (stmt, error) {
	if d == PostgreSQL {
		out, err := renderPostgres(text, names, order)
		return stmt{text: out, slots: order}, err
	}
	t, err := renderNames(dropComments(text), names)
	if err != nil {
		return stmt{}, err
	}
	known := map[string]bool{}
	for _, n := range order {
		known[n] = true
	}
	var unknown string
	var slots []string
	seen := map[string]bool{}
	out, _ := mapParams(t, func(name string) string {
		switch {
		case d == MySQL && name == "ids":
			slots = append(slots, name)
			return ":ids"
		case !known[name]:
			unknown = name
			return ":" + name
		case d == MySQL:
			slots = append(slots, name)
			return "?"
		default:
			if !seen[name] {
				seen[name] = true
				slots = append(slots, name)
			}
			return ":" + name
		}
	})
	if unknown != "" {
		return stmt{}, fmt.Errorf("unknown parameter :%s", unknown)
	}
	return stmt{text: out, slots: slots}, nil
}

// dropComments removes every line whose first non-blank characters are "--".
func dropComments(text string) string {
	lines := strings.Split(text, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " \t"), "--") {
			continue
		}
		kept = append(kept, l)
	}
	return strings.Join(kept, "\n")
}

// renderNames replaces each {name} placeholder with its mapped bare name (the quotes are in the
// text). An unknown placeholder is an error of the file.
func renderNames(text string, names [][2]string) (string, error) {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n[0]] = n[1]
	}
	var bad string
	out := placeholderRe.ReplaceAllStringFunc(text, func(p string) string {
		key := p[1 : len(p)-1]
		v, ok := m[key]
		if !ok {
			if bad == "" {
				bad = p
			}
			return p
		}
		return v
	})
	if bad != "" {
		return "", fmt.Errorf("unknown placeholder %s", bad)
	}
	return out, nil
}

// mapParams rewrites each :name parameter (a ':' neither preceded nor followed by another ':')
// through repl, and returns the names in order of appearance.
func mapParams(text string, repl func(name string) string) (string, []string) {
	var b strings.Builder
	var seen []string
	isStart := func(c byte) bool { return (c >= 'a' && c <= 'z') || c == '_' }
	isPart := func(c byte) bool { return isStart(c) || (c >= '0' && c <= '9') }
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == ':' && (i == 0 || text[i-1] != ':') && i+1 < len(text) && text[i+1] != ':' && isStart(text[i+1]) {
			j := i + 1
			for j < len(text) && isPart(text[j]) {
				j++
			}
			name := text[i+1 : j]
			seen = append(seen, name)
			b.WriteString(repl(name))
			i = j - 1
			continue
		}
		b.WriteByte(c)
	}
	return b.String(), seen
}

func renderPostgres(text string, names [][2]string, order []string) (string, error) {
	t, err := renderNames(dropComments(text), names)
	if err != nil {
		return "", err
	}
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i + 1
	}
	var unknown string
	out, seen := mapParams(t, func(name string) string {
		n, ok := pos[name]
		if !ok {
			unknown = name
			return ":" + name
		}
		return "$" + strconv.Itoa(n)
	})
	if unknown != "" {
		return "", fmt.Errorf("unknown parameter :%s", unknown)
	}
	used := map[string]bool{}
	for _, n := range seen {
		used[n] = true
	}
	for _, n := range order {
		if !used[n] {
			return "", fmt.Errorf("parameter :%s is not used", n)
		}
	}
	return out, nil
}
