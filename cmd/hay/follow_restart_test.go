package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"haystack/internal/server"
)

// Tests of hay search --server -f across restarts of the server (review
// 10, F1-F4): a graceful restart is a loss of the tail, not an error; a
// server that is unavailable for now is retried; reconnecting backs off
// unless the lost tail delivered; an entry stamped in the future does not
// move the gap's search past the break; a gap's search remembers a
// bounded number of entries.

// followChild is a `hay search -f` process whose stdout lines and stderr
// the test reads as they come.
type followChild struct {
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{} // closed when the process has ended
	code   int
}

func startFollowChild(t *testing.T, args ...string) *followChild {
	t.Helper()
	c := &followChild{cmd: hayCommand(args...), lines: make(chan string, 1000), exited: make(chan struct{})}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errp, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.exited
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	})
	wg.Go(func() {
		b := make([]byte, 4096)
		for {
			n, err := errp.Read(b)
			c.mu.Lock()
			c.stderr.Write(b[:n])
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	})
	go func() {
		wg.Wait()
		c.cmd.Wait()
		c.code = c.cmd.ProcessState.ExitCode()
		close(c.exited)
	}()
	return c
}

func (c *followChild) errText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// next is the next line of stdout; it fails the test after 20 s or when
// the process ends first.
func (c *followChild) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			<-c.exited
			t.Fatalf("hay search -f ended (exit %d) before %s; stderr:\n%s", c.code, what, c.errText())
		}
		return l
	case <-time.After(20 * time.Second):
		t.Fatalf("no output line for %s; stderr:\n%s", what, c.errText())
	}
	return ""
}

// waitErr waits until stderr contains s; it fails the test when the
// process ends first.
func (c *followChild) waitErr(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(c.errText(), s); time.Sleep(10 * time.Millisecond) {
		select {
		case <-c.exited:
			if strings.Contains(c.errText(), s) {
				return
			}
			t.Fatalf("hay search -f ended (exit %d) before saying %q; stderr:\n%s", c.code, s, c.errText())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("stderr does not say %q after 20 s:\n%s", s, c.errText())
		}
	}
}

// pushLine pushes one entry {app="f"} stamped ts to a hay serve.
func pushLine(t *testing.T, base string, ts int64, line string) {
	t.Helper()
	body := fmt.Sprintf(`{"streams":[{"stream":{"app":"f"},"values":[["%d",%q]]}]}`, ts, line)
	resp, err := http.Post(base+"/loki/api/v1/push", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("push %q: %s", line, resp.Status)
	}
}

