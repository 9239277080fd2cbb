package server

import (
	"fmt"
	"strings"
	"testing"
)

// TestParamEdges: values at the edges of int64 nanoseconds and of a
// Duration are answered as their documents say, never by a panic or a
// wrapped time (found by the parameter fuzz targets).
func TestParamEdges(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "hello"))
	for _, c := range []struct {
		path string
		code int
		want string // in the body
	}{
		// A step that rounds to 0 ns divided by zero (the handler panicked).
		{"/loki/api/v1/query_range?query=" + q(`count_over_time({app="x"}[5m])`) + "&start=1699999000&end=1700001000&step=0.0000000001", 400, "want a positive duration"},
		// 1e10 s is beyond a Duration: it came out negative.
		{"/loki/api/v1/query_range?query=" + q(`count_over_time({app="x"}[5m])`) + "&start=1699999000&end=1700001000&step=9999999999", 400, "want a positive duration"},
		// 585y wrapped to 21 days.
		{"/loki/api/v1/query_range?query=" + q(`count_over_time({app="x"}[5m])`) + "&start=1699999000&end=1700001000&step=585y", 400, "want a positive duration"},
		{"/loki/api/v1/query_range?query=" + q(`count_over_time({app="x"}[585y])`) + "&start=1699999000&end=1700001000&step=60", 400, ""},
		// An exact decimal step: 1.001 s is 1001 ms, not 1000.
		{"/api/v1/hits?q=hello&start=1699999000&end=1700001000&step=1.001", 200, `"step_ms":1001`},
		// Ends past 2262 mean "no end", not a wrapped time in 1702 or 1816.
		{"/loki/api/v1/query_range?query=" + q(`{app="x"}`) + "&start=0&end=9999999999", 200, `"hello"`},
		{"/api/v1/search?q=hello&start=0001-01-01T00:00:00Z&end=9999-12-31T23:59:59Z", 200, `"hello"`},
		{"/loki/api/v1/query_range?query=" + q(`{app="x"}`) + "&start=-9223372036854775808&end=9223372036854775807", 200, `"hello"`},
	} {
		code, body := e.get(c.path)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s\nwant %d with %q", c.path, code, body, c.code, c.want)
		}
	}
	// A JSONL push with a time past 2262 is refused, not stored in 1816.
	code, body := e.do("POST", "/api/v1/push/jsonl", []byte(`{"labels":{"app":"x"},"ts":"9999-12-31T00:00:00Z","line":"far"}`+"\n"))
	if code != 400 || !strings.Contains(body, "outside the years") {
		t.Errorf("jsonl push of year 9999: %d %s", code, body)
	}
	if code, body := e.get("/loki/api/v1/query_range?query=" + q(`{app="x"} |= "far"`) + fmt.Sprintf("&start=%d&end=%d", int64(-1)<<62, int64(1)<<62)); code != 200 || strings.Contains(body, "far") {
		t.Errorf("the refused line was stored: %d %s", code, body)
	}
}
