package search

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testdiff"
)

// The order Run delivers (see Order in the package doc): Oldest is by
// time, ties by stream id, then by ingestion order; Newest is its exact
// reverse. A stream's entries may arrive out of time order (Loki accepts
// them within a window, hay ingest of a file whose clock goes back), and
// the order and the limit must still be exact.

// orderOracle returns the entries of es (in ingestion order) that contain
// pat and lie in since <= time < until (until 0: no bound), sorted as q's
// order delivers them and cut at limit (0: none).
func orderOracle(es []entry, pat string, since, until int64, order Order, limit int64) []entry {
	type pos struct {
		e entry
		i int
	}
	var all []pos
	for i, e := range es {
		if e.time < since || until != 0 && e.time >= until || !strings.Contains(e.line, pat) {
			continue
		}
		all = append(all, pos{e, i})
	}
	slices.SortFunc(all, func(a, b pos) int {
		return cmp.Or(cmp.Compare(a.e.time, b.e.time), cmp.Compare(a.e.stream, b.e.stream), cmp.Compare(a.i, b.i))
	})
	if order == Newest {
		slices.Reverse(all)
	}
	if limit > 0 && int64(len(all)) > limit {
		all = all[:limit]
	}
	out := make([]entry, len(all))
	for i, p := range all {
		out[i] = p.e
	}
	return out
}

// disorderShapes are ways a stream's times go backwards.
var disorderShapes = []struct {
	name string
	// gen returns the time of a stream's next entry given its previous
	// greatest time.
	gen func(r *rand.Rand, hi int64) int64
}{
	{"ordered", func(r *rand.Rand, hi int64) int64 { return hi + int64(r.IntN(3)) }},
	// Neighbours swapped: disorder within a block.
	{"near", func(r *rand.Rand, hi int64) int64 { return hi + int64(r.IntN(5)) - 2 }},
	// Now and then an entry from long ago: disorder across blocks and
	// segments.
	{"far", func(r *rand.Rand, hi int64) int64 {
		if r.IntN(40) == 0 {
			return hi - int64(r.IntN(2000))
		}
		return hi + int64(r.IntN(3))
	}},
	// Entries within a window behind the newest (Loki's out-of-order
	// window): every block overlaps its neighbours.
	{"window", func(r *rand.Rand, hi int64) int64 { return hi + 1 - int64(r.IntN(60)) }},
	// Backwards throughout: a file whose clock runs back.
	{"backwards", func(r *rand.Rand, hi int64) int64 { return hi - int64(r.IntN(3)) }},
}

// genDisorder makes n entries over streams streams, each stream's times
// shaped by gen, many equal.
func genDisorder(r *rand.Rand, n, streams int, gen func(*rand.Rand, int64) int64) []entry {
	hi := make([]int64, streams)
	for s := range hi {
		hi[s] = 100000
	}
	ws := []string{"error", "warn", "timeout", "ok", "ERROR"}
	es := make([]entry, n)
	for i := range es {
		s := r.IntN(streams)
		tm := gen(r, hi[s])
		hi[s] = max(hi[s], tm)
		es[i] = entry{time: tm, stream: uint32(s), line: fmt.Sprintf("%d %s %s", i, ws[r.IntN(len(ws))], strings.Repeat("x", r.IntN(20)))}
	}
	return es
}

// runOrdered runs q and returns what it delivered.
func runOrdered(t *testing.T, snap *store.Snapshot, q Query) []entry {
	t.Helper()
	got, n := collect(t, snap, q)
	if int64(len(got)) != n {
		t.Fatalf("Run returned %d but delivered %d", n, len(got))
	}
	return got
}

