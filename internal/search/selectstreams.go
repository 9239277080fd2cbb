package search

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/store"
)

// SelectStreams returns, ascending, the ids of ix's streams that plan's
// stream selector admits (every stream when plan is nil or has no
// matchers). A stream whose labels do not parse counts as one without
// labels.
//
// It costs what the selector needs rather than a parse of every stream:
// an equality matcher, or a regex that spells out a few values
// (`a|b|c`, `s0_[56]`), is a postings lookup per value; other matchers
// that need the label (=~, !~ rejecting "") read the name's distinct
// values; matchers that accept a missing label (!=, !~, ="") remove the
// postings of the values they reject, or, when few candidates are left,
// check those candidates' parsed labels.
func SelectStreams(ix *store.StreamIndex, plan *query.Plan) []uint32 {
	n := ix.Len()
	if plan == nil || len(plan.Streams) == 0 {
		return allIDs(n)
	}
	// Matchers that need the label present give candidate sets; the
	// cheapest are the postings lookups.
	type lookup struct {
		m   *query.StreamMatcher
		ids []uint32
	}
	var lookups []lookup
	var scans, accepts []*query.StreamMatcher
	for _, m := range plan.Streams {
		switch {
		case m.Matches(""):
			accepts = append(accepts, m)
		case m.Type == query.MatchEqual:
			lookups = append(lookups, lookup{m, ix.Postings(m.Name, m.Value)})
		default:
			if vals, ok := finiteValues(m); ok {
				lookups = append(lookups, lookup{m, unionPostings(ix, m, vals)})
			} else {
				scans = append(scans, m)
			}
		}
	}
	slices.SortStableFunc(lookups, func(a, b lookup) int { return len(a.ids) - len(b.ids) })
	var cand []uint32
	have := false
	for _, l := range lookups {
		if !have {
			// A copy: the postings are the index's own.
			cand, have = slices.Clone(l.ids), true
		} else {
			cand = intersect(cand, l.ids)
		}
	}
	// A regex over the values of a name: unless few candidates are left,
	// then their labels are checked below.
	var check []*query.StreamMatcher
	for _, m := range scans {
		if have && len(cand) <= checkFew {
			check = append(check, m)
			continue
		}
		var ids []uint32
		match := valueMatcher(m)
		ix.Values(m.Name, func(v string, vids []uint32) bool {
			if match(v) {
				ids = append(ids, vids...)
			}
			return true
		})
		slices.Sort(ids) // each stream has one value of a name: no duplicates
		if !have {
			cand, have = ids, true
		} else {
			cand = intersect(cand, ids)
		}
	}
	if !have {
		cand = allIDs(n) // only matchers that accept a missing label
	}
	for _, m := range accepts {
		if len(cand) == 0 {
			break
		}
		switch {
		case m.Type == query.MatchNotEqual:
			cand = subtract(cand, ix.Postings(m.Name, m.Value))
		case len(cand) <= checkFew:
			check = append(check, m)
		default:
			// Remove the streams whose value m rejects.
			var ids []uint32
			match := valueMatcher(m)
			ix.Values(m.Name, func(v string, vids []uint32) bool {
				if !match(v) {
					ids = append(ids, vids...)
				}
				return true
			})
			slices.Sort(ids)
			cand = subtract(cand, ids)
		}
	}
	if len(check) == 0 || len(cand) == 0 {
		return cand
	}
	out := cand[:0:0]
	for _, id := range cand {
		ls, _ := ingest.ParseLabels(ix.Labels(id)) // unparsed: no labels
		ok := true
		for _, m := range check {
			if !m.Matches(ls.Get(m.Name)) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, id)
		}
	}
	return out
}

// valueMatcher returns m.Matches, or, for the regexes that select on
// presence (Grafana's `=~".+"`, and `.*`, with or without (?s)), the
// same test without the regexp: it runs once per distinct value of the
// name, 200,000 times for pod names. Go's `.` matches every rune but
// '\n', an invalid UTF-8 byte included (as U+FFFD).
func valueMatcher(m *query.StreamMatcher) func(string) bool {
	if m.Type != query.MatchRegexp && m.Type != query.MatchNotRegexp {
		return m.Matches
	}
	re, err := syntax.Parse(m.Value, syntax.Perl)
	if err != nil {
		return m.Matches
	}
	re = re.Simplify()
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	if (re.Op != syntax.OpPlus && re.Op != syntax.OpStar) || len(re.Sub) != 1 {
		return m.Matches
	}
	var f func(string) bool
	switch sub := re.Sub[0].Op; {
	case sub == syntax.OpAnyCharNotNL && re.Op == syntax.OpPlus:
		f = func(v string) bool { return v != "" && !strings.Contains(v, "\n") }
	case sub == syntax.OpAnyCharNotNL:
		f = func(v string) bool { return !strings.Contains(v, "\n") }
	case sub == syntax.OpAnyChar && re.Op == syntax.OpPlus:
		f = func(v string) bool { return v != "" }
	case sub == syntax.OpAnyChar:
		f = func(string) bool { return true }
	default:
		return m.Matches
	}
	if m.Type == query.MatchNotRegexp {
		return func(v string) bool { return !f(v) }
	}
	return f
}

