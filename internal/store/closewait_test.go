package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"haystack/internal/segment"
)

// holdFlush makes the next flush stop at step until the returned release
// is called; entered is closed once it got there.
func holdFlush(t *testing.T, step string) (entered <-chan struct{}, release func()) {
	t.Helper()
	in, out := make(chan struct{}), make(chan struct{})
	var once sync.Once
	flushHook = func(s string) {
		if s == step {
			once.Do(func() {
				close(in)
				<-out
			})
		}
	}
	var ronce sync.Once
	release = func() { ronce.Do(func() { close(out) }) }
	t.Cleanup(func() {
		release()
		flushHook = nil
	})
	return in, release
}

// closeHeld runs closeFn while a flush is held and checks that it does
// not return, and that the data directory stays locked, until release is
// called; it returns closeFn's error.
func closeHeld(t *testing.T, dir string, closeFn func() error, release func()) error {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- closeFn() }()
	// The job cannot end while it is held, so Close cannot either: this
	// wait only gives a wrong Close the time to return.
	select {
	case err := <-closed:
		release()
		t.Fatalf("close returned (%v) while its flush or compaction was still running: the lock and the directory were released under it", err)
	case <-time.After(50 * time.Millisecond):
	}
	if st, err := Open(dir, Options{}); err == nil {
		st.Close()
		release()
		t.Fatal("a second writer opened the store while the first one's flush ran")
	} else if !strings.Contains(err.Error(), "in use by another writer") {
		release()
		t.Fatalf("second open: %v, want in use by another writer", err)
	}
	release()
	return <-closed
}

// TestCloseWaitsForFlush: Close of a store with a sticky error (a WAL
// write whose cut failed) while Append's background flush runs must wait
// for that flush before it releases the lock and the directory handle
// (review 12, R12-3: it returned at once, a second writer could open the
// store, and the old flush went on writing). Whether the held flush then
// succeeds or fails, the next Open finds every entry.
func TestCloseWaitsForFlush(t *testing.T) {
	for _, fail := range []bool{false, true} {
		name := "flush-ok"
		if fail {
			name = "flush-fails"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := Open(dir, Options{HeadBytes: 8 << 10, FsyncInterval: -1, Segment: segment.Options{BlockSize: 2 << 10}})
			if err != nil {
				t.Fatal(err)
			}
			entered, release := holdFlush(t, "manifest")
			r := rand.New(rand.NewPCG(1, 2))
			id := st.Stream(`{s="a"}`)
			var want []Entry
			for st.job == nil {
				es := genEntries(r, 20, id)
				if err := st.Append(&Batch{Entries: es}); err != nil {
					t.Fatal(err)
				}
				want = append(want, es...)
			}
			<-entered
			// Entries after the rotation: in the WAL only.
			es := genEntries(r, 5, id)
			if err := st.Append(&Batch{Entries: es}); err != nil {
				t.Fatal(err)
			}
			want = append(want, es...)
			if err := st.Sync(); err != nil {
				t.Fatal(err)
			}
			if fail {
				// The held flush's manifest write fails: the temp
				// manifest's name is taken by a directory.
				if err := os.Mkdir(filepath.Join(dir, manifestName+".tmp"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			job := st.job
			sticky := errors.New("simulated: a wal write and its cut failed")
			st.err = sticky // as append sets it
			cerr := closeHeld(t, dir, st.Close, release)
			select {
			case <-job.done:
			default:
				t.Fatal("close returned before its flush ended")
			}
			if !errors.Is(cerr, sticky) {
				t.Fatalf("close: %v, want the sticky error", cerr)
			}
			if (job.err != nil) != fail {
				t.Fatalf("the held flush ended with %v", job.err)
			}
			os.Remove(filepath.Join(dir, manifestName+".tmp"))
			st, err = Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if got := allEntries(t, dir); !equalEntries(got, want) {
				t.Fatalf("%d entries after reopen, want %d", len(got), len(want))
			}
		})
	}
}

// TestWriterCloseWaitsForFlush: the same for a Writer whose fsync failed
// while a background flush (started by a commit that filled the head)
// ran: Writer.Close must wait for it.
func TestWriterCloseWaitsForFlush(t *testing.T) {
	dir := t.TempDir()
	w, err := OpenWriter(dir, WriterOptions{Options: Options{HeadBytes: 8 << 10, Segment: segment.Options{BlockSize: 2 << 10}}})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := holdFlush(t, "manifest")
	r := rand.New(rand.NewPCG(3, 4))
	var want []Entry
	for {
		es := genEntries(r, 20, 0)
		les := make([]LabeledEntry, len(es))
		for i, e := range es {
			les[i] = LabeledEntry{Labels: `{s="a"}`, Time: e.Time, Line: e.Line}
		}
		if err := w.Append(context.Background(), les); err != nil {
			t.Fatal(err)
		}
		want = append(want, es...)
		w.mu.Lock()
		started := w.s.job != nil
		w.mu.Unlock()
		if started {
			break
		}
	}
	<-entered
	fsyncErr := errors.New("simulated fsync failure")
	w.syncFn = func() error { return fsyncErr } // read by the committer after the send below
	if err := w.Append(context.Background(), []LabeledEntry{{Labels: `{s="a"}`, Time: 1, Line: []byte("x")}}); !errors.Is(err, fsyncErr) {
		t.Fatalf("append with a failing fsync: %v", err)
	}
	if err := closeHeld(t, dir, w.Close, release); !errors.Is(err, fsyncErr) {
		t.Fatalf("close: %v, want the fsync failure", err)
	}
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// The failed append's entry may or may not be stored (it reached the
	// WAL, its fsync failed): the others must be.
	got := allEntries(t, dir)
	if len(got) == len(want)+1 {
		got = got[:len(want)]
	}
	if !equalEntries(got, want) {
		t.Fatalf("%d entries after reopen, want %d", len(got), len(want))
	}
}

// TestWriterCloseWaitsForCompact: a Writer.Compact in flight writes its
// segment without the Writer's locks; Close must cancel it and wait for
// it to remove what it wrote before the lock is released.
func TestWriterCloseWaitsForCompact(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(7, 8))
	w, err := OpenWriter(dir, WriterOptions{Options: Options{HeadBytes: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		es := genEntries(r, 50, 0)
		les := make([]LabeledEntry, len(es))
		for i, e := range es {
			les[i] = LabeledEntry{Labels: `{s="a"}`, Time: e.Time, Line: e.Line}
		}
		if err := w.Append(context.Background(), les); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	entered, out := make(chan struct{}), make(chan struct{})
	var once sync.Once
	compactHook = func(s string) error {
		if s == "merging" {
			once.Do(func() {
				close(entered)
				<-out
			})
		}
		return nil
	}
	defer func() { compactHook = nil }()
	var release sync.Once
	rel := func() { release.Do(func() { close(out) }) }
	defer rel()
	compacted := make(chan error, 1)
	go func() {
		_, err := w.Compact(context.Background(), CompactOptions{Workers: 1})
		compacted <- err
	}()
	<-entered
	if err := closeHeld(t, dir, w.Close, rel); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-compacted; !errors.Is(err, context.Canceled) {
		t.Fatalf("compact in flight at close: %v, want cancelled", err)
	}
	// The cancelled compaction removed its temp file through the handle,
	// before Close released it.
	names, err := os.ReadDir(filepath.Join(dir, segDir))
	if err != nil {
		t.Fatal(err)
	}
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != len(m.Segments) || len(m.Segments) != 3 {
		t.Fatalf("%d files in segments/, manifest lists %d, want 3", len(names), len(m.Segments))
	}
}
