package server

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"haystack/internal/attrs"
	"haystack/internal/store"
)

// preGroupStore appends entries of 4 streams with structured metadata (a
// unique trace_id each; route on most, region on some, an "app" on some
// that the stream has too: app_extracted), lines logfmt or not, half
// flushed to a segment and half in the head.
func preGroupStore(t *testing.T, e *testEnv) *tenantStore {
	t.Helper()
	ts, err := e.srv.openTenant(DefaultTenant, true)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 3))
	for half := range 2 {
		var es []store.LabeledEntry
		for i := range 400 {
			n := half*400 + i
			kv := []string{"trace_id", fmt.Sprintf("%032x", n)}
			if r.IntN(5) > 0 {
				kv = append(kv, "route", []string{"/a", "/b", "/c"}[r.IntN(3)])
			}
			if r.IntN(4) == 0 {
				kv = append(kv, "region", []string{"eu", "us"}[r.IntN(2)])
			}
			if r.IntN(10) == 0 {
				kv = append(kv, "app", "meta")
			}
			line := fmt.Sprintf("level=%s took=%d", []string{"info", "error"}[r.IntN(2)], r.IntN(100))
			if r.IntN(8) == 0 {
				line = "not logfmt \"x"
			}
			es = append(es, store.LabeledEntry{
				Labels: fmt.Sprintf(`{app="%s", env="%s"}`, []string{"a", "b"}[r.IntN(2)], []string{"x", "y"}[r.IntN(2)]),
				Time:   base - int64(r.IntN(1800))*int64(time.Second) - int64(r.IntN(1000)),
				Line:   []byte(line),
				Attrs:  attrs.MustPairs(kv...),
			})
		}
		if err := ts.w.Append(context.Background(), es); err != nil {
			t.Fatal(err)
		}
		if half == 0 {
			if err := ts.w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ts
}

// TestPreGroupOracle (review 9, F3): a sum over count_over_time, rate,
// bytes_over_time and bytes_rate, which now groups entries by the sum's
// labels while reading, answers what the range vector over every full
// label set (metadata included: a series per entry) then summed answers:
// random by/without lists over stream, metadata, parsed and renamed
// labels, selectors, label filters on metadata, parsers, drop/keep, and
// pipeline errors (both fail, or neither).
func TestPreGroupOracle(t *testing.T) {
	e := newEnv(t, nil)
	ts := preGroupStore(t, e)
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"app", "env", "trace_id", "route", "region", "app_extracted", "level", "took", "__error__", "nope"}
	sels := []string{`{app=~".+"}`, `{app="a"}`, `{env="y"}`, `{app="a", env="x"}`}
	stages := []string{"", ` |= "error"`, ` | route="/a"`, ` | route!="/b"`, ` | region=""`, ` | trace_id=~"0+1.*"`,
		` | logfmt`, ` | logfmt | level="error"`, ` | logfmt | __error__=""`, ` | drop route`, ` | keep app, route`,
		` | drop app`, ` | json`, ` | app_extracted="meta"`}
	fns := []string{"count_over_time", "rate", "bytes_over_time", "bytes_rate"}
	failed, answered := 0, 0
	defer func() {
		t.Logf("%d queries failed (both), %d answered series", failed, answered)
		if failed < 10 || answered < 150 {
			t.Errorf("the random queries answer too little: %d failed, %d answered", failed, answered)
		}
	}()
	for i := range 300 {
		var by []string
		for _, n := range names {
			if r.IntN(4) == 0 {
				by = append(by, n)
			}
		}
		grouping := ""
		switch r.IntN(3) {
		case 1:
			grouping = " by (" + strings.Join(by, ", ") + ")"
		case 2:
			grouping = " without (" + strings.Join(by, ", ") + ")"
		}
		rng := []string{"1m", "5m", "30m", "1h"}[r.IntN(4)]
		qs := fmt.Sprintf("sum%s (%s(%s%s [%s]))", grouping, fns[r.IntN(4)], sels[r.IntN(len(sels))], stages[r.IntN(len(stages))], rng)
		me, err := parseMetric(qs)
		if err != nil {
			t.Fatalf("%s: %v", qs, err)
		}
		if preGroupOf(me) == nil {
			t.Fatalf("%s: not pre-grouped", qs)
		}
		step := int64([]int{1, 60, 300, 900, 3600}[r.IntN(5)]) * 1e9
		start := base - int64(r.IntN(2400))*1e9
		end := start + int64(r.IntN(40))*step
		if i%10 == 0 {
			end = start // an instant
		}
		var steps []int64
		for t := start; t <= end; t += step {
			steps = append(steps, t)
		}
		got, gotErr := evalMetric(context.Background(), ts, me, start, end, step)
		in, wantErr := evalRange(context.Background(), ts, me.inner, start, end, steps, nil)
		f, a := checkPreGrouped(t, qs, me, got, gotErr, in, wantErr)
		failed += f
		answered += a
	}
}

