package server

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadyDetailOnlyWithoutAuth: once a tenant's store failed, /ready
// answers 503; with --auth-file it answers without credentials, so it no
// longer names the tenant or the data directory (auth audit A2); without
// auth it still says which tenant and why.
func TestReadyDetailOnlyWithoutAuth(t *testing.T) {
	for _, withAuth := range []bool{true, false} {
		var hdr []string
		cfg := Config{DataDir: t.TempDir(), Now: func() time.Time { return time.Unix(0, base) }}
		if withAuth {
			auth, err := ParseAuth(strings.NewReader("basic alice pw-a secretcorp\n"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Auth = auth
		}
		srv, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		// Close reports the failed store: expected here.
		t.Cleanup(func() { hs.Close(); srv.Close() })
		e := &testEnv{t: t, srv: srv, ts: hs}
		if withAuth {
			hdr = []string{"Authorization", basicHeader("alice", "pw-a")}
		} else {
			hdr = []string{"X-Scope-OrgID", "secretcorp"}
		}
		hdr = append(hdr, "Content-Type", "application/json")
		e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "one"), hdr...)
		if code, body := e.get("/ready"); code != 200 {
			t.Fatalf("/ready before: %d %s", code, body)
		}
		// The store notices its directory gone at the next commit.
		if err := os.RemoveAll(filepath.Join(e.srv.cfg.DataDir, "secretcorp")); err != nil {
			t.Fatal(err)
		}
		e.do("POST", "/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "two"), hdr...)
		code, body := e.get("/ready") // no credentials
		if code != 503 {
			t.Fatalf("auth %v: /ready %d, want 503 once a store failed", withAuth, code)
		}
		leaks := strings.Contains(body, "secretcorp") || strings.Contains(body, e.srv.cfg.DataDir)
		if leaks == withAuth {
			t.Errorf("auth %v: /ready says %q", withAuth, body)
		}
	}
}
