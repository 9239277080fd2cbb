// Regression tests from the metric semantics oracle: each failed before
// its fix (operator precedence, exact times, series order, compound
// durations).
package server

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// mfQuery runs a metric query and returns its series (labels and
// values as the JSON text has them: [time, "value"]).
func mfQuery(t *testing.T, e *testEnv, path string) (int, []map[string]any, string) {
	t.Helper()
	code, body := e.get(path)
	if code != 200 {
		return code, nil, body
	}
	var resp struct {
		Data struct {
			Result []map[string]any `json:"result"`
		} `json:"data"`
	}
	d := json.NewDecoder(strings.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&resp); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return code, resp.Data.Result, body
}

// F1. Arithmetic ignores operator precedence: LogQL's query reference
// ("Order of operations": regular mathematical convention, operators of
// one level left-associative) makes 1 + 2 * 3 equal 7; Haystack folds
// left to right (metricq.go expr) and answers 9.
func TestMetricRegressPrecedence(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		q    string
		want string
	}{
		{`vector(1) + vector(2) * vector(3)`, "7"},
		{`vector(0) + 1 + 2 * 3`, "7"}, // (1 + 2 * 3 alone is a scalar answer: metricq_fn_test.go)
		{`vector(10) - vector(6) / vector(2)`, "7"},
		{`vector(8) / vector(2) + vector(2) * vector(3)`, "10"},
		{`(vector(1) + vector(2)) * vector(3)`, "9"}, // control: parenthesized
	} {
		p := "/loki/api/v1/query?time=1700000000&query=" + url.QueryEscape(c.q)
		code, res, body := mfQuery(t, e, p)
		if code != 200 || len(res) != 1 {
			t.Errorf("%s: %d %s", c.q, code, body)
			continue
		}
		v := res[0]["value"].([]any)
		if got := v[1].(string); got != c.want {
			t.Errorf("%s = %s, want %s (LogQL order of operations)", c.q, got, c.want)
		}
	}
}

// F3. Series order. Loki answers a matrix (and an instant vector, but for
// sort/sort_desc/topk) sorted by labels, compared label by label; Haystack
// sorts by the canonical text `{a="b", c="d"}` (loki.go evalRange and
// aggregate: slices.Sorted(maps.Keys(groups))), whose quote, comma and
// closing brace put {app="a b"} before {app="a"} and {app="a", level="x"}
// before {app="a"}.
func TestMetricRegressSeriesOrder(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{app="a", level="x"}`, Entries: []PushEntry{{Time: base - 10e9, Line: "l"}}},
		{Labels: `{app="a"}`, Entries: []PushEntry{{Time: base - 10e9, Line: "l"}}},
		{Labels: `{app="a b"}`, Entries: []PushEntry{{Time: base - 10e9, Line: "l"}}},
		{Labels: `{app="a!"}`, Entries: []PushEntry{{Time: base - 10e9, Line: "l"}}},
	}), "Content-Type", "application/x-protobuf")
	for _, q := range []string{`count_over_time({app=~"a.*"}[1m])`, `sum by (app, level) (count_over_time({app=~"a.*"}[1m]))`} {
		for _, p := range []string{"/loki/api/v1/query?time=1700000000&query=", "/loki/api/v1/query_range?start=1700000000&end=1700000000&step=1&query="} {
			code, res, body := mfQuery(t, e, p+url.QueryEscape(q))
			if code != 200 || len(res) != 4 {
				t.Fatalf("%s%s: %d %s", p, q, code, body)
			}
			var got []string
			sorted := true
			for i, s := range res {
				got = append(got, fmt.Sprint(s["metric"]))
				if i > 0 && mfCompare(res[i-1]["metric"].(map[string]any), s["metric"].(map[string]any)) > 0 {
					sorted = false
				}
			}
			if !sorted {
				t.Errorf("%s%s: series in order %v; Loki sorts by labels: map[app:a] map[app:a level:x] map[app:a b] ... ", p[:22], q, got)
			}
		}
	}
}

// F4. Timestamps are written as float64(ns)/1e9 (loki.go lokiMetric sec
// and matrixValues.MarshalJSON), which for about a quarter of
// millisecond-aligned times (what Grafana sends) prints float noise:
// 1724099053.735 comes out as 1724099053.7350001, and 1773238837.821 as
// 1773238837.8209999, which a reader truncating to milliseconds (as
// Prometheus's model.Time does) takes for .820. Loki's times are
// milliseconds, written exactly.
func TestMetricRegressTimestampText(t *testing.T) {
	e := newEnv(t, nil)
	for _, ms := range []int64{1724099053735, 1773238837821, 1616479175694} {
		ns := ms * 1e6
		e.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="a"}`, Entries: []PushEntry{{Time: ns - 1e9, Line: "l"}}}}), "Content-Type", "application/x-protobuf")
		want := strconv.FormatInt(ms/1000, 10) + "." + fmt.Sprintf("%03d", ms%1000)
		q := url.QueryEscape(`count_over_time({app="a"}[5s])`)
		for _, p := range []string{
			fmt.Sprintf("/loki/api/v1/query_range?start=%d&end=%d&step=1&query=%s", ns, ns, q),
			fmt.Sprintf("/loki/api/v1/query?time=%d&query=%s", ns, q),
		} {
			code, body := e.get(p)
			if code != 200 {
				t.Fatalf("%s: %d %s", p, code, body)
			}
			if !strings.Contains(body, "["+want+",") {
				t.Errorf("%s:\n got %.200s\nwant the time written %s", p, dropStats(t, body), want)
			}
		}
	}
}

