package inbox

import "strings"

// Redaction of error text (pull.md §11.2). The rules are coded by hand over the bounded text as a
// slice of code points: positions and lengths in the specification count code points. Every
// pattern is matched with bounded work per position, so a call is linear in the bounded length
// (PULL-69). The shared corpus clients/contract/redaction-corpus.json is the judge.

const (
	// RedactInputBound is step 1 of PULL-65: Redact keeps this many characters first.
	RedactInputBound = 2512
	// RedactMaxLength is the longest text Redact returns, in characters (step 5).
	RedactMaxLength = 2000
	// RedactTruncationMarker is appended to a text cut to RedactMaxLength.
	RedactTruncationMarker = "...[truncated]"

	redacted       = "[REDACTED]"
	maskedUserinfo = "***"
	maxPrefix      = 64
	maxScheme      = 32
	uriWindow      = 200
	credentialLen  = 16
)

var schemeWords = [...]string{"basic", "bearer", "digest", "negotiate", "token"}

// keyParts are the keys of PULL-66 in the listed order, split where an optional -, _ or . may
// stand.
var keyParts = [...][]string{
	{"authorization"},
	{"api", "key"},
	{"access", "key"},
	{"secret", "key"},
	{"private", "key"},
	{"cookie"},
	{"token"},
	{"secret"},
	{"password"},
	{"passwd"},
	{"pwd"},
	{"passphrase"},
	{"credentials"},
	{"credential"},
}

// Redact masks secrets in text with the five steps of PULL-65. Every QueueBox implementation
// gives the same output for every input.
func Redact(text string) string {
	// Step 1 before anything else: stop reading at the bound, so a 10 MB text costs what a
	// 2512-character one does.
	bounded := make([]rune, 0, minInt(len(text), RedactInputBound))
	for _, r := range text {
		if len(bounded) == RedactInputBound {
			break
		}
		bounded = append(bounded, r)
	}
	t := maskKeyValues(bounded)
	t = maskUserinfo(t)
	t = maskAuthSchemes(t)
	return truncateRunes(t)
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func truncateRunes(t []rune) string {
	if len(t) <= RedactMaxLength {
		return string(t)
	}
	kept := RedactMaxLength - len([]rune(RedactTruncationMarker))
	return string(t[:kept]) + RedactTruncationMarker
}

func isASCIIAlpha(c rune) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isASCIIDigit(c rune) bool { return c >= '0' && c <= '9' }
func isASCIIAlnum(c rune) bool { return isASCIIAlpha(c) || isASCIIDigit(c) }

// isWord is [A-Za-z0-9_], ASCII only (PULL-64).
func isWord(c rune) bool { return isASCIIAlnum(c) || c == '_' }

// isSpace is space, tab, CR, LF, form feed and vertical tab; nothing else.
func isSpace(c rune) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '\v', '\f':
		return true
	}
	return false
}

func isBlank(c rune) bool { return c == ' ' || c == '\t' }

