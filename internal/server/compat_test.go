package server

// Compatibility tests from an audit of what real Loki clients send
// (Grafana's Explore and alerting pages, Alloy, Vector, Promtail, Fluent
// Bit): each replays a client's request and asserts what that client
// needs; each failed before its fix.

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// compatEnv pushes {app="api", level="info"} entries at base-60s, base-59s
// (logfmt lines) and one {app="web"} JSON line at base-58s.
func compatEnv(t *testing.T) *testEnv {
	e := newEnv(t, nil)
	t0 := base - 60e9
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"api","level":"info"}`, t0,
		`level=info msg="hello" status=200`), "Content-Type", "application/json")
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"api","level":"info"}`, t0+1e9,
		`level=error msg="db timeout" status=500`), "Content-Type", "application/json")
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"web"}`, t0+2e9,
		`{"level":"warn","msg":"slow"}`), "Content-Type", "application/json")
	return e
}

// F1. Grafana Alloy's loki.write (since grafana/alloy#5346) and Vector's
// loki sink (default compression "snappy") send snappy-compressed protobuf
// with "Content-Encoding: snappy". Loki accepts it (pkg/loghttp/push/push.go:
// "HTTP clients do not need to set this header, but they sometimes do. See
// #3407"); hay answers 415, which both shippers treat as permanent and drop.
func TestCompatPushContentEncodingSnappy(t *testing.T) {
	e := newEnv(t, nil)
	body := protoBody([]PushStream{{Labels: `{app="alloy"}`, Entries: []PushEntry{{Time: base - 1e9, Line: "from alloy"}}}})
	code, msg := e.do("POST", "/loki/api/v1/push", body,
		"Content-Type", "application/x-protobuf", "Content-Encoding", "snappy")
	if code != 204 {
		t.Fatalf("protobuf+snappy with Content-Encoding: snappy: %d %s; want 204 as Loki", code, msg)
	}
	if n := e.storedCount(DefaultTenant); n != 1 {
		t.Fatalf("stored %d entries, want 1", n)
	}
}

// F2. Grafana 11/12 Explore runs, for every range log query, the logs
// volume query sum by (level, detected_level) (count_over_time(<expr> |
// drop __error__[$__auto])) (grafana/grafana
// public/app/plugins/datasource/loki/datasource.test.ts). hay refuses the
// drop stage with a 400, so the histogram above every log result is an
// error.
func TestCompatExploreLogsVolume(t *testing.T) {
	e := compatEnv(t)
	for _, expr := range []string{
		`{app="api"}`,
		`{app="api"} | logfmt | status >= 500`,
		`{app=~".+"} |= ""`,
	} {
		vol := `sum by (level, detected_level) (count_over_time(` + expr + ` | drop __error__[1m]))`
		p := url.Values{"query": {vol}, "start": {fmt.Sprint(base - 3600e9)}, "end": {fmt.Sprint(base)},
			"step": {"60000ms"}, "direction": {"backward"}, "limit": {"1000"}}
		code, body := e.get("/loki/api/v1/query_range?" + p.Encode())
		if code != 200 || !strings.Contains(body, `"resultType":"matrix"`) {
			t.Errorf("Explore logs volume %s:\n %d %s\nwant 200 and a matrix", vol, code, body)
		}
	}
}

// F5. Loki reads a push whose Content-Type is not application/json as
// snappy protobuf (pkg/loghttp/push/push.go: "When no content-type header
// is set or when it is set to application/x-protobuf: expect snappy
// compression"); hay reads it as JSON and answers 400.
func TestCompatPushProtobufWithoutContentType(t *testing.T) {
	e := newEnv(t, nil)
	body := protoBody([]PushStream{{Labels: `{app="x"}`, Entries: []PushEntry{{Time: base - 1e9, Line: "l"}}}})
	for _, ct := range []string{"", "application/octet-stream"} {
		code, msg := e.do("POST", "/loki/api/v1/push", body, "Content-Type", ct)
		if code != 204 {
			t.Errorf("protobuf push with Content-Type %q: %d %s; want 204 as Loki", ct, code, msg)
		}
	}
}

// F6. Loki accepts Content-Encoding: deflate on push (push.go); hay 415.
func TestCompatPushDeflate(t *testing.T) {
	e := newEnv(t, nil)
	var b bytes.Buffer
	zw, _ := flate.NewWriter(&b, flate.DefaultCompression)
	zw.Write(jsonPush(`{"app":"d"}`, base-1e9, "deflated"))
	zw.Close()
	code, msg := e.do("POST", "/loki/api/v1/push", b.Bytes(), "Content-Type", "application/json", "Content-Encoding", "deflate")
	if code != 204 {
		t.Fatalf("JSON push with Content-Encoding: deflate: %d %s; want 204 as Loki", code, msg)
	}
}

// F7. Loki's query endpoints take `since` (a duration before end) when
// start is absent (Loki HTTP API reference, query_range, labels, label
// values, series). hay ignores it and reads its default (1 h for
// query_range, 6 h for labels), so since=24h silently answers less.
func TestCompatSinceParam(t *testing.T) {
	e := newEnv(t, nil)
	old := base - 3*3600e9 // three hours ago
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"old"}`, old, "three hours ago"), "Content-Type", "application/json")
	code, body := e.get("/loki/api/v1/query_range?query=" + q(`{app="old"}`) + "&since=24h")
	if code != 200 || !strings.Contains(body, "three hours ago") {
		t.Errorf("query_range since=24h: %d %s; want the entry of 3 h ago", code, body)
	}
	// A store with only a stream of 10 h ago (a block of its own).
	e = newEnv(t, nil)
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"older","tier":"t"}`, base-10*3600e9, "ten hours ago"), "Content-Type", "application/json")
	code, body = e.get("/loki/api/v1/labels?since=24h")
	if code != 200 || !strings.Contains(body, `"tier"`) {
		t.Errorf("labels since=24h: %d %s; want tier (a stream of 10 h ago)", code, body)
	}
}

// F8. Grafana reads a failed query's message from the JSON field "message"
// (pkg/tsdb/loki/api.go makeLokiError), else shows the whole body; Loki
// sends plain text (pkg/util/server/error.go WriteError). hay sends
// {"error": "..."}, so Grafana shows the raw JSON object to the user.
func TestCompatErrorBodyReadable(t *testing.T) {
	e := compatEnv(t)
	code, body := e.get("/loki/api/v1/query_range?query=" + q(`{app="api"} | nosuchstage`))
	if code != 400 {
		t.Fatalf("bad query: %d %s; want 400", code, body)
	}
	var m map[string]any
	if json.Unmarshal([]byte(body), &m) == nil {
		if _, ok := m["message"]; !ok {
			t.Errorf("error body %s: JSON without \"message\"; Grafana then shows the JSON text itself", strings.TrimSpace(body))
		}
	}
}

// F10. Loki validates a push entry by entry: it stores the valid entries
// and answers 400 naming the rejected ones (grafana/loki
// pkg/distributor/distributor.go: ValidateEntry per entry, "Return early if
// none of the streams contained entries", else push the rest and return
// validationErr). Promtail, Alloy, Vector and Fluent Bit do not retry a
// 400, so with hay one too-old entry (or one over-long line) in a batch
// loses every other line of that batch; with Loki only that entry is lost.
func TestCompatPushPartialValidation(t *testing.T) {
	// hay serve's default --reject-older-than (Loki: reject_old_samples_max_age 168h).
	e := newEnv(t, func(c *Config) { c.RejectOlderThan = 168 * time.Hour })
	body := `{"streams":[{"stream":{"app":"batch"},"values":[` +
		`["` + fmt.Sprint(base-8*24*3600e9) + `","eight days old"],` +
		`["` + fmt.Sprint(base-2e9) + `","good 1"],` +
		`["` + fmt.Sprint(base-1e9) + `","good 2"]]}]}`
	code, msg := e.do("POST", "/loki/api/v1/push", []byte(body), "Content-Type", "application/json")
	if n := e.storedCount(DefaultTenant); n != 2 {
		t.Errorf("batch with one entry past --reject-older-than: %d %s; stored %d entries, want the 2 valid ones (as Loki)", code, strings.TrimSpace(msg), n)
	}
}

// F11. Grafana runs every panel of a dashboard, and in Explore the logs,
// logs-volume and stats queries, as concurrent requests; it does not retry
// a 429. hay refuses a query at once with 429 when --max-concurrent-queries
// (default 2 x GOMAXPROCS: 4 on a 2-core host) are running, so a dashboard
// with more Loki panels than that shows errors on the extra panels. Loki
// queues queries (query-frontend, max_outstanding_per_tenant) and answers
// 429 only when the queue is full. Here every slot is busy for 300 ms; the
// query should wait for a slot, not fail.
func TestCompatQueryWaitsForSlot(t *testing.T) {
	e := compatEnv(t)
	for range cap(e.srv.sem) {
		e.srv.sem <- struct{}{}
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		for range cap(e.srv.sem) {
			<-e.srv.sem
		}
	}()
	code, body := e.get("/loki/api/v1/query_range?query=" + q(`{app="api"}`) + "&start=" + fmt.Sprint(base-3600e9) + "&end=" + fmt.Sprint(base))
	if code != 200 {
		t.Fatalf("query while all %d slots are busy for 300 ms: %d %s; want it to wait and answer 200", cap(e.srv.sem), code, strings.TrimSpace(body))
	}
}

// F12. Grafana's Alerting pages discover a Loki data source's rules (its
// "Manage alerts via Alerting UI" toggle is on by default) by fetching the
// Prometheus-compatible /prometheus/api/v1/rules through
// /api/prometheus/<uid>/api/v1/rules; on an error the Alert rules page shows
// "Unable to fetch alert rules. Is the <name> data source properly
// configured?" (grafana/grafana
// public/app/features/alerting/unified/api/buildInfo.ts
// discoverDataSourceFeatures, hasPromRulesSupport). hay: 404.
func TestCompatPromRulesEndpoint(t *testing.T) {
	e := newEnv(t, nil)
	code, body := e.get("/prometheus/api/v1/rules")
	var a struct {
		Status string `json:"status"`
		Data   struct {
			Groups []any `json:"groups"`
		} `json:"data"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &a) != nil || a.Status != "success" || a.Data.Groups == nil {
		t.Fatalf("GET /prometheus/api/v1/rules: %d %q; want 200 {\"status\":\"success\",\"data\":{\"groups\":[]}}", code, body)
	}
}

