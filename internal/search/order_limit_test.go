package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"haystack/internal/segment"
	"haystack/internal/store"
	"haystack/internal/testdiff"
	"haystack/internal/testseed"
)

// The copies a time-ordered search keeps of hits it cannot deliver yet
// (cursor.detach) are bounded by its limit, not by the store: review 8,
// finding F1. There, every block of a stream began with an entry from
// long ago (a clock reset, replayed lines), so an Oldest run took every
// block before it could deliver a late entry, and held a copy of every
// hit of the store (11.7 MiB of heap for -m 1000, against 0.5 MiB in
// Stored order).

// resetEntries makes n entries over streams streams (round robin) whose
// times ascend from 1,000,000, but every 100th entry of each stream is
// early (for newest, far ahead): each block's time range covers the
// blocks after it. Times repeat tie times, so that limits cut inside
// ties.
func resetEntries(n, streams, tie int, newest bool) []entry {
	es := make([]entry, n)
	pad := strings.Repeat("x", 150)
	for i := range es {
		tm := int64(1000000 + i/tie)
		if j := i / streams; j%100 == 0 {
			tm = int64(j / 100 / tie)
			if newest {
				tm = 1<<40 - tm
			}
		}
		es[i] = entry{time: tm, stream: uint32(i % streams), line: fmt.Sprintf("%d error %s", i, pad)}
	}
	return es
}

// spreadEntries makes n entries over streams streams (round robin):
// each 100 entries of a stream span the whole time range, ascending from
// the group's number (every block covers the others), times repeating
// tie times. The first entries in time order are a few of every block:
// a run holds copies of all its blocks and keeps a small part of each,
// so the copies themselves must shrink (trim copies them again).
func spreadEntries(n, streams, tie int) []entry {
	es := make([]entry, n)
	pad := strings.Repeat("y", 150)
	for i := range es {
		j := i / streams
		es[i] = entry{time: int64(j%100*1000 + j/100/tie), stream: uint32(i % streams), line: fmt.Sprintf("%d error %s", i, pad)}
	}
	return es
}

// TestOrderLimitCopiesBounded: over stores of such streams, Oldest and
// Newest with a limit deliver the oracle's entries and hold at most about
// twice the limit's entries in copies (Stats.PeakCopied: ~5 MiB, every
// hit, before the fix), for one stream and for several: the bound holds
// across the merge's runs, not per run. Stored copies nothing.
func TestOrderLimitCopiesBounded(t *testing.T) {
	for _, shape := range []string{"reset", "spread"} {
		for _, streams := range []int{1, 4} {
			var es []entry
			var snap *store.Snapshot
			for _, order := range []Order{Oldest, Newest} {
				if shape == "reset" || es == nil { // spread serves both orders
					es = resetEntries(30000, streams, 2+streams/2, order == Newest)
					if shape == "spread" {
						es = spreadEntries(30000, streams, 2)
					}
					snap = writeStreams(t, es, streams, store.Options{HeadBytes: 4 << 20, Segment: segment.Options{BlockSize: 16 << 10}}, 0)
				}
				maxLine := 0
				for _, e := range es {
					maxLine = max(maxLine, len(e.line))
				}
				all := orderOracle(es, "error", 0, 0, order, 0)
				tie := int64(0) // a limit that cuts inside a tie of late entries
				for i := 400 * streams; i < len(all) && tie == 0; i++ {
					if all[i].time == all[i-1].time {
						tie = int64(i)
					}
				}
				if tie == 0 {
					t.Fatal("no tie to cut")
				}
				for _, lim := range []int64{1000, 333, tie, 1} {
					for _, w := range []int{1, 2} {
						var st Stats
						q := Query{Order: order, Limit: lim, Workers: w, Pattern: []byte("error"), Stats: &st}
						if d, got, want := diffRun(t, snap, q, all[:min(lim, int64(len(all)))]); d >= 0 {
							t.Fatalf("%s streams %d order %d limit %d workers %d: entry %d of %d/%d: got %v want %v", shape, streams, order, lim, w, d, len(got), len(want), testdiff.At(got, d), testdiff.At(want, d))
						}
						// Copies may keep the bytes of the hits they lost
						// (delivered or dropped) up to those of their live
						// ones, at most the limit's and each run's current
						// entry, and compactSlack: see trim.
						bound := 2*(lim+int64(streams))*int64(maxLine+20) + compactSlack
						if st.PeakCopied > bound {
							t.Errorf("%s streams %d order %d limit %d workers %d: held %d KiB of copies, more than twice the limit's entries (%d KiB)", shape, streams, order, lim, w, st.PeakCopied>>10, bound>>10)
						}
						// Dropping hits must not make a run read on to find
						// one it may deliver (run.pastCut): the first entries
						// lie in the first blocks (and the task window's).
						if lim == 1 && st.Decoded > int64(streams*(2*w+2)) {
							t.Errorf("%s streams %d order %d limit 1 workers %d: decoded %d of %d blocks", shape, streams, order, w, st.Decoded, st.Blocks)
						}
						if w == 1 {
							t.Logf("%s streams %d order %d limit %d: peak copied %d KiB (bound %d KiB), decoded %d of %d blocks", shape, streams, order, lim, st.PeakCopied>>10, bound>>10, st.Decoded, st.Blocks)
						}
					}
				}
				var st Stats
				runOrdered(t, snap, Query{Order: Stored, Limit: 1000, Pattern: []byte("error"), Stats: &st})
				if st.PeakCopied != 0 {
					t.Errorf("%s streams %d: Stored copied %d bytes", shape, streams, st.PeakCopied)
				}
			}
		}
	}
}

