package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/browsertest"

	"github.com/chromedp/chromedp"
)

// TestBrowserRegressions holds UI bugs found by the browser tests, each
// subtest failing on the UI as it was before its fix: "reconnecting…"
// kept after the tail reopened, a refused reconnect never retried, a tail
// error wiped out when the search ended, and editing From alone moving To
// by up to 999 ms.
func TestBrowserRegressions(t *testing.T) {
	env := newBrowserEnv(t)
	// Searches whose query contains "holdsearch" wait until release is
	// closed before the fake answers them.
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("/api/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/search" && strings.Contains(r.URL.Query().Get("q"), "holdsearch") {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		env.api.ServeHTTP(w, r)
	}))
	mux.Handle("/loki/", env.api)
	mux.Handle("/", Handler())
	env.srv.Close()
	env.srv = httptest.NewServer(mux)
	t.Cleanup(env.srv.Close)

	t.Run("reconnected but quiet", env.testReconnectedQuiet)
	t.Run("reconnect refused", env.testReconnectRefused)
	t.Run("reconnect forbidden", env.testReconnectForbidden)
	t.Run("tail error during search", func(t *testing.T) { env.testTailErrorDuringSearch(t, release) })
	t.Run("edit from keeps to", env.testEditFromKeepsTo)
}

