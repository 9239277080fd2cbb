package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHasStore: a store's own files make a directory a store; a
// directory of tenant stores whose tenants are named like those files
// (directories MANIFEST, wal, wal/x.wal) does not. One push to a tenant
// named MANIFEST made hay serve take its data directory for a single
// store and refuse to start (auth audit A1).
func TestHasStore(t *testing.T) {
	mk := func(t *testing.T, dirs, files []string) string {
		root := t.TempDir()
		for _, d := range dirs {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	st := t.TempDir()
	s, err := Open(st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(&Batch{Entries: []Entry{{Time: 1, Stream: s.Stream(`{a="b"}`), Line: []byte("x")}}}); err != nil {
		t.Fatal(err)
	}
	if !HasStore(st) {
		t.Fatal("an open store with a WAL: HasStore false")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !HasStore(st) {
		t.Fatal("a closed store: HasStore false")
	}
	for _, c := range []struct {
		name        string
		dirs, files []string
		want        bool
	}{
		{"empty", nil, nil, false},
		{"manifest file", nil, []string{"MANIFEST"}, true},
		{"wal file", nil, []string{"wal/0000000000000001.wal"}, true},
		{"bare wal directory", []string{"wal"}, nil, false},
		{"tenant MANIFEST", []string{"MANIFEST/wal", "fake/wal"}, []string{"MANIFEST/MANIFEST", "fake/MANIFEST"}, false},
		{"tenant wal", []string{"wal/wal"}, []string{"wal/MANIFEST", "wal/wal/0000000000000001.wal"}, false},
		{"tenant x.wal under tenant wal", []string{"wal/x.wal"}, nil, false},
	} {
		if got := HasStore(mk(t, c.dirs, c.files)); got != c.want {
			t.Errorf("%s: HasStore %v, want %v", c.name, got, c.want)
		}
	}
}
