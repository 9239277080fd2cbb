package store

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestVerifyLiveStore runs Verify in a loop on a store a writer appends
// to with a tiny head (a flush every few appends). STORE.md: verify "can
// run while an ingest is writing"; it must report no damage on a healthy
// store. A flush between Verify's reading MANIFEST and its listing wal/
// deletes the WAL file the old manifest starts at, and the next file's
// header (WAL format 2) records that file's length: read against the old
// manifest, that file is "missing" (it was, in 3 runs of 3, before Verify
// checked the manifest again after the WAL).
func TestVerifyLiveStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{HeadBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	id := s.Stream(`{app="x"}`)
	var stop atomic.Bool
	done := make(chan error, 1)
	go func() {
		for i := 0; !stop.Load(); i++ {
			var es []Entry
			for j := range 20 {
				es = append(es, Entry{Time: int64(i*20 + j), Stream: id, Line: fmt.Appendf(nil, "line %d %0100d", i*20+j, 0)})
			}
			if err := s.Append(&Batch{Entries: es}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	deadline := time.Now().Add(2 * time.Second)
	runs, bad := 0, 0
	for time.Now().Before(deadline) && bad == 0 {
		ps, err := Verify(dir)
		if err != nil {
			t.Fatal(err)
		}
		runs++
		for _, p := range ps {
			if p.Damage {
				bad++
				t.Errorf("verify run %d on a healthy live store: %v", runs, p)
			}
		}
	}
	stop.Store(true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Logf("%d verify runs", runs)
}
