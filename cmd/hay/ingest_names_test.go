package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIngestSameBaseName: two different files with one base name would be
// one stream source=<base name>, their lines interleaved (review 15
// H100-2: -A printed the other file's line as context, -l named one
// source). hay ingest refuses them, in one run or across runs, before
// storing anything, and says how to name them; the same file by another
// path (a symlink, a moved directory), an explicit source label, and a
// re-run of a stored file still ingest.
func TestIngestSameBaseName(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a", "0.log"), filepath.Join(dir, "b", "0.log")
	for p, s := range map[string]string{
		a: "2026-11-01T00:00:01Z a1\n2026-11-01T00:00:03Z a2 NEEDLE\n",
		b: "2026-11-01T00:00:02Z b1\n2026-11-01T00:00:04Z b2\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "d")
	count := func() string {
		out, _ := hayInProcess(t, "search", "--data", data, "-c", "")
		return strings.TrimSpace(string(out))
	}
	ingest := func(args ...string) (int, string) {
		_, code, stderr := hayInProcessStderr(t, append([]string{"ingest", "--data", data}, args...)...)
		return code, stderr
	}

	// One run: refused whole, naming both files and the way out.
	if code, stderr := ingest(a, b); code == 0 || !strings.Contains(stderr, a) || !strings.Contains(stderr, b) ||
		!strings.Contains(stderr, "--stream source=NAME") || !strings.Contains(stderr, "nothing was stored") {
		t.Fatalf("ingest a/0.log b/0.log: exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(data); err == nil && count() != "0" {
		t.Fatalf("the refused run stored %s entries", count())
	}

	// The same file twice (a symlink to it) is one file.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "a"), link); err != nil {
		t.Fatal(err)
	}
	if code, stderr := ingest(a, filepath.Join(link, "0.log")); code != 0 {
		t.Fatalf("ingest a/0.log link/0.log (one file): exit %d\n%s", code, stderr)
	}
	if count() != "2" {
		t.Fatalf("%s entries after a/0.log and its symlink, want 2", count())
	}

	// A later run: b/0.log would join a/0.log's stream.
	if code, stderr := ingest(b); code == 0 || !strings.Contains(stderr, "would join the stream") || !strings.Contains(stderr, a) {
		t.Fatalf("ingest b/0.log after a/0.log: exit %d, stderr:\n%s", code, stderr)
	}
	if count() != "2" {
		t.Fatalf("the refused run stored: %s entries", count())
	}
	// Named apart, it is its own stream: -A stays in its file.
	if code, stderr := ingest("--stream", "source=b-0.log", b); code != 0 {
		t.Fatalf("ingest --stream source=b-0.log b/0.log: exit %d\n%s", code, stderr)
	}
	out, _ := hayInProcess(t, "search", "--data", data, "--no-stream", "-A", "1", "NEEDLE")
	if want := "2026-11-01T00:00:03Z a2 NEEDLE\n"; string(out) != want {
		t.Errorf("-A 1 NEEDLE printed %q, want %q (grep -h -A 1 over the files)", out, want)
	}
	lst, _ := hayInProcess(t, "search", "--data", data, "-l", "")
	if string(lst) != "0.log\nb-0.log\n" {
		t.Errorf("-l '' listed %q, want both sources", lst)
	}

	// A stored file is resumed as before, also from a moved directory.
	if err := os.WriteFile(a, []byte("2026-11-01T00:00:01Z a1\n2026-11-01T00:00:03Z a2 NEEDLE\n2026-11-01T00:00:05Z a3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(dir, "c")
	if err := os.Rename(filepath.Join(dir, "a"), moved); err != nil {
		t.Fatal(err)
	}
	if code, stderr := ingest(filepath.Join(moved, "0.log")); code != 0 {
		t.Fatalf("ingest c/0.log (a/0.log moved): exit %d\n%s", code, stderr)
	}
	if count() != "5" {
		t.Fatalf("%s entries, want 5 (a's 3 and b's 2)", count())
	}

	// A file stored under its own name does not hold the base name's
	// stream: another file of that base name is no collision (review 15d
	// F3: it was refused after following the refusal's own advice).
	data = filepath.Join(dir, "d2")
	if code, stderr := ingest("--stream", "source=b-0.log", b); code != 0 {
		t.Fatalf("ingest --stream source=b-0.log b/0.log into a new store: exit %d\n%s", code, stderr)
	}
	if code, stderr := ingest(filepath.Join(moved, "0.log")); code != 0 {
		t.Fatalf("ingest c/0.log after b/0.log was stored as b-0.log: exit %d\n%s", code, stderr)
	}
	if count() != "5" {
		t.Fatalf("%s entries in the second store, want 5", count())
	}
}