func asciiLower(c rune) rune {
	if c >= 'A' && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// wordAt reports whether word (ASCII lower case) occurs at position at, compared ASCII
// case-insensitively.
func wordAt(t []rune, at int, word string) bool {
	if at < 0 || at+len(word) > len(t) {
		return false
	}
	for i := 0; i < len(word); i++ {
		if asciiLower(t[at+i]) != rune(word[i]) {
			return false
		}
	}
	return true
}

func schemeWordAt(t []rune, at int) int {
	for _, w := range schemeWords {
		if wordAt(t, at, w) {
			return len(w)
		}
	}
	return 0
}

func skipBlanks(t []rune, at int) int {
	for at < len(t) && isBlank(t[at]) {
		at++
	}
	return at
}

// ---- Step 2: key/value pairs (PULL-66) ----

func maskKeyValues(t []rune) []rune {
	out := make([]rune, 0, len(t))
	copied, resume := 0, 0
	end := 1
	for end < len(t) {
		ok := false
		var valueStart int
		var colon bool
		if isKeyEnd(t, end) {
			if vs, c, found := separator(t, end); found && keyEndsAt(t, end, resume) {
				ok, valueStart, colon = true, vs, c
			}
		}
		if !ok {
			end++
			continue
		}
		if valueEnd, repl, found := kvValue(t, valueStart, colon); found {
			out = append(out, t[copied:valueStart]...)
			out = append(out, []rune(repl)...)
			copied = valueEnd
			resume = valueEnd
		} else {
			resume = valueStart
		}
		end = resume + 1
	}
	return append(out, t[copied:]...)
}

func isKeyEnd(t []rune, end int) bool {
	return isASCIIAlpha(t[end-1]) && !isWord(t[end])
}

func separator(t []rune, at int) (int, bool, bool) {
	i := at
	if i < len(t) && (t[i] == '"' || t[i] == '\'') {
		i++
	}
	i = skipBlanks(t, i)
	if i >= len(t) || (t[i] != ':' && t[i] != '=') {
		return 0, false, false
	}
	mark := t[i]
	for i < len(t) && t[i] == mark {
		i++
	}
	return skipBlanks(t, i), mark == ':', true
}

func keyEndsAt(t []rune, end, resume int) bool {
	for _, parts := range keyParts {
		for _, start := range keyStarts(t, end, parts) {
			if start >= 0 && prefixAllows(t, start, resume) {
				return true
			}
		}
	}
	return false
}

func keyStarts(t []rune, end int, parts []string) [2]int {
	res := [2]int{-1, -1}
	last := parts[len(parts)-1]
	lastStart := end - len(last)
	if lastStart < 0 || !wordAt(t, lastStart, last) {
		return res
	}
	if len(parts) == 1 {
		res[0] = lastStart
		return res
	}
	first := parts[0]
	if s := lastStart - len(first); s >= 0 && wordAt(t, s, first) {
		res[0] = s
	}
	if s := lastStart - 1; s >= 0 && (t[s] == '-' || t[s] == '_' || t[s] == '.') {
		if s2 := s - len(first); s2 >= 0 && wordAt(t, s2, first) {
			res[1] = s2
		}
	}
	return res
}

func prefixAllows(t []rune, keyStart, resume int) bool {
	run := 0
	for i := keyStart - 1; i >= 0 && run <= maxPrefix && isWord(t[i]); i-- {
		run++
	}
	return run <= maxPrefix && keyStart-run >= resume
}

func kvValue(t []rune, start int, colon bool) (int, string, bool) {
	if start >= len(t) {
		return 0, "", false
	}
	first := t[start]
	switch first {
	case '"', '\'':
		closeAt := closingQuote(t, start+1, first)
		if closeAt >= 0 {
			return closeAt + 1, string(first) + redacted + string(first), true
		}
		return len(t), string(first) + redacted, true
	case '{', '[':
		return 0, "", false
	}
	i := start
	if n := schemeWordAt(t, start); n > 0 {
		if after := skipBlanks(t, start+n); after > start+n {
			i = after
		}
	}
	for i < len(t) && !endsValue(t[i], colon) {
		i++
	}
	if i > start {
		return i, redacted, true
	}
	return 0, "", false
}

func closingQuote(t []rune, from int, quote rune) int {
	for i := from; i < len(t); {
		if t[i] == quote {
			return i
		}
		if t[i] == '\\' {
			i += 2
		} else {
			i++
		}
	}
	return -1
}

func endsValue(c rune, colon bool) bool {
	switch c {
	case ',', ';', '}', ']', '&', '"':
		return true
	}
	if colon {
		return c == '\r' || c == '\n'
	}
	return isSpace(c)
}

// ---- Step 3: URL user information (PULL-67) ----

type uriIndex struct {
	nextSpace, nextPath, nextColon, nextNonDigit []int
	lastAt                                       []int // lastAt[i]: last '@' before i, or -1
}

func newURIIndex(t []rune) *uriIndex {
	n := len(t)
	next := func(want func(rune) bool) []int {
		tab := make([]int, n+1)
		tab[n] = n
		for i := n - 1; i >= 0; i-- {
			if want(t[i]) {
				tab[i] = i
			} else {
				tab[i] = tab[i+1]
			}
		}
		return tab
	}
	lastAt := make([]int, n+1)
	lastAt[0] = -1
	for i, c := range t {
		if c == '@' {
			lastAt[i+1] = i
		} else {
			lastAt[i+1] = lastAt[i]
		}
	}
	return &uriIndex{
		nextSpace:    next(isSpace),
		nextPath:     next(func(c rune) bool { return c == '/' || c == '?' || c == '#' }),
		nextColon:    next(func(c rune) bool { return c == ':' }),
		nextNonDigit: next(func(c rune) bool { return !isASCIIDigit(c) }),
		lastAt:       lastAt,
	}
}

func (x *uriIndex) isPort(from, to int) bool {
	return from < to && x.nextNonDigit[from] >= to
}

func maskUserinfo(t []rune) []rune {
	idx := newURIIndex(t)
	out := make([]rune, 0, len(t))
	copied, resume, colon := 0, 0, 0
	for colon+1 < len(t) {
		if t[colon] != ':' || t[colon+1] != '/' || !schemeEndsAt(t, colon, resume) {
			colon++
			continue
		}
		slashes := 1
		if colon+2 < len(t) && t[colon+2] == '/' {
			slashes = 2
		}
		rest := colon + 1 + slashes
		if at, ok := userinfoEnd(t, idx, rest); ok {
			out = append(out, t[copied:rest]...)
			out = append(out, []rune(maskedUserinfo)...)
			copied = at
			resume = at + 1
		} else {
			resume = rest
		}
		colon = resume
	}
	return append(out, t[copied:]...)
}

func schemeEndsAt(t []rune, colon, resume int) bool {
	lowest := colon - maxScheme
	if lowest < 0 {
		lowest = 0
	}
	if resume > lowest {
		lowest = resume
	}
	for i := colon - 1; i >= lowest; i-- {
		c := t[i]
		if !(isASCIIAlnum(c) || c == '+' || c == '.' || c == '-') {
			return false
		}
		if isASCIIAlpha(c) {
			return true
		}
	}
	return false
}

func userinfoEnd(t []rune, x *uriIndex, rest int) (int, bool) {
	lEnd := x.nextSpace[rest]
	firstPath := x.nextPath[rest]
	firstColon := x.nextColon[rest]
	if at := x.lastAt[lEnd]; at >= 0 && at >= rest {
		userinfo := at > rest &&
			(firstPath >= at || (firstColon < firstPath && !x.isPort(firstColon+1, firstPath)))
		return at, userinfo
	}
	hostAndPassword := firstColon < lEnd && firstPath >= lEnd && !x.isPort(firstColon+1, lEnd)
	if !hostAndPassword {
		return 0, false
	}
	windowEnd := lEnd + uriWindow
	if windowEnd > len(t) {
		windowEnd = len(t)
	}
	cut := windowCut(t, lEnd, windowEnd)
	for i := cut - 1; i >= lEnd; i-- {
		if t[i] == '@' && i+1 < cut && !isSpace(t[i+1]) {
			return i, true
		}
	}
	return 0, false
}

func windowCut(t []rune, start, end int) int {
	for i := start; i < end; i++ {
		switch t[i] {
		case '\r', '\n', '/', '?', '#':
			return i
		case ',':
			if i+1 < end && t[i+1] == ' ' {
				return i
			}
		}
	}
	return end
}

// ---- Step 4: bare authorization schemes (PULL-68) ----

func maskAuthSchemes(t []rune) []rune {
	out := make([]rune, 0, len(t))
	copied, at := 0, 0
	for at < len(t) {
		start, end, ok := credentialAfterScheme(t, at)
		if !ok {
			at++
			continue
		}
		if looksLikeCredential(t[start:end]) {
			out = append(out, t[copied:start]...)
			out = append(out, []rune(redacted)...)
			copied = end
			at = end
		} else {
			at = start
		}
	}
	return append(out, t[copied:]...)
}

func credentialAfterScheme(t []rune, at int) (int, int, bool) {
	if at > 0 && isWord(t[at-1]) {
		return 0, 0, false
	}
	n := schemeWordAt(t, at)
	if n == 0 {
		return 0, 0, false
	}
	wordEnd := at + n
	start := skipBlanks(t, wordEnd)
	if start == wordEnd {
		return 0, 0, false
	}
	end := start
	for end < len(t) && isTokenChar(t[end]) {
		end++
	}
	if end == start {
		return 0, 0, false
	}
	for end < len(t) && t[end] == '=' {
		end++
	}
	return start, end, true
}

func isTokenChar(c rune) bool {
	return isASCIIAlnum(c) || strings.ContainsRune("._~+/-", c)
}

func looksLikeCredential(g []rune) bool {
	if len(g) >= credentialLen {
		return true
	}
	for _, c := range g {
		if isASCIIDigit(c) || c == '=' {
			return true
		}
	}
	return false
}

// ErrorText is the error text of PULL-63 for Go: err.Error() of the top error only, because a
// Go error that wraps its cause already includes the cause's text.
func ErrorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// RedactedErrorText is ErrorText passed through Redact: what may reach last_error or a log line.
func RedactedErrorText(err error) string { return Redact(ErrorText(err)) }
