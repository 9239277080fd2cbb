package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"haystack/internal/browsertest"
	"haystack/internal/server"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// restartHay is the real server (server.New, served as `hay serve` does:
// http.Server with StopTails on shutdown) on a fixed address, which the
// test stops gracefully and starts again on the same data.
type restartHay struct {
	t    *testing.T
	dir  string
	addr string

	mu       sync.Mutex
	tails    []time.Time // when each /api/v1/tail request came
	refused  time.Time   // when the one answered 503 came
	refuse   bool        // answer the next tail request 503
	hs       *http.Server
	srv      *server.Server
	serveErr chan error
	// subscribed receives one value per tail answered 200: the server
	// subscribes the tail before it sends the status.
	subscribed chan struct{}
	// onSubscribe, if set, runs once when a tail is subscribed, before
	// the page has its answer.
	onSubscribe func()
}

func (h *restartHay) newServer() *server.Server {
	h.t.Helper()
	// Without detected_level, as newSecEnv.
	s, err := server.New(server.Config{DataDir: h.dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), NoLogLevelDiscovery: true})
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// statusWriter notices a tail's 200; Unwrap keeps the server's
// ResponseController (flushes, write deadlines) working through it.
type statusWriter struct {
	http.ResponseWriter
	ok func()
}

func (w *statusWriter) WriteHeader(code int) {
	if code == http.StatusOK {
		w.ok()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serve starts s on h.addr (listening again after a stop).
func (h *restartHay) serve(s *server.Server) {
	h.t.Helper()
	ln, err := net.Listen("tcp", h.addr)
	if err != nil {
		h.t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	handler := s.Handler()
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/tail" {
			h.mu.Lock()
			h.tails = append(h.tails, time.Now())
			refuse := h.refuse
			if refuse {
				h.refuse, h.refused = false, time.Now()
			}
			h.mu.Unlock()
			if refuse {
				// As a server draining before a restart answers.
				w.Header().Set("Retry-After", "1")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `{"error":"server is shutting down"}`)
				return
			}
			w = &statusWriter{ResponseWriter: w, ok: func() {
				h.mu.Lock()
				f := h.onSubscribe
				h.onSubscribe = nil
				h.mu.Unlock()
				if f != nil {
					f()
				}
				h.subscribed <- struct{}{}
			}}
		}
		handler.ServeHTTP(w, r)
	})}
	hs.RegisterOnShutdown(s.StopTails)
	h.mu.Lock()
	h.hs, h.srv = hs, s
	h.mu.Unlock()
	h.serveErr = make(chan error, 1)
	go func() { h.serveErr <- hs.Serve(ln) }()
}

// stop shuts the server down as `hay serve` does on SIGTERM: Shutdown
// (its StopTails sends each tail the shutdown event), then Close.
func (h *restartHay) stop() {
	h.t.Helper()
	h.mu.Lock()
	hs, s := h.hs, h.srv
	h.hs, h.srv = nil, nil
	h.mu.Unlock()
	if hs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		h.t.Errorf("shutdown: %v", err)
	}
	if err := <-h.serveErr; !errors.Is(err, http.ErrServerClosed) {
		h.t.Errorf("serve: %v", err)
	}
	if err := s.Close(); err != nil {
		h.t.Errorf("close: %v", err)
	}
}

func (h *restartHay) tailCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.tails)
}

func (h *restartHay) waitSubscribed(what string) {
	h.t.Helper()
	select {
	case <-h.subscribed:
	case <-time.After(8 * time.Second):
		h.t.Fatalf("%s: no live tail subscribed", what)
	}
}

// restartEntry is one pushed entry, as the page should show it.
type restartEntry struct {
	ts   int64
	line string
}

// pushJSON is a Loki JSON push of es in one stream.
func pushJSON(es []restartEntry) string {
	var vals []string
	for _, e := range es {
		vals = append(vals, fmt.Sprintf("[%q,%q]", strconv.FormatInt(e.ts, 10), e.line))
	}
	return `{"streams":[{"stream":{"app":"restart"},"values":[` + strings.Join(vals, ",") + `]}]}`
}