// TestFollowServeGracefulRestart restarts a real `hay serve` (SIGTERM,
// then a new one on the same address and data) under a real `hay search
// -f`: the follow survives the shutdown event, retries while nothing
// listens, shows the entry stored while no server ran (by hay ingest) from
// the gap's search, then the new server's live entries, each once.
func TestFollowServeGracefulRestart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	s1 := startCrashServe(t, dir, "--listen", addr, "--compact-interval", "0")
	c := startFollowChild(t, "search", "--server", "http://"+addr, "-f", "--no-stream", "follow")

	// The tail is connected once an entry pushed reaches it.
	warm := 0
	for deadline := time.Now().Add(20 * time.Second); ; warm++ {
		pushLine(t, s1.url, time.Now().UnixNano(), fmt.Sprintf("follow warm-up %d", warm))
		select {
		case l := <-c.lines:
			if !strings.HasPrefix(l, "follow warm-up ") {
				t.Fatalf("first line %q", l)
			}
		case <-time.After(200 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("the tail shows nothing; stderr:\n%s", c.errText())
			}
			continue
		}
		break
	}
	// The warm-up entries pushed before the tail started may be shown
	// by the gap's search after the restart (they arrived after the
	// follow began): each at most once, and they are left out of out.
	var out []string
	warmShown := map[string]int{}
	next := func(what string) {
		t.Helper()
		for {
			l := c.next(t, what)
			if strings.HasPrefix(l, "follow warm-up ") {
				warmShown[l]++
				continue
			}
			out = append(out, l)
			return
		}
	}
	pushLine(t, s1.url, time.Now().UnixNano(), "follow 1")
	next("follow 1")

	s1.cmd.Process.Signal(syscall.SIGTERM)
	if err := s1.wait(); err != nil {
		t.Fatalf("hay serve after SIGTERM: %v\n%s", err, s1.logs())
	}
	c.waitErr(t, "the server is shutting down (a restart?); reconnecting")
	// Nothing listens: the follow goes on trying.
	c.waitErr(t, "still reconnecting: dial tcp")

	ing := hayCommand("ingest", "--data", filepath.Join(dir, "fake"), "--stream", "app=f")
	ing.Stdin = strings.NewReader("follow 2, stored while no server ran\n")
	if b, err := ing.CombinedOutput(); err != nil {
		t.Fatalf("hay ingest: %v\n%s", err, b)
	}
	select {
	case <-c.exited:
		t.Fatalf("hay search -f ended while the server was down: exit %d; stderr:\n%s", c.code, c.errText())
	default:
	}

	s2 := startCrashServe(t, dir, "--listen", addr, "--compact-interval", "0")
	next("the entry stored during the restart")
	c.waitErr(t, "the live tail is back")
	pushLine(t, s2.url, time.Now().UnixNano(), "follow 3")
	next("follow 3")

	c.cmd.Process.Signal(os.Interrupt)
	<-c.exited
	for l := range c.lines {
		out = append(out, l)
	}
	want := []string{"follow 1", "follow 2, stored while no server ran", "follow 3"}
	if c.code != 130 || !slices.Equal(out, want) {
		t.Fatalf("exit %d (want 130 after Ctrl-C), output but the warm-up %q, want %q; stderr:\n%s", c.code, out, want, c.errText())
	}
	for l, k := range warmShown {
		if k != 1 {
			t.Errorf("%q shown %d times", l, k)
		}
	}
	s2.cmd.Process.Signal(syscall.SIGTERM)
	if err := s2.wait(); err != nil {
		t.Errorf("second hay serve after SIGTERM: %v\n%s", err, s2.logs())
	}
}

// fakeEntry is an entry of a scripted server's search.
type fakeEntry struct {
	ts   int64
	line string
}

