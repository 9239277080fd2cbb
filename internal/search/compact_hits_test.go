package search

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"haystack/internal/segment"
	"haystack/internal/store"
)

// buildFileStreams writes the entries of each stream one stream after the
// other, as `hay ingest` of many files stores them: each stream's times
// start again at 0, so all streams overlap in time, and most blocks hold
// one stream (the block where one stream ends and the next begins holds
// two); stream i is {s="i",g="i%4"}. Lines are padded with up to pad
// bytes so that a stream spans several blocks.
func buildFileStreams(t testing.TB, r *rand.Rand, streams, perStream, pad, blockSize int) ([]entry, *store.Snapshot) {
	t.Helper()
	words := []string{"error", "warn", "timeout", "ok", "ok", "ok"}
	var es []entry
	for s := range streams {
		for i := range perStream {
			line := fmt.Sprintf("s%d n%d %s", s, i, words[r.IntN(len(words))])
			if r.IntN(40) == 0 {
				line += " rareword"
			}
			line += strings.Repeat("x", r.IntN(pad+1))
			es = append(es, entry{time: int64(i / 2), stream: uint32(s), line: line})
		}
	}
	return es, writeStreams(t, es, streams, store.Options{Segment: segment.Options{BlockSize: blockSize}}, 0)
}

// TestCompactHits: merging more streams than the task window, a search
// without context copies the hits of a block out of it when they are at
// most half of it (compactHits), so that each stream's run holds its hits
// and not a decoded block (finding E6). The entries delivered are the
// oracle's, in both orders, with limits, time bounds, selectors and the
// skip index, for blocks of one stream and blocks shared by two; and
// blocks are compacted (Stats.Compacted) for selective needles and not
// for one that every line holds.
func TestCompactHits(t *testing.T) {
	const streams = 9
	r := rand.New(rand.NewPCG(60, 61))
	es, snap := buildFileStreams(t, r, streams, 600, 300, 8<<10)
	single, shared := 0, 0
	for _, p := range snap.Parts {
		for bi := range p.NumBlocks() {
			switch len(p.BlockMeta(bi).Streams) {
			case 1:
				single++
			case 2:
				shared++
			}
		}
	}
	if single < 5*streams || shared < streams/2 {
		t.Fatalf("%d blocks of one stream, %d of two: want both kinds", single, shared)
	}
	last := es[len(es)-1].time
	cases := []struct {
		src, pat     string
		limit        int64
		since, until int64
		compacts     bool // when the streams selected are more than 2 × workers
		selected     int  // 0: all
	}{
		{src: `{s=~".+"} |= "rareword"`, compacts: true},
		{src: `{s=~".+"} |= "rareword"`, limit: 5, compacts: true},
		{src: `{s=~".+"} |= "error"`, limit: 40, compacts: true},
		{src: `{g=~"0|1"} |= "timeout"`, since: last / 3, until: 2 * last / 3, compacts: true, selected: 5},
		{src: `{s=~".+"} |~ "(?i)WARN|rareword"`, compacts: true},
		{src: `{s=~".+"} |= "x" != "rareword"`},
		{src: `{s=~".+"}`, limit: 300},
		{pat: "rareword", compacts: true},
		{pat: "zzz-absent"},
	}
	for _, c := range cases {
		for _, order := range []Order{Oldest, Newest} {
			for _, workers := range []int{1, 2, 4} {
				for _, noIndex := range []bool{false, true} {
					var st Stats
					q := Query{Pattern: []byte(c.pat), Limit: c.limit, Since: c.since, Until: c.until,
						Order: order, Workers: workers, NoIndex: noIndex, Stats: &st}
					if c.src != "" {
						q.Plan, q.Labels = mustPlan(t, c.src), snap.Labels
					}
					want, wn := manyOracle(t, snap, es, q, streams)
					got, n := collectOut(t, snap, q)
					if d := firstMismatch(got, want); d != "" || n != wn {
						t.Fatalf("%+v order %d workers %d noIndex %v: got %d entries (n %d), want %d (n %d): %s",
							c, order, workers, noIndex, len(got), n, len(want), wn, d)
					}
					sel := streams
					if c.selected > 0 {
						sel = c.selected
					}
					if (c.compacts && sel > 2*workers) != (st.Compacted > 0) {
						t.Fatalf("%+v order %d workers %d noIndex %v: %d blocks compacted of %d decoded",
							c, order, workers, noIndex, st.Compacted, st.Decoded)
					}
				}
			}
		}
	}
	// With context a copy keeps every entry's place but the lines of only
	// those the context walk may deliver: the hits, m either side, and
	// the first and last m of each stream in the block.
	for _, c := range []struct {
		src           string
		before, after int
		limit         int64
		since, until  int64
		noIndex       bool
	}{
		{src: `{s=~".+"} |= "rareword"`, before: 1, after: 1},
		{src: `{s=~".+"} |= "rareword"`, before: 3},
		{src: `{s=~".+"} |= "rareword"`, after: 2, limit: 4},
		{src: `{s=~".+"} |= "rareword"`, before: 2, after: 5, since: last / 4, until: last / 2},
		{src: `{s=~".+"} |= "zzz-absent"`, before: 1, after: 1, noIndex: true},
		{src: `{s=~".+"} |= "timeout"`, before: 1, after: 1, limit: 30},
	} {
		for _, order := range []Order{Oldest, Newest} {
			for _, workers := range []int{1, 4} {
				var st Stats
				q := Query{Plan: mustPlan(t, c.src), Labels: snap.Labels, Before: c.before, After: c.after, Limit: c.limit,
					Since: c.since, Until: c.until, Order: order, Workers: workers, NoIndex: c.noIndex, Stats: &st}
				want, wn := manyOracle(t, snap, es, q, streams)
				got, n := collectOut(t, snap, q)
				if d := firstMismatch(got, want); d != "" || n != wn {
					t.Fatalf("%+v order %d workers %d: got %d entries (n %d), want %d (n %d): %s",
						c, order, workers, len(got), n, len(want), wn, d)
				}
				if st.Compacted == 0 {
					t.Fatalf("%+v order %d workers %d: no block compacted of %d decoded", c, order, workers, st.Decoded)
				}
			}
		}
	}
}
