package query

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/logtest"
	"haystack/internal/testseed"
)

// Names and values the random filters and label sets draw from: few, so
// that filters and labels meet; "" (absent and present-empty), an invalid
// byte (which =~"\uFFFD" matches), numbers, durations and bytes for the
// comparisons.
var (
	setNames   = []string{"a", "a", "a", "b", "b", "c", "a_extracted", "__error__", "__error_details__"}
	setVals    = []string{"", "1", "2", "3", "x", "1.5", "10", "2s", "3KB", "abc", "\xff", "\uFFFD", "JSONParserErr"}
	setRegexps = []string{
		"1|2", "(1|2)?", "x|", "[123]", "ab(c)?", "", "1", "abc|x|10", "^(2|3)$",
		"\uFFFD", "1.*", ".+", "(?i)X", "[0-9]+", "a.c", "1|\uFFFD", "",
	}
)

// randLabelExpr draws a label filter expression: ORs of equalities on
// one name most often, nested with ANDs, != , =~, !~ and comparisons.
func randLabelExpr(r *rand.Rand, depth int) LabelExpr {
	if depth > 0 && r.IntN(3) > 0 {
		// A chain, as the parser folds `x or y or z` (left-deep), or a
		// right-nested one as parentheses give.
		or := r.IntN(4) > 0
		n := 2 + r.IntN(6)
		e := randLabelExpr(r, depth-1)
		for range n - 1 {
			sub := randLabelExpr(r, depth-1)
			if r.IntN(4) == 0 {
				sub = &LabelBinary{Or: r.IntN(2) == 0, L: sub, R: randLabelExpr(r, depth-1)}
			}
			if r.IntN(3) == 0 {
				e = &LabelBinary{Or: or, L: sub, R: e}
			} else {
				e = &LabelBinary{Or: or, L: e, R: sub}
			}
		}
		return e
	}
	name := setNames[r.IntN(len(setNames))]
	switch k := r.IntN(20); {
	case k < 10:
		return &LabelMatch{Matcher{Name: name, Type: MatchEqual, Value: setVals[r.IntN(len(setVals))]}}
	case k < 13:
		return &LabelMatch{Matcher{Name: name, Type: MatchNotEqual, Value: setVals[r.IntN(len(setVals))]}}
	case k < 16:
		return &LabelMatch{Matcher{Name: name, Type: MatchRegexp, Value: setRegexps[r.IntN(len(setRegexps))]}}
	case k < 18:
		return &LabelMatch{Matcher{Name: name, Type: MatchNotRegexp, Value: setRegexps[r.IntN(len(setRegexps))]}}
	}
	text := []string{"1", "2", "1.5", "10", "2s", "1KB"}[r.IntN(6)]
	kind, v, _ := parseTypedValue(text)
	return &LabelCompare{Name: name, Op: CmpOp(r.IntN(6)), Kind: kind, Value: v, Text: text}
}

// randLabels draws labels over setNames: some names absent, some empty,
// some in several of the stream, metadata and extracted layers.
func randLabels(r *rand.Rand) []Label {
	var ls []Label
	for range r.IntN(4) {
		n := setNames[r.IntN(len(setNames)-2)] // not __error__
		ls = append(ls, Label{n, setVals[r.IntN(len(setVals))]})
	}
	return ls
}

func randLabelSet(r *rand.Rand) labelSet {
	var ls labelSet
	ls.stream = randLabels(r)
	ls.base = ls.stream
	ls.meta = randLabels(r)
	ls.ext = randLabels(r)
	switch r.IntN(3) {
	case 1:
		ls.err, ls.errDetails = ErrJSON, "invalid JSON"
	case 2:
		ls.err = setVals[r.IntN(len(setVals))]
	}
	return ls
}

// countSets counts the set lookups of a compiled filter.
func countSets(e labelEval) int {
	switch e := e.(type) {
	case *evalSet:
		return 1
	case *evalBinary:
		return countSets(e.l) + countSets(e.r)
	case *evalAny:
		n := 0
		for _, s := range e.sub {
			n += countSets(s)
		}
		return n
	case *evalAll:
		n := 0
		for _, s := range e.sub {
			n += countSets(s)
		}
		return n
	}
	return 0
}

