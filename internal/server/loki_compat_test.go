package server

// Points where the API disagreed with Loki's documentation, found by
// TestDifferentialLokiAPI (differential_test.go); each test states the
// request and what Loki documents.

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// lokiCompatEnv pushes three entries of {app="api"} at t0, t0+1s, t0+2s
// (t0 = base - 600 s, a whole second) and returns env and t0.
func lokiCompatEnv(t *testing.T) (*testEnv, int64) {
	e := newEnv(t, nil)
	t0 := base - 600e9
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"api"}`, t0, "a"))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"api"}`, t0+1e9, "b"))
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"api"}`, t0+2e9, "c"))
	return e, t0
}

func lokiCompatValues(t *testing.T, e *testEnv, p url.Values) string {
	t.Helper()
	code, body := e.get("/loki/api/v1/query_range?" + p.Encode())
	if code != 200 {
		return fmt.Sprintf("status %d: %s", code, body)
	}
	var out []string
	for _, s := range strings.Split(body, `["`)[1:] {
		out = append(out, s[:strings.Index(s, `"]`)+1])
	}
	return strings.Join(out, " ")
}

// Loki API docs, "Timestamp formats": "An integer with ten or fewer digits
// is interpreted as a Unix timestamp in seconds. More than ten digits are
// interpreted as a Unix timestamp in nanoseconds."
// parseTime used to read every integer as nanoseconds: start=1699999400
// was 1.7 s after the epoch, and end=1699999403 (3 s later) is before
// start in nanoseconds, so this query answered nothing, or a 400 ("end ...
// is before start") when only end is seconds and start is nanoseconds.
func TestLokiIntegerSeconds(t *testing.T) {
	e, t0 := lokiCompatEnv(t)
	got := lokiCompatValues(t, e, url.Values{"query": {`{app="api"}`}, "direction": {"forward"},
		"start": {fmt.Sprint(t0 / 1e9)}, "end": {fmt.Sprint(t0/1e9 + 3)}})
	want := fmt.Sprintf(`%d","a" %d","b" %d","c"`, t0, t0+1e9, t0+2e9)
	if got != want {
		t.Errorf("start=%d end=%d (Unix seconds):\n got %s\nwant %s", t0/1e9, t0/1e9+3, got, want)
	}
}

// Loki API docs, "Timestamp formats": "A floating point number is a Unix
// timestamp with fractions of a second." end=<t0+2>.4 should be exactly
// 400 ms after t0+2s. parseTime used to convert through float64 (math.Modf on a
// number near 1.7e9, whose spacing is 238 ns) and got t0+2.400000095 s,
// so the entry at exactly start was left out.
// (Loki's own parser rounds the fraction to milliseconds.)
func TestLokiFractionalSecondsExact(t *testing.T) {
	e, t0 := lokiCompatEnv(t)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"api"}`, t0+2400e6, "at .4"))
	got := lokiCompatValues(t, e, url.Values{"query": {`{app="api"}`}, "direction": {"forward"},
		"start": {fmt.Sprintf("%d.4", t0/1e9+2)}, "end": {fmt.Sprintf("%d.4", t0/1e9+3)}})
	// start <= ts < end: the entry at t0+2.4 s is at start, so it must be
	// there; with start = t0+2.400000095 s it is left out.
	want := fmt.Sprintf(`%d","at .4"`, t0+2400e6)
	if got != want {
		t.Errorf("start=%d.4 end=%d.4:\n got %q\nwant %q", t0/1e9+2, t0/1e9+3, got, want)
	}
}

// Loki docs, metric queries: "The duration can be placed after the log
// stream selector or at end of the log pipeline." The first form used to
// be rejected: count_over_time({app="api"}[5s] |= "b") answered 400
// "count_over_time: missing ) at column 33" (metricq.go ended the log
// query at the first '[' and wanted ')' after ']').
func TestLokiRangeAfterSelector(t *testing.T) {
	e, t0 := lokiCompatEnv(t)
	for _, q := range []string{`count_over_time({app="api"}[5s] |= "b")`, `count_over_time({app="api"} |= "b" [5s])`} {
		p := url.Values{"query": {q}, "start": {fmt.Sprint(t0 + 2e9)}, "end": {fmt.Sprint(t0 + 2e9)}, "step": {"1s"}}
		code, body := e.get("/loki/api/v1/query_range?" + p.Encode())
		if code != 200 || !strings.Contains(body, fmt.Sprintf(`[%d,"1"]`, (t0+2e9)/1e9)) {
			t.Errorf("%s: %d %s\nwant one point [%d,\"1\"]", q, code, body, (t0+2e9)/1e9)
		}
	}
}

