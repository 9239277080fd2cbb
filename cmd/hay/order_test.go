package main

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/testdiff"
	"haystack/internal/testseed"
)

// TestSearchOrderOutOfOrder: files whose timestamps go backwards (clock
// skew, merged files) come out of hay search sorted by time, oldest or
// newest first, with exact --limit: ties by stream (the file ingested
// first), then by line number; newest is the exact reverse. -c is the
// count of matches whatever the order.
func TestSearchOrderOutOfOrder(t *testing.T) {
	seed := testseed.Seed(t, "HAY_ORDER_SEED")
	t.Logf("seed %d (rerun with HAY_ORDER_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 3))
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	type line struct {
		t          int64
		file, n    int
		text       string
		hasPattern bool
	}
	var all []line
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Unix()
	var files []string
	for f := range 2 {
		var b strings.Builder
		tm := t0
		for n := range 3000 {
			switch r.IntN(40) {
			case 0:
				tm -= int64(r.IntN(300)) // the clock goes back
			case 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12:
			default:
				tm += int64(r.IntN(3))
			}
			word := []string{"ok", "error", "warn"}[r.IntN(3)]
			text := fmt.Sprintf("%s f%d n%d %s %s", time.Unix(tm, 0).UTC().Format(time.RFC3339), f, n, word, strings.Repeat("x", r.IntN(80)))
			b.WriteString(text + "\n")
			all = append(all, line{tm, f, n, text, word == "error"})
		}
		name := filepath.Join(dir, fmt.Sprintf("f%d.log", f))
		if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
	}
	// Small heads: several segments, each file's entries in several.
	if _, code := hayInProcess(t, append([]string{"ingest", "--data", data, "--head-bytes", "64KiB"}, files...)...); code != 0 {
		t.Fatalf("ingest: exit %d", code)
	}
	slices.SortFunc(all, func(a, b line) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.file, b.file), cmp.Compare(a.n, b.n))
	})
	for _, pat := range []string{"", "error"} {
		var want []string
		for _, l := range all {
			if pat == "" || l.hasPattern {
				want = append(want, l.text)
			}
		}
		out, code := hayInProcess(t, "search", "--data", data, "-c", "--", pat)
		if code != 0 || strings.TrimSpace(string(out)) != strconv.Itoa(len(want)) {
			t.Errorf("search -c %q: %q (exit %d), want %d", pat, out, code, len(want))
		}
		tie := 0 // a limit cutting between two lines of equal time
		for i := 1; i < len(want); i++ {
			if want[i][:20] == want[i-1][:20] {
				tie = i
				break
			}
		}
		for _, order := range []string{"oldest", "newest"} {
			exp := slices.Clone(want)
			if order == "newest" {
				slices.Reverse(exp)
			}
			for _, limit := range []int{0, 1, 2, 3, 100, tie} {
				args := []string{"search", "--data", data, "--order", order}
				e := exp
				if limit > 0 {
					args = append(args, "--limit", strconv.Itoa(limit))
					e = exp[:min(limit, len(exp))]
				}
				out, code := hayInProcess(t, append(args, "--", pat)...)
				if code != 0 {
					t.Fatalf("%v: exit %d", args, code)
				}
				got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
				if d := testdiff.First(got, e); d >= 0 {
					t.Errorf("seed %d: hay %s %q: line %d of %d/%d: got %q, want %q", seed, strings.Join(args[1:], " "), pat, d+1, len(got), len(e), testdiff.At(got, d), testdiff.At(e, d))
				}
			}
		}
	}
}
