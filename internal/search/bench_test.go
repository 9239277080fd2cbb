package search

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"haystack/internal/query"
	"haystack/internal/segment"
	"haystack/needle"
)

// benchBlock is a decoded block of n log-like entries of about 200 bytes.
func benchBlock(n int) *segment.Block {
	r := rand.New(rand.NewPCG(1, 2))
	b := &segment.Block{Offsets: []uint32{0}}
	for i := range n {
		line := fmt.Sprintf("2026-11-30T01:02:%02d.%06dZ level=info service=api req=%016x msg=\"served /api/v1/items/%d in %dms\" user=%d",
			i%60, r.IntN(1e6), r.Uint64(), r.IntN(1e6), r.IntN(900), r.IntN(1e5))
		b.Data = append(b.Data, line...)
		b.Offsets = append(b.Offsets, uint32(len(b.Data)))
		b.Times = append(b.Times, int64(i))
		b.Streams = append(b.Streams, 0)
	}
	return b
}

// BenchmarkScanBlock measures the executor's per-block work without
// decoding: the needle over the whole buffer plus mapping hits to entries.
func BenchmarkScanBlock(b *testing.B) {
	blk := benchBlock(2000)
	for _, tc := range []struct{ name, pat string }{
		{"absent", "zqxjvw_absent"},
		{"rare", "items/4242"},
		{"every-line", "level=info"},
		{"empty", ""},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := needle.New([]byte(tc.pat))
			var hits []int32
			b.SetBytes(int64(len(blk.Data)))
			for b.Loop() {
				hits = ScanBlock(blk, s, nil, hits[:0])
			}
		})
	}
}

// BenchmarkPlanBlock measures a plan's per-block work (no decoding): the
// driving needle scan plus per-candidate confirmation, against the
// alternatives the executor could have used.
func BenchmarkPlanBlock(b *testing.B) {
	blk := benchBlock(2000)
	labels := map[uint32][]query.Label{0: {{Name: "a", Value: "b"}}}
	bench := func(b *testing.B, src string, perEntry bool) {
		p := mustPlan(b, `{a="b"} `+src)
		e := &exec{q: Query{Plan: p, Since: math.MinInt64, Until: math.MaxInt64}, labels: labels}
		if err := e.prepare(); err != nil {
			b.Fatal(err)
		}
		if perEntry {
			e.drivers, e.excl, e.stages = nil, nil, true // Plan.MatchEntry on every entry
		}
		f := filter{e: e, b: blk, timeOK: true, stream: -1}
		var sc scratch
		var hits []int32
		b.SetBytes(int64(len(blk.Data)))
		for b.Loop() {
			hits = e.scan(&f, &sc, hits[:0])
		}
	}
	for _, tc := range []struct{ name, q string }{
		{"literal", `|= "items/4242"`},
		{"fold-s", `|~ "(?i)ITEMS/4242"`}, // s: also scans for LONG S (U+017F)
		{"literal-in", `|= "in 42"`},
		{"fold-in", `|~ "(?i)IN 42"`},
		{"and3", `|= "level=info" |= "items/42" |= "in 1"`},
		{"or2-rare", `|= "items/4242" or "user=4242"`},
		{"or2-frequent", `|= "items/4" or "user=4"`},
		{"regex", `|~ "items/42[0-9]+ in"`},
		{"negative", `!= "items/4"`},
	} {
		b.Run(tc.name, func(b *testing.B) { bench(b, tc.q, false) })
		b.Run(tc.name+"/per-entry", func(b *testing.B) { bench(b, tc.q, true) })
	}
	// Three separate whole-block scans, as three `hay search -c` would do.
	b.Run("and3/separate-scans", func(b *testing.B) {
		ss := []*needle.Searcher{needle.New([]byte("level=info")), needle.New([]byte("items/42")), needle.New([]byte("in 1"))}
		var hits []int32
		b.SetBytes(int64(len(blk.Data)))
		for b.Loop() {
			for _, s := range ss {
				hits = ScanBlock(blk, s, nil, hits[:0])
			}
		}
	})
}
