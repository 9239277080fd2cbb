package server

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"

	"haystack/internal/metrics/metricstest"
)

// TestMetricsExposition scrapes /metrics of a server that has seen pushes,
// queries and a rejection, checks the whole body with a strict parser, and
// checks that every family client_golang used to export is still there
// with the same type and labels, and the counts are exact.
func TestMetricsExposition(t *testing.T) {
	e := newEnv(t, nil)
	const s = int64(1e9)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"api"}`, base-50*s, "GET /a timeout", "GET /b ok", "GET /c"))
	e.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{app="auth"}`, Entries: []PushEntry{{base - 40*s, "login bob"}, {base - 30*s, "login eve"}}},
	}), "Content-Type", "application/x-protobuf")
	e.mustPush("/api/v1/push/jsonl", []byte(fmt.Sprintf("{\"labels\":{\"app\":\"job\"},\"ts\":\"%d\",\"line\":\"done\"}\n", base-20*s)))
	const lines, nbytes = 6, float64(len("GET /a timeout") + len("GET /b ok") + len("GET /c") + len("login bob") + len("login eve") + len("done"))
	if code, body := e.do("POST", "/loki/api/v1/push", []byte(`{"streams":[`)); code != 400 {
		t.Fatalf("malformed push: %d %s", code, body)
	}
	if code, body := e.get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d", q(`{app=~".+"}`), base-60*s, base)); code != 200 {
		t.Fatalf("query_range: %d %s", code, body)
	}
	if code, body := e.get("/loki/api/v1/labels"); code != 200 {
		t.Fatalf("labels: %d %s", code, body)
	}

	resp, err := http.Get(e.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if !resp.Uncompressed {
		t.Error("/metrics was not gzip-compressed for a client that accepts it")
	}
	fams, err := metricstest.Parse(string(b))
	if err != nil {
		t.Fatalf("/metrics is not valid exposition text: %v\n%s", err, b)
	}
	names := make([]string, len(fams))
	byName := map[string]metricstest.Family{}
	for i, f := range fams {
		names[i] = f.Name
		byName[f.Name] = f
	}
	if !slices.IsSorted(names) {
		t.Errorf("families not sorted by name: %v", names)
	}

	// The families the client_golang version exported: type and the label
	// names of their samples, besides le and quantile.
	for name, want := range map[string]struct{ typ, label string }{
		"hay_ingested_lines_total":         {"counter", ""},
		"hay_ingested_bytes_total":         {"counter", ""},
		"hay_push_duration_seconds":        {"histogram", "format"},
		"hay_query_duration_seconds":       {"histogram", "endpoint"},
		"hay_wal_fsync_duration_seconds":   {"histogram", ""},
		"hay_rejected_total":               {"counter", "reason"},
		"hay_segments":                     {"gauge", ""},
		"process_cpu_seconds_total":        {"counter", ""},
		"process_resident_memory_bytes":    {"gauge", ""},
		"process_virtual_memory_bytes":     {"gauge", ""},
		"process_virtual_memory_max_bytes": {"gauge", ""},
		"process_open_fds":                 {"gauge", ""},
		"process_max_fds":                  {"gauge", ""},
		"process_start_time_seconds":       {"gauge", ""},
		"go_goroutines":                    {"gauge", ""},
		"go_threads":                       {"gauge", ""},
		"go_info":                          {"gauge", "version"},
		"go_memstats_alloc_bytes":          {"gauge", ""},
		"go_memstats_alloc_bytes_total":    {"counter", ""},
		"go_memstats_heap_alloc_bytes":     {"gauge", ""},
		"go_memstats_heap_inuse_bytes":     {"gauge", ""},
		"go_memstats_heap_objects":         {"gauge", ""},
		"go_memstats_last_gc_time_seconds": {"gauge", ""},
		"go_memstats_next_gc_bytes":        {"gauge", ""},
		"go_memstats_sys_bytes":            {"gauge", ""},
		"go_sched_gomaxprocs_threads":      {"gauge", ""},
		"go_gc_duration_seconds":           {"summary", ""},
	} {
		f, ok := byName[name]
		if !ok {
			t.Errorf("/metrics lacks %s", name)
			continue
		}
		if f.Type != want.typ || f.Help == "" {
			t.Errorf("%s: type %s help %q, want type %s and a help text", name, f.Type, f.Help, want.typ)
		}
		for _, smp := range f.Samples {
			var got []string
			for _, l := range smp.Labels {
				if l.Name != "le" && l.Name != "quantile" {
					got = append(got, l.Name)
				}
			}
			if strings.Join(got, ",") != want.label {
				t.Errorf("%s: sample labels %v, want %q", name, smp.Labels, want.label)
			}
		}
	}

	// value returns the sample called name whose label (if any) has value v.
	value := func(name, label, v string) float64 {
		t.Helper()
		for _, f := range fams {
			for _, smp := range f.Samples {
				if got, _ := smp.Get(label); smp.Name == name && (label == "" || got == v) {
					return smp.Value
				}
			}
		}
		t.Errorf("no sample %s{%s=%q}", name, label, v)
		return -1
	}
	for _, c := range []struct {
		name, label, v string
		want           float64
	}{
		{"hay_ingested_lines_total", "", "", lines},
		{"hay_ingested_bytes_total", "", "", nbytes},
		{"hay_push_duration_seconds_count", "format", "json", 2},
		{"hay_push_duration_seconds_count", "format", "protobuf", 1},
		{"hay_push_duration_seconds_count", "format", "jsonl", 1},
		{"hay_query_duration_seconds_count", "endpoint", "query_range", 1},
		{"hay_query_duration_seconds_count", "endpoint", "labels", 1},
		{"hay_rejected_total", "reason", "malformed", 1},
		{"hay_segments", "", "", 0},
		{"go_info", "version", runtime.Version(), 1},
	} {
		if got := value(c.name, c.label, c.v); got != c.want {
			t.Errorf("%s{%s=%q} = %v, want %v", c.name, c.label, c.v, got, c.want)
		}
	}
	if n := len(byName["hay_push_duration_seconds"].Samples); n != 3*(17+2) {
		t.Errorf("%d hay_push_duration_seconds samples, want 3 formats × (17 buckets + _sum + _count)", n)
	}
	if n := len(byName["hay_rejected_total"].Samples); n != 1 {
		t.Errorf("%d hay_rejected_total samples, want 1", n)
	}
	if got := value("hay_wal_fsync_duration_seconds_count", "", ""); got < 1 || got > 3 {
		t.Errorf("hay_wal_fsync_duration_seconds_count %v, want 1 to 3 (one per group commit of 3 pushes)", got)
	}

	// The bucket bounds are client_golang's ExponentialBuckets, unchanged.
	les := func(name, label, v string) string {
		var out []string
		for _, smp := range byName[name].Samples {
			if got, _ := smp.Get(label); smp.Name == name+"_bucket" && (label == "" || got == v) {
				le, _ := smp.Get("le")
				out = append(out, le)
			}
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct{ name, label, v, want string }{
		{"hay_push_duration_seconds", "format", "json", "0.0005 0.001 0.002 0.004 0.008 0.016 0.032 0.064 0.128 0.256 0.512 1.024 2.048 4.096 8.192 16.384 +Inf"},
		{"hay_query_duration_seconds", "endpoint", "labels", "0.0005 0.001 0.002 0.004 0.008 0.016 0.032 0.064 0.128 0.256 0.512 1.024 2.048 4.096 8.192 16.384 32.768 65.536 +Inf"},
		{"hay_wal_fsync_duration_seconds", "", "", "0.0001 0.0002 0.0004 0.0008 0.0016 0.0032 0.0064 0.0128 0.0256 0.0512 0.1024 0.2048 0.4096 0.8192 1.6384 3.2768 +Inf"},
	} {
		if got := les(c.name, c.label, c.v); got != c.want {
			t.Errorf("%s{%s=%q} buckets\n%s\nwant\n%s", c.name, c.label, c.v, got, c.want)
		}
	}
}
