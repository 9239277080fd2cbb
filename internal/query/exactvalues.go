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
// otherwise: a repetition, any-character, an anchor inside the pattern,
// case folding ((?i): its Unicode folds are not spelled out here), or a
// literal or class holding U+FFFD, which a value's invalid byte also
// matches (the regexp engine reads it as U+FFFD) though the byte is not
// that rune's encoding.
func exactValues(re *syntax.Regexp) (vals []string, ok bool) {
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
			if lo <= utf8.RuneError && utf8.RuneError <= hi || int(hi-lo)+len(vals) >= maxExactValues {
				return nil, false
			}
			for r := lo; r <= hi; r++ {
				vals = append(vals, string(r))
			}
		}
		return vals, len(vals) > 0
	case syntax.OpCapture:
		return exactValues(re.Sub[0])
	case syntax.OpQuest:
		vals, ok = exactValues(re.Sub[0])
		return dedupValues(append(vals, "")), ok && len(vals) < maxExactValues
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			v, ok := exactValues(s)
			if !ok {
				return nil, false
			}
			vals = dedupValues(append(vals, v...))
			if len(vals) > maxExactValues {
				return nil, false
			}
		}
		return vals, true
	case syntax.OpConcat:
		vals = []string{""}
		for _, s := range re.Sub {
			v, ok := exactValues(s)
			if !ok || len(vals)*len(v) > maxExactValues {
				return nil, false
			}
			next := make([]string, 0, len(vals)*len(v))
			for _, a := range vals {
				for _, b := range v {
					next = append(next, a+b)
				}
			}
			vals = dedupValues(next)
		}
		return vals, true
	}
	return nil, false
}

func dedupValues(v []string) []string {
	slices.Sort(v)
	return slices.Compact(v)
}
