package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"haystack/internal/segment"
	"haystack/internal/store"
)

// jsonTimes runs hay search --json with an empty PATTERN and returns each entry's line and
// time, in output order.
func jsonTimes(t *testing.T, data string, extra ...string) (lines []string, times []time.Time) {
	t.Helper()
	out, code := hayInProcess(t, append([]string{"search", "--data", data, "--json"}, append(extra, "--", "")...)...)
	if code != 0 {
		t.Fatalf("search exit %d", code)
	}
	for _, l := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		var e struct {
			Time time.Time `json:"time"`
			Line string    `json:"line"`
		}
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		lines, times = append(lines, e.Line), append(times, e.Time)
	}
	return lines, times
}

// TestIngestTimesWithoutTimestamp: a line without a timestamp takes the
// time of the line before it, and before the first timestamp of a run (a
// banner, or the rest of an entry cut where the last run stopped) that of
// the next one, so a file whose timestamps ascend makes a stream whose
// times ascend, and --order newest is the exact reverse.
func TestIngestTimesWithoutTimestamp(t *testing.T) {
	dir := t.TempDir()
	app, db := filepath.Join(dir, "app.log"), filepath.Join(dir, "db.log")
	os.WriteFile(app, []byte("=== started ===\nconfig loaded\n2020-01-01T00:00:01Z a1\n  at cont\n2020-01-01T00:00:03Z a3\n"), 0o644)
	os.WriteFile(db, []byte("2020-01-01T00:00:02Z b2\n"), 0o644)
	data := filepath.Join(dir, "data")
	if _, code := hayInProcess(t, "ingest", "--data", data, app, db); code != 0 {
		t.Fatalf("ingest exit %d", code)
	}
	// The rest of a3's entry arrives with the next run, before a5.
	f, _ := os.OpenFile(app, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("  at more\n2020-01-01T00:00:05Z a5\n")
	f.Close()
	if _, code := hayInProcess(t, "ingest", "--data", data, app); code != 0 {
		t.Fatalf("second ingest exit %d", code)
	}
	lines, times := jsonTimes(t, data)
	at := func(s int) time.Time { return time.Date(2020, 1, 1, 0, 0, s, 0, time.UTC) }
	want := []string{"=== started ===", "config loaded", "2020-01-01T00:00:01Z a1", "  at cont", "2020-01-01T00:00:02Z b2", "2020-01-01T00:00:03Z a3", "  at more", "2020-01-01T00:00:05Z a5"}
	wantTimes := []time.Time{at(1), at(1), at(1), at(1), at(2), at(3), at(5), at(5)}
	if !slices.Equal(lines, want) {
		t.Fatalf("order %q, want %q", lines, want)
	}
	for i := range times {
		if !times[i].Equal(wantTimes[i]) {
			t.Errorf("%q at %v, want %v", lines[i], times[i], wantTimes[i])
		}
	}
	newest, _ := jsonTimes(t, data, "--order", "newest")
	slices.Reverse(newest)
	if !slices.Equal(newest, want) {
		t.Fatalf("--order newest reversed: %q, want %q", newest, want)
	}

	// A file without any timestamp takes the ingestion time, line by line.
	plain := filepath.Join(dir, "plain.log")
	os.WriteFile(plain, []byte("x\ny\nz\n"), 0o644)
	data2 := filepath.Join(dir, "data2")
	before := time.Now()
	if _, code := hayInProcess(t, "ingest", "--data", data2, plain); code != 0 {
		t.Fatalf("ingest exit %d", code)
	}
	after := time.Now()
	lines, times = jsonTimes(t, data2)
	if !slices.Equal(lines, []string{"x", "y", "z"}) {
		t.Fatalf("plain file: %q", lines)
	}
	for i, tm := range times {
		if tm.Before(before.Add(-time.Second)) || tm.After(after) || i > 0 && tm.Before(times[i-1]) {
			t.Errorf("plain line %d at %v, want ascending ingestion times in [%v, %v]", i, tm, before, after)
		}
	}
}

// TestIngestLongLinePieceTime: a line over the length limit is stored as
// consecutive entries, and every piece takes the line's time, also a piece
// that happens to start with a timestamp of its own. Found by the ingest
// differential test.
func TestIngestLongLinePieceTime(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "long.log")
	line := "2020-01-01T00:00:00Z " + strings.Repeat("x", maxLine-21) + "2099-09-09T09:09:09Z tail"
	os.WriteFile(file, []byte("no time yet\n"+line+"\nafter\n"), 0o644)
	data := filepath.Join(dir, "data")
	if _, code := hayInProcess(t, "ingest", "--data", data, file); code != 0 {
		t.Fatalf("ingest exit %d", code)
	}
	lines, times := storedTimes(t, data)
	if len(lines) != 4 || lines[1]+lines[2] != line || lines[0] != "no time yet" || lines[3] != "after" {
		t.Fatalf("%d entries", len(lines))
	}
	want := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for i, tm := range times {
		if tm != want {
			t.Errorf("entry %d (%.20q…) at %s, want the line's time", i, lines[i], time.Unix(0, tm).UTC())
		}
	}
}

// storedTimes reads every entry's line and time from the store at dir.
func storedTimes(t *testing.T, dir string) (lines []string, times []int64) {
	t.Helper()
	storedEntries(t, dir, func(_ *store.Snapshot, b *segment.Block, k int) string {
		lines, times = append(lines, string(b.Line(k))), append(times, b.Times[k])
		return ""
	})
	return lines, times
}
