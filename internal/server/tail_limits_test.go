package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestTailReplayUnderQueryLimits: a Loki tail's replay of stored entries
// takes a query slot and runs under the query timeout, as a query_range
// does; it went around both, so any number of tails could scan the store
// at once (auth audit A12). And at most MaxTails tails run at once.
func TestTailReplayUnderQueryLimits(t *testing.T) {
	newTailEnv := func(mod func(*Config)) (*testEnv, string) {
		e := newEnv(t, func(c *Config) {
			c.MaxConcurrentQueries = 1
			c.QueryQueueWait = -1
			c.Now = time.Now
			if mod != nil {
				mod(c)
			}
		})
		now := time.Now().UnixNano()
		e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, now-int64(time.Second), "stored line"), "Content-Type", "application/json")
		return e, "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/loki/api/v1/tail?query=" + q(`{app="x"}`) + fmt.Sprintf("&start=%d", now-int64(time.Minute))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	read := func(url string) (string, int, error) {
		ws, resp, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			return "", code, err
		}
		defer ws.CloseNow()
		_, msg, err := ws.Read(ctx)
		return string(msg), 101, err
	}

	// The query timeout.
	_, url := newTailEnv(func(c *Config) { c.QueryTimeout = time.Nanosecond })
	if msg, _, err := read(url); err == nil || !strings.Contains(err.Error(), "replay timed out after 1ns (--query-timeout)") {
		t.Errorf("replay past the query timeout: %q, %v", msg, err)
	}

	// The slot: with the only one taken, 429 before the upgrade; once
	// free, the replay runs, and gives the slot back.
	e, url := newTailEnv(nil)
	e.srv.sem <- struct{}{}
	if _, code, err := read(url); code != http.StatusTooManyRequests {
		t.Errorf("tail with no query slot free: %d, %v; want 429", code, err)
	}
	<-e.srv.sem
	for range 3 {
		if msg, _, err := read(url); err != nil || !strings.Contains(msg, "stored line") {
			t.Fatalf("tail with a slot free: %q, %v", msg, err)
		}
	}
	if code, body := e.get("/loki/api/v1/labels"); code != 200 {
		t.Fatalf("a query after the tails: %d %s (a slot not given back?)", code, body)
	}

	// MaxTails: UI tails (SSE) and Loki tails count together.
	e, url = newTailEnv(func(c *Config) { c.MaxTails = 2 })
	ws1, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	sse, err := http.Get(e.ts.URL + "/api/v1/tail?q=" + q(`{app="x"}`))
	if err != nil || sse.StatusCode != 200 {
		t.Fatalf("UI tail: %v %v", sse, err)
	}
	if _, code, _ := read(url); code != http.StatusTooManyRequests {
		t.Errorf("a third tail with --max-tails 2: %d, want 429", code)
	}
	if r, err := http.Get(e.ts.URL + "/api/v1/tail?q=" + q(`{app="x"}`)); err != nil || r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a third (UI) tail: %v %v, want 429", r, err)
	} else {
		r.Body.Close()
	}
	ws1.Close(websocket.StatusNormalClosure, "")
	sse.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		msg, _, err := read(url)
		if err == nil && strings.Contains(msg, "stored line") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a tail after the others closed: %q, %v", msg, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
