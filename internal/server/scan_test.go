package server

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"haystack/internal/segment"
	"haystack/needle"
)

// TestScanBuffer checks the whole-buffer scan against bytes.Index per
// entry on random blocks over a tiny alphabet, so needles often span
// entry boundaries, sit at an entry's last byte, or meet empty entries.
func TestScanBuffer(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 2000 {
		var b segment.Block
		b.Offsets = []uint32{0}
		for range r.IntN(12) {
			l := r.IntN(6)
			for range l {
				b.Data = append(b.Data, "ab\n"[r.IntN(3)])
			}
			b.Offsets = append(b.Offsets, uint32(len(b.Data)))
			b.Times = append(b.Times, int64(r.IntN(3)))
			b.Streams = append(b.Streams, 0)
		}
		// Full capacity: a read past the buffer would show up as a panic.
		b.Data = b.Data[:len(b.Data):len(b.Data)]
		pat := make([]byte, 1+r.IntN(3))
		for i := range pat {
			pat[i] = "ab\n"[r.IntN(3)]
		}
		keep := func(k int) bool { return b.Times[k] != 2 }
		got := scanBuffer(&b, needle.New(pat), keep, nil)
		var want []int32
		for k := range b.Times {
			if keep(k) && bytes.Contains(b.Line(k), pat) {
				want = append(want, int32(k))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d: pattern %q in %q (offsets %v): got %v, want %v", iter, pat, b.Data, b.Offsets, got, want)
		}
	}
}

// TestTopK compares the top-k with a stable sort of everything, on random
// times with many ties, for both directions and several limits.
func TestTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := range 300 {
		n := r.IntN(3000)
		var all []hit
		for i := range n {
			all = append(all, hit{Time: int64(r.IntN(50)), Line: []byte{byte(i), byte(i >> 8)}})
		}
		for _, backward := range []bool{false, true} {
			limit := 1 + r.IntN(600)
			k := &topK{limit: limit, backward: backward}
			for i := range all {
				k.add(&all[i])
			}
			got, more := k.result()
			want := slices.Clone(all)
			slices.SortStableFunc(want, func(a, b hit) int {
				if backward {
					return int(b.Time - a.Time)
				}
				return int(a.Time - b.Time)
			})
			if more != (len(want) > limit) {
				t.Fatalf("iteration %d: more=%v with %d of limit %d", iter, more, len(want), limit)
			}
			want = want[:min(limit, len(want))]
			if len(got) != len(want) {
				t.Fatalf("iteration %d: %d hits, want %d", iter, len(got), len(want))
			}
			for i := range got {
				if got[i].Time != want[i].Time || !bytes.Equal(got[i].Line, want[i].Line) {
					t.Fatalf("iteration %d backward=%v limit %d: hit %d is %d/%x, want %d/%x", iter, backward, limit, i, got[i].Time, got[i].Line, want[i].Time, want[i].Line)
				}
			}
		}
	}
}
