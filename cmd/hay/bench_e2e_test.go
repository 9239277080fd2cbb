package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets `hay bench e2e` run under `go test`: it executes its own
// binary (os.Executable) as hay, which here is the test binary, so a child
// started with HAY_E2E_CHILD=1 runs hay's main instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("HAY_E2E_CHILD") == "1" {
		os.Exit(runMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestBenchE2E runs the benchmark on a small corpus and checks its table:
// every class is there, and each count equals a direct scan of the raw
// file written here (not the benchmark's own oracle).
func TestBenchE2E(t *testing.T) {
	t.Setenv("HAY_E2E_CHILD", "1")
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := benchE2E([]string{"--lines", "20000", "--runs", "1", "--dir", dir, "--keep"}, &stdout, &stderr); err != nil {
		t.Fatalf("hay bench e2e: %v\nstderr:\n%s", err, stderr.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "gen.log"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) != 20000 {
		t.Fatalf("gen.log has %d lines, want 20000", len(lines))
	}

	quoted := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	seen := map[string]int{}
	for _, row := range strings.Split(stdout.String(), "\n") {
		if !strings.HasPrefix(row, "| ") || strings.HasPrefix(row, "| class ") {
			continue
		}
		cells := strings.Split(strings.Trim(row, "| "), " | ")
		if len(cells) < 12 {
			t.Fatalf("short table row %q", row)
		}
		class, needleCell := cells[0], cells[1]
		seen[class]++
		var needles []string
		for _, q := range quoted.FindAllString(needleCell, -1) {
			n, err := strconv.Unquote(q)
			if err != nil {
				t.Fatalf("row %q: %v", row, err)
			}
			needles = append(needles, n)
		}
		fold := strings.Contains(needleCell, "(-i)")
		if len(needles) == 0 {
			t.Fatalf("row %q names no needle", row)
		}
		want := 0
		for _, l := range lines {
			h := l
			if fold {
				h = strings.ToLower(l)
			}
			all := true
			for _, n := range needles {
				if fold {
					n = strings.ToLower(n)
				}
				all = all && strings.Contains(h, n)
			}
			if all {
				want++
			}
		}
		got, err := strconv.Atoi(cells[2])
		if err != nil {
			t.Fatalf("row %q: lines column: %v", row, err)
		}
		if got != want {
			t.Errorf("%s %v (fold %v): table says %d lines, the raw file has %d", class, needles, fold, got, want)
		}
		if ms, err := strconv.ParseFloat(cells[4], 64); err != nil || ms <= 0 {
			t.Errorf("row %q: hay ms %q is not a positive time", row, cells[4])
		}
		switch class {
		case "absent":
			if want != 0 {
				t.Errorf("absent needle %v found %d times", needles, want)
			}
		case "rare", "case-insensitive", "and":
			if want == 0 {
				t.Errorf("%s needle %v found nowhere", class, needles)
			}
		case "frequent":
			if want*10 < len(lines) || want*2 > len(lines) {
				t.Errorf("frequent needle %v on %d of %d lines, want 10-50%%", needles, want, len(lines))
			}
		}
		if class == "and" && len(needles) != 2 {
			t.Errorf("and row has needles %v, want two", needles)
		}
		if class == "case-insensitive" && !fold {
			t.Errorf("case-insensitive row %q is not -i", row)
		}
	}
	for _, c := range []string{"absent", "rare", "frequent", "case-insensitive", "and"} {
		if seen[c] == 0 {
			t.Errorf("no %s row in the table:\n%s", c, stdout.String())
		}
	}
}

// TestBenchE2EArgs checks the argument errors.
func TestBenchE2EArgs(t *testing.T) {
	for _, args := range [][]string{{"--lines", "0"}, {"--runs", "0"}, {"extra"}, {"--nope"}, {"--codec", "brotli"}, {"--codec", "lz4", "--compact=false"}} {
		var out, errb bytes.Buffer
		if err := benchE2E(args, &out, &errb); err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("hay bench e2e %v: err %v, want a usage error", args, err)
		}
	}
}

// TestVLJSONLines checks the VictoriaLogs converter: every line becomes one
// JSON object whose _msg is the line (CR stripped, as hay stores it) and
// whose _time is the line's own, else the previous line's, else now.
func TestVLJSONLines(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	in := "no time yet\n" +
		"2026-11-01T00:00:01.5Z INFO start\r\n" +
		"\tat com.example.Foo(Foo.java:1)\n" +
		`{"time":"2026-11-01T00:00:02Z","msg":"a \"quoted\" \\ tab	x"}` + "\n" +
		"\n" +
		"last without newline"
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	if err := vlJSONLines(strings.NewReader(in), w, "gen", func() time.Time { return now }); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	want := []struct{ msg, time string }{
		{"no time yet", "2030-01-02T03:04:05Z"},
		{"2026-11-01T00:00:01.5Z INFO start", "2026-11-01T00:00:01.5Z"},
		{"\tat com.example.Foo(Foo.java:1)", "2026-11-01T00:00:01.5Z"},
		{`{"time":"2026-11-01T00:00:02Z","msg":"a \"quoted\" \\ tab	x"}`, "2026-11-01T00:00:02Z"},
		{"", "2026-11-01T00:00:02Z"},
		{"last without newline", "2026-11-01T00:00:02Z"},
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d output lines, want %d:\n%s", len(got), len(want), out.String())
	}
	for i, g := range got {
		var obj map[string]string
		if err := json.Unmarshal([]byte(g), &obj); err != nil {
			t.Fatalf("line %d %q: %v", i, g, err)
		}
		if obj["_msg"] != want[i].msg || obj["_time"] != want[i].time || obj["source"] != "gen" || len(obj) != 3 {
			t.Errorf("line %d = %v, want _msg %q _time %q source gen", i, obj, want[i].msg, want[i].time)
		}
	}
}
