package server

// Cases found by hits_oracle_test.go's edges, each failing before its fix:
// ranges over a century clipped (entries dropped), end=9999999999 giving
// nothing, a metric window wrapping at the earliest time, and data over
// 250 years wide.

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"
)

func hfHits(t *testing.T, env *testEnv, path string) hoHitsResp {
	t.Helper()
	code, body := env.get(path)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	var h hoHitsResp
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// API.md: total is the number of entries matching q in [start, end];
// absent start is the beginning of the store. Ranges over 100 years are
// clipped to their last 100 years (native.go:179-182), so older entries
// go missing from the total and the buckets.
func TestHitsCenturyClip(t *testing.T) {
	env := newEnv(t, nil)
	old := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="a"}`, Entries: []PushEntry{{old, "old"}, {base - 3600e9, "recent"}}}}), "Content-Type", "application/x-protobuf")
	for _, p := range []string{
		"/api/v1/hits",
		fmt.Sprintf("/api/v1/hits?start=%d&end=%d", old, base),
		fmt.Sprintf("/api/v1/hits?start=%d&end=%d&step=31536000", old, base),
	} {
		if h := hfHits(t, env, p); h.Total != 2 {
			t.Errorf("GET %s: total %d, want 2 (%+v)", p, h.Total, h)
		}
	}
}

// end=9999999999 (ten digits: seconds, year 2286, saturated to the
// largest time as parseUnixDecimal documents: "no end") loses every
// entry of today: the range is clipped to 2162..2262.
func TestHitsNoEnd(t *testing.T) {
	env := newEnv(t, nil)
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="a"}`, Entries: []PushEntry{{base - 3600e9, "recent"}}}}), "Content-Type", "application/x-protobuf")
	for _, p := range []string{
		fmt.Sprintf("/api/v1/hits?start=%d&end=9999999999", base-7200e9),
		"/api/v1/hits?end=9999999999",
		"/api/v1/hits?end=9999-12-31T00:00:00Z",
	} {
		if h := hfHits(t, env, p); h.Total != 1 {
			t.Errorf("GET %s: total %d, want 1 (%+v)", p, h.Total, h)
		}
	}
}

// A range metric query reads entries from start-range+1 (loki.go:278),
// which wraps around for a start within range of the smallest time, so
// the query sees no entry at all.
func TestMetricStartWraps(t *testing.T) {
	env := newEnv(t, nil)
	at := int64(math.MinInt64) + 2e9 + 5000 // 1677-09-21
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="a"}`, Entries: []PushEntry{{at, "x"}}}}), "Content-Type", "application/x-protobuf")
	p := fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&step=1", q(`count_over_time({app="a"}[1s])`), int64(math.MinInt64), int64(math.MinInt64)+3e9)
	code, body := env.get(p)
	// Steps at MinInt64 + 0, 1, 2, 3 s; only (MinInt64+2s, MinInt64+3s] holds the entry.
	want := `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"app":"a",` + dlJSON(true, "x") + `"service_name":"a"},"values":[[-9223372033.854775808,"1"]]}]}}`
	if code != 200 || canon(t, dropStats(t, body)) != canon(t, want) {
		t.Errorf("GET %s: %d %s\nwant %s", p, code, body, want)
	}
}

// The same for data that itself spans more than the clip (here 500
// years: any int64 time can be pushed with --reject-older-than 0).
func TestHitsWideData(t *testing.T) {
	env := newEnv(t, nil)
	ns := func(y int) int64 { return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() }
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="a"}`, Entries: []PushEntry{{ns(1700), "old"}, {ns(2200), "future"}}}}), "Content-Type", "application/x-protobuf")
	for _, p := range []string{
		"/api/v1/hits?start=1600-01-01T00:00:00Z&end=9999999999",
		"/api/v1/hits?start=1600-01-01T00:00:00Z&end=2250-01-01T00:00:00Z",
		"/api/v1/hits?start=1600-01-01T00:00:00Z&end=2250-01-01T00:00:00Z&step=8760h",
	} {
		if h := hfHits(t, env, p); h.Total != 2 {
			t.Errorf("GET %s: total %d, want 2 (%+v)", p, h.Total, h)
		}
	}
}
