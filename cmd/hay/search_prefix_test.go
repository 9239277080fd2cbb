//go:build linux

package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// prefixStore ingests two files with timestamps (so that the streams
// merge in a known order) and a third under its own labels, and returns
// the data directory.
func prefixStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	files := map[string]string{
		"api.log": "2026-11-30T10:00:01Z a error 1\n2026-11-30T10:00:03Z b ok\n2026-11-30T10:00:05Z x error 3\n",
		// A file name that would drive the terminal if printed raw.
		"evil\x1b[31m.log": "2026-11-30T10:00:02Z c error 2\n",
	}
	for _, name := range []string{"api.log", "evil\x1b[31m.log"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, code := hayInProcess(t, "ingest", "--data", data, p); code != 0 {
			t.Fatalf("ingest %q failed", name)
		}
	}
	ctl := filepath.Join(dir, "ctl.log")
	if err := os.WriteFile(ctl, []byte("2026-11-30T10:00:06Z \u009b31m \x7f ctl\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code := hayInProcess(t, "ingest", "--data", data, ctl); code != 0 {
		t.Fatal("ingest ctl.log failed")
	}
	web := filepath.Join(dir, "web.log")
	if err := os.WriteFile(web, []byte("2026-11-30T10:00:04Z d error 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code := hayInProcess(t, "ingest", "--data", data, "--stream", "app=web,env=prod", web); code != 0 {
		t.Fatal("ingest web.log failed")
	}
	return data
}

// TestSearchStreamPrefix checks -H: each entry is preceded by its stream
// (an ingested file's name, else its labels) and ':' for a match or '-'
// for a context line, as grep -H; without -H, output that is not a
// terminal stays the bare lines.
func TestSearchStreamPrefix(t *testing.T) {
	data := prefixStore(t)
	run := func(args ...string) string {
		t.Helper()
		out, code := hayInProcess(t, append([]string{"search", "--data", data}, args...)...)
		if code != 0 {
			t.Fatalf("search %q: exit %d", args, code)
		}
		return string(out)
	}
	bare := "2026-11-30T10:00:01Z a error 1\n2026-11-30T10:00:02Z c error 2\n2026-11-30T10:00:04Z d error 4\n2026-11-30T10:00:05Z x error 3\n"
	if got := run("error"); got != bare {
		t.Errorf("search error (not a terminal): %q, want the bare lines %q", got, bare)
	}
	if got := run("--no-stream", "error"); got != bare {
		t.Errorf("--no-stream: %q, want %q", got, bare)
	}
	labels := `{app="web", env="prod", source="web.log"}`
	want := "api.log:2026-11-30T10:00:01Z a error 1\nevil\x1b[31m.log:2026-11-30T10:00:02Z c error 2\n" + labels + ":2026-11-30T10:00:04Z d error 4\napi.log:2026-11-30T10:00:05Z x error 3\n"
	if got := run("-H", "error"); got != want {
		t.Errorf("-H error:\n got %q\nwant %q", got, want)
	}
	// Context lines take '-', and groups are separated as grep's.
	want = "api.log-2026-11-30T10:00:01Z a error 1\napi.log:2026-11-30T10:00:03Z b ok\napi.log-2026-11-30T10:00:05Z x error 3\n"
	if got := run("-H", "-C", "1", "ok"); got != want {
		t.Errorf("-H -C 1 ok:\n got %q\nwant %q", got, want)
	}
	// The query path prefixes the same way.
	want = labels + ":2026-11-30T10:00:04Z d error 4\n"
	if got := run("-H", "--query", `{app="web"} |= "error"`); got != want {
		t.Errorf("-H --query: %q, want %q", got, want)
	}
	// -c -H: a count per stream with a match, by name (grep -c -H).
	if got, want := run("-H", "-c", "error"), "api.log:2\nevil\x1b[31m.log:1\n"+labels+":1\n"; got != want {
		t.Errorf("-H -c: %q, want %q", got, want)
	}
	if got, want := run("-H", "-c", "--query", `{app="web"} |= "error"`), labels+":1\n"; got != want {
		t.Errorf("-H -c --query: %q, want %q", got, want)
	}
	if got := run("-c", "error"); got != "4\n" {
		t.Errorf("-c: %q, want 4", got)
	}
	// Review cli8: -c -H counts matches, not context lines (F16), and
	// -m caps each stream's count (F14), as grep -c -m does each file's.
	if got, want := run("-H", "-c", "-C", "1", "error"), "api.log:2\nevil\x1b[31m.log:1\n"+labels+":1\n"; got != want {
		t.Errorf("-H -c -C 1: %q, want %q", got, want)
	}
	if got, want := run("-H", "-c", "-m", "1", "error"), "api.log:1\nevil\x1b[31m.log:1\n"+labels+":1\n"; got != want {
		t.Errorf("-H -c -m 1: %q, want %q", got, want)
	}
	// -l -m 1 lists every stream with a match (grep -l -m1 each file).
	if got := run("-l", "-m", "1", "error"); strings.Count(got, "\n") != 3 {
		t.Errorf("-l -m 1: %q, want the 3 streams", got)
	}
	// -m 0: nothing, exit 1, as grep -m 0.
	for _, args := range [][]string{{"-m", "0", "error"}, {"-m0", "error"}} {
		out, code := hayInProcess(t, append([]string{"search", "--data", data}, args...)...)
		if code != 1 || len(out) != 0 {
			t.Errorf("%q: exit %d, %q, want 1 and nothing", args, code, out)
		}
	}
	if out, code := hayInProcess(t, "search", "--data", data, "-c", "-m", "0", "error"); code != 1 || string(out) != "0\n" {
		t.Errorf("-c -m 0: exit %d, %q, want 1 and 0", code, out)
	}
	if got := run("-H", "--json", "--query", `{app="web"}`); !strings.HasPrefix(got, `{"time":`) {
		t.Errorf("-H --json: %q, want JSON", got)
	}
	if _, code := hayInProcess(t, "search", "--data", data, "-H", "--no-stream", "error"); code != 2 {
		t.Errorf("-H --no-stream: exit %d, want 2 (usage)", code)
	}
}

// TestSearchStreamPrefixTerminal checks the default on a terminal (a
// pseudo-terminal here): the stream is printed when the search covers
// more than one stream, escaped like the lines, and not when it covers
// one, unless -H asks.
func TestSearchStreamPrefixTerminal(t *testing.T) {
	data := prefixStore(t)
	t.Setenv("NO_COLOR", "1") // the prefix alone; colours have their own test
	onTTY := func(args ...string) string {
		t.Helper()
		return onTerminal(t, data, args...)
	}
	labels := `{app="web", env="prod", source="web.log"}`
	want := "api.log:2026-11-30T10:00:01Z a error 1\n" + `evil\x1b[31m.log` + ":2026-11-30T10:00:02Z c error 2\n" + labels + ":2026-11-30T10:00:04Z d error 4\napi.log:2026-11-30T10:00:05Z x error 3\n"
	if got := onTTY("error"); got != want {
		t.Errorf("search error on a terminal:\n got %q\nwant %q", got, want)
	}
	if got, want := onTTY("--no-stream", "error"), "2026-11-30T10:00:01Z a error 1\n2026-11-30T10:00:02Z c error 2\n2026-11-30T10:00:04Z d error 4\n2026-11-30T10:00:05Z x error 3\n"; got != want {
		t.Errorf("--no-stream on a terminal: %q, want %q", got, want)
	}
	// One stream selected: nothing to tell apart.
	if got, want := onTTY("--query", `{source="api.log"} |= "error"`), "2026-11-30T10:00:01Z a error 1\n2026-11-30T10:00:05Z x error 3\n"; got != want {
		t.Errorf("one stream on a terminal: %q, want %q", got, want)
	}
	if got, want := onTTY("-H", "--query", `{source="api.log"} |= "error"`), "api.log:2026-11-30T10:00:01Z a error 1\napi.log:2026-11-30T10:00:05Z x error 3\n"; got != want {
		t.Errorf("-H, one stream on a terminal: %q, want %q", got, want)
	}
	// A selector of several streams prefixes by default.
	if got, want := onTTY("--query", `{source=~"api.log|web.log"} |= "error"`), "api.log:2026-11-30T10:00:01Z a error 1\n"+labels+":2026-11-30T10:00:04Z d error 4\napi.log:2026-11-30T10:00:05Z x error 3\n"; got != want {
		t.Errorf("two streams on a terminal:\n got %q\nwant %q", got, want)
	}
}

// onTerminal runs hay search on data with args, its stdout a pseudo-
// terminal, and returns what the terminal received.
func onTerminal(t *testing.T, data string, args ...string) string {
	t.Helper()
	master, slave := openPTY(t)
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(master) // until the slave side closes (EIO)
		done <- b
	}()
	old := os.Stdout
	os.Stdout = slave
	code := runMain(append([]string{"search", "--data", data}, args...))
	os.Stdout = old
	slave.Close()
	out := <-done
	master.Close()
	if code != 0 {
		t.Fatalf("search %q on a terminal: exit %d", args, code)
	}
	// The terminal's line discipline writes \r\n.
	return string(bytes.ReplaceAll(out, []byte("\r\n"), []byte("\n")))
}

