package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"haystack/internal/segment"
	"haystack/internal/store"
)

// TestBackgroundCompaction pushes enough to flush several segments
// (tiny head), lets the tenant's Writer compact them in the background and
// checks that a query answers the same before and after.
func TestBackgroundCompaction(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.Store = store.Options{HeadBytes: 4 << 10, Segment: segment.Options{BlockSize: 1 << 10}}
		c.CompactInterval = 5 * time.Millisecond
	})
	s := int64(1e9)
	for b := range 10 {
		var es []PushEntry
		for i := range 30 {
			line := fmt.Sprintf("batch %d entry %d", b, i)
			if i%7 == 0 {
				line += " timeout"
			}
			es = append(es, PushEntry{base - int64(600-b*30-i)*s, line})
		}
		e.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="api"}`, Entries: es}}), "Content-Type", "application/x-protobuf")
	}
	query := fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&limit=1000", q(`{app="api"} |= "timeout"`), base-700*s, base)
	code, before := e.get(query)
	if code != 200 || strings.Count(before, "timeout") != 50 {
		t.Fatalf("query: %d, %d matches (want 50): %s", code, strings.Count(before, "timeout"), before)
	}
	dir := filepath.Join(e.srv.cfg.DataDir, DefaultTenant)
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := os.ReadFile(filepath.Join(dir, "MANIFEST"))
		if err != nil {
			t.Fatal(err)
		}
		// Every flushed segment compacted (merged or not), holding at
		// least the first flush's entries.
		if n := strings.Count(string(m), `"name"`); n >= 1 && n == strings.Count(string(m), `"compacted":true`) {
			break
		}
		if time.Now().After(deadline) {
			ents, _ := os.ReadDir(filepath.Join(dir, "segments"))
			t.Fatalf("segments not compacted after 10 s: %d segment files; manifest:\n%s", len(ents), m)
		}
		time.Sleep(5 * time.Millisecond)
	}
	code, after := e.get(query)
	if code != 200 || dropStats(t, after) != dropStats(t, before) {
		t.Fatalf("after compaction: %d\n%s\nwant\n%s", code, after, before)
	}
}
