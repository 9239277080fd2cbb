package query

import (
	"regexp/syntax"
	"slices"
)

// Label filters with many values (`| user_id="u1" or user_id="u2" or ...`,
// a pasted list of ids) are evaluated as one set lookup per name instead
// of one matcher per value: mergeLabelSets rewrites the compiled tree.
//
// Why the rewrite gives the same answers and the same label state:
//
//   - An OR chain is flattened into its branches in query order
//     ((a or b) or c and a or (b or c) both evaluate a, b, c left to right
//     and stop at the first true one); an AND chain likewise.
//   - String matchers (=, !=, =~, !~) only read the label set; a number,
//     duration or bytes comparison may set __error__ (evalCompare), and
//     whether it runs depends on the branches before it. So branches are
//     merged only within a run of consecutive branches without a
//     comparison: inside such a run nothing changes the label set, the
//     order of the branches does not matter, and the run's result (an OR
//     or an AND of pure booleans) is all that decides whether the
//     branches after it run.
//   - name="v" reads labelSet.get(name), "" when the label is absent,
//     and compares; the set reads the same value and looks it up, so
//     `name=""` still passes on an absent label, and the precedence of
//     extracted over metadata over stream labels, the _extracted renames
//     and __error__ are labelSet.get's, unchanged.
//   - name=~"re" passes exactly on the values exactValuesUpTo lists,
//     when it lists them (FuzzExactValues checks this against the regexp
//     engine); a regex it cannot list stays a regex.
//   - In an OR, the = matchers of one name, and its =~ ones that list
//     their values, merge into one set: v == a || v == b is v ∈ {a, b}.
//     In an AND, the != and listing !~ matchers of one name merge into
//     one excluded set: v != a && v != b is v ∉ {a, b}. A lone =~ or !~
//     that lists its values becomes a set too.
//
// TestLabelSetOracle runs random trees through both.

// evalSet is name's value in (or, with neg, not in) a set of values.
type evalSet struct {
	name string
	neg  bool
	vals []string            // sorted; searched when few
	set  map[string]struct{} // when many
}

// setMapMin is the size from which a set is a map: below it a scan of the
// few values is faster than hashing the label's value.
const setMapMin = 8

func newEvalSet(name string, neg bool, vals []string) *evalSet {
	s := &evalSet{name: name, neg: neg, vals: dedupValues(vals)}
	if len(s.vals) >= setMapMin {
		s.set = make(map[string]struct{}, len(s.vals))
		for _, v := range s.vals {
			s.set[v] = struct{}{}
		}
	}
	return s
}

func (s *evalSet) eval(ls *labelSet) bool {
	v, _ := ls.get(s.name)
	var in bool
	if s.set != nil {
		_, in = s.set[v]
	} else {
		in = slices.Contains(s.vals, v)
	}
	return in != s.neg
}

// evalAny is an OR of its branches, evaluated in order, stopping at the
// first that passes; evalAll is an AND, stopping at the first that fails.
type evalAny struct{ sub []labelEval }

func (e *evalAny) eval(ls *labelSet) bool {
	for _, s := range e.sub {
		if s.eval(ls) {
			return true
		}
	}
	return false
}

type evalAll struct{ sub []labelEval }

func (e *evalAll) eval(ls *labelSet) bool {
	for _, s := range e.sub {
		if !s.eval(ls) {
			return false
		}
	}
	return true
}

// mergeLabelSets returns e with its ORs of equalities and ANDs of
// inequalities on one name evaluated as set lookups (see above). It
// builds new nodes and leaves e as it was.
func mergeLabelSets(e labelEval) labelEval {
	switch e := e.(type) {
	case *evalBinary:
		var sub []labelEval
		flatten(e, e.or, &sub)
		for i := range sub {
			sub[i] = mergeLabelSets(sub[i])
		}
		sub = mergeRuns(sub, e.or)
		if len(sub) == 1 {
			return sub[0]
		}
		if e.or {
			return &evalAny{sub: sub}
		}
		return &evalAll{sub: sub}
	case *evalMatch:
		// A lone regex that lists its values is a lookup too.
		if vals, neg, ok := setValues(e); ok && e.re != nil {
			return newEvalSet(e.m.Name, neg, vals)
		}
	}
	return e
}

// flatten appends the branches of the chain of or (or of and) nodes at e,
// in evaluation order.
func flatten(e labelEval, or bool, sub *[]labelEval) {
	if b, ok := e.(*evalBinary); ok && b.or == or {
		flatten(b.l, or, sub)
		flatten(b.r, or, sub)
		return
	}
	*sub = append(*sub, e)
}

// setValues returns the values of a matcher that passes exactly on a
// listed set of values (=, =~ listing them), or exactly on the values
// outside one (neg: !=, !~ listing them).
func setValues(e *evalMatch) (vals []string, neg, ok bool) {
	switch e.m.Type {
	case MatchEqual, MatchNotEqual:
		return []string{e.m.Value}, e.m.Type == MatchNotEqual, true
	}
	re, err := syntax.Parse(e.m.Value, syntax.Perl) // as checkRegex parsed it
	if err != nil {
		return nil, false, false
	}
	vals, ok = exactValuesUpTo(re, maxSetValues)
	return vals, e.m.Type == MatchNotRegexp, ok
}

// mergeable returns the name and values of a branch an OR (or, with
// !or, an AND) may merge: an equality (an inequality) matcher, a regex
// one listing its values, or a set already made of them.
func mergeable(e labelEval, or bool) (name string, vals []string, ok bool) {
	switch e := e.(type) {
	case *evalMatch:
		v, neg, ok := setValues(e)
		if !ok || neg == or {
			return "", nil, false
		}
		return e.m.Name, v, true
	case *evalSet:
		if e.neg == or {
			return "", nil, false
		}
		return e.name, e.vals, true
	}
	return "", nil, false
}

// pure reports whether evaluating e leaves the label set as it was: only
// a comparison may set __error__.
func pure(e labelEval) bool {
	switch e := e.(type) {
	case *evalCompare:
		return false
	case *evalBinary:
		return pure(e.l) && pure(e.r)
	case *evalAny:
		return !slices.ContainsFunc(e.sub, func(s labelEval) bool { return !pure(s) })
	case *evalAll:
		return !slices.ContainsFunc(e.sub, func(s labelEval) bool { return !pure(s) })
	}
	return true
}

// mergeRuns merges, within each run of consecutive pure branches, the
// mergeable branches of one name into one set at the place of the first.
func mergeRuns(sub []labelEval, or bool) []labelEval {
	out := make([]labelEval, 0, len(sub))
	for i := 0; i < len(sub); {
		if !pure(sub[i]) {
			out = append(out, sub[i])
			i++
			continue
		}
		j := i
		for j < len(sub) && pure(sub[j]) {
			j++
		}
		run := sub[i:j]
		byName := map[string][]string{}
		count := map[string]int{}
		for _, s := range run {
			if name, vals, ok := mergeable(s, or); ok {
				byName[name] = append(byName[name], vals...)
				count[name]++
			}
		}
		done := map[string]bool{}
		for _, s := range run {
			name, _, ok := mergeable(s, or)
			switch {
			case !ok || count[name] < 2:
				out = append(out, s)
			case !done[name]:
				out = append(out, newEvalSet(name, !or, byName[name]))
				done[name] = true // the later ones are in it
			}
		}
		i = j
	}
	return out
}