// openPTY opens a pseudo-terminal pair (/dev/ptmx and its /dev/pts/N).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty slave: %v", err)
	}
	return m, s
}

// TestSearchColorListQuiet checks --color (grep's sequences around the
// stream and the matches; raw into a pipe with always, escaped text on a
// terminal, off with NO_COLOR), -l (each stream with a match, once) and
// -q (no output, the exit status alone).
func TestSearchColorListQuiet(t *testing.T) {
	data := prefixStore(t)
	run := func(args ...string) (string, int) {
		t.Helper()
		out, code := hayInProcess(t, append([]string{"search", "--data", data}, args...)...)
		return string(out), code
	}
	const (
		m   = "\x1b[01;31m\x1b[K"
		fn  = "\x1b[35m\x1b[K"
		se  = "\x1b[36m\x1b[K"
		end = "\x1b[m\x1b[K"
	)
	want := "2026-11-30T10:00:03Z b " + m + "ok" + end + "\n"
	if got, _ := run("--color=always", "ok"); got != want {
		t.Errorf("--color=always ok:\n got %q\nwant %q", got, want)
	}
	// -i folds ASCII; every occurrence is marked; the prefix is coloured.
	want = fn + "api.log" + end + se + ":" + end + "2026-11-30T10:00:01Z a " + m + "error" + end + " 1\n"
	if got, _ := run("--color=always", "-H", "--query", `{source="api.log"} |~ "(?i)ERROR 1"`); got != fn+"api.log"+end+se+":"+end+"2026-11-30T10:00:01Z a "+m+"error 1"+end+"\n" {
		t.Errorf("--color=always -H (?i) regex:\n got %q", got)
	}
	if got, _ := run("--color=always", "-H", "-e", "error", "-v", "x error"); !strings.HasPrefix(got, want) {
		t.Errorf("--color=always -H -e error:\n got %q\nwant prefix %q", got, want)
	}
	// Context lines are not marked.
	want = "2026-11-30T10:00:01Z a error 1\n2026-11-30T10:00:03Z b " + m + "ok" + end + "\n"
	if got, _ := run("--color=always", "-B", "1", "ok"); got != want {
		t.Errorf("--color=always -B 1 ok:\n got %q\nwant %q", got, want)
	}
	// The group separator and -c -H's names, coloured as grep's.
	if got, _ := run("--color=always", "-C", "0", "error"); !strings.Contains(got, "\n"+se+"--"+end+"\n") {
		t.Errorf("--color=always -C 0: %q, want a cyan --", got)
	}
	if got, _ := run("--color=always", "-c", "-H", "ok"); got != fn+"api.log"+end+se+":"+end+"1\n" {
		t.Errorf("--color=always -c -H: %q", got)
	}
	if got, _ := run("--color=never", "ok"); got != "2026-11-30T10:00:03Z b ok\n" {
		t.Errorf("--color=never: %q", got)
	}
	if got, _ := run("ok"); got != "2026-11-30T10:00:03Z b ok\n" {
		t.Errorf("--color=auto into a file: %q, want no colour", got)
	}

	// -l: the streams with a match, in the order of their first match.
	if got, code := run("-l", "error"); code != 0 || got != "api.log\nevil\x1b[31m.log\n"+`{app="web", env="prod", source="web.log"}`+"\n" {
		t.Errorf("-l error: exit %d, %q", code, got)
	}
	if got, code := run("-l", "ok"); code != 0 || got != "api.log\n" {
		t.Errorf("-l ok: exit %d, %q", code, got)
	}
	if got, code := run("-l", "absent-needle"); code != 1 || got != "" {
		t.Errorf("-l absent: exit %d, %q, want 1 and nothing", code, got)
	}
	// -q: nothing printed; 0 on a match, 1 without.
	if got, code := run("-q", "error"); code != 0 || got != "" {
		t.Errorf("-q error: exit %d, %q", code, got)
	}
	if got, code := run("-q", "absent-needle"); code != 1 || got != "" {
		t.Errorf("-q absent: exit %d, %q", code, got)
	}
	for _, bad := range [][]string{{"-l", "-c"}, {"-l", "--json"}, {"-q", "-C", "1"}, {"-l", "-q"}, {"--color=rainbow"}, {"-q", "--hist"}} {
		if _, code := run(append(bad, "error")...); code != 2 {
			t.Errorf("search %q: exit %d, want 2 (usage)", bad, code)
		}
	}
}

