package search

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// scanAll runs a Scanner over every block it keeps, in the order given,
// and returns the matches (as "time stream line" keys, in scan order) and
// the blocks kept.
func scanAll(t *testing.T, snap *store.Snapshot, parts []store.Part, q Query) ([]string, []BlockRef) {
	t.Helper()
	s, refs, err := NewScanner(parts, q)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var sc Scratch
	var b segment.Block
	var hits []int32
	for _, r := range refs {
		if err := parts[r.Part].ReadBlock(r.Block, &b); err != nil {
			t.Fatal(err)
		}
		hits = s.Match(r, &b, &sc, hits[:0])
		if !slices.IsSorted(hits) {
			t.Fatalf("block %d/%d: hits not ascending: %v", r.Part, r.Block, hits)
		}
		if q.Plan != nil {
			// MatchStages with Plan.Labels deciding: the same matches,
			// each entry asked at most once, in ascending order.
			ls := map[uint32][]query.Label{}
			last := -1
			var yes []int32
			again := s.MatchStages(r, &b, &sc, nil, func(k int) bool {
				if k <= last {
					t.Fatalf("block %d/%d: stages asked about %d after %d", r.Part, r.Block, k, last)
				}
				last = k
				id := b.Streams[k]
				if ls[id] == nil {
					ls[id] = labelsOf(t, snap, id)
				}
				_, ok := q.Plan.Labels(ls[id], b.Line(k))
				if ok {
					yes = append(yes, int32(k))
				}
				return ok
			})
			if !slices.Equal(again, hits) || last >= 0 && !slices.Equal(yes, hits) {
				t.Fatalf("block %d/%d: MatchStages %v (stages said yes to %v), Match %v", r.Part, r.Block, again, yes, hits)
			}
		}
		for _, k := range hits {
			got = append(got, fmt.Sprintf("%d %d %q", b.Times[k], b.Streams[k], b.Line(int(k))))
		}
	}
	return got, refs
}

func outKeys(o []out) []string {
	var keys []string
	for _, e := range o {
		keys = append(keys, fmt.Sprintf("%d %d %q", e.time, e.stream, e.line))
	}
	return keys
}

// TestScannerOracle compares the Scanner's matches, all streams of a block
// at once, with the brute-force oracle for every query in planQueries and
// for literals, with time ranges: the same entries (order aside), blocks
// in store order, and the same blocks pruned as Run prunes.
func TestScannerOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, streams := range []int{1, 3} {
		es := genLog(r, 2500, streams)
		snap := build(t, es, 90)
		var qs []Query
		for _, src := range planQueries {
			qs = append(qs, Query{Plan: mustPlan(t, src), Labels: snap.Labels})
		}
		for _, lit := range []string{"", "error", "ERROR", "timeout", "zzz", "\n", "id="} {
			qs = append(qs, Query{Pattern: []byte(lit)}, Query{Pattern: []byte(lit), Fold: true})
		}
		for _, q := range qs {
			for _, rng := range [][2]int64{{0, 0}, {200, 500}, {100, 101}} {
				q.Since, q.Until = rng[0], rng[1]
				var want []string
				if q.Plan != nil {
					o, _ := planOracle(t, snap, es, q, streams)
					want = outKeys(o)
				} else {
					for _, e := range oracle(es, q, streams) {
						want = append(want, fmt.Sprintf("%d %d %q", e.time, e.stream, e.line))
					}
				}
				var st, runSt Stats
				q.Stats = &st
				got, refs := scanAll(t, snap, snap.Parts, q)
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("streams %d %q fold=%v plan=%v range %v: %d matches, oracle %d\n got %.5q\nwant %.5q",
						streams, q.Pattern, q.Fold, q.Plan != nil, rng, len(got), len(want), got, want)
				}
				if !slices.IsSortedFunc(refs, func(a, b BlockRef) int {
					if a.Part != b.Part {
						return a.Part - b.Part
					}
					return a.Block - b.Block
				}) {
					t.Fatalf("blocks not in store order: %v", refs)
				}
				q.Stats, q.Count = &runSt, true
				if _, err := Run(t.Context(), snap.Parts, q, nil, func(err error) { t.Error(err) }); err != nil {
					t.Fatal(err)
				}
				runSt.Decoded = 0
				if st != runSt {
					t.Fatalf("pruning differs from Run's: %+v, Run %+v", st, runSt)
				}
				q.Count = false
			}
		}
	}
}

