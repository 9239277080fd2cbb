package store

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestWriterTellsIndexDamage: a Writer (hay serve's tenant) tells
// OnIndexDamage once per segment whose skip index is damaged, so that
// the server can log it: a damaged head when a View opens the segment
// (it then opens without an index, since review 14 F3), a damaged group
// of postings once a search's lookup met it, at the next View (without
// background compaction, review 15d); never twice, never for an
// undamaged segment.
func TestWriterTellsIndexDamage(t *testing.T) {
	dir := t.TempDir()
	flushedSegments(t, dir, 3, 200, func(seg, i int) []byte {
		return fmt.Appendf(nil, "segment %d line %d of the damage test", seg, i)
	})
	segs, _ := filepath.Glob(filepath.Join(dir, segDir, "*.seg"))
	if len(segs) != 3 {
		t.Fatalf("segments %v, want 3", segs)
	}
	skipOf := func(data []byte) []byte {
		ft := data[len(data)-72:]
		return data[binary.LittleEndian.Uint64(ft[24:]) : len(data)-72]
	}
	// Segment 0: its skip index's head (the lines' index length).
	d0, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	skipOf(d0)[0] ^= 0x04
	// Segment 1: every group of postings of its lines' index (after L;
	// then B, U = 0, G and the table of 12-byte entries).
	d1, err := os.ReadFile(segs[1])
	if err != nil {
		t.Fatal(err)
	}
	skip := skipOf(d1)
	l, n := binary.Uvarint(skip)
	skip = skip[n : n+int(l)]
	pos := 0
	uv := func() uint64 {
		v, n := binary.Uvarint(skip[pos:])
		pos += n
		return v
	}
	uv()
	if uv() != 0 {
		t.Fatal("unindexed blocks")
	}
	groups := int(uv()+31) / 32
	table, area := skip[pos:pos+12*groups], skip[pos+12*groups:]
	for k := range groups {
		area[binary.LittleEndian.Uint32(table[12*k+4:])] ^= 0x20
	}
	for i, d := range [][]byte{d0, d1} {
		if err := os.WriteFile(segs[i], d, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	var told []string
	w, err := OpenWriter(dir, WriterOptions{OnIndexDamage: func(seg string, err error) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, seg)
		if err == nil {
			t.Errorf("%s: told of damage without an error", seg)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	toldNow := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(told)
	}
	name := func(i int) string { return filepath.Join(segDir, filepath.Base(segs[i])) }
	v, err := w.View()
	if err != nil {
		t.Fatal(err)
	}
	if got := toldNow(); !slices.Equal(got, []string{name(0)}) {
		t.Fatalf("after the first View told %q, want the head-damaged %q", got, name(0))
	}
	// A search's lookups reach segment 1's damaged groups.
	for _, p := range v.Parts {
		sp, ok := p.(*SegmentPart)
		if !ok {
			continue
		}
		for seg := range 3 {
			for i := range 200 {
				sp.MayContain(0, fmt.Appendf(nil, "segment %d line %d", seg, i), false)
			}
		}
	}
	// The next views tell it, once (no background compaction here).
	for range 2 {
		if _, err := w.View(); err != nil {
			t.Fatal(err)
		}
	}
	if got := toldNow(); !slices.Equal(got, []string{name(0), name(1)}) {
		t.Fatalf("after lookups told %q, want %q once each (segment 2 is undamaged)", got, []string{name(0), name(1)})
	}
}
