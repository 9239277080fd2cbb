package store

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHeadBlockStreams: a head block's stream list, kept unsorted with a
// set while it fills, is exactly the sorted distinct streams of its
// entries wherever it is read: a view of the growing head, a view while
// the head is being flushed, and a snapshot-style part.
func TestHeadBlockStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, distinct := range []int{1, 3, smallStreamSet, smallStreamSet + 1, 500} {
		h := &head{blockSize: 1 << 20}
		want := map[uint32]bool{}
		for i := range 3000 {
			id := uint32(r.IntN(distinct)) * 7 // out of order, repeated
			if i%2 == 0 {
				id = uint32(distinct-1-i%distinct) * 7
			}
			want[id] = true
			h.add(Entry{Time: int64(i), Stream: id, Line: []byte("x")})
		}
		ids := make([]uint32, 0, len(want))
		for id := range want {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		if len(h.blocks) != 1 {
			t.Fatalf("%d blocks, want 1", len(h.blocks))
		}
		got := slices.Clone(h.blocks[0].meta.Streams)
		slices.Sort(got)
		if !slices.Equal(got, ids) {
			t.Errorf("distinct %d: streams %v, want %v", distinct, got, ids)
		}
		if p := newHeadPart(h.blocks); !slices.Equal(p.BlockMeta(0).Streams, ids) {
			t.Errorf("distinct %d: part's streams %v, want sorted %v", distinct, p.BlockMeta(0).Streams, ids)
		}
		// A recycled block starts empty.
		h.recycle(h.blocks)
		h.reset()
		h.add(Entry{Time: 1, Stream: 5, Line: []byte("y")})
		if s := h.blocks[0].meta.Streams; !slices.Equal(s, []uint32{5}) {
			t.Errorf("recycled block's streams %v, want [5]", s)
		}
	}
}
