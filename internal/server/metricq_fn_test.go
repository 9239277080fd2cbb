package server

// sort, sort_desc, unary minus, offset, label_replace, absent_over_time
// and group_left/group_right: answers computed by hand over boExactEnv's
// entries ({app="x"}: "err a" at base-50s, "ok" at -40s, "err b" at
// -10s; {app="y"}: "err c" at -100s; both streams also carry
// service_name, added at push), compared as whole JSON documents; and
// the refusals, with their status and message.

import (
	"net/url"
	"strings"
	"testing"
)

// fnRange is query_range over steps base-120s, -90s, -60s, -30s, base.
const fnRange = "/loki/api/v1/query_range?start=1699999880&end=1700000000&step=30&query="

// count_over_time({app=~"x|y"}[1m]) at those steps (windows (t-60s, t]):
// x: -30: 2, 0: 3; y: -90: 1, -60: 1. With [5m]: x: -30: 2, 0: 3; y:
// -90, -60, -30, 0: 1. With [10m] at base: x 3, y 1.
const (
	fnCount   = `count_over_time({app=~"x|y"}[1m])`
	fnCount5  = `count_over_time({app=~"x|y"}[5m])`
	fnCount10 = `count_over_time({app=~"x|y"}[10m])`
)

func fnMatrix(res string) string {
	return `{"status":"success","data":{"resultType":"matrix","result":[` + res + `]}}`
}

func fnVector(res string) string {
	return `{"status":"success","data":{"resultType":"vector","result":[` + res + `]}}`
}

// fnCheck runs each query and compares the answer with want.
func fnCheck(t *testing.T, env *testEnv, path string, cases []struct{ q, want string }, wrap func(string) string) {
	t.Helper()
	for _, c := range cases {
		code, body := env.get(path + url.QueryEscape(c.q))
		if code != 200 {
			t.Errorf("%s: %d %s", c.q, code, body)
			continue
		}
		wantJSON(t, c.q, dropStats(t, body), wrap(c.want))
	}
}

const (
	fnX = `{"app":"x","service_name":"x"}`
	fnY = `{"app":"y","service_name":"y"}`
)

