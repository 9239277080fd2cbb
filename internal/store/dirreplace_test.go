package store

import (
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"haystack/internal/segment"
)

// replaceFixture writes a store of several segments into dir, its entries
// drawn from seed, and returns them.
func replaceFixture(t *testing.T, dir string, seed uint64) []Entry {
	t.Helper()
	st, err := Open(dir, Options{HeadBytes: 8 << 10, Segment: segment.Options{BlockSize: 2 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, seed+1))
	ids := []uint32{st.Stream(`{s="a"}`), st.Stream(`{s="b"}`)}
	var want []Entry
	for i := range 20 {
		es := genEntries(r, 20, ids[i%2])
		for k := range es {
			es[k].Time += int64(i) * 1e12
		}
		want = append(want, es...)
		if err := st.Append(&Batch{Entries: es}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// treeBytes maps each file under dir (by its path inside dir) to its
// content.
func treeBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files[rel] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkTree fails unless dir holds exactly the files of want, byte for byte.
func checkTree(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := treeBytes(t, dir)
	var diff []string
	for name, data := range want {
		if g, ok := got[name]; !ok {
			diff = append(diff, name+" removed")
		} else if g != data {
			diff = append(diff, name+" changed")
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			diff = append(diff, name+" added")
		}
	}
	slices.Sort(diff)
	if len(diff) > 0 {
		t.Fatalf("the store put in place of the renamed one was written to: %v", diff)
	}
}

// replaceDir renames dir to dir.old and copies the store other to dir,
// as an operator who swaps in another store while the writer runs; it
// returns the copy's files.
func replaceDir(t *testing.T, dir, other string) map[string]string {
	t.Helper()
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(other)); err != nil {
		t.Fatal(err)
	}
	return treeBytes(t, dir)
}

// TestFlushDirReplaced renames the data directory and puts a copy of
// another store in its place right after a flush checked that the
// directory is the store's, before it writes (the race of hay ingest's
// TestENOSPCIngestDataDirReplaced, made deterministic by flushHook). The
// flush's segment, STREAMS record, manifest and WAL removals must go to
// the renamed directory, which then holds every entry, and leave the
// other store byte for byte as it was.
func TestFlushDirReplaced(t *testing.T) {
	other := filepath.Join(t.TempDir(), "other")
	replaceFixture(t, other, 21)
	for _, step := range []string{"segment", "manifest"} {
		t.Run(step, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			st, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(5, 6))
			// New streams: the flush appends a STREAMS record.
			ids := []uint32{st.Stream(`{s="x"}`), st.Stream(`{s="y"}`), st.Stream(`{s="z"}`)}
			var want []Entry
			for i := range 6 {
				es := genEntries(r, 30, ids[i%3])
				want = append(want, es...)
				if err := st.Append(&Batch{Entries: es}); err != nil {
					t.Fatal(err)
				}
			}
			var copied map[string]string
			flushHook = func(s string) {
				if s == step && copied == nil {
					copied = replaceDir(t, dir, other)
				}
			}
			defer func() { flushHook = nil }()
			ferr := st.Flush()
			flushHook = nil
			if copied == nil {
				t.Fatal("the flush never reached step " + step)
			}
			if step == "segment" && ferr == nil {
				// The check before the manifest sees the directory
				// replaced: the flush must fail, as before.
				t.Fatal("flush into a replaced directory succeeded")
			}
			checkTree(t, dir, copied)
			old := dir + ".old"
			if step == "manifest" {
				// The flush went on in the store's own directory.
				m, err := readManifest(old)
				if err != nil {
					t.Fatal(err)
				}
				if len(m.Segments) != 1 || m.Segments[0].Entries != int64(len(want)) || len(m.Streams) != len(ids) {
					t.Fatalf("renamed directory's manifest: %d segments, %d streams", len(m.Segments), len(m.Streams))
				}
				if seqs, _ := walSeqs(old); len(seqs) != 1 {
					t.Fatalf("renamed directory's wal files %v, want the current one only", seqs)
				}
			} else {
				// The segment was written to the store's directory: an
				// unlisted one, for the next Open to delete.
				if names := segFiles(t, old); len(names) != 1 {
					t.Fatalf("renamed directory's segments %v", names)
				}
			}
			// After the failed flush Close fails too; after the whole
			// one it has nothing to flush, and removes the empty WAL file
			// from the store's directory.
			if err := st.Close(); (err == nil) != (step == "manifest") {
				t.Fatalf("close: %v", err)
			}
			checkTree(t, dir, copied)
			st, err = Open(old, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if got := allEntries(t, old); !equalEntries(got, want) {
				t.Fatalf("renamed directory: %d entries, want %d", len(got), len(want))
			}
			if ps, err := Verify(old); err != nil || len(ps) != 0 {
				t.Fatalf("verify renamed directory: %v %v", ps, err)
			}
		})
	}
}

// TestCompactDirReplaced renames the data directory and puts a copy of
// another store in its place once a compaction has written its segments:
// the manifest swap and the removal of the merged segments must happen in
// the renamed directory, not in the other store.
func TestCompactDirReplaced(t *testing.T) {
	other := filepath.Join(t.TempDir(), "other")
	replaceFixture(t, other, 31)
	dir := filepath.Join(t.TempDir(), "d")
	want := replaceFixture(t, dir, 41)
	st, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var copied map[string]string
	compactHook = func(s string) error {
		if s == "written" && copied == nil {
			copied = replaceDir(t, dir, other)
		}
		return nil
	}
	defer func() { compactHook = nil }()
	if _, err := st.Compact(context.Background(), CompactOptions{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	compactHook = nil
	if copied == nil {
		t.Fatal("no compaction")
	}
	checkTree(t, dir, copied)
	old := dir + ".old"
	m, err := readManifest(old)
	if err != nil {
		t.Fatal(err)
	}
	for _, sm := range m.Segments {
		if !sm.Compacted {
			t.Fatalf("renamed directory's manifest lists %s, not compacted", sm.Name)
		}
	}
	var listed []string
	for _, sm := range m.Segments {
		listed = append(listed, sm.Name)
	}
	if names := segFiles(t, old); !slices.Equal(names, listed) {
		t.Fatalf("renamed directory's segments %v, manifest lists %v", names, listed)
	}
	st.Close() // fails: the directory was replaced
	checkTree(t, dir, copied)
	if got := allEntries(t, old); !equalEntries(got, want) {
		t.Fatalf("renamed directory: %d entries, want %d", len(got), len(want))
	}
}

// TestSymlinkedSubdirRefused: a store whose wal/ or segments/ is a link
// to another directory is refused at Open and by RepairWAL with a message
// naming the link and saying what to do (os.Root would fail the first
// write with "path escapes from parent"); a linked data directory works.
func TestSymlinkedSubdirRefused(t *testing.T) {
	for _, sub := range []string{walDir, segDir} {
		base := t.TempDir()
		dir, elsewhere := filepath.Join(base, "data"), filepath.Join(base, "elsewhere")
		s, err := Open(dir, Options{}) // a store, then its sub moved away and linked
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, sub), elsewhere); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, filepath.Join(dir, sub)); err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(dir, sub) + " is a symbolic link"
		if s, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), want) {
			if err == nil {
				s.Close()
			}
			t.Errorf("Open with %s linked: %v, want %q", sub, err, want)
		}
		if _, err := RepairWAL(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("RepairWAL with %s linked: %v, want %q", sub, err, want)
		}
	}
	base := t.TempDir()
	real, link := filepath.Join(base, "real"), filepath.Join(base, "link")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	s, err := Open(link, Options{})
	if err != nil {
		t.Fatalf("Open of a linked data directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
