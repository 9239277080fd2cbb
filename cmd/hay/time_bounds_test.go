package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSubNanosecondBounds: --since and --until with more than nine
// fraction digits (a tool pasting picoseconds) keep the entries on the
// right side of the bound (since <= t < until): time.Parse drops the
// digits past the ninth, which put an entry stamped at the truncated
// instant on the wrong side (review 15 H100-4).
func TestSubNanosecondBounds(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.log")
	if err := os.WriteFile(in, []byte("2026-11-01T01:00:01Z at the second\n2026-11-01T01:00:01.000000001Z a nanosecond later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "d")
	if _, code := hayInProcess(t, "ingest", "--data", data, in); code != 0 {
		t.Fatalf("ingest: exit %d", code)
	}
	for _, c := range []struct {
		flag, bound, want string
	}{
		{"--until", "2026-11-01T01:00:01.0000000001Z", "1\n"},   // after the first entry, before the second
		{"--since", "2026-11-01T01:00:01.0000000001Z", "1\n"},   // after the first entry: only the second
		{"--until", "2026-11-01T01:00:01.0000000011Z", "2\n"},   // 1.1 ns: past both
		{"--since", "2026-11-01T01:00:01.000000000000Z", "2\n"}, // zeros past the ninth digit change nothing
		{"--until", "2026-11-01T01:00:01.000000001000Z", "1\n"},
		{"--since", "2026-11-01 01:00:01.0000000009", "1\n"}, // no zone (UTC), a space
	} {
		out, _ := hayInProcess(t, "search", "--data", data, "-c", c.flag, c.bound, "")
		if string(out) != c.want {
			t.Errorf("%s %s counts %q, want %q", c.flag, c.bound, out, c.want)
		}
	}
}
