package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A test-side model of an ExportLogsServiceRequest and two encoders of
// it (binary protobuf and OTLP/JSON) written from the public
// opentelemetry-proto definitions, independent of otlp.go's decoders.

type tv struct { // an AnyValue
	kind string // "", "s", "b", "i", "d", "bytes", "arr", "kv"
	s    string
	b    bool
	i    int64
	d    float64
	by   []byte
	arr  []tv
	kvs  []tkv
}

type tkv struct {
	k string
	v tv
}

type tRec struct {
	time, observed  uint64
	body            *tv
	sev             string
	sevNum          int
	attrs           []tkv
	traceID, spanID []byte
	flags, dropped  uint32
	event           string
}

type tScope struct {
	name, version string
	attrs         []tkv
	dropped       uint32
	recs          []tRec
}

type tRes struct {
	attrs  []tkv
	scopes []tScope
}

func tStr(s string) tv       { return tv{kind: "s", s: s} }
func tInt(i int64) tv        { return tv{kind: "i", i: i} }
func tDbl(d float64) tv      { return tv{kind: "d", d: d} }
func tBool(b bool) tv        { return tv{kind: "b", b: b} }
func tBytes(b []byte) tv     { return tv{kind: "bytes", by: b} }
func tArr(a ...tv) tv        { return tv{kind: "arr", arr: a} }
func tMap(kvs ...tkv) tv     { return tv{kind: "kv", kvs: kvs} }
func kvS(k, v string) tkv    { return tkv{k, tStr(v)} }
func bodyOf(v tv) *tv        { return &v }
func strBody(s string) *tv   { return bodyOf(tStr(s)) }
func pbKey(f, wt int) []byte { return binary.AppendUvarint(nil, uint64(f)<<3|uint64(wt)) }
func pbLen(f int, b []byte) []byte {
	out := pbKey(f, 2)
	out = binary.AppendUvarint(out, uint64(len(b)))
	return append(out, b...)
}
func pbVarint(f int, v uint64) []byte { return binary.AppendUvarint(pbKey(f, 0), v) }
func pbFixed64(f int, v uint64) []byte {
	return binary.LittleEndian.AppendUint64(pbKey(f, 1), v)
}
func pbFixed32(f int, v uint32) []byte {
	return binary.LittleEndian.AppendUint32(pbKey(f, 5), v)
}

func (v tv) proto() []byte {
	switch v.kind {
	case "s":
		return pbLen(1, []byte(v.s))
	case "b":
		if v.b {
			return pbVarint(2, 1)
		}
		return pbVarint(2, 0)
	case "i":
		return pbVarint(3, uint64(v.i))
	case "d":
		return pbFixed64(4, math.Float64bits(v.d))
	case "arr":
		var a []byte
		for _, e := range v.arr {
			a = append(a, pbLen(1, e.proto())...)
		}
		return pbLen(5, a)
	case "kv":
		var a []byte
		for _, kv := range v.kvs {
			a = append(a, pbLen(1, kv.proto())...)
		}
		return pbLen(6, a)
	case "bytes":
		return pbLen(7, v.by)
	}
	return nil
}

func (kv tkv) proto() []byte { return append(pbLen(1, []byte(kv.k)), pbLen(2, kv.v.proto())...) }

// otlpProtoReq encodes the request, with unknown fields sprinkled in
// (newer OTLP fields and ones not defined yet) that a decoder must skip.
func otlpProtoReq(res []tRes) []byte {
	var out []byte
	for _, r := range res {
		var resource []byte
		for _, a := range r.attrs {
			resource = append(resource, pbLen(1, a.proto())...)
		}
		resource = append(resource, pbVarint(2, 3)...) // dropped_attributes_count
		rl := pbLen(1, resource)
		for _, sc := range r.scopes {
			var sl []byte
			if sc.name != "" || sc.version != "" || sc.attrs != nil || sc.dropped != 0 {
				scope := pbLen(1, []byte(sc.name))
				if sc.version != "" {
					scope = append(scope, pbLen(2, []byte(sc.version))...)
				}
				for _, a := range sc.attrs {
					scope = append(scope, pbLen(3, a.proto())...)
				}
				if sc.dropped != 0 {
					scope = append(scope, pbVarint(4, uint64(sc.dropped))...)
				}
				sl = pbLen(1, scope) // InstrumentationScope
			}
			for _, rec := range sc.recs {
				var lr []byte
				if rec.time != 0 {
					lr = append(lr, pbFixed64(1, rec.time)...)
				}
				if rec.sevNum != 0 {
					lr = append(lr, pbVarint(2, uint64(rec.sevNum))...)
				}
				if rec.sev != "" {
					lr = append(lr, pbLen(3, []byte(rec.sev))...)
				}
				if rec.body != nil {
					lr = append(lr, pbLen(5, rec.body.proto())...)
				}
				for _, a := range rec.attrs {
					lr = append(lr, pbLen(6, a.proto())...)
				}
				if rec.dropped != 0 {
					lr = append(lr, pbVarint(7, uint64(rec.dropped))...)
				}
				if rec.flags != 0 {
					lr = append(lr, pbFixed32(8, rec.flags)...)
				}
				if rec.traceID != nil {
					lr = append(lr, pbLen(9, rec.traceID)...)
				}
				if rec.spanID != nil {
					lr = append(lr, pbLen(10, rec.spanID)...)
				}
				if rec.observed != 0 {
					lr = append(lr, pbFixed64(11, rec.observed)...)
				}
				if rec.event != "" {
					lr = append(lr, pbLen(12, []byte(rec.event))...)
				}
				lr = append(lr, pbVarint(99, 7)...) // a field not defined yet
				sl = append(sl, pbLen(2, lr)...)
			}
			sl = append(sl, pbLen(3, []byte("https://opentelemetry.io/schemas/1.21.0"))...)
			rl = append(rl, pbLen(2, sl)...)
		}
		rl = append(rl, pbLen(3, []byte("https://opentelemetry.io/schemas/1.21.0"))...)
		out = append(out, pbLen(1, rl)...)
	}
	return append(out, pbFixed32(15, 0xdeadbeef)...)
}

func jsonQ(s string) string { b, _ := json.Marshal(s); return string(b) }

