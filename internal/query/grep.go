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
	regex := len(opts.Regex) > 0
	for _, p := range opts.Patterns {
		if regex {
			if opts.Fold {
				p = foldASCIIRegex(p)
			} else {
				p = regexp.QuoteMeta(p)
			}
		}
		pos = append(pos, p)
	}
	for _, r := range opts.Regex {
		if opts.Fold {
			r = "(?i)" + r
		}
		pos = append(pos, r)
	}
	if len(pos) > 0 {
		f := &LineFilter{Op: FilterContains, Values: pos, FoldASCII: opts.Fold}
		if regex {
			f = &LineFilter{Op: FilterRegexp, Values: pos}
		}
		q.Stages = append(q.Stages, f)
	}
	for _, x := range opts.Exclude {
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
