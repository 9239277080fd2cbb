package query

import (
	"regexp/syntax"
	"slices"
	"unicode/utf8"
)

// maxExactValues bounds the values a label regex may spell out for the
// value filters (segment format 6): `=~"a|b|c"` asks each block's filter
// once per value.
const maxExactValues = 16

// exactValues returns every value a label matcher's regex re matches,
// when they are at most maxExactValues literal strings (`a|b`,
// `(get|put)_ok`, `id-[12]`): the matcher is anchored (it matches whole
// values), so a value passes only if it equals one of them. ok is false
// otherwise: an unbounded repetition, any-character, an anchor inside
// the pattern (one that begins or ends it changes nothing),
// case folding ((?i): its Unicode folds are not spelled out here), or a
// literal or class holding U+FFFD, which a value's invalid byte also
// matches (the regexp engine reads it as U+FFFD) though the byte is not
// that rune's encoding.
func exactValues(re *syntax.Regexp) (vals []string, ok bool) {
	return exactValuesIn(unanchor(re), maxExactValues)
}

// maxSetValues bounds the values a label filter's regex may spell out to
// be evaluated as a set lookup (labelsets.go): `id=~"u1|u2|...|u900"`.
const maxSetValues = 4096

// exactValuesUpTo is exactValues with at most limit values. A counted
// repetition still gives up past maxExactValues counts (x{0,16}), which
// bounds the work: each count sorts at most limit values.
func exactValuesUpTo(re *syntax.Regexp, limit int) (vals []string, ok bool) {
	return exactValuesIn(unanchor(re), limit)
}

// unanchor drops the anchors that begin and end the whole pattern (`^id$`,
// `\Aid\z`): the matcher matches whole values, so there they change
// nothing. Anchors anywhere else stay (and give up).
func unanchor(re *syntax.Regexp) *syntax.Regexp {
	if re.Op != syntax.OpConcat {
		return re
	}
	sub := re.Sub
	for len(sub) > 0 && (sub[0].Op == syntax.OpBeginText || sub[0].Op == syntax.OpBeginLine) {
		sub = sub[1:]
	}
	for len(sub) > 0 && (sub[len(sub)-1].Op == syntax.OpEndText || sub[len(sub)-1].Op == syntax.OpEndLine) {
		sub = sub[:len(sub)-1]
	}
	if len(sub) == len(re.Sub) {
		return re
	}
	return &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags, Sub: sub}
}

func exactValuesIn(re *syntax.Regexp, limit int) (vals []string, ok bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 || slices.Contains(re.Rune, utf8.RuneError) {
			return nil, false
		}
		return []string{string(re.Rune)}, true
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if lo <= utf8.RuneError && utf8.RuneError <= hi || int(hi-lo)+len(vals) >= limit {
				return nil, false
			}
			for r := lo; r <= hi; r++ {
				vals = append(vals, string(r))
			}
		}
		return vals, len(vals) > 0
	case syntax.OpCapture:
		return exactValuesIn(re.Sub[0], limit)
	case syntax.OpQuest:
		vals, ok = exactValuesIn(re.Sub[0], limit)
		return dedupValues(append(vals, "")), ok && len(vals) < limit
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			v, ok := exactValuesIn(s, limit)
			if !ok {
				return nil, false
			}
			vals = dedupValues(append(vals, v...))
			if len(vals) > limit {
				return nil, false
			}
		}
		return vals, true
	case syntax.OpConcat:
		vals = []string{""}
		for _, s := range re.Sub {
			v, ok := exactValuesIn(s, limit)
			if !ok {
				return nil, false
			}
			if vals, ok = product(vals, v, limit); !ok {
				return nil, false
			}
		}
		return vals, true
	case syntax.OpRepeat:
		// x{n} and x{n,m}: each count's product, while they stay few.
		if re.Max < 0 || re.Max > maxExactValues {
			return nil, false
		}
		v, ok := exactValuesIn(re.Sub[0], limit)
		if !ok {
			return nil, false
		}
		rep := []string{""}
		for n := 0; n < re.Min; n++ {
			if rep, ok = product(rep, v, limit); !ok {
				return nil, false
			}
		}
		vals = rep
		for n := re.Min; n < re.Max; n++ {
			if rep, ok = product(rep, v, limit); !ok {
				return nil, false
			}
			if vals = dedupValues(append(vals, rep...)); len(vals) > limit {
				return nil, false
			}
		}
		return vals, true
	}
	return nil, false
}

// product is every a+b, deduplicated; ok is false past limit.
func product(as, bs []string, limit int) ([]string, bool) {
	if len(as)*len(bs) > limit {
		return nil, false
	}
	out := make([]string, 0, len(as)*len(bs))
	for _, a := range as {
		for _, b := range bs {
			out = append(out, a+b)
		}
	}
	return dedupValues(out), true
}

func dedupValues(v []string) []string {
	slices.Sort(v)
	return slices.Compact(v)
}