func TestMetricSort(t *testing.T) {
	env := boExactEnv(t)
	at := "/loki/api/v1/query?time=1700000000&query="
	// (n-1)/(n-1): x 2/2 = 1, y 0/0 = NaN.
	nan := `(` + fnCount10 + ` - 1) / (` + fnCount10 + ` - 1)`
	fnCheck(t, env, at, []struct{ q, want string }{
		{`sort(` + fnCount10 + `)`, `{"metric":` + fnY + `,"value":[1700000000,"1"]},{"metric":` + fnX + `,"value":[1700000000,"3"]}`},
		{`sort_desc(` + fnCount10 + `)`, `{"metric":` + fnX + `,"value":[1700000000,"3"]},{"metric":` + fnY + `,"value":[1700000000,"1"]}`},
		{`sort((sort_desc(` + fnCount10 + `)))`, `{"metric":` + fnY + `,"value":[1700000000,"1"]},{"metric":` + fnX + `,"value":[1700000000,"3"]}`},
		// Equal values: by labels.
		{`sort_desc(` + fnCount10 + ` * 0)`, `{"metric":` + fnX + `,"value":[1700000000,"0"]},{"metric":` + fnY + `,"value":[1700000000,"0"]}`},
		// NaN last, in both orders.
		{`sort(` + nan + `)`, `{"metric":` + fnX + `,"value":[1700000000,"1"]},{"metric":` + fnY + `,"value":[1700000000,"NaN"]}`},
		{`sort_desc(` + nan + `)`, `{"metric":` + fnX + `,"value":[1700000000,"1"]},{"metric":` + fnY + `,"value":[1700000000,"NaN"]}`},
		// Not at the root: the answer is sorted by labels as always.
		{`sort(` + fnCount10 + `) + 0`, `{"metric":` + fnX + `,"value":[1700000000,"3"]},{"metric":` + fnY + `,"value":[1700000000,"1"]}`},
		{`sort(count_over_time({app="nope"}[1m]))`, ``},
	}, fnVector)
	// A range answer is ordered by labels (Prometheus ignores sort there).
	fnCheck(t, env, fnRange, []struct{ q, want string }{
		{`sort_desc(` + fnCount + `)`, `{"metric":` + fnX + `,"values":[[1699999970,"2"],[1700000000,"3"]]},{"metric":` + fnY + `,"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		{`sort(` + fnCount + `)`, `{"metric":` + fnX + `,"values":[[1699999970,"2"],[1700000000,"3"]]},{"metric":` + fnY + `,"values":[[1699999910,"1"],[1699999940,"1"]]}`},
	}, fnMatrix)
}

func TestMetricUnaryMinus(t *testing.T) {
	env := boExactEnv(t)
	all := func(v string) string {
		return `{"metric":{},"values":[[1699999880,"` + v + `"],[1699999910,"` + v + `"],[1699999940,"` + v + `"],[1699999970,"` + v + `"],[1700000000,"` + v + `"]]}`
	}
	fnCheck(t, env, fnRange, []struct{ q, want string }{
		{`-sum(` + fnCount + `)`, `{"metric":{},"values":[[1699999910,"-1"],[1699999940,"-1"],[1699999970,"-2"],[1700000000,"-3"]]}`},
		{`- (count_over_time({app="x"}[1m]))`, `{"metric":` + fnX + `,"values":[[1699999970,"-2"],[1700000000,"-3"]]}`},
		{`--count_over_time({app="x"}[1m])`, `{"metric":` + fnX + `,"values":[[1699999970,"2"],[1700000000,"3"]]}`},
		{`+count_over_time({app="x"}[1m])`, `{"metric":` + fnX + `,"values":[[1699999970,"2"],[1700000000,"3"]]}`},
		// Binds looser than ^ and tighter than *, as in PromQL.
		{`-sum(` + fnCount + `) * 2`, `{"metric":{},"values":[[1699999910,"-2"],[1699999940,"-2"],[1699999970,"-4"],[1700000000,"-6"]]}`},
		{`-sum(` + fnCount + `) ^ 2`, `{"metric":{},"values":[[1699999910,"-1"],[1699999940,"-1"],[1699999970,"-4"],[1700000000,"-9"]]}`},
		{`2 - -sum(` + fnCount + `)`, `{"metric":{},"values":[[1699999910,"3"],[1699999940,"3"],[1699999970,"4"],[1700000000,"5"]]}`},
		{`-(sum(` + fnCount + `) > 1)`, `{"metric":{},"values":[[1699999970,"-2"],[1700000000,"-3"]]}`},
		{`-vector(2)`, all("-2")},
		{`-(vector(2) + 1)`, all("-3")},
		{`-vector(2) ^ 2`, all("-4")},
		// A sign before a number is the number's, as Loki lexes it.
		{`vector(0) + -2 ^ 2`, all("4")},
		{`vector(0) + -(1 + 1)`, all("-2")},
		{`-(vector(0))`, all("-0")},
	}, fnMatrix)
}

func TestMetricOffset(t *testing.T) {
	env := boExactEnv(t)
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{app="u"}`, Entries: []PushEntry{{Time: base - 50e9, Line: "lat=5"}, {Time: base - 40e9, Line: "lat=7"}, {Time: base - 10e9, Line: "lat=11"}}},
	}), "Content-Type", "application/x-protobuf")
	u := `{"app":"u","service_name":"u"}`
	fnCheck(t, env, fnRange, []struct{ q, want string }{
		// At t the window is (t-30s-1m, t-30s]: at base -50s and -40s.
		{`count_over_time({app="x"}[1m] offset 30s)`, `{"metric":` + fnX + `,"values":[[1700000000,"2"]]}`},
		{`count_over_time({app="x"} [1m]  offset  30s)`, `{"metric":` + fnX + `,"values":[[1700000000,"2"]]}`},
		// The pipeline before or after the range and offset.
		{`count_over_time({app="x"}[1m] offset 30s |= "err")`, `{"metric":` + fnX + `,"values":[[1700000000,"1"]]}`},
		{`count_over_time({app="x"} |= "err" [1m] offset 30s)`, `{"metric":` + fnX + `,"values":[[1700000000,"1"]]}`},
		// (t-2m, t-1m]: y's entry at -100s is in the windows of -30 and 0.
		{`count_over_time({app=~"x|y"}[1m] offset 1m)`, `{"metric":` + fnY + `,"values":[[1699999970,"1"],[1700000000,"1"]]}`},
		{`sum(rate({app=~"x|y"}[1m] offset 1m)) * 60`, `{"metric":{},"values":[[1699999970,"1"],[1700000000,"1"]]}`},
		{`count_over_time({app="x"}[1m] offset 0s)`, `{"metric":` + fnX + `,"values":[[1699999970,"2"],[1700000000,"3"]]}`},
		{`count_over_time({app="x"}[1m] offset 1h)`, ``},
		// Unwrap: lat 5 + 7 in (base-90s, base-30s].
		{`sum_over_time({app="u"} | logfmt | unwrap lat [1m] offset 30s)`, `{"metric":` + u + `,"values":[[1700000000,"12"]]}`},
		{`sum_over_time({app="u"} | logfmt | unwrap lat [1m])`, `{"metric":` + u + `,"values":[[1699999970,"12"],[1700000000,"23"]]}`},
		{`max_over_time({app="u"} | logfmt | unwrap lat [1m] offset 30s) by (app)`, `{"metric":{"app":"u"},"values":[[1700000000,"7"]]}`},
		// absent_over_time over unwrapped values (Loki lists it among the
		// unwrapped range aggregations): lat at -50, -40, -10.
		{`absent_over_time({app="u"} | logfmt | unwrap lat [30s])`, `{"metric":{"app":"u"},"values":[[1699999880,"1"],[1699999910,"1"],[1699999940,"1"]]}`},
		{`absent_over_time({app="u"} | logfmt | unwrap lat | lat > 7 [30s])`, `{"metric":{"app":"u"},"values":[[1699999880,"1"],[1699999910,"1"],[1699999940,"1"],[1699999970,"1"]]}`},
		{`absent_over_time({app="u"} | logfmt | unwrap nope [30s])`, `{"metric":{"app":"u"},"values":[[1699999880,"1"],[1699999910,"1"],[1699999940,"1"],[1699999970,"1"],[1700000000,"1"]]}`},
		{`absent_over_time({app="u"} | logfmt | unwrap lat [30s] offset 30s)`, `{"metric":{"app":"u"},"values":[[1699999880,"1"],[1699999910,"1"],[1699999940,"1"],[1699999970,"1"]]}`},
		// The offset leaf against the same leaf without it.
		{`count_over_time({app="x"}[1m]) - count_over_time({app="x"}[1m] offset 30s)`, `{"metric":` + fnX + `,"values":[[1700000000,"1"]]}`},
	}, fnMatrix)
	fnCheck(t, env, "/loki/api/v1/query?time=1700000030&query=", []struct{ q, want string }{
		{`count_over_time({app="x"}[1m] offset 30s)`, `{"metric":` + fnX + `,"value":[1700000030,"3"]}`},
		// (base-80s, base-20s] and (base-120s, base-60s].
		{`count_over_time({app="x"}[1m] offset 50s)`, `{"metric":` + fnX + `,"value":[1700000030,"2"]}`},
		{`count_over_time({app="x"}[1m] offset 1m30s)`, ``},
	}, fnVector)
}

