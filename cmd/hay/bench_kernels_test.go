package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"haystack/internal/logtest"
	"haystack/needle"
)

// TestBenchKernelsTiny runs the whole benchmark at a tiny size and checks
// that the JSON parses, that every row is in the Markdown, and that every
// hit count is right (against bytes.Index over an independently generated
// corpus).
func TestBenchKernelsTiny(t *testing.T) {
	const lines = 2000
	args := []string{"--lines", fmt.Sprint(lines), "--runs", "1", "--json"}

	var js bytes.Buffer
	if err := benchKernels(args, &js, io.Discard); err != nil {
		t.Fatal(err)
	}
	var rep kernelsReport
	if err := json.Unmarshal(js.Bytes(), &rep); err != nil {
		t.Fatalf("JSON does not parse: %v", err)
	}

	// The Markdown is rendered from the parsed JSON report: one run (the
	// slow part) serves both forms, and the JSON must round-trip.
	var md bytes.Buffer
	if err := rep.markdown(&md); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	methods := []string{"naive", "horspool", "kmp", "swar", "swar2", "bytes.Index"}
	for _, k := range needle.Kernels() {
		methods = append(methods, "needle "+k)
	}
	for _, section := range []string{
		"## Contains, line by line", "## Whole buffer", "## Spark PR #59222 row shapes",
		"## Pathologies", "## Needles", "16-byte rows", "128-byte rows", "1024-byte rows",
		"| bytes.IndexByte (absent byte) |",
	} {
		if !strings.Contains(out, section) {
			t.Errorf("markdown lacks %q", section)
		}
	}
	// Each method appears as a row in the per-line table and in the three
	// row-shape tables; bytes.Index and needle also in the whole-buffer
	// and absent tables.
	for _, m := range methods {
		want := 4
		if m == "bytes.Index" || strings.HasPrefix(m, "needle ") {
			want = 6
		}
		if got := strings.Count(out, "\n| "+m+" |"); got != want {
			t.Errorf("markdown has %d rows for %q, want %d", got, m, want)
		}
	}
	for _, p := range []string{`"aQa"`, `" timeout"`, `"status=50"`, `"="`, "100-byte needle"} {
		if !strings.Contains(out, p) {
			t.Errorf("pathology table lacks %s", p)
		}
	}

	// The oracle, computed here from scratch, on the default seed's corpus.
	g := logtest.NewGenerator(logtest.Config{Lines: lines})
	var corpus [][]byte
	for range lines {
		l, _, _ := g.Next(nil)
		if i := bytes.IndexByte(l, '\n'); i >= 0 {
			l = l[:i]
		}
		corpus = append(corpus, l)
	}
	defaults := logtest.DefaultNeedles()
	if len(rep.Needles) != len(defaults) {
		t.Fatalf("%d needles, want %d", len(rep.Needles), len(defaults))
	}
	want := make([]int, len(defaults))
	for i, n := range defaults {
		for _, l := range corpus {
			if bytes.Contains(l, []byte(n)) {
				want[i]++
			}
		}
		if got := rep.Needles[i]; got.Needle != n || got.Hits != want[i] {
			t.Errorf("needle %d: %q with %d hits, want %q with %d", i, got.Needle, got.Hits, n, want[i])
		}
	}
	if rep.Lines != lines {
		t.Errorf("lines = %d, want %d", rep.Lines, lines)
	}
	check := func(section string, rows []methodRow, names []string) {
		t.Helper()
		var got []string
		for _, r := range rows {
			got = append(got, r.Method)
			if fmt.Sprint(r.Hits) != fmt.Sprint(want) {
				t.Errorf("%s %s: hits %v, want %v", section, r.Method, r.Hits, want)
			}
			if !(r.MedianMs > 0 && r.MinMs <= r.MedianMs && r.MedianMs <= r.MaxMs) {
				t.Errorf("%s %s: median %v min %v max %v", section, r.Method, r.MedianMs, r.MinMs, r.MaxMs)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(names) {
			t.Errorf("%s rows %v, want %v", section, got, names)
		}
	}
	check("per line", rep.PerLine, methods)
	check("whole buffer", rep.Whole.Rows, methods[5:])
	if len(rep.Whole.Absent) != len(methods[5:]) || rep.Whole.CeilingGBps <= 0 {
		t.Errorf("absent-needle rows %v, ceiling %v", rep.Whole.Absent, rep.Whole.CeilingGBps)
	}
	if len(rep.Rows) != len(sparkRowLens)*len(sparkCases)*len(methods) {
		t.Errorf("%d row-shape results, want %d", len(rep.Rows), len(sparkRowLens)*len(sparkCases)*len(methods))
	}
	for _, r := range rep.Rows {
		hits := 0
		switch r.Case {
		case "found in the middle", "needle = row":
			hits = r.Rows
		}
		if r.Hits != hits || r.NsPerRow <= 0 {
			t.Errorf("row shape %+v: want %d hits", r, hits)
		}
	}
	if len(rep.Pathology) != 7 {
		t.Errorf("%d pathology rows, want 7", len(rep.Pathology))
	}
	for _, p := range rep.Pathology {
		if p.NeedleNs <= 0 || p.BytesIndexNs <= 0 || p.Pass != (p.Ratio <= 3) {
			t.Errorf("pathology row %+v", p)
		}
	}
}

func TestCountWhole(t *testing.T) {
	ls := []string{"abc", "", "xabcabc", "ab", "cab", "abc"}
	o, err := newOffheap(len(ls), func() func([]byte) []byte {
		i := 0
		return func(dst []byte) []byte { i++; return append(dst, ls[i-1]...) }
	})
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	if string(o.buf) != strings.Join(ls, "\n")+"\n" {
		t.Fatalf("buffer %q", o.buf)
	}
	for i, l := range o.lines {
		if string(l) != ls[i] || cap(l) != len(l) {
			t.Fatalf("line %d = %q cap %d", i, l, cap(l))
		}
	}
	for _, tc := range []struct {
		needle string
		want   int
	}{
		{"abc", 3},  // twice in one line counts once; the last line ends at the last byte
		{"ab", 5},   // "ab\ncab": both lines
		{"b\nc", 0}, // spans a newline: no line holds it
		{"c\na", 0},
		{"cab", 2},
		{"x", 1},
	} {
		n := []byte(tc.needle)
		got := countWhole(o, len(n), func(h []byte) int { return bytes.Index(h, n) })
		if got != tc.want {
			t.Errorf("countWhole(%q) = %d, want %d", tc.needle, got, tc.want)
		}
	}
}

// TestMeasureRejectsWrongMethod: a method whose count differs from the
// oracle's is an error, never a timing.
func TestMeasureRejectsWrongMethod(t *testing.T) {
	if _, err := measure(newWallClock(), 1, 5, "wrong", func() int { return 4 }); err == nil {
		t.Fatal("measure accepted a wrong count")
	}
	if d, err := measure(threadCPUClock, 1, 5, "right", func() int { return 5 }); err != nil || d < 0 {
		t.Fatalf("measure = %v, %v", d, err)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{{"--lines", "0"}, {"--runs", "0"}, {"extra"}, {"--nope"}, {"--clock", "sundial"}} {
		if err := benchKernels(args, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
	if err := runBench([]string{"nosuch"}); err == nil {
		t.Error("unknown benchmark accepted")
	}
}

func TestLoadNeedles(t *testing.T) {
	name := t.TempDir() + "/needles"
	if err := os.WriteFile(name, []byte("a b\r\n\n|x|\nlast"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := loadNeedles(name)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%q", got) != `["a b" "|x|" "last"]` {
		t.Errorf("loadNeedles = %q", got)
	}
	if err := os.WriteFile(name, []byte("\n\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadNeedles(name); err == nil {
		t.Error("a file without needles was accepted")
	}
	if _, err := loadNeedles(name + ".missing"); err == nil {
		t.Error("a missing file was accepted")
	}
	if got, err := loadNeedles(""); err != nil || len(got) != len(logtest.DefaultNeedles()) {
		t.Errorf("default needles: %d, %v", len(got), err)
	}
}
