package server

// The exact requests Grafana's Loki data source and the log shippers send,
// and the parts of the answers they read (sources in
// /work/notes/loki-compat-findings.md). A shape a client relies on may not
// drift: an empty list must be [] (Grafana tests Array.isArray; a null
// "result" broke its parser, grafana/grafana#40246), a matrix timestamp a
// number and its value a string, index/stats exactly four numbers.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// shapesEnv holds {app="api",level="info"} at base-60s and base-59s and
// {app="web"} at base-58s.
func shapesEnv(t *testing.T) *testEnv {
	e := newEnv(t, nil)
	t0 := base - 60e9
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"api","level":"info"}`, t0, `level=info msg="hello" status=200`, `level=error msg="db timeout" status=500`),
		"Content-Type", "application/json")
	e.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="web"}`, Entries: []PushEntry{{Time: t0 + 2e9, Line: `{"level":"warn","msg":"slow"}`}}}}),
		"Content-Type", "application/x-protobuf")
	return e
}

// decodeStrict decodes body into v, failing on unknown fields.
func decodeStrict(t *testing.T, what, body string, v any) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("%s: %v in %s", what, err, body)
	}
}

// lokiStreamsAnswer is what Grafana's backend reads from a log query.
type lokiStreamsAnswer struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
		Stats      json.RawMessage `json:"stats"`
	} `json:"data"`
}

// TestClientShapeExploreLogQuery replays Grafana's backend request for an
// Explore log query (pkg/tsdb/loki/api.go makeDataRequest: direction,
// limit, start and end in ns, step in ms even for log queries).
func TestClientShapeExploreLogQuery(t *testing.T) {
	e := shapesEnv(t)
	p := url.Values{"query": {`{app=~".+"}`}, "direction": {"backward"}, "limit": {"1000"},
		"start": {fmt.Sprint(base - 3600e9)}, "end": {fmt.Sprint(base)}, "step": {"15000ms"}}
	code, body := e.get("/loki/api/v1/query_range?" + p.Encode())
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var a lokiStreamsAnswer
	decodeStrict(t, "log query", body, &a)
	if a.Status != "success" || a.Data.ResultType != "streams" || len(a.Data.Stats) == 0 || a.Data.Stats[0] != '{' {
		t.Fatalf("status/resultType/stats: %s", body)
	}
	var streams []struct {
		Stream map[string]string `json:"stream"`
		Values [][]string        `json:"values"`
	}
	if err := json.Unmarshal(a.Data.Result, &streams); err != nil {
		t.Fatalf("result: %v in %s", err, body)
	}
	// Newest first within each stream; every timestamp a string of ns
	// digits (Grafana's live transformer slices off the last 6 digits).
	got := map[string][]string{}
	for _, s := range streams {
		var ts []string
		for _, v := range s.Values {
			if len(v) != 2 || len(v[0]) != 19 || strings.Trim(v[0], "0123456789") != "" {
				t.Fatalf("value %q: want [\"<19 digits of ns>\", \"<line>\"]", v)
			}
			ts = append(ts, v[0])
			got[s.Stream["app"]] = append(got[s.Stream["app"]], v[1])
		}
		if !slices.IsSortedFunc(ts, func(a, b string) int { return strings.Compare(b, a) }) {
			t.Errorf("stream %v: values not newest first: %v", s.Stream, ts)
		}
	}
	want := map[string][]string{"api": {`level=error msg="db timeout" status=500`, `level=info msg="hello" status=200`}, "web": {`{"level":"warn","msg":"slow"}`}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lines by app:\n got %v\nwant %v", got, want)
	}

	// A form POST (Loki accepts its query endpoints as forms) answers the same.
	code, post := e.do("POST", "/loki/api/v1/query_range", []byte(p.Encode()), "Content-Type", "application/x-www-form-urlencoded")
	if code != 200 || dropStats(t, post) != dropStats(t, body) {
		t.Errorf("POST form: %d %s\nGET: %s", code, post, body)
	}
}

// matrixAnswer is a metric query's answer as Grafana reads it.
type matrixAnswer struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
		Stats json.RawMessage `json:"stats"`
	} `json:"data"`
}

