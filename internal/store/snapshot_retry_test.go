package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSnapshotRetriesWhileFilesMove: a segment the manifest lists is gone
// for a moment, as while a writer replaces files, longer than five quick
// attempts (~10 ms) take: the snapshot must wait for it and hold every
// entry, not report the segment damaged (review 15 H100-3: searches
// during a busy ingest exited 2, "store changed during the snapshot").
func TestSnapshotRetriesWhileFilesMove(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sid := st.Stream(`{app="r"}`)
	var b Batch
	for i := range 100 {
		b.Entries = append(b.Entries, Entry{Time: int64(i), Stream: sid, Line: []byte("retry me")})
	}
	if err := st.Append(&b); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	if err := os.Rename(segs[0], segs[0]+".away"); err != nil {
		t.Fatal(err)
	}
	back := make(chan error, 1)
	go func() {
		time.Sleep(150 * time.Millisecond)
		back <- os.Rename(segs[0]+".away", segs[0])
	}()
	snap, err := OpenSnapshot(dir)
	if err := <-back; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("snapshot while a segment was away for 150 ms: %v", err)
	}
	defer snap.Close()
	var entries int64
	for _, p := range snap.Parts {
		for i := range p.NumBlocks() {
			entries += int64(p.BlockMeta(i).Entries)
		}
	}
	if len(snap.Damaged) != 0 || entries != 100 {
		t.Fatalf("damaged %v, %d entries; want none damaged and 100 entries", snap.Damaged, entries)
	}
}