// serveFakeSearch answers /api/v1/search from entries (sorted by time) as
// hay serve does for a forward search: from start, dropping the first
// skip entries stamped start, at most limit, then the trailer.
func serveFakeSearch(w http.ResponseWriter, r *http.Request, entries []fakeEntry) {
	q := r.URL.Query()
	start, _ := strconv.ParseInt(q.Get("start"), 10, 64)
	skip, _ := strconv.Atoi(q.Get("skip"))
	limit, _ := strconv.Atoi(q.Get("limit"))
	i, _ := slices.BinarySearchFunc(entries, start, func(e fakeEntry, t int64) int { return cmpInt(e.ts, t) })
	for ; skip > 0 && i < len(entries) && entries[i].ts == start; skip-- {
		i++
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	n := 0
	for ; i < len(entries) && n < limit; i++ {
		enc.Encode(map[string]any{"ts": strconv.FormatInt(entries[i].ts, 10), "labels": map[string]string{"app": "f"}, "line": entries[i].line})
		n++
	}
	enc.Encode(map[string]any{"done": true, "limited": n == limit && i < len(entries)})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sseEntry writes one tail event of entry e.
func sseEntry(w http.ResponseWriter, e fakeEntry) {
	b, _ := json.Marshal(map[string]any{"ts": strconv.FormatInt(e.ts, 10), "labels": map[string]string{"app": "f"}, "line": e.line})
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

func sseStart(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, ": tail started\n\n")
	w.(http.Flusher).Flush()
}

// TestFollowRetriesUnavailable: the shutdown event (the message of older
// servers, or the reason of newer ones, whatever the message), then a
// draining server's 503, a proxy's 502: each is retried, and the entry
// stored meanwhile is shown once the tail is back.
func TestFollowRetriesUnavailable(t *testing.T) {
	t0 := time.Now().Add(-10 * time.Second).UnixNano()
	stored := []fakeEntry{{t0 + 1, "follow 1"}, {t0 + 2, "follow 2"}}
	var mu sync.Mutex
	tails, searches := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tail":
			mu.Lock()
			tails++
			n := tails
			mu.Unlock()
			switch n {
			case 1:
				sseStart(w)
				sseEntry(w, stored[0])
				fmt.Fprint(w, "data: {\"error\":\"server shutting down\"}\n\n") // a server before "reason"
			case 2:
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"error":"server is shutting down","message":"server is shutting down"}`)
			case 3:
				http.Error(w, "upstream down", http.StatusBadGateway)
			case 4:
				// A draining server: the tail ends at once, with the
				// reason (the message is not what is read).
				sseStart(w)
				fmt.Fprint(w, "data: {\"error\":\"going away\",\"reason\":\"shutting_down\"}\n\n")
			default:
				sseStart(w)
				sseEntry(w, fakeEntry{t0 + 3, "follow 3"})
				<-r.Context().Done()
			}
		case "/api/v1/search":
			mu.Lock()
			searches++
			mu.Unlock()
			serveFakeSearch(w, r, stored)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	start := time.Now()
	out, code, stderr := hayInProcessStderr(t, "search", "--server", srv.URL, "-f", "--no-stream", "--limit", "3", "follow")
	t.Logf("exit %d after %v", code, time.Since(start))
	if code != 0 || string(out) != "follow 1\nfollow 2\nfollow 3\n" {
		t.Fatalf("exit %d, output %q; stderr:\n%s", code, out, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if tails != 5 || searches != 2 {
		t.Errorf("%d tail requests (want 5), %d searches (want 2, after each tail accepted)", tails, searches)
	}
	for _, s := range []string{
		"the server is shutting down (a restart?); reconnecting",
		"still reconnecting: " + srv.URL + ": 503 Service Unavailable: server is shutting down",
		"still reconnecting: " + srv.URL + ": 502 Bad Gateway: upstream down",
		"the live tail is back",
	} {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr does not say %q:\n%s", s, stderr)
		}
	}
}

// TestFollowRefusedReconnect: a reconnection that the server refuses
// (a bad request, credentials, no such API) ends the follow with the
// server's message instead of retrying it for ever.
func TestFollowRefusedReconnect(t *testing.T) {
	for _, tc := range []struct {
		code int
		want string
	}{
		{http.StatusBadRequest, "400 Bad Request: no such thing"},
		{http.StatusUnauthorized, "401 Unauthorized: no such thing (set HAY_TOKEN"},
		{http.StatusForbidden, "403 Forbidden: no such thing"},
		{http.StatusNotFound, "404 Not Found: no such thing (is "},
	} {
		var mu sync.Mutex
		tails := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/api/v1/tail":
				mu.Lock()
				tails++
				n := tails
				mu.Unlock()
				if n > 1 {
					http.Error(w, `{"error":"no such thing"}`, tc.code)
					return
				}
				sseStart(w)
				sseEntry(w, fakeEntry{time.Now().UnixNano(), "follow 1"})
				// The connection is cut.
			case "/api/v1/search":
				serveFakeSearch(w, r, nil)
			}
		}))
		out, code, stderr := hayInProcessStderr(t, "search", "--server", srv.URL, "-f", "--no-stream", "follow")
		srv.Close()
		if code == 0 || code == 130 || string(out) != "follow 1\n" || !strings.Contains(stderr, tc.want) || tails != 2 {
			t.Errorf("%d: exit %d, output %q, %d tail requests (want 2); stderr (want %q):\n%s", tc.code, code, out, tails, tc.want, stderr)
		}
	}
}

// TestFollowBackoffTailEndsAtOnce: tails the server accepts and ends at
// once (one with the shutdown event, as a draining server's) are
// reconnected after a growing pause, not in a tight loop; a tail that
// delivered is reconnected at once.
func TestFollowBackoffTailEndsAtOnce(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time // when each tail was asked for
	now := time.Now().UnixNano()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/tail":
			mu.Lock()
			at = append(at, time.Now())
			n := len(at)
			mu.Unlock()
			sseStart(w)
			switch n {
			case 3:
				fmt.Fprint(w, "data: {\"error\":\"server shutting down\",\"reason\":\"shutting_down\"}\n\n")
			case 4:
				sseEntry(w, fakeEntry{now + 1, "follow 1"})
			case 5:
				sseEntry(w, fakeEntry{now + 2, "follow 2"})
				<-r.Context().Done()
			case 6:
				fmt.Fprint(w, "data: {\"error\":\"too many tails\"}\n\n")
			}
			// 1, 2: ends without a word.
		case "/api/v1/search":
			serveFakeSearch(w, r, nil)
		}
	}))
	t.Cleanup(srv.Close)
	out, code, stderr := hayInProcessStderr(t, "search", "--server", srv.URL, "-f", "--no-stream", "--limit", "2", "follow")
	mu.Lock()
	defer mu.Unlock()
	var d []time.Duration
	for i := 1; i < len(at); i++ {
		d = append(d, at[i].Sub(at[i-1]).Round(time.Millisecond))
	}
	t.Logf("pauses between tails: %v", d)
	// Backoff 250 ms, 500 ms, 1 s, each ±25%; then none after a tail
	// that delivered (its 4th attempt would wait 1.5 s at least).
	for i, least := range []time.Duration{187 * time.Millisecond, 375 * time.Millisecond, 750 * time.Millisecond} {
		if i < len(d) && d[i] < least {
			t.Errorf("tail %d came %v after tail %d: want at least %v", i+2, d[i], i+1, least)
		}
	}
	if code != 0 || string(out) != "follow 1\nfollow 2\n" || len(at) != 5 {
		t.Fatalf("exit %d, output %q, %d tails (want 5); stderr:\n%s", code, out, len(at), stderr)
	}
	if d[3] >= 1500*time.Millisecond {
		t.Errorf("the tail after one that delivered came %v later: the backoff was not reset", d[3])
	}
}

// TestFollowFutureEntryKeepsGap: an entry stamped 5 minutes ahead shown
// before a break does not move the gap's search past the break: the
// entry stored during the break, stamped now, is shown.
func TestFollowFutureEntryKeepsGap(t *testing.T) {
	s, err := server.New(server.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewServer(s.Handler())
	t.Cleanup(func() { backend.Close(); s.Close() })
	bu, _ := url.Parse(backend.URL)
	fp := &followProxy{}
	proxy := httptest.NewServer(fp.handler(bu))
	t.Cleanup(proxy.Close)
	type result struct {
		out    string
		code   int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		out, code, stderr := hayInProcessStderr(t, "search", "--server", proxy.URL, "-f", "--no-stream", "--limit", "3", "follow")
		done <- result{string(out), code, stderr}
	}()
	fp.waitFor(t, "the first tail", func() bool { return fp.tails == 1 })
	now := time.Now().UnixNano()
	pushLine(t, backend.URL, now+int64(5*time.Minute), "follow future")
	fp.waitFor(t, "an entry", func() bool { return strings.Count(fp.tailOut.String(), "data: ") >= 1 })
	fp.mu.Lock()
	fp.down = true
	fp.cancelTail()
	fp.mu.Unlock()
	pushLine(t, backend.URL, now+1, "follow during the gap")
	fp.mu.Lock()
	fp.down = false
	fp.mu.Unlock()
	fp.waitFor(t, "the second tail", func() bool { return fp.tails == 2 })
	select {
	case r := <-done:
		t.Fatalf("ended early: exit %d, out %q, stderr %q", r.code, r.out, r.stderr)
	case <-time.After(300 * time.Millisecond):
	}
	pushLine(t, backend.URL, time.Now().UnixNano(), "follow after")
	select {
	case r := <-done:
		if r.code != 0 || r.out != "follow future\nfollow during the gap\nfollow after\n" {
			t.Fatalf("exit %d, out %q; stderr:\n%s", r.code, r.out, r.stderr)
		}
	case <-time.After(10 * time.Second):
		pushLine(t, backend.URL, time.Now().UnixNano(), "follow extra") // lets --limit 3 end it
		r := <-done
		t.Fatalf("the entry stored during the break is lost: exit %d, out %q", r.code, r.out)
	}
}

// TestTailGapFutureBound: the latest time shown is bounded by the clock
// when shown, so the gap's search starts at most tailWindow before then.
func TestTailGapFutureBound(t *testing.T) {
	now := time.Now().UnixNano()
	g := newTailGap(now)
	g.shown(1, now+int64(5*time.Minute), now+10)
	if want := now + 10 - tailWindow; g.from() != want {
		t.Fatalf("from %d after an entry 5 min ahead, want %d (the time shown less the window)", g.from(), want)
	}
	g.shown(2, now+20, now+30) // a past entry later: the latest is its time
	if want := now + 20 - tailWindow; g.from() != want {
		t.Fatalf("from %d, want %d", g.from(), want)
	}
	if g.recent[1] != 1 || g.recent[2] != 1 {
		t.Fatalf("recent %v: both entries are remembered", g.recent)
	}
}

// captureStderr runs f with os.Stderr going to a file and returns what it
// wrote there.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stderr")
	file, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = file
	f()
	os.Stderr = old
	file.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFillGapLateStart: a gap's search that has to start after the time
// the tail was lost (only a clock set back does it) says so.
func TestFillGapLateStart(t *testing.T) {
	now := time.Now().UnixNano()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveFakeSearch(w, r, []fakeEntry{{now + int64(2*time.Minute), "later"}})
	}))
	t.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL)
	rs := &remoteSearch{client: srv.Client()}
	var buf bytes.Buffer
	p := &printer{w: bufio.NewWriter(&buf)}
	g := newTailGap(now)
	g.latest = now + int64(3*time.Minute)
	var n int64
	var err error
	msg := captureStderr(t, func() { n, err = rs.fillGap(context.Background(), base, url.Values{"q": {"x"}}, p, g, 0) })
	if err != nil || n != 1 || buf.String() != "later\n" {
		t.Fatalf("fillGap: %d entries, %v, output %q", n, err, buf.String())
	}
	if !strings.Contains(msg, "starts at "+time.Unix(0, now+int64(2*time.Minute)).UTC().Format(time.RFC3339Nano)+", after the tail was lost") {
		t.Fatalf("stderr %q does not say the search starts after the break", msg)
	}
}

// TestFillGapOracle fills a gap of more entries than the gap remembers
// (keep) from a server answering page by page: the search shows exactly
// the entries not shown before (equal entries told apart by count), and
// what it remembers stays bounded by keep (filled) and by the entries
// shown before (skipped), however large the gap; the new tail's repeats
// of the latest entries shown are recognised.
func TestFillGapOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 4))
	now := time.Now().UnixNano()
	base := now - int64(30*time.Second)
	// Before the break: 600 entries (some equal: same time and line),
	// 300 of them shown by the tail, the others arriving late. Then a
	// gap of 11400 entries stamped after the break.
	var entries []fakeEntry
	var shownBefore []fakeEntry
	for i := 0; i < 600; i++ {
		e := fakeEntry{base + int64(i/3)*1000, fmt.Sprintf("follow %d", i/3%150)}
		entries = append(entries, e)
		if r.IntN(2) == 0 {
			shownBefore = append(shownBefore, e)
		}
	}
	brk := base + 300*1000
	for i := 0; i < 11400; i++ {
		entries = append(entries, fakeEntry{brk + int64(i/2)*1000, fmt.Sprintf("gap %d", i/2%7)})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serveFakeSearch(w, r, entries)
	}))
	t.Cleanup(srv.Close)
	bu, _ := url.Parse(srv.URL)
	rs := &remoteSearch{client: srv.Client()}
	g := newTailGap(base)
	g.keep = 1000
	labels := map[string]string{"app": "f"}
	key := func(e fakeEntry) uint64 {
		m, err := rs.match(&remoteLine{Ts: strconv.FormatInt(e.ts, 10), Labels: labels, Line: e.line})
		if err != nil {
			t.Fatal(err)
		}
		return g.key(&m)
	}
	for _, e := range shownBefore {
		g.shown(key(e), e.ts, now)
	}
	g.lostAt = now
	before := len(g.recent)

	// The oracle: the entries in order, less the first occurrences of
	// those shown before.
	left := map[fakeEntry]int{}
	for _, e := range shownBefore {
		left[e]++
	}
	var want bytes.Buffer
	for _, e := range entries {
		if left[e] > 0 {
			left[e]--
			continue
		}
		want.WriteString(e.line + "\n")
	}

	var buf bytes.Buffer
	p := &printer{w: bufio.NewWriter(&buf)}
	n, err := rs.fillGap(context.Background(), bu, url.Values{"q": {"x"}}, p, g, 0)
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != want.String() {
		t.Fatalf("the gap's search showed %d entries, want %d; first difference at line %d", n, len(entries)-len(shownBefore), firstDiffLine(buf.Bytes(), want.Bytes()))
	}
	if len(g.skipped) > before || len(g.filled) > g.keep || len(g.fills) > g.keep || len(g.recent) > g.keep {
		t.Fatalf("remembered: skipped %d keys (entries shown before: %d), filled %d, fills %d, recent %d (keep %d)", len(g.skipped), before, len(g.filled), len(g.fills), len(g.recent), g.keep)
	}
	// The new tail delivers the last entries the search showed: each is
	// recognised once; an entry the search did not show is not.
	last := entries[len(entries)-1]
	first, second, third := g.repeated(key(last)), g.repeated(key(last)), g.repeated(key(last))
	if !first || !second || third {
		t.Fatalf("the last two (equal) entries the search showed are not recognised exactly twice")
	}
	if g.repeated(key(fakeEntry{last.ts + 1, "new"})) {
		t.Fatalf("an entry the search did not show counts as repeated")
	}
}

// TestTransient: what a follow retries, and what ends it.
func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&statusError{code: 429}, true},
		{&statusError{code: 502}, true},
		{&statusError{code: 503}, true},
		{&statusError{code: 504}, true},
		{&statusError{code: 400}, false},
		{&statusError{code: 401}, false},
		{&statusError{code: 403}, false},
		{&statusError{code: 404}, false},
		{&statusError{code: 500}, false},
		{&url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, true},
		{&url.Error{Op: "Get", URL: "http://x", Err: context.Canceled}, false},
		{fmt.Errorf("page 2: %w", errAnswerCut), true},
		{errors.New("the server: bad query"), false},
		{io.EOF, false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	// Retry-After is honoured, up to 30 s.
	g := newTailGap(0)
	if d := g.backoff(&statusError{code: 429, retryAfter: 3 * time.Second}); d != 3*time.Second {
		t.Errorf("backoff after Retry-After: 3 = %v", d)
	}
	if d := g.backoff(&statusError{code: 429, retryAfter: 300 * time.Second}); d != 30*time.Second {
		t.Errorf("backoff after Retry-After: 300 = %v", d)
	}
}