// TestClientShapeLogsVolume replays the logs-volume query of Grafana 10
// Explore (sum by (level) (count_over_time(<expr>[$__interval]))) and the
// form Grafana uses for a query with a parser (__error__=“): a matrix
// whose points are [<number>, "<string>"], one series per level, and {}
// (not null) for the series without a level.
func TestClientShapeLogsVolume(t *testing.T) {
	e := shapesEnv(t)
	for _, c := range []struct{ q, want string }{
		{`sum by (level) (count_over_time({app=~".+"}[1m]))`, `info@-60=1 info@0=1 <none>@0=1`},
		{`sum by (level) (count_over_time({app="api"} | logfmt | __error__=` + "``" + ` [1m]))`, `info@-60=1 info@0=1`},
	} {
		p := url.Values{"query": {c.q}, "start": {fmt.Sprint(base - 120e9)}, "end": {fmt.Sprint(base)}, "step": {"60000ms"}}
		code, body := e.get("/loki/api/v1/query_range?" + p.Encode())
		if code != 200 {
			t.Fatalf("%s: %d %s", c.q, code, body)
		}
		var a matrixAnswer
		dec := json.NewDecoder(strings.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if a.Status != "success" || a.Data.ResultType != "matrix" {
			t.Fatalf("%s: %s", c.q, body)
		}
		// Points at base-120s, base-60s and base over windows (t-1m, t]:
		// the api entries are at base-60s and 1 ns later, the web one at
		// base-58s, so base-60s counts one api entry and base the other
		// one and the web one; base-120s has none, so no point.
		var got []string
		for _, s := range a.Data.Result {
			if s.Metric == nil {
				t.Fatalf("%s: metric null in %s", c.q, body)
			}
			lv := s.Metric["level"]
			if lv == "" {
				lv = "<none>"
			}
			for _, v := range s.Values {
				ts, ok := v[0].(json.Number)
				if !ok {
					t.Fatalf("%s: timestamp %v is not a JSON number", c.q, v[0])
				}
				val, ok := v[1].(string)
				if !ok {
					t.Fatalf("%s: value %v is not a string", c.q, v[1])
				}
				sec, _ := ts.Int64()
				got = append(got, fmt.Sprintf("%s@%d=%s", lv, sec-base/1e9, val))
			}
		}
		slices.Sort(got)
		want := strings.Fields(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: points %v, want %v", c.q, got, want)
		}
	}
}

// TestClientShapeMetadataEmpty: the metadata endpoints Grafana's label
// browser, query builder, variables and stats hint call answer [] or zeros,
// never null, for a tenant without data, a selector that matches nothing
// and the __stream_shard__ probe of Grafana's shard splitting (an empty
// list makes Grafana run the query unsharded).
func TestClientShapeMetadataEmpty(t *testing.T) {
	e := shapesEnv(t)
	rng := fmt.Sprintf("start=%d&end=%d", base-3600e9, base)
	for _, c := range []struct{ path, tenant, want string }{
		{"/loki/api/v1/labels?" + rng, "nobody", `{"data":[],"status":"success"}`},
		{"/loki/api/v1/label/app/values?" + rng, "nobody", `{"data":[],"status":"success"}`},
		{"/loki/api/v1/series?match[]=" + q(`{app="api"}`) + "&" + rng, "nobody", `{"data":[],"status":"success"}`},
		{"/loki/api/v1/index/stats?query=" + q(`{app="api"}`) + "&" + rng, "nobody", `{"streams":0,"chunks":0,"entries":0,"bytes":0}`},
		{"/loki/api/v1/query_range?query=" + q(`{app="api"}`) + "&" + rng, "nobody", `{"status":"success","data":{"resultType":"streams","result":[]}}`},
		{"/loki/api/v1/query_range?query=" + q(`sum(count_over_time({app="api"}[1m]))`) + "&step=60000ms&" + rng, "nobody", `{"status":"success","data":{"resultType":"matrix","result":[]}}`},
		{"/loki/api/v1/label/app/values?query=" + q(`{app="none"}`) + "&" + rng, "", `{"data":[],"status":"success"}`},
		{"/loki/api/v1/label/__stream_shard__/values?query=" + q(`{app="api"}`) + "&" + rng, "", `{"data":[],"status":"success"}`},
		{"/loki/api/v1/series?match[]=" + q(`{app="none"}`) + "&" + rng, "", `{"data":[],"status":"success"}`},
		{"/loki/api/v1/index/stats?query=" + q(`{app="none"}`) + "&" + rng, "", `{"streams":0,"chunks":0,"entries":0,"bytes":0}`},
	} {
		var hdr []string
		if c.tenant != "" {
			hdr = []string{"X-Scope-OrgID", c.tenant}
		}
		code, body := e.get(c.path, hdr...)
		if code != 200 {
			t.Errorf("%s (tenant %q): %d %s", c.path, c.tenant, code, body)
			continue
		}
		if strings.Contains(body, `"data":{`) {
			body = dropStats(t, body)
		}
		wantJSON(t, c.path, body, c.want)
	}
}

// TestClientShapeMetadata: the label browser and query builder requests
// with data, including Logs Drilldown's ISO times with milliseconds.
func TestClientShapeMetadata(t *testing.T) {
	e := shapesEnv(t)
	iso := func(ns int64) string { return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000Z") }
	for _, c := range []struct{ path, want string }{
		{fmt.Sprintf("/loki/api/v1/labels?start=%d&end=%d", base-3600e9, base), `{"status":"success","data":["app","level","service_name"]}`},
		{"/loki/api/v1/labels?start=" + iso(base-3600e9) + "&end=" + iso(base), `{"status":"success","data":["app","level","service_name"]}`},
		{fmt.Sprintf("/loki/api/v1/label/app/values?start=%d&end=%d&query=%s", base-3600e9, base, q(`{level="info"}`)), `{"status":"success","data":["api"]}`},
		{fmt.Sprintf("/loki/api/v1/series?match[]=%s&start=%d&end=%d", q(`{app=~"a.*|w.*"}`), base-3600e9, base), `{"status":"success","data":[{"app":"api","level":"info","service_name":"api"},{"app":"web","service_name":"web"}]}`},
	} {
		code, body := e.get(c.path)
		if code != 200 {
			t.Errorf("%s: %d %s", c.path, code, body)
			continue
		}
		wantJSON(t, c.path, body, c.want)
	}
	// Grafana sums index/stats over the selectors of a query and reads
	// exactly these four numbers.
	code, body := e.get(fmt.Sprintf("/loki/api/v1/index/stats?query=%s&start=%d&end=%d", q(`{app="api"}`), base-3600e9, base))
	if code != 200 {
		t.Fatalf("index/stats: %d %s", code, body)
	}
	var st struct{ Streams, Chunks, Entries, Bytes int64 }
	decodeStrict(t, "index/stats", body, &st)
	if st.Streams != 1 || st.Entries != 2 || st.Chunks < 1 || st.Bytes != int64(len(`level=info msg="hello" status=200`)+len(`level=error msg="db timeout" status=500`)) {
		t.Errorf("index/stats %+v", st)
	}
}

// TestClientShapeHealthCheck: Grafana's "Save & test" runs the instant
// query vector(1)+vector(1) and reads a vector with the value "2".
func TestClientShapeHealthCheck(t *testing.T) {
	e := newEnv(t, nil)
	code, body := e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(`vector(1)+vector(1)`), base))
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var a struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil {
		t.Fatal(err)
	}
	if a.Status != "success" || a.Data.ResultType != "vector" || len(a.Data.Result) != 1 || a.Data.Result[0].Metric == nil ||
		len(a.Data.Result[0].Value) != 2 || a.Data.Result[0].Value[1] != "2" {
		t.Fatalf("health check: %s", body)
	}
	if n, ok := a.Data.Result[0].Value[0].(json.Number); !ok || n.String() != fmt.Sprint(base/1e9) {
		t.Errorf("health check time %v: want the number %d", a.Data.Result[0].Value[0], base/1e9)
	}
}

