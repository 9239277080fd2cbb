package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// BenchmarkMetricOps measures query_range of the new metric operators
// against the plain aggregation they wrap (20 streams, 60,000 logfmt
// entries over an hour, 241 steps of 15 s), in process, one request at a
// time; bytes are the entries' lines.
func BenchmarkMetricOps(b *testing.B) {
	s, err := New(Config{DataDir: b.TempDir(), RejectOlderThan: -1, RejectNewerThan: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := s.Handler()
	var raw int64
	for st := range 20 {
		var es []PushEntry
		for i := range 3000 {
			line := fmt.Sprintf("level=%s lat=%d msg=\"req done\"", []string{"info", "error"}[i%7/6], (i*37+st)%1000)
			es = append(es, PushEntry{Time: base - 3600e9 + int64(i)*1200e6 + int64(st), Line: line})
			raw += int64(len(line))
		}
		body := protoBody([]PushStream{{Labels: fmt.Sprintf(`{app="a%d", env="%s"}`, st, []string{"prod", "dev"}[st%2]), Entries: es}})
		req := httptest.NewRequest("POST", "/loki/api/v1/push", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusNoContent {
			b.Fatalf("push: %d %s", w.Code, w.Body)
		}
	}
	base5 := `sum by (app) (count_over_time({env=~".+"} |= "level=error" [5m]))`
	for _, c := range []struct{ name, q string }{
		{"sum", base5},
		{"or_vector", base5 + ` or vector(0)`},
		{"gt_bool", base5 + ` > bool 10`},
		{"div_vectors", base5 + ` / sum by (app) (count_over_time({env=~".+"}[5m]))`},
		{"topk", `topk(3, ` + base5 + `)`},
		{"count_logfmt", `sum by (app) (count_over_time({env=~".+"} | logfmt | drop lat [5m]))`},
		{"unwrap_sum", `sum by (app) (sum_over_time({env=~".+"} | logfmt | unwrap lat [5m]))`},
		{"unwrap_quantile", `quantile_over_time(0.99, {env=~".+"} | logfmt | unwrap lat [5m]) by (app)`},
		{"group_left", `count_over_time({env=~".+"}[5m]) / on (env) group_left sum by (env) (count_over_time({env=~".+"}[5m]))`},
		{"label_replace", `label_replace(count_over_time({env=~".+"}[5m]), "team", "t-$1", "app", "a(.*)")`},
		{"offset", `sum by (app) (count_over_time({env=~".+"}[5m] offset 10m))`},
		{"absent", `absent_over_time({env="prod"}[1m])`},
	} {
		b.Run(c.name, func(b *testing.B) {
			path := "/loki/api/v1/query_range?start=1699996400&end=1700000000&step=15&query=" + url.QueryEscape(c.q)
			b.SetBytes(raw)
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
				if w.Code != 200 {
					b.Fatalf("%s: %d %s", c.q, w.Code, w.Body)
				}
			}
		})
	}
}
