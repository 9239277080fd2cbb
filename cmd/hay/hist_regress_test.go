package main

// A case found with hist_oracle_test.go's edges that failed before its
// fix: a store spanning more than 292 years overflowed the bucket count.

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"haystack/internal/store"
)

// A store written by `hay serve --reject-older-than 0` (any int64 time)
// whose entries span more than about 289 years: --hist fails with exit 2
// ("search: histogram needs N > 0 buckets of positive width") where -c
// counts 2. search.ChooseBuckets computes hi-start in int64 and wraps.
func TestHistWideSpan(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fake")
	w, err := store.OpenWriter(dir, store.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := func(y int) int64 { return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() }
	if err := w.Append(context.Background(), []store.LabeledEntry{
		{Labels: `{app="a"}`, Time: ns(1800), Line: []byte("old x")},
		{Labels: `{app="a"}`, Time: ns(2090), Line: []byte("new x")},
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out, code := hayInProcess(t, "search", "--data", dir, "-c", "x"); code != 0 || string(out) != "2\n" {
		t.Fatalf("-c: exit %d %q", code, out)
	}
	out, code := hayInProcess(t, "search", "--data", dir, "--hist", "x")
	if code != 0 || !regexp.MustCompile(`(?m)^total 2 in [0-9]+ buckets of `).Match(out) {
		t.Errorf("hay search --data D --hist x: exit %d, want 0 and a histogram totalling 2:\n%s", code, out)
	}
}
