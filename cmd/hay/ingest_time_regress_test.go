// Regression tests from the ingest time oracle: each failed before its
// fix (access-log times, zone names parsed in UTC, out-of-range numeric
// zones, GMT+hh:mm).
package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// torIngestCheck ingests content as one file and checks each entry's
// line and time (RFC 3339 instants) through hay search --json.
func torIngestCheck(t *testing.T, content string, want []string, env ...string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "f.log")
	os.WriteFile(file, []byte(content), 0o644)
	data := filepath.Join(dir, "data")
	if len(env) > 0 {
		cmd := hayCommand("ingest", "--data", data, file)
		cmd.Env = append(cmd.Env, env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ingest: %v: %s", err, out)
		}
	} else if _, code := hayInProcess(t, "ingest", "--data", data, file); code != 0 {
		t.Fatalf("ingest exit %d", code)
	}
	got := torSearch(t, data)
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	if len(got) != len(lines) {
		t.Fatalf("%d entries, want %d", len(got), len(lines))
	}
	for i, e := range got {
		w, err := time.Parse(time.RFC3339Nano, want[i])
		if err != nil {
			t.Fatal(err)
		}
		if string(e.line) != lines[i] || e.time != w.UnixNano() {
			t.Errorf("entry %d: %q at %s, want %q at %s", i, e.line, torFmt(e.time), lines[i], want[i])
		}
	}
}

// F1: a JSON time with a zone abbreviation is read with the machine's TZ.
func TestIngestTimeRegressTZAbbrev(t *testing.T) {
	content := `{"time":"Mon, 02 Jan 2006 15:04:05 CST","msg":"rfc1123"}` + "\n" +
		`{"time":"Mon Jan  2 15:04:05 CST 2006","msg":"unixdate"}` + "\n"
	want := []string{"2006-01-02T21:04:05Z", "2006-01-02T21:04:05Z"} // RFC 822: CST = -06:00
	for _, tz := range []string{"UTC", "Asia/Shanghai"} {
		t.Run(tz, func(t *testing.T) { torIngestCheck(t, content, want, "TZ="+tz) })
	}
}

// F2: an out-of-range numeric zone is dropped and the clock read as UTC;
// by the doc ("every field is range-checked") the line has no timestamp
// and takes the previous line's time.
func TestIngestTimeRegressInvalidZone(t *testing.T) {
	content := "2015-07-29T10:00:00Z first\n" +
		"2015-07-29T17:41:44+15:00 zone hour 15\n" +
		"2015-07-29T17:41:44+05:60 zone minute 60\n" +
		"2015-07-29T17:41:44+05:3 zone cut short\n" +
		"2015-07-29T17:41:44+530 three-digit zone\n" +
		"2015-07-29T17:41:44+2:00 one-digit hour\n"
	w := "2015-07-29T10:00:00Z"
	torIngestCheck(t, content, []string{w, w, w, w, w, w})
}

// F3: "GMT+01:00" / "UTC+02:00" / "GMT-0800" after the clock are read as UTC.
func TestIngestTimeRegressGMTOffset(t *testing.T) {
	content := "2015-07-29 17:41:44 GMT+01:00 java z\n" +
		"2015-07-29 17:41:44 UTC+02:00 x\n" +
		"2015-07-29 17:41:44 GMT-0800 x\n"
	torIngestCheck(t, content, []string{"2015-07-29T16:41:44Z", "2015-07-29T15:41:44Z", "2015-07-30T01:41:44Z"})
}

// F0: a common/combined log format access log line (the form Apache and
// nginx write, client address first) gets no timestamp: a whole access
// log takes the ingestion time.
func TestIngestTimeRegressAccessLogCLF(t *testing.T) {
	content := `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326` + "\n" +
		`192.168.1.20 - - [30/Nov/2026:10:00:00 +0100] "POST /api HTTP/1.1" 500 12 "-" "curl/8.0"` + "\n"
	torIngestCheck(t, content, []string{"2000-10-10T20:55:36Z", "2026-11-30T09:00:00Z"})
	// And so a time-bounded search over the log's own period finds nothing.
}

// F5: the pieces of a line over 16 MiB before the first timestamp got two
// different times: the first piece fills a batch and is stored with the
// ingestion time, and the next started a new leading run that the next
// timestamp back-filled. STORE.md: "The pieces of a line over 16 MiB all
// take the line's time."
func TestIngestTimeRegressLongLeadingLinePieces(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "long.log")
	long := strings.Repeat("x", maxLine+10)
	if err := os.WriteFile(file, []byte(long+"\n2020-01-01T00:00:00Z first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if _, code := hayInProcess(t, "ingest", "--data", data, file); code != 0 {
		t.Fatalf("ingest exit %d", code)
	}
	lines, times := storedTimes(t, data)
	if len(lines) != 3 || lines[0]+lines[1] != long || lines[2] != "2020-01-01T00:00:00Z first" {
		t.Fatalf("%d entries", len(lines))
	}
	if times[0] != times[1] {
		t.Errorf("the two pieces of one line: %s and %s", torFmt(times[0]), torFmt(times[1]))
	}
	if want := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(); times[2] != want {
		t.Errorf("the timestamped line at %s", torFmt(times[2]))
	}
}
