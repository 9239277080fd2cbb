package server

import (
	"testing"

	"haystack/internal/segment"
	"haystack/internal/store"
)

// edgePart is a part of n blocks, block i holding one entry of stream i
// at time 0 while its index says it spans [-10, 10]: every block reaches
// past a range [1, 5], and none has an entry in it.
type edgePart struct {
	n     int
	reads int
}

func (p *edgePart) Name() string   { return "edge" }
func (p *edgePart) NumBlocks() int { return p.n }
func (p *edgePart) BlockMeta(i int) segment.BlockMeta {
	return segment.BlockMeta{MinTime: -10, MaxTime: 10, Entries: 1, Streams: []uint32{uint32(i)}}
}
func (p *edgePart) ReadBlock(i int, dst *segment.Block) error {
	p.reads++
	dst.Data, dst.Offsets = append(dst.Data[:0], 'x'), append(dst.Offsets[:0], 0, 1)
	dst.Times, dst.Streams = append(dst.Times[:0], 0), append(dst.Streams[:0], uint32(i))
	return nil
}
func (p *edgePart) MayContain(int, []byte, bool) bool { return true }

// TestPresentEdgeBudget: an exact present decodes at most maxEdgeBlocks
// blocks that reach past the range (entries pushed out of time order
// make every block do so: review 15d F2), leaves out the streams of the
// decoded ones that have no entry in the range, and counts the rest as
// the block index says.
func TestPresentEdgeBudget(t *testing.T) {
	n := maxEdgeBlocks + 50
	p := &edgePart{n: n}
	v := &store.View{Parts: []store.Part{p}, Streams: make([]store.StreamDef, n)}
	for _, all := range []bool{true, false} {
		p.reads = 0
		s := &streamSet{all: true, n: n}
		if !all {
			s = &streamSet{n: n}
			for i := range maxEdgeBlocks + 44 {
				s.ids = append(s.ids, uint32(i)) // under bulk: only their blocks are read
			}
		}
		got := s.presentIDs(v, 1, 5, 0, true)
		want := n - maxEdgeBlocks
		if !all {
			want = 44
		}
		if p.reads != min(maxEdgeBlocks, n) || len(got) != want {
			t.Fatalf("all %v: %d blocks read, %d streams present; want %d read, %d present (past the budget)", all, p.reads, len(got), maxEdgeBlocks, want)
		}
		if inexact := s.presentIDs(v, 1, 5, 0, false); len(inexact) != len(s.ids) && !all || all && len(inexact) != n {
			t.Fatalf("all %v: the block index alone gave %d streams", all, len(inexact))
		}
	}
}
