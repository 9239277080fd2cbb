package search

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"haystack/internal/ingest"
	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/internal/store"
)

func mustPlan(t testing.TB, src string) *query.Plan {
	t.Helper()
	q, err := query.Parse(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	p, err := query.Compile(q)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return p
}

// out is one delivered entry, as compared in tests.
type out struct {
	time    int64
	stream  uint32
	line    string
	context bool
	group   bool
}

func labelsOf(t testing.TB, snap *store.Snapshot, s uint32) []query.Label {
	ls, err := ingest.ParseLabels(snap.Labels(s))
	if err != nil {
		t.Fatal(err)
	}
	var ql []query.Label
	for _, l := range ls {
		ql = append(ql, query.Label(l))
	}
	return ql
}

// planOracle is the brute-force definition of Run with a plan: every
// entry of every stream through MatchStream and MatchEntry, context
// around matches within each stream's order (reversed for Newest), the
// streams merged by time with ties by stream id, then the limit with the
// last match's trailing After context (the next entries of its stream,
// whatever they are, as grep -m).
func planOracle(t testing.TB, snap *store.Snapshot, es []entry, q Query, streams int) ([]out, int64) {
	until := q.Until
	if until == 0 {
		until = 1 << 62
	}
	before, after := q.Before, q.After
	if q.Order == Newest {
		before, after = after, before
	}
	type item struct {
		out
		pos int // index in its stream's entries
	}
	per := make([][]item, streams)
	all := make([][]entry, streams)
	for s := range streams {
		ls := labelsOf(t, snap, uint32(s))
		if !q.Plan.MatchStream(ls) {
			continue
		}
		var ents []entry
		var hit []bool
		for _, e := range es {
			if int(e.stream) == s && e.time >= q.Since && e.time < until {
				ents = append(ents, e)
				hit = append(hit, q.Plan.MatchEntry(ls, []byte(e.line)))
			}
		}
		if q.Order == Newest {
			slices.Reverse(ents)
			slices.Reverse(hit)
		}
		all[s] = ents
		show := make([]bool, len(ents))
		for i, h := range hit {
			if h {
				for j := max(0, i-before); j <= min(len(ents)-1, i+after); j++ {
					show[j] = true
				}
			}
		}
		for i, e := range ents {
			if show[i] {
				per[s] = append(per[s], item{out{e.time, e.stream, e.line, !hit[i], i == 0 || !show[i-1]}, i})
			}
		}
	}
	less := func(a, b item) bool {
		if q.Order == Newest {
			a, b = b, a
		}
		if a.time != b.time {
			return a.time < b.time
		}
		return a.stream < b.stream
	}
	var res []out
	var n int64
	for {
		best := -1
		for s := range per {
			if len(per[s]) > 0 && (best < 0 || less(per[s][0], per[best][0])) {
				best = s
			}
		}
		if best < 0 {
			break
		}
		o := per[best][0]
		per[best] = per[best][1:]
		res = append(res, o.out)
		if !o.context {
			n++
			if q.Limit > 0 && n == q.Limit {
				ents := all[best]
				for _, f := range ents[o.pos+1 : min(len(ents), o.pos+1+after)] {
					res = append(res, out{f.time, f.stream, f.line, true, false})
				}
				break
			}
		}
	}
	return res, n
}

func collectOut(t testing.TB, snap *store.Snapshot, q Query) ([]out, int64) {
	t.Helper()
	var got []out
	n, err := Run(context.Background(), snap.Parts, q, func(m *Match) error {
		got = append(got, out{m.Time, m.Stream, string(m.Line), m.Context, m.GroupStart})
		return nil
	}, func(err error) { t.Errorf("block error: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	return got, n
}

var planQueries = []string{
	`{s=~".+"}`,
	`{s="1"}`,
	`{s=~"0|2"}`,
	`{s="9"}`,
	`{s=~".+"} |= "error"`,
	`{s="1"} |= "error"`,
	`{s=~".+", s!="1"} |~ "(?i)error"`,
	`{s=~".+"} |~ "(?i)timeout"`,
	`{s=~".+"} |= "error" |= "timeout" |= "ab"`,
	`{s=~".+"} |= "id=" |= "warn" != "ERROR"`,
	`{s=~".+"} |= "error" or "warn"`,
	`{s=~".+"} |= "Err" or "\x00" or "timeout"`,
	`{s=~".+"} != "a"`,
	`{s=~".+"} != "a" or "e"`,
	`{s=~".+"} |~ "err(or|xx)"`,
	`{s=~".+"} |~ "^a"`,
	`{s=~".+"} |~ "a$"`,
	`{s=~".+"} !~ "a|b"`,
	`{s=~"0|2"} |~ "(?i)err" != "ERROR"`,
	`{s=~".+"} |~ "id=.*timeout"`,
	`{s=~".+"} |~ "(?i)warn|timeout"`,
	`{s=~".+"} |~ "e.r"`,
	`{s=~".+"} |~ "\n"`,
	`{s=~".+"} |= "\xff"`,
	`{s=~".+"} |= ""`,
	`{s=~".+"} |~ ""`,
	`{s=~".+"} |= "rror\nw"`,
	`{s=~".+"} | logfmt | id="timeout"`,
	`{s=~".+"} |= "id=" | logfmt | id=~"warn.*"`,
	`{s=~".+"} | json | __error__="JSONParserErr" |= "ab"`,
	`{s=~".+"} | s="2"`,
	`{s=~".+"} |= "zzz"`,
	`{s=~".+"} |~ "(?i)Ab" |= "a" |~ "b"`,
}

// TestPlanOracle compares Run with a plan against the brute-force oracle
// for every query in planQueries, in both orders, with limits, context,
// time ranges and counting.
func TestPlanOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, streams := range []int{1, 3} {
		es := genLog(r, 2500, streams)
		snap := build(t, es, 90)
		for _, src := range planQueries {
			p := mustPlan(t, src)
			for _, order := range []Order{Oldest, Newest} {
				for _, c := range []struct {
					lim           int64
					before, after int
					since, until  int64
				}{
					{0, 0, 0, 0, 0}, {1, 0, 0, 0, 0}, {13, 0, 0, 200, 500},
					{0, 2, 0, 0, 0}, {0, 0, 3, 0, 0}, {0, 1, 1, 100, 300}, {0, 40, 0, 0, 0}, {3, 1, 2, 0, 0},
				} {
					q := Query{Plan: p, Labels: snap.Labels, Order: order, Limit: c.lim,
						Before: c.before, After: c.after, Since: c.since, Until: c.until, Workers: 1 + int(c.lim%3)}
					want, wn := planOracle(t, snap, es, q, streams)
					got, n := collectOut(t, snap, q)
					if c.before == 0 && c.after == 0 {
						for i := range want {
							want[i].group = false
						}
					}
					if fmt.Sprint(got) != fmt.Sprint(want) || n != wn {
						t.Fatalf("streams %d %s order %d %+v: got %d entries (n %d), want %d (n %d)\n got %v\nwant %v",
							streams, src, order, c, len(got), n, len(want), wn, head(got), head(want))
					}
					q.Count = true
					q.Order = Oldest
					if _, n := collectOut(t, snap, q); n != wn {
						t.Fatalf("count %s %+v: %d, want %d", src, c, n, wn)
					}
				}
			}
		}
	}
}

func head(o []out) []out { return o[:min(len(o), 12)] }

// TestContextLimit checks the trailing After context after a limit on one
// stream: the next entries of the stream, matches included, as grep -m.
func TestContextLimit(t *testing.T) {
	es := []entry{{1, 0, "a1"}, {2, 0, "b2"}, {3, 0, "a3"}, {4, 0, "b4"}, {5, 0, "b5"}, {6, 0, "a6"}}
	snap := build(t, es, 0)
	p := mustPlan(t, `{s="0"} |= "a"`)
	lines := func(q Query) string {
		got, _ := collectOut(t, snap, q)
		var s []string
		for _, o := range got {
			if o.group && len(s) > 0 {
				s = append(s, "--")
			}
			s = append(s, o.line)
		}
		return fmt.Sprint(s)
	}
	for _, c := range []struct {
		q    Query
		want string
	}{
		{Query{Limit: 1, After: 2}, "[a1 b2 a3]"},
		{Query{Limit: 2, After: 3}, "[a1 b2 a3 b4 b5 a6]"},
		{Query{Limit: 1, After: 1, Before: 1}, "[a1 b2]"},
		{Query{Before: 1}, "[a1 b2 a3 -- b5 a6]"},
		{Query{After: 1}, "[a1 b2 a3 b4 -- a6]"},
		{Query{Order: Newest, After: 1}, "[a6 -- b4 a3 b2 a1]"},
		{Query{Order: Newest, Before: 1}, "[a6 b5 -- a3 b2 a1]"},
		{Query{Order: Newest, Limit: 1, Before: 2}, "[a6 b5 b4]"},
	} {
		c.q.Plan, c.q.Labels = p, snap.Labels
		if got := lines(c.q); got != c.want {
			t.Errorf("%+v: got %s, want %s", c.q, got, c.want)
		}
	}
}

// TestNewestIsReverse: without a limit, Newest delivers Oldest's entries
// backwards.
func TestNewestIsReverse(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	es := genLog(r, 2000, 3)
	snap := build(t, es, 50)
	for _, src := range []string{`{s=~".+"} |= "e"`, `{s=~".+"}`, `{s=~".+", s!="0"} |~ "a|E"`} {
		p := mustPlan(t, src)
		for _, ctx := range []int{0, 2} {
			old, _ := collectOut(t, snap, Query{Plan: p, Labels: snap.Labels, Before: ctx, After: 1})
			nw, _ := collectOut(t, snap, Query{Plan: p, Labels: snap.Labels, Before: ctx, After: 1, Order: Newest})
			for i := range old {
				old[i].group, nw[i].group = false, false
			}
			slices.Reverse(nw)
			if fmt.Sprint(old) != fmt.Sprint(nw) {
				t.Fatalf("%s: newest is not oldest reversed", src)
			}
		}
	}
}

// TestHist: bucket sums equal the count, and each bucket holds exactly
// the matches in its time range.
func TestHist(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	es := genLog(r, 3000, 3)
	snap := build(t, es, 100)
	for _, src := range []string{`{s=~".+"} |= "error"`, `{s="2"}`, `{s=~".+"} != "a"`} {
		p := mustPlan(t, src)
		q := Query{Plan: p, Labels: snap.Labels}
		lo, hi, ok := TimeRange(snap.Parts, q)
		if !ok {
			t.Fatal("no range")
		}
		b := ChooseBuckets(lo*1e9, hi*1e9, 60) // times in the test are small: scale
		b = Buckets{Start: b.Start / 1e9, Width: max(1, b.Width/1e9), N: b.N}
		b.N = int((hi-b.Start)/b.Width) + 1
		counts, err := Hist(context.Background(), snap.Parts, q, b, func(err error) { t.Error(err) })
		if err != nil {
			t.Fatal(err)
		}
		want := make([]int64, b.N)
		var total int64
		for s := range 3 {
			ls := labelsOf(t, snap, uint32(s))
			if !p.MatchStream(ls) {
				continue
			}
			for _, e := range es {
				if int(e.stream) == s && p.MatchEntry(ls, []byte(e.line)) {
					want[(e.time-b.Start)/b.Width]++
					total++
				}
			}
		}
		if fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Fatalf("%s: hist %v, want %v", src, counts, want)
		}
		q.Count = true
		if _, n := collectOut(t, snap, q); n != total {
			t.Fatalf("count %d, hist total %d", n, total)
		}
	}
}

func TestChooseBuckets(t *testing.T) {
	const s, m, h, d = int64(1e9), int64(60e9), int64(3600e9), int64(86400e9)
	for _, c := range []struct {
		lo, hi int64
		width  int64
	}{
		{0, 0, s}, {0, 59 * s, s}, {0, 60 * s, 5 * s}, {0, 10 * m, 30 * s}, {0, h - s, m},
		{0, 24 * h, 30 * m}, {0, 7 * d, 3 * h}, {0, 365 * d, 7 * d}, {0, 10000 * d, 180 * d},
		{-90 * s, 30 * s, 5 * s},
	} {
		b := ChooseBuckets(c.lo, c.hi, 60)
		if b.Width != c.width || b.N > 60 || b.Start > c.lo || b.Start+int64(b.N)*b.Width <= c.hi || b.Start%b.Width != 0 {
			t.Errorf("ChooseBuckets(%d, %d) = %+v, want width %d covering the range", c.lo, c.hi, b, c.width)
		}
	}
}

// skipPart wraps a part with an exact skip index (computed by reading the
// block) and counts block reads.
type skipPart struct {
	store.Part
	reads *atomic.Int64
	asked *atomic.Int64
}

func (p skipPart) ReadBlock(i int, dst *segment.Block) error {
	p.reads.Add(1)
	return p.Part.ReadBlock(i, dst)
}

func (p skipPart) MayContain(i int, lit []byte, fold bool) bool {
	p.asked.Add(1)
	var b segment.Block
	if err := p.Part.ReadBlock(i, &b); err != nil {
		return true
	}
	if fold {
		return bytes.Contains(bytes.ToLower(b.Data), bytes.ToLower(lit)) // over the buffer: a maybe across entries is fine
	}
	return bytes.Contains(b.Data, lit)
}

// skipCorpus is 3000 entries of 3 streams, "needle42" in 3 of them, and
// its parts as Skippers that count block reads and index questions.
func skipCorpus(t *testing.T) (snap *store.Snapshot, parts []store.Part, blocks int, reads, asked *atomic.Int64) {
	r := rand.New(rand.NewPCG(8, 8))
	es := genLog(r, 3000, 3)
	// A rare word in a few entries only.
	for _, i := range []int{5, 1700, 2900} {
		es[i].line += "needle42"
	}
	snap = build(t, es, 0)
	reads, asked = new(atomic.Int64), new(atomic.Int64)
	for _, p := range snap.Parts {
		parts = append(parts, skipPart{p, reads, asked})
		blocks += p.NumBlocks()
	}
	return snap, parts, blocks, reads, asked
}

// TestSkipIndex: with parts that implement Skipper, results are those of
// a brute-force run (NoIndex), and blocks the index rules out are not
// read, with context too (only neighbours that may hold context are).
func TestSkipIndex(t *testing.T) {
	snap, parts, blocks, reads, asked := skipCorpus(t)
	for _, c := range []struct {
		src   string
		fewer bool
	}{
		{`{s=~".+"} |= "needle42"`, true},
		{`{s=~".+"} |~ "(?i)NEEDLE42|zzzz"`, true},
		{`{s=~".+"} |= "needle42" or "error"`, false},
		{`{s=~".+"} != "needle42"`, false},
		{`{s=~".+"} |= "error" |= "needle42"`, true},
	} {
		p := mustPlan(t, c.src)
		for _, ctxN := range []int{0, 1, 3} {
			q := Query{Plan: p, Labels: snap.Labels, Before: ctxN, After: ctxN / 2}
			brute := q
			brute.NoIndex = true
			want, wn := collectOut(t, snap, brute)
			reads.Store(0)
			asked.Store(0)
			var got []out
			n, err := Run(context.Background(), parts, q, func(m *Match) error {
				got = append(got, out{m.Time, m.Stream, string(m.Line), m.Context, m.GroupStart})
				return nil
			}, func(err error) { t.Error(err) })
			if err != nil || n != wn || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s context %d: skip index changed the result: %d vs %d", c.src, ctxN, n, wn)
			}
			// With context this corpus's few large blocks are all kept as
			// neighbours; TestContextWithSkipIndex measures that case.
			if ctxN == 0 && c.fewer && reads.Load() >= int64(blocks) {
				t.Fatalf("%s: read %d of %d blocks", c.src, reads.Load(), blocks)
			}
		}
	}
	// The literal path uses it too.
	reads.Store(0)
	n, _ := Run(context.Background(), parts, Query{Pattern: []byte("NEEDLE42"), Fold: true, Count: true}, func(*Match) error { return nil }, func(error) {})
	if n != 3 || reads.Load() >= int64(blocks) {
		t.Fatalf("literal: %d matches, %d of %d blocks read", n, reads.Load(), blocks)
	}
}

// FuzzPlan runs arbitrary queries, orders, limits and context over a
// small fixed store and compares Run with the brute-force oracle.
func FuzzPlan(f *testing.F) {
	for i, src := range planQueries {
		f.Add(src, uint8(i%3), uint8(i%2), i%2 == 0, uint8(i%5))
	}
	r := rand.New(rand.NewPCG(9, 9))
	es := genLog(r, 600, 3)
	snap := build(f, es, 40)
	f.Fuzz(func(t *testing.T, src string, before, after uint8, newest bool, limit uint8) {
		pq, err := query.Parse(src)
		if err != nil {
			return
		}
		p, err := query.Compile(pq)
		if err != nil {
			return
		}
		q := Query{Plan: p, Labels: snap.Labels, Before: int(before % 4), After: int(after % 4), Limit: int64(limit % 8)}
		if newest {
			q.Order = Newest
		}
		want, wn := planOracle(t, snap, es, q, 3)
		if q.Before == 0 && q.After == 0 {
			for i := range want {
				want[i].group = false
			}
		}
		got, n := collectOut(t, snap, q)
		if fmt.Sprint(got) != fmt.Sprint(want) || n != wn {
			t.Fatalf("%s %+v: got %d entries (n %d), want %d (n %d)", src, q, len(got), n, len(want), wn)
		}
	})
}

// TestMergeDecodesOnce: merging streams that share blocks decodes each
// block about once, not once per stream, with the same results.
func TestMergeDecodesOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	es := genLog(r, 4000, 3)
	snap := build(t, es, 0)
	var reads, asked atomic.Int64
	var parts []store.Part
	blocks := 0
	for _, p := range snap.Parts {
		parts = append(parts, skipPart{p, &reads, &asked})
		blocks += p.NumBlocks()
	}
	for _, w := range []int{1, 2, 4} {
		q := Query{Plan: mustPlan(t, `{s=~".+"} |= "e"`), Labels: snap.Labels, Workers: w}
		want, wn := planOracle(t, snap, es, q, 3)
		for i := range want {
			want[i].group = false
		}
		reads.Store(0)
		var st Stats
		q.Stats = &st
		var got []out
		n, err := Run(context.Background(), parts, q, func(m *Match) error {
			got = append(got, out{m.Time, m.Stream, string(m.Line), m.Context, m.GroupStart})
			return nil
		}, func(err error) { t.Error(err) })
		if err != nil || n != wn || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("workers %d: results differ", w)
		}
		t.Logf("workers %d: %d blocks, %d reads, %d decoded", w, blocks, reads.Load(), st.Decoded)
		if reads.Load() > int64(blocks)*3/2 || st.Decoded != reads.Load() {
			t.Errorf("workers %d: %d reads (stats %d) for %d blocks", w, reads.Load(), st.Decoded, blocks)
		}
	}
}
