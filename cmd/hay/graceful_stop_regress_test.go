package main

// Shutdown cases found by graceful_stop_test.go, each failing before its
// fix (521a830): a tail on a tenant opened after StopTails held the stop
// for 30 s, and a WebSocket tail lost what it held when the process
// exited first.

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// TestServeStopTailNewTenant: an SSE tail (/api/v1/tail) request that is
// in flight when SIGTERM comes (here: still in its first bcrypt check,
// which takes a while on purpose), on a tenant the server has not opened
// yet, must end with the shutdown event and let `hay serve` exit 0 at
// once ("SIGTERM or SIGINT stops accepting, finishes in-flight requests,
// flushes and exits 0"). existing=true is the control: the same on a
// tenant whose store exists (OpenExisting opened it before StopTails).
func TestServeStopTailNewTenant(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), 13)
	if err != nil {
		t.Fatal(err)
	}
	for _, existing := range []bool{true, false} {
		root := t.TempDir()
		if existing {
			os.MkdirAll(filepath.Join(root, "newtenant"), 0o755)
		}
		auth := filepath.Join(t.TempDir(), "auth")
		os.WriteFile(auth, []byte("basic u "+string(hash)+"\n"), 0o600)
		srv := startCrashServe(t, root, "--auth-file", auth)
		type result struct {
			status int
			event  string
			err    error
		}
		res := make(chan result, 1)
		go func() {
			req, _ := http.NewRequest("GET", srv.url+"/api/v1/tail?q=x", nil)
			req.SetBasicAuth("u", "pw")
			req.Header.Set("X-Scope-OrgID", "newtenant")
			resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
			if err != nil {
				res <- result{err: err}
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for {
				l, err := br.ReadString('\n')
				if err != nil {
					res <- result{status: resp.StatusCode, err: err}
					return
				}
				if strings.HasPrefix(l, "data: ") {
					res <- result{status: resp.StatusCode, event: strings.TrimSpace(l)}
					return
				}
			}
		}()
		time.Sleep(100 * time.Millisecond) // the request is in its bcrypt check
		sigAt := time.Now()
		srv.cmd.Process.Signal(syscall.SIGTERM)
		r := <-res
		gotAt := time.Since(sigAt)
		werr := srv.wait()
		took := time.Since(sigAt)
		t.Logf("existing=%v: status %d event %q err %v after %v; exit %v after %v", existing, r.status, r.event, r.err, gotAt.Round(time.Millisecond), werr, took.Round(time.Millisecond))
		if werr != nil || took > 5*time.Second || r.event != `data: {"error":"server shutting down","reason":"shutting_down"}` {
			t.Errorf("existing=%v: want the shutdown event and exit 0 within 5 s\nserver log:\n%s", existing, srv.logs())
		}
	}
}

// TestServeStopDelayedWSTail: a /loki/api/v1/tail with delay_for=5 holds
// back what was committed in the last 5 s; on SIGTERM the server sends
// them (tail.go: send(delayed.take(...)) before the close) and then
// closes with 1001 "server shutting down". The WebSocket is hijacked, so
// http.Server.Shutdown does not wait for it: does the process exit
// before the tail's last message and close frame are out?
func TestServeStopDelayedWSTail(t *testing.T) {
	for round := range 3 {
		root := t.TempDir()
		srv := startCrashServe(t, root)
		tl := openWSTail(t, srv.url, "fake", time.Now().UnixNano(), "5")
		// Acknowledged pushes of 40000 entries, all within delay_for.
		const n = 40000
		var lines []string
		for b := range 8 {
			var sb strings.Builder
			sb.WriteString(`{"streams":[{"stream":{"part":"a"},"values":[`)
			now := time.Now().UnixNano()
			for i := range n / 8 {
				if i > 0 {
					sb.WriteString(",")
				}
				l := fmt.Sprintf("delayed b=%d i=%d %s", b, i, strings.Repeat("q", 100))
				lines = append(lines, l)
				fmt.Fprintf(&sb, `["%d","%s"]`, now+int64(i), l)
			}
			sb.WriteString(`]}]}`)
			resp, err := http.Post(srv.url+"/loki/api/v1/push", "application/json", strings.NewReader(sb.String()))
			if err != nil || resp.StatusCode != 204 {
				t.Fatalf("push: %v %v", err, resp)
			}
			resp.Body.Close()
		}
		sigAt := time.Now()
		srv.cmd.Process.Signal(syscall.SIGTERM)
		werr := srv.wait()
		<-tl.done
		t.Logf("round %d: exit %v after %v; tail got %d of %d acknowledged entries, ended: %s", round, werr, time.Since(sigAt).Round(time.Millisecond), len(tl.lines), len(lines), tl.end)
		if werr != nil || !tl.ok || len(tl.lines) != len(lines) {
			t.Errorf("round %d: want exit 0, all %d entries, then close 1001 \"server shutting down\"", round, len(lines))
		}
	}
}