// testReconnectedQuiet: after a dropped tail reconnects, the status should
// stop saying "reconnecting…" once the stream is open again, not only when
// the next entry arrives (a quiet query may have none for hours).
func (env *browserEnv) testReconnectedQuiet(t *testing.T) {
	env.drainTails()
	ctx := env.tab(t)
	traceTails(t, ctx)
	env.open(t, ctx, "/?q=tailctl&live=1")
	c := env.nextTail(t)
	c.do(t, tailCmd{op: "open"})
	waitStatus(t, ctx, "Live: 2 rows")
	c.do(t, tailCmd{op: "cut"})
	c = env.nextTail(t)
	waitStatus(t, ctx, "Live: 2 rows (reconnecting…)")
	c.do(t, tailCmd{op: "open"})
	browsertest.Wait(t, ctx, `window.__tails.length === 2 && window.__tails[1].state === 'open'`)
	deadline := time.Now().Add(2 * time.Second)
	for {
		s := text(t, ctx, "status")
		if s == "Live: 2 rows" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tail is open again but the status still says %q, want %q", s, "Live: 2 rows")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testReconnectRefused: a reconnect answered with an HTTP error (a proxy's
// 502 while the server restarts) made EventSource give up for good
// (readyState 2). The page should then either try again itself or say the
// tail stopped; it should not claim "reconnecting…" forever.
func (env *browserEnv) testReconnectRefused(t *testing.T) {
	env.drainTails()
	ctx := env.tab(t)
	traceTails(t, ctx)
	env.open(t, ctx, "/?q=tailctl&live=1")
	c := env.nextTail(t)
	c.do(t, tailCmd{op: "open"})
	waitStatus(t, ctx, "Live: 2 rows")
	c.do(t, tailCmd{op: "cut"})
	c = env.nextTail(t)
	c.do(t, tailCmd{op: "status", code: http.StatusBadGateway})
	browsertest.Wait(t, ctx, `window.__tails.length === 2 && window.__tails[1].status === 502`)
	n := env.api.count("tail")
	deadline := time.Now().Add(3 * time.Second)
	for {
		s := text(t, ctx, "status")
		if env.api.count("tail") > n {
			return // the page tries again
		}
		if !strings.Contains(s, "reconnecting") {
			return // the page says something else than reconnecting
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page gave up after a 502 (no request in 3 s), and the status still says %q", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testReconnectForbidden: a reconnect that the server refuses (401, 403:
// the credentials expired while it restarted) ends the tail with the
// server's message, as a tail's error event does, and is not tried again;
// one answered 503 is tried again after a pause.
func (env *browserEnv) testReconnectForbidden(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		env.drainTails()
		ctx := env.tab(t)
		traceTails(t, ctx)
		env.open(t, ctx, "/?q=tailctl&live=1")
		c := env.nextTail(t)
		c.do(t, tailCmd{op: "open"})
		waitStatus(t, ctx, "Live: 2 rows")
		c.do(t, tailCmd{op: "cut"})
		c = env.nextTail(t)
		waitStatus(t, ctx, "Live: 2 rows (reconnecting…)")
		c.do(t, tailCmd{op: "status", code: http.StatusServiceUnavailable, data: `{"error":"server is shutting down"}`})
		retried := time.Now()
		c = env.nextTail(t)
		if d := time.Since(retried); d < 180*time.Millisecond {
			t.Errorf("a 503 was tried again after %v, want a pause", d)
		}
		n := env.api.count("tail")
		msg := fmt.Sprintf("access denied %d", code)
		c.do(t, tailCmd{op: "status", code: code, data: `{"error":"` + msg + `"}`})
		waitStatus(t, ctx, "Live tail: "+msg)
		closedTails(t, ctx, 3)
		if s := browsertest.Eval[[]string](t, ctx, `[document.getElementById('status').className, String(document.getElementById('live').checked), location.search]`); s[0] != "error" || s[1] != "false" || s[2] != "?q=tailctl" {
			t.Errorf("%d: status class, Live, URL %q; want error, false, ?q=tailctl", code, s)
		}
		time.Sleep(800 * time.Millisecond)
		if m := env.api.count("tail"); m != n {
			t.Errorf("%d: %d tail requests after the refusal", code, m-n)
		}
	}
}

// testTailErrorDuringSearch: a tail error that arrives while the search is
// still running is shown, then overwritten by the search's count when the
// search ends: the user never learns the live tail stopped.
func (env *browserEnv) testTailErrorDuringSearch(t *testing.T, release chan struct{}) {
	env.drainTails()
	ctx := env.tab(t)
	traceTails(t, ctx)
	do(t, ctx, chromedp.Navigate(env.srv.URL+"/?q=tailctl+holdsearch&live=1"))
	c := env.nextTail(t)
	c.do(t, tailCmd{op: "open"})
	c.do(t, tailCmd{op: "data", data: `{"error":"server shutting down"}`})
	waitStatus(t, ctx, "Live tail: server shutting down")
	close(release)
	browsertest.Wait(t, ctx, `document.getElementById('status').dataset.state === 'done' && document.querySelector('#hist svg') !== null`)
	time.Sleep(200 * time.Millisecond)
	if s := text(t, ctx, "status"); s != "Live tail: server shutting down" {
		t.Fatalf("after the search ended the status is %q: the tail's error %q is gone", s, "Live tail: server shutting down")
	}
}

// testEditFromKeepsTo: the inputs show whole seconds, but a bar click or a
// drag sets from/to to the millisecond. Editing From alone re-reads To
// from its input and cuts its milliseconds: the range's end moves although
// the user did not touch To, and the entries in its last second go.
func (env *browserEnv) testEditFromKeepsTo(t *testing.T) {
	ctx := env.tab(t)
	setTZ(t, ctx)
	b := env.edgeB(t)
	to := b + edgeStep - 1 // what a click on B's bar sets
	env.open(t, ctx, fmt.Sprintf("/?q=bucketedge&from=%d&to=%d", b, to))
	endNs := strconv.FormatInt(to*1e6+999_999, 10)
	if e := env.api.last("search").Get("end"); e != endNs {
		t.Fatalf("test setup: end %s, want %s", e, endNs)
	}
	act(t, ctx, setValue("from", localInput(b-60_000)))
	req := env.api.last("search")
	if req.Get("start") != strconv.FormatInt((b-60_000)*1e6, 10) {
		t.Fatalf("start %s, want %d", req.Get("start"), (b-60_000)*1e6)
	}
	if e := req.Get("end"); e != endNs {
		got := env.entriesIn("bucketedge", (b-60_000)*1e6, mustInt(e))
		want := env.entriesIn("bucketedge", (b-60_000)*1e6, to*1e6+999_999)
		t.Fatalf("editing From moved the end from %s to %s (To untouched, URL to=%d): %d rows shown instead of %d, missing %q",
			endNs, e, to, len(got), len(want), lines(want[:len(want)-len(got)]))
	}
}

func mustInt(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
