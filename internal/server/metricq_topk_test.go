package server

import (
	"net/url"
	"strings"
	"testing"
)

// topkEnv pushes entries whose counts per 1m window (t-60s, t] are, at
// the steps base-120s, base-60s and base:
//
//	{app="a"}              -, 2, 1
//	{app="b"}              -, -, 3
//	{app="c"}              -, 1, -
//	{app="d", env="prod"}  -, 2, -
func topkEnv(t *testing.T) *testEnv {
	t.Helper()
	env := newEnv(t, nil)
	at := func(ss ...int64) []PushEntry {
		var es []PushEntry
		for _, s := range ss {
			es = append(es, PushEntry{Time: base - s*1e9, Line: "l"})
		}
		return es
	}
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{app="a"}`, Entries: at(100, 90, 10)},
		{Labels: `{app="b"}`, Entries: at(30, 20, 5)},
		{Labels: `{app="c"}`, Entries: at(70)},
		{Labels: `{app="d", env="prod"}`, Entries: at(75, 65)},
	}), "Content-Type", "application/x-protobuf")
	return env
}

// TestMetricTopK: hand-computed topk and bottomk answers (exact JSON):
// a series appears at the steps where it ranks, ties go to the labels
// that sort first, NaN ranks last in both, by/without group as in sum.
func TestMetricTopK(t *testing.T) {
	env := topkEnv(t)
	const rangeQ = "/loki/api/v1/query_range?start=1699999880&end=1700000000&step=60&query="
	per := `sum by (app, env) (count_over_time({app=~".+"}[1m]))`
	for _, c := range []struct{ q, want string }{
		// -60: a=2 and d=2 tie (a sorts first); 0: b=3.
		{`topk(1, ` + per + `)`, `{"metric":{"app":"a"},"values":[[1699999940,"2"]]},{"metric":{"app":"b"},"values":[[1700000000,"3"]]}`},
		{`topk(2, ` + per + `)`, `{"metric":{"app":"a"},"values":[[1699999940,"2"],[1700000000,"1"]]},{"metric":{"app":"b"},"values":[[1700000000,"3"]]},{"metric":{"app":"d","env":"prod"},"values":[[1699999940,"2"]]}`},
		{`topk(100, ` + per + `)`, `{"metric":{"app":"a"},"values":[[1699999940,"2"],[1700000000,"1"]]},{"metric":{"app":"b"},"values":[[1700000000,"3"]]},{"metric":{"app":"c"},"values":[[1699999940,"1"]]},{"metric":{"app":"d","env":"prod"},"values":[[1699999940,"2"]]}`},
		{`bottomk(1, ` + per + `)`, `{"metric":{"app":"a"},"values":[[1700000000,"1"]]},{"metric":{"app":"c"},"values":[[1699999940,"1"]]}`},
		{`bottomk(2, ` + per + `)`, `{"metric":{"app":"a"},"values":[[1699999940,"2"],[1700000000,"1"]]},{"metric":{"app":"b"},"values":[[1700000000,"3"]]},{"metric":{"app":"c"},"values":[[1699999940,"1"]]}`},
		// Groups: env="" (a, b, c) and env="prod" (d).
		{`topk by (env) (1, ` + per + `)`, `{"metric":{"app":"a"},"values":[[1699999940,"2"]]},{"metric":{"app":"b"},"values":[[1700000000,"3"]]},{"metric":{"app":"d","env":"prod"},"values":[[1699999940,"2"]]}`},
		{`topk(1, ` + per + `) without (app)`, `{"metric":{"app":"a"},"values":[[1699999940,"2"]]},{"metric":{"app":"b"},"values":[[1700000000,"3"]]},{"metric":{"app":"d","env":"prod"},"values":[[1699999940,"2"]]}`},
		{`bottomk by (app) (1, ` + per + `)`, `{"metric":{"app":"a"},"values":[[1699999940,"2"],[1700000000,"1"]]},{"metric":{"app":"b"},"values":[[1700000000,"3"]]},{"metric":{"app":"c"},"values":[[1699999940,"1"]]},{"metric":{"app":"d","env":"prod"},"values":[[1699999940,"2"]]}`},
		// All NaN: the first labels at each step.
		{`topk(1, ` + per + ` / 0)`, `{"metric":{"app":"a"},"values":[[1699999940,"NaN"],[1700000000,"NaN"]]}`},
		// (n-1)/(n-1): 1, or NaN where n = 1 (c at -60, a at 0): NaN
		// ranks after every number for topk and bottomk alike.
		{`topk(1, (` + per + ` - 1) / (` + per + ` - 1))`, `{"metric":{"app":"a"},"values":[[1699999940,"1"]]},{"metric":{"app":"b"},"values":[[1700000000,"1"]]}`},
		{`bottomk(1, (` + per + ` - 1) / (` + per + ` - 1))`, `{"metric":{"app":"a"},"values":[[1699999940,"1"]]},{"metric":{"app":"b"},"values":[[1700000000,"1"]]}`},
		{`sum(topk(2, ` + per + `))`, `{"metric":{},"values":[[1699999940,"4"],[1700000000,"4"]]}`},
		{`topk(1, ` + per + `) > 2`, `{"metric":{"app":"b"},"values":[[1700000000,"3"]]}`},
		{`topk(3, count_over_time({app="nope"}[1m]))`, ``},
		{`topk(1, vector(5))`, `{"metric":{},"values":[[1699999880,"5"],[1699999940,"5"],[1700000000,"5"]]}`},
	} {
		code, body := env.get(rangeQ + url.QueryEscape(c.q))
		if code != 200 {
			t.Errorf("%s: %d %s", c.q, code, body)
			continue
		}
		wantJSON(t, c.q, dropStats(t, body), `{"status":"success","data":{"resultType":"matrix","result":[`+c.want+`]}}`)
	}
	for _, c := range []struct{ at, q, want string }{
		{"1699999940", `topk(1, ` + per + `)`, `{"metric":{"app":"a"},"value":[1699999940,"2"]}`},
		{"1699999940", `bottomk(2, ` + per + `)`, `{"metric":{"app":"a"},"value":[1699999940,"2"]},{"metric":{"app":"c"},"value":[1699999940,"1"]}`},
		{"1699999880", `topk(1, ` + per + `)`, ``},
	} {
		code, body := env.get("/loki/api/v1/query?time=" + c.at + "&query=" + url.QueryEscape(c.q))
		if code != 200 {
			t.Errorf("%s: %d %s", c.q, code, body)
			continue
		}
		wantJSON(t, c.q, dropStats(t, body), `{"status":"success","data":{"resultType":"vector","result":[`+c.want+`]}}`)
	}
	for _, c := range []struct{ q, msg string }{
		{`topk(0, ` + per + `)`, `topk: invalid parameter \"0\"`},
		{`topk(-1, ` + per + `)`, `topk: invalid parameter \"-1\"`},
		{`bottomk(1.5, ` + per + `)`, `bottomk: invalid parameter \"1.5\"`},
		{`topk(k, ` + per + `)`, `k must be an integer greater than 0`},
		{`topk(1e12, ` + per + `)`, `invalid parameter`},
		{`topk(2)`, `topk wants , after k`},
		{`topk(2, 3)`, `topk wants a vector, got the scalar 3`},
		{`topk(2, ` + per + ``, `topk: missing )`},
		{`topz(2, ` + per + `)`, `unsupported function \"topz\"`},
	} {
		for _, path := range []string{"/loki/api/v1/query?time=1700000000&query=", rangeQ} {
			code, body := env.get(path + url.QueryEscape(c.q))
			if code != 400 || !strings.Contains(body, c.msg) {
				t.Errorf("%s%s: %d %s; want 400 with %q", path, c.q, code, body, c.msg)
			}
		}
	}
}
