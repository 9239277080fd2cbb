package store

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestWriterFlushIdleAndAge: a head with no entry for FlushIdle is
// flushed into a segment, and so is one that has held entries for
// FlushAge however busy; its entries stay readable, and nothing is lost
// or stored twice. Before, a tenant that pushed a little kept its head in
// memory, and its WAL to replay, until it reached HeadBytes (E5).
func TestWriterFlushIdleAndAge(t *testing.T) {
	segments := func(t *testing.T, dir string) int {
		m, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
		return len(m)
	}
	count := func(t *testing.T, w *Writer) int {
		v, err := w.View()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range v.Parts {
			for b := range p.NumBlocks() {
				n += p.BlockMeta(b).Entries
			}
		}
		return n
	}
	push := func(t *testing.T, w *Writer, i int) {
		if err := w.Append(context.Background(), []LabeledEntry{{Labels: `{a="b"}`, Time: int64(i), Line: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(t *testing.T, what string, cond func() bool) {
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	t.Run("idle", func(t *testing.T) {
		dir := t.TempDir()
		var mu sync.Mutex
		var whys []string
		w, err := OpenWriter(dir, WriterOptions{FlushIdle: 150 * time.Millisecond, FlushCheck: 20 * time.Millisecond,
			OnFlush: func(why string, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Error(err)
				}
				whys = append(whys, why)
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for i := range 3 {
			push(t, w, i)
		}
		if n := segments(t, dir); n != 0 {
			t.Fatalf("%d segments right after the pushes", n)
		}
		waitFor(t, "the idle flush", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(whys) > 0
		})
		if n := segments(t, dir); n != 1 {
			t.Errorf("%d segments after the idle flush, want 1", n)
		}
		mu.Lock()
		if len(whys) != 1 || whys[0] != "idle" {
			t.Errorf("flushes: %v", whys)
		}
		mu.Unlock()
		if n := count(t, w); n != 3 {
			t.Errorf("%d entries after the flush, want 3", n)
		}
		// An empty head is not flushed again.
		time.Sleep(300 * time.Millisecond)
		if n := segments(t, dir); n != 1 {
			t.Errorf("%d segments with an empty head", n)
		}
	})

	t.Run("age", func(t *testing.T) {
		dir := t.TempDir()
		var mu sync.Mutex
		var whys []string
		w, err := OpenWriter(dir, WriterOptions{FlushIdle: time.Hour, FlushAge: 200 * time.Millisecond, FlushCheck: 20 * time.Millisecond,
			OnFlush: func(why string, err error) {
				mu.Lock()
				defer mu.Unlock()
				whys = append(whys, why)
			}})
		if err != nil {
			t.Fatal(err)
		}
		// Busy: an entry every 10 ms, never idle.
		i := 0
		flushed := func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(whys) > 0
		}
		for !flushed() {
			push(t, w, i)
			i++
			if i > 300 {
				t.Fatal("no flush by age within 3 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		if len(whys) == 0 || whys[0] != "age" {
			t.Errorf("flushes: %v", whys)
		}
		mu.Unlock()
		if n := count(t, w); n != i {
			t.Errorf("%d entries, want %d", n, i)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := OpenSnapshot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		n := 0
		for _, p := range s.Parts {
			for b := range p.NumBlocks() {
				n += p.BlockMeta(b).Entries
			}
		}
		if n != i {
			t.Errorf("reopened: %d entries, want %d", n, i)
		}
	})
}

// TestWriterCompactsAtOpen: a Writer with background compaction compacts
// at once when it opens, not only after its first interval: hay serve
// closes idle tenants (--max-open-tenants), and a tenant reopened and
// closed again within every interval was never compacted (soak audit S4:
// 151 segments, none compacted, in 4.5 minutes).
func TestWriterCompactsAtOpen(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := st.Stream(`{a="b"}`)
	for i := range 3 {
		if err := st.Append(&Batch{Entries: []Entry{{Time: int64(i), Stream: id, Line: []byte("x")}}}); err != nil {
			t.Fatal(err)
		}
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan CompactStats, 1)
	w, err := OpenWriter(dir, WriterOptions{CompactInterval: time.Hour, OnCompact: func(cs CompactStats, err error) {
		if err != nil {
			t.Error(err)
		}
		select {
		case done <- cs:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	select {
	case cs := <-done:
		if cs.Segments != 3 {
			t.Errorf("compacted %d segments at open, want 3", cs.Segments)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no compaction within 5 s of the open (interval 1 h)")
	}
}
