package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTenantNamedLikeStoreFiles: tenants named like a store's own files
// (MANIFEST, wal, segments, LOCK) are tenants like any other, and a
// server restarted on their data directory serves every tenant. One push
// to tenant MANIFEST made the next hay serve take the data directory for
// a single store and refuse to start (auth audit A1).
func TestTenantNamedLikeStoreFiles(t *testing.T) {
	dir := t.TempDir()
	tenants := []string{"MANIFEST", "wal", "segments", "LOCK", "fake"}
	start := func() *testEnv {
		return newEnv(t, func(c *Config) { c.DataDir = dir })
	}
	e := start()
	for i, tn := range tenants {
		body := fmt.Sprintf(`{"streams":[{"stream":{"app":"a"},"values":[["%d","line of %s"]]}]}`, base+int64(i), tn)
		e.mustPush("/loki/api/v1/push", []byte(body), "Content-Type", "application/json", "X-Scope-OrgID", tn)
	}
	e.ts.Close()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := Config{DataDir: dir, Now: func() time.Time { return time.Unix(0, base) }}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	s.Close()
	e2 := start()
	for _, tn := range tenants {
		code, body := e2.get("/loki/api/v1/query_range?query="+q(`{app="a"}`)+fmt.Sprintf("&start=%d&end=%d", base-1e9, base+1e9), "X-Scope-OrgID", tn)
		if code != 200 || strings.Count(body, "line of ") != 1 || !strings.Contains(body, "line of "+tn+`"`) {
			t.Fatalf("tenant %s after restart: %d %s", tn, code, body)
		}
	}
}
