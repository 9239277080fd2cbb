package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// withServiceName is the test side of Loki's discover_service_name: the
// labels a stream pushed with m is stored with. service_name, when m has
// none, is the value of the first of Loki's documented default list
// present (limits_config discover_service_name), else unknown_service.
func withServiceName(m map[string]string) map[string]string {
	if m["service_name"] != "" {
		return m
	}
	out := maps.Clone(m)
	out["service_name"] = "unknown_service"
	for _, k := range strings.Fields("service app application app_name name app_kubernetes_io_name container container_name k8s_container_name component workload job k8s_job_name") {
		if m[k] != "" {
			out["service_name"] = m[k]
			break
		}
	}
	return out
}

// TestServiceNameDiscovery pushes streams with each source label, with
// several at once (the first in Loki's order wins), with service_name
// of their own, and with none; then reads back their exact label sets
// through series, in each push format. With NoServiceNameDiscovery the
// labels are stored as pushed.
func TestServiceNameDiscovery(t *testing.T) {
	cases := []struct {
		pushed map[string]string
		want   string // service_name stored
	}{
		{map[string]string{"job": "varlogs", "host": "h1"}, "varlogs"},
		{map[string]string{"app": "api", "job": "j", "container": "c"}, "api"},
		{map[string]string{"service": "svc", "app": "api"}, "svc"},
		{map[string]string{"application": "x", "name": "n"}, "x"},
		{map[string]string{"app_name": "an", "name": "n"}, "an"},
		{map[string]string{"name": "n", "app_kubernetes_io_name": "k"}, "n"},
		{map[string]string{"app_kubernetes_io_name": "k", "container": "c"}, "k"},
		{map[string]string{"container": "c", "container_name": "cn"}, "c"},
		{map[string]string{"container_name": "cn", "k8s_container_name": "kc"}, "cn"},
		{map[string]string{"k8s_container_name": "kc", "component": "co"}, "kc"},
		{map[string]string{"component": "co", "workload": "w"}, "co"},
		{map[string]string{"workload": "w", "job": "j"}, "w"},
		{map[string]string{"k8s_job_name": "kj", "host": "h2"}, "kj"},
		{map[string]string{"service_name": "own", "app": "api2"}, "own"},
		{map[string]string{"host": "h3", "env": "prod"}, "unknown_service"},
		{map[string]string{"app": "", "host": "h4"}, "unknown_service"}, // an empty value is no label
	}
	for _, discover := range []bool{true, false} {
		for format := range 3 {
			t.Run(fmt.Sprintf("discover=%v/format=%d", discover, format), func(t *testing.T) {
				e := newEnv(t, func(c *Config) { c.NoServiceNameDiscovery = !discover })
				var streams []oStream
				var want []string
				for i, c := range cases {
					streams = append(streams, oStream{labels: c.pushed, entries: []PushEntry{{Time: t0 + int64(i), Line: fmt.Sprint("l", i)}}})
					stored := map[string]string{}
					for k, v := range c.pushed {
						if v != "" {
							stored[k] = v
						}
					}
					if discover {
						stored["service_name"] = c.want
						if got := withServiceName(c.pushed)["service_name"]; got != c.want {
							t.Fatalf("case %d: withServiceName gives %q, want %q", i, got, c.want)
						}
					}
					want = append(want, oStream{labels: stored}.lokiLabels())
				}
				switch format {
				case 0:
					e.mustPush("/loki/api/v1/push", pushProto(streams), "Content-Type", "application/x-protobuf")
				case 1:
					e.mustPush("/loki/api/v1/push", pushJSON(streams))
				default:
					var b strings.Builder
					for _, s := range streams {
						for _, en := range s.entries {
							fmt.Fprintf(&b, "{\"labels\":%s,\"ts\":%d,\"line\":%q}\n", jsonStr(s.lokiLabels()), en.Time, en.Line)
						}
					}
					e.mustPush("/api/v1/push/jsonl", []byte(b.String()))
				}
				// The stream table: every stream as stored.
				ts, err := e.srv.openTenant(DefaultTenant, false)
				if err != nil {
					t.Fatal(err)
				}
				v, err := ts.w.View()
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, d := range v.Streams {
					got = append(got, d.Labels)
				}
				slices.Sort(got)
				slices.Sort(want)
				wantLines(t, "stored streams", got, want)
				// Queried by the discovered name, as Logs Drilldown does.
				if discover {
					wantLines(t, "service_name=varlogs", e.otlpRead("fake", `{service_name="varlogs"}`), []string{fmt.Sprintf("host=h1,job=varlogs,service_name=varlogs %d l0", t0)})
				}
			})
		}
	}
}

// TestServiceNameAtMaxLabels: the discovered label is added after the
// --max-labels check, as Loki adds it: a stream at the limit is stored
// with one label more, one over it is still refused.
func TestServiceNameAtMaxLabels(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxLabels = 2 })
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"a","env":"prod"}`, t0, "kept"))
	if code, body := e.do("POST", "/loki/api/v1/push", jsonPush(`{"app":"b","env":"prod","host":"h"}`, t0, "refused")); code != 400 || !strings.Contains(body, "3 labels, more than the limit of 2") {
		t.Errorf("three labels: %d %s", code, body)
	}
	wantLines(t, "stored", e.otlpRead("fake", `{env="prod"}`), streamLines("app=a,env=prod,service_name=a", "kept"))
}
