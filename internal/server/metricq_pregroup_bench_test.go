package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"haystack/internal/attrs"
	"haystack/internal/store"
)

// BenchmarkPreGroup (review 9, F3): `sum by (app) (count_over_time(...))`
// over 100,000 entries of one stream in a flushed segment, with a unique
// trace_id and span_id on every entry (OTel) and without metadata, over
// 10 one-minute steps. Bytes are the lines' bytes read.
// Before F3's fix: 320-330 ms and 186 MB an op with metadata (6-9 ms and
// 12 MB without); after: 6-10 ms and 12 MB both.
func BenchmarkPreGroup(b *testing.B) {
	const n = 100_000
	for _, meta := range []bool{false, true} {
		for _, qs := range []string{
			`sum by (app) (count_over_time({app="m"}[1m]))`,
			`sum(count_over_time({app="m"} |= "took=5" [1m]))`,
			// A regexp matcher: app might come from metadata, so blocks
			// are read with it (grouping alone).
			`sum by (app) (count_over_time({app=~"m"}[1m]))`,
		} {
			name := fmt.Sprintf("meta=%v/%s", meta, qs)
			b.Run(name, func(b *testing.B) { benchPreGroup(b, n, meta, qs) })
		}
	}
}

// BenchmarkPreGroupUnwrap: BenchmarkPreGroup's store (100,000 entries of
// one stream, with or without a unique trace_id and span_id each) under
// a sum over unwrapped values, which is pre-grouped since fix 10: the
// samples are keyed by the sum's labels, not one series per entry.
func BenchmarkPreGroupUnwrap(b *testing.B) {
	const n = 100_000
	for _, meta := range []bool{false, true} {
		for _, qs := range []string{
			`sum by (app) (sum_over_time({app="m"} | logfmt | unwrap took [1m]))`,
			`sum(rate({app="m"} | logfmt | unwrap took [1m]))`,
		} {
			b.Run(fmt.Sprintf("meta=%v/%s", meta, qs), func(b *testing.B) { benchPreGroup(b, n, meta, qs) })
		}
	}
}

// benchPreGroup times query qs over a store of n entries of one stream
// (with a unique trace_id and span_id each when meta), flushed into a
// segment.
func benchPreGroup(b *testing.B, n int, meta bool, qs string) {
	s, err := New(Config{DataDir: b.TempDir(), RejectOlderThan: -1, RejectNewerThan: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ts, err := s.openTenant(DefaultTenant, true)
	if err != nil {
		b.Fatal(err)
	}
	es := make([]store.LabeledEntry, 0, n)
	size := 0
	for i := range n {
		le := store.LabeledEntry{Labels: `{app="m"}`, Time: base - int64(i)*6*int64(time.Millisecond), Line: fmt.Appendf(nil, "GET /api/x status=200 took=%d", i%10)}
		if meta {
			le.Attrs = attrs.MustPairs("trace_id", fmt.Sprintf("%032x", i*7919), "span_id", fmt.Sprintf("%016x", i*31))
		}
		size += len(le.Line)
		es = append(es, le)
	}
	if err := ts.w.Append(context.Background(), es); err != nil {
		b.Fatal(err)
	}
	if err := ts.w.Flush(); err != nil {
		b.Fatal(err)
	}
	me, err := parseMetric(qs)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	for b.Loop() {
		out, err := evalMetric(context.Background(), ts, me, base-600e9, base, 60e9)
		if err != nil || len(out) != 1 {
			b.Fatalf("%v %d", err, len(out))
		}
	}
}
