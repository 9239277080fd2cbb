package ingest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fakeClock returns testRef and counts its reads.
type fakeClock struct{ reads int }

func (c *fakeClock) now() time.Time { c.reads++; return testRef }

func TestParser(t *testing.T) {
	clock := testRef.UnixNano()
	iso := utc(2015, 7, 29, 17, 41, 44, 747e6)
	tests := []struct {
		format    Format
		line      string
		want      int64 // clock means: no timestamp
		wantReads int
	}{
		{FormatAuto, "2015-07-29 17:41:44,747 - INFO x", iso, 0},
		{FormatAuto, `{"time":"2015-07-29T17:41:44.747Z","msg":"x"}`, iso, 0},
		{FormatAuto, ` {"msg":"x","ts":1438191704.747}`, iso, 0},
		{FormatAuto, `{"msg":"x"}`, clock, 1},
		{FormatAuto, `{"time":"Jun 14 15:16:01"}`, utc(2026, 6, 14, 15, 16, 1, 0), 1},
		{FormatAuto, "Jun 14 15:16:01 combo sshd", utc(2026, 6, 14, 15, 16, 1, 0), 1},
		{FormatAuto, "no time here", clock, 1},
		{FormatAuto, "", clock, 1},
		{FormatPlain, "2015-07-29 17:41:44,747 - INFO x", iso, 0},
		{FormatPlain, `{"time":"2015-07-29T17:41:44.747Z"}`, clock, 1},
		{FormatJSONL, `{"time":"2015-07-29T17:41:44.747Z"}`, iso, 0},
		{FormatJSONL, "2015-07-29 17:41:44,747 - INFO x", clock, 1},
		{FormatJSONL, "not json", clock, 1},
	}
	for _, tc := range tests {
		c := &fakeClock{}
		p := NewParser(tc.format, c.now)
		line := []byte(tc.line)
		e := p.Parse(line)
		if e.Time != tc.want || e.HasTime != (tc.want != clock) {
			t.Errorf("%v Parse(%q) = %v, %v; want %v, %v", tc.format, tc.line, fmtNano(e.Time), e.HasTime, fmtNano(tc.want), tc.want != clock)
		}
		if c.reads != tc.wantReads {
			t.Errorf("%v Parse(%q) read the clock %d times, want %d", tc.format, tc.line, c.reads, tc.wantReads)
		}
		if len(e.Line) != len(line) || (len(line) > 0 && &e.Line[0] != &line[0]) {
			t.Errorf("%v Parse(%q): Line does not alias the input", tc.format, tc.line)
		}
		if n := testing.AllocsPerRun(10, func() { p.Parse(line) }); n != 0 {
			t.Errorf("%v Parse(%q) allocates %v times", tc.format, tc.line, n)
		}
	}
}

// TestParserClockPerLine: the clock is read afresh for every line that needs
// it, so entries without a timestamp get their own ingestion time.
func TestParserClockPerLine(t *testing.T) {
	n := int64(0)
	p := NewParser(FormatAuto, func() time.Time { n++; return time.Unix(1700000000+n, 0) })
	a, b := p.Parse([]byte("x")), p.Parse([]byte("y"))
	if a.Time != 1700000001e9 || b.Time != 1700000002e9 || a.HasTime || b.HasTime {
		t.Fatalf("times %d %d", a.Time, b.Time)
	}
	// A year boundary between two syslog lines: read 31 s before New
	// Year, "Jan 1 00:00:30" is the coming one (within the day of
	// tolerance), not 364 days ago; read after it, the same.
	clock := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	p = NewParser(FormatPlain, func() time.Time { return clock })
	if e := p.Parse([]byte("Jan  1 00:00:30 x")); e.Time != utc(2027, 1, 1, 0, 0, 30, 0) {
		t.Fatalf("before new year: %v", fmtNano(e.Time))
	}
	if e := p.Parse([]byte("Dec 31 23:59:00 x")); e.Time != utc(2026, 12, 31, 23, 59, 0, 0) {
		t.Fatalf("before new year, this year's line: %v", fmtNano(e.Time))
	}
	clock = clock.Add(time.Minute)
	if e := p.Parse([]byte("Jan  1 00:00:30 x")); e.Time != utc(2027, 1, 1, 0, 0, 30, 0) {
		t.Fatalf("after new year: %v", fmtNano(e.Time))
	}
	if e := NewParser(FormatPlain, nil).Parse([]byte("x")); e.HasTime || time.Since(time.Unix(0, e.Time)) > time.Minute {
		t.Fatalf("default clock: %v", fmtNano(e.Time))
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range []Format{FormatAuto, FormatPlain, FormatJSONL} {
		g, err := ParseFormat(f.String())
		if err != nil || g != f {
			t.Errorf("ParseFormat(%q) = %v, %v", f.String(), g, err)
		}
	}
	for _, s := range []string{"", "json", "Plain", "auto "} {
		if _, err := ParseFormat(s); err == nil {
			t.Errorf("ParseFormat(%q) succeeded", s)
		}
	}
	if s := Format(9).String(); s != "Format(9)" {
		t.Errorf("Format(9).String() = %q", s)
	}
}

// TestIngestLoghub runs the whole parsing path, LineReader into Parser, over
// every sample: every line gets its leading timestamp and the exact line.
func TestIngestLoghub(t *testing.T) {
	for _, f := range loghubFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := refLines(data)
		lr := NewLineReader(bytes.NewReader(data), 0)
		p := NewParser(FormatAuto, func() time.Time { return testRef })
		n := 0
		for {
			line, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			e := p.Parse(line)
			ts, _ := LeadingTime(want[n], testRef)
			if !bytes.Equal(e.Line, want[n]) || !e.HasTime || e.Time != ts {
				t.Fatalf("%s:%d: entry %q %v %v", filepath.Base(f), n+1, e.Line, e.HasTime, fmtNano(e.Time))
			}
			n++
		}
		if n != len(want) {
			t.Fatalf("%s: %d entries, want %d", filepath.Base(f), n, len(want))
		}
	}
}