// F14. Loki's TailHandler sends a WebSocket ping every second
// (pkg/querier/http.go, wsPingPeriod = 1s), so a quiet tail keeps every
// proxy hop between Grafana and Loki busy. hay sends nothing while no
// entry matches, so a proxy with an idle timeout (nginx proxy_read_timeout
// defaults to 60 s) cuts the tail; Grafana sees 1006, reconnects every 5 s
// (up to 30 times, public/app/plugins/datasource/loki/LiveStreams.ts) and
// each reconnect replays the last 100 matches into the live view again.
// Here a TCP proxy with a 2 s idle timeout sits in front of hay.
func TestCompatTailKeepalive(t *testing.T) {
	e := compatEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	target := strings.TrimPrefix(e.ts.URL, "http://")
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				down.Close()
				return
			}
			go io.Copy(up, down)
			go func() {
				defer down.Close()
				defer up.Close()
				buf := make([]byte, 32<<10)
				for {
					up.SetReadDeadline(time.Now().Add(2 * time.Second)) // the proxy's idle timeout
					n, err := up.Read(buf)
					if err != nil {
						return
					}
					if _, err := down.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+ln.Addr().String()+"/loki/api/v1/tail?query="+q(`{app="api"} |= "rare"`), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	// Nothing matches for 3.5 s, then an entry does.
	go func() {
		time.Sleep(3500 * time.Millisecond)
		e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"api","level":"info"}`, base, "a rare line"), "Content-Type", "application/json")
	}()
	_, b, err := c.Read(ctx)
	if err != nil || !strings.Contains(string(b), "a rare line") {
		t.Fatalf("tail behind a proxy with a 2 s idle timeout: %v %s; want the entry pushed after 3.5 s (Loki pings every second)", err, b)
	}
}

// F15. LogQL has # comments to the end of the line (Loki docs, Query
// Loki, "Comments": "{app="foo"} # anything that comes after will not be
// interpreted", and whole lines of a multi-line query). Grafana sends the
// code editor's text as typed (it strips comments only from the queries it
// derives, such as the logs volume); hay refuses a query with a comment.
func TestCompatLogQLComments(t *testing.T) {
	e := compatEnv(t)
	for _, qs := range []string{
		`{app="api"} # errors only`,
		"{app=\"api\"}\n  | logfmt\n  # | status >= 500\n  | level=\"error\" # the bad ones",
		"sum by (level) (\n  count_over_time({app=\"api\"}[1m]) # per minute\n)",
	} {
		p := url.Values{"query": {qs}, "start": {fmt.Sprint(base - 3600e9)}, "end": {fmt.Sprint(base)}, "step": {"60s"}}
		code, body := e.get("/loki/api/v1/query_range?" + p.Encode())
		if code != 200 {
			t.Errorf("query with a # comment %q: %d %s", qs, code, strings.TrimSpace(body))
		}
	}
}
