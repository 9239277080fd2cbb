package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The edges of the process a user meets with hay in a shell: a reader
// that goes away (| head), a full disk behind stdout, Ctrl-C and a re-run,
// two writers at once, an empty store. Each runs the real command in a
// child process (hayCommand).

// edgeRun runs hay in dir with stdin from r (nil: none) and returns stdout,
// stderr and the exit code.
func edgeRun(t *testing.T, dir string, stdin io.Reader, args ...string) (string, string, int) {
	t.Helper()
	cmd := hayCommand(args...)
	cmd.Dir, cmd.Stdin = dir, stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// edgeStore writes a generated corpus of n lines to dir/in.log, ingests it
// into dir/d and returns the file's bytes.
func edgeStore(t *testing.T, dir string, n string) []byte {
	t.Helper()
	if _, e, c := edgeRun(t, dir, nil, "gen", "--lines", n, "-o", "in.log"); c != 0 {
		t.Fatalf("gen: %s", e)
	}
	if _, e, c := edgeRun(t, dir, nil, "ingest", "--data", "d", "in.log"); c != 0 {
		t.Fatalf("ingest: %s", e)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "in.log"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestCLIEdgePipeClosed: `hay search x | head -1` ends quietly and soon
// once the reader is gone: killed by SIGPIPE (or exit 0), nothing on
// stderr, and the line the reader got is the first match.
func TestCLIEdgePipeClosed(t *testing.T) {
	dir := t.TempDir()
	raw := edgeStore(t, dir, "20000")
	for _, args := range [][]string{{"e"}, {"--order", "newest", "e"}, {"-C", "3", "e"}, {"--json", "e"}} {
		cmd := hayCommand(append([]string{"search", "--data", "d"}, args...)...)
		cmd.Dir = dir
		var errb bytes.Buffer
		cmd.Stderr = &errb
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		first, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		stdout.Close() // the reader goes away, as head -1 does
		t0 := time.Now()
		werr := cmd.Wait()
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("%q: ran %v after its reader closed the pipe", args, d)
		}
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			ws := ee.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGPIPE {
				t.Errorf("%q: %v after the reader left, want SIGPIPE or exit 0; stderr %q", args, werr, errb.String())
			}
		} else if werr != nil {
			t.Fatal(werr)
		}
		if errb.Len() > 0 {
			t.Errorf("%q: stderr %q after the reader left, want nothing", args, errb.String())
		}
		if len(args) == 1 {
			want, _, _ := strings.Cut(string(raw), "\n")
			if first != want+"\n" {
				t.Errorf("first line %q, want %q", first, want)
			}
		}
	}
}

// TestCLIEdgeWriteError: stdout on a full device is an error (exit 2,
// named on stderr), not a silent success.
func TestCLIEdgeWriteError(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full on this platform")
	}
	defer full.Close()
	dir := t.TempDir()
	edgeStore(t, dir, "2000")
	for _, args := range [][]string{{"e"}, {"-c", "e"}, {"--hist", "e"}, {"--json", "--limit", "1", "e"}} {
		cmd := hayCommand(append([]string{"search", "--data", "d"}, args...)...)
		cmd.Dir, cmd.Stdout = dir, full
		var errb bytes.Buffer
		cmd.Stderr = &errb
		cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(errb.String(), "no space left on device") {
			t.Errorf("hay search %q > /dev/full: exit %d, stderr %q; want 2 and the write error", args, code, errb.String())
		}
	}
}