// TestClientShapeBuildInfo: Loki's six build-info fields, all strings.
func TestClientShapeBuildInfo(t *testing.T) {
	e := newEnv(t, nil)
	code, body := e.get("/loki/api/v1/status/buildinfo")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k, v := range m {
		if _, ok := v.(string); !ok {
			t.Errorf("%s = %v: want a string", k, v)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"branch", "buildDate", "buildUser", "goVersion", "revision", "version"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
}

// TestClientShapePushAnswers: each shipper's push shape gets 204 with an
// empty body, and a rejected push a 4xx with a JSON body that names the
// problem (Promtail and Alloy log the body).
func TestClientShapePushAnswers(t *testing.T) {
	e := newEnv(t, nil)
	ok := []struct {
		name string
		body []byte
		hdr  []string
	}{
		{"Promtail/Alloy protobuf+snappy", protoBody([]PushStream{{Labels: `{job="p"}`, Entries: []PushEntry{{Time: base - 1e9, Line: "p"}}}}), []string{"Content-Type", "application/x-protobuf"}},
		{"Fluent Bit JSON", jsonPush(`{"job":"fb"}`, base-1e9, "fb"), []string{"Content-Type", "application/json"}},
		{"JSON with charset", jsonPush(`{"job":"cs"}`, base-1e9, "cs"), []string{"Content-Type", "application/json; charset=utf-8"}},
		{"Fluent Bit compress gzip", gzipBytes(jsonPush(`{"job":"gz"}`, base-1e9, "gz")), []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}},
		{"structured metadata", []byte(fmt.Sprintf(`{"streams":[{"stream":{"job":"sm"},"values":[["%d","sm",{"trace_id":"abc"}]]}]}`, base-1e9)), []string{"Content-Type", "application/json"}},
	}
	for _, c := range ok {
		code, body := e.do("POST", "/loki/api/v1/push", c.body, c.hdr...)
		if code != 204 || body != "" {
			t.Errorf("%s: %d %q, want 204 and no body", c.name, code, body)
		}
	}
	if n := e.storedCount(DefaultTenant); n != len(ok) {
		t.Errorf("stored %d entries, want %d", n, len(ok))
	}
	code, body := e.do("POST", "/loki/api/v1/push", []byte(`{"streams":[{"stream":{"job":"x"},"values":[[1,"numeric ts"]]}]}`), "Content-Type", "application/json")
	var m map[string]string
	if code != 400 || json.Unmarshal([]byte(body), &m) != nil || !strings.Contains(m["error"], "timestamp") {
		t.Errorf("numeric timestamp: %d %s; want 400 with a JSON error naming the timestamp (Loki wants a string)", code, body)
	}
}