// TestLabelSetOracle compares, on random filters and random label sets,
// the compiled filter (compileLabelExpr: set lookups) with the filter
// compiled node for node (compileLabelTree: one matcher per leaf, the
// evaluation before set lookups): the same answer and the same
// __error__ and __error_details__ afterwards, for every label set.
func TestLabelSetOracle(t *testing.T) {
	seed := testseed.Seed(t, "HAY_LABELSET_SEED")
	t.Logf("seed %d (HAY_LABELSET_SEED)", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	sets := make([]labelSet, 300)
	for i := range sets {
		sets[i] = randLabelSet(r)
	}
	// Fixed cases first: absent against empty, the parser's precedence,
	// a comparison between equalities.
	fixed := []string{
		`a="" or a="1"`,
		`a="1" or a="2" or a=""`,
		`a!="" and a!="1"`,
		`a="1" or a="2" and b="3"`,
		`a="1" or b="2" or a="2" or b=""`,
		`a="1" or a>1 or a="2"`,
		`a="1" or a>1 or a="2" or a="3"`,
		`a>1 or a="1" or a="2" or __error__="LabelFilterErr"`,
		`__error__="" or __error__="JSONParserErr"`,
		`a=~"1|2" or a="3"`,
		`a!~"1|2" and a!="3"`,
		`a!~"1|2"`,
		`a=~"\uFFFD" or a="1"`,
		`(a="1" or a="2") and (a="2" or a="3")`,
		`a="1" or (a="2" or (a="3" or b="1"))`,
		`a="1" and a="2" or a="1"`,
	}
	var exprs []LabelExpr
	for _, f := range fixed {
		q, err := Parse(`{s="x"} | ` + f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		exprs = append(exprs, q.Stages[0].(*LabelFilter).Expr)
	}
	// Under emulation (testseed.Emulated) the first 300 filters of the
	// same seed: set lookups are logic on strings, the same on every
	// architecture, which the native run checks on all 3,000.
	for range testseed.Scale(3000, 300) {
		exprs = append(exprs, randLabelExpr(r, 3))
	}
	merged, decided := 0, 0
	for _, e := range exprs {
		ref, err := compileLabelTree(e)
		if err != nil {
			t.Fatal(err)
		}
		opt, err := compileLabelExpr(e)
		if err != nil {
			t.Fatal(err)
		}
		n := countSets(opt)
		if n > 0 {
			merged++
		}
		for i := range sets {
			a, b := sets[i], sets[i] // eval changes only err and errDetails
			want, got := ref.eval(&a), opt.eval(&b)
			if want != got || a.err != b.err || a.errDetails != b.errDetails {
				t.Fatalf("%s\non stream %q meta %q extracted %q error %q:\nnode for node %v (error %q %q), with sets %v (error %q %q)",
					e, sets[i].stream, sets[i].meta, sets[i].ext, sets[i].err, want, a.err, a.errDetails, got, b.err, b.errDetails)
			}
			if n > 0 && want {
				decided++
			}
		}
	}
	// The comparison must have been about set lookups: most filters hold
	// one, and they pass on many label sets.
	if merged < len(exprs)/3 || decided < 10000 {
		t.Fatalf("only %d of %d filters hold a set lookup, passing %d times", merged, len(exprs), decided)
	}
	t.Logf("%d of %d filters hold a set lookup; they passed %d times", merged, len(exprs), decided)
}

// TestLabelSetShapes checks which filters become set lookups: the
// rewrite must happen where it helps (the point of it) and nowhere it
// could change an answer.
func TestLabelSetShapes(t *testing.T) {
	for _, c := range []struct {
		f    string
		sets int
	}{
		{`a="1"`, 0},
		{`a="1" or a="2"`, 1},
		{`a="1" or b="2"`, 0},
		{`a="1" and a="2"`, 0},
		{`a!="1" and a!="2"`, 1},
		{`a!="1" or a!="2"`, 0},
		{`a="1" or a!="2"`, 0},
		{`a="1" or a="2" and b="3"`, 1},       // (a="1" or a="2") and b="3"
		{`b="3" and a="1" or a="2"`, 0},       // (b="3" and a="1") or a="2"
		{`a="1" or a>1 or a="2"`, 0},          // a comparison between them
		{`a="1" or a="2" or a>1 or a="3"`, 1}, // the first two only
		{`a=~"1|2"`, 1},                       // a lone regex listing values
		{`a=~"1.*" or a="2" or a="3"`, 1},     // the regex stays
		{`a=~"(?i)x" or a="2"`, 0},            // folding is not listed
		{`(a="1" or b="1") or (a="2" or b="2")`, 2},
	} {
		q, err := Parse(`{s="x"} | ` + c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.f, err)
		}
		e, err := compileLabelExpr(q.Stages[0].(*LabelFilter).Expr)
		if err != nil {
			t.Fatal(err)
		}
		if n := countSets(e); n != c.sets {
			t.Errorf("%s: %d set lookups, want %d", c.f, n, c.sets)
		}
	}
}

// unmergedPlan compiles q with its label filters evaluated node for node,
// as before set lookups.
func unmergedPlan(t testing.TB, q *Query) *Plan {
	p, err := Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []LabelExpr
	for _, st := range q.Stages {
		if f, ok := st.(*LabelFilter); ok {
			exprs = append(exprs, f.Expr)
		}
	}
	for i := range p.stages {
		if p.stages[i].filter == nil {
			continue
		}
		if p.stages[i].filter, err = compileLabelTree(exprs[0]); err != nil {
			t.Fatal(err)
		}
		exprs = exprs[1:]
	}
	if len(exprs) != 0 {
		t.Fatalf("%d label filters left", len(exprs))
	}
	return p
}

// TestManyValuesFilter runs filters of 1,100 ORed user_id values (the
// pasted list of ids), with and without the empty value, over generated
// lines after logfmt and json, with user_id also a stream label (read as
// user_id_extracted) or structured metadata on some entries: each entry
// must pass and get the same labels as with the filter evaluated node for
// node.
func TestManyValuesFilter(t *testing.T) {
	g := logtest.NewGenerator(logtest.Config{Lines: 8000, Seed: 3})
	var lines [][]byte
	var ids []string
	for range 8000 {
		l, _, _ := g.Next(nil)
		lines = append(lines, l)
		if i := strings.Index(string(l), " user_id="); i >= 0 {
			id, _, _ := strings.Cut(string(l[i+9:]), " ")
			ids = append(ids, id)
		}
	}
	if len(ids) < 100 {
		t.Fatalf("only %d user ids", len(ids))
	}
	var vals []string
	for i := range 1100 {
		if i%50 == 0 {
			vals = append(vals, ids[i*7%len(ids)])
		} else {
			vals = append(vals, strconv.Itoa(90000000+i))
		}
	}
	or := func(name string, vs []string) string {
		var b strings.Builder
		for i, v := range vs {
			if i > 0 {
				b.WriteString(" or ")
			}
			fmt.Fprintf(&b, "%s=%q", name, v)
		}
		return b.String()
	}
	meta, err := attrs.Encode(nil, []attrs.Pair{{Name: "user_id", Value: vals[0]}, {Name: "trace", Value: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	streams := [][]Label{{{"source", "gen.log"}}, {{"source", "gen.log"}, {"app", "x"}}, {{"source", "gen.log"}}, {{"source", "gen.log"}, {"user_id", vals[50]}}}
	for _, qs := range []string{
		`{source="gen.log"} | logfmt | ` + or("user_id", vals),
		`{source="gen.log"} | json | ` + or("user_id", vals),
		`{source="gen.log"} | logfmt | ` + or("user_id", append(slices.Clone(vals), "")),
		`{source="gen.log"} | logfmt | ` + or("user_id_extracted", vals) + ` or ` + or("user_id", vals[:100]),
		`{source="gen.log"} | logfmt | (` + or("user_id", vals) + `) and level="info"`,
		`{source="gen.log"} | logfmt | user_id!="` + strings.Join(vals[:40], `" and user_id!="`) + `"`,
		`{source="gen.log"} | logfmt | duration > 10ms or ` + or("user_id", vals),
	} {
		q, err := Parse(qs)
		if err != nil {
			t.Fatal(err)
		}
		p, ref := mustPlan(t, qs), unmergedPlan(t, q)
		pass := 0
		for i, l := range lines {
			st := streams[i%len(streams)]
			var md []byte
			if i%5 == 0 {
				md = meta
			}
			want, got := ref.MatchEntryAttrs(st, md, l), p.MatchEntryAttrs(st, md, l)
			wl, wok := ref.Labels(st, l)
			gl, gok := p.Labels(st, l)
			if want != got || wok != gok || !slices.Equal(wl, gl) {
				t.Fatalf("%.80s...: line %q: node for node %v %v %q, with sets %v %v %q", qs, l, want, wok, wl, got, gok, gl)
			}
			if got {
				pass++
			}
		}
		t.Logf("%.60s...: %d of %d lines pass", qs, pass, len(lines))
		if pass == 0 {
			t.Errorf("%.80s...: no line passes", qs)
		}
	}
}

// BenchmarkManyValuesFilter is the 1,100-value filter on a parsed line,
// with set lookups and node for node.
func BenchmarkManyValuesFilter(b *testing.B) {
	var vals []string
	for i := range 1100 {
		vals = append(vals, fmt.Sprintf("user_id=%q", strconv.Itoa(90000000+i)))
	}
	qs := `{source="gen.log"} | logfmt | ` + strings.Join(vals, " or ")
	line := []byte(`ts=2026-11-01T00:00:01.104Z level=info app=inventory host=inventory-wzvzpfzwq-l8blt msg="Request received" trace_id=9d7364dd08443a55a248d56551814e07 span_id=79cac2605ce7b014 user_id=6178610 version=v1.24.7`)
	stream := []Label{{"source", "gen.log"}}
	q, err := Parse(qs)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *Plan
	}{{"sets", mustPlan(b, qs)}, {"node-for-node", unmergedPlan(b, q)}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.p.MatchEntry(stream, line) {
					b.Fatal("match")
				}
			}
		})
	}
}
