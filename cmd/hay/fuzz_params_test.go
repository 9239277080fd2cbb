package main

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseSpan checks parseSpan against its doc: "Nd" is N days (a
// decimal number, to within a nanosecond, exact for whole days), anything
// else a Go duration; never negative, never past a Duration.
func FuzzParseSpan(f *testing.F) {
	for _, s := range []string{
		"24h", "90m", "7d", "1.5d", "0", "1h30m", "-1h", "-2d", "d", "1hd", "x", "1e300d", "NaNd", "Infd", "INFd",
		"+1d", "-0d", "0.1d", "106751d", "106752d", "106751.99d", "2562047h47m16.854775807s", "0x1p3d", "1e1d", " 1d", "1d ",
		"-1ns", "200000d",
	} {
		f.Add(s, int64(time.Hour))
	}
	f.Fuzz(func(t *testing.T, s string, n int64) {
		got, err := parseSpan(s)
		if err == nil && got < 0 {
			t.Fatalf("parseSpan(%q) = %v, negative", s, got)
		}
		days, isDays := strings.CutSuffix(s, "d")
		if isDays && days != "" && !strings.ContainsAny(days, "hmsuµn") {
			fv, ferr := strconv.ParseFloat(days, 64)
			want := fv * float64(24*time.Hour)
			switch {
			case ferr != nil || math.IsNaN(fv) || fv < 0 || want > math.MaxInt64:
				if err == nil {
					t.Fatalf("parseSpan(%q) = %v; want an error", s, got)
				}
			case want <= math.MaxInt64-float64(time.Hour):
				// Well inside a Duration: accepted, to within a nanosecond.
				if err != nil || math.Abs(float64(got)-want) > 1+want*1e-15 {
					t.Fatalf("parseSpan(%q) = %v, %v; want %v", s, got, err, time.Duration(want))
				}
				if fv == math.Trunc(fv) && got != time.Duration(fv)*24*time.Hour {
					t.Fatalf("parseSpan(%q) = %v; want exactly %v days", s, got, fv)
				}
			}
		} else {
			d, derr := time.ParseDuration(s)
			if derr != nil || d < 0 {
				if err == nil {
					t.Fatalf("parseSpan(%q) = %v; want an error", s, got)
				}
			} else if err != nil || got != d {
				t.Fatalf("parseSpan(%q) = %v, %v; want %v", s, got, err, d)
			}
		}
		// Every non-negative Duration, as Go prints it, and whole days read
		// back exactly.
		d := time.Duration(n)
		if d < 0 {
			d = -d
		}
		if d >= 0 {
			if got, err := parseSpan(d.String()); err != nil || got != d {
				t.Fatalf("parseSpan(%q) = %v, %v; want %v", d.String(), got, err, d)
			}
		}
		k := n % 106752
		if k < 0 {
			k = -k
		}
		if got, err := parseSpan(strconv.FormatInt(k, 10) + "d"); err != nil || got != time.Duration(k)*24*time.Hour {
			t.Fatalf("parseSpan(%dd) = %v, %v; want %d days", k, got, err, k)
		}
	})
}

// FuzzDemoMarker: readDemoMarker accepts only a marker that describes a
// demo (format 1, at least one line, a start time), never reports a file
// that exists as missing (demoPrepare would then write into a directory
// that is not a demo's), and what writeDemoMarker writes reads back equal.
func FuzzDemoMarker(f *testing.F) {
	f.Add([]byte(`{"format":1,"seed":1,"lines":2000000,"streams":8,"start":"2026-11-29T08:00:00Z","span_ns":86400000000000}`),
		int64(1), int64(2000000), int32(8), int64(1764403200000000000), int16(0), int64(24*time.Hour))
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"format":2,"lines":1,"start":"2026-11-29T08:00:00Z"}`,
		`{"format":1,"lines":0,"start":"2026-11-29T08:00:00Z"}`, `{"format":1,"lines":1}`,
		`{"format":1,"lines":1,"start":"0001-01-01T00:00:00Z"}`, `{"format":1,"lines":1,"start":"2026-11-29T08:00:00+05:30"} x`,
		`{"format":1,"lines":-5,"start":"2026-11-29T08:00:00Z"}`, `{"format":1.5,"lines":1,"start":"2026-11-29T08:00:00Z"}`,
		`{"format":1,"lines":1,"start":"2026-11-29T08:00:00Z","format":2}`, "\xef\xbb\xbf{}",
	} {
		f.Add([]byte(s), int64(-3), int64(0), int32(-1), int64(math.MinInt64), int16(-90), int64(-1))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, seed, lines int64, streams int32, startNS int64, zone int16, span int64) {
		path := filepath.Join(dir, demoMarker)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := readDemoMarker(path)
		if errors.Is(err, os.ErrNotExist) {
			t.Fatalf("readDemoMarker of an existing file %q: %v", data, err)
		}
		if err == nil {
			if d.Format != 1 || d.Lines < 1 || d.Start.IsZero() {
				t.Fatalf("readDemoMarker accepted %q as %+v", data, d)
			}
			roundTripMarker(t, path, d)
		}
		z := time.FixedZone("", int(zone)%(24*60)*60)
		want := demoInfo{Format: 1, Seed: seed, Lines: lines, Streams: int(streams), Start: time.Unix(0, startNS).In(z), SpanNS: span}
		if lines >= 1 {
			roundTripMarker(t, path, want)
		} else {
			if err := writeDemoMarker(path, want); err != nil {
				t.Fatal(err)
			}
			if got, err := readDemoMarker(path); err == nil {
				t.Fatalf("marker with %d lines read back as %+v", lines, got)
			}
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if _, err := readDemoMarker(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("missing marker: %v, want ErrNotExist", err)
		}
	})
}

func roundTripMarker(t *testing.T, path string, want demoInfo) {
	t.Helper()
	if err := writeDemoMarker(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := readDemoMarker(path)
	if err != nil {
		t.Fatalf("marker %+v does not read back: %v", want, err)
	}
	if !got.Start.Equal(want.Start) {
		t.Fatalf("start %v read back as %v", want.Start, got.Start)
	}
	got.Start, want.Start = time.Time{}, time.Time{}
	if got != want {
		t.Fatalf("marker read back as %+v, want %+v", got, want)
	}
}