// TestParseUnixDecimal: the integer and decimal forms of Loki's timestamp
// parameters, exactly.
func TestParseUnixDecimal(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1699999402", 1699999402e9, true}, // ten digits: seconds
		{"0", 0, true},                     // seconds too
		{"16999994020", 16999994020, true}, // eleven: nanoseconds
		{"1699999402123456789", 1699999402123456789, true},
		{"1699999402.4", 1699999402400000000, true},
		{"1699999402.123456789999", 1699999402123456789, true}, // past ns: dropped
		{"-1.5", -1500000000, true},
		{".5", 500000000, true},
		{"5.", 5000000000, true},
		{"", 0, false},
		{".", 0, false},
		{"1e9", 0, false}, // the float fallback reads it
		{"12345678901.5", 0, false},
		{"99999999999999999999", 0, false}, // beyond int64
		{"2023-11-14T22:13:20Z", 0, false},
	} {
		got, ok := parseUnixDecimal(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("parseUnixDecimal(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if n, err := parseTime("t", "1.7e9", 0); err != nil || n != 17e17 {
		t.Errorf("parseTime(1.7e9) = %d, %v", n, err)
	}
}

// TestLokiMetricPipelineError: a metric query whose series carry __error__
// (lines | json could not parse) fails with Loki's "pipeline error" 400,
// instead of counting those lines in; filtering __error__ makes it work.
// Loki returns this error (its PipelineError message); the metric docs do
// not state the rule.
func TestLokiMetricPipelineError(t *testing.T) {
	e, t0 := lokiCompatEnv(t) // lines "a", "b", "c" are not JSON
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"api"}`, t0+1500e6, `{"level":"x"}`))
	at := fmt.Sprint(t0 + 2e9)
	for _, q := range []string{
		`sum by (app) (count_over_time({app="api"} | json [5s]))`,
		`count_over_time({app="api"} | json [5s])`,
		`rate({app="api"} | json | __error__="" | level > 5 [5s])`, // "x" is no number: LabelFilterErr
	} {
		code, body := e.get("/loki/api/v1/query_range?" + url.Values{"query": {q}, "start": {at}, "end": {at}, "step": {"1s"}}.Encode())
		if code != 400 || !strings.Contains(body, "pipeline error: '") || !strings.Contains(body, "__error__") {
			t.Errorf("%s: %d %s\nwant 400 pipeline error", q, code, body)
		}
	}
	for q, want := range map[string]string{
		`sum by (app) (count_over_time({app="api"} | json | __error__="" [5s]))`:               `"1"`,
		`sum by (app) (count_over_time({app="api"} | json | __error__!="JSONParserErr" [5s]))`: `"1"`,
		`count_over_time({app="api"}[5s])`:                                                     `"4"`,
	} {
		code, body := e.get("/loki/api/v1/query_range?" + url.Values{"query": {q}, "start": {at}, "end": {at}, "step": {"1s"}}.Encode())
		if code != 200 || !strings.Contains(body, fmt.Sprintf("[%d,%s]", (t0+2e9)/1e9, want)) {
			t.Errorf("%s: %d %s\nwant one point %s", q, code, body, want)
		}
	}
}

// TestLokiLimitOverMax: a log query asking for more entries than the
// server's maximum is refused with Loki's message, not silently cut to the
// maximum (a client would take the first 5000 for all there is).
func TestLokiLimitOverMax(t *testing.T) {
	e, t0 := lokiCompatEnv(t)
	p := url.Values{"query": {`{app="api"}`}, "start": {fmt.Sprint(t0)}, "end": {fmt.Sprint(t0 + 3e9)}}
	p.Set("limit", "5001")
	code, body := e.get("/loki/api/v1/query_range?" + p.Encode())
	var msg struct{ Error string }
	json.Unmarshal([]byte(body), &msg)
	if code != 400 || msg.Error != "max entries limit per query exceeded, limit > max_entries_limit (5001 > 5000)" {
		t.Errorf("limit=5001: %d %s", code, body)
	}
	p.Set("limit", "5000")
	if got := lokiCompatValues(t, e, p); strings.Count(got, `","`) != 3 {
		t.Errorf("limit=5000: %s", got)
	}
}
