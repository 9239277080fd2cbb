package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"haystack/internal/server"
)

// followProxy stands between hay search -f and a hay serve: it can cut
// the live tail and refuse connections for a while, as a restart or a
// network drop would, and run a hook before forwarding a search.
type followProxy struct {
	mu         sync.Mutex
	down       bool
	cancelTail context.CancelFunc
	tails      int          // tail connections forwarded
	tailOut    bytes.Buffer // what the tails sent the client
	onSearch   func()
}

func (fp *followProxy) handler(backend *url.URL) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(backend)
	rp.FlushInterval = -1
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fp.mu.Lock()
		down, hook := fp.down, fp.onSearch
		fp.mu.Unlock()
		if down {
			// A connection refused, as far as the client can tell.
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		switch r.URL.Path {
		case "/api/v1/tail":
			ctx, cancel := context.WithCancel(r.Context())
			fp.mu.Lock()
			fp.cancelTail = cancel
			fp.tails++
			fp.mu.Unlock()
			rp.ServeHTTP(&copyingWriter{ResponseWriter: w, mu: &fp.mu, copy: &fp.tailOut}, r.WithContext(ctx))
			return
		case "/api/v1/search":
			if hook != nil {
				hook()
			}
		}
		rp.ServeHTTP(w, r)
	})
}

// copyingWriter keeps a copy of a streamed response.
type copyingWriter struct {
	http.ResponseWriter
	mu   *sync.Mutex
	copy *bytes.Buffer
}

func (c *copyingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.copy.Write(p)
	c.mu.Unlock()
	return c.ResponseWriter.Write(p)
}

func (c *copyingWriter) Flush() { c.ResponseWriter.(http.Flusher).Flush() }

// waitFor polls cond under the proxy's lock.
func (fp *followProxy) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		fp.mu.Lock()
		ok := cond()
		fp.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSearchServerFollowReconnects: hay search --server -f survives a
// broken tail. Entries stored while it was disconnected are shown from a
// search once it is back (one of them at the very time of the last entry
// shown before), an entry both that search and the new tail deliver is
// shown once, and every entry is shown exactly once, in order.
func TestSearchServerFollowReconnects(t *testing.T) {
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

	t0 := time.Now().UnixNano()
	push := func(i int, ts int64) {
		t.Helper()
		body := fmt.Sprintf(`{"streams":[{"stream":{"app":"f"},"values":[["%d","not this %d"],["%d","{\"follow\":%d}"]]}]}`, ts, i, ts, i)
		resp, err := http.Post(backend.URL+"/loki/api/v1/push", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("push %d: %s", i, resp.Status)
		}
	}
	type result struct {
		out    string
		code   int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		out, code, stderr := hayInProcessStderr(t, "search", "--server", proxy.URL, "-f", "--no-stream", "--limit", "9", `{"follow":`)
		done <- result{string(out), code, stderr}
	}()

	fp.waitFor(t, "the first tail", func() bool { return fp.tails == 1 })
	for i := 1; i <= 3; i++ {
		push(i, t0+int64(i))
	}
	fp.waitFor(t, "three entries on the first tail", func() bool { return strings.Count(fp.tailOut.String(), "data: ") >= 3 })

	// The tail breaks; entries arrive meanwhile, the first at the time of
	// the last one shown.
	fp.mu.Lock()
	fp.down = true
	fp.cancelTail()
	fp.mu.Unlock()
	push(4, t0+3)
	push(5, t0+5)
	push(6, t0+6)
	var once sync.Once
	hooked := make(chan struct{})
	fp.mu.Lock()
	fp.onSearch = func() {
		// The new tail is connected: entry 7 reaches both it and the
		// search about to run.
		once.Do(func() { push(7, t0+7); close(hooked) })
	}
	fp.down = false
	fp.mu.Unlock()

	select {
	case <-hooked:
	case r := <-done:
		t.Fatalf("hay search -f ended before reconnecting: exit %d, %q, stderr %q", r.code, r.out, r.stderr)
	case <-time.After(20 * time.Second):
		t.Fatal("hay search -f did not search the gap after the tail came back")
	}
	push(8, t0+8)
	push(9, t0+9)

	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("hay search -f did not end after --limit 9 entries")
	}
	var want strings.Builder
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&want, "{\"follow\":%d}\n", i)
	}
	if r.code != 0 || r.out != want.String() {
		t.Fatalf("exit %d, output:\n%s\nwant:\n%s\nstderr: %s", r.code, r.out, want.String(), r.stderr)
	}
	for _, msg := range []string{"lost the server's live tail; reconnecting", "the live tail is back"} {
		if !strings.Contains(r.stderr, msg) {
			t.Errorf("stderr %q does not say %q", r.stderr, msg)
		}
	}
}
