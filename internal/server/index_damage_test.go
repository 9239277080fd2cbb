package server

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"haystack/internal/store"
)

// TestServerLogsIndexDamage: a tenant whose segment has a damaged skip
// index head answers queries exactly (the segment opens without its
// index, review 14 F3) and the server logs it once, naming the tenant
// and the segment, for an operator to run hay verify; before, nothing
// was logged (hay search warned, hay serve did not).
func TestServerLogsIndexDamage(t *testing.T) {
	data := t.TempDir()
	tdir := filepath.Join(data, "fake")
	st, err := store.Open(tdir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sid := st.Stream(`{app="d"}`)
	var b store.Batch
	for i := range 100 {
		b.Entries = append(b.Entries, store.Entry{Time: base + int64(i), Stream: sid, Line: fmt.Appendf(nil, "line %d needle-%d", i, i%10)})
	}
	if err := st.Append(&b); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(tdir, "segments", "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	d, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	ft := d[len(d)-72:]
	d[binary.LittleEndian.Uint64(ft[24:])] ^= 0x04 // the skip index's first byte
	if err := os.WriteFile(segs[0], d, 0o644); err != nil {
		t.Fatal(err)
	}

	var logs syncBuffer
	e := newEnv(t, func(c *Config) {
		c.DataDir = data
		c.CompactInterval = -1
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	q := url.Values{"query": {`{app="d"} |= "needle-3"`}, "start": {fmt.Sprint(base)}, "end": {fmt.Sprint(base + 1000)}, "limit": {"1000"}}
	for range 2 {
		code, body := e.get("/loki/api/v1/query_range?" + q.Encode())
		if code != 200 || strings.Count(body, "needle-3") != 10 {
			t.Fatalf("query_range: %d, %d lines with needle-3 (want 10): %.300s", code, strings.Count(body, "needle-3"), body)
		}
	}
	msg := "skip index damaged"
	if got := strings.Count(logs.String(), msg); got != 1 || !strings.Contains(logs.String(), filepath.Base(segs[0])) || !strings.Contains(logs.String(), "tenant=fake") {
		t.Fatalf("%q logged %d times, want once naming the tenant and %s:\n%s", msg, got, filepath.Base(segs[0]), logs.String())
	}
}
