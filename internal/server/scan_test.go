package server

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

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
