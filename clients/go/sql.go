package inbox

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// statements are the five pull statements rendered for one worker (names substituted,
// parameters mapped to the driver's style) once, when the worker is built.
type statements struct {
	claim, renew, complete, retry, dead string
}

// Canonical parameter order of the contract (clients/contract/README.md), i.e. PULL-11.
var canonicalParams = map[string][]string{
	"claim":    {"source", "batch", "lease_ms", "cand_limit", "token"},
	"renew":    {"lease_ms", "id", "token"},
	"complete": {"id", "token"},
	"retry":    {"delay_ms", "error", "id", "token"},
	"dead":     {"error", "id", "token"},
}

var placeholderRe = regexp.MustCompile(`\{[a-z_]+\}`)

func unsupportedDialect(d Dialect) error {
	return fmt.Errorf("%w: %s (only postgresql)", ErrUnsupportedDialect, d)
}

func renderStatements(d Dialect, names [][2]string) (*statements, error) {
	if d != PostgreSQL {
		return nil, unsupportedDialect(d)
	}
	var s statements
	for _, st := range []struct {
		name string
		text string
		dst  *string
	}{
		{"claim", pgClaimSQL, &s.claim},
		{"renew", pgRenewSQL, &s.renew},
		{"complete", pgCompleteSQL, &s.complete},
		{"retry", pgRetrySQL, &s.retry},
		{"dead", pgDeadSQL, &s.dead},
	} {
		out, err := renderPostgres(st.text, names, canonicalParams[st.name])
		if err != nil {
			return nil, fmt.Errorf("inbox: contract statement %s: %w", st.name, err)
		}
		*st.dst = out
	}
	return &s, nil
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
