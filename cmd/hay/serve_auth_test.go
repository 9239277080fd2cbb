package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stopServe ends a server started by startCrashServe with SIGTERM and
// returns everything it wrote to stderr.
func stopServe(t *testing.T, s *crashServer) string {
	t.Helper()
	// Serving means the start-up lines are written and SIGTERM is
	// caught: a signal right after "listening" could kill the process
	// before its warning, by SIGTERM's default action.
	if resp, err := http.Get(s.url + "/ready"); err == nil {
		resp.Body.Close()
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.wait()
	return s.logs()
}

// TestServeExposedWithoutAuthWarns: hay serve listening beyond loopback
// without --auth-file says that anyone who can connect may read and write
// every tenant; on loopback, or with an auth file, it does not (auth
// audit A9).
func TestServeExposedWithoutAuthWarns(t *testing.T) {
	const warning = "warning: no --auth-file"
	if logs := stopServe(t, startCrashServe(t, t.TempDir(), "--listen", "0.0.0.0:0")); !strings.Contains(logs, warning) {
		t.Errorf("--listen 0.0.0.0:0 without auth: no warning in\n%s", logs)
	}
	if logs := stopServe(t, startCrashServe(t, t.TempDir())); strings.Contains(logs, warning) {
		t.Errorf("loopback: warned\n%s", logs)
	}
	auth := filepath.Join(t.TempDir(), "auth")
	if err := os.WriteFile(auth, []byte("token secret1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if logs := stopServe(t, startCrashServe(t, t.TempDir(), "--listen", "0.0.0.0:0", "--auth-file", auth)); strings.Contains(logs, warning) {
		t.Errorf("with --auth-file: warned\n%s", logs)
	}
}

// TestServeAuthFailureLimitFlag: by default a client gets 20 failed
// logins and then 429; --auth-failures-per-minute -1 turns that off (for a
// proxy that limits, where every client shares its address).
func TestServeAuthFailureLimitFlag(t *testing.T) {
	auth := filepath.Join(t.TempDir(), "auth")
	if err := os.WriteFile(auth, []byte("basic carol carolpw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	guess := func(url string, i int) int {
		req, _ := http.NewRequest("GET", url+"/loki/api/v1/labels", nil)
		req.SetBasicAuth("carol", fmt.Sprint("guess", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		flags []string
		want  []int // the 20th and 21st guesses
	}{
		{nil, []int{401, 429}},
		{[]string{"--auth-failures-per-minute", "-1"}, []int{401, 401}},
		{[]string{"--auth-failures-per-minute", "0"}, []int{401, 401}},
	} {
		s := startCrashServe(t, t.TempDir(), append([]string{"--auth-file", auth}, c.flags...)...)
		for i := range 19 {
			if code := guess(s.url, i); code != 401 {
				t.Fatalf("%v: guess %d: %d", c.flags, i, code)
			}
		}
		if a, b := guess(s.url, 19), guess(s.url, 20); a != c.want[0] || b != c.want[1] {
			t.Errorf("%v: the 20th and 21st wrong passwords got %d and %d, want %v", c.flags, a, b, c.want)
		}
		stopServe(t, s)
	}
}

// TestServedTenantRefusesWriters: hay ingest, hay compact and hay verify
// --repair refuse a store that is a tenant of a running hay serve, even
// one serve has closed as idle (--max-open-tenants), which releases the
// store's own lock: ingest took such a tenant, and serve answered it with
// 500s until ingest ended (docs audit O1). Once serve stops they work.
func TestServedTenantRefusesWriters(t *testing.T) {
	data := t.TempDir()
	s := startCrashServe(t, data, "--max-open-tenants", "1")
	for _, tn := range []string{"t1", "t2"} { // t2's open closes t1
		req, _ := http.NewRequest("POST", s.url+"/loki/api/v1/push", strings.NewReader(fmt.Sprintf(`{"streams":[{"stream":{"app":"a"},"values":[["%d","x"]]}]}`, time.Now().UnixNano())))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Scope-OrgID", tn)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 204 {
			t.Fatalf("push to %s: %d", tn, resp.StatusCode)
		}
	}
	in := filepath.Join(t.TempDir(), "in.log")
	if err := os.WriteFile(in, []byte("2026-11-30T10:00:00Z y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t1 := filepath.Join(data, "t1")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"ingest", "--data", t1, in}, 1},
		{[]string{"compact", "--data", t1}, 1},
		{[]string{"verify", "--repair", "--data", t1}, 2},
	} {
		if _, code, stderr := hayInProcessStderr(t, c.args...); code != c.code || !strings.Contains(stderr, "is a tenant of the hay serve running on "+data) {
			t.Errorf("hay %q while served: exit %d, stderr %q", c.args, code, stderr)
		}
	}
	stopServe(t, s)
	if _, code, stderr := hayInProcessStderr(t, "ingest", "--data", t1, in); code != 0 {
		t.Fatalf("ingest after serve stopped: exit %d, %s", code, stderr)
	}
	if out, code := hayInProcess(t, "search", "--data", t1, "-c", ""); code != 0 || string(out) != "2\n" {
		t.Errorf("t1 after: %q, exit %d", out, code)
	}
}
