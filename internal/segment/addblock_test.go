package segment

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// addBlockCase returns random entries cut into blocks: by Add's rule
// (a block ends when the next entry would take it past bs, or when it
// reaches bs) when byRule, else anywhere.
func addBlockCase(rng *rand.Rand, bs int, byRule bool) ([]*Block, []Entry) {
	var all []Entry
	for range 1 + rng.IntN(60) {
		l := rng.IntN(120)
		if rng.IntN(20) == 0 {
			l = bs + rng.IntN(200) // longer than a block
		}
		line := make([]byte, l)
		for i := range line {
			line[i] = "aB0 =\xff"[rng.IntN(6)]
		}
		all = append(all, Entry{Time: int64(len(all)) * 1000, Stream: uint32(rng.IntN(3)), Line: line})
	}
	var blocks []*Block
	var b *Block
	fill := 0
	for _, e := range all {
		cost := len(e.Line) + 1
		end := b != nil && len(b.Times) > 0 && fill+cost > bs
		if !byRule {
			end = b != nil && rng.IntN(5) == 0
		}
		if b == nil || end {
			b = &Block{Offsets: []uint32{0}}
			blocks = append(blocks, b)
			fill = 0
		}
		b.Data = append(b.Data, e.Line...)
		b.Offsets = append(b.Offsets, uint32(len(b.Data)))
		b.Times = append(b.Times, e.Time)
		b.Streams = append(b.Streams, e.Stream)
		fill += cost
		if byRule && fill >= bs {
			b = nil
		}
	}
	return blocks, all
}

// TestAddBlock requires AddBlock of blocks cut by Add's rule to write the
// same file as Add of each entry (whether a block is written from the
// caller's buffers or, when it does not fit, entry by entry), blocks cut
// anywhere to be stored with their entries and ending where AddBlock was
// called, and the caller's buffers to be left alone.
func TestAddBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	dir := t.TempDir()
	const bs = 300
	opts := Options{BlockSize: bs}
	for trial := range 300 {
		byRule := trial%2 == 0
		blocks, all := addBlockCase(rng, bs, byRule)
		path := filepath.Join(dir, fmt.Sprint("block-", trial))
		w, err := Create(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			before := bytes.Clone(b.Data)
			if err := w.AddBlock(b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, b.Data) {
				t.Fatal("AddBlock changed the block's data")
			}
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		got, r := readAll(t, path)
		if len(got) != len(all) {
			t.Fatalf("trial %d: %d entries, want %d", trial, len(got), len(all))
		}
		for i := range got {
			if got[i].Time != all[i].Time || got[i].Stream != all[i].Stream || !bytes.Equal(got[i].Line, all[i].Line) {
				t.Fatalf("trial %d: entry %d differs", trial, i)
			}
		}
		if byRule {
			want, _ := writeSegment(t, dir, fmt.Sprint("add-", trial), all, opts)
			a, _ := os.ReadFile(want)
			b, _ := os.ReadFile(path)
			if !bytes.Equal(a, b) {
				t.Fatalf("trial %d: AddBlock wrote a different segment (%d bytes, Add %d)", trial, len(b), len(a))
			}
			continue
		}
		// Every AddBlock ended a block.
		ends := map[int]bool{}
		k := 0
		for i := range r.NumBlocks() {
			k += r.BlockMeta(i).Entries
			ends[k] = true
		}
		k = 0
		for _, b := range blocks {
			k += len(b.Times)
			if !ends[k] {
				t.Fatalf("trial %d: no block ends after entry %d", trial, k)
			}
		}
	}
}
