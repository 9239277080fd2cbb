package server

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"

	"haystack/internal/testseed"
)

// base is the fixed "now" of the tests: 2023-11-14T22:13:20Z.
const base = int64(1_700_000_000) * 1e9

type testEnv struct {
	t   *testing.T
	srv *Server
	ts  *httptest.Server
}

func newEnv(t *testing.T, mod func(*Config)) *testEnv {
	t.Helper()
	// With detected_level, the default, unless mod turns it off
	// (noLevels): the oracles expect the level a push adds
	// (level_oracle_test.go's wantLevel), so the default configuration is
	// the one tested.
	cfg := Config{DataDir: t.TempDir(), Now: func() time.Time { return time.Unix(0, base) }}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return &testEnv{t: t, srv: s, ts: hs}
}

// do sends a request and returns status and body.
func (e *testEnv) do(method, path string, body []byte, hdr ...string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *testEnv) get(path string, hdr ...string) (int, string) {
	return e.do("GET", path, nil, hdr...)
}

func (e *testEnv) mustPush(path string, body []byte, hdr ...string) {
	e.t.Helper()
	if code, msg := e.do("POST", path, body, hdr...); code != 204 {
		e.t.Fatalf("push %s: %d %s", path, code, msg)
	}
}

func protoBody(streams []PushStream) []byte { return snappy.Encode(nil, EncodePushProto(streams)) }

func q(s string) string { return url.QueryEscape(s) }

// canon re-encodes JSON so expected and actual compare independent of
// key order and spacing.
func canon(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON %q: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func wantJSON(t *testing.T, what, got, want string) {
	t.Helper()
	if canon(t, got) != canon(t, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, canon(t, got), canon(t, want))
	}
}

