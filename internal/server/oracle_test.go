package server

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/search"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// oracleScan is the naive reference: every entry of every block, checked
// one by one with bytes/strings and the plan's MatchStream and Labels.
// With levels (a server that adds detected_level; the entries were
// pushed without metadata), a hit of a query with a stream selector has
// among its labels the detected_level wantLevel expects, as metadata is.
func oracleScan(t *testing.T, v *store.View, sel *selection, levels bool) []hit {
	t.Helper()
	var out []hit
	var b segment.Block
	for _, p := range v.Parts {
		for bi := range p.NumBlocks() {
			if err := p.ReadBlock(bi, &b); err != nil {
				t.Fatal(err)
			}
			for k := range b.Times {
				tm := b.Times[k]
				if tm < sel.start || tm > sel.end {
					continue
				}
				text := v.Labels(b.Streams[k])
				line := b.Line(k)
				h := hit{Time: tm, Stream: b.Streams[k], Labels: text, Line: slices.Clone(line)}
				if sel.plan == nil {
					if sel.fold {
						if !strings.Contains(strings.ToLower(string(line)), strings.ToLower(string(sel.pat))) {
							continue
						}
					} else if !strings.Contains(string(line), string(sel.pat)) {
						continue
					}
				} else {
					ls, _ := ingest.ParseLabels(text)
					var labs []query.Label
					for _, l := range ls {
						labs = append(labs, query.Label(l))
					}
					if !sel.plan.MatchStream(labs) {
						continue
					}
					if levels {
						m := map[string]string{}
						for _, l := range ls {
							m[l.Name] = l.Value
						}
						if l := wantLevel(m, nil, string(line)); l != "" {
							labs = append(labs, query.Label{Name: "detected_level", Value: l})
							slices.SortFunc(labs, func(a, b query.Label) int { return strings.Compare(a.Name, b.Name) })
							h.Labels = mergeLabels(labs, nil)
						}
					}
					ext, ok := sel.plan.Labels(labs, line)
					if !ok {
						continue
					}
					if len(ext) > 0 {
						h.Labels = mergeLabels(labs, ext)
					}
				}
				out = append(out, h)
			}
		}
	}
	return out
}

func hitKey(h hit) string { return fmt.Sprintf("%d|%s|%s", h.Time, h.Labels, h.Line) }

