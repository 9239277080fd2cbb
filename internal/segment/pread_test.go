//go:build linux

package segment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
)

// setFileBudget makes the process's budget of kept descriptors n for
// the test.
func setFileBudget(t *testing.T, n int64) {
	t.Helper()
	old := fileBudget
	fileBudget = func() int64 { return n }
	t.Cleanup(func() { fileBudget = old })
}

// openMapped opens path as a Reader past the descriptor budget: one
// that reads its blocks through the mapping.
func openMapped(t *testing.T, path string) *Reader {
	t.Helper()
	old := fileBudget
	fileBudget = func() int64 { return 0 }
	r, err := Open(path)
	fileBudget = old
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if r.file != nil {
		t.Fatal("a Reader past the descriptor budget kept its descriptor")
	}
	return r
}

// sameBlock reports how two decodings of one block differ, or "".
func sameBlock(a, b *Block) string {
	switch {
	case !bytes.Equal(a.Data, b.Data):
		return "data"
	case !slices.Equal(a.Offsets, b.Offsets):
		return "offsets"
	case !slices.Equal(a.Times, b.Times):
		return "times"
	case !slices.Equal(a.Streams, b.Streams):
		return "streams"
	case !bytes.Equal(a.AttrData, b.AttrData):
		return "metadata"
	case !slices.Equal(a.AttrOffsets, b.AttrOffsets):
		return "metadata offsets"
	}
	return ""
}

// TestReadPathsAgree reads every block of every test corpus, in every
// option set, with and without metadata, three ways: with pread from a
// kept descriptor, through the mapping (a Reader past the budget), and
// from the file's bytes in memory; all three must decode the same block,
// and the pread one must be the entries written.
func TestReadPathsAgree(t *testing.T) {
	dir := t.TempDir()
	for name, entries := range corpora() {
		for oi, opts := range optionSets() {
			path, _ := writeSegment(t, dir, fmt.Sprintf("%s-%d.seg", name, oi), entries, opts)
			got, viaFile := readAll(t, path)
			if viaFile.file == nil {
				t.Fatalf("%s options %d: Open kept no descriptor", name, oi)
			}
			equalEntries(t, got, entries)
			viaMap := openMapped(t, path)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			inMemory, err := newReader(path, raw)
			if err != nil {
				t.Fatal(err)
			}
			a, b, c := GetBlock(), GetBlock(), GetBlock()
			for i := range viaFile.NumBlocks() {
				for _, lines := range []bool{false, true} {
					read := func(r *Reader, dst *Block) error {
						if lines {
							return r.ReadBlockLines(i, dst)
						}
						return r.ReadBlock(i, dst)
					}
					if err := errors.Join(read(viaFile, a), read(viaMap, b), read(inMemory, c)); err != nil {
						t.Fatalf("%s options %d block %d: %v", name, oi, i, err)
					}
					if d := sameBlock(a, b); d != "" {
						t.Fatalf("%s options %d block %d (lines only %v): pread and the mapping differ in %s", name, oi, i, lines, d)
					}
					if d := sameBlock(a, c); d != "" {
						t.Fatalf("%s options %d block %d (lines only %v): pread and memory differ in %s", name, oi, i, lines, d)
					}
				}
			}
			PutBlock(a)
			PutBlock(b)
			PutBlock(c)
		}
	}
}

// TestPreadTruncatedSegment cuts a segment after its first block once it
// is open: reading the last block is a *CorruptError naming the file and
// the block (through the mapping the same read is a SIGBUS that kills
// the process: shown with setFileBudget(t, 0)), and the first block
// still reads.
func TestPreadTruncatedSegment(t *testing.T) {
	dir := t.TempDir()
	entries := incompressibleEntries(3000, 3)
	path, _ := writeSegment(t, dir, "t.seg", entries, Options{BlockSize: 16 << 10})
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.file == nil {
		t.Fatal("Open kept no descriptor")
	}
	last := r.NumBlocks() - 1
	if last < 2 {
		t.Fatalf("%d blocks, want at least 3", last+1)
	}
	if err := os.Truncate(path, r.blocks[1].offset); err != nil {
		t.Fatal(err)
	}
	b := GetBlock()
	defer PutBlock(b)
	err = r.ReadBlock(last, b)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != path || ce.Block != last {
		t.Fatalf("reading the cut block: %v, want a *CorruptError for %s block %d", err, path, last)
	}
	if err := r.ReadBlock(0, b); err != nil {
		t.Fatalf("block 0 before the cut: %v", err)
	}
	if got, want := string(b.Line(0)), string(entries[0].Line); got != want {
		t.Fatalf("block 0 entry 0 = %q, want %q", got, want)
	}
}