// TestScannerSkipIndex: blocks the skip index rules out are not kept, and
// the matches are unchanged.
func TestScannerSkipIndex(t *testing.T) {
	snap, parts, blocks, _, asked := skipCorpus(t)
	for _, q := range []Query{
		{Pattern: []byte("needle42")},
		{Pattern: []byte("NEEDLE42"), Fold: true},
		{Plan: mustPlan(t, `{s=~".+"} |= "error" |= "needle42"`), Labels: snap.Labels},
	} {
		want, _ := scanAll(t, snap, snap.Parts, q)
		got, refs := scanAll(t, snap, parts, q)
		if !slices.Equal(got, want) || len(refs) >= blocks || asked.Load() == 0 {
			t.Fatalf("%q: %d matches (%d without the index), %d of %d blocks kept", q.Pattern, len(got), len(want), len(refs), blocks)
		}
	}
	if _, _, err := NewScanner(parts, Query{Pattern: []byte("x"), After: 1}); err == nil {
		t.Fatal("a Scanner with context: no error")
	}
}

// TestTimeBounds: no Until means no bound, so an entry at math.MaxInt64
// matches (as one at math.MinInt64 does without Since); Until is
// exclusive otherwise. Run, Scanner and TimeRange agree.
func TestTimeBounds(t *testing.T) {
	es := []entry{
		{math.MinInt64, 0, "x min"}, {-1, 1, "x neg"}, {0, 0, "x zero"},
		{5, 1, "x five"}, {math.MaxInt64 - 1, 0, "x max-1"}, {math.MaxInt64, 1, "x max"},
	}
	snap := build(t, es, 0)
	for _, c := range []struct {
		since, until int64
		want         []string
	}{
		{0, 0, []string{"x min", "x neg", "x zero", "x five", "x max-1", "x max"}},
		{0, math.MaxInt64, []string{"x min", "x neg", "x zero", "x five", "x max-1"}},
		{1, 0, []string{"x five", "x max-1", "x max"}},
		{-1, 5, []string{"x neg", "x zero"}},
		{math.MaxInt64, 0, []string{"x max"}},
	} {
		q := Query{Pattern: []byte("x"), Since: c.since, Until: c.until}
		got, _ := collect(t, snap, q)
		var lines []string
		for _, e := range got {
			lines = append(lines, e.line)
		}
		slices.Sort(lines)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(lines, want) {
			t.Fatalf("since %d until %d: Run %q, want %q", c.since, c.until, lines, want)
		}
		keys, _ := scanAll(t, snap, snap.Parts, q)
		if len(keys) != len(want) {
			t.Fatalf("since %d until %d: Scanner %q, want %q", c.since, c.until, keys, want)
		}
		lo, hi, ok := TimeRange(snap.Parts, q)
		var times []int64
		for _, e := range es {
			if slices.Contains(want, e.line) {
				times = append(times, e.time)
			}
		}
		// Block bounds clipped to the range: they cover the matches and
		// stay inside the range.
		last := int64(math.MaxInt64)
		if c.until != 0 {
			last = c.until - 1
		}
		if !ok || lo > slices.Min(times) || hi < slices.Max(times) || c.since != 0 && lo < c.since || hi > last {
			t.Fatalf("since %d until %d: TimeRange %d..%d (%v), want it to cover %d..%d", c.since, c.until, lo, hi, ok, slices.Min(times), slices.Max(times))
		}
	}
}