func (v tv) json() string {
	switch v.kind {
	case "s":
		return `{"stringValue":` + jsonQ(v.s) + `}`
	case "b":
		return fmt.Sprintf(`{"boolValue":%t}`, v.b)
	case "i":
		return fmt.Sprintf(`{"intValue":"%d"}`, v.i)
	case "d":
		switch {
		case math.IsNaN(v.d):
			return `{"doubleValue":"NaN"}`
		case math.IsInf(v.d, 1):
			return `{"doubleValue":"Infinity"}`
		case math.IsInf(v.d, -1):
			return `{"doubleValue":"-Infinity"}`
		}
		return `{"doubleValue":` + strconv.FormatFloat(v.d, 'g', -1, 64) + `}`
	case "bytes":
		return `{"bytesValue":"` + base64.StdEncoding.EncodeToString(v.by) + `"}`
	case "arr":
		var parts []string
		for _, e := range v.arr {
			parts = append(parts, e.json())
		}
		return `{"arrayValue":{"values":[` + strings.Join(parts, ",") + `]}}`
	case "kv":
		var parts []string
		for _, kv := range v.kvs {
			parts = append(parts, kv.json())
		}
		return `{"kvlistValue":{"values":[` + strings.Join(parts, ",") + `]}}`
	}
	return `{}`
}

func (kv tkv) json() string { return `{"key":` + jsonQ(kv.k) + `,"value":` + kv.v.json() + `}` }

// otlpJSONReq encodes the request as OTLP/JSON, with fields hay ignores
// (trace ids as hex, severity, scope, schema URLs, unknown keys).
func otlpJSONReq(res []tRes) []byte {
	var rls []string
	for _, r := range res {
		var attrs []string
		for _, a := range r.attrs {
			attrs = append(attrs, a.json())
		}
		var sls []string
		for _, sc := range r.scopes {
			var recs []string
			for _, rec := range sc.recs {
				f := []string{`"someFutureField":{"a":[1,2]}`}
				if rec.flags != 0 {
					f = append(f, fmt.Sprintf(`"flags":%d`, rec.flags))
				}
				if rec.dropped != 0 {
					f = append(f, fmt.Sprintf(`"droppedAttributesCount":%d`, rec.dropped))
				}
				if rec.event != "" {
					f = append(f, `"eventName":`+jsonQ(rec.event))
				}
				if rec.time != 0 {
					f = append(f, fmt.Sprintf(`"timeUnixNano":"%d"`, rec.time))
				}
				if rec.observed != 0 {
					f = append(f, fmt.Sprintf(`"observedTimeUnixNano":"%d"`, rec.observed))
				}
				if rec.sev != "" {
					f = append(f, `"severityText":`+jsonQ(rec.sev))
				}
				if rec.sevNum != 0 {
					f = append(f, fmt.Sprintf(`"severityNumber":%d`, rec.sevNum))
				}
				if rec.body != nil {
					f = append(f, `"body":`+rec.body.json())
				}
				var la []string
				for _, a := range rec.attrs {
					la = append(la, a.json())
				}
				f = append(f, `"attributes":[`+strings.Join(la, ",")+`]`)
				if rec.traceID != nil {
					f = append(f, fmt.Sprintf(`"traceId":"%X"`, rec.traceID)) // hex, either case
				}
				if rec.spanID != nil {
					f = append(f, fmt.Sprintf(`"spanId":"%x"`, rec.spanID))
				}
				recs = append(recs, "{"+strings.Join(f, ",")+"}")
			}
			scope := ""
			if sc.name != "" || sc.version != "" || sc.attrs != nil || sc.dropped != 0 {
				var sa []string
				for _, a := range sc.attrs {
					sa = append(sa, a.json())
				}
				scope = fmt.Sprintf(`"scope":{"name":%s,"version":%s,"attributes":[%s],"droppedAttributesCount":%d},`,
					jsonQ(sc.name), jsonQ(sc.version), strings.Join(sa, ","), sc.dropped)
			}
			sls = append(sls, "{"+scope+`"logRecords":[`+strings.Join(recs, ",")+`],"schemaUrl":"s"}`)
		}
		rls = append(rls, `{"resource":{"attributes":[`+strings.Join(attrs, ",")+`],"droppedAttributesCount":0},"scopeLogs":[`+strings.Join(sls, ",")+`]}`)
	}
	return []byte(`{"resourceLogs":[` + strings.Join(rls, ",\n") + `]}`)
}