// TestRunMatchesOracle pushes random entries (several streams, equal
// times, flushed segments plus a head) and checks that every query gives
// the oracle's entries, in time order, newest first for backward, with
// limits cutting at the right place.
func TestRunMatchesOracle(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Store.HeadBytes = 8 << 10 })
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"error", "timeout", "ok", "GET", "level=warn", "user=bob", `{"status":500}`, "ERROR", "é"}
	apps := []string{"api", "auth", "db"}
	for range 30 {
		var streams []PushStream
		for _, app := range apps {
			ps := PushStream{Labels: fmt.Sprintf(`{app=%q, env="prod"}`, app)}
			for range r.IntN(20) {
				var sb strings.Builder
				for w := range 1 + r.IntN(5) {
					if w > 0 {
						sb.WriteByte(' ')
					}
					sb.WriteString(words[r.IntN(len(words))])
				}
				ps.Entries = append(ps.Entries, PushEntry{Time: base - int64(r.IntN(50))*1e9, Line: sb.String()})
			}
			streams = append(streams, ps)
		}
		e.mustPush("/loki/api/v1/push", protoBody(streams), "Content-Type", "application/x-protobuf")
	}
	ts, err := e.srv.openTenant(DefaultTenant, false)
	if err != nil {
		t.Fatal(err)
	}
	if ts.w.Stats().Segments == 0 {
		t.Fatal("want some flushed segments")
	}
	v, err := ts.w.View()
	if err != nil {
		t.Fatal(err)
	}
	queries := []string{"", "error", "ERROR", `{app="api"}`, `{app="api"} |= "error"`, `{app="db"} | json`, `{app=~"a.*"} |= "error"`, `{env="prod"} != "ok"`,
		`{app="db"} |~ "err(or)?" | json`, `{env="prod", app!="api"} |= "level" | logfmt | level="warn"`}
	for _, qs := range queries {
		for _, fold := range []bool{false, true} {
			for _, rng := range [][2]int64{{-1 << 63, 1<<63 - 1}, {base - 30e9, base - 10e9}} {
				sel, err := parseSelection(qs, fold)
				if err != nil {
					t.Fatal(err)
				}
				sel.start, sel.end = rng[0], rng[1]
				want := oracleScan(t, v, sel, e.levelsOn())
				name := fmt.Sprintf("q=%q fold=%v range=%v", qs, fold, rng)
				for _, order := range []search.Order{search.Oldest, search.Newest, anyOrder} {
					var got []hit
					err = run(context.Background(), v, sel, order, 0, func(h *hit) bool {
						c := *h
						c.Line = slices.Clone(h.Line)
						got = append(got, c)
						return true
					})
					if err != nil {
						t.Fatal(err)
					}
					sortHits := func(hs []hit) []string {
						var ks []string
						for _, h := range hs {
							ks = append(ks, hitKey(h))
						}
						slices.Sort(ks)
						return ks
					}
					if g, w := sortHits(got), sortHits(want); !slices.Equal(g, w) {
						t.Fatalf("%s order %d: %d entries, oracle %d", name, order, len(g), len(w))
					}
				}
				// Entries are pushed out of time order within their streams,
				// so this checks collect's own sort, not search's merge.
				for _, lim := range []int{1, 7, 300} {
					for _, backward := range []bool{true, false} {
						slices.SortStableFunc(want, func(a, b hit) int {
							if backward {
								return cmp.Compare(b.Time, a.Time)
							}
							return cmp.Compare(a.Time, b.Time)
						})
						hits, ans, err := collect(context.Background(), ts, sel, answerLimit{entries: lim, backward: backward})
						more := ans.more
						if err != nil {
							t.Fatal(err)
						}
						// more may also be set when blocks were skipped at
						// exactly limit entries (they might have held more).
						if len(want) > lim && !more || len(hits) != min(lim, len(want)) {
							t.Fatalf("%s: limit %d gave %d (more=%v) of %d", name, lim, len(hits), more, len(want))
						}
						for i := range hits {
							if hits[i].Time != want[i].Time {
								t.Fatalf("%s backward=%v: entry %d has time %d, want %d", name, backward, i, hits[i].Time, want[i].Time)
							}
						}
						// Deterministic ties: the same query gives the same answer.
						again, _, _ := collect(context.Background(), ts, sel, answerLimit{entries: lim, backward: backward})
						for i := range hits {
							if hitKey(hits[i]) != hitKey(again[i]) {
								t.Fatalf("%s: answer %d differs between runs", name, i)
							}
						}
					}
				}
			}
		}
	}
}

// TestCollectStreams checks that an answer is delivered in several batches
// as blocks finalize entries, not all at the end, and in order.
func TestCollectStreams(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Store.HeadBytes = 4 << 10 })
	for i := range 40 {
		var lines []string
		for j := range 20 {
			lines = append(lines, fmt.Sprintf("entry %03d-%02d %s", i, j, strings.Repeat("x", 40)))
		}
		e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base-int64(40-i)*1e9, lines...))
	}
	ts, _ := e.srv.openTenant(DefaultTenant, false)
	sel, _ := parseSelection("entry", false)
	sel.start, sel.end = -1<<63, 1<<63-1
	for _, backward := range []bool{true, false} {
		batches, n := 0, 0
		var prev int64
		_, err := collectStream(context.Background(), ts, sel, answerLimit{entries: 5000, backward: backward}, func(h *hit) error {
			if h == nil {
				batches++
				return nil
			}
			if n > 0 && (backward && h.Time > prev || !backward && h.Time < prev) {
				t.Fatalf("out of order at %d", n)
			}
			prev = h.Time
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != 800 || batches < 5 {
			t.Errorf("backward=%v: %d entries in %d batches", backward, n, batches)
		}
	}
}
