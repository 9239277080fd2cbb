package search

import (
	"fmt"
	"math/rand/v2"
	"testing"

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
				hits = scanBlock(blk, s, nil, hits[:0])
			}
		})
	}
}
