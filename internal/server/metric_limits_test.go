package server

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
)

// TestMetricQueryLimits: a metric query answering more than
// MaxQuerySeries series is a 400 with Loki's message, and one whose range
// vector would expand into more than maxRangePoints points is refused
// before it is built (10,000 streams over 3,600 steps took 6.8 GB); an
// aggregation over the same streams is answered.
func TestMetricQueryLimits(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxQuerySeries = 600 })
	var b strings.Builder
	b.WriteString(`{"streams":[`)
	const streams = 1001
	for i := range streams {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"stream":{"app":"s%d"},"values":[["%d","x"]]}`, i, base-int64(i)*1e6)
	}
	b.WriteString(`]}`)
	e.mustPush("/loki/api/v1/push", []byte(b.String()), "Content-Type", "application/json")

	get := func(query string, start, end int64, step string) (int, string) {
		return e.get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&step=%s", q(query), start, end, step))
	}
	code, body := get(`count_over_time({app=~"s.+"}[1h])`, base, base, "60")
	// Stopped at the 601st series while they are built (review 9, F3), so
	// the answer's size is not known: "more than 600".
	if code != 400 || !strings.Contains(body, "maximum number of series (600) reached for a single query; the answer has more than 600") {
		t.Errorf("1001 series: %d %.300s", code, body)
	}
	code, body = get(`sum(count_over_time({app=~"s.+"}[1h]))`, base, base, "60")
	if code != 200 || !strings.Contains(body, `"values":[[`+fmt.Sprint(base/1e9)+`,"1001"]]`) {
		t.Errorf("sum over 1001 streams: %d %.300s", code, body)
	}
	// 1001 series × 5001 steps > 5,000,000 points, even under max, which
	// needs every series (refused at the 1000th series: 5,001,000 points).
	code, body = get(`max(count_over_time({app=~"s.+"}[1h]))`, base-5000e9, base, "1")
	if code != 400 || !strings.Contains(body, "count_over_time over 1000 series and 5001 steps is 5001000 points, more than the limit of 5000000") {
		t.Errorf("5M points: %d %.300s", code, body)
	}
	// A sum groups the entries as it reads them (review 9, F3): one
	// series of 5001 points, answered.
	code, body = get(`sum(count_over_time({app=~"s.+"}[1h]))`, base-5000e9, base, "1")
	if code != 200 || !strings.Contains(body, `[`+fmt.Sprint(base/1e9)+`,"1001"]]`) {
		t.Errorf("5M points under a sum: %d %.300s", code, body)
	}
	code, body = get(`sum(count_over_time({app=~"s.+"}[1h]))`, base-4000e9, base, "1")
	if code != 200 {
		t.Errorf("4M points: %d %.300s", code, body)
	}
}

// TestAppendUnixSeconds: exact decimal seconds, no trailing zeros, against
// big-number arithmetic.
func TestAppendUnixSeconds(t *testing.T) {
	for _, ns := range []int64{0, 1, 999_999_999, 1e9, 1724099053735000000, 1724099053735000001, -1, -1e9, -1500000000, math.MaxInt64, math.MinInt64} {
		got := string(appendUnixSeconds(nil, ns))
		r, ok := new(big.Rat).SetString(got)
		if !ok || r.Cmp(big.NewRat(ns, 1e9)) != 0 || strings.HasSuffix(got, "0") && strings.Contains(got, ".") || strings.HasSuffix(got, ".") {
			t.Errorf("appendUnixSeconds(%d) = %q", ns, got)
		}
	}
	if got := string(appendUnixSeconds(nil, 1724099053735000000)); got != "1724099053.735" {
		t.Errorf("ms time: %q", got)
	}
}
