package main

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/logtest"
)

func generate(t *testing.T, cfg logtest.Config) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, _, err := logtest.Generate(&buf, cfg); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGenMatchesGenerate checks that each flag reaches logtest.Config: the
// command's output equals logtest.Generate's for the same settings.
func TestGenMatchesGenerate(t *testing.T) {
	for _, tc := range []struct {
		args []string
		cfg  logtest.Config
	}{
		{[]string{"--lines", "1000"}, logtest.Config{Lines: 1000}},
		{[]string{"--lines=777", "--seed", "3", "--streams", "5", "--mean-len", "300", "--span", "1h", "--start", "2025-01-02T03:04:05.5+01:00"},
			logtest.Config{Lines: 777, Seed: 3, Streams: 5, MeanLen: 300, Span: time.Hour,
				Start: time.Date(2025, 1, 2, 2, 4, 5, 5e8, time.UTC)}},
		{[]string{"--size", "64KiB", "--seed", "-9"}, logtest.Config{Size: 65536, Seed: -9}},
		{[]string{"-size", "0.1MB", "-span", "7d"}, logtest.Config{Size: 100_000, Span: 7 * 24 * time.Hour}},
	} {
		var stdout, stderr bytes.Buffer
		if err := runGen(tc.args, &stdout, &stderr); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if want := generate(t, tc.cfg); !bytes.Equal(stdout.Bytes(), want) {
			t.Errorf("%q: output (%d bytes) differs from logtest.Generate(%+v) (%d bytes)", tc.args, stdout.Len(), tc.cfg, len(want))
		}
		if stderr.Len() != 0 {
			t.Errorf("%q: stderr %q", tc.args, stderr.String())
		}
	}
}

func TestGenDefault(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := runGen(nil, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if want := generate(t, logtest.Config{Lines: logtest.DefaultLines}); !bytes.Equal(stdout.Bytes(), want) {
		t.Error("default output differs from logtest.Generate(Config{Lines: DefaultLines})")
	}
}

func TestGenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.log")
	var stdout, stderr bytes.Buffer
	if err := runGen([]string{"--lines", "2500", "--seed", "11", "-o", path}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := generate(t, logtest.Config{Lines: 2500, Seed: 11}); !bytes.Equal(got, want) {
		t.Error("file differs from logtest.Generate")
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout not empty with -o: %d bytes", stdout.Len())
	}
	summary := stderr.String()
	if !strings.HasPrefix(summary, "hay gen: 2500 lines, ") || !strings.Contains(summary, path) ||
		strings.Count(summary, "\n") != 1 || strings.Contains(summary, "\r") {
		t.Errorf("summary %q", summary)
	}

	// An unwritable path is an error, not a usage error.
	err = runGen([]string{"--lines", "1", "-o", filepath.Join(t.TempDir(), "no", "such", "dir")}, &stdout, &stderr)
	if err == nil || errors.Is(err, errUsage) {
		t.Errorf("bad -o path: err = %v", err)
	}
}

func TestGenBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--lines", "-1"},
		{"--lines", "0"},
		{"--lines", "x"},
		{"--lines", "1e3"},
		{"--size", "-1GB"},
		{"--size", "0"},
		{"--size", ""},
		{"--size", "1XB"},
		{"--size", "GB"},
		{"--size", "1.2.3MB"},
		{"--size", "99999999999TB"},
		{"--lines", "5", "--size", "1MB"},
		{"--mean-len", "3"},
		{"--mean-len", "-255"},
		{"--mean-len", "many"},
		{"--streams", "0"},
		{"--streams", "-3"},
		{"--seed", "0x"},
		{"--start", "yesterday"},
		{"--start", "2026-11-01"},
		{"--start", "9999-12-31T00:00:00Z"},
		{"--span", "-1h"},
		{"--span", "0"},
		{"--span", "abc"},
		{"--span", "d"},
		{"--bogus"},
		{"--lines", "5", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		err := runGen(args, &stdout, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: err = %v, want a usage error", args, err)
		}
		if stdout.Len() != 0 {
			t.Errorf("%q: wrote %d bytes", args, stdout.Len())
		}
	}
}

func TestGenHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := runGen([]string{"--help"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	help := stderr.String()
	for _, s := range []string{"-lines", "-size", "-mean-len", "-seed", "-streams", "-start", "-span", "-o", "Example", "hay gen --size 1GB"} {
		if !strings.Contains(help, s) {
			t.Errorf("help lacks %q:\n%s", s, help)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1", 1}, {"123B", 123}, {"1KB", 1000}, {"1kb", 1000}, {"1K", 1000}, {"64KiB", 65536},
		{"1MB", 1e6}, {"2MiB", 2 << 20}, {"1GB", 1e9}, {"1gib", 1 << 30}, {"1.5GiB", 3 << 29},
		{"0.5KB", 500}, {" 10 MB ", 10e6}, {"2TB", 2e12}, {"1TiB", 1 << 40}, {".5k", 500},
		{"9223372036854775807", 1<<63 - 1}, {"8EiB", -1}, {"9223372036854775808", -1},
		{"-1", -1}, {"+1", -1}, {"1e9", -1}, {"inf", -1}, {"NaN", -1}, {"0x10", -1}, {"", -1},
		{"KB", -1}, {".", -1}, {"1..0", -1}, {"1 K B", -1}, {"10000000TB", -1}, {"1.5", -1},
	} {
		got, err := parseByteSize(tc.in)
		switch {
		case tc.want < 0 && err == nil:
			t.Errorf("parseByteSize(%q) = %d, want an error", tc.in, got)
		case tc.want >= 0 && (err != nil || got != tc.want):
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseSpan(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"24h", 24 * time.Hour}, {"90m", 90 * time.Minute}, {"7d", 7 * 24 * time.Hour}, {"1.5d", 36 * time.Hour},
		{"0", 0}, {"1h30m", 90 * time.Minute},
		{"-1h", -1}, {"-2d", -1}, {"d", -1}, {"1hd", -1}, {"x", -1}, {"1e300d", -1}, {"NaNd", -1},
	} {
		got, err := parseSpan(tc.in)
		switch {
		case tc.want < 0 && err == nil:
			t.Errorf("parseSpan(%q) = %v, want an error", tc.in, got)
		case tc.want >= 0 && (err != nil || got != tc.want):
			t.Errorf("parseSpan(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseByteSize checks parseByteSize never panics, never returns a
// negative size, and agrees with strconv on integers, bare or in KiB.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"1GB", "64KiB", "1.5GiB", "0", "-1", "9223372036854775807B", ".5k", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseByteSize(s)
		if err == nil && n < 0 {
			t.Fatalf("parseByteSize(%q) = %d", s, n)
		}
		trimmed := strings.TrimSpace(s)
		if isDigits(trimmed) {
			want, werr := strconv.ParseInt(trimmed, 10, 64)
			if (werr == nil) != (err == nil) || werr == nil && n != want {
				t.Fatalf("parseByteSize(%q) = %d, %v; strconv says %d, %v", s, n, err, want, werr)
			}
		}
		if d, ok := strings.CutSuffix(trimmed, "KiB"); ok && isDigits(d) {
			want, werr := strconv.ParseInt(d, 10, 64)
			if werr == nil && want <= math.MaxInt64/1024 && (err != nil || n != want*1024) {
				t.Fatalf("parseByteSize(%q) = %d, %v; want %d", s, n, err, want*1024)
			}
		}
	})
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
