package server

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHeadFlushIdle: a tenant's head that has had no entry for
// HeadFlushIdle is flushed into a segment, its entries still answered;
// with the flush off (negative) it stays in the WAL. Before, a tenant
// that pushed a little kept its head in memory until it reached
// --head-bytes (finding E5: 20 quiet tenants held 903 MB).
func TestHeadFlushIdle(t *testing.T) {
	for _, idle := range []time.Duration{200 * time.Millisecond, -1} {
		e := newEnv(t, func(c *Config) { c.HeadFlushIdle = idle; c.HeadFlushAge = -1 })
		e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"q"}`, base, "one", "two"), "Content-Type", "application/json")
		segs := func() int {
			m, _ := filepath.Glob(filepath.Join(e.srv.cfg.DataDir, "fake", "segments", "*.seg"))
			return len(m)
		}
		// The store checks once a second at most (FlushCheck's floor):
		// an enabled flush comes within 1.5 s.
		wait := 3 * time.Second
		if idle < 0 {
			wait = 1500 * time.Millisecond
		}
		deadline := time.Now().Add(wait)
		for segs() == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if got := segs(); (got > 0) != (idle > 0) {
			t.Errorf("flush-idle %v: %d segments after %v", idle, got, wait)
		}
		code, body := e.get("/loki/api/v1/query_range?query=" + q(`{app="q"}`) + "&start=1&end=" + strconv.FormatInt(base+10, 10))
		if code != 200 || !strings.Contains(body, `"one"`) || !strings.Contains(body, `"two"`) {
			t.Errorf("flush-idle %v: query %d %s", idle, code, body)
		}
	}
}
