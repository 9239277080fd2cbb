package segment

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestScanGrams requires scanGrams (assembly on amd64) to record exactly
// what scanGramsGo records, and to leave the cache the same, over chunks
// of every length up to 40 and a few long ones, of all byte values, of
// repetitive text (many cache hits) and against slots holding tags one
// bit off, with the cache carried across chunks as add carries it.
func TestScanGrams(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	c1, c2 := new([1 << gramCacheBits]uint16), new([1 << gramCacheBits]uint16)
	g1, g2 := uint32(0), uint32(0)
	var lens []int
	for l := range 41 {
		lens = append(lens, l)
	}
	lens = append(lens, 1000, 4097, 1<<16)
	for round := range 4 {
		for _, l := range lens {
			chunk := make([]byte, l)
			for i := range chunk {
				if round == 0 {
					chunk[i] = byte(rng.IntN(256))
				} else {
					chunk[i] = "aAbBzZ@[`{ 01"[rng.IntN(13)]
				}
			}
			if round == 3 {
				// Slots holding a tag one bit off a gram's, or its own.
				g := g1
				for _, c := range chunk {
					g = g<<8 | uint32(lowerTable[c])
					h := g * gramMul
					slot, tag := h>>(32-gramCacheBits), uint16(h)|1<<15
					c1[slot] = tag ^ uint16(1)<<rng.IntN(16) ^ uint16(rng.IntN(2))
					c2[slot] = c1[slot]
				}
			}
			cand1 := make([]uint32, l+1)
			cand2 := make([]uint32, l+1)
			var n1, n2 int
			n1, g1 = scanGramsGo(c1, cand1[:l], g1, chunk)
			n2, g2 = scanGrams(c2, cand2[:l], g2, chunk)
			if n1 != n2 || g1 != g2 || !slices.Equal(cand1[:n1], cand2[:n2]) {
				t.Fatalf("round %d, length %d: %d candidates, gram %08x; want %d, %08x", round, l, n2, g2, n1, g1)
			}
			if cand2[l] != 0 {
				t.Fatalf("length %d: wrote past the chunk's candidates", l)
			}
			if *c1 != *c2 {
				t.Fatalf("round %d, length %d: caches differ", round, l)
			}
		}
	}
}