// TestSearchColorTerminal checks --color=auto on a terminal: on by
// default, text escaped piece by piece, off with NO_COLOR or TERM=dumb.
func TestSearchColorTerminal(t *testing.T) {
	data := prefixStore(t)
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	const (
		m   = "\x1b[01;31m\x1b[K"
		fn  = "\x1b[35m\x1b[K"
		se  = "\x1b[36m\x1b[K"
		end = "\x1b[m\x1b[K"
	)
	want := fn + `evil\x1b[31m.log` + end + se + ":" + end + "2026-11-30T10:00:02Z c " + m + "error 2" + end + "\n"
	if got := onTerminal(t, data, "error 2"); got != want {
		t.Errorf("on a terminal:\n got %q\nwant %q", got, want)
	}
	want = fn + `evil\x1b[31m.log` + end + "\n"
	if got := onTerminal(t, data, "-l", "error 2"); got != want {
		t.Errorf("-l on a terminal:\n got %q\nwant %q", got, want)
	}
	t.Setenv("NO_COLOR", "1")
	if got, want := onTerminal(t, data, "error 2"), `evil\x1b[31m.log`+":2026-11-30T10:00:02Z c error 2\n"; got != want {
		t.Errorf("NO_COLOR on a terminal: %q, want %q", got, want)
	}
	// --json on a terminal: DEL and C1 controls (U+009B is CSI) as \u
	// escapes, as the plain output escapes them (review cli8, F9).
	if got := onTerminal(t, data, "--json", "--query", `{source="ctl.log"}`); !strings.Contains(got, `\u009b31m \u007f`) || strings.Contains(got, "\u009b") || strings.Contains(got, "\x7f") {
		t.Errorf("--json on a terminal: %q", got)
	}
	t.Setenv("NO_COLOR", "")
	t.Setenv("TERM", "dumb")
	if got, want := onTerminal(t, data, "error 2"), `evil\x1b[31m.log`+":2026-11-30T10:00:02Z c error 2\n"; got != want {
		t.Errorf("TERM=dumb on a terminal: %q, want %q", got, want)
	}
}

