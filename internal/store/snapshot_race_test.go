package store

import (
	"slices"
	"testing"
)

// TestSnapshotFlushUnderReader: a flush that runs after a lock-free
// reader read the manifest and before it listed the WAL moves the WAL's
// entries into a segment that manifest does not name, and deletes their
// WAL file. The snapshot must still hold every entry once (it starts over
// with the new manifest), not silently lose that WAL file's entries.
func TestSnapshotFlushUnderReader(t *testing.T) {
	defer func() { testHookSnapshotRead = nil }()
	for _, flushes := range []int{1, 2} {
		dir := t.TempDir()
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		id := s.Stream(`{app="x"}`)
		n := 0
		var want []string
		add := func() {
			n++
			line := string(rune('a' + n))
			if err := s.Append(&Batch{Entries: []Entry{{Time: int64(n), Stream: id, Line: []byte(line)}}}); err != nil {
				t.Fatal(err)
			}
			want = append(want, line)
		}
		add()
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		add() // in the current WAL file
		calls := 0
		testHookSnapshotRead = func() {
			calls++
			if calls > flushes {
				return
			}
			if err := s.Flush(); err != nil { // its segment is not in the manifest just read
				t.Error(err)
			}
			add()
		}
		got, damaged := snapshotLines(t, dir)
		testHookSnapshotRead = nil
		if !slices.Equal(got, want) || len(damaged) > 0 {
			t.Errorf("flushes %d: snapshot holds %q (damaged %v), want %q", flushes, got, damaged, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
