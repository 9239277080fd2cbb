package search

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testseed"
)

// Label pools of the selection oracle: few names and values, so that
// random matchers select anything from no stream to all of them, and
// values that need escaping or are not UTF-8.
var (
	selNames  = []string{"a", "b", "app", "l_1"}
	selValues = []string{"x", "y", "xy", "yx", "x.y", "X", `q"t`, "ü", "\xff", "a b", `\`, "x|y", "s0_5", "s0_55"}
	selRegex  = []string{"x|y", "x.*", ".*", ".+", "(x|y)z?", "[xy]", "(?i)x", `\x{FFFD}`, "x|", "^x$", ".", "x.y", `x\.y`,
		"ü|x", "s0_5|s0_55", "s0_(5|55)", "s0_5+", "s0_1.*", "s0_1[0-4]", "s0_(1|2)(3|4)|x", "[^x]", "y|yx|xy", "", "(?s).", `\p{L}`, "[a-z]{2}", "x?"}
)

// randomStreamLabels returns a stream's canonical labels: 0 to 4 labels
// from the pools, and now and then text that does not parse (an empty
// value, a duplicate name, garbage), which selection reads as no labels.
func randomStreamLabels(r *rand.Rand) string {
	switch r.IntN(40) {
	case 0:
		return `{a=""}`
	case 1:
		return `{a="x", a="y"}`
	case 2:
		return `{a="x"`
	}
	var ls ingest.Labels
	for _, n := range selNames {
		if r.IntN(3) > 0 {
			v := selValues[r.IntN(len(selValues))]
			if n == "app" && r.IntN(2) == 0 {
				v = uniqueValue(r) // most values of one stream only
			}
			ls = append(ls, ingest.Label{Name: n, Value: v})
		}
	}
	return ls.String()
}

// uniqueValue is one of many values (s0_0 .. s0_4999).
func uniqueValue(r *rand.Rand) string { return "s0_" + strconv.Itoa(r.IntN(5000)) }

// randomSelector returns a stream selector of 1 to 4 random matchers.
func randomSelector(r *rand.Rand) string {
	var ms []string
	for range 1 + r.IntN(4) {
		name := selNames[r.IntN(len(selNames))]
		if r.IntN(10) == 0 {
			name = "nope"
		}
		var op, v string
		switch r.IntN(4) {
		case 0:
			op = "="
		case 1:
			op = "!="
		case 2:
			op = "=~"
		default:
			op = "!~"
		}
		if op == "=" || op == "!=" {
			v = selValues[r.IntN(len(selValues))]
			if r.IntN(3) == 0 {
				v = uniqueValue(r)
			}
			if r.IntN(8) == 0 {
				v = ""
			}
		} else {
			v = selRegex[r.IntN(len(selRegex))]
		}
		ms = append(ms, name+op+strconv.Quote(v))
	}
	return "{" + strings.Join(ms, ", ") + "}"
}

// naiveSelect is the oracle: every stream's labels (parsed by
// parseAll) matched.
func naiveSelect(parsed []ingest.Labels, p *query.Plan) []uint32 {
	var out []uint32
	for id, ls := range parsed {
		if query.MatchStreamOf(p, ls) {
			out = append(out, uint32(id))
		}
	}
	return out
}

// parseAll parses each stream's labels; those that do not parse have
// none.
func parseAll(defs []string) []ingest.Labels {
	out := make([]ingest.Labels, len(defs))
	for i, text := range defs {
		out[i], _ = ingest.ParseLabels(text)
	}
	return out
}

func selSeed(t *testing.T, name string) uint64 {
	seed := testseed.Seed(t, name)
	t.Logf("seed %d (set %s=%d to repeat)", seed, name, seed)
	return seed
}

// TestSelectStreamsOracle checks SelectStreams against parsing and
// matching every stream, for random label sets and random selectors
// (=, !=, =~, !~, several matchers, empty values, absent labels), on a
// writer's views (also one taken before more streams were added, whose
// index must not show them), after a restart, and on a snapshot.
func TestSelectStreamsOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(selSeed(t, "HAY_SELECT_SEED"), 7))
	dir := t.TempDir()
	w, err := store.OpenWriter(dir, store.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var defs []string
	seen := map[string]bool{}
	add := func(n int) {
		var es []store.LabeledEntry
		for range n {
			l := randomStreamLabels(r)
			if !seen[l] {
				seen[l] = true
				defs = append(defs, l)
			}
			es = append(es, store.LabeledEntry{Labels: l, Time: int64(len(es)), Line: []byte("line")})
		}
		if err := w.Append(context.Background(), es); err != nil {
			t.Fatal(err)
		}
	}
	// Several thousand streams: enough that selections pass checkFew
	// and each path of SelectStreams runs. Duplicate label sets are the
	// same stream.
	for len(defs) < 3000 {
		add(500)
	}
	v1, err := w.View()
	if err != nil {
		t.Fatal(err)
	}
	defs1 := slices.Clone(defs)
	checkViewDefs(t, v1, defs1)
	for len(defs) < 6000 {
		add(500)
	}
	v2, err := w.View()
	if err != nil {
		t.Fatal(err)
	}
	checkViewDefs(t, v2, defs)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}

	var plans []*query.Plan
	var srcs []string
	refused := 0
	for len(plans) < 700 {
		src := randomSelector(r)
		ast, err := query.Parse(src)
		if err != nil {
			// Every matcher accepts the empty value: LogQL refuses it,
			// a plan compiled from such an AST selects nonetheless
			// (and SelectStreams starts from every stream).
			if refused++; refused > 100 {
				continue
			}
			ast, err = query.Parse(src[:len(src)-1] + `, zz="1"}`)
			if err != nil {
				t.Fatal(err)
			}
			ast.Selector = ast.Selector[:len(ast.Selector)-1]
		}
		p, err := query.Compile(ast)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		plans, srcs = append(plans, p), append(srcs, src)
	}
	plans, srcs = append(plans, nil), append(srcs, "no plan")
	check := func(what string, ix *store.StreamIndex, defs []string) {
		t.Helper()
		if ix.Len() != len(defs) {
			t.Fatalf("%s: index of %d streams, want %d", what, ix.Len(), len(defs))
		}
		nonEmpty := 0
		parsed := parseAll(defs)
		for i, p := range plans {
			got := SelectStreams(ix, p)
			want := allIDs(len(defs))
			if p != nil {
				want = naiveSelect(parsed, p)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: %s: got %d streams, want %d: %s", what, srcs[i], len(got), len(want), diffIDs(got, want, defs))
			}
			if len(want) > 0 {
				nonEmpty++
			}
			// The result is the caller's: scribbling on it must not
			// reach the index (later selectors would see it).
			for k := range got {
				got[k] = ^uint32(0)
			}
		}
		if nonEmpty < len(plans)/10 {
			t.Fatalf("%s: only %d of %d selectors select a stream: the test needs better pools", what, nonEmpty, len(plans))
		}
	}
	// The old view first: its index is caught up to v2's streams by
	// then, and must still show v1's only.
	v2.Index()
	check("old view", v1.Index(), defs1)
	check("view", v2.Index(), defs)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	w, err = store.OpenWriter(dir, store.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	v3, err := w.View()
	if err != nil {
		t.Fatal(err)
	}
	checkViewDefs(t, v3, defs)
	check("reopened", v3.Index(), defs)
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	check("snapshot", snap.Index(), defs)
}

func checkViewDefs(t *testing.T, v *store.View, defs []string) {
	t.Helper()
	if len(v.Streams) != len(defs) {
		t.Fatalf("view has %d streams, want %d", len(v.Streams), len(defs))
	}
	for i, d := range v.Streams {
		if d.Labels != defs[i] {
			t.Fatalf("stream %d is %s, want %s", i, d.Labels, defs[i])
		}
	}
}

func diffIDs(got, want []uint32, defs []string) string {
	for _, id := range got {
		if _, ok := slices.BinarySearch(want, id); !ok {
			return fmt.Sprintf("stream %d %s selected, should not be", id, defs[id])
		}
	}
	for _, id := range want {
		if _, ok := slices.BinarySearch(got, id); !ok {
			return fmt.Sprintf("stream %d %s missing", id, defs[id])
		}
	}
	if !slices.IsSorted(got) {
		return "not ascending"
	}
	return "duplicates"
}

// TestSelectStreamsRunOracle runs random queries (selectors, line
// filters, a parser stage with a label filter) through Run with the
// stream index and checks the matches against a naive scan of every
// entry (labels parsed, Plan.MatchStream and MatchEntry).
func TestSelectStreamsRunOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(selSeed(t, "HAY_SELECT_RUN_SEED"), 8))
	dir := t.TempDir()
	w, err := store.OpenWriter(dir, store.WriterOptions{Options: store.Options{Segment: segment.Options{BlockSize: 4 << 10}}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	type ent struct {
		time   int64
		labels string
		line   string
	}
	var all []ent
	for round := range 4 {
		var es []store.LabeledEntry
		for range 1500 {
			l := randomStreamLabels(r)
			line := fmt.Sprintf("level=%s n=%d", []string{"info", "warn", "error"}[r.IntN(3)], r.IntN(10))
			tm := int64(r.IntN(1000))
			es = append(es, store.LabeledEntry{Labels: l, Time: tm, Line: []byte(line)})
			all = append(all, ent{tm, l, line})
		}
		if err := w.Append(context.Background(), es); err != nil {
			t.Fatal(err)
		}
		if round < 3 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	v, err := w.View()
	if err != nil {
		t.Fatal(err)
	}
	pipes := []string{"", ` |= "error"`, ` != "n=1"`, ` | logfmt | level="warn"`, ` | logfmt | n > 4 | a != "x"`}
	queries := 0
	for queries < 200 {
		src := randomSelector(r) + pipes[r.IntN(len(pipes))]
		ast, err := query.Parse(src)
		if err != nil {
			continue
		}
		p, err := query.Compile(ast)
		if err != nil {
			continue
		}
		queries++
		since, until := int64(r.IntN(500)), int64(500+r.IntN(600))
		type m struct {
			time   int64
			labels string
			line   string
		}
		var want []m
		for _, e := range all {
			if e.time < since || e.time >= until {
				continue
			}
			ls, _ := ingest.ParseLabels(e.labels)
			ql := make([]query.Label, len(ls))
			for i, l := range ls {
				ql[i] = query.Label(l)
			}
			if p.MatchStream(ql) && p.MatchEntry(ql, []byte(e.line)) {
				want = append(want, m(e))
			}
		}
		var got []m
		q := Query{Plan: p, Index: v.Index(), Since: since, Until: until, SinceSet: true}
		n, err := Run(context.Background(), v.Parts, q, func(x *Match) error {
			got = append(got, m{x.Time, v.Labels(x.Stream), string(x.Line)})
			return nil
		}, func(err error) { t.Error(err) })
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		order := func(a, b m) int {
			return cmp.Or(cmp.Compare(a.time, b.time), strings.Compare(a.labels, b.labels), strings.Compare(a.line, b.line))
		}
		slices.SortFunc(got, order)
		slices.SortFunc(want, order)
		if int(n) != len(want) || !slices.Equal(got, want) {
			t.Fatalf("%s [%d, %d): got %d matches (n %d), want %d", src, since, until, len(got), n, len(want))
		}
	}
}

// FuzzFiniteValues checks finiteValues against the regexp package: when
// it spells out a regex's values, the anchored regex matches each of
// them, and a probe string (the fuzzed one, and each value with a byte
// more or less) matches exactly when it is one of them.
func FuzzFiniteValues(f *testing.F) {
	for _, s := range [][2]string{{"a|b", "a"}, {"s0_(5|55)", "s0_5"}, {"[xy]z?", "xz"}, {"(?i)x", "X"}, {`\x{FFFD}`, "\xff"}, {"x|", ""}, {"ü|\\.", "."}, {"[a-c][d-e]", "be"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, expr, probe string) {
		re, err := regexp.Compile("^(?:" + expr + ")$")
		if err != nil {
			return
		}
		vals, ok := finiteValues(&query.StreamMatcher{Matcher: query.Matcher{Name: "a", Type: query.MatchRegexp, Value: expr}})
		if !ok {
			return
		}
		if len(vals) > maxFinite {
			t.Fatalf("%q: %d values, more than %d", expr, len(vals), maxFinite)
		}
		probes := []string{probe}
		for _, v := range vals {
			if !re.MatchString(v) {
				t.Fatalf("%q spelled out %q, which it does not match", expr, v)
			}
			probes = append(probes, v+"x", v+"\xff", v+"\xc3")
			if len(v) > 0 {
				probes = append(probes, v[:len(v)-1], v[1:])
			}
		}
		for _, p := range probes {
			if re.MatchString(p) != slices.Contains(vals, p) {
				t.Fatalf("%q on %q: regexp says %v, values %q", expr, p, re.MatchString(p), vals)
			}
		}
	})
}

// FuzzValueMatcher checks valueMatcher's shortcuts against the regexp
// they replace, for every operator and pattern shape, on any value
// (newlines, invalid UTF-8).
func FuzzValueMatcher(f *testing.F) {
	for _, v := range []string{"", "x", "a\nb", "\n", "\xff", "ü", "x\r"} {
		f.Add(v)
	}
	pats := []string{".+", ".*", "(?s).+", "(?s).*", "(.+)", "(?:.*)", "(?s:.)+", ".", "x.+", ".+?", "(?U).*", "(?m).+", "(?i).+"}
	var ms []*query.StreamMatcher
	for _, op := range []string{"=~", "!~"} {
		for _, p := range pats {
			plan := mustPlan(f, `{a="b", x`+op+strconv.Quote(p)+`}`)
			m := plan.Streams[1]
			if m.Name != "x" {
				f.Fatalf("matcher %s, want x's", m)
			}
			ms = append(ms, m)
		}
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, m := range ms {
			if got, want := valueMatcher(m)(v), m.Matches(v); got != want {
				t.Fatalf("%s on %q: %v, regexp says %v", m, v, got, want)
			}
		}
	})
}
