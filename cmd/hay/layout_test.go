package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreLayouts: hay ingest makes one store in --data, hay serve keeps
// one store per tenant in --data/<tenant>. Serving an ingest store used to
// answer every query empty and plant tenant stores inside its wal and
// segments directories; the CLI commands on a serve directory said "no
// store" with no hint, and ingest made a store over the tenants.
func TestStoreLayouts(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.log")
	if err := os.WriteFile(f, []byte("2026-11-30T10:00:00Z error one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	single := filepath.Join(dir, "single")
	if _, code := hayInProcess(t, "ingest", "--data", single, f); code != 0 {
		t.Fatalf("ingest: exit %d", code)
	}
	before := listTree(t, single)
	_, code, stderr := hayInProcessStderr(t, "serve", "--data", single, "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "is one store (as hay ingest makes), not a directory of tenant stores") {
		t.Errorf("serve of an ingest store: exit %d, stderr %q", code, stderr)
	}
	if after := listTree(t, single); after != before {
		t.Errorf("serve changed the store:\n%s\nwas\n%s", after, before)
	}

	tenants := filepath.Join(dir, "tenants")
	if err := os.MkdirAll(tenants, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(single, filepath.Join(tenants, "fake")); err != nil {
		t.Fatal(err)
	}
	before = listTree(t, tenants)
	for _, args := range [][]string{
		{"search", "-c", "error"},
		{"ingest", f},
		{"verify"},
		{"compact"},
	} {
		cmd := append([]string{args[0], "--data", tenants}, args[1:]...)
		_, code, stderr := hayInProcessStderr(t, cmd...)
		want := "hay serve's data directory, with one store per tenant (fake): give one, e.g. --data " + filepath.Join(tenants, "fake")
		if code == 0 || !strings.Contains(stderr, want) {
			t.Errorf("hay %q: exit %d, stderr %q; want an error containing %q", cmd, code, stderr, want)
		}
	}
	if after := listTree(t, tenants); after != before {
		t.Errorf("the commands changed the tenants directory:\n%s\nwas\n%s", after, before)
	}
	if out, code := hayInProcess(t, "search", "--data", filepath.Join(tenants, "fake"), "-c", "error"); code != 0 || string(out) != "1\n" {
		t.Errorf("search of the tenant's store: %q exit %d", out, code)
	}
}

// listTree lists the paths under dir, one per line.
func listTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
