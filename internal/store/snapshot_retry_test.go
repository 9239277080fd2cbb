package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// flushedSegments writes a store at dir of one stream {app="r"} in segs
// segments of n entries each (entry i of segment k: time k*n+i, line
// line(k, i)), flushed and closed.
func flushedSegments(t *testing.T, dir string, segs, n int, line func(seg, i int) []byte) {
	t.Helper()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sid := st.Stream(`{app="r"}`)
	for k := range segs {
		var b Batch
		for i := range n {
			b.Entries = append(b.Entries, Entry{Time: int64(k*n + i), Stream: sid, Line: line(k, i)})
		}
		if err := st.Append(&b); err != nil {
			t.Fatal(err)
		}
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotRetriesWhileFilesMove: a segment the manifest lists is gone
// for a moment while MANIFEST keeps being replaced, as while a busy
// writer flushes and compacts, longer than five quick attempts (~10 ms)
// take: the snapshot must wait for it and hold every entry, not report
// the segment damaged (review 15 H100-3: searches during a busy ingest
// exited 2, "store changed during the snapshot").
func TestSnapshotRetriesWhileFilesMove(t *testing.T) {
	dir := t.TempDir()
	flushedSegments(t, dir, 1, 100, func(int, int) []byte { return []byte("retry me") })
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	if err := os.Rename(segs[0], segs[0]+".away"); err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	back := make(chan error, 1)
	go func() {
		// A writer at work: MANIFEST replaced (the same bytes, a new
		// file) every 10 ms, then the segment back.
		for range 15 {
			time.Sleep(10 * time.Millisecond)
			tmp := filepath.Join(dir, manifestName+".tmp")
			if err := os.WriteFile(tmp, manifest, 0o644); err != nil {
				back <- err
				return
			}
			if err := os.Rename(tmp, filepath.Join(dir, manifestName)); err != nil {
				back <- err
				return
			}
		}
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

// TestSnapshotMissingSegmentFailsFast: a segment the manifest lists is
// gone for good and nothing writes: the snapshot reports it damaged after
// a few quick attempts, not after the 2 s a moving store gets (review
// 15d F5: every search of such a store waited 2 s).
func TestSnapshotMissingSegmentFailsFast(t *testing.T) {
	dir := t.TempDir()
	flushedSegments(t, dir, 2, 50, func(int, int) []byte { return []byte("lost or kept") })
	segs, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	if len(segs) != 2 {
		t.Fatalf("segments %v, want two", segs)
	}
	if err := os.Remove(segs[0]); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	snap, err := OpenSnapshot(dir)
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("snapshot with a lost segment: %v (want the others readable, the lost one reported)", err)
	}
	defer snap.Close()
	if len(snap.Damaged) != 1 || !strings.Contains(snap.Damaged[0].Error(), filepath.Base(segs[0])) {
		t.Fatalf("damaged %v, want %s", snap.Damaged, filepath.Base(segs[0]))
	}
	if took > snapshotRetryFor/2 {
		t.Fatalf("the snapshot took %v to report a segment lost while nothing wrote", took)
	}
}
