package server

import (
	"net/url"
	"strings"
	"testing"
)

// TestMetricUnwrapFilterSeesLabel: a label filter after unwrap sees the
// unwrapped label (`| unwrap lat | lat > 5` keeps the samples over 5, as
// `| lat > 5 | unwrap lat` does), and the series still leave it out
// (review 8, F3: every sample was dropped).
func TestMetricUnwrapFilterSeesLabel(t *testing.T) {
	env := newEnv(t, nil)
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{app="a"}`, Entries: []PushEntry{
			{Time: base - 40e9, Line: `lat=3`},
			{Time: base - 30e9, Line: `lat=7`},
			{Time: base - 20e9, Line: `lat=10`},
			{Time: base - 10e9, Line: `lat=20`},
		}},
	}), "Content-Type", "application/x-protobuf")
	for _, c := range []struct{ q, want string }{
		{`sum_over_time({app="a"} | logfmt | unwrap lat | lat > 5 [1m])`, `{"metric":{"app":"a",` + dlJSON(true, "lat=3") + `"service_name":"a"},"value":[1700000000,"37"]}`},
		{`sum_over_time({app="a"} | logfmt | lat > 5 | unwrap lat [1m])`, `{"metric":{"app":"a",` + dlJSON(true, "lat=3") + `"service_name":"a"},"value":[1700000000,"37"]}`},
		{`max_over_time({app="a"} | logfmt | unwrap lat | lat < 10 [1m])`, `{"metric":{"app":"a",` + dlJSON(true, "lat=3") + `"service_name":"a"},"value":[1700000000,"7"]}`},
		{`sum(count_over_time({app="a"} | logfmt | lat != "" [1m]))`, `{"metric":{},"value":[1700000000,"4"]}`},
		{`sum(sum_over_time({app="a"} | logfmt | unwrap lat | lat != "" [1m]))`, `{"metric":{},"value":[1700000000,"40"]}`},
	} {
		code, body := env.get("/loki/api/v1/query?time=1700000000&query=" + url.QueryEscape(c.q))
		if code != 200 {
			t.Errorf("%s: %d %s", c.q, code, body)
			continue
		}
		wantJSON(t, c.q, dropStats(t, body), `{"status":"success","data":{"resultType":"vector","result":[`+c.want+`]}}`)
	}
}

// TestMetricQueryDepth: metric queries deeper than maxMetricDepth or
// longer than maxMetricQueryBytes are a 400, not a stack that grows
// until the runtime aborts the server (review 8, F4: 450,000 '(').
func TestMetricQueryDepth(t *testing.T) {
	env := newEnv(t, nil)
	nest := func(n int, inner string) string {
		return strings.Repeat("(", n) + inner + strings.Repeat(")", n)
	}
	query := func(q string) (int, string) {
		return env.get("/loki/api/v1/query?time=1700000000&query=" + url.QueryEscape(q))
	}
	if code, body := query("sum" + nest(100, "vector(1)")); code != 200 || !strings.Contains(body, `"1"`) {
		t.Errorf("100 levels: %d %s", code, body)
	}
	for _, c := range []struct{ q, msg string }{
		{"sum" + nest(300, "vector(1)"), "nested deeper than 256"},
		{strings.Repeat("2 ^ ", 300) + "2", "nested deeper than 256"},
		{strings.Repeat("sum(", 300) + "vector(1)" + strings.Repeat(")", 300), "nested deeper than 256"},
		{"sum" + nest(40000, "vector(1)"), "longer than the limit of 65536"},
	} {
		code, body := query(c.q)
		if code != 400 || !strings.Contains(body, c.msg) {
			t.Errorf("%.40s... (%d bytes): %d %.300s, want 400 %q", c.q, len(c.q), code, body, c.msg)
		}
	}
	// The parser's own bound, below the HTTP layer.
	if _, err := parseMetric("sum" + nest(450_000, "vector(1)")); err == nil {
		t.Error("450,000 levels parsed")
	}
}

// TestMetricUnarySign: a sign in an operand's place may stand apart
// from its number, as in PromQL (review 8, L3: `x * - 1` was a 400).
func TestMetricUnarySign(t *testing.T) {
	env := newEnv(t, nil)
	for _, c := range []struct{ q, want string }{
		{`vector(2) * - 1`, `"-2"`},
		{`vector(2) * -1`, `"-2"`},
		{`vector(2) - - 3`, `"5"`},
		{`vector(2) - 1e-1`, `"1.9"`},
		// A sign before a sign is unary minus on what follows, as in
		// PromQL (metricq_fn.go).
		{`vector(2) * - - 1`, `"2"`},
	} {
		code, body := env.get("/loki/api/v1/query?time=1700000000&query=" + url.QueryEscape(c.q))
		if code != 200 || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want %s", c.q, code, body, c.want)
		}
	}
	for _, q := range []string{`vector(2) * -`, `vector(2) * - -`} {
		if code, body := env.get("/loki/api/v1/query?time=1700000000&query=" + url.QueryEscape(q)); code != 400 {
			t.Errorf("%s: %d %s, want 400", q, code, body)
		}
	}
}
