package server

// Cases found by metrics_oracle_test.go that failed before their fix: a
// line cut under --line-policy=truncate counted for a push refused whole,
// and a streamed search past the query timeout not counted as one.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"haystack/internal/metrics/metricstest"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// metricValue returns the value of the sample called name whose label
// (if any) has value v, 0 when absent.
func metricValue(t *testing.T, e *testEnv, name, label, v string) float64 {
	t.Helper()
	code, body := e.get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	fams, err := metricstest.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, s := range f.Samples {
			if got, _ := s.Get(label); s.Name == name && (label == "" || got == v) {
				return s.Value
			}
		}
	}
	return 0
}

// Lines cut under --line-policy=truncate are counted when stored: in a
// push whose other entries are refused (stored in part, as Loki), and not
// in one where nothing was stored.
func TestMetricsTruncatedInRejectedPush(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.MaxLine = 64
		c.TruncateLines = true
		c.RejectOlderThan = time.Hour
		c.MaxLabels = 3
	})
	long := strings.Repeat("x", 100)
	// Entry 0 is too long (cut and stored), entry 1 is too old: 400.
	body := fmt.Sprintf(`{"streams":[{"stream":{"app":"x"},"values":[["%d","%s"],["%d","old"]]}]}`, base, long, base-2*int64(time.Hour))
	if code, resp := e.do("POST", "/loki/api/v1/push", []byte(body)); code != 400 || !strings.Contains(resp, "the other 1 stored") {
		t.Fatalf("push: %d %s", code, resp)
	}
	// Stream 0 has too many labels (its long line is not cut: nothing
	// stored), stream 1 is too old.
	body = fmt.Sprintf(`{"streams":[{"stream":{"a":"1","b":"2","c":"3","d":"4"},"values":[["%d","%s"]]},{"stream":{"app":"x"},"values":[["%d","y"]]}]}`, base, long, base-2*int64(time.Hour))
	if code, resp := e.do("POST", "/loki/api/v1/push", []byte(body)); code != 400 || !strings.Contains(resp, "nothing was stored") {
		t.Fatalf("push: %d %s", code, resp)
	}
	if got := metricValue(t, e, "hay_ingested_lines_total", "", ""); got != 1 {
		t.Errorf("hay_ingested_lines_total %v, want 1", got)
	}
	if got := metricValue(t, e, "hay_rejected_total", "reason", "line_truncated"); got != 1 {
		t.Errorf(`hay_rejected_total{reason="line_truncated"} = %v after one line cut and stored, want 1`, got)
	}
}

// slowFlusher is a ResponseWriter whose Flush takes longer than the
// query timeout, as a slow client reading a streamed search would.
type slowFlusher struct {
	http.ResponseWriter
	d       time.Duration
	flushes int
}

func (w *slowFlusher) Flush() {
	w.flushes++
	time.Sleep(w.d)
	w.ResponseWriter.(http.Flusher).Flush()
}

// A /api/v1/search that runs over --query-timeout after its
// first lines went out ends with an {"error": ...} line under status 200
// and is not counted in hay_rejected_total{reason="query_timeout"}.
func TestMetricsStreamedSearchTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.QueryTimeout = 200 * time.Millisecond
		c.Store = store.Options{Segment: segment.Options{BlockSize: 256}}
	})
	for i := range 20 {
		var lines []string
		for j := range 20 {
			lines = append(lines, fmt.Sprintf("entry %d %d", i, j))
		}
		e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"x"}`, base-int64(100-i)*1e9, lines...))
		ts, _ := e.srv.openTenant(DefaultTenant, false)
		if err := ts.w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	w := &slowFlusher{ResponseWriter: rec, d: 300 * time.Millisecond}
	req := httptest.NewRequest("GET", fmt.Sprintf("/api/v1/search?limit=5000&end=%d", base), nil)
	e.srv.Handler().ServeHTTP(w, req)
	body := rec.Body.String()
	last := body[strings.LastIndexByte(strings.TrimSuffix(body, "\n"), '\n')+1:]
	t.Logf("status %d, %d flushes, %d lines, last: %s", rec.Code, w.flushes, strings.Count(body, "\n"), last)
	if !strings.Contains(last, "deadline") && !strings.Contains(last, "timed out") {
		t.Fatalf("the search did not run over the timeout; last line %s", last)
	}
	if got := metricValue(t, e, "hay_rejected_total", "reason", "query_timeout"); got != 1 {
		t.Errorf(`hay_rejected_total{reason="query_timeout"} = %v after a search that ran over the query timeout (status %d, last line %s), want 1`, got, rec.Code, strings.TrimSpace(last))
	}
}
