package main

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"haystack/internal/server"
)

// TestSearchServerBytesCut: hay search --server pages through answers
// the server cuts at --max-query-bytes (before the page's 5,000 entries)
// as through full pages, and prints what hay search --data prints: every
// entry once, the 6,000 that share one time included (the cuts fall
// inside them, and skip pages past them), and lines line_format makes
// 1 KB.
func TestSearchServerBytesCut(t *testing.T) {
	dir := t.TempDir()
	hs, _ := remoteServerWith(t, server.Config{DataDir: dir, MaxQueryBytes: 64 << 10})
	tenantDir := filepath.Join(dir, "fake")
	run := func(args ...string) (string, int) {
		t.Helper()
		out, code := hayInProcess(t, append([]string{"search"}, args...)...)
		return string(out), code
	}
	cases := [][]string{
		{"--order", "oldest", "entry"},
		{"--order", "newest", "--json", "entry"},
		{"--order", "oldest", "--query", `{app=~"api|web"} |= "entry 1" | line_format "{{ __line__ }} {{ repeat 1000 \"x\" }}"`},
	}
	for _, c := range cases {
		want, wcode := run(append([]string{"--data", tenantDir}, c...)...)
		got, gcode := run(append([]string{"--server", hs.URL}, c...)...)
		if slices.Contains(c, "newest") {
			// Equal times come in the server's order (see TestSearchServer).
			got, want = sortedLines(t, got, true), sortedLines(t, want, false)
		}
		if n := strings.Count(want, "\n"); n < 2000 {
			t.Fatalf("%q: --data printed %d lines", c, n)
		}
		if got != want || gcode != wcode {
			t.Errorf("hay search --server %q (64 KiB answers): exit %d, %d lines; --data: exit %d, %d lines; first diff at line %d",
				c, gcode, strings.Count(got, "\n"), wcode, strings.Count(want, "\n"), firstDiffLine([]byte(got), []byte(want)))
		}
	}
	// The answers were cut: dozens of times.
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^hay_query_answers_cut_total\{endpoint="search"\} (\d+)$`).FindSubmatch(b)
	if len(m) < 2 {
		t.Fatalf("no hay_query_answers_cut_total{endpoint=\"search\"} in /metrics")
	}
	if n, _ := strconv.Atoi(string(m[1])); n < 30 {
		t.Errorf("%d answers cut by bytes, want at least 30", n)
	}
}
