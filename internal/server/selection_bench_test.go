package server

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	"haystack/internal/store"
)

// benchStreamsEnv is a tenant of n streams of 3 labels with unique
// 8-byte values each ({app="s0_<i>", l01="<8 digits>", l02="<8
// digits>"}, as the E9 measurements' pg pushes them), 2 entries per
// stream over the half hour before base, flushed to a segment, plus 10
// streams left in the head.
func benchStreamsEnv(b *testing.B, n int) *testEnv {
	e := newEnv(&testing.T{}, nil)
	b.Cleanup(func() { e.ts.Close(); e.srv.Close() })
	ts, err := e.srv.openTenant(DefaultTenant, true)
	if err != nil {
		b.Fatal(err)
	}
	t0 := base - int64(30*time.Minute)
	var es []store.LabeledEntry
	add := func(i int) {
		labels := fmt.Sprintf(`{app="s0_%d", l01="%08d", l02="%08d"}`, i, (i*31+1)%1000000, (i*31+2)%1000000)
		for j := range 2 {
			es = append(es, store.LabeledEntry{Labels: labels, Time: t0 + int64(i)*2 + int64(j), Line: []byte("line s" + strconv.Itoa(i) + " e" + strconv.Itoa(j))})
		}
		if len(es) >= 20000 {
			if err := ts.w.Append(context.Background(), es); err != nil {
				b.Fatal(err)
			}
			es = es[:0]
		}
	}
	for i := range n {
		add(i)
	}
	if len(es) > 0 {
		if err := ts.w.Append(context.Background(), es); err != nil {
			b.Fatal(err)
		}
		es = es[:0]
	}
	if err := ts.w.Flush(); err != nil {
		b.Fatal(err)
	}
	for i := n; i < n+10; i++ {
		add(i)
	}
	if err := ts.w.Append(context.Background(), es); err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkSelectStreams measures queries that select one stream (or
// list labels) in a tenant of many streams: what E9 found to cost
// O(all streams) per query.
func BenchmarkSelectStreams(b *testing.B) {
	q := url.QueryEscape
	rng := fmt.Sprintf("&start=%d&end=%d", base-int64(time.Hour), base)
	for _, n := range []int{10_000, 200_000} {
		e := benchStreamsEnv(b, n)
		for _, c := range []struct{ name, path string }{
			{"query_range_one", "/loki/api/v1/query_range?limit=100&query=" + q(`{app="s0_5"}`)},
			{"query_range_one_neg", "/loki/api/v1/query_range?limit=100&query=" + q(`{app="s0_5", l01!="x"}`)},
			{"query_range_one_filter", "/loki/api/v1/query_range?limit=100&query=" + q(`{app="s0_5"} |= "e1"`)},
			{"count_one", "/loki/api/v1/query_range?step=60s&query=" + q(`count_over_time({app="s0_5"}[1m])`)},
			{"native_search_one", "/api/v1/search?limit=100&q=" + q(`{app="s0_5"}`)},
			{"series_one", "/loki/api/v1/series?match[]=" + q(`{app="s0_5"}`)},
			{"label_values_one", "/loki/api/v1/label/l01/values?query=" + q(`{app="s0_5"}`)},
			{"labels", "/loki/api/v1/labels?x=1"},
			{"label_values_app", "/loki/api/v1/label/app/values?x=1"},
			{"detected_labels_all", "/loki/api/v1/detected_labels?query=" + q(`{app=~".+"}`)},
		} {
			b.Run(fmt.Sprintf("streams=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if code, body := e.get(c.path + rng); code != 200 {
						b.Fatalf("%d %s", code, body)
					}
				}
			})
		}
	}
}