// TestBrowserTailRestart: the server restarts under a page's live tail.
// The tail ends with the shutdown event; the page must say it is
// reconnecting (not an error), keep trying while the server is down and
// while it answers 503 (waiting at least its Retry-After), and once back
// show what was stored meanwhile, then the live entries: every entry
// exactly once, in order. A stored entry of the last minute that the
// search under the tail showed, and the tail's own entries, are found
// again by the search for the gap and must not be shown twice. Escape
// while reconnecting ends the tail for good.
func TestBrowserTailRestart(t *testing.T) {
	h := &restartHay{t: t, dir: t.TempDir(), addr: "127.0.0.1:0", subscribed: make(chan struct{}, 16)}
	h.serve(h.newServer())
	t.Cleanup(h.stop)
	base := "http://" + h.addr

	t0 := time.Now()
	at := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	stored := []restartEntry{
		{at(-5 * time.Minute), "rsmark stored old 1"},
		{at(-5*time.Minute + time.Millisecond), "rsmark stored old 2"},
		{at(-10 * time.Second), "rsmark stored recent"}, // inside the gap search's minute
	}
	lokiPush(t, base, pushJSON(stored))
	var want []restartEntry // newest first, as the page shows them
	for _, e := range stored {
		want = append([]restartEntry{e}, want...)
	}
	live := func(tag string, n int) []restartEntry {
		var es []restartEntry
		for i := range n {
			es = append(es, restartEntry{time.Now().UnixNano() + int64(i), fmt.Sprintf("rsmark %s %d", tag, i+1)})
		}
		for _, e := range es {
			want = append([]restartEntry{e}, want...)
		}
		return es
	}

	tab, cancelTab := chromedp.NewContext(browsertest.New(t))
	ctx, cancel := context.WithTimeout(tab, 20*time.Second)
	defer cancel()
	defer cancelTab()
	// The status line's every text, to see the states it went through.
	const watchStatus = `window.__statuses = [];
		document.addEventListener('DOMContentLoaded', () => {
			const s = document.getElementById('status');
			new MutationObserver(() => window.__statuses.push([s.textContent, s.className, s.dataset.tail || '', s.title])).observe(s, {childList: true, characterData: true, subtree: true, attributes: true});
		});`
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watchStatus}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Navigate(base+"/?q=rsmark&live=1"))
	browsertest.Wait(t, ctx, browsertest.Settled)
	h.waitSubscribed("page opened")
	status := func() string {
		return browsertest.Eval[string](t, ctx, `document.getElementById('status').textContent`)
	}
	waitStatus := func(want string) {
		t.Helper()
		browsertest.Wait(t, ctx, `document.getElementById('status').textContent === `+strconv.Quote(want))
	}
	waitStatus("Live: 3 rows")

	lokiPush(t, base, pushJSON(live("before", 3)))
	waitStatus("Live: 6 rows")

	// A graceful stop: the tail gets the shutdown event.
	h.stop()
	const reconnecting = "Live: 6 rows (reconnecting…)"
	deadline := time.Now().Add(5 * time.Second)
	for s := status(); s != reconnecting; s = status() {
		if time.Now().After(deadline) {
			t.Fatalf("after the server's shutdown event the status says %q, want %q", s, reconnecting)
		}
		time.Sleep(15 * time.Millisecond)
	}
	if st := browsertest.Eval[[]string](t, ctx, `[document.getElementById('status').className, String(document.getElementById('live').checked)]`); st[0] == "error" || st[1] != "true" {
		t.Errorf("reconnecting after the shutdown event: status class %q, Live ticked %s; want no error class, Live ticked", st[0], st[1])
	}
	if n := browsertest.Eval[int](t, ctx, `window.__statuses.filter(s => s[3] === 'Live tail: the server is shutting down (a restart?); reconnecting').length`); n == 0 {
		t.Errorf("the status's title never said the server is shutting down: %q", browsertest.Eval[[][]string](t, ctx, `window.__statuses`))
	}
	t.Logf("reconnecting %v after the start", time.Since(t0).Round(time.Millisecond))

	// While the server is down, entries reach its data directly (the next
	// server's handler, not listening yet): a late one stamped before the
	// latest row shown, and new ones.
	s2 := h.newServer()
	late := restartEntry{at(-20 * time.Second), "rsmark down late"}
	want = append([]restartEntry{late}, want...)
	down := append([]restartEntry{late}, live("down", 3)...)
	pushTo := func(s *server.Server, es []restartEntry) {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/loki/api/v1/push", strings.NewReader(pushJSON(es))))
		if rec.Code != http.StatusNoContent {
			t.Errorf("push to the server: %d %s", rec.Code, rec.Body)
		}
	}
	pushTo(s2, down)
	// The page tries again, and fails: nothing listens.
	tries := h.tailCount()
	browsertest.Wait(t, ctx, `window.__statuses.some(s => s[3].startsWith('Live tail: the server is unreachable'))`)
	if s := status(); s != reconnecting {
		t.Fatalf("while the server is down the status says %q, want %q", s, reconnecting)
	}

	// Back on the same address; its first tail is answered 503. When the
	// next is subscribed, an entry is pushed before the page learns it:
	// the new tail sends it, and the page's search for the gap finds it.
	both := live("both", 1)
	h.mu.Lock()
	h.refuse = true
	h.onSubscribe = func() { pushTo(s2, both) }
	h.mu.Unlock()
	h.serve(s2)
	h.waitSubscribed("after the restart")
	h.mu.Lock()
	var next time.Time
	for _, at := range h.tails {
		if at.After(h.refused) {
			next = at
			break
		}
	}
	refused := h.refused
	h.mu.Unlock()
	if refused.IsZero() || next.Sub(refused) < time.Second {
		t.Errorf("the tail was tried again %v after a 503 with Retry-After: 1", next.Sub(refused))
	}
	if n := h.tailCount() - tries; n != 2 {
		t.Errorf("%d tail requests after the restart, want 2 (the 503 and the one that worked)", n)
	}
	checkRows := func(when string) {
		t.Helper()
		// Any repeat would be on screen by now.
		time.Sleep(300 * time.Millisecond)
		var gotS, wantS []string
		for _, r := range pageRows(t, ctx) {
			gotS = append(gotS, r.TS+" "+r.Line)
		}
		for _, e := range want {
			wantS = append(wantS, strconv.FormatInt(e.ts, 10)+" "+e.line)
		}
		if strings.Join(gotS, "\n") != strings.Join(wantS, "\n") {
			t.Fatalf("rows %s:\n%s\nwant (every entry once, newest first):\n%s", when, strings.Join(gotS, "\n"), strings.Join(wantS, "\n"))
		}
		if s, w := status(), fmt.Sprintf("Live: %d rows", len(want)); s != w {
			t.Fatalf("status %s: %q, want %q", when, s, w)
		}
	}
	browsertest.Wait(t, ctx, `(s => s.startsWith('Live: ') && !s.includes('reconnecting'))(document.getElementById('status').textContent)`)
	t.Logf("reconnected %v after the start", time.Since(t0).Round(time.Millisecond))
	checkRows("after the reconnection")

	lokiPush(t, base, pushJSON(live("after", 2)))
	waitStatus(fmt.Sprintf("Live: %d rows", len(want)))
	checkRows("after the restart")
	if s := browsertest.Eval[[][]string](t, ctx, `window.__statuses.filter(s => s[1] === 'error')`); len(s) > 0 {
		t.Errorf("the status showed an error during the restart: %q", s)
	}
	if s := browsertest.Eval[[][]string](t, ctx, `window.__statuses.filter(s => s[2] === 'reconnecting')`); len(s) == 0 {
		t.Error("the status never was in the reconnecting state")
	}

	// Escape while reconnecting: no more tries.
	h.stop()
	waitStatus(fmt.Sprintf("Live: %d rows (reconnecting…)", len(want)))
	run(t, ctx, chromedp.KeyEvent(kb.Escape))
	browsertest.Wait(t, ctx, `!document.getElementById('live').checked && location.search === '?q=rsmark'`)
	n := h.tailCount()
	h.serve(h.newServer())
	time.Sleep(time.Second)
	if m := h.tailCount(); m != n {
		t.Errorf("%d tail requests after Escape", m-n)
	}
	if s := status(); strings.HasPrefix(s, "Live") {
		t.Errorf("status after Escape: %q", s)
	}
}