// TestOrderLimitTrimOracle: random stores whose blocks overlap in time
// (the disorder shapes, and clock resets that return to a few early
// times, so ties run across blocks and streams), searched in both time
// orders with limits that cut inside ties, against orderOracle. These
// are the searches whose runs drop hits they can no longer deliver
// (exec.trim): a dropped hit that the limit would have reached, or a
// current entry dropped, shows as a wrong or missing entry.
func TestOrderLimitTrimOracle(t *testing.T) {
	seed := testseed.Seed(t, "HAY_ORDERLIMIT_SEED")
	t.Logf("seed %d (HAY_ORDERLIMIT_SEED)", seed)
	shapes := append(disorderShapes[:len(disorderShapes):len(disorderShapes)], struct {
		name string
		gen  func(r *rand.Rand, hi int64) int64
	}{"reset", func(r *rand.Rand, hi int64) int64 {
		if r.IntN(8) == 0 {
			return 100000 + int64(r.IntN(3)) // back to one of a few early times
		}
		return hi + int64(r.IntN(2))
	}})
	// Under emulation (testseed.Emulated) 6 stores, each shape at least
	// once, keep the byte-order coverage; the native run writes 18.
	for iter := range testseed.Scale(18, 6) {
		r := rand.New(rand.NewPCG(seed, uint64(iter)))
		shape := shapes[iter%len(shapes)]
		streams := []int{1, 3, 9}[r.IntN(3)] // 9: more than 2×workers, hits compacted
		es := genDisorder(r, 600+r.IntN(1400), streams, shape.gen)
		snap := writeStreams(t, es, streams, store.Options{HeadBytes: int64(2+r.IntN(6)) << 10, Segment: segment.Options{BlockSize: 200 + r.IntN(600)}}, r.IntN(150))
		for range 12 {
			order := []Order{Oldest, Newest}[r.IntN(2)]
			pat := []string{"", "o", "error", "x"}[r.IntN(4)]
			var since, until int64
			if r.IntN(3) == 0 {
				since, until = 100000+int64(r.IntN(50)), 100000+int64(50+r.IntN(2000))
			}
			all := orderOracle(es, pat, since, until, order, 0)
			var ties []int64 // limits that cut between entries of one time
			for i := 1; i < len(all); i++ {
				if all[i].time == all[i-1].time {
					ties = append(ties, int64(i))
				}
			}
			lims := []int64{1, 2, int64(1 + r.IntN(200))}
			if len(ties) > 0 {
				lims = append(lims, ties[0], ties[r.IntN(len(ties))], ties[len(ties)-1])
			}
			for _, lim := range lims {
				w := 1 + r.IntN(3)
				q := Query{Order: order, Limit: lim, Workers: w, Pattern: []byte(pat), Since: since, Until: until}
				want := all[:min(lim, int64(len(all)))]
				if r.IntN(3) == 0 {
					// {g=~"1|2"}: streams 1, 2, 5, 6 ... through the index.
					q.Plan, q.Index = mustPlan(t, `{g=~"1|2"} |= "`+pat+`"`), snap.Index()
					var sel []entry
					for _, e := range es {
						if g := e.stream % 4; g == 1 || g == 2 {
							sel = append(sel, e)
						}
					}
					want = orderOracle(sel, pat, since, until, order, lim)
				}
				if d, got, want := diffRun(t, snap, q, want); d >= 0 {
					t.Fatalf("seed %d iter %d shape %s streams %d order %d limit %d workers %d pat %q range [%d,%d) plan %v: entry %d of %d/%d: got %v want %v",
						seed, iter, shape.name, streams, order, lim, w, pat, since, until, q.Plan != nil, d, len(got), len(want), testdiff.At(got, d), testdiff.At(want, d))
				}
			}
		}
	}
}

// BenchmarkRunOrderLimitCopies: -m 1000 in each order over one stream of
// 60,000 entries whose every block begins long before its other entries
// (review 8, F1; resetEntries), and over spreadEntries. Reports the peak
// bytes of copies held (copied-B) beside the time.
func BenchmarkRunOrderLimitCopies(b *testing.B) {
	for _, shape := range []string{"reset", "spread"} {
		for _, order := range []Order{Stored, Oldest, Newest} {
			es := resetEntries(60000, 1, 1, order == Newest)
			if shape == "spread" {
				es = spreadEntries(60000, 1, 1)
			}
			var raw int64
			for _, e := range es {
				raw += int64(len(e.line)) + 1
			}
			snap := writeStreams(b, es, 1, store.Options{HeadBytes: 4 << 20, Segment: segment.Options{BlockSize: 16 << 10}}, 0)
			b.Run(fmt.Sprintf("%s/order=%d", shape, order), func(b *testing.B) {
				b.SetBytes(raw)
				var st Stats
				for b.Loop() {
					if _, err := Run(context.Background(), snap.Parts, Query{Order: order, Limit: 1000, Pattern: []byte("error"), Stats: &st}, func(*Match) error { return nil }, func(error) {}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(st.PeakCopied), "copied-B")
			})
		}
	}
}
