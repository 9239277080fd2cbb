package query

import (
	"slices"
	"strings"
)

// FilterLabels runs the plan's label filters on a whole label set, as the
// stages after a metric query's unwrap run in Loki (`| unwrap latency |
// __error__=""`): __error__ and __error_details__ in set are the entry's
// error state, the others its labels. It returns whether the set passed
// and the set after the filters, sorted by name: a number, duration or
// bytes filter that cannot convert a value sets __error__=LabelFilterErr
// (when no error is set yet), as in a log query. The plan must hold
// nothing but label filters (Compile a selector and LabelFilter stages;
// the selector is not tested here; OnlyLabelFilters checks).
func (p *Plan) FilterLabels(set []Label) ([]Label, bool) {
	var ls labelSet
	for _, l := range set {
		switch l.Name {
		case "__error__":
			ls.err = l.Value
		case "__error_details__":
			ls.errDetails = l.Value
		default:
			ls.base = append(ls.base, l)
		}
	}
	ls.stream = ls.base
	for _, st := range p.stages {
		if st.filter == nil || !st.filter.eval(&ls) {
			return nil, false
		}
	}
	out := ls.appendErr(slices.Clip(ls.base))
	slices.SortFunc(out, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	return out, true
}

// OnlyLabelFilters reports whether q's pipeline holds label filters only
// (what Loki allows after unwrap), and if not, the first other stage.
func OnlyLabelFilters(q *Query) (Stage, bool) {
	i := slices.IndexFunc(q.Stages, func(st Stage) bool {
		_, ok := st.(*LabelFilter)
		return !ok
	})
	if i < 0 {
		return nil, true
	}
	return q.Stages[i], false
}

// ParseBytesValue reads a label value as a count of bytes ("42", "42MB",
// "1.5 KiB", "3k"; units case-insensitive), as a bytes label filter does:
// what a metric query's `unwrap bytes(label)` converts.
func ParseBytesValue(s string) (float64, bool) { return parseBytes(s, true) }
