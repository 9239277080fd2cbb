package query

import (
	"fmt"
	"regexp"
)

// GrepOptions is grep-style sugar for a query.
type GrepOptions struct {
	Patterns []string // -e: literals; a line matches if it contains any
	Exclude  []string // -v: literals; a line containing any is dropped
	Regex    []string // -E: regular expressions, ORed with Patterns
	Fold     bool     // -i: ASCII-and-Unicode case-insensitive, for all of the above
}

// FromGrep builds the query grep options describe. The query has no stream
// selector (all streams); it compiles to the same plan as the equivalent
// LogQL: `|= "a" or "b"`, `!= "x"`, `|~ "re"`, and with Fold the
// `(?i)`-prefixed regex forms, which Compile turns back into folded
// literals.
func FromGrep(opts GrepOptions) (*Query, error) {
	q := &Query{}
	var pos []string
	regex := len(opts.Regex) > 0 || opts.Fold
	for _, p := range opts.Patterns {
		if regex {
			p = regexp.QuoteMeta(p)
		}
		pos = append(pos, p)
	}
	pos = append(pos, opts.Regex...)
	if opts.Fold {
		for i, p := range pos {
			pos[i] = "(?i)" + p
		}
	}
	if len(pos) > 0 {
		op := FilterContains
		if regex {
			op = FilterRegexp
		}
		q.Stages = append(q.Stages, &LineFilter{Op: op, Values: pos})
	}
	for _, x := range opts.Exclude {
		f := &LineFilter{Op: FilterNotContains, Values: []string{x}}
		if opts.Fold {
			f = &LineFilter{Op: FilterNotRegexp, Values: []string{"(?i)" + regexp.QuoteMeta(x)}}
		}
		q.Stages = append(q.Stages, f)
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