// TestKeptDescriptorBudget opens more Readers than the budget allows:
// the first ones keep their descriptors, the rest read through their
// mappings, every one reads its entries, and Close gives a descriptor
// back to the next Open.
func TestKeptDescriptorBudget(t *testing.T) {
	dir := t.TempDir()
	entries := incompressibleEntries(500, 5)
	path, _ := writeSegment(t, dir, "b.seg", entries, Options{BlockSize: 4 << 10})
	before := keptFiles.Load()
	setFileBudget(t, before+2)
	var readers []*Reader
	for range 4 {
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}
	for i, r := range readers {
		if kept := r.file != nil; kept != (i < 2) {
			t.Fatalf("reader %d kept a descriptor: %v, want %v (budget 2)", i, kept, i < 2)
		}
		b := GetBlock()
		var got []string
		for k := range r.NumBlocks() {
			if err := r.ReadBlock(k, b); err != nil {
				t.Fatal(err)
			}
			for j := range b.Len() {
				got = append(got, string(b.Line(j)))
			}
		}
		PutBlock(b)
		if len(got) != len(entries) || got[len(got)-1] != string(entries[len(entries)-1].Line) {
			t.Fatalf("reader %d read %d entries, want %d", i, len(got), len(entries))
		}
	}
	if n := keptFiles.Load() - before; n != 2 {
		t.Fatalf("%d descriptors counted, want 2", n)
	}
	if err := readers[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := readers[0].Close(); err != nil { // a second Close gives nothing back twice
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	readers = append(readers, r)
	if r.file == nil {
		t.Fatal("the descriptor a Close gave back was not kept by the next Open")
	}
	for _, r := range readers[1:] {
		r.Close()
	}
	if n := keptFiles.Load(); n != before {
		t.Fatalf("%d descriptors counted after every Close, want %d", n, before)
	}
}

// BenchmarkReadPath reads every block of a segment of the Loghub samples
// (repeated to ~30 MB of text, 512 KiB blocks as compaction writes) with
// pread from the kept descriptor and through the mapping, whose pages are
// released in batches as a scan does:
//
//	go test ./internal/segment -run='^$' -bench=ReadPath -count=6
func BenchmarkReadPath(b *testing.B) {
	one, _ := loghubEntries(b)
	var entries []Entry
	for len(entries) < 8*len(one) {
		entries = append(entries, one...)
	}
	for i := range entries {
		entries[i].Time = int64(i)
	}
	path, info := writeSegment(b, b.TempDir(), "seg", entries, Options{BlockSize: 512 << 10})
	for _, how := range []string{"pread", "mapped"} {
		b.Run(how, func(b *testing.B) {
			old := fileBudget
			if how == "mapped" {
				fileBudget = func() int64 { return 0 }
			}
			r, err := Open(path)
			fileBudget = old
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			if (r.file != nil) != (how == "pread") {
				b.Fatalf("%s: kept descriptor %v", how, r.file != nil)
			}
			blk := GetBlock()
			defer PutBlock(blk)
			b.SetBytes(info.RawBytes)
			for b.Loop() {
				for i := range r.NumBlocks() {
					if err := r.ReadBlock(i, blk); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestKeptDescriptorCollected drops Readers without Close: once they are
// collected, their descriptors are closed and given back to the budget
// (a leak would shrink it for the life of the process).
func TestKeptDescriptorCollected(t *testing.T) {
	dir := t.TempDir()
	path, _ := writeSegment(t, dir, "c.seg", incompressibleEntries(200, 9), Options{})
	before := keptFiles.Load()
	func() {
		for range 3 {
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if r.file == nil {
				t.Fatal("Open kept no descriptor")
			}
		}
	}()
	if n := keptFiles.Load() - before; n != 3 {
		t.Fatalf("%d descriptors counted, want 3", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for keptFiles.Load() != before {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors still counted after the Readers were collected", keptFiles.Load()-before)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}
