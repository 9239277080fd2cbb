package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"haystack/internal/logtest"
	"haystack/internal/server"
	"haystack/internal/store"
)

// syncBuffer is a bytes.Buffer safe for the demo's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runningDemo is `hay demo` running in the test process.
type runningDemo struct {
	base    string
	out     *syncBuffer
	cancel  context.CancelFunc
	done    chan error
	stopped bool // done was received
}

// startDemo runs the demo command function with args (plus a free port)
// until stop, and waits until /ready answers 200.
func startDemo(t *testing.T, args ...string) *runningDemo {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &runningDemo{out: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	listening := make(chan string, 1)
	go func() {
		d.done <- demo(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...), d.out, func(base string) { listening <- base })
	}()
	t.Cleanup(func() {
		// A failed test must not leave the demo serving.
		cancel()
		if !d.stopped {
			select {
			case <-d.done:
			case <-time.After(time.Minute):
			}
		}
	})
	select {
	case d.base = <-listening:
	case err := <-d.done:
		d.stopped = true
		t.Fatalf("demo ended before listening: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("demo did not start listening within 2 minutes")
	}
	resp, err := http.Get(d.base + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/ready: %s", resp.Status)
	}
	return d
}

// stop cancels the demo (as Ctrl-C does) and checks it ends cleanly.
func (d *runningDemo) stop(t *testing.T) {
	t.Helper()
	d.cancel()
	select {
	case err := <-d.done:
		d.stopped = true
		if err != nil {
			t.Fatalf("demo after stop: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("demo did not stop")
	}
	if !strings.Contains(d.out.String(), "hay demo: stopped") {
		t.Fatalf("no stop message in %q", d.out.String())
	}
}

// getJSON decodes a JSON answer of the demo's API.
func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", u, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v in %q", u, err, b)
	}
}

// hitsTotal is /api/v1/hits' total for the query parameters p.
func hitsTotal(t *testing.T, base string, p url.Values) int64 {
	t.Helper()
	var h struct{ Total int64 }
	getJSON(t, base+"/api/v1/hits?"+p.Encode(), &h)
	return h.Total
}

// searchLines is /api/v1/search's answer for p: the entries, and the trailer.
func searchLines(t *testing.T, base string, p url.Values) ([]map[string]any, map[string]any) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/search?" + p.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("search %v: %s %s", p, resp.Status, b)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m["done"] != nil || m["error"] != nil {
			return lines, m
		}
		lines = append(lines, m)
	}
	t.Fatalf("search %v: no trailer (%v)", p, sc.Err())
	return nil, nil
}

// demoOracle counts, by brute force over a fresh generation of the demo's
// lines, the lines that contain needle (ASCII case-insensitively when
// fold) in streams of app ("" any).
func demoOracle(info demoInfo, needle string, fold bool, app string) int64 {
	g := logtest.NewGenerator(info.config())
	var n int64
	var buf []byte
	pat := []byte(needle)
	if fold {
		pat = asciiLower(pat)
	}
	for range info.Lines {
		line, s, _ := g.Next(buf[:0])
		buf = line
		if app != "" && g.Stream(s).App != app {
			continue
		}
		if fold {
			line = asciiLower(line)
		}
		if bytes.Contains(line, pat) {
			n++
		}
	}
	return n
}

// segmentFiles lists the demo store's segment files with their times.
func segmentFiles(t *testing.T, dir string) map[string]time.Time {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, server.DefaultTenant, "segments"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]time.Time{}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = fi.ModTime()
	}
	return m
}

