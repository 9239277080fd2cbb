package store

import (
	"context"
	"errors"
	"fmt"
	"haystack/internal/testfs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// useInodes creates empty files in dir until the filesystem has only
// keep free inodes left.
func useInodes(t *testing.T, dir string, keep int) {
	t.Helper()
	k := 0
	for ; ; k++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprint("inode", k)))
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for i := range keep {
		if err := os.Remove(filepath.Join(dir, fmt.Sprint("inode", k-1-i))); err != nil {
			t.Fatal(err)
		}
	}
}

// wantNamed checks that err names the file at path (DIR/...) in full.
func wantNamed(t *testing.T, what string, err error, path string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("%s: %q does not name %s", what, err, path)
	}
}

// TestSegmentCreateErrorNamesDir: a flush or compaction that cannot
// create its segment's temp file (no inode left) names the file by its
// full path, as every other store error does (review 12, R12-2: the
// segment package was handed the bare os.Root, whose errors said "openat
// segments/0000000000000001.seg.tmp: no space left on device", naming no
// data directory). The store stays recoverable: after a reopen with
// inodes free again every entry is there.
func TestSegmentCreateErrorNamesDir(t *testing.T) {
	for _, op := range []string{"flush", "compact"} {
		t.Run(op, func(t *testing.T) {
			mnt := testfs.MountTmpfs(t, "size=8m,nr_inodes=64")
			dir := filepath.Join(mnt, "store")
			st, err := Open(dir, Options{FsyncInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			id := st.Stream(`{s="a"}`)
			var want []Entry
			for range 2 {
				es := genEntries(r, 100, id)
				want = append(want, es...)
				if err := st.Append(&Batch{Entries: es}); err != nil {
					t.Fatal(err)
				}
				if op == "compact" {
					if err := st.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := st.Sync(); err != nil {
				t.Fatal(err)
			}
			var seq uint64 = 1 // the flush's segment
			if op == "flush" {
				useInodes(t, mnt, 1) // for the next WAL file
				err = st.Flush()
			} else {
				useInodes(t, mnt, 0)
				seq = 3 // after the two flushed ones
				_, err = st.Compact(context.Background(), CompactOptions{Workers: 1})
			}
			tmp := filepath.Join(dir, segDir, fmt.Sprintf("%016x%s.tmp", seq, segExt))
			wantNamed(t, op, err, tmp)
			if !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("%s: %v is not ENOSPC", op, err)
			}
			st.Close()
			for k := 0; ; k++ {
				err := os.Remove(filepath.Join(mnt, fmt.Sprint("inode", k)))
				if errors.Is(err, os.ErrNotExist) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if st, err = Open(dir, Options{}); err != nil {
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

// TestSegmentCommitErrorNamesDir: a segment's rename into place that
// fails (a directory has its name) names both files in full, and so does
// a Writer view's open of a segment file that is gone.
func TestSegmentCommitErrorNamesDir(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	if err := st.Append(&Batch{Entries: genEntries(r, 10, st.Stream(`{s="a"}`))}); err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(dir, segDir, fmt.Sprintf("%016x%s", 1, segExt))
	if err := os.MkdirAll(filepath.Join(final, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = st.Flush()
	wantNamed(t, "flush", err, final+".tmp")
	wantNamed(t, "flush", err, final+": ") // the rename's target, in full
	st.Close()
	if err := os.RemoveAll(final); err != nil {
		t.Fatal(err)
	}

	w, err := OpenWriter(dir, WriterOptions{}) // recovers the entries, flushes them on close
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(final); err != nil {
		t.Fatal(err)
	}
	_, err = w.View()
	wantNamed(t, "view", err, final)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("view: %v is not ErrNotExist", err)
	}
	w.Close()
}

// TestSubdirNotDir: a file named wal or segments in the data directory
// is reported as "DIR/wal: not a directory" (review 12, R12-4: through
// the directory handle it was "mkdirat DIR/wal: file exists", which does
// not say what is wrong), by Open and by RepairWAL.
func TestSubdirNotDir(t *testing.T) {
	for _, sub := range []string{walDir, segDir} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, sub), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(dir, sub) + ": not a directory"
		_, err := Open(dir, Options{})
		if err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("open with %s a file: %v, want ...%s", sub, err, want)
		}
		if sub == walDir {
			_, err = RepairWAL(dir)
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("repair with %s a file: %v, want ...%s", sub, err, want)
			}
		}
	}
}
