package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStdoutWriteError: hay version, verify and compact with stdout on a
// full device fail, naming the write error on stderr, as hay search does
// (TestCLIEdgeWriteError); they exited 0 with nothing written, so `hay
// verify > status.txt` on a full disk reported success with an empty file
// (CLI finding F13). verify exits 2, not 1, which says damage. The same
// commands with a writable stdout succeed and print their summary.
func TestStdoutWriteError(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full on this platform")
	}
	defer full.Close()
	dir := t.TempDir()
	var in bytes.Buffer
	for i := range 300 {
		fmt.Fprintf(&in, "2026-11-30T10:%02d:%02dZ line %d\n", i/60, i%60, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.log"), in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code := hayInProcess(t, "ingest", "--data", filepath.Join(dir, "d"), filepath.Join(dir, "in.log")); code != 0 {
		t.Fatalf("ingest exit %d", code)
	}

	// run runs hay in a child process with stdout to w (nil: a buffer).
	run := func(w *os.File, args ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := hayCommand(args...)
		cmd.Dir = dir
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if w != nil {
			cmd.Stdout = w
		}
		cmd.Run()
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	for _, c := range []struct {
		args     []string
		code     int    // exit status with stdout on /dev/full
		says     string // on stderr then, besides the write error
		okPrefix string // stdout's start with a writable stdout
	}{
		{[]string{"version"}, 1, "hay version: write /dev/stdout", "haystack "},
		{[]string{"--version"}, 1, "hay: write /dev/stdout", "haystack "},
		{[]string{"--help"}, 1, "hay: write /dev/stdout", "hay: search logs like grep"},
		{[]string{}, 1, "hay: write /dev/stdout", "hay: search logs like grep"},
		{[]string{"verify", "--data", "d"}, 2, "hay verify: the store checked clean, but the summary was not written", "ok: "},
		// The first compact rewrites the store and loses its summary; the
		// second (to a buffer) finds nothing left: the work was done.
		{[]string{"compact", "--data", "d"}, 1, "hay compact: the store is compacted, but its summary was not written", "nothing to compact"},
		{[]string{"compact", "--data", "d"}, 1, "hay compact: the store is compacted, but its summary was not written", "nothing to compact"},
	} {
		_, stderr, code := run(full, c.args...)
		if code != c.code || !strings.Contains(stderr, c.says) || !strings.Contains(stderr, "no space left on device") {
			t.Errorf("hay %q > /dev/full: exit %d, stderr %q; want exit %d and %q with the write error", c.args, code, stderr, c.code, c.says)
		}
		stdout, stderr, code := run(nil, c.args...)
		if code != 0 || !strings.HasPrefix(stdout, c.okPrefix) {
			t.Errorf("hay %q: exit %d, stdout %q, stderr %q; want exit 0 and %q", c.args, code, stdout, stderr, c.okPrefix)
		}
	}
	// The store is whole after all that.
	if out, code := hayInProcess(t, "search", "--data", filepath.Join(dir, "d"), "-c", "line"); code != 0 || string(out) != "300\n" {
		t.Errorf("search -c after the commands: %q, exit %d", out, code)
	}
}

// TestVerifyTroubleStatus: hay verify exits 2 when it cannot check (no
// store at --data), 1 only for damage, 0 when clean: a mistyped --data
// exited 1, which the help says means a damaged store (CLI finding F13).
func TestVerifyTroubleStatus(t *testing.T) {
	dir := t.TempDir()
	nope := filepath.Join(dir, "nope")
	_, code, stderr := hayInProcessStderr(t, "verify", "--data", nope)
	if code != 2 || !strings.Contains(stderr, "no store") {
		t.Errorf("hay verify --data (missing): exit %d, stderr %q; want 2 and \"no store\"", code, stderr)
	}
	if _, err := os.Stat(nope); !os.IsNotExist(err) {
		t.Errorf("verify made %s: %v", nope, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.log"), []byte("2026-11-30T10:00:00Z one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(dir, "d")
	if _, code := hayInProcess(t, "ingest", "--data", d, filepath.Join(dir, "in.log")); code != 0 {
		t.Fatalf("ingest exit %d", code)
	}
	if _, code, stderr := hayInProcessStderr(t, "verify", "--data", d); code != 0 {
		t.Errorf("hay verify of a clean store: exit %d, stderr %q", code, stderr)
	}
	// Damage still exits 1: a byte of the only segment flipped.
	segs, err := filepath.Glob(filepath.Join(d, "segments", "*"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v, %v", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x10
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code, stderr := hayInProcessStderr(t, "verify", "--data", d); code != 1 || !strings.Contains(stderr, "damaged") {
		t.Errorf("hay verify of a damaged store: exit %d, stderr %q; want 1 naming the damage", code, stderr)
	}
}