// F5. Compound durations with d, w or y are refused: Loki reads ranges
// and steps as Prometheus durations ("Time durations can be combined, by
// concatenation", units longest first), so [1d12h] is 36 hours; Haystack's
// parsePromDuration (query.go) only takes a Go duration or one number
// followed by d, w or y, and answers 400 "bad range".
func TestMetricRegressCompoundDuration(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="a"}`, Entries: []PushEntry{{Time: base - 30*3600e9, Line: "l"}}}}), "Content-Type", "application/x-protobuf")
	for _, c := range []struct{ q, step string }{
		{`count_over_time({app="a"}[1d12h])`, "60"},
		{`count_over_time({app="a"}[1w1d])`, "60"},
		{`count_over_time({app="a"}[36h])`, "1d12h"},
	} {
		p := fmt.Sprintf("/loki/api/v1/query_range?start=1700000000&end=1700000000&step=%s&query=%s", c.step, url.QueryEscape(c.q))
		code, res, body := mfQuery(t, e, p)
		if code != 200 || len(res) != 1 {
			t.Errorf("%s step=%s: %d %.200s; want the one entry counted", c.q, c.step, code, body)
		}
	}
}

// mfCompare is the order of two label sets as Prometheus's labels.Compare
// defines it (Loki sorts matrix and instant vector results with it): the
// sorted labels pairwise, name then value, and a set that is a prefix of
// the other first.
func mfCompare(a, b map[string]any) int {
	ka, kb := slices.Sorted(func(y func(string) bool) {
		for k := range a {
			if !y(k) {
				return
			}
		}
	}), slices.Sorted(func(y func(string) bool) {
		for k := range b {
			if !y(k) {
				return
			}
		}
	})
	for i := 0; i < len(ka) && i < len(kb); i++ {
		if c := strings.Compare(ka[i], kb[i]); c != 0 {
			return c
		}
		if c := strings.Compare(a[ka[i]].(string), b[kb[i]].(string)); c != 0 {
			return c
		}
	}
	return len(ka) - len(kb)
}

// F2. A pipeline error from an entry that no evaluation window holds.
// Loki fails a metric query when a series carrying __error__ has a
// sample at some step; Haystack checks every entry it read in
// (start-range, end] (loki.go evalRange: pipelineError over all groups
// before windows are cut), so a malformed line between two windows (step
// > range, the usual Grafana panel over a long time range) or after the
// last step fails the whole panel.
func TestMetricRegressPipelineErrorOutsideWindows(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="a"}`, Entries: []PushEntry{
		{Time: base - 200e9, Line: `{"n":1}`},
		{Time: base - 170e9, Line: `not json`}, // in no window: (base-260s, base-200s], (base-160s, base-100s], (base-60s, base]
		{Time: base, Line: `{"n":2}`},
		{Time: base + 50e9, Line: `not json either`}, // after the last step (base), before end (base+60s)
	}}}), "Content-Type", "application/x-protobuf")
	for _, end := range []string{"1700000000", "1700000060"} {
		p := "/loki/api/v1/query_range?start=1699999800&end=" + end + "&step=100&query=" + url.QueryEscape(`sum by (app) (count_over_time({app="a"} | json [1m]))`)
		code, res, body := mfQuery(t, e, p)
		if code != 200 {
			t.Errorf("end=%s: %d %.200s; want 200 with {app=\"a\"}: [1699999800,\"1\"],[1700000000,\"1\"] (no window holds a malformed line)", end, code, body)
			continue
		}
		b, _ := json.Marshal(res)
		if want := `[{"metric":{"app":"a"},"values":[[1699999800,"1"],[1700000000,"1"]]}]`; string(b) != want {
			t.Errorf("end=%s: %s, want %s", end, b, want)
		}
	}
}
