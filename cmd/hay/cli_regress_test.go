// Regression tests from an audit of the CLI as an engineer in an incident
// meets it (grep habits, pipes, signals, layouts, compressed inputs, a
// terminal): each failed before its fix.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cfRun runs hay (this test binary as the hay command) in dir and returns
// stdout, stderr and the exit code.
func cfRun(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := hayCommand(args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// cfGrep runs LC_ALL=C grep -a -F args... file.
func cfGrep(t *testing.T, file string, args ...string) (string, int) {
	t.Helper()
	out, code := grepArgs(t, file, append([]string{"-F"}, args...)...)
	return string(out), code
}

func cfWrite(t *testing.T, path, s string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const cfLog = "2026-11-30T10:00:00Z ERROR disk full\n" +
	"2026-11-30T10:00:01Z info all good\n" +
	"2026-11-30T10:00:02Z error lowercase\n" +
	"2026-11-30T10:00:03Z info -i and -c in text\n" +
	"2026-11-30T10:00:04Z info nothing\n"

// F1: -v takes a value, so `-v -i error` drops "-i" and keeps "error":
// the opposite of grep -v -i error.
func TestCLIF1VSwallowsFlag(t *testing.T) {
	dir := t.TempDir()
	src := cfWrite(t, filepath.Join(dir, "a.log"), cfLog)
	if _, e, c := cfRun(t, dir, "ingest", "--data", "d", src); c != 0 {
		t.Fatal(e)
	}
	for _, args := range [][]string{{"-v", "-i", "error"}, {"-v", "-e", "ERROR"}, {"-v", "-c", "info"}} {
		want, wcode := cfGrep(t, src, args...)
		got, stderr, code := cfRun(t, dir, append([]string{"search", "--data", "d"}, args...)...)
		if code == 2 {
			continue // refusing the ambiguous form is a fix too
		}
		if got != want || code != wcode {
			t.Errorf("hay search %q: got %q (exit %d, stderr %q); grep -F gives %q (exit %d)", args, got, code, stderr, want, wcode)
		}
	}
}

// F2: hay serve on a directory made by hay ingest serves nothing and
// plants tenant stores inside the store's own wal/ and segments/.
func TestCLIF2ServeOnIngestStore(t *testing.T) {
	dir := t.TempDir()
	src := cfWrite(t, filepath.Join(dir, "a.log"), cfLog)
	if _, e, c := cfRun(t, dir, "ingest", "--data", "d", src); c != 0 {
		t.Fatal(e)
	}
	cmd := hayCommand("serve", "--data", "d", "--listen", "127.0.0.1:0", "--compact-interval", "0")
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Either it refuses the directory (exits non-zero at once: a fix), or
	// it serves: then the ingested lines must be visible and the store's
	// directories untouched.
	br := bufio.NewReader(stderr)
	line, _ := br.ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "hay serve: listening on ")
	if !ok {
		io.Copy(io.Discard, br)
		if err := cmd.Wait(); err == nil {
			t.Fatalf("serve exited 0 without serving: %q", line)
		}
		return
	}
	go io.Copy(io.Discard, br)
	addr = strings.Fields(addr)[0]
	resp, err := http.Get(addr + "/loki/api/v1/query_range?query=%7Bsource%3D%22a.log%22%7D&start=1796000000000000000&end=1796100000000000000&direction=forward")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "disk full") {
		t.Errorf("hay serve --data on a store made by hay ingest: the query finds nothing: %s", body)
	}
	for _, p := range []string{"d/wal/LOCK", "d/segments/LOCK", "d/wal/wal", "d/segments/wal"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("hay serve created %s inside the ingest store", p)
		}
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
}

// F3: the demo/serve layout keeps a tenant's store in DIR/fake; searching
// DIR says "no store", without naming DIR/fake.
func TestCLIF3SearchTenantDir(t *testing.T) {
	dir := t.TempDir()
	src := cfWrite(t, filepath.Join(dir, "a.log"), cfLog)
	if _, e, c := cfRun(t, dir, "ingest", "--data", "srv/fake", src); c != 0 {
		t.Fatal(e)
	}
	_, stderr, code := cfRun(t, dir, "search", "--data", "srv", "ERROR")
	if code != 0 && !strings.Contains(stderr, "srv/fake") {
		t.Errorf("hay search --data srv (a serve directory with tenant fake): exit %d, %q; want a hint naming srv/fake", code, stderr)
	}
}

// F4: a flag after a file name is read as a file; the file before it is
// stored first, in the default store or under the default labels.
func TestCLIF4FlagAfterFile(t *testing.T) {
	dir := t.TempDir()
	cfWrite(t, filepath.Join(dir, "s.log"), "one\ntwo\n")
	// Refusing (exit 2, nothing stored) or obeying the flag are both fixes.
	_, stderr, code := cfRun(t, dir, "ingest", "s.log", "--data", "mystore")
	if code != 2 {
		if out, _, _ := cfRun(t, dir, "search", "--data", "mystore", "-c", ""); out != "2\n" {
			t.Errorf("hay ingest s.log --data mystore: exit %d (%q), and mystore holds %q entries", code, stderr, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "hay-data")); err == nil {
		t.Errorf("hay ingest s.log --data mystore stored s.log in ./hay-data")
	}
	_, _, _ = cfRun(t, dir, "ingest", "--data", "st", "s.log", "--stream", "app=api")
	out, _, _ := cfRun(t, dir, "search", "--data", "st", "--query", `{app="api"}`)
	if out != "one\ntwo\n" {
		t.Errorf(`after "ingest s.log --stream app=api", {app="api"} gives %q, want "one\ntwo\n"`, out)
	}
}

// F5: a flag after PATTERN: grep accepts it; hay's message does not say
// what is wrong.
func TestCLIF5FlagAfterPattern(t *testing.T) {
	dir := t.TempDir()
	src := cfWrite(t, filepath.Join(dir, "a.log"), cfLog)
	if _, e, c := cfRun(t, dir, "ingest", "--data", "d", src); c != 0 {
		t.Fatal(e)
	}
	out, stderr, code := cfRun(t, dir, "search", "--data", "d", "info", "-c")
	if !(code == 0 && out == "3\n") && !strings.Contains(stderr, "-c") {
		t.Errorf("hay search info -c: exit %d, stdout %q, stderr %q: want grep's 3, or an error naming -c", code, out, stderr)
	}
}

// F7: the help promises grep -F output; CRLF lines come back without \r.
func TestCLIF7HelpCRLF(t *testing.T) {
	if strings.Contains(searchHelp, "grep -a -F") && !strings.Contains(searchHelp, `\r`) {
		t.Errorf("hay search --help promises LC_ALL=C grep -a -F output without saying a line's final \\r is dropped")
	}
}

// F9: grep's bundled short flags (-ic, -vc) are refused.
func TestCLIF9BundledFlags(t *testing.T) {
	dir := t.TempDir()
	src := cfWrite(t, filepath.Join(dir, "a.log"), cfLog)
	if _, e, c := cfRun(t, dir, "ingest", "--data", "d", src); c != 0 {
		t.Fatal(e)
	}
	want, _ := cfGrep(t, src, "-ic", "error")
	if got, stderr, code := cfRun(t, dir, "search", "--data", "d", "-ic", "error"); got != want {
		t.Errorf("hay search -ic error: %q (exit %d, %q), grep: %q", got, code, firstLine(stderr), want)
	}
}

// F10: --since 2d is refused though hay gen --span accepts 7d.
func TestCLIF10SinceDays(t *testing.T) {
	if _, err := parseTimeArg("2d", time.Now()); err != nil {
		t.Errorf("--since 2d: %v (hay gen --span takes 7d)", err)
	}
}

// F12: --help goes to stderr: `hay search --help | less` shows nothing.
func TestCLIF12HelpOnStdout(t *testing.T) {
	for _, c := range []string{"search", "ingest", "compact", "verify", "serve", "gen", "demo", "version"} {
		out, _, code := cfRun(t, t.TempDir(), c, "--help")
		if code != 0 || !strings.HasPrefix(out, "Usage: hay "+c) {
			t.Errorf("hay %s --help: exit %d, stdout %q: want the usage on stdout", c, code, firstLine(out))
		}
	}
}

// F13: interrupted ingest and compact exit 1 (as any failure); search
// exits 130.
func TestCLIF13InterruptStatus(t *testing.T) {
	dir := t.TempDir()
	cmd := hayCommand("ingest", "--data", "d")
	cmd.Dir = dir
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	cmd.Stdin = pr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	pw.Write([]byte("a line\n"))
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("hay ingest stopped by Ctrl-C: exit %d, want 130 (as hay search)", code)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// F15: a gzipped log is stored as binary lines; its text is never found.
func TestCLIF15Gzip(t *testing.T) {
	dir := t.TempDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, cfLog)
	zw.Close()
	cfWrite(t, filepath.Join(dir, "a.log.gz"), gz.String())
	cfWrite(t, filepath.Join(dir, "b.log"), cfLog)
	// Refused, before anything is stored (b.log first in the list too),
	// with the way to ingest it.
	_, stderr, code := cfRun(t, dir, "ingest", "--data", "d", "b.log", "a.log.gz")
	if code == 0 || !strings.Contains(stderr, "a.log.gz is gzip-compressed, and hay ingest stores text: zcat a.log.gz | hay ingest --stream source=a.log") ||
		!strings.Contains(stderr, "nothing was stored") {
		t.Fatalf("hay ingest b.log a.log.gz: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "d")); err == nil {
		t.Error("the refused ingest made a store")
	}
}

// F16: a second hay serve on the same data directory starts.
func TestCLIF16TwoServes(t *testing.T) {
	dir := t.TempDir()
	start := func() (*exec.Cmd, string, *bufio.Reader) {
		cmd := hayCommand("serve", "--data", "d", "--listen", "127.0.0.1:0", "--compact-interval", "0")
		cmd.Dir = dir
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(stderr)
		line, _ := br.ReadString('\n')
		return cmd, line, br
	}
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	first, line, br := start()
	defer func() { first.Process.Signal(os.Interrupt); io.Copy(io.Discard, br); first.Wait() }()
	if !strings.Contains(line, "listening on") {
		t.Fatalf("first serve: %q", line)
	}
	second, line2, br2 := start()
	if strings.Contains(line2, "listening on") {
		t.Errorf("a second hay serve on the same data directory started: %q", strings.TrimSpace(line2))
		second.Process.Signal(os.Interrupt)
	}
	io.Copy(io.Discard, br2)
	second.Wait()
}

// F18: on a terminal, matches are held in a 256 KiB buffer until the search
// ends: sparse matches (the rare needle of an incident) appear only at the
// end, and a terminal stdout gets no progress line either.
func TestCLIF18TerminalStreaming(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to give hay a terminal")
	}
	dir := t.TempDir()
	// One match at the start, one at the end, generated lines between.
	if _, e, c := cfRun(t, dir, "gen", "--lines", "300000", "--seed", "5", "-o", "mid.log"); c != 0 {
		t.Fatal(e)
	}
	mid, err := os.ReadFile(filepath.Join(dir, "mid.log"))
	if err != nil {
		t.Fatal(err)
	}
	cfWrite(t, filepath.Join(dir, "a.log"), "2026-11-01T00:00:00Z first NEEDLE7\n"+string(mid)+"2026-11-03T00:00:00Z last NEEDLE7\n")
	if _, e, c := cfRun(t, dir, "ingest", "--data", "d", "a.log"); c != 0 {
		t.Fatal(e)
	}
	exe, _ := os.Executable()
	cmdline := "GOMAXPROCS=1 HAY_TEST_HELPER=1 " + exe + " -test.run='^TestHelperHay$' -- search --data d --no-index --color=never -E 'N(E|F)EDLE7'"
	cmd := exec.Command(script, "-qc", cmdline, "/dev/null")
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var first time.Duration
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := stdout.Read(buf)
		if n > 0 && bytes.Contains(append(got, buf[:n]...), []byte("first NEEDLE7")) && first == 0 {
			first = time.Since(t0)
		}
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
	}
	cmd.Wait()
	total := time.Since(t0)
	if first == 0 {
		t.Fatalf("no first match in %q", got)
	}
	t.Logf("first match after %v of %v", first, total)
	if total > 50*time.Millisecond && first > total*8/10 {
		t.Errorf("on a terminal the first match (at the start of the store) appeared after %v of a %v search", first, total)
	}
}