// TestCLIEdgeInterruptResume: Ctrl-C during an ingest, then the same
// command again: the store holds the file exactly, once.
func TestCLIEdgeInterruptResume(t *testing.T) {
	dir := t.TempDir()
	if _, e, c := edgeRun(t, dir, nil, "gen", "--lines", "200000", "-o", "in.log"); c != 0 {
		t.Fatal(e)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "in.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := hayCommand("ingest", "--data", "d", "in.log")
	cmd.Dir = dir
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Ctrl-C once some of it is stored (the write-ahead log is searched).
	for i := 0; i < 200; i++ {
		if out, _, _ := edgeRun(t, dir, nil, "search", "--data", "d", "-c", ""); out != "" && out != "0\n" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if code != 0 && !strings.Contains(errb.String(), "interrupted") {
		t.Fatalf("interrupted ingest: exit %d, stderr %q", code, errb.String())
	}
	t.Logf("first run: exit %d (0: it finished before Ctrl-C)", code)
	// What the first run stored is a prefix of whole lines.
	out, _, _ := edgeRun(t, dir, nil, "search", "--data", "d", "")
	if !bytes.HasPrefix(raw, []byte(out)) {
		t.Fatalf("after Ctrl-C the store holds %d bytes that are not a prefix of the file", len(out))
	}
	if _, e, c := edgeRun(t, dir, nil, "ingest", "--data", "d", "in.log"); c != 0 {
		t.Fatalf("re-run: %s", e)
	}
	out, _, _ = edgeRun(t, dir, nil, "search", "--data", "d", "")
	if out != string(raw) {
		t.Fatalf("after the re-run the store holds %d bytes, the file %d (or they differ)", len(out), len(raw))
	}
}

// TestCLIEdgeTwoWriters: a second hay ingest into a data directory an
// ingest holds fails at once and says why; the first one is unharmed.
func TestCLIEdgeTwoWriters(t *testing.T) {
	dir := t.TempDir()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	first := hayCommand("ingest", "--data", "d")
	first.Dir, first.Stdin = dir, pr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	io.WriteString(pw, "from the first writer\n")
	// The first ingest holds the lock once its line is stored.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if out, _, _ := edgeRun(t, dir, nil, "search", "--data", "d", "-c", "first"); out == "1\n" {
			break
		}
		if time.Now().After(deadline) {
			pw.Close()
			first.Wait()
			t.Fatal("the first ingest's line never became searchable")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t0 := time.Now()
	_, stderr, code := edgeRun(t, dir, strings.NewReader("from the second writer\n"), "ingest", "--data", "d")
	if code == 0 || !strings.Contains(stderr, "in use by another writer") || time.Since(t0) > 5*time.Second {
		t.Errorf("second ingest: exit %d, stderr %q after %v; want a quick failure naming the other writer", code, stderr, time.Since(t0))
	}
	io.WriteString(pw, "first writer, later\n")
	pw.Close()
	if err := first.Wait(); err != nil {
		t.Fatalf("first ingest: %v", err)
	}
	out, _, _ := edgeRun(t, dir, nil, "search", "--data", "d", "")
	if out != "from the first writer\nfirst writer, later\n" {
		t.Errorf("store holds %q", out)
	}
}

// TestCLIEdgeEmptyAndMissing: an empty store matches nothing (exit 1, -c
// prints 0), a missing one is trouble (exit 2) and is not created.
func TestCLIEdgeEmptyAndMissing(t *testing.T) {
	dir := t.TempDir()
	if _, e, c := edgeRun(t, dir, strings.NewReader(""), "ingest", "--data", "d", "-"); c != 0 {
		t.Fatal(e)
	}
	for _, tc := range []struct {
		args []string
		out  string
		code int
	}{
		{[]string{"search", "--data", "d", "x"}, "", 1},
		{[]string{"search", "--data", "d", ""}, "", 1},
		{[]string{"search", "--data", "d", "-c", "x"}, "0\n", 1},
		{[]string{"search", "--data", "nope", "x"}, "", 2},
		{[]string{"search", "--data", "nope", "-c", "x"}, "", 2},
	} {
		out, stderr, code := edgeRun(t, dir, nil, tc.args...)
		if out != tc.out || code != tc.code {
			t.Errorf("hay %q: stdout %q exit %d (stderr %q), want %q exit %d", tc.args, out, code, stderr, tc.out, tc.code)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nope")); err == nil {
		t.Error("hay search --data nope created nope")
	}
}
