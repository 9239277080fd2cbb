package server

import (
	"fmt"
	"strings"
	"testing"
)

// TestExtremeParams sends edge values to every query endpoint: nothing may
// panic or answer 5xx; bad values get a 4xx.
func TestExtremeParams(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base, "a line", "another"))
	times := []string{"", "0", "-1", "-9223372036854775808", "9223372036854775807", "1e300", "NaN", "1700000000.5", "2023-11-14T22:13:20Z", "x"}
	steps := []string{"", "0", "-5", "0.000001", "1e12", "1ms", "10y", "NaN"}
	queries := []string{`{app="x"}`, `count_over_time({app="x"}[1ms])`, `rate({app="x"}[100y])`, `sum by (app) (count_over_time({app="x"}[1m]))`, `vector(1)/vector(0)`, `{`, ""}
	n := 0
	for _, st := range times {
		for _, en := range times {
			for i, step := range steps {
				qs := queries[(n+i)%len(queries)]
				n++
				for _, path := range []string{
					fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%s&end=%s&step=%s&limit=%s", q(qs), st, en, step, step),
					fmt.Sprintf("/loki/api/v1/query?query=%s&time=%s", q(qs), en),
					fmt.Sprintf("/api/v1/hits?q=%s&start=%s&end=%s&step=%s", q(qs), st, en, step),
					fmt.Sprintf("/api/v1/search?q=%s&start=%s&end=%s&limit=%s&direction=forward", q(qs), st, en, step),
					fmt.Sprintf("/api/v1/facets?q=%s&start=%s&end=%s", q(qs), st, en),
					fmt.Sprintf("/loki/api/v1/labels?start=%s&end=%s", st, en),
					fmt.Sprintf("/loki/api/v1/index/stats?query=%s&start=%s&end=%s", q(qs), st, en),
				} {
					code, body := e.get(path)
					if code >= 500 {
						t.Fatalf("%s: %d %s", path, code, body)
					}
					if code >= 400 && !strings.Contains(body, `"error"`) {
						t.Fatalf("%s: %d without a JSON error: %s", path, code, body)
					}
				}
			}
		}
	}
}