func TestMetricLabelReplace(t *testing.T) {
	env := boExactEnv(t)
	lr := func(in, dst, repl, src, re string) string {
		return `label_replace(` + in + `, "` + dst + `", "` + repl + `", "` + src + `", "` + re + `")`
	}
	noSvc := lr(fnCount, "service_name", "", "app", ".*")
	fnCheck(t, env, fnRange, []struct{ q, want string }{
		{lr(fnCount, "dst", "a-$1", "app", "(.*)"),
			`{"metric":{"app":"x","dst":"a-x","service_name":"x"},"values":[[1699999970,"2"],[1700000000,"3"]]},{"metric":{"app":"y","dst":"a-y","service_name":"y"},"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		// Anchored: "x" does not match "xy"-like values partially; no
		// match leaves the series as it is.
		{lr(fnCount, "dst", "$1", "app", "(q)"),
			`{"metric":` + fnX + `,"values":[[1699999970,"2"],[1700000000,"3"]]},{"metric":` + fnY + `,"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		// $1 of a regex without groups is empty: dst stays absent.
		{lr(fnCount, "dst", "$1", "service_name", "x|"),
			`{"metric":` + fnX + `,"values":[[1699999970,"2"],[1700000000,"3"]]},{"metric":` + fnY + `,"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		{lr(fnCount, "dst", "<$1>", "service_name", "x|"),
			`{"metric":{"app":"x","dst":"<>","service_name":"x"},"values":[[1699999970,"2"],[1700000000,"3"]]},{"metric":` + fnY + `,"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		// An empty result removes the label; the source may be absent
		// (its value is then "").
		{lr(fnCount, "service_name", "", "app", "x"),
			`{"metric":{"app":"x"},"values":[[1699999970,"2"],[1700000000,"3"]]},{"metric":` + fnY + `,"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		{lr(`sum(`+fnCount+`)`, "team", "lit", "nope", ""), `{"metric":{"team":"lit"},"values":[[1699999910,"1"],[1699999940,"1"],[1699999970,"2"],[1700000000,"3"]]}`},
		{lr(`sum(`+fnCount+`)`, "team", "lit", "nope", ".+"), `{"metric":{},"values":[[1699999910,"1"],[1699999940,"1"],[1699999970,"2"],[1700000000,"3"]]}`},
		// Named groups and ${n}.
		{lr(`sum by (app) (`+fnCount+`)`, "app", "${1}-${rest}", "app", "(?P<first>.)(?P<rest>.*)"),
			`{"metric":{"app":"x-"},"values":[[1699999970,"2"],[1700000000,"3"]]},{"metric":{"app":"y-"},"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		// Series that come to share labels merge when they share no step.
		{lr(noSvc, "app", "z", "app", ".*"), `{"metric":{"app":"z"},"values":[[1699999910,"1"],[1699999940,"1"],[1699999970,"2"],[1700000000,"3"]]}`},
	}, fnMatrix)
	// Loki's query reference example: foo="a" from service="a:c".
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{job="api-server", service="a:c"}`, Entries: []PushEntry{{Time: base - 10e9, Line: "err d"}}},
	}), "Content-Type", "application/x-protobuf")
	fnCheck(t, env, "/loki/api/v1/query?time=1700000000&query=", []struct{ q, want string }{
		{`label_replace(rate({job="api-server",service="a:c"} |= "err" [1m]), "foo", "$1",
  "service", "(.*):.*")`, `{"metric":{"foo":"a","job":"api-server","service":"a:c","service_name":"a:c"},"value":[1700000000,"0.016666666666666666"]}`},
	}, fnVector)
	for _, c := range []struct{ q, msg string }{
		{lr(lr(fnCount10, "service_name", "", "app", ".*"), "app", "z", "app", ".*"), "vector cannot contain metrics with the same labelset"},
		{lr(fnCount, "dst", "$1", "app", "(("), "invalid regular expression in label_replace(): (("},
		{lr(fnCount, "1x", "$1", "app", "(.*)"), "invalid destination label name in label_replace(): 1x"},
		{lr(fnCount, "a-b", "$1", "app", "(.*)"), "invalid destination label name in label_replace(): a-b"},
		{`label_replace(` + fnCount + `, "dst", "$1", "app")`, "label_replace wants 5 arguments"},
		{`label_replace(` + fnCount + `, "dst", "$1", "app", "x", "y")`, "label_replace: missing )"},
		{`label_replace(` + fnCount + `, dst, "$1", "app", "x")`, "label_replace: want a string"},
		{`label_replace(1, "dst", "$1", "app", "x")`, "label_replace wants a vector"},
	} {
		fnRefused(t, env, c.q, c.msg)
	}
}

// fnRefused checks a query gets a 400 naming msg on both endpoints.
func fnRefused(t *testing.T, env *testEnv, q, msg string) {
	t.Helper()
	for _, path := range []string{"/loki/api/v1/query?time=1700000000&query=", fnRange} {
		code, body := env.get(path + url.QueryEscape(q))
		if code != 400 || !strings.Contains(body, msg) {
			t.Errorf("%s%s: %d %s; want 400 with %q", path, q, code, body, msg)
		}
	}
}

func TestMetricAbsentOverTime(t *testing.T) {
	env := boExactEnv(t)
	fnCheck(t, env, fnRange, []struct{ q, want string }{
		// x's err lines at -50s and -10s: windows of 30s at -30 and 0
		// hold one.
		{`absent_over_time({app="x"} |= "err" [30s])`, `{"metric":{"app":"x"},"values":[[1699999880,"1"],[1699999910,"1"],[1699999940,"1"]]}`},
		{`absent_over_time({app="x"}[30s] |= "err")`, `{"metric":{"app":"x"},"values":[[1699999880,"1"],[1699999910,"1"],[1699999940,"1"]]}`},
		{`absent_over_time({app=~"x|y"}[5m])`, `{"metric":{},"values":[[1699999880,"1"]]}`},
		// (t-6m, t-1m]: y's -100s is in the windows of -30 and 0.
		{`absent_over_time({app=~"x|y"}[5m] offset 1m)`, `{"metric":{},"values":[[1699999880,"1"],[1699999910,"1"],[1699999940,"1"]]}`},
		// Equality matchers only, a name matched twice dropped (as
		// Prometheus: a later equality after a regex on it is kept).
		{`absent_over_time({app="nope", zone=~".+", zone="eu", tier="a", tier!="b", k="1", k="1"}[1m])`,
			`{"metric":{"app":"nope","zone":"eu"},"values":[[1699999880,"1"],[1699999910,"1"],[1699999940,"1"],[1699999970,"1"],[1700000000,"1"]]}`},
		// With offset: windows (t-60s, t-30s]; x's -50, -40 are in base's.
		{`absent_over_time({app="x"}[30s] offset 30s)`, `{"metric":{"app":"x"},"values":[[1699999880,"1"],[1699999910,"1"],[1699999940,"1"],[1699999970,"1"]]}`},
		{`absent_over_time({app="x"}[1m]) or vector(0)`, `{"metric":{},"values":[[1699999880,"0"],[1699999910,"0"],[1699999940,"0"],[1699999970,"0"],[1700000000,"0"]]},{"metric":{"app":"x"},"values":[[1699999880,"1"],[1699999910,"1"],[1699999940,"1"]]}`},
	}, fnMatrix)
	fnCheck(t, env, "/loki/api/v1/query?time=1699999900&query=", []struct{ q, want string }{
		{`absent_over_time({app="x"} |= "err" [30s])`, `{"metric":{"app":"x"},"value":[1699999900,"1"]}`},
		{`absent_over_time({app="y"} |= "err" [30s])`, ``},
		{`absent_over_time({app=~"x|y"}[10m])`, ``},
	}, fnVector)
	fnRefused(t, env, `absent_over_time({app="x"} | logfmt | unwrap n [1m]) by (app)`, "absent_over_time does not take by or without")
	fnRefused(t, env, `absent_over_time(x[1m])`, "absent_over_time")
}

func TestMetricGroupLeftRight(t *testing.T) {
	env := boExactEnv(t)
	team := `label_replace(sum by (app) (` + fnCount5 + `), "team", "t-$1", "app", "(.*)")`
	fnCheck(t, env, fnRange, []struct{ q, want string }{
		// Many (left, by stream) times one (right, by app).
		{fnCount + ` * on (app) group_left sum by (app) (` + fnCount5 + `)`,
			`{"metric":` + fnX + `,"values":[[1699999970,"4"],[1700000000,"9"]]},{"metric":` + fnY + `,"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		{fnCount + ` * on (app) group_left () sum by (app) (` + fnCount5 + `)`,
			`{"metric":` + fnX + `,"values":[[1699999970,"4"],[1700000000,"9"]]},{"metric":` + fnY + `,"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		// A label copied from the one side.
		{fnCount + ` * on (app) group_left (team) ` + team,
			`{"metric":{"app":"x","service_name":"x","team":"t-x"},"values":[[1699999970,"4"],[1700000000,"9"]]},{"metric":{"app":"y","service_name":"y","team":"t-y"},"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		// ... and removed where the one side has none.
		{fnCount + ` * ignoring (service_name, team) group_left (team, service_name) ` + team,
			`{"metric":{"app":"x","team":"t-x"},"values":[[1699999970,"4"],[1700000000,"9"]]},{"metric":{"app":"y","team":"t-y"},"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		// group_right: the right side is the many one; the value is
		// still left op right.
		{team + ` / on (app) group_right (team) ` + fnCount,
			`{"metric":{"app":"x","service_name":"x","team":"t-x"},"values":[[1699999970,"1"],[1700000000,"1"]]},{"metric":{"app":"y","service_name":"y","team":"t-y"},"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		{`sum by (app) (` + fnCount5 + `) - on (app) group_right ` + fnCount,
			`{"metric":` + fnX + `,"values":[[1699999970,"0"],[1700000000,"0"]]},{"metric":` + fnY + `,"values":[[1699999910,"0"],[1699999940,"0"]]}`},
		// A comparison keeps the left value (the one side with
		// group_right); bool answers 1 or 0.
		{`sum by (app) (` + fnCount5 + `) * 10 > on (app) group_right ` + fnCount,
			`{"metric":` + fnX + `,"values":[[1699999970,"20"],[1700000000,"30"]]},{"metric":` + fnY + `,"values":[[1699999910,"10"],[1699999940,"10"]]}`},
		{fnCount + ` > bool on (app) group_left sum by (app) (` + fnCount5 + `)`,
			`{"metric":` + fnX + `,"values":[[1699999970,"0"],[1700000000,"0"]]},{"metric":` + fnY + `,"values":[[1699999910,"0"],[1699999940,"0"]]}`},
		// Unmatched samples are dropped (y has no "err" line at -30, 0).
		{fnCount + ` * on (app) group_left sum by (app) (count_over_time({app=~"x|y"} |= "ok" [1m]))`,
			`{"metric":` + fnX + `,"values":[[1699999970,"2"],[1700000000,"3"]]}`},
		// group_left's label list is optional before a parenthesis.
		{fnCount + ` * on (app) group_left (sum by (app) (` + fnCount5 + `))`,
			`{"metric":` + fnX + `,"values":[[1699999970,"4"],[1700000000,"9"]]},{"metric":` + fnY + `,"values":[[1699999910,"1"],[1699999940,"1"]]}`},
	}, fnMatrix)
	for _, c := range []struct{ q, msg string }{
		// Two series of one signature on the one side.
		{fnCount10 + ` * on () group_left ` + fnCount10, "found duplicate series for the match group {} on the right hand-side of the operation"},
		{fnCount10 + ` * on () group_right ` + fnCount10, "many-to-many matching not allowed: matching labels must be unique on one side"},
		// Two results with one label set.
		{fnCount10 + ` * on () group_left (app, service_name) sum(` + fnCount10 + `)`, "multiple matches for labels {}: grouping labels must ensure unique matches"},
		{fnCount10 + ` and on (app) group_left ` + fnCount10, `no grouping allowed for \"and\" operation`},
		{fnCount10 + ` * group_left ` + fnCount10, "group_left must follow on (...) or ignoring (...)"},
		{fnCount10 + ` * on (app) group_right (app) ` + fnCount10, `label \"app\" must not occur in ON and GROUP clause at once`},
		// One-to-one still refuses many-to-one matching.
		{fnCount10 + ` * on () sum(` + fnCount10 + `)`, "multiple matches for labels {} on the left hand-side of the operation"},
	} {
		fnRefused(t, env, c.q, c.msg)
	}
}

// TestMetricFnLimits: the series limit applies through the new nodes
// (label_replace, sort, offset: their series are the answer's; group_left
// builds at most the limit before refusing).
func TestMetricFnLimits(t *testing.T) {
	env := newEnv(t, func(c *Config) { c.MaxQuerySeries = 1 })
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{app="x"}`, Entries: []PushEntry{{Time: base - 50e9, Line: "a"}}},
		{Labels: `{app="y"}`, Entries: []PushEntry{{Time: base - 40e9, Line: "b"}}},
	}), "Content-Type", "application/x-protobuf")
	for _, q := range []string{
		`sort(` + fnCount10 + `)`,
		`label_replace(` + fnCount10 + `, "d", "v", "app", ".*")`,
		`count_over_time({app=~"x|y"}[10m] offset 1s)`,
		`-` + fnCount10,
		fnCount10 + ` * on () group_left sum(` + fnCount10 + `)`,
	} {
		fnRefused(t, env, q, "maximum number of series (1)")
	}
	// Aggregated to one series, each is answered (x and y count 1
	// each: 1*2 + 1*2).
	for _, c := range []struct{ q, v string }{{`sum(sort(` + fnCount10 + `))`, `"2"`}, {`sum(` + fnCount10 + ` * on () group_left sum(` + fnCount10 + `))`, `"4"`}} {
		q := c.q
		if code, body := env.get("/loki/api/v1/query?time=1700000000&query=" + url.QueryEscape(q)); code != 200 || !strings.Contains(body, c.v) {
			t.Errorf("%s: %d %s", q, code, body)
		}
	}
}

// TestMetricScalarAnswer: a query that is a number answers resultType
// scalar at an instant, [<time>, "<value>"], as Loki; over a range, a
// label-less series at every step; vector(n) stays a vector.
func TestMetricScalarAnswer(t *testing.T) {
	env := boExactEnv(t)
	at := "/loki/api/v1/query?time=1700000000.5&query="
	for _, c := range []struct{ q, want string }{
		{`1+1`, `[1700000000.5,"2"]`},
		{`1 + 2 * 3`, `[1700000000.5,"7"]`},
		{`2 > bool 1`, `[1700000000.5,"1"]`},
		{`-(2 ^ 3)`, `[1700000000.5,"-8"]`},
		{`1 / 0`, `[1700000000.5,"NaN"]`},
		{`(((4)))`, `[1700000000.5,"4"]`},
	} {
		code, body := env.get(at + url.QueryEscape(c.q))
		if code != 200 {
			t.Errorf("%s: %d %s", c.q, code, body)
			continue
		}
		wantJSON(t, c.q, dropStats(t, body), `{"status":"success","data":{"resultType":"scalar","result":`+c.want+`}}`)
	}
	fnCheck(t, env, at, []struct{ q, want string }{
		{`vector(1)+vector(1)`, `{"metric":{},"value":[1700000000.5,"2"]}`},
		{`vector(2) > bool 1`, `{"metric":{},"value":[1700000000.5,"1"]}`},
	}, fnVector)
	fnCheck(t, env, fnRange, []struct{ q, want string }{
		{`1+1`, `{"metric":{},"values":[[1699999880,"2"],[1699999910,"2"],[1699999940,"2"],[1699999970,"2"],[1700000000,"2"]]}`},
	}, fnMatrix)
}

// TestMetricUnwrapNegativeBytes: unwrap bytes(...) reads a negative size
// as the negative of the size ("-1KB" is -1000), as a bytes label filter
// reads a negative literal, before and after the unwrap.
func TestMetricUnwrapNegativeBytes(t *testing.T) {
	env := newEnv(t, nil)
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{app="b"}`, Entries: []PushEntry{
			{Time: base - 50e9, Line: "size=-1KB"}, {Time: base - 40e9, Line: "size=2KiB"},
			{Time: base - 30e9, Line: "size=-3"}, {Time: base - 20e9, Line: `size="-1.5 MiB"`},
		}},
	}), "Content-Type", "application/x-protobuf")
	at := "/loki/api/v1/query?time=1700000000&query="
	b := `{"app":"b",` + dlJSON(true, "size=-1KB") + `"service_name":"b"}`
	fnCheck(t, env, at, []struct{ q, want string }{
		{`sum_over_time({app="b"} | logfmt | unwrap bytes(size) [1m])`, `{"metric":` + b + `,"value":[1700000000,"-1571819"]}`},
		{`min_over_time({app="b"} | logfmt | unwrap bytes(size) [1m])`, `{"metric":` + b + `,"value":[1700000000,"-1572864"]}`},
		{`max_over_time({app="b"} | logfmt | unwrap bytes(size) [1m])`, `{"metric":` + b + `,"value":[1700000000,"2048"]}`},
		// The filter compares bytes: -3 and 2048 are above -1KB.
		{`sum_over_time({app="b"} | logfmt | size > -1KB | unwrap bytes(size) [1m])`, `{"metric":` + b + `,"value":[1700000000,"2045"]}`},
		{`sum_over_time({app="b"} | logfmt | unwrap bytes(size) | size >= -1KB [1m])`, `{"metric":` + b + `,"value":[1700000000,"1045"]}`},
		{`count_over_time({app="b"} | logfmt | size < -1KiB [1m])`, `{"metric":{"app":"b",` + dlJSON(true, "size=-1KB") + `"service_name":"b","size":"-1.5 MiB"},"value":[1700000000,"1"]}`},
	}, fnVector)
}