// otlpRead returns what the tenant's query_range answers for query over
// the hour before base (and base itself), forward: one "labels ts line"
// string an entry, streams sorted by their labels.
func (e *testEnv) otlpRead(tenant, query string) []string {
	e.t.Helper()
	// categorize-labels: the stream's own labels, the entries'
	// structured metadata apart (checked by the metadata tests).
	code, body := e.get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&direction=forward&limit=5000",
		q(query), base-3600e9, base+1), "X-Scope-OrgID", tenant, "X-Loki-Response-Encoding-Flags", "categorize-labels")
	if code != 200 {
		e.t.Fatalf("query_range %s: %d %s", query, code, body)
	}
	var resp struct {
		Data struct {
			Result []struct {
				Stream map[string]string `json:"stream"`
				Values [][]any           `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		e.t.Fatalf("query_range: %v: %s", err, body)
	}
	type st struct {
		key   string
		lines []string
	}
	var sts []st
	for _, r := range resp.Data.Result {
		var ls []string
		for k, v := range r.Stream {
			ls = append(ls, k+"="+v)
		}
		slices.Sort(ls)
		s := st{key: strings.Join(ls, ",")}
		for _, v := range r.Values {
			s.lines = append(s.lines, fmt.Sprintf("%s %s %s", s.key, v[0], v[1]))
		}
		sts = append(sts, s)
	}
	slices.SortFunc(sts, func(a, b st) int { return strings.Compare(a.key, b.key) })
	var out []string
	for _, s := range sts {
		out = append(out, s.lines...)
	}
	return out
}

func wantLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %d entries:\n  %s\nwant %d:\n  %s", what, len(got), strings.Join(got, "\n  "), len(want), strings.Join(want, "\n  "))
	}
}

func ns(d time.Duration) uint64 { return uint64(base - int64(d)) }

// otlpSample is a request with several resources and scopes, records
// with and without times, bodies of every AnyValue type, and attributes
// that are and are not stream labels; otlpSampleWant is what Loki's
// documented mapping makes of it.
func otlpSample() []tRes {
	tid := []byte{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c}
	r1attrs := []tkv{kvS("service.name", "checkout"), kvS("k8s.namespace.name", "prod"), kvS("host.name", "h1"),
		kvS("deployment.environment.name", "staging"), {"service.instance.id", tInt(42)}, kvS("service.version", "1.2")}
	return []tRes{
		{attrs: r1attrs, scopes: []tScope{
			{name: "lib-a", version: "1.0", attrs: []tkv{kvS("scope.attr", "s")}, recs: []tRec{
				{time: ns(10 * time.Second), body: strBody("payment failed"), sev: "ERROR", sevNum: 17, attrs: []tkv{{"user.id", tInt(7)}},
					traceID: tid, spanID: tid[:8], flags: 1},
				{observed: ns(9 * time.Second), body: bodyOf(tMap(tkv{"b", tInt(1)}, kvS("a", "x<y"), tkv{"c", tArr(tBool(true), tDbl(1.5), tv{})}, tkv{"d", tBytes([]byte{0, 1, 2})}))},
			}},
			{name: "lib-b", dropped: 2, recs: []tRec{
				{body: bodyOf(tInt(-7))}, // no time at all: now
				{time: ns(8 * time.Second), body: bodyOf(tDbl(1e21)), event: "login", dropped: 3, attrs: []tkv{
					{"http", tMap(kvS("method", "GET"), tkv{"status.code", tInt(200)})}, {"tags", tArr(tStr("a"), tInt(2))},
					{"ok", tBool(true)}, {"ratio", tDbl(0.5)}, {"raw", tBytes([]byte{0, 1, 2})}, {"empty", tv{}},
					kvS("1st", "x"), kvS("_priv", "y"), kvS("__sys", "z"), kvS("event_name", "the field wins"),
					{"nothing", tMap()}, // an empty map: no pair
				}},
				{time: ns(7 * time.Second), body: bodyOf(tDbl(1e-7))},
				{time: ns(6 * time.Second), body: bodyOf(tBytes([]byte("hi")))},
				{time: ns(5 * time.Second)}, // no body
				{time: ns(4 * time.Second), body: bodyOf(tArr(tStr("a"), tInt(2), tBool(false)))},
				{time: ns(3 * time.Second), body: bodyOf(tBool(true))},
				{time: ns(2 * time.Second), observed: ns(100 * time.Second), body: bodyOf(tDbl(0.000001))},
			}},
		}},
		{attrs: []tkv{kvS("container.name", "web"), kvS("cloud.region", "eu-west-1"), kvS("os.type", "linux")}, scopes: []tScope{
			{recs: []tRec{
				{time: ns(time.Second), body: strBody("line1\nline2"), sev: "INFO"},
				{time: ns(time.Second), body: strBody("second at the same time")},
			}},
		}},
		// The same labels as the first resource: the same stream.
		{attrs: r1attrs[:5], scopes: []tScope{{recs: []tRec{{time: ns(10 * time.Second), body: strBody("from another resource")}}}}},
	}
}

func otlpSampleWant() []string {
	r1 := `deployment_environment_name=staging,k8s_namespace_name=prod,service_instance_id=42,service_name=checkout`
	r2 := `cloud_region=eu-west-1,container_name=web,service_name=unknown_service`
	at := func(d time.Duration) string { return fmt.Sprint(base - int64(d)) }
	return []string{ // streams in the order of their labels
		r2 + " " + at(time.Second) + " line1\nline2",
		r2 + " " + at(time.Second) + " second at the same time",
		r1 + " " + at(10*time.Second) + " payment failed",
		r1 + " " + at(10*time.Second) + " from another resource",
		r1 + " " + at(9*time.Second) + ` {"a":"x\u003cy","b":1,"c":[true,1.5,null],"d":"AAEC"}`,
		r1 + " " + at(8*time.Second) + " 1e+21",
		r1 + " " + at(7*time.Second) + " 1e-7",
		r1 + " " + at(6*time.Second) + " aGk=",
		r1 + " " + at(5*time.Second) + " ",
		r1 + " " + at(4*time.Second) + ` ["a",2,false]`,
		r1 + " " + at(3*time.Second) + " true",
		r1 + " " + at(2*time.Second) + " 0.000001",
		r1 + " " + at(0) + " -7",
	}
}

// otlpSampleStored is the store's entries after otlpSample (as
// testEnv.stored writes them): lines, and each entry's structured
// metadata written out by hand from Loki's OTLP mapping.
func otlpSampleStored() []string {
	r1 := `{deployment_environment_name="staging", k8s_namespace_name="prod", service_instance_id="42", service_name="checkout"}`
	r2 := `{cloud_region="eu-west-1", container_name="web", service_name="unknown_service"}`
	libA := `host_name="h1", scope_attr="s", scope_name="lib-a", scope_version="1.0", service_version="1.2"`
	libB := `host_name="h1", scope_dropped_attributes_count="2", scope_name="lib-b", service_version="1.2"`
	e := func(labels string, d time.Duration, line, meta string) string {
		return fmt.Sprintf("%s %d %q | %s", labels, base-int64(d), line, meta)
	}
	out := []string{
		e(r1, 10*time.Second, "payment failed", `flags="1", host_name="h1", scope_attr="s", scope_name="lib-a", scope_version="1.0", service_version="1.2", `+
			`severity_number="17", severity_text="ERROR", span_id="5b8efff798038103", trace_id="5b8efff798038103d269b633813fc60c", user_id="7"`),
		e(r1, 9*time.Second, `{"a":"x\u003cy","b":1,"c":[true,1.5,null],"d":"AAEC"}`, libA),
		e(r1, 0, "-7", libB),
		e(r1, 8*time.Second, "1e+21", `__sys="z", dropped_attributes_count="3", event_name="login", host_name="h1", http_method="GET", `+
			`http_status_code="200", key_1st="x", key_priv="y", ok="true", ratio="0.5", raw="AAEC", scope_dropped_attributes_count="2", `+
			`scope_name="lib-b", service_version="1.2", tags="[\"a\",2]"`),
		e(r1, 7*time.Second, "1e-7", libB),
		e(r1, 6*time.Second, "aGk=", libB),
		e(r1, 5*time.Second, "", libB),
		e(r1, 4*time.Second, `["a",2,false]`, libB),
		e(r1, 3*time.Second, "true", libB),
		e(r1, 2*time.Second, "0.000001", fmt.Sprintf(`host_name="h1", observed_timestamp="%d", scope_dropped_attributes_count="2", scope_name="lib-b", service_version="1.2"`, base-int64(100*time.Second))),
		e(r1, 10*time.Second, "from another resource", `host_name="h1"`),
		e(r2, time.Second, "line1\nline2", `os_type="linux", severity_text="INFO"`),
		e(r2, time.Second, "second at the same time", `os_type="linux"`),
	}
	slices.Sort(out)
	return out
}

// otlpPost sends an OTLP request and returns status, Content-Type and body.
func (e *testEnv) otlpPost(body []byte, hdr ...string) (int, string, []byte) {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.ts.URL+"/otlp/v1/logs", bytes.NewReader(body))
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
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// TestOTLPLogs pushes the sample as each body form the otlphttp
// exporters send (protobuf and JSON, gzip or not), each to its own
// tenant, and reads back exactly the documented mapping.
func TestOTLPLogs(t *testing.T) {
	e := newEnv(t, nil)
	sample := otlpSample()
	cases := []struct {
		tenant, ct, ce string
		body           []byte
		wantCT         string
		wantBody       string
	}{
		{"proto", "application/x-protobuf", "", otlpProtoReq(sample), "application/x-protobuf", ""},
		{"proto-gzip", "application/x-protobuf", "gzip", gzipBytes(otlpProtoReq(sample)), "application/x-protobuf", ""},
		{"json", "application/json", "", otlpJSONReq(sample), "application/json", "{}"},
		{"json-gzip", "application/json; charset=utf-8", "gzip", gzipBytes(otlpJSONReq(sample)), "application/json", "{}"},
	}
	for _, c := range cases {
		hdr := []string{"Content-Type", c.ct, "X-Scope-OrgID", c.tenant}
		if c.ce != "" {
			hdr = append(hdr, "Content-Encoding", c.ce)
		}
		code, ct, body := e.otlpPost(c.body, hdr...)
		if code != 200 || ct != c.wantCT || string(body) != c.wantBody {
			t.Errorf("%s: %d %q %q, want 200 %q %q", c.tenant, code, ct, body, c.wantCT, c.wantBody)
		}
		wantLines(t, c.tenant, e.otlpRead(c.tenant, `{service_name=~".+"}`), otlpSampleWant())
		wantStored(t, c.tenant+" stored", e, c.tenant, otlpSampleStored())
	}
	// Labels select as Loki's would.
	got := e.otlpRead("json", `{service_name="unknown_service", container_name="web"}`)
	wantLines(t, "by container_name", got, otlpSampleWant()[:2])
	// Only the documented resource attributes became labels.
	_, lbl := e.get("/loki/api/v1/labels?start="+fmt.Sprint(base-3600e9)+"&end="+fmt.Sprint(base+1), "X-Scope-OrgID", "proto")
	wantJSON(t, "labels", lbl, `{"status":"success","data":["cloud_region","container_name","deployment_environment_name","k8s_namespace_name","service_instance_id","service_name"]}`)
	// An empty request is a success that stores nothing.
	for _, c := range []struct{ ct, body, want string }{{"application/x-protobuf", "", ""}, {"application/json", "{}", "{}"}, {"application/json", `{"resourceLogs":[]}`, "{}"}} {
		if code, _, b := e.otlpPost([]byte(c.body), "Content-Type", c.ct, "X-Scope-OrgID", "empty"); code != 200 || string(b) != c.want {
			t.Errorf("empty %s %q: %d %q", c.ct, c.body, code, b)
		}
	}
	if got := e.otlpRead("empty", `{service_name=~".+"}`); len(got) != 0 {
		t.Errorf("empty requests stored %q", got)
	}
}

// TestOTLPJSONForms: OTLP/JSON as other encoders write it: 64-bit
// integers as numbers, doubles as strings, base64 without padding or
// URL-safe, null fields, keys in another case.
func TestOTLPJSONForms(t *testing.T) {
	e := newEnv(t, nil)
	body := fmt.Sprintf(`{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}},`+
		`{"key":"k8s.pod.name","value":{"kvlistValue":{"values":[{"key":"a.b","value":{"intValue":5}},{"key":"c","value":{"boolValue":false}}]}}}]},`+
		`"scopeLogs":[{"scope":null,"logRecords":[`+
		`{"timeUnixNano":%d,"body":{"intValue":12345678901234}},`+
		`{"timeUnixNano":"%d","body":{"doubleValue":"2.5"}},`+
		`{"TimeUnixNano":"%d","body":{"bytesValue":"aGk"}},`+
		`{"timeUnixNano":"%d","body":{"bytesValue":"-_8="}},`+
		`{"timeUnixNano":null,"observedTimeUnixNano":%d,"body":{"doubleValue":"-Infinity"}},`+
		`{"timeUnixNano":"%d","body":{"kvlistValue":{"values":[{"key":"n","value":{"doubleValue":"NaN"}}]}}},`+
		`{"timeUnixNano":"%d","body":{"kvlistValue":{"values":[{"key":"k","value":{"stringValue":"1"}},{"key":"k","value":{"stringValue":"2"}},{"key":"e","value":null}]}}},`+
		`{"timeUnixNano":1.7e18,"body":{"stringValue":"exponent time"}}`+
		`]}]}]}`, base-6e9, base-5e9, base-4e9, base-3e9, base-2e9, base-1e9, base-5e8)
	if code, _, b := e.otlpPost([]byte(body), "Content-Type", "application/json"); code != 200 || string(b) != "{}" {
		t.Fatalf("%d %s", code, b)
	}
	l := `k8s_pod_name_a_b=5,k8s_pod_name_c=false,service_name=svc`
	wantLines(t, "json forms", e.otlpRead(DefaultTenant, `{service_name="svc"}`), []string{
		l + fmt.Sprintf(" %d 12345678901234", base-6e9),
		l + fmt.Sprintf(" %d 2.5", base-5e9),
		l + fmt.Sprintf(" %d aGk=", base-4e9),
		l + fmt.Sprintf(" %d +/8=", base-3e9),
		l + fmt.Sprintf(" %d json: unsupported value: -Inf", base-2e9),
		l + fmt.Sprintf(" %d ", base-1e9), // a map holding NaN: no JSON, empty (as the collector's AsString)
		l + fmt.Sprintf(` %d {"e":null,"k":"2"}`, base-5e8),
		l + " 1700000000000000000 exponent time", // base
	})
}

// TestOTLPValueString checks the rendering of bodies against the
// collector's documented AsString results.
func TestOTLPValueString(t *testing.T) {
	for _, c := range []struct {
		v    otlpValue
		want string
	}{
		{otlpValue{}, ""},
		{otlpValue{kind: otlpString, bytes: []byte("a\x00\xff")}, "a\x00\xff"},
		{otlpValue{kind: otlpBool, num: 1}, "true"},
		{otlpValue{kind: otlpBool}, "false"},
		{otlpValue{kind: otlpInt, num: math.MinInt64}, "-9223372036854775808"},
		{otlpValue{kind: otlpDouble, dbl: 1e20}, "100000000000000000000"},
		{otlpValue{kind: otlpDouble, dbl: 1e21}, "1e+21"},
		{otlpValue{kind: otlpDouble, dbl: 1e-6}, "0.000001"},
		{otlpValue{kind: otlpDouble, dbl: 1.5e-9}, "1.5e-9"},
		{otlpValue{kind: otlpDouble, dbl: math.Copysign(0, -1)}, "-0"},
		{otlpValue{kind: otlpDouble, dbl: 3}, "3"},
		{otlpValue{kind: otlpDouble, dbl: math.NaN()}, "json: unsupported value: NaN"},
		{otlpValue{kind: otlpDouble, dbl: math.Inf(1)}, "json: unsupported value: +Inf"},
		{otlpValue{kind: otlpBytes}, ""},
		{otlpValue{kind: otlpArray}, "[]"},
		{otlpValue{kind: otlpMap}, "{}"},
		{otlpValue{kind: otlpArray, arr: []otlpValue{{kind: otlpBytes}, {kind: otlpMap, kvs: []otlpKV{{"z", otlpValue{kind: otlpString, bytes: []byte("&")}}, {"a", otlpValue{}}}}}}, `["",{"a":null,"z":"\u0026"}]`},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.v, got, c.want)
		}
	}
}

// decodeStatusProto reads a google.rpc.Status's message, and checks the
// body has nothing else.
func decodeStatusProto(t *testing.T, b []byte) string {
	t.Helper()
	f, typ, _, v, rest, err := protoField(b)
	if err != nil || f != 2 || typ != wireLen || len(rest) != 0 {
		t.Fatalf("not a Status with only a message: %q", b)
	}
	return string(v)
}

// TestOTLPPartialAndRefused: records past the limits are refused one by
// one, the others stored, and the answer says how many were refused
// (OTLP partial success); when all are refused, or the body is bad, the
// answer is a 4xx with a Status and nothing is stored.
func TestOTLPPartialAndRefused(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.RejectOlderThan = time.Hour; c.MaxLine = 20 })
	res := []tRes{{attrs: []tkv{kvS("service.name", "p")}, scopes: []tScope{{recs: []tRec{
		{time: ns(2 * time.Hour), body: strBody("too old")},
		{time: ns(time.Second), body: strBody("kept")},
		{time: ns(time.Second), body: strBody("a line longer than twenty bytes")},
		{time: math.MaxUint64, body: strBody("past 2262")},
		{body: strBody("kept too, at now")},
	}}}}}
	old := time.Unix(0, base-int64(2*time.Hour)).UTC().Format(time.RFC3339Nano)
	wantMsg := `resource 0, log record 3: time 18446744073709551615 ns is past the year 2262; ` +
		`stream 0 {service_name="p"}, entry 0: timestamp ` + old + ` is older than 1h0m0s; ` +
		`stream 0 {service_name="p"}, entry 2: line of 31 bytes exceeds the limit of 20; 3 entries refused, the other 2 stored`

	code, ct, b := e.otlpPost(otlpProtoReq(res), "Content-Type", "application/x-protobuf", "X-Scope-OrgID", "p1")
	if code != 200 || ct != "application/x-protobuf" {
		t.Fatalf("partial, protobuf: %d %q %q", code, ct, b)
	}
	// ExportLogsServiceResponse{partial_success: {rejected_log_records: 3, error_message}}
	f, typ, _, ps, rest, err := protoField(b)
	if err != nil || f != 1 || typ != wireLen || len(rest) != 0 {
		t.Fatalf("partial, protobuf: response %q", b)
	}
	f, typ, n, _, ps, err := protoField(ps)
	if err != nil || f != 1 || typ != wireVarint || n != 3 {
		t.Fatalf("rejected_log_records: %d %d %d %v", f, typ, n, err)
	}
	if got := decodeStatusProto(t, ps); got != wantMsg {
		t.Errorf("error_message:\n got %s\nwant %s", got, wantMsg)
	}
	want := []string{fmt.Sprintf("service_name=p %d kept", base-1e9), fmt.Sprintf("service_name=p %d kept too, at now", base)}
	wantLines(t, "partial, protobuf", e.otlpRead("p1", `{service_name="p"}`), want)

	code, ct, b = e.otlpPost(otlpJSONReq(res), "Content-Type", "application/json", "X-Scope-OrgID", "p2")
	wantJSONBody, _ := json.Marshal(map[string]any{"partialSuccess": map[string]any{"rejectedLogRecords": "3", "errorMessage": wantMsg}})
	if code != 200 || ct != "application/json" {
		t.Fatalf("partial, JSON: %d %q %s", code, ct, b)
	}
	wantJSON(t, "partial, JSON", string(b), string(wantJSONBody))
	wantLines(t, "partial, JSON", e.otlpRead("p2", `{service_name="p"}`), want)

	// All refused: 400, nothing stored.
	allOld := []tRes{{attrs: []tkv{kvS("service.name", "p")}, scopes: []tScope{{recs: []tRec{{time: ns(2 * time.Hour), body: strBody("too old")}}}}}}
	code, ct, b = e.otlpPost(otlpProtoReq(allOld), "Content-Type", "application/x-protobuf", "X-Scope-OrgID", "p3")
	if code != 400 || ct != "application/x-protobuf" || decodeStatusProto(t, b) != `stream 0 {service_name="p"}, entry 0: timestamp `+old+` is older than 1h0m0s; nothing was stored` {
		t.Errorf("all refused: %d %q %q", code, ct, b)
	}
	// Label limits apply as to Loki pushes: every default label attribute
	// set is more than 15 labels.
	var many []tkv
	for k := range otlpIndexAttributes {
		many = append(many, kvS(k, "v"))
	}
	code, _, b = e.otlpPost(otlpJSONReq([]tRes{{attrs: many, scopes: []tScope{{recs: []tRec{{body: strBody("x")}}}}}}), "Content-Type", "application/json", "X-Scope-OrgID", "p3")
	if code != 400 || !strings.Contains(string(b), `labels, more than the limit of 15; nothing was stored"}`) {
		t.Errorf("18 labels: %d %s", code, b)
	}
	if got := e.otlpRead("p3", `{service_name=~".+"}`); len(got) != 0 {
		t.Errorf("refused pushes stored %q", got)
	}
	if _, m := e.get("/metrics"); !strings.Contains(m, `hay_rejected_total{reason="bad_timestamp"} 2`) ||
		!strings.Contains(m, `hay_rejected_total{reason="too_old"} 1`) || !strings.Contains(m, `hay_rejected_total{reason="too_many_labels"} 1`) ||
		!strings.Contains(m, `hay_ingested_lines_total 4`) || !strings.Contains(m, `hay_push_duration_seconds_count{format="otlp"} 4`) {
		t.Errorf("metrics:\n%s", grepLines(m, "hay_rejected_total", "hay_ingested_lines", `format="otlp"`))
	}
}