// dropStats removes data.stats, whose timings vary.
func dropStats(t *testing.T, s string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad JSON %q: %v", s, err)
	}
	if d, ok := v["data"].(map[string]any); ok {
		delete(d, "stats")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// It runs with detected_level (the default) and without: on, each entry
// gets the level its stream's level label or (app auth) its line gives.
func TestPushAndQueryEndToEnd(t *testing.T) {
	levelModes(t, testPushAndQueryEndToEnd)
}

func testPushAndQueryEndToEnd(t *testing.T, on bool) {
	e := newEnv(t, levelMod(on))
	// dl is the JSON member of the detected_level an answer has when on.
	dl := func(level string) string {
		if !on {
			return ""
		}
		return `"detected_level":"` + level + `",`
	}
	s := int64(1e9)
	// Protobuf + snappy, as Promtail and Alloy send it.
	e.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{app="api", level="error"}`, Entries: []PushEntry{
			{base - 50*s, "GET /a timeout after 30s"},
			{base - 40*s, "GET /b ok"},
		}},
		{Labels: `{app="auth"}`, Entries: []PushEntry{{base - 45*s, "login timeout for bob"}}},
	}), "Content-Type", "application/x-protobuf")
	// JSON, gzip-compressed.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	fmt.Fprintf(zw, `{"streams":[{"stream":{"app":"api","level":"info","service_name":"api"},"values":[["%d","GET /c ok"],["%d","GET /d timeout",{"trace":"x"}]]}]}`, base-30*s, base-20*s)
	zw.Close()
	e.mustPush("/loki/api/v1/push", gz.Bytes(), "Content-Type", "application/json", "Content-Encoding", "gzip")
	// Protobuf+snappy inside gzip Content-Encoding.
	e.mustPush("/loki/api/v1/push", gzipBytes(protoBody([]PushStream{
		{Labels: `{app="auth"}`, Entries: []PushEntry{{base - 15*s, "gzipped proto"}}},
	})), "Content-Type", "application/x-protobuf", "Content-Encoding", "gzip")
	// JSON lines.
	e.mustPush("/api/v1/push/jsonl", []byte(fmt.Sprintf(
		"{\"labels\":{\"app\":\"auth\"},\"ts\":\"%d\",\"line\":\"logout bob\"}\n\n{\"labels\":\"{app=\\\"auth\\\"}\",\"ts\":%d,\"line\":\"token timeout\"}\n",
		base-10*s, base-5*s)))

	start, end := base-60*s, base
	code, body := e.get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&limit=10", q(`{app=~".+"} |= "timeout"`), start, end))
	if code != 200 {
		t.Fatalf("query_range: %d %s", code, body)
	}
	wantJSON(t, "query_range backward", dropStats(t, body), fmt.Sprintf(`{"status":"success","data":{"resultType":"streams","result":[
		{"stream":{"app":"auth",`+dl("unknown")+`"service_name":"auth"},"values":[["%d","token timeout"],["%d","login timeout for bob"]]},
		{"stream":{"app":"api",`+dl("info")+`"level":"info","service_name":"api","trace":"x"},"values":[["%d","GET /d timeout"]]},
		{"stream":{"app":"api",`+dl("error")+`"level":"error","service_name":"api"},"values":[["%d","GET /a timeout after 30s"]]}]}}`,
		base-5*s, base-45*s, base-20*s, base-50*s))

	// Forward, limit 2, RFC 3339 and float-second times.
	code, body = e.get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%s&end=%d.5&limit=2&direction=forward",
		q(`{app="api"}`), time.Unix(0, start).UTC().Format(time.RFC3339), end/1e9))
	if code != 200 {
		t.Fatalf("query_range forward: %d %s", code, body)
	}
	wantJSON(t, "query_range forward", dropStats(t, body), fmt.Sprintf(`{"status":"success","data":{"resultType":"streams","result":[
		{"stream":{"app":"api",`+dl("error")+`"level":"error","service_name":"api"},"values":[["%d","GET /a timeout after 30s"],["%d","GET /b ok"]]}]}}`, base-50*s, base-40*s))

	// end is exclusive for Loki's query_range.
	code, body = e.get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d", q(`{app="auth"}`), base-45*s, base-5*s))
	wantStatus(t, "query_range end exclusive", code, body, 200)
	wantJSON(t, "query_range end exclusive", dropStats(t, body), fmt.Sprintf(`{"status":"success","data":{"resultType":"streams","result":[
		{"stream":{"app":"auth",`+dl("unknown")+`"service_name":"auth"},"values":[["%d","logout bob"],["%d","gzipped proto"],["%d","login timeout for bob"]]}]}}`, base-10*s, base-15*s, base-45*s))

	// Metric: count_over_time by level at 3 steps of 20 s, 30 s windows.
	code, body = e.get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&step=20",
		q(`sum by (level) (count_over_time({app="api"}[30s]))`), base-40*s, base))
	if code != 200 {
		t.Fatalf("metric: %d %s", code, body)
	}
	// Windows (t-30s, t]: t=-40: {-50, -40 err}; t=-20: {-40 err, -30 info, -20 info}; t=0: {-20 info}.
	wantJSON(t, "sum by count_over_time", dropStats(t, body), fmt.Sprintf(`{"status":"success","data":{"resultType":"matrix","result":[
		{"metric":{"level":"error"},"values":[[%d,"2"],[%d,"1"]]},
		{"metric":{"level":"info"},"values":[[%d,"2"],[%d,"1"]]}]}}`,
		base/1e9-40, base/1e9-20, base/1e9-20, base/1e9))

	code, body = e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(`rate({app="auth"} |= "bob" [1m])`), base))
	wantStatus(t, "instant rate", code, body, 200)
	wantJSON(t, "instant rate", dropStats(t, body), fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":[
		{"metric":{"app":"auth",`+dl("unknown")+`"service_name":"auth"},"value":[%d,"0.03333333333333333"]}]}}`, base/1e9))

	code, body = e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(`vector(1)+vector(1)`), base))
	wantStatus(t, "health check", code, body, 200)
	wantJSON(t, "health check", dropStats(t, body), fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,"2"]}]}}`, base/1e9))

	// The same as a POST form, as Grafana may send it.
	code, body = e.do("POST", "/loki/api/v1/query", []byte("query="+q(`vector(1)+vector(1)`)+fmt.Sprintf("&time=%d", base)), "Content-Type", "application/x-www-form-urlencoded")
	wantStatus(t, "health check POST", code, body, 200)
	wantJSON(t, "health check POST", dropStats(t, body), fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,"2"]}]}}`, base/1e9))

	_, body = e.get("/loki/api/v1/labels")
	wantJSON(t, "labels", body, `{"status":"success","data":["app","level","service_name"]}`)
	_, body = e.get("/loki/api/v1/label/app/values")
	wantJSON(t, "label values", body, `{"status":"success","data":["api","auth"]}`)
	_, body = e.get("/loki/api/v1/series?match[]=" + q(`{app="api"}`))
	wantJSON(t, "series", body, `{"status":"success","data":[{"app":"api","level":"error","service_name":"api"},{"app":"api","level":"info","service_name":"api"}]}`)
	_, body = e.get("/loki/api/v1/index/stats?query=" + q(`{app="api"}`))
	wantJSON(t, "index stats", body, `{"streams":2,"chunks":1,"entries":4,"bytes":56}`)

	// Native search: newest first, then the trailer.
	code, body = e.get(fmt.Sprintf("/api/v1/search?q=%s&fold=1&limit=2&end=%d", q("TIMEOUT"), base))
	if code != 200 {
		t.Fatalf("search: %d %s", code, body)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("search: %q", body)
	}
	meta1 := "" // the first hit's metadata: only its detected_level
	if on {
		meta1 = `,"metadata":{"detected_level":"unknown"}`
	}
	wantJSON(t, "search 1", lines[0], fmt.Sprintf(`{"ts":"%d","time":"2023-11-14T22:13:15Z","labels":{"app":"auth","service_name":"auth"},"line":"token timeout"`+meta1+`}`, base-5*s))
	wantJSON(t, "search 2", lines[1], fmt.Sprintf(`{"ts":"%d","time":"2023-11-14T22:13:00Z","labels":{"app":"api","level":"info","service_name":"api"},"line":"GET /d timeout","metadata":{`+dl("info")+`"trace":"x"}}`, base-20*s))
	var tr map[string]any
	json.Unmarshal([]byte(lines[2]), &tr)
	if tr["done"] != true || tr["count"] != 2.0 || tr["limited"] != true {
		t.Errorf("trailer %s", lines[2])
	}

	// Buckets are aligned to multiples of the step: [-50 s, -20 s) holds
	// the timeouts at -50 and -45, [-20 s, 10 s) those at -20 and -5.
	_, body = e.get(fmt.Sprintf("/api/v1/hits?q=%s&start=%d&end=%d&step=30", q(`{app=~"a.*"} |= "timeout"`), base-60*s, base))
	wantJSON(t, "hits", body, fmt.Sprintf(`{"step_ms":30000,"buckets":[{"t":%d,"count":2},{"t":%d,"count":2}],"total":4}`, (base-50*s)/1e6, (base-20*s)/1e6))
	_, body = e.get(fmt.Sprintf("/api/v1/facets?q=%s&end=%d", q("o"), base))
	wantJSON(t, "facets", body, `{"labels":{"app":{"api":4,"auth":4},"level":{"error":2,"info":2},"service_name":{"api":4,"auth":4}}}`)

	code, body = e.get("/loki/api/v1/query_range?query=" + q(`{app="api"`))
	if code != 400 || !strings.Contains(body, "error") {
		t.Errorf("bad query: %d %s", code, body)
	}
	code, _ = e.get("/ready")
	if code != 200 {
		t.Errorf("/ready: %d", code)
	}
	_, body = e.get("/metrics")
	for _, m := range []string{"hay_ingested_lines_total 8", "hay_wal_fsync_duration_seconds_count", "hay_push_duration_seconds_bucket", "hay_query_duration_seconds_bucket", "hay_segments 0"} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
}

// wantStatus fails the test when a request did not answer with status want.
func wantStatus(t *testing.T, what string, code int, body string, want int) {
	t.Helper()
	if code != want {
		t.Fatalf("%s: status %d, want %d: %s", what, code, want, body)
	}
}

// envSeed is a randomized test's seed (testseed.Seed): the one the
// environment variable name gives, to replay a failure, else one derived
// from HAY_TEST_SEED (CI), else a new one.
func envSeed(t *testing.T, name string) uint64 {
	t.Helper()
	return testseed.Seed(t, name)
}