// TestOrderOutOfOrderOracle: streams whose times go backwards (within a
// block, across blocks and segments, between the segments and the head),
// searched in both orders with small limits (1, 2, one that cuts inside a
// run of equal times), must give the oracle's entries exactly.
func TestOrderOutOfOrderOracle(t *testing.T) {
	seed := uint64(20261130)
	t.Logf("seed %d", seed)
	for _, shape := range disorderShapes {
	streams:
		for _, streams := range []int{1, 3} {
			r := rand.New(rand.NewPCG(seed, uint64(streams)))
			es := genDisorder(r, 1500, streams, shape.gen)
			// Small blocks and heads: dozens of segments of a few
			// blocks each, and the last entries in the head (WAL).
			snap := writeStreams(t, es, streams, store.Options{HeadBytes: 6 << 10, Segment: segment.Options{BlockSize: 600}}, 120)
			if len(snap.Parts) < 4 {
				t.Fatalf("only %d parts", len(snap.Parts))
			}
			if _, ok := snap.Parts[len(snap.Parts)-1].(*store.HeadPart); !ok {
				t.Fatal("no head part")
			}
			for _, pat := range []string{"", "error", "o"} {
				// Stored keeps each stream's ingestion order (grep's).
				for _, lim := range []int64{0, 1, 5} {
					q := Query{Pattern: []byte(pat), Order: Stored, Limit: lim}
					want := oracle(es, q, streams)
					if got := runOrdered(t, snap, q); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("seed %d shape %s streams %d pattern %q: Stored, limit %d: %d entries differ from the oracle's %d", seed, shape.name, streams, pat, lim, len(got), len(want))
					}
				}
				for _, order := range []Order{Oldest, Newest} {
					all := orderOracle(es, pat, 0, 0, order, 0)
					// A limit that cuts between two entries of equal time.
					tie := int64(0)
					for i := 1; i < len(all); i++ {
						if all[i].time == all[i-1].time {
							tie = int64(i)
							break
						}
					}
					for _, lim := range []int64{0, 1, 2, 3, 17, tie} {
						for _, w := range []int{1, 3} {
							for _, rng := range [][2]int64{{0, 0}, {100200, 100600}} {
								q := Query{Pattern: []byte(pat), Order: order, Limit: lim, Workers: w, Since: rng[0], Until: rng[1]}
								want := orderOracle(es, pat, rng[0], rng[1], order, lim)
								got := runOrdered(t, snap, q)
								if d := testdiff.First(got, want); d >= 0 {
									t.Errorf("seed %d shape %s streams %d pattern %q order %d limit %d workers %d range %v: entry %d of %d/%d differs:\n got %v\nwant %v",
										seed, shape.name, streams, pat, order, lim, w, rng, d, len(got), len(want), testdiff.At(got, d), testdiff.At(want, d))
									continue streams // the first difference of each store is enough
								}
								q.Count = true
								if _, n := collect(t, snap, q); n != int64(len(want)) {
									t.Fatalf("seed %d shape %s: count %d, want %d", seed, shape.name, n, len(want))
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestOrderOutOfOrderManyStreams: more streams than the merge's task
// window (hits copied out of shared blocks, see compactHits) and a plan
// selecting some of them, out of order, in both orders with small limits.
func TestOrderOutOfOrderManyStreams(t *testing.T) {
	seed := uint64(20261131)
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	const streams = 12
	es := genDisorder(r, 3000, streams, disorderShapes[3].gen) // window
	snap := writeStreams(t, es, streams, store.Options{HeadBytes: 16 << 10, Segment: segment.Options{BlockSize: 1000}}, 100)
	var sel []entry // the entries {g="1"} selects
	for _, e := range es {
		if e.stream%4 == 1 {
			sel = append(sel, e)
		}
	}
	for _, order := range []Order{Oldest, Newest} {
		for _, lim := range []int64{0, 1, 2, 7, 100} {
			for _, w := range []int{1, 2} {
				q := Query{Order: order, Limit: lim, Workers: w, Pattern: []byte("o")}
				if d, got, want := diffRun(t, snap, q, orderOracle(es, "o", 0, 0, order, lim)); d >= 0 {
					t.Errorf("order %d limit %d workers %d: entry %d of %d/%d: got %v want %v", order, lim, w, d, len(got), len(want), testdiff.At(got, d), testdiff.At(want, d))
				}
				q = Query{Order: order, Limit: lim, Workers: w, Plan: mustPlan(t, `{g="1"} |= "error"`), Labels: snap.Labels}
				if d, got, want := diffRun(t, snap, q, orderOracle(sel, "error", 0, 0, order, lim)); d >= 0 {
					t.Errorf("plan, order %d limit %d workers %d: entry %d of %d/%d: got %v want %v", order, lim, w, d, len(got), len(want), testdiff.At(got, d), testdiff.At(want, d))
				}
			}
		}
	}
}

func diffRun(t *testing.T, snap *store.Snapshot, q Query, want []entry) (int, []entry, []entry) {
	t.Helper()
	got := runOrdered(t, snap, q)
	return testdiff.First(got, want), got, want
}

// TestOrderEarlyStop: over time-ordered data, Oldest and Newest with a
// limit stop after the first blocks, as Stored does: ordering by time
// must not read the store to the end.
func TestOrderEarlyStop(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, streams := range []int{1, 3} {
		es := genDisorder(r, 4000, streams, disorderShapes[0].gen) // ordered
		snap := writeStreams(t, es, streams, store.Options{HeadBytes: 16 << 10, Segment: segment.Options{BlockSize: 600}}, 0)
		for _, order := range []Order{Stored, Oldest, Newest} {
			var st Stats
			runOrdered(t, snap, Query{Order: order, Limit: 1, Workers: 1, Stats: &st})
			// One block a stream, and the task window (2 a stream).
			if st.Blocks < 100 || st.Decoded > int64(3*streams) {
				t.Errorf("streams %d order %d: decoded %d of %d blocks for limit 1", streams, order, st.Decoded, st.Blocks)
			}
		}
	}
}

// TestOrderOutOfOrderCases are small hand-made stores: one out-of-order
// entry in a block, in a later block, in a later segment and in the head.
func TestOrderOutOfOrderCases(t *testing.T) {
	mk := func(times ...int64) []entry {
		es := make([]entry, len(times))
		for i, tm := range times {
			es[i] = entry{time: tm, stream: uint32(i % 2), line: fmt.Sprintf("line%d", i)}
		}
		return es
	}
	cases := []struct {
		name      string
		es        []entry
		unflushed int
	}{
		// Stream 0 gets 10, 30, 20 (at 4, out of place in one block).
		{"in block", mk(10, 11, 30, 31, 20, 21), 0},
		{"ties", mk(5, 5, 5, 5, 4, 4, 5, 5), 0},
		// A late old entry after many blocks (100 entries a batch).
		{"across blocks", append(mk(genTimes(300, 1000)...), entry{time: 1, stream: 0, line: "late"}), 0},
		// The head holds entries older than the segments'.
		{"head older", append(mk(genTimes(300, 1000)...), mk(2, 3, 2, 3)...), 4},
	}
	for _, c := range cases {
		snap := writeStreams(t, c.es, 2, store.Options{HeadBytes: 2 << 10, Segment: segment.Options{BlockSize: 200}}, c.unflushed)
		for _, order := range []Order{Oldest, Newest} {
			for _, lim := range []int64{0, 1, 2, 3} {
				want := orderOracle(c.es, "", 0, 0, order, lim)
				got := runOrdered(t, snap, Query{Order: order, Limit: lim})
				if d := testdiff.First(got, want); d >= 0 {
					t.Errorf("%s order %d limit %d: entry %d differs: got %v want %v", c.name, order, lim, d, testdiff.At(got, d), testdiff.At(want, d))
				}
			}
		}
	}
}

func genTimes(n int, from int64) []int64 {
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = from + int64(i)
	}
	return ts
}

// BenchmarkRunOrder: Run delivering every entry (and the first 20) over
// 1 and 4 streams whose times ascend or go back within a window, in each
// order. Over ascending data Oldest and Newest must cost what Stored does.
func BenchmarkRunOrder(b *testing.B) {
	for _, shape := range []int{0, 3} { // ordered, window
		for _, streams := range []int{1, 4} {
			r := rand.New(rand.NewPCG(9, uint64(streams)))
			es := genDisorder(r, 60000, streams, disorderShapes[shape].gen)
			var raw int64
			for _, e := range es {
				raw += int64(len(e.line)) + 1
			}
			snap := writeStreams(b, es, streams, store.Options{HeadBytes: 1 << 20, Segment: segment.Options{BlockSize: 64 << 10}}, 0)
			for _, order := range []Order{Stored, Oldest, Newest} {
				for _, lim := range []int64{0, 20} {
					name := fmt.Sprintf("%s/streams=%d/order=%d/limit=%d", disorderShapes[shape].name, streams, order, lim)
					b.Run(name, func(b *testing.B) {
						b.SetBytes(raw)
						for b.Loop() {
							if _, err := Run(context.Background(), snap.Parts, Query{Order: order, Limit: lim}, func(*Match) error { return nil }, func(error) {}); err != nil {
								b.Fatal(err)
							}
						}
					})
				}
			}
		}
	}
}