func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestOTLPMalformed: bodies that cannot be read are refused whole, in
// the request's encoding, and store nothing.
func TestOTLPMalformed(t *testing.T) {
	e := newEnv(t, nil)
	good := otlpProtoReq(otlpSample())
	deep := tStr("leaf")
	for range otlpMaxDepth + 1 {
		deep = tArr(deep)
	}
	deepReq := []tRes{{scopes: []tScope{{recs: []tRec{{body: &deep}}}}}}
	for _, c := range []struct {
		name, ct, ce string
		body         []byte
		code         int
		msg          string // a part of the message
	}{
		{"truncated protobuf", "application/x-protobuf", "", good[:len(good)-20], 400, "malformed OTLP protobuf logs request"},
		{"wrong wire type", "application/x-protobuf", "", pbVarint(1, 5), 400, "resource_logs 0: wrong wire type 0"},
		{"bad time wire type", "application/x-protobuf", "", pbLen(1, pbLen(2, pbLen(2, pbVarint(1, 5)))), 400, "log record 0: field 1: wrong wire type 0"},
		{"too deep, protobuf", "application/x-protobuf", "", otlpProtoReq(deepReq), 400, "values nested deeper than 128"},
		{"too deep, JSON", "application/json", "", otlpJSONReq(deepReq), 400, "values nested deeper than 128"},
		{"JSON sent as protobuf", "application/x-protobuf", "", otlpJSONReq(otlpSample()), 400, "malformed OTLP protobuf"},
		{"protobuf sent as JSON", "application/json", "", good, 400, "invalid JSON"},
		{"JSON array", "application/json", "", []byte(`[]`), 400, "invalid JSON"},
		{"JSON trailing data", "application/json", "", []byte(`{} {}`), 400, "data after the top-level object"},
		{"JSON bad time", "application/json", "", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"-1"}]}]}]}`), 400, "not an unsigned 64-bit integer"},
		{"JSON fractional time", "application/json", "", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":1.5}]}]}]}`), 400, "not an unsigned 64-bit integer"},
		{"JSON two values", "application/json", "", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"a","intValue":"1"}}]}]}]}`), 400, "more than one value"},
		{"JSON bad base64", "application/json", "", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"bytesValue":"!!"}}]}]}]}`), 400, "is not base64"},
		{"JSON bad double", "application/json", "", []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"doubleValue":"inf"}}]}]}]}`), 400, "is not a double"},
		{"bad gzip", "application/json", "gzip", []byte("not gzip"), 400, "gzip body"},
		{"unknown encoding", "application/json", "br", otlpJSONReq(otlpSample()), 415, "unsupported Content-Encoding"},
		{"no Content-Type", "", "", good, 415, "unsupported Content-Type"},
		{"text/plain", "text/plain", "", good, 415, "unsupported Content-Type"},
	} {
		hdr := []string{"Content-Type", c.ct, "X-Scope-OrgID", "bad"}
		if c.ce != "" {
			hdr = append(hdr, "Content-Encoding", c.ce)
		}
		code, ct, b := e.otlpPost(c.body, hdr...)
		var msg string
		switch {
		case c.code == 415 && c.ct != "application/json" && c.ct != "application/x-protobuf":
			var v struct{ Message string }
			json.Unmarshal(b, &v)
			msg = v.Message
		case c.ct == "application/json":
			var v map[string]string
			if err := json.Unmarshal(b, &v); err != nil || len(v) != 1 || ct != "application/json" {
				t.Errorf("%s: not a JSON Status: %q %s", c.name, ct, b)
			}
			msg = v["message"]
		default:
			if ct != "application/x-protobuf" {
				t.Errorf("%s: Content-Type %q", c.name, ct)
			}
			msg = decodeStatusProto(t, b)
		}
		if code != c.code || !strings.Contains(msg, c.msg) || (c.code == 400 && !strings.HasSuffix(msg, "; nothing was stored")) {
			t.Errorf("%s: %d %q, want %d and %q", c.name, code, msg, c.code, c.msg)
		}
	}
	// The deepest nesting allowed is stored.
	ok := tStr("leaf")
	for range otlpMaxDepth - 1 {
		ok = tArr(ok)
	}
	okReq := []tRes{{attrs: []tkv{kvS("service.name", "deep")}, scopes: []tScope{{recs: []tRec{{time: ns(time.Second), body: &ok}}}}}}
	for _, ct := range []string{"application/x-protobuf", "application/json"} {
		body := otlpProtoReq(okReq)
		if ct == "application/json" {
			body = otlpJSONReq(okReq)
		}
		if code, _, b := e.otlpPost(body, "Content-Type", ct, "X-Scope-OrgID", "deep"); code != 200 {
			t.Errorf("nesting %d, %s: %d %q", otlpMaxDepth-1, ct, code, b)
		}
	}
	line := fmt.Sprintf("service_name=deep %d %s\"leaf\"%s", base-1e9, strings.Repeat("[", otlpMaxDepth-1), strings.Repeat("]", otlpMaxDepth-1))
	wantLines(t, "deepest nesting", e.otlpRead("deep", `{service_name="deep"}`), []string{line, line})
	if code, _ := e.get("/otlp/v1/logs"); code != 405 {
		t.Errorf("GET: %d", code)
	}
	if got := e.otlpRead("bad", `{service_name=~".+"}`); len(got) != 0 {
		t.Errorf("malformed pushes stored %q", got)
	}
}

// TestOTLPTenantsAndAuth: the OTLP endpoint has the tenant and auth
// handling of /loki/api/v1/push.
func TestOTLPTenantsAndAuth(t *testing.T) {
	auth, err := ParseAuth(strings.NewReader("token any-tenant\nbasic otel pw team-a\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Auth = auth })
	body := func(line string) []byte {
		return otlpProtoReq([]tRes{{attrs: []tkv{kvS("service.name", "t")}, scopes: []tScope{{recs: []tRec{{time: ns(time.Second), body: strBody(line)}}}}}})
	}
	pb := "application/x-protobuf"
	if code, _, _ := e.otlpPost(body("x"), "Content-Type", pb); code != 401 {
		t.Errorf("no credentials: %d", code)
	}
	basic, _ := httpNewRequest("otel", "pw")
	if code, _, b := e.otlpPost(body("for a"), "Content-Type", pb, "Authorization", basic); code != 200 {
		t.Errorf("bound credentials: %d %s", code, b)
	}
	if code, _, _ := e.otlpPost(body("x"), "Content-Type", pb, "Authorization", basic, "X-Scope-OrgID", "team-b"); code != 403 {
		t.Errorf("bound credentials, other tenant: %d", code)
	}
	if code, _, b := e.otlpPost(body("for b"), "Content-Type", pb, "Authorization", "Bearer any-tenant", "X-Scope-OrgID", "team-b"); code != 200 {
		t.Errorf("token, team-b: %d %s", code, b)
	}
	if code, _, _ := e.otlpPost(body("x"), "Content-Type", pb, "Authorization", "Bearer any-tenant", "X-Scope-OrgID", "a/b"); code != 400 {
		t.Errorf("bad tenant: %d", code)
	}
	for tenant, want := range map[string]string{"team-a": "for a", "team-b": "for b", DefaultTenant: ""} {
		code, body := e.get(fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d", q(`{service_name="t"}`), base-3600e9, base+1),
			"X-Scope-OrgID", tenant, "Authorization", "Bearer any-tenant")
		n := strings.Count(body, `"values"`)
		if code != 200 || want == "" && n != 0 || want != "" && (n != 1 || !strings.Contains(body, `"`+want+`"`)) {
			t.Errorf("tenant %s: %d %s", tenant, code, body)
		}
	}
}

// otlpProtocGolden is an ExportLogsServiceRequest encoded by protoc
// 3.21.12 (--encode, from a text-format message) against the published
// opentelemetry-proto definitions (an older revision, whose
// instrumentation_library_logs has ScopeLogs' field number 2, and with
// severity, name, flags, trace and span ids, dropped counts and schema
// URLs set), as an encoder other than this package's tests wrote it.
const otlpProtocGolden = "" +
	"0a90020a550a1a0a0c736572766963652e6e616d65120a0a08636865636b6f75740a220a13736572766963652e696e73" +
	"74616e63652e6964120b18d6ffffffffffffffff010a110a09686f73742e6e616d6512040a026831100212b3010a080a" +
	"036c6962120131125a09001c1ee2fb9c971710111a054552524f52220265762a100a0e7061796d656e74206661696c65" +
	"64320d0a07757365722e696412021807380145010000004a105b8efff798038103d269b633813fc60c52085b8efff798" +
	"038103123b2a30322e0a070a0162120218010a0e0a0161120921000000000000f83f0a130a0163120e2a0c0a0210010a" +
	"043a0200010a005900e6b81dfc9c9717120b2a092150efe2d6e41a4b441a01731a01720a390a190a170a0e636f6e7461" +
	"696e65722e6e616d6512050a03776562121c121a0900368ffafd9c971710092a0d0a0b6c696e65310a6c696e6532"

func TestOTLPProtocGolden(t *testing.T) {
	b, err := hex.DecodeString(otlpProtocGolden)
	if err != nil {
		t.Fatal(err)
	}
	res, err := decodeOTLPProto(b)
	if err != nil {
		t.Fatal(err)
	}
	rj := new(pushRejects)
	var got []string
	for _, s := range otlpStreams(res, base, -1, rj) {
		var ls []string
		for k, v := range s.lmap {
			ls = append(ls, k+"="+v)
		}
		slices.Sort(ls)
		for _, e := range s.entries {
			got = append(got, fmt.Sprintf("%s %d %s", strings.Join(ls, ","), e.Time, e.Line))
		}
	}
	wantLines(t, "protoc-encoded request", got, []string{
		"service_instance_id=-42,service_name=checkout 1699999990000000000 payment failed",
		`service_instance_id=-42,service_name=checkout 1699999991000000000 {"a":1.5,"b":1,"c":[true,"AAE=",null]}`,
		"service_instance_id=-42,service_name=checkout 1700000000000000000 1e+21",
		"container_name=web,service_name=unknown_service 1699999999000000000 line1\nline2",
	})
	if rj.entries != 0 {
		t.Errorf("refused %d", rj.entries)
	}
}

// ---- fuzzing ----

// encodeOTLP encodes decoded resources back to protobuf (one scope a
// resource), for the round-trip checks of the fuzz targets.
func encodeOTLP(res []otlpResource) []byte {
	val := otlpValueProto
	kv := func(a otlpKV) []byte { return append(pbLen(1, []byte(a.key)), pbLen(2, val(a.val))...) }
	kvs := func(f int, kvs []otlpKV) (b []byte) {
		for _, a := range kvs {
			b = append(b, pbLen(f, kv(a))...)
		}
		return b
	}
	var out []byte
	for _, r := range res {
		rl := pbLen(1, kvs(1, r.attrs.list()))
		for _, sc := range r.scopes {
			scope := append(pbLen(1, sc.name), pbLen(2, sc.version)...)
			scope = append(scope, kvs(3, sc.attrs.list())...)
			scope = append(scope, pbVarint(4, sc.dropped)...)
			sl := pbLen(1, scope)
			for _, rec := range sc.records {
				var lr []byte
				if rec.time != 0 {
					lr = append(lr, pbFixed64(1, rec.time)...)
				}
				if rec.observed != 0 {
					lr = append(lr, pbFixed64(11, rec.observed)...)
				}
				if rec.body.kind != otlpEmpty {
					lr = append(lr, pbLen(5, val(rec.body))...)
				}
				lr = append(lr, pbVarint(2, uint64(rec.sevNum))...)
				if rec.sevText != nil {
					lr = append(lr, pbLen(3, rec.sevText)...)
				}
				lr = append(lr, kvs(6, rec.attrs.list())...)
				lr = append(lr, pbVarint(7, rec.dropped)...)
				lr = append(lr, pbFixed32(8, uint32(rec.flags))...)
				if rec.traceID != nil {
					lr = append(lr, pbLen(9, rec.traceID)...)
				}
				if rec.spanID != nil {
					lr = append(lr, pbLen(10, rec.spanID)...)
				}
				if rec.eventName != nil {
					lr = append(lr, pbLen(12, rec.eventName)...)
				}
				sl = append(sl, pbLen(2, lr)...)
			}
			rl = append(rl, pbLen(2, sl)...)
		}
		out = append(out, pbLen(1, rl)...)
	}
	return out
}

// otlpCheckDecoded is what the fuzz targets check of an accepted body:
// it re-encodes to a request that decodes to the same, and maps to
// streams without panicking, one entry a record (all times fit here).
func otlpCheckDecoded(t *testing.T, res []otlpResource) {
	enc := encodeOTLP(res)
	again, err := decodeOTLPProto(enc)
	if err != nil {
		t.Fatalf("re-encoded request does not decode: %v", err)
	}
	if enc2 := encodeOTLP(again); !bytes.Equal(enc, enc2) {
		t.Fatalf("round trip differs:\n%x\n%x", enc, enc2)
	}
	// Bodies and attribute values render as encoding/json marshals
	// their plain Go form (renderOracle).
	check := func(v otlpValue) {
		if v.kind == otlpTooLarge {
			return
		}
		if got, want := v.String(), renderOracle(v); got != want {
			t.Fatalf("rendered %q, encoding/json %q", got, want)
		}
	}
	for _, r := range res {
		for _, kv := range r.attrs.list() {
			check(kv.val)
		}
		for _, sc := range r.scopes {
			for _, kv := range sc.attrs.list() {
				check(kv.val)
			}
			for _, rec := range sc.records {
				check(rec.body)
				for _, kv := range rec.attrs.list() {
					check(kv.val)
				}
			}
		}
	}
	rj := new(pushRejects)
	streams := otlpStreams(res, 42, -1, rj)
	n, m := 0, 0
	for _, r := range res {
		n += r.nrecords()
	}
	for _, s := range streams {
		m += len(s.entries)
		checkDecodedMeta(t, s)
		if s.lmap["service_name"] == "" {
			t.Fatal("a stream without service_name")
		}
		for k := range s.lmap {
			if !validLabelName(k) {
				t.Fatalf("invalid label name %q", k)
			}
		}
	}
	if m+rj.entries != n {
		t.Fatalf("%d records became %d entries and %d refusals", n, m, rj.entries)
	}
}

func FuzzOTLPProto(f *testing.F) {
	f.Add(otlpProtoReq(otlpSample()))
	f.Add(otlpProtoReq(nil))
	f.Add(pbLen(1, pbLen(2, pbLen(2, pbLen(5, pbLen(6, pbLen(1, pbLen(2, pbLen(5, nil)))))))))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := decodeOTLPProto(b)
		if err != nil {
			return
		}
		otlpCheckDecoded(t, res)
	})
}

func FuzzOTLPJSON(f *testing.F) {
	f.Add(otlpJSONReq(otlpSample()))
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":1e3,"body":{"doubleValue":"NaN"}}]}]}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := decodeOTLPJSON(b)
		otlpJSONCheckOracle(t, b, res, err)
		if err != nil {
			return
		}
		otlpCheckDecoded(t, res)
	})
}

// BenchmarkOTLPDecode decodes and maps a request of 1000 records of
// ~100-byte lines (with severities, attributes and trace ids, as SDKs
// send them) in each encoding.
func BenchmarkOTLPDecode(b *testing.B) {
	tid := bytes.Repeat([]byte{0xab}, 16)
	var recs []tRec
	for i := range 1000 {
		recs = append(recs, tRec{time: ns(time.Duration(i) * time.Millisecond), sev: "INFO", sevNum: 9, traceID: tid,
			attrs: []tkv{kvS("http.route", "/api/v1/items"), {"http.status_code", tInt(200)}},
			body:  strBody(fmt.Sprintf("request %06d handled in 12.5ms method=GET path=/api/v1/items user=alice status=200 bytes=5120", i))})
	}
	res := []tRes{{attrs: []tkv{kvS("service.name", "api"), kvS("k8s.namespace.name", "prod"), kvS("host.name", "h1")}, scopes: []tScope{{name: "lib", recs: recs}}}}
	for _, c := range []struct {
		name   string
		body   []byte
		decode func([]byte) ([]otlpResource, error)
	}{{"protobuf", otlpProtoReq(res), decodeOTLPProto}, {"json", otlpJSONReq(res), decodeOTLPJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := c.decode(c.body)
				if err != nil {
					b.Fatal(err)
				}
				if s := otlpStreams(r, base, -1, new(pushRejects)); len(s[0].entries) != 1000 {
					b.Fatal(len(s[0].entries))
				}
			}
		})
	}
}