// TestPreGroupMetaFree: blocks are read without structured metadata only
// when the sum's answer cannot depend on it: no label kept, or only labels
// every selected stream has by an equality matcher, and no label filter,
// drop or keep. The end-to-end half: where metadata supplies a by label
// (the stream lacks it), flushed entries must still group by it.
func TestPreGroupMetaFree(t *testing.T) {
	for _, c := range []struct {
		q    string
		want bool
	}{
		{`sum(count_over_time({app="a"}[1m]))`, true},
		{`sum by (app) (count_over_time({app="a"}[1m]))`, true},
		{`sum by (app, env) (rate({app="a", env="x"} |= "x" | logfmt [1m]))`, true},
		{`sum(count_over_time({app="a"} | logfmt [1m]))`, true},
		{`sum by (app) (count_over_time({app=~"a|b"}[1m]))`, true},          // every stream has app
		{`sum by (env) (count_over_time({app="a", env=~"x|"}[1m]))`, false}, // env may be missing: metadata could give it
		{`sum by (env) (count_over_time({app="a", env=~".*"}[1m]))`, false},
		{`sum by (env) (count_over_time({app="a", env!="x"}[1m]))`, false},
		{`sum by (env) (count_over_time({app="a", env=~"x"}[1m]))`, true},
		{`sum by (app) (count_over_time({env="x", app!="b"}[1m]))`, false},
		{`sum by (env) (count_over_time({app="a"}[1m]))`, false},
		{`sum by (trace_id) (count_over_time({app="a"}[1m]))`, false},
		{`sum without (trace_id) (count_over_time({app="a"}[1m]))`, false},
		{`sum without () (count_over_time({app="a"}[1m]))`, false},
		{`sum(count_over_time({app="a"} | trace_id="x" [1m]))`, false},
		{`sum(count_over_time({app="a"} | logfmt | level="error" [1m]))`, false},
		{`sum(count_over_time({app="a"} | drop app [1m]))`, false},
		{`sum by (app) (count_over_time({app="a"} | keep app [1m]))`, false},
	} {
		me, err := parseMetric(c.q)
		if err != nil {
			t.Fatal(err)
		}
		g := preGroupOf(me)
		sel, err := parseSelection(me.inner.log, false)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if got := g.metaFree(sel); got != c.want {
			t.Errorf("%s: metaFree %v, want %v", c.q, got, c.want)
		}
	}
	for _, c := range []struct {
		q       string
		noGroup bool
	}{
		{`max(count_over_time({app="a"}[1m]))`, true},
		{`count by (app) (count_over_time({app="a"}[1m]))`, true},
		{`min(rate({app="a"}[1m]))`, true},
		{`sum(sum_over_time({app="a"} | unwrap took [1m]))`, false}, // fix 10
		{`sum by (app) (rate({app="a"} | unwrap took [1m]))`, false},
		{`sum(avg_over_time({app="a"} | unwrap took [1m]))`, true},
		{`sum(max_over_time({app="a"} | unwrap took [1m]))`, true},
		{`max(max_over_time({app="a"} | unwrap took [1m]))`, true},
		{`sum(quantile_over_time(0.5, {app="a"} | unwrap took [1m]))`, true},
		{`sum(rate_counter({app="a"} | unwrap took [1m]))`, true},
		{`sum(stddev_over_time({app="a"} | unwrap took [1m]))`, true},
		{`sum(last_over_time({app="a"} | unwrap took [1m]))`, true},
		{`sum(topk(2, count_over_time({app="a"}[1m])))`, true},
		{`sum(count_over_time({app="a"}[1m]))`, false},
	} {
		me, err := parseMetric(c.q)
		if err != nil {
			t.Fatal(err)
		}
		if (preGroupOf(me) == nil) != c.noGroup {
			t.Errorf("%s: pre-grouped %v, want %v", c.q, preGroupOf(me) != nil, !c.noGroup)
		}
	}

	// Metadata "route" (on most entries of streams without a route label),
	// half in a flushed segment: the answer must hold every route, as
	// counted from the entries.
	e := newEnv(t, nil)
	ts, err := e.srv.openTenant(DefaultTenant, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for half := range 2 {
		var es []store.LabeledEntry
		for i := range 50 {
			route := []string{"/a", "/b", "/c"}[i%3]
			es = append(es, store.LabeledEntry{Labels: `{app="api"}`, Time: base - int64(half*50+i+1)*int64(time.Second), Line: []byte("served"),
				Attrs: attrs.MustPairs("route", route, "trace_id", fmt.Sprint(half, i))})
			want[route]++
		}
		if err := ts.w.Append(context.Background(), es); err != nil {
			t.Fatal(err)
		}
		if half == 0 {
			if err := ts.w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, qs := range []string{`sum by (route) (count_over_time({app="api"}[1h]))`, `sum by (route) (count_over_time({app="api"} |= "served" [1h]))`} {
		code, body := e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", url.QueryEscape(qs), base))
		if code != 200 {
			t.Fatalf("%s: %d %s", qs, code, body)
		}
		wantJSON(t, qs, dropStats(t, body), fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":[`+
			`{"metric":{"route":"/a"},"value":[%d,"%d"]},{"metric":{"route":"/b"},"value":[%d,"%d"]},{"metric":{"route":"/c"},"value":[%d,"%d"]}]}}`,
			base/1e9, want["/a"], base/1e9, want["/b"], base/1e9, want["/c"]))
	}
}

// TestRangeSeriesLimitEarly (review 9, F3): a range vector whose entries
// each carry a unique trace_id is a series per entry; --max-query-series
// stops the scan at the limit's next series instead of building all of
// them first (40,000 entries: the old code allocated tens of MB before
// the same 400). Memory is measured, with a generous bound.
func TestRangeSeriesLimitEarly(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxQuerySeries = 100 })
	ts, err := e.srv.openTenant(DefaultTenant, true)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40000
	es := make([]store.LabeledEntry, 0, n)
	for i := range n {
		es = append(es, store.LabeledEntry{Labels: `{app="m"}`, Time: base - int64(i)*int64(time.Millisecond), Line: []byte("took=5"),
			Attrs: attrs.MustPairs("trace_id", fmt.Sprintf("%032x", i))})
	}
	if err := ts.w.Append(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	if err := ts.w.Flush(); err != nil {
		t.Fatal(err)
	}
	es = nil
	qs := fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&step=60", url.QueryEscape(`count_over_time({app="m"}[1m])`), base/1e9-60, base/1e9)
	var code int
	var body string
	_, alloc := queryMemory(func() { code, body = e.get(qs) })
	if code != 400 || !strings.Contains(body, "maximum number of series (100) reached for a single query") {
		t.Fatalf("%d %.300s", code, body)
	}
	t.Logf("allocated %d KiB", alloc>>10)
	if alloc > 8<<20 {
		t.Errorf("the refused query allocated %d MiB, want under 8 (it stops at the 101st series)", alloc>>20)
	}
	// The same entries under a sum: one series, answered.
	code, body = e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", url.QueryEscape(`sum(count_over_time({app="m"}[1h]))`), base/1e9))
	if code != 200 || !strings.Contains(body, fmt.Sprintf(`"value":[%d,"%d"]`, base/1e9, n)) {
		t.Fatalf("sum: %d %.300s", code, body)
	}
}

// TestPreGroupUnwrapOracle: a sum over sum_over_time or rate of
// unwrapped values, which now groups samples by the sum's labels while
// reading, answers what the unwrapped range vector over every full label
// set then summed answers: random by/without lists, unwrapped labels from
// the line (logfmt) or from metadata, conversion errors (a pipeline error
// unless filtered: both fail, or neither), filters before and after the
// unwrap.
func TestPreGroupUnwrapOracle(t *testing.T) {
	e := newEnv(t, nil)
	ts := preGroupStore(t, e)
	r := rand.New(rand.NewPCG(3, 4))
	names := []string{"app", "env", "trace_id", "route", "region", "app_extracted", "level", "took", "__error__", "__error_details__", "nope"}
	sels := []string{`{app=~".+"}`, `{app="a"}`, `{env="y"}`}
	pipes := []string{` | logfmt | unwrap took`, ` | logfmt | __error__="" | unwrap took`, ` | logfmt | unwrap took | __error__=""`,
		` | logfmt | level="error" | unwrap took`, ` | logfmt | unwrap took | took > 50`, ` | unwrap trace_id`,
		` | unwrap trace_id | __error__=""`, ` | logfmt | unwrap level | __error__=""`, ` | logfmt | unwrap duration(took) | __error__=""`,
		` | logfmt | unwrap took`, ` | route="/a" | logfmt | unwrap took`, ` | unwrap took`}
	fns := []string{"sum_over_time", "rate"}
	failed, answered := 0, 0
	defer func() {
		t.Logf("%d queries failed (both), %d answered series", failed, answered)
		if failed < 10 || answered < 150 {
			t.Errorf("the random queries answer too little: %d failed, %d answered", failed, answered)
		}
	}()
	for i := range 300 {
		pick := func() []string {
			var by []string
			for _, n := range names {
				if r.IntN(4) == 0 {
					by = append(by, n)
				}
			}
			return by
		}
		grouping := ""
		switch r.IntN(3) {
		case 1:
			grouping = " by (" + strings.Join(pick(), ", ") + ")"
		case 2:
			grouping = " without (" + strings.Join(pick(), ", ") + ")"
		}
		rng := []string{"1m", "5m", "30m"}[r.IntN(3)]
		qs := fmt.Sprintf("sum%s (%s(%s%s [%s]))", grouping, fns[r.IntN(2)], sels[r.IntN(len(sels))], pipes[r.IntN(len(pipes))], rng)
		me, err := parseMetric(qs)
		if err != nil {
			t.Fatalf("%s: %v", qs, err)
		}
		if preGroupOf(me) == nil {
			t.Fatalf("%s: not pre-grouped", qs)
		}
		step := int64([]int{1, 60, 300, 900}[r.IntN(4)]) * 1e9
		start := base - int64(r.IntN(2400))*1e9
		end := start + int64(r.IntN(40))*step
		if i%10 == 0 {
			end = start
		}
		got, gotErr := evalMetric(context.Background(), ts, me, start, end, step)
		in, wantErr := evalUnwrap(context.Background(), ts, me.inner, start, end, step, nil)
		f, a := checkPreGrouped(t, qs, me, got, gotErr, in, wantErr)
		failed += f
		answered += a
	}
}

// checkPreGrouped compares a pre-grouped answer (got, gotErr) with the
// oracle's: the full-label-set range vector (in, wantErr) aggregated by
// me. It counts 1 in failed when the oracle failed, else 1 in answered
// when it answered any series. Sums of integers are exact; rate's sum
// of n_i/range and (sum n_i)/range may differ in the last bits.
func checkPreGrouped(t *testing.T, qs string, me *mexpr, got []*series, gotErr error, in []*series, wantErr error) (failed, answered int) {
	t.Helper()
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("%s: error %v, want %v", qs, gotErr, wantErr)
	}
	if wantErr != nil {
		return 1, 0
	}
	want := aggregate(me, in)
	if len(got) != len(want) {
		t.Fatalf("%s: %d series, want %d", qs, len(got), len(want))
	}
	for j := range want {
		g, w := got[j], want[j]
		if g.labels.String() != w.labels.String() || len(g.ts) != len(w.ts) {
			t.Fatalf("%s: series %d %s with %d points, want %s with %d", qs, j, g.labels, len(g.ts), w.labels, len(w.ts))
		}
		for k := range w.ts {
			if g.ts[k] != w.ts[k] || math.Abs(g.vs[k]-w.vs[k]) > 1e-12*math.Abs(w.vs[k]) {
				t.Fatalf("%s: %s point %d (%d, %v), want (%d, %v)", qs, w.labels, k, g.ts[k], g.vs[k], w.ts[k], w.vs[k])
			}
		}
	}
	if len(want) > 0 {
		return 0, 1
	}
	return 0, 0
}
