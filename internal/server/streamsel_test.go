package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/search"
	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testseed"
)

// naiveBlockStreams is the reference for selectedStreams, which answers
// from the block index alone (a query's plan, whose search then decides):
// every stream of every block overlapping [start, end] that plan admits.
func naiveBlockStreams(v *store.View, plan *query.Plan, start, end int64) int {
	seen := map[uint32]bool{}
	n := 0
	for _, p := range v.Parts {
		for bi := range p.NumBlocks() {
			m := p.BlockMeta(bi)
			if m.Entries == 0 || m.MaxTime < start || m.MinTime > end {
				continue
			}
			for _, id := range m.Streams {
				if seen[id] {
					continue
				}
				seen[id] = true
				ls, err := ingest.ParseLabels(v.Labels(id))
				if err == nil && (plan == nil || query.MatchStreamOf(plan, ls)) {
					n++
				}
			}
		}
	}
	return n
}

// naiveStreamsIn is the reference for streamsIn: every stream with an
// entry in [start, end], read from every block, parsed and matched,
// streams whose labels do not parse left out. Canonical label texts,
// sorted.
func naiveStreamsIn(v *store.View, plan *query.Plan, start, end int64) []ingest.Labels {
	seen := map[uint32]bool{}
	var out []ingest.Labels
	var b segment.Block
	for _, p := range v.Parts {
		for bi := range p.NumBlocks() {
			if err := p.ReadBlock(bi, &b); err != nil {
				panic(err)
			}
			for k, id := range b.Streams {
				if b.Times[k] < start || b.Times[k] > end || seen[id] {
					continue
				}
				seen[id] = true
				ls, err := ingest.ParseLabels(v.Labels(id))
				if err != nil || plan != nil && !query.MatchStreamOf(plan, ls) {
					continue
				}
				out = append(out, ls)
			}
		}
	}
	slices.SortFunc(out, func(a, b ingest.Labels) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// streamSelSeed returns the seed of the selection oracles, from
// HAY_STREAMSEL_SEED or the clock, and logs it.
func streamSelSeed(t *testing.T) uint64 {
	seed := testseed.Seed(t, "HAY_STREAMSEL_SEED")
	t.Logf("seed %d (HAY_STREAMSEL_SEED=%d repeats it)", seed, seed)
	return seed
}

var (
	sselNames  = []string{"app", "env", "pod", "l_1"}
	sselValues = []string{"x", "y", "xy", "x.y", `q"t`, "ü", "a b", `\`, "x|y"}
	sselRegex  = []string{"x|y", "x.*", ".+", "[xy]", "(?i)X", "p1.*", "p1[0-3]|x", "", "^x$", ".", "x?"}
)

func sselLabels(r *rand.Rand) string {
	if r.IntN(50) == 0 {
		return `{app=""}` // does not parse: no labels
	}
	var ls ingest.Labels
	for _, n := range sselNames {
		if r.IntN(3) > 0 {
			v := sselValues[r.IntN(len(sselValues))]
			if n == "pod" {
				v = "p" + strconv.Itoa(r.IntN(400)) // churn: mostly one stream each
			}
			ls = append(ls, ingest.Label{Name: n, Value: v})
		}
	}
	return ls.String()
}

func sselSelector(r *rand.Rand) string {
	for {
		var ms []string
		for range 1 + r.IntN(3) {
			name := sselNames[r.IntN(len(sselNames))]
			if r.IntN(12) == 0 {
				name = "nope"
			}
			op := []string{"=", "!=", "=~", "!~"}[r.IntN(4)]
			var v string
			switch {
			case op == "=~" || op == "!~":
				v = sselRegex[r.IntN(len(sselRegex))]
			case name == "pod":
				v = "p" + strconv.Itoa(r.IntN(400))
			case r.IntN(8) == 0:
				v = ""
			default:
				v = sselValues[r.IntN(len(sselValues))]
			}
			ms = append(ms, name+op+strconv.Quote(v))
		}
		src := "{" + strings.Join(ms, ", ") + "}"
		if _, err := query.Parse(src); err == nil {
			return src
		}
	}
}

// TestStreamSelectionOracle pushes streams with random label sets (some
// churned pods, some labels that do not parse) over time, partly
// flushed, and checks random selectors (=, !=, =~, !~, several, empty
// values, absent labels) and time ranges against the naive reference:
// the stream set (streamsIn, selectedStreams), /series, /labels,
// /label/X/values, and the matching entries through run in every order
// and through query_range (lines and counts). Then it restarts the
// server on the same data and checks a sample again.
func TestStreamSelectionOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(streamSelSeed(t), 3))
	dir := t.TempDir()
	mod := func(c *Config) { c.DataDir = dir; c.Store.HeadBytes = 16 << 10 }
	e := newEnv(t, mod)
	ts, err := e.srv.openTenant(DefaultTenant, true)
	if err != nil {
		t.Fatal(err)
	}
	const span = 1000 // entries lie in [base-span s, base)
	for range 8 {
		var es []store.LabeledEntry
		for range 250 {
			tm := base - int64(1+r.IntN(span))*1e9
			es = append(es, store.LabeledEntry{Labels: sselLabels(r), Time: tm, Line: []byte(fmt.Sprintf("level=%s n=%d", []string{"info", "warn"}[r.IntN(2)], r.IntN(9)))})
		}
		if err := ts.w.Append(context.Background(), es); err != nil {
			t.Fatal(err)
		}
	}
	if ts.w.Stats().Segments == 0 {
		t.Fatal("want flushed segments as well as the head")
	}
	type tcase struct {
		src        string
		start, end int64
	}
	var cases []tcase
	// Broad selectors (more than bulk streams: present's bitsets), over
	// the whole span and a part of it.
	for _, n := range sselNames {
		for _, src := range []string{`{` + n + `=~".+"}`, `{` + n + `=~".+", env!="x"}`, `{` + n + `!="x", app=~".*y.*|x"}`} {
			cases = append(cases, tcase{src, base - (span+1)*1e9, base}, tcase{src, base - span/2*1e9, base - span/4*1e9})
		}
	}
	// Ranges that start at a block's last entry or end at a block's
	// first: the block overlaps the range by one instant.
	v0, err := ts.w.View()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		p := v0.Parts[r.IntN(len(v0.Parts))]
		m := p.BlockMeta(r.IntN(p.NumBlocks()))
		c := tcase{sselSelector(r), m.MaxTime, m.MaxTime + int64(r.IntN(span))*1e9}
		if i%2 == 1 {
			c.start, c.end = m.MinTime-int64(r.IntN(span))*1e9, m.MinTime
		}
		cases = append(cases, c)
	}
	for i := range 120 {
		start := base - int64(r.IntN(span+10))*1e9
		src := sselSelector(r)
		if i%20 == 0 {
			src = "" // no selector: every stream in the range
		}
		cases = append(cases, tcase{src, start, start + int64(r.IntN(span))*1e9})
	}
	getJSON := func(e *testEnv, path string, out any) {
		t.Helper()
		code, body := e.get(path)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		if err := json.Unmarshal([]byte(body), out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	check := func(e *testEnv, ts *tenantStore, c tcase, entries bool) {
		t.Helper()
		v, err := ts.w.View()
		if err != nil {
			t.Fatal(err)
		}
		sel, err := parseSelection(c.src, false)
		if err != nil {
			t.Fatal(err)
		}
		sel.start, sel.end = c.start, c.end
		want := naiveStreamsIn(v, sel.plan, c.start, c.end)
		rng := fmt.Sprintf("&start=%d&end=%d", c.start, c.end)

		var series struct{ Data []map[string]string }
		getJSON(e, "/loki/api/v1/series?match[]="+url.QueryEscape(c.src)+rng, &series)
		if len(series.Data) != len(want) {
			t.Fatalf("%s: series gave %d streams, want %d", c.src, len(series.Data), len(want))
		}
		names, values := map[string]bool{}, map[string]map[string]bool{}
		for i, ls := range want {
			if got := labelMap(ls.String()); fmt.Sprint(got) != fmt.Sprint(series.Data[i]) {
				t.Fatalf("%s: series %d is %v, want %v", c.src, i, series.Data[i], got)
			}
			for _, l := range ls {
				names[l.Name] = true
				if values[l.Name] == nil {
					values[l.Name] = map[string]bool{}
				}
				values[l.Name][l.Value] = true
			}
		}
		if n, w := selectedStreams(v, sel, 2), min(2, naiveBlockStreams(v, sel.plan, c.start, c.end)); n != w {
			t.Fatalf("%s: selectedStreams = %d, want %d", c.src, n, w)
		}
		var labels struct{ Data []string }
		getJSON(e, "/loki/api/v1/labels?query="+url.QueryEscape(c.src)+rng, &labels)
		if w := slices.Sorted(maps.Keys(names)); !slices.Equal(labels.Data, w) {
			t.Fatalf("%s: labels %q, want %q", c.src, labels.Data, w)
		}
		for _, name := range sselNames {
			var vals struct{ Data []string }
			getJSON(e, "/loki/api/v1/label/"+name+"/values?query="+url.QueryEscape(c.src)+rng, &vals)
			if w := slices.Sorted(maps.Keys(values[name])); !slices.Equal(vals.Data, w) {
				t.Fatalf("%s: values of %s %q, want %q", c.src, name, vals.Data, w)
			}
		}
		// detected_labels: the streams with an entry in the range (it
		// decodes the blocks at the range's edges), their values counted.
		wantHits := oracleScan(t, v, sel, false) // their stream labels only
		dvals := map[string]map[string]bool{}
		for _, h := range wantHits {
			ls, _ := ingest.ParseLabels(h.Labels)
			for _, l := range ls {
				if dvals[l.Name] == nil {
					dvals[l.Name] = map[string]bool{}
				}
				dvals[l.Name][l.Value] = true
			}
		}
		var det struct {
			DetectedLabels []struct {
				Label       string
				Cardinality int
			}
		}
		dq := ""
		if c.src != "" {
			dq = "&query=" + url.QueryEscape(c.src)
		}
		getJSON(e, "/loki/api/v1/detected_labels?x=1"+dq+rng, &det)
		if len(det.DetectedLabels) != len(dvals) {
			t.Fatalf("%s: detected_labels %v, want %d labels", c.src, det.DetectedLabels, len(dvals))
		}
		for _, d := range det.DetectedLabels {
			if len(dvals[d.Label]) != d.Cardinality {
				t.Fatalf("%s: detected label %s has cardinality %d, want %d", c.src, d.Label, d.Cardinality, len(dvals[d.Label]))
			}
		}
		if !entries || c.src == "" {
			return
		}
		keys := func(hs []hit) []string {
			var ks []string
			for _, h := range hs {
				ks = append(ks, hitKey(h))
			}
			slices.Sort(ks)
			return ks
		}
		for _, order := range []search.Order{search.Oldest, search.Newest, anyOrder} {
			var got []hit
			err := run(context.Background(), v, sel, order, 0, func(h *hit) bool {
				c := *h
				c.Line = slices.Clone(h.Line)
				got = append(got, c)
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			if g, w := keys(got), keys(wantHits); !slices.Equal(g, w) {
				t.Fatalf("%s order %d: %d entries, want %d", c.src, order, len(g), len(w))
			}
		}
		var qr struct {
			Data struct {
				Result []struct {
					Stream map[string]string
					Values [][2]string
				}
			}
		}
		getJSON(e, "/loki/api/v1/query_range?limit=5000&query="+url.QueryEscape(c.src)+fmt.Sprintf("&start=%d&end=%d", c.start, c.end+1), &qr) // end exclusive
		var got []string
		for _, s := range qr.Data.Result {
			ls := ingest.Labels{}
			for k, v := range s.Stream {
				ls = append(ls, ingest.Label{Name: k, Value: v})
			}
			slices.SortFunc(ls, func(a, b ingest.Label) int { return strings.Compare(a.Name, b.Name) })
			for _, tv := range s.Values {
				got = append(got, tv[0]+"|"+ls.String()+"|"+tv[1])
			}
		}
		var w []string
		for _, h := range wantHits {
			ls, _ := ingest.ParseLabels(h.Labels)
			w = append(w, strconv.FormatInt(h.Time, 10)+"|"+ls.String()+"|"+string(h.Line))
		}
		slices.Sort(got)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Fatalf("%s: query_range gave %d entries, want %d: %s", c.src, len(got), len(w), firstDiff(got, w))
		}
	}
	selecting := 0
	for _, c := range cases {
		check(e, ts, c, true)
		v, _ := ts.w.View()
		sel, _ := parseSelection(c.src, false)
		if len(naiveStreamsIn(v, sel.plan, c.start, c.end)) > 0 {
			selecting++
		}
	}
	if selecting < len(cases)/5 {
		t.Fatalf("only %d of %d cases select a stream: the pools need work", selecting, len(cases))
	}

	// A restart: the stream table comes back from the manifest and the
	// WAL, and the index is built again.
	e.ts.Close()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, mod)
	ts2, err := e2.srv.openTenant(DefaultTenant, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases[:40] {
		check(e2, ts2, c, false)
	}
}

// firstDiff describes the first difference of two sorted lists.
func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("got %q where want %q", got[i], want[i])
		}
	}
	if len(got) > len(want) {
		return fmt.Sprintf("extra %q", got[len(want)])
	}
	if len(want) > len(got) {
		return fmt.Sprintf("missing %q", want[len(got)])
	}
	return "equal"
}
