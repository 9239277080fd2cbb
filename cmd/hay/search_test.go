package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hayInProcess runs `hay args...` in this process with stdout captured;
// it returns stdout and the exit code.
func hayInProcess(t *testing.T, args ...string) ([]byte, int) {
	t.Helper()
	// Stderr (summaries, warnings) is not checked here.
	out, code, _ := hayInProcessStderr(t, args...)
	return out, code
}

// hayInProcessStderr runs `hay args...` in this process and returns
// stdout, the exit code and stderr.
func hayInProcessStderr(t *testing.T, args ...string) ([]byte, int, string) {
	t.Helper()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = out, errf
	code := runMain(args)
	os.Stdout, os.Stderr = oldOut, oldErr
	o, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	e, err := os.ReadFile(errf.Name())
	if err != nil {
		t.Fatal(err)
	}
	return o, code, string(e)
}

// grepOut runs the real grep: LC_ALL=C grep -a -F args... -- pattern file.
func grepOut(t *testing.T, pattern, file string, flags ...string) ([]byte, int) {
	t.Helper()
	return grepArgs(t, file, append(append([]string{"-F"}, flags...), "--", pattern)...)
}

// grepArgs runs LC_ALL=C grep -a args... file and returns its output and
// exit code.
func grepArgs(t *testing.T, file string, args ...string) ([]byte, int) {
	t.Helper()
	cmd := exec.Command("grep", append(append([]string{"-a"}, args...), file)...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out, code
}

// stripCR writes src with every line's trailing "\r" removed (what ingest
// stores) to a new file and returns its path.
func stripCR(t *testing.T, src string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	data = bytes.TrimSuffix(data, []byte("\r"))
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// needles samples substrings (1 to 40 bytes) of the file's lines, present
// by construction, and absent ones: mutated samples and random bytes.
func needles(r *rand.Rand, data []byte, n int) []string {
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	var out []string
	for len(out) < n {
		l := lines[r.IntN(len(lines))]
		if len(l) == 0 {
			continue
		}
		m := 1 + r.IntN(min(40, len(l)))
		i := r.IntN(len(l) - m + 1)
		s := []byte(string(l[i : i+m]))
		switch r.IntN(4) {
		case 0: // absent (almost surely): one byte changed to a rare one
			s[r.IntN(len(s))] = "~`^|#@"[r.IntN(6)]
		case 1: // mixed case, for -i
			for j := range s {
				if r.IntN(2) == 0 && s[j] >= 'a' && s[j] <= 'z' {
					s[j] -= 32
				}
			}
		}
		out = append(out, string(s))
	}
	return append(out, "", "QQQQQQQQ", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "-", "--", "-e")
}

// TestGrepEquivalence ingests each Loghub sample and checks that hay
// search prints byte for byte what grep prints on the file (CRs stripped),
// for plain, -i and -c, with the same exit status.
func TestGrepEquivalence(t *testing.T) {
	if _, err := exec.LookPath("grep"); err != nil {
		t.Skip("no grep binary")
	}
	files, err := filepath.Glob("../../testdata/loghub/*.log")
	if err != nil || len(files) == 0 {
		t.Fatalf("no loghub samples: %v", err)
	}
	r := rand.New(rand.NewPCG(4, 4))
	for _, src := range files {
		t.Run(filepath.Base(src), func(t *testing.T) {
			plain := stripCR(t, src)
			data, _ := os.ReadFile(plain)
			dir := filepath.Join(t.TempDir(), "data")
			// A small head makes several segments and leaves part of the
			// file to span a flush.
			if _, code := hayInProcess(t, "ingest", "--data", dir, "--head-bytes", "100000", src); code != 0 {
				t.Fatalf("ingest exit %d", code)
			}
			for k, nd := range needles(r, data, 40) {
				modes := [][]string{nil, {"-i"}, {"-c"}}
				if k%4 == 0 {
					modes = append(modes, []string{"-i", "-c"})
				}
				for _, mode := range modes {
					want, wcode := grepOut(t, nd, plain, mode...)
					args := append([]string{"search", "--data", dir}, mode...)
					args = append(args, "--", nd)
					got, gcode := hayInProcess(t, args...)
					if !bytes.Equal(got, want) || gcode != wcode {
						t.Fatalf("hay search %s %q: exit %d, %d bytes; grep exit %d, %d bytes\nfirst diff at line %d",
							strings.Join(mode, " "), nd, gcode, len(got), wcode, len(want), firstDiffLine(got, want))
					}
				}
			}
		})
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// TestSearchEdges: CRLF, a last line without "\n", empty lines, NUL,
// invalid UTF-8 and escape codes, compared with grep.
func TestSearchEdges(t *testing.T) {
	if _, err := exec.LookPath("grep"); err != nil {
		t.Skip("no grep binary")
	}
	raw := "a\r\n\r\n\x00b\xff\xfe\n\x1b[31mred\x1b[0m\r\nA lone \r inside\n\nlast"
	src := filepath.Join(t.TempDir(), "edge.log")
	os.WriteFile(src, []byte(raw), 0o644)
	plain := stripCR(t, src)
	dir := filepath.Join(t.TempDir(), "data")
	if _, code := hayInProcess(t, "ingest", "--data", dir, src); code != 0 {
		t.Fatal("ingest failed")
	}
	for _, nd := range []string{"", "a", "A", "\xff", "b\xff", "\x1b[", "red\x1b", "\r", " \r i", "last", "x"} {
		for _, mode := range [][]string{nil, {"-i"}, {"-c"}} {
			want, wcode := grepOut(t, nd, plain, mode...)
			args := append(append([]string{"search", "--data", dir}, mode...), "--", nd)
			got, gcode := hayInProcess(t, args...)
			if !bytes.Equal(got, want) || gcode != wcode {
				t.Fatalf("%v %q: got %q (%d), grep %q (%d)", mode, nd, got, gcode, want, wcode)
			}
		}
	}
	// --json and --limit.
	got, code := hayInProcess(t, "search", "--data", dir, "--json", "--limit", "1", "red")
	want := `"labels":{"source":"edge.log"},"line":"\u001b[31mred\u001b[0m"}` + "\n"
	if code != 0 || !bytes.HasSuffix(got, []byte(want)) || bytes.Count(got, []byte("\n")) != 1 {
		t.Fatalf("json: %q", got)
	}
	// Invalid UTF-8 in --json: U+FFFD in "line", the exact bytes in
	// "line_base64".
	got, code = hayInProcess(t, "search", "--data", dir, "--json", "--limit", "1", "b\xff")
	want = `,"line":"\u0000b\ufffd\ufffd","line_base64":"AGL//g=="}` + "\n"
	if code != 0 || !bytes.HasSuffix(got, []byte(want)) {
		t.Fatalf("json of invalid UTF-8: %q", got)
	}
	// No store, bad flags.
	if _, code := hayInProcess(t, "search", "--data", filepath.Join(dir, "nope"), "x"); code != 2 {
		t.Fatalf("missing store: exit %d, want 2 (trouble, as grep)", code)
	}
	if _, code := hayInProcess(t, "search", "--data", dir, "--since", "yesterday", "x"); code != 2 {
		t.Fatalf("bad --since: exit %d", code)
	}
}

func TestAppendEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext é": "plain\ttext é",
		"\x1b[2J":       `\x1b[2J`,
		"\xff\x00":      `\xff\x00`,
		"\u009b31m":     `\u009b31m`,
		"a\nb\r":        `a\nb\r`,
		"\x7f":          `\x7f`,
	} {
		if got := string(appendEscaped(nil, []byte(in))); got != want {
			t.Errorf("appendEscaped(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestInterruptContext: SIGINT cancels the context once the delay has
// passed, not before, and stop cancels it. The test holds its own
// signal.Notify so that no SIGINT can end the test process.
func TestInterruptContext(t *testing.T) {
	hold := make(chan os.Signal, 16)
	signal.Notify(hold, os.Interrupt)
	defer signal.Stop(hold)

	ctx, stop := interruptContext(context.Background(), time.Hour)
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-hold // delivered (to the test's channel only)
	select {
	case <-ctx.Done():
		t.Fatal("SIGINT before the delay cancelled the search")
	case <-time.After(50 * time.Millisecond):
	}
	stop()
	if ctx.Err() == nil {
		t.Fatal("stop did not cancel the context")
	}

	ctx, stop = interruptContext(context.Background(), 0)
	defer stop()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	// The handler is installed by a timer: signal until it is there.
	for ctx.Err() == nil {
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		select {
		case <-ctx.Done():
		case <-tick.C:
		case <-deadline:
			t.Fatal("SIGINT after the delay did not cancel the search")
		}
	}
}

// TestSearchTimeBoundEdges: --since/--until at 1970-01-01T00:00:00Z (the
// instant 0, which search.Query alone reads as "no bound") and beyond
// what int64 nanoseconds hold (which used to wrap to another century).
func TestSearchTimeBoundEdges(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "t.log")
	if err := os.WriteFile(log, []byte("2025-01-01T00:00:00Z hello a\n2025-01-02T00:00:00Z hello b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if _, code := hayInProcess(t, "ingest", "--data", data, log); code != 0 {
		t.Fatalf("ingest: exit %d", code)
	}
	both := "2025-01-01T00:00:00Z hello a\n2025-01-02T00:00:00Z hello b\n"
	for _, c := range []struct {
		flags []string
		out   string
		code  int
	}{
		{[]string{"--until", "1970-01-01T00:00:00Z"}, "", 1},
		{[]string{"--until", "1970-01-01T00:00:00.000000001Z"}, "", 1},
		{[]string{"--until", "0001-01-01T00:00:00Z"}, "", 1},
		{[]string{"--until", "9999-12-31T00:00:00Z"}, both, 0},
		{[]string{"--since", "0001-01-01T00:00:00Z"}, both, 0},
		{[]string{"--since", "1970-01-01T00:00:00Z"}, both, 0},
		{[]string{"--since", "9999-12-31T00:00:00Z"}, "", 1},
		{[]string{"--since", "-2562047h"}, "", 1},                   // now + 292 years
		{[]string{"--until", "-2562047h47m16.854775808s"}, both, 0}, // -d overflows
		{[]string{"--since", "2025-01-02T00:00:00Z", "--until", "9999-12-31T00:00:00Z"}, "2025-01-02T00:00:00Z hello b\n", 0},
	} {
		args := append([]string{"search", "--data", data}, c.flags...)
		out, code := hayInProcess(t, append(args, "hello")...)
		if string(out) != c.out || code != c.code {
			t.Errorf("hay search %v hello: exit %d\n%s\nwant exit %d\n%s", c.flags, code, out, c.code, c.out)
		}
	}
}
