package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"haystack/internal/store"
)

// TestHelpCommand: hay help CMD prints CMD's own help (as go help build),
// and hay help of an unknown command is a usage error.
func TestHelpCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"help", "search"}, "Usage: hay search [flags]", 0},
		{[]string{"help", "ingest"}, "Standard input and\npipes are never resumed", 0},
		{[]string{"help", "bench", "push"}, "Usage: hay bench push", 0},
		{[]string{"help"}, "Run 'hay COMMAND --help'", 0},
	} {
		out, code := hayInProcess(t, c.args...)
		if code != c.code || !strings.Contains(string(out), c.want) {
			t.Errorf("hay %q: exit %d, output %q; want %d and %q", c.args, code, out, c.code, c.want)
		}
	}
	if _, code, stderr := hayInProcessStderr(t, "help", "nosuch"); code != 2 || !strings.Contains(stderr, `unknown command "nosuch"`) {
		t.Errorf("hay help nosuch: exit %d, stderr %q", code, stderr)
	}
}

// TestIngestHeadBytesSize: hay ingest --head-bytes takes a size as hay
// serve's does (32MiB was refused), and the summary says what was stored.
func TestIngestHeadBytesSize(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.log")
	if err := os.WriteFile(f, []byte(strings.Repeat("2026-11-30T10:00:00Z the same line again and again\n", 60000)), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "d")
	_, code, stderr := hayInProcessStderr(t, "ingest", "--head-bytes", "64KiB", "--data", data, f)
	if code != 0 || !strings.Contains(stderr, "x smaller than the input") {
		t.Fatalf("ingest --head-bytes 64KiB: exit %d, stderr %q", code, stderr)
	}
	segs, _ := filepath.Glob(filepath.Join(data, "segments", "*.seg"))
	if len(segs) < 3 {
		t.Errorf("--head-bytes 64KiB over 3.1 MB (batches of 1 MiB): %d segments, want the head flushed at each batch", len(segs))
	}
	if _, code, stderr := hayInProcessStderr(t, "ingest", "--data", data, f); code != 0 || !strings.Contains(stderr, "stored nothing new") {
		t.Errorf("second ingest: exit %d, stderr %q", code, stderr)
	}
	if out, code := hayInProcess(t, "search", "--data", data, "-c", "again"); code != 0 || string(out) != "60000\n" {
		t.Errorf("search -c: %q, exit %d", out, code)
	}
	if _, code, stderr := hayInProcessStderr(t, "ingest", "--head-bytes", "lots", "--data", data, f); code != 2 {
		t.Errorf("--head-bytes lots: exit %d, stderr %q", code, stderr)
	}
}

// TestVerifyCountsWAL: hay verify's summary counts the entries still in
// the write-ahead log; it said "0 entries" for a store whose entries all
// were (docs audit D14).
func TestVerifyCountsWAL(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "d")
	// Two entries in a segment (ingest flushes at its end), then three
	// in the WAL of a store left open (unflushed, as after a crash).
	f := filepath.Join(dir, "a.log")
	if err := os.WriteFile(f, []byte("2026-11-30T10:00:00Z one\n2026-11-30T10:00:01Z two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code := hayInProcess(t, "ingest", "--data", data, f); code != 0 {
		t.Fatal("ingest")
	}
	st, err := store.Open(data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := st.Stream(`{app="w"}`)
	if err := st.Append(&store.Batch{Entries: []store.Entry{{Time: 1, Stream: id, Line: []byte("a")}, {Time: 2, Stream: id, Line: []byte("b")}, {Time: 3, Stream: id, Line: []byte("c")}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	// Not closed before verify, which only reads: Close would flush.
	t.Cleanup(func() { st.Close() })
	out, code, stderr := hayInProcessStderr(t, "verify", "--data", data)
	if code != 0 || !strings.Contains(string(out), "(2 entries,") || !strings.Contains(string(out), ", 3 entries in the write-ahead log, 2 streams") {
		t.Errorf("verify: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}