// checkFew is the number of candidates below which the remaining
// matchers are checked on each candidate's parsed labels (about a
// microsecond each) rather than on every value of their label name.
const checkFew = 512

func allIDs(n int) []uint32 {
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = uint32(i)
	}
	return ids
}

// unionPostings is the ascending union of the postings of vals (values
// of m's name), keeping those m matches.
func unionPostings(ix *store.StreamIndex, m *query.StreamMatcher, vals []string) []uint32 {
	var ids []uint32
	for _, v := range vals {
		if m.Matches(v) {
			ids = append(ids, ix.Postings(m.Name, v)...)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// intersect returns the ids in both ascending lists. It does not modify
// a or b (either may be the index's own postings).
func intersect(a, b []uint32) []uint32 {
	if len(a) > len(b) {
		a, b = b, a
	}
	var out []uint32
	if len(a)*16 < len(b) {
		// Few against many: binary search the small side's ids.
		for _, id := range a {
			if _, ok := slices.BinarySearch(b, id); ok {
				out = append(out, id)
			}
		}
		return out
	}
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// subtract returns the ids of ascending a that are not in ascending b.
func subtract(a, b []uint32) []uint32 {
	if len(b) == 0 {
		return a
	}
	out := make([]uint32, 0, len(a))
	if len(b)*16 < len(a) {
		for _, id := range a {
			if _, ok := slices.BinarySearch(b, id); !ok {
				out = append(out, id)
			}
		}
		return out
	}
	j := 0
	for _, id := range a {
		for j < len(b) && b[j] < id {
			j++
		}
		if j < len(b) && b[j] == id {
			continue
		}
		out = append(out, id)
	}
	return out
}

// maxFinite bounds the values finiteValues spells out.
const maxFinite = 256

// finiteValues returns every string m's regex (=~ or !~) matches whole,
// when that is a small finite set: literals, alternations, small
// character classes and their concatenations, as a Grafana multi-value
// variable (`a|b|c`) or a prefix the parser factors out (`s0_(5|6)` from
// `s0_5|s0_6`) make. Case-folded literals, repetitions, anchors and
// U+FFFD (which matches any invalid UTF-8 byte) give up.
func finiteValues(m *query.StreamMatcher) ([]string, bool) {
	if m.Type != query.MatchRegexp {
		return nil, false
	}
	re, err := syntax.Parse(m.Value, syntax.Perl)
	if err != nil {
		return nil, false
	}
	return finite(re.Simplify())
}

func finite(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		for _, r := range re.Rune {
			if r == utf8.RuneError {
				return nil, false
			}
		}
		return []string{string(re.Rune)}, true
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi-lo >= maxFinite || len(out)+int(hi-lo)+1 > maxFinite {
				return nil, false
			}
			for r := lo; r <= hi; r++ {
				if r == utf8.RuneError || !utf8.ValidRune(r) {
					return nil, false
				}
				out = append(out, string(r))
			}
		}
		return out, true
	case syntax.OpCapture:
		return finite(re.Sub[0])
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			s, ok := finite(sub)
			if !ok || len(out)+len(s) > maxFinite {
				return nil, false
			}
			out = append(out, s...)
		}
		return out, true
	case syntax.OpConcat:
		out := []string{""}
		for _, sub := range re.Sub {
			s, ok := finite(sub)
			if !ok || len(out)*len(s) > maxFinite {
				return nil, false
			}
			next := make([]string, 0, len(out)*len(s))
			for _, a := range out {
				for _, b := range s {
					next = append(next, a+b)
				}
			}
			out = next
		}
		return out, true
	}
	return nil, false
}

// selectIndexed sets e.sel (and e.labels, for a plan with stages) from
// e.q.Index: the parts' streams go up to maxID.
func (e *exec) selectIndexed(maxID uint32) {
	ids := SelectStreams(e.q.Index, e.q.Plan)
	e.sel = make([]bool, max(int(maxID)+1, e.q.Index.Len()))
	for _, id := range ids {
		e.sel[id] = true
	}
	if !e.stages {
		return
	}
	e.labels = make(map[uint32][]query.Label, len(ids))
	for _, id := range ids {
		ls, _ := ingest.ParseLabels(e.q.Index.Labels(id))
		ql := make([]query.Label, len(ls))
		for i, l := range ls {
			ql[i] = query.Label(l)
		}
		e.labels[id] = ql
	}
}

// StreamLabels returns the parsed labels of selected stream id, for a
// plan with parser or label stages (Plan.LabelSet): the Scanner parsed
// them once to select and match. Nil otherwise.
func (s *Scanner) StreamLabels(id uint32) []query.Label { return s.e.labels[id] }