// TestSearchListStops checks that -l stops once every stream the search
// covers is listed, as grep -l stops reading a file at its first match:
// over one stream it decodes a few blocks where -c decodes them all.
// (Over streams whose times do not overlap, the merge by time still
// reads the first stream's blocks before the second's.)
func TestSearchListStops(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if _, code := hayInProcess(t, "ingest", "--data", data, stripCR(t, filepath.Join("../../testdata/loghub", "HDFS_2k.log"))); code != 0 {
		t.Fatal("ingest failed")
	}
	if _, code := hayInProcess(t, "compact", "--data", data, "--block-size", "8192"); code != 0 {
		t.Fatal("compact failed")
	}
	decoded := func(stderr string) int {
		t.Helper()
		i := strings.Index(stderr, "decoded ")
		if i < 0 {
			t.Fatalf("no block counts in %q", stderr)
		}
		n, _ := strconv.Atoi(strings.Fields(stderr[i+len("decoded "):])[0])
		return n
	}
	out, code, stderr := hayInProcessStderr(t, "search", "--data", data, "-l", "--stats", "e")
	if code != 0 || string(out) != "HDFS_2k.log\n" {
		t.Fatalf("-l e: exit %d, %q", code, out)
	}
	listed := decoded(stderr)
	_, _, stderr = hayInProcessStderr(t, "search", "--data", data, "-c", "--stats", "e")
	if all := decoded(stderr); all < 20 || listed > all/4 {
		t.Errorf("-l decoded %d blocks, -c %d: -l should stop after the first match", listed, all)
	}
}
