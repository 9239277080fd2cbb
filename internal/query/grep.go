package query

import (
	"fmt"
	"regexp"
	"strings"
)

// GrepOptions is grep-style sugar for a query.
type GrepOptions struct {
	Patterns []string // -e: literals; a line matches if it contains any
	Exclude  []string // -v: literals; a line containing any is dropped
	Regex    []string // -E: regular expressions, ORed with Patterns
	// Fold is -i: the literals match ASCII letters of either case (as grep
	// -F -i in the C locale, and hay search -i PATTERN), the regexes are
	// case-insensitive as (?i) (Unicode folding, RE2's).
	Fold bool
	// Word is grep -w: a match must be a whole word, neither preceded
	// nor followed by a word character (ASCII letter, digit or '_');
	// Line is grep -x: a match must be the whole line. Either turns
	// every pattern, -v's included, into a regex.
	Word, Line bool
}

// wordChar is the class of grep's word constituents (C locale).
const wordChar = `0-9A-Za-z_`

// whole wraps regex re as -w or -x asks.
func (o GrepOptions) whole(re string) string {
	switch {
	case o.Line:
		return `^(?:` + re + `)$`
	case o.Word:
		return `(?:^|[^` + wordChar + `])(?:` + re + `)(?:[^` + wordChar + `]|$)`
	}
	return re
}

// quote is literal p as a regex, folding ASCII letters with Fold.
func (o GrepOptions) quote(p string) string {
	if o.Fold {
		return foldASCIIRegex(p)
	}
	return regexp.QuoteMeta(p)
}

// FromGrep builds the query grep options describe. The query has no stream
// selector (all streams); it compiles to the same plan as the equivalent
// LogQL: `|= "a" or "b"`, `!= "x"`, `|~ "re"`, and with Fold literal
// filters that fold ASCII letters (LineFilter.FoldASCII). Literals ORed
// with regexes become regexes, a folded one with [aA]-style classes so
// that it still folds ASCII letters only.
func FromGrep(opts GrepOptions) (*Query, error) {
	q := &Query{}
	var pos []string
	whole := opts.Word || opts.Line
	regex := len(opts.Regex) > 0 || whole
	for _, p := range opts.Patterns {
		if regex {
			p = opts.whole(opts.quote(p))
		}
		pos = append(pos, p)
	}
	for _, r := range opts.Regex {
		if opts.Fold {
			r = "(?i)" + r
		}
		pos = append(pos, opts.whole(r))
	}
	if len(pos) > 0 {
		f := &LineFilter{Op: FilterContains, Values: pos, FoldASCII: opts.Fold}
		if regex {
			f = &LineFilter{Op: FilterRegexp, Values: pos}
		}
		q.Stages = append(q.Stages, f)
	}
	for _, x := range opts.Exclude {
		if whole {
			q.Stages = append(q.Stages, &LineFilter{Op: FilterNotRegexp, Values: []string{opts.whole(opts.quote(x))}})
			continue
		}
		q.Stages = append(q.Stages, &LineFilter{Op: FilterNotContains, Values: []string{x}, FoldASCII: opts.Fold})
	}
	for _, st := range q.Stages {
		f := st.(*LineFilter)
		if !f.Op.IsRegexp() {
			continue
		}
		for _, v := range f.Values {
			if err := checkRegex(v, 0, true); err != nil {
				return nil, fmt.Errorf("query: grep pattern %q: %w", v, err)
			}
		}
	}
	return q, nil
}

// foldASCIIRegex is a regex matching the literal s with ASCII letters of
// either case and every other byte exactly. It works byte by byte, so
// bytes that are not UTF-8 stay as they are (and the regex check refuses
// them, as it does for a literal ORed with a regex without -i).
func foldASCIIRegex(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if 'a' <= c && c <= 'z' {
			b.WriteByte('[')
			b.WriteByte(c &^ 0x20)
			b.WriteByte(c)
			b.WriteByte(']')
			continue
		}
		b.WriteString(regexp.QuoteMeta(s[i : i+1]))
	}
	return b.String()
}