// checkDemoCounts compares the API's counts with the oracle's.
func checkDemoCounts(t *testing.T, base string, info demoInfo) {
	t.Helper()
	all := hitsTotal(t, base, url.Values{"q": {""}})
	if all != info.Lines {
		t.Fatalf("%d entries in the store, want %d", all, info.Lines)
	}
	for _, c := range []struct {
		q, needle string
		fold      bool
		app       string
	}{
		{q: "connection refused", needle: "connection refused"},
		{q: "CONNECTION refused", needle: "connection refused", fold: true},
		{q: "OutOfMemoryError", needle: "OutOfMemoryError"},
		{q: `{app="payments"} |= "timeout"`, needle: "timeout", app: "payments"},
	} {
		want := demoOracle(info, c.needle, c.fold, c.app)
		p := url.Values{"q": {c.q}}
		if c.fold {
			p.Set("fold", "1")
		}
		if got := hitsTotal(t, base, p); got != want {
			t.Errorf("hits %v: total %d, oracle %d", p, got, want)
		}
		p.Set("limit", "5000")
		lines, trailer := searchLines(t, base, p)
		if int64(len(lines)) != min(want, 5000) || trailer["done"] != true {
			t.Errorf("search %v: %d lines (trailer %v), oracle %d", p, len(lines), trailer, want)
		}
		if c.q == "connection refused" && want == 0 {
			t.Errorf("test corpus: no %q in the demo's lines", c.q)
		}
	}
}

// TestDemo runs the demo command function on a small corpus, checks the
// API's answers against a brute-force count over the generated lines,
// stops it, and runs it again on the same directory: the data is reused,
// not generated again.
func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	args := []string{"--lines", "20000", "--data", dir, "--seed", "3"}
	d := startDemo(t, args...)
	info, err := readDemoMarker(filepath.Join(dir, demoMarker))
	if err != nil {
		t.Fatal(err)
	}
	if info.Lines != 20000 || info.Seed != 3 || time.Since(info.Start.Add(time.Duration(info.SpanNS))) > time.Minute {
		t.Fatalf("marker %+v: want 20000 lines, seed 3, ending now", info)
	}
	banner := d.out.String()
	for _, want := range []string{
		"Haystack demo: 20000 log lines from 8 services",
		"generated and stored in",
		d.base + "/?q=OutOfMemoryError\n",
		d.base + "/?q=" + url.QueryEscape(`{app="payments"} | logfmt | status >= 500`) + "\n",
		d.base + "/?q=connection+refused&case=1\n",
		"Ctrl-C",
	} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	checkDemoCounts(t, d.base, info)
	// Every stream has the demo's labels.
	var labels struct{ Data []string }
	getJSON(t, d.base+"/loki/api/v1/labels", &labels)
	if !slices.Equal(labels.Data, []string{"app", "env", "source"}) {
		t.Errorf("labels %q", labels.Data)
	}
	// The page itself is served at /.
	resp, err := http.Get(d.base + "/?q=OutOfMemoryError")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(page, []byte("<script")) {
		t.Fatalf("/: %s %.200q", resp.Status, page)
	}
	d.stop(t)
	segs := segmentFiles(t, dir)
	if len(segs) == 0 {
		t.Fatal("no segments")
	}

	// Again on the same directory: reused as it is.
	d = startDemo(t, args...)
	if !strings.Contains(d.out.String(), "reused") {
		t.Errorf("second run did not reuse the data:\n%s", d.out.String())
	}
	info2, err := readDemoMarker(filepath.Join(dir, demoMarker))
	if err != nil {
		t.Fatal(err)
	}
	if !info2.Start.Equal(info.Start) {
		t.Errorf("marker start changed from %v to %v", info.Start, info2.Start)
	}
	checkDemoCounts(t, d.base, info)
	d.stop(t)
	if again := segmentFiles(t, dir); !maps.EqualFunc(again, segs, time.Time.Equal) {
		t.Errorf("segments changed on reuse: %v, then %v", segs, again)
	}
}

