package query

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"haystack/internal/attrs"
)

// TestMetaIndexCases pins Plan.MetaIndex for the shapes that matter: a
// matcher that needs a value, one that any value or none passes, a
// parser before it, a stream label of its name, and/or, drop and keep.
func TestMetaIndexCases(t *testing.T) {
	plain := []Label{{"app", "api"}}
	withTrace := []Label{{"app", "api"}, {"trace_id", "t"}}
	for _, c := range []struct {
		q      string
		stream []Label
		want   string // Expr.String, or "nil"
	}{
		{`{app="api"} | trace_id="5f89abcdef"`, plain, `"5f89abcdef"`},
		{`{app="api"} | trace_id="5f89abcdef"`, withTrace, "NONE"},
		{`{app="api"} | trace_id="t"`, withTrace, "nil"},
		{`{app="api"} | trace_id=~"(?i)T"`, withTrace, "nil"},
		{`{app="api"} | drop trace_id | trace_id="t"`, withTrace, "nil"}, // over-inclusive: the drop makes it fail
		{`{app="api"} | app_extracted="abcdef"`, []Label{{"app", "api"}, {"app_extracted", "z"}}, "nil"},
		{`{app="api"} | trace_id_extracted="5f89abcdef"`, withTrace, `"5f89abcdef"`},
		{`{app="api"} | json | trace_id="5f89abcdef"`, plain, "nil"},
		{`{app="api"} | logfmt | trace_id="5f89abcdef"`, plain, "nil"},
		{`{app="api"} | trace_id="5f89abcdef" | json | span_id="0011aabb"`, plain, `"5f89abcdef"`},
		{`{app="api"} | trace_id=""`, plain, "nil"},
		{`{app="api"} | trace_id!="5f89abcdef"`, plain, "nil"},
		{`{app="api"} | trace_id!~"5f89.*"`, plain, "nil"},
		{`{app="api"} | trace_id=~".*"`, plain, "nil"},
		{`{app="api"} | trace_id=~"(abcdef)?"`, plain, "nil"},
		{`{app="api"} | trace_id=~"5f89abcd.*"`, plain, `"5f89abcd"`},
		{`{app="api"} | trace_id=~"(?i)ABCDEF"`, plain, `(?i)"abcdef"`},
		{`{app="api"} | trace_id=~"abcdef|ghijkl"`, plain, `("abcdef" OR "ghijkl")`},
		{`{app="api"} | trace_id="abcdef" or span_id="ghijkl"`, plain, `("abcdef" OR "ghijkl")`},
		{`{app="api"} | trace_id="abcdef" or span_id="ghijkl"`, withTrace, `"ghijkl"`},
		{`{app="api"} | trace_id="t" or span_id="ghijkl"`, withTrace, "nil"},
		{`{app="api"} | trace_id="abcdef" and span_id="ghijkl"`, withTrace, "NONE"},
		{`{app="api"} | trace_id="t" and span_id="ghijkl"`, withTrace, `"ghijkl"`},
		{`{app="api"} | trace_id="abcdef" | span_id="ghijkl"`, plain, `("abcdef" AND "ghijkl")`},
		{`{app="api"} | trace_id="abcdef" or __error__=""`, plain, "nil"},
		{`{app="api"} | __error__="JSONParserErr"`, plain, "nil"},
		{`{app="api"} | duration > 5s`, plain, "nil"},
		{`{app="api"} | drop trace_id | trace_id="abcdef"`, plain, `"abcdef"`},
		{`{app="api"} | keep app | trace_id="abcdef"`, plain, `"abcdef"`},
		{`{app="api"} |= "x" | trace_id="abcdef"`, plain, `"abcdef"`},
	} {
		ast, err := Parse(c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		p, err := Compile(ast)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		got := "nil"
		if x := p.MetaIndex(c.stream); x != nil {
			got = x.String()
		}
		if got != c.want {
			t.Errorf("%s over %s: MetaIndex %s, want %s", c.q, fmtLabels(c.stream), got, c.want)
		}
		if p.HasMetaIndex() != (p.MetaIndex(plain) != nil || p.MetaIndex(withTrace) != nil) && c.want != "nil" {
			t.Errorf("%s: HasMetaIndex %v", c.q, p.HasMetaIndex())
		}
	}
}

// metaHolds evaluates a MetaIndex requirement as the skip index sees an
// entry: a literal holds when some metadata value contains it.
func metaHolds(x *Expr, meta []byte) bool {
	switch x.Op {
	case OpAll:
		return true
	case OpNone:
		return false
	case OpLit:
		found := false
		attrs.Each(meta, func(_, v []byte) bool {
			found = x.Lit.In(v)
			return !found
		})
		return found
	case OpAnd:
		for _, s := range x.Sub {
			if !metaHolds(s, meta) {
				return false
			}
		}
		return true
	}
	for _, s := range x.Sub {
		if metaHolds(s, meta) {
			return true
		}
	}
	return false
}

// TestMetaIndexOracle: for random pipelines of label filters (on
// metadata names, stream names, _extracted names, values present,
// absent, substrings, other case, empty), parsers, drop and keep, over
// random entries, every entry MatchEntryAttrs accepts satisfies
// MetaIndex(stream) evaluated on its own metadata values. That is the
// property the skip index relies on: it may drop a block only where no
// entry could satisfy the requirement. The test also counts how often
// the requirement rules an entry out, so that it cannot pass by always
// requiring nothing.
func TestMetaIndexOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	values := []string{"5f89abcdef01", "5F89ABCDEF01", "abcdef", "beef", "x", "", "ab\xffcd", "checkout", "Checkout-2"}
	names := []string{"trace_id", "span_id", "app", "app_extracted", "service_name", "__error__", "level"}
	streams := [][]Label{
		{{"app", "checkout"}},
		{{"app", "api"}, {"trace_id", "5f89abcdef01"}},
		{{"service_name", "Checkout-2"}},
		{{"app", "beef"}, {"app_extracted", "abcdef"}},
	}
	randValue := func() string {
		v := values[rng.IntN(len(values))]
		if rng.IntN(4) == 0 && len(v) > 2 {
			i := rng.IntN(len(v) - 1)
			v = v[i : i+1+rng.IntN(len(v)-i-1)+1]
		}
		return v
	}
	randMatcher := func() string {
		n := names[rng.IntN(len(names))]
		v := randValue()
		switch rng.IntN(6) {
		case 0:
			return fmt.Sprintf("%s!=%q", n, v)
		case 1:
			return fmt.Sprintf("%s=~%q", n, regexp.QuoteMeta(v)+[]string{"", ".*", "|beef", "(?i)"}[rng.IntN(4)])
		case 2:
			return fmt.Sprintf("%s=~%q", n, "(?i)"+regexp.QuoteMeta(v))
		case 3:
			return fmt.Sprintf("%s > 3", n)
		}
		return fmt.Sprintf("%s=%q", n, v)
	}
	type entry struct {
		meta []byte
		line string
	}
	var entries []entry
	for range 300 {
		var kv []string
		for range rng.IntN(4) {
			kv = append(kv, names[rng.IntN(len(names))], randValue())
		}
		var ps []attrs.Pair
		for i := 0; i+1 < len(kv); i += 2 {
			ps = append(ps, attrs.Pair{Name: kv[i], Value: kv[i+1]})
		}
		m, err := attrs.Encode(nil, ps)
		if err != nil {
			t.Fatal(err)
		}
		// Lines whose keys a parser extracts (values that then need not
		// be in the metadata), and lines without.
		n1, n2 := names[rng.IntN(len(names))], names[rng.IntN(len(names))]
		var line string
		switch rng.IntN(4) {
		case 0:
			line = fmt.Sprintf(`{%q:%q,%q:%q}`, n1, randValue(), n2, randValue())
		case 1:
			line = fmt.Sprintf(`%s=%q %s=%s`, n1, randValue(), n2, strings.ReplaceAll(randValue(), " ", ""))
		case 2:
			line = "plain text checkout " + randValue()
		}
		entries = append(entries, entry{m, line})
	}
	passed, ruledOut := 0, 0
	for range 2000 {
		var b strings.Builder
		b.WriteString(`{app=~".+"}`)
		for range 1 + rng.IntN(3) {
			switch rng.IntN(8) {
			case 0:
				b.WriteString(" | json")
			case 1:
				b.WriteString(" | logfmt")
			case 2:
				b.WriteString(" | drop " + names[rng.IntN(len(names))])
			case 3:
				b.WriteString(" | keep app, " + names[rng.IntN(len(names))])
			case 4:
				fmt.Fprintf(&b, " | %s or %s", randMatcher(), randMatcher())
			default:
				fmt.Fprintf(&b, " | %s", randMatcher())
			}
		}
		q := b.String()
		ast, err := Parse(q)
		if err != nil {
			continue // e.g. a regex the random pieces broke
		}
		p, err := Compile(ast)
		if err != nil {
			continue
		}
		for _, s := range streams {
			x := p.MetaIndex(s)
			for _, e := range entries {
				ok := p.MatchEntryAttrs(s, e.meta, []byte(e.line))
				holds := x == nil || metaHolds(x, e.meta)
				if ok && !holds {
					t.Fatalf("%s over %s: entry (meta %q, line %q) matches, but MetaIndex %s does not hold", q, fmtLabels(s), e.meta, e.line, x)
				}
				if ok {
					passed++
				}
				if !holds {
					ruledOut++
				}
			}
		}
	}
	t.Logf("%d matches checked, %d entries ruled out by MetaIndex", passed, ruledOut)
	if passed < 1000 || ruledOut < 1000 {
		t.Errorf("too few matches (%d) or entries ruled out (%d): the test would prove little", passed, ruledOut)
	}
}
