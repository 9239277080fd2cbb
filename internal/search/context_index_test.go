package search

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"haystack/internal/segment"
	"haystack/internal/store"
)

// buildSmallBlocks writes es into a store of many small blocks: streams
// interleaved in runs (so blocks hold one stream or a few), a rare word
// at chosen entries (block edges among them).
func buildSmallBlocks(t *testing.T, es []entry) *store.Snapshot {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{HeadBytes: 16 << 10, Segment: segment.Options{BlockSize: 1 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	for s := range 3 {
		st.Stream(fmt.Sprintf(`{s="%d"}`, s))
	}
	for i := 0; i < len(es); i += 5 {
		var b store.Batch
		for _, e := range es[i:min(i+5, len(es))] {
			b.Entries = append(b.Entries, store.Entry{Time: e.time, Stream: e.stream, Line: []byte(e.line)})
		}
		if err := st.Append(&b); err != nil {
			t.Fatal(err)
		}
	}
	return closeAndSnapshot(t, st, dir)
}

// TestContextWithSkipIndex: -A/-B/-C with a needle the skip index finds
// in few blocks gives exactly the brute-force result (NoIndex) and the
// oracle's, separators included, in both orders, with limits and time
// ranges, one stream or several; and reads only a fraction of the blocks.
func TestContextWithSkipIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, streams := range []int{1, 3} {
		es := make([]entry, 3000)
		for i := range es {
			// Streams in runs of 1-40 entries, times increasing.
			s := uint32(0)
			if streams > 1 {
				s = uint32(i / (1 + i%40) % streams)
			}
			es[i] = entry{time: int64(i) * 1000, stream: s, line: fmt.Sprintf("entry %d %x", i, r.Uint64()>>40)}
		}
		// The rare word: a few lone entries, a run of adjacent ones, and
		// entries near the start and end.
		for _, i := range []int{0, 1, 500, 1111, 1112, 1113, 2047, 2048, 2998, 2999} {
			es[i].line += " rareword"
		}
		snap := buildSmallBlocks(t, es)
		blocks := 0
		for _, p := range snap.Parts {
			blocks += p.NumBlocks()
		}
		if blocks < 50 {
			t.Fatalf("%d blocks: want many small ones", blocks)
		}
		for _, src := range []string{`{s=~".+"} |= "rareword"`, `{s="0"} |= "rareword"`, `{s=~".+"} |~ "(?i)RAREWORD"`} {
			p := mustPlan(t, src)
			for _, c := range []struct {
				before, after int
				limit         int64
				since, until  int64
				order         Order
			}{
				{1, 0, 0, 0, 0, Oldest}, {0, 1, 0, 0, 0, Oldest}, {2, 2, 0, 0, 0, Oldest}, {3, 7, 0, 0, 0, Newest},
				{40, 0, 0, 0, 0, Oldest}, {0, 60, 0, 0, 0, Newest}, {5, 5, 3, 0, 0, Oldest}, {2, 3, 0, 400_000, 2_100_000, Oldest},
				{1, 1, 4, 1_000_000, 0, Newest}, {30, 30, 0, 0, 0, Oldest},
			} {
				q := Query{Plan: p, Labels: snap.Labels, Before: c.before, After: c.after, Limit: c.limit,
					Since: c.since, Until: c.until, Order: c.order}
				var st Stats
				q.Stats = &st
				got, n := collectOut(t, snap, q)
				brute := q
				brute.NoIndex, brute.Stats = true, nil
				want, wn := collectOut(t, snap, brute)
				oracle, on := planOracle(t, snap, es, brute, streams)
				if fmt.Sprint(want) != fmt.Sprint(oracle) || wn != on {
					t.Fatalf("streams %d %s %+v: brute force disagrees with the oracle", streams, src, c)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) || n != wn {
					t.Fatalf("streams %d %s %+v: with the index %d entries (n %d), brute force %d (n %d)\n got %v\nwant %v",
						streams, src, c, len(got), n, len(want), wn, head(got), head(want))
				}
				if inRange := int64(blocks) - st.PrunedTime - st.PrunedStream; c.before+c.after < 10 && st.PrunedIndex < inRange/2 {
					t.Fatalf("streams %d %s %+v: the index pruned only %d of %d blocks", streams, src, c, st.PrunedIndex, inRange)
				}
			}
		}
	}
}

// TestContextGapsAtBlockEdges: blocks of exactly 10 entries, matches at
// block edges and context that ends exactly at a block's end: where the
// index skips a block between two groups, they stay two groups ("--"), and
// nothing from before a skipped block is taken for Before context.
func TestContextGapsAtBlockEdges(t *testing.T) {
	for _, hits := range [][]int{{59, 80}, {19, 40}, {9, 30, 31}, {50, 70}, {0, 99}, {29, 50, 51, 72}} {
		es := make([]entry, 100)
		for i := range es {
			es[i] = entry{time: int64(i) * 1000, line: fmt.Sprintf("entry %02d %088d", i, 0)} // 99 bytes: 10 entries a 1000-byte block
		}
		for _, i := range hits {
			es[i].line = es[i].line[:90] + " rareword"
		}
		dir := t.TempDir()
		st, err := store.Open(dir, store.Options{Segment: segment.Options{BlockSize: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		st.Stream(`{s="0"}`)
		var b store.Batch
		for _, e := range es {
			b.Entries = append(b.Entries, store.Entry{Time: e.time, Line: []byte(e.line)})
		}
		if err := st.Append(&b); err != nil {
			t.Fatal(err)
		}
		st.Close()
		snap, err := store.OpenSnapshot(dir)
		if err != nil {
			t.Fatal(err)
		}
		if n := snap.Parts[0].NumBlocks(); n != 10 {
			t.Fatalf("%d blocks, want 10 of 10 entries", n)
		}
		p := mustPlan(t, `{s="0"} |= "rareword"`)
		for _, before := range []int{0, 1, 9, 10, 11} {
			for _, after := range []int{0, 1, 9, 10, 11} {
				for _, order := range []Order{Oldest, Newest} {
					if before == 0 && after == 0 {
						continue
					}
					q := Query{Plan: p, Labels: snap.Labels, Before: before, After: after, Order: order}
					got, n := collectOut(t, snap, q)
					q.NoIndex = true
					want, wn := collectOut(t, snap, q)
					oracle, on := planOracle(t, snap, es, q, 1)
					if fmt.Sprint(want) != fmt.Sprint(oracle) || wn != on {
						t.Fatalf("hits %v -B %d -A %d order %d: brute force disagrees with the oracle", hits, before, after, order)
					}
					if fmt.Sprint(got) != fmt.Sprint(want) || n != wn {
						t.Fatalf("hits %v -B %d -A %d order %d:\n got %v\nwant %v", hits, before, after, order, got, want)
					}
				}
			}
		}
		snap.Close()
	}
}

// TestContextPartialBlockNoGap: a block partly outside the time range
// whose entries of the stream all lie outside it is no gap in that stream:
// the groups on either side join, as without the index.
func TestContextPartialBlockNoGap(t *testing.T) {
	es := make([]entry, 100)
	for i := range es {
		es[i] = entry{time: int64(i) * 1000, line: fmt.Sprintf("entry %02d %088d", i, 0)}
		if 70 <= i && i < 75 {
			es[i].stream = 1
		}
		if 75 <= i && i < 80 {
			es[i].time = 1e12 // stream 0, far outside --until
		}
	}
	for _, i := range []int{59, 80} {
		es[i].line = es[i].line[:90] + " rareword"
	}
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{Segment: segment.Options{BlockSize: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	st.Stream(`{s="0"}`)
	st.Stream(`{s="1"}`)
	var b store.Batch
	for _, e := range es {
		b.Entries = append(b.Entries, store.Entry{Time: e.time, Stream: e.stream, Line: []byte(e.line)})
	}
	if err := st.Append(&b); err != nil {
		t.Fatal(err)
	}
	st.Close()
	snap, err := store.OpenSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	q := Query{Plan: mustPlan(t, `{s="0"} |= "rareword"`), Labels: snap.Labels, After: 10, Until: 200_000}
	got, n := collectOut(t, snap, q)
	q.NoIndex = true
	want, wn := collectOut(t, snap, q)
	oracle, on := planOracle(t, snap, es, q, 2)
	if fmt.Sprint(want) != fmt.Sprint(oracle) || wn != on {
		t.Fatalf("brute force disagrees with the oracle:\n%v\n%v", want, oracle)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || n != wn {
		t.Fatalf("with the index:\n got %v\nwant %v", got, want)
	}
	if len(want) != 22 || want[11].group {
		t.Fatalf("want the two groups joined (22 entries, no separator before entry 80): %v", want)
	}
}

// TestProgress: Total is the number of block tasks and Done reaches it,
// one stream or merged streams, counting or not.
func TestProgress(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	es := make([]entry, 2000)
	for i := range es {
		es[i] = entry{time: int64(i), stream: uint32(i / 7 % 3), line: fmt.Sprintf("entry %d %x", i, r.Uint64())}
	}
	snap := buildSmallBlocks(t, es)
	for _, c := range []struct {
		src   string
		count bool
	}{{`{s=~".+"} |= "entry"`, true}, {`{s=~".+"} |= "entry"`, false}, {`{s="1"} |= "1"`, false}} {
		var pr Progress
		var st Stats
		q := Query{Plan: mustPlan(t, c.src), Labels: snap.Labels, Count: c.count, Progress: &pr, Stats: &st}
		collectOut(t, snap, q)
		if pr.Total.Load() == 0 || pr.Done.Load() != pr.Total.Load() {
			t.Fatalf("%s count %v: progress %d of %d", c.src, c.count, pr.Done.Load(), pr.Total.Load())
		}
		if c.count && pr.Total.Load() != st.Blocks-st.PrunedTime-st.PrunedStream-st.PrunedIndex {
			t.Fatalf("%s: total %d, stats %+v", c.src, pr.Total.Load(), st)
		}
	}
}