// cancelAfter is a context whose Err reports cancellation after n calls:
// it interrupts demoIngest after n batches, deterministically.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestDemoResume interrupts the demo's ingest after a few batches; the
// next run resumes where it stopped, with neither gaps nor duplicates.
func TestDemoResume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	o := demoOptions{lines: 20000, data: dir, seed: 5}
	_, _, err := demoPrepare(&cancelAfter{Context: context.Background(), n: 2}, o)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted ingest: %v", err)
	}
	st, err := store.Open(filepath.Join(dir, server.DefaultTenant), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := st.Source(demoSource)
	st.Close()
	if src.Offset <= 0 || src.Offset >= o.lines {
		t.Fatalf("after the interruption %d lines are stored; want some, not all", src.Offset)
	}
	d := startDemo(t, "--lines", "20000", "--data", dir, "--seed", "5")
	if strings.Contains(d.out.String(), "reused") {
		t.Error("an interrupted ingest was reported as reused")
	}
	info, err := readDemoMarker(filepath.Join(dir, demoMarker))
	if err != nil {
		t.Fatal(err)
	}
	checkDemoCounts(t, d.base, info)
	d.stop(t)

	// Other flags on the same directory: the old demo is replaced.
	d = startDemo(t, "--lines", "3000", "--data", dir, "--seed", "5")
	if got := hitsTotal(t, d.base, url.Values{"q": {""}}); got != 3000 {
		t.Errorf("after --lines 3000: %d entries", got)
	}
	d.stop(t)
}

// TestDemoRefusesForeignDir checks that the demo neither writes into nor
// deletes from a directory that is not a demo's.
func TestDemoRefusesForeignDir(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "precious.log")
	if err := os.WriteFile(keep, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, fresh := range []bool{false, true} {
		_, _, err := demoPrepare(context.Background(), demoOptions{lines: 100, data: dir, fresh: fresh})
		if err == nil || !strings.Contains(err.Error(), "not a hay demo directory") {
			t.Fatalf("fresh=%v: %v", fresh, err)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("the directory now holds %d entries", len(ents))
	}
	if err := demo(context.Background(), []string{"--lines", "0"}, io.Discard, nil); !errors.Is(err, errUsage) {
		t.Fatalf("--lines 0: %v", err)
	}
	if err := demo(context.Background(), []string{"extra"}, io.Discard, nil); !errors.Is(err, errUsage) {
		t.Fatalf("an argument: %v", err)
	}
}

// TestDemoSigterm runs `hay demo` as a process: SIGTERM stops it cleanly
// (exit 0) once it serves.
func TestDemoSigterm(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	cmd := hayCommand("demo", "--lines", "3000", "--data", dir, "--listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	br := bufio.NewReader(stdout)
	base := ""
	for base == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("no URL from hay demo: %v; stderr %s", err, stderr.String())
		}
		if _, rest, ok := strings.Cut(line, "Open "); ok {
			base, _, _ = strings.Cut(rest, " ")
			base = strings.TrimSuffix(base, "/")
		}
	}
	resp, err := http.Get(base + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(br)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("hay demo after SIGTERM: %v; stderr %s", err, stderr.String())
	}
	if !strings.Contains(string(rest), "hay demo: stopped") {
		t.Fatalf("stdout after SIGTERM: %q", rest)
	}
}

// TestDemoBannerOldData checks that links to demo data older than the UI's
// default range (the last 24 hours) carry the data's own range.
func TestDemoBannerOldData(t *testing.T) {
	start := time.Now().Add(-72 * time.Hour).Truncate(time.Second)
	info := demoInfo{Format: 1, Lines: 10, Streams: 8, Start: start, SpanNS: int64(24 * time.Hour)}
	rng := fmt.Sprintf("&from=%d&to=%d", start.UnixMilli(), start.Add(24*time.Hour).UnixMilli()+1)
	var b strings.Builder
	printBanner(&b, demoOptions{data: "d"}, info, "http://h:1", true, 0)
	for _, want := range []string{
		"Open http://h:1/?" + rng[1:] + " ",
		"http://h:1/?q=OutOfMemoryError" + rng + "\n",
		"http://h:1/?q=connection+refused&case=1" + rng + "\n",
		"hay search --server http://h:1 -i 'connection refused'\n",
		"reused",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, b.String())
		}
	}
	// Fresh data: plain links.
	b.Reset()
	info.Start = time.Now().Add(-24 * time.Hour)
	printBanner(&b, demoOptions{data: "d"}, info, "http://h:1", false, time.Second)
	if strings.Contains(b.String(), "from=") || !strings.Contains(b.String(), "http://h:1/?q=OutOfMemoryError\n") {
		t.Errorf("banner for fresh data:\n%s", b.String())
	}
}
