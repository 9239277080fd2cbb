package search

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"haystack/internal/segment"
	"haystack/needle"
)

// TestScanBlock checks the whole-buffer scan against bytes.Contains per
// entry on random blocks over a tiny alphabet, so needles often span
// entry boundaries, sit at an entry's last byte, or meet empty entries.
func TestScanBlock(t *testing.T) {
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
		got := ScanBlock(&b, needle.New(pat), keep, nil)
		var want []int32
		for k := range b.Times {
			if keep(k) && bytes.Contains(b.Line(k), pat) {
				want = append(want, int32(k))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d: pattern %q in %q (offsets %v): got %v, want %v", iter, pat, b.Data, b.Offsets, got, want)
		}
		// A nil keep accepts every entry.
		got = ScanBlock(&b, needle.New(pat), nil, got[:0])
		want = want[:0]
		for k := range b.Times {
			if bytes.Contains(b.Line(k), pat) {
				want = append(want, int32(k))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d, nil keep: pattern %q in %q (offsets %v): got %v, want %v", iter, pat, b.Data, b.Offsets, got, want)
		}
	}
}
