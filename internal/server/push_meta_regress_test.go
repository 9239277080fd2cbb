package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"haystack/internal/attrs"
)

// Regression tests of review 9's ingest findings (F1, F2, F4, F5, F7):
// each failed before the fix.

// TestMetadataCollisionKeepsLine (F2): a name given twice with different
// values (after normalization; an OTLP record attribute against the
// record's own fields, its resource's or its scope's attributes) never
// costs the line: the later pair wins in Loki's order (record attributes,
// record fields, resource attributes, scope attributes and fields), the
// collision is counted, and a protobuf metadata value that is not UTF-8
// is kept as its bytes.
func TestMetadataCollisionKeepsLine(t *testing.T) {
	e := newEnv(t, nil)
	rec := func(d time.Duration, line string, a ...tkv) tRec {
		return tRec{time: ns(d), body: strBody(line), attrs: a}
	}
	withTrace := rec(2*time.Second, "trace_id attribute", kvS("trace_id", "0102030405060708090A0B0C0D0E0F10"))
	withTrace.traceID = []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	req := []tRes{{attrs: []tkv{kvS("service.name", "a"), kvS("host.id", "h-resource"), kvS("zone", "r")},
		scopes: []tScope{{name: "lib", attrs: []tkv{kvS("zone", "s")}, recs: []tRec{
			rec(1*time.Second, "host.id twice", kvS("host.id", "h-record")),
			withTrace,
			rec(3*time.Second, "http.method and http_method", kvS("http.method", "GET"), kvS("http_method", "get")),
			rec(4*time.Second, "scope_name attribute", kvS("scope_name", "mine")),
			rec(5*time.Second, "no collision"),
		}}}}}
	for _, enc := range []struct{ tenant, ct string }{{"p", "application/x-protobuf"}, {"j", "application/json"}} {
		body := otlpProtoReq(req)
		if enc.ct == "application/json" {
			body = otlpJSONReq(req)
		}
		before := metricValue(t, e, "hay_structured_metadata_collisions_total", "", "")
		code, _, resp := e.otlpPost(body, "Content-Type", enc.ct, "X-Scope-OrgID", enc.tenant)
		if code != 200 || (enc.ct == "application/json" && string(resp) != "{}") || (enc.ct != "application/json" && len(resp) != 0) {
			t.Fatalf("%s: %d %q", enc.tenant, code, resp)
		}
		l := `{service_name="a"}`
		wantStored(t, enc.tenant, e, enc.tenant, sorted(
			// Each record: its resource's host_id and zone, its scope's
			// zone and scope_name, which come later.
			fmt.Sprintf(`%s %d "host.id twice" | host_id="h-resource", scope_name="lib", zone="s"`, l, ns(1*time.Second)),
			fmt.Sprintf(`%s %d "trace_id attribute" | host_id="h-resource", scope_name="lib", trace_id="0102030405060708090a0b0c0d0e0f10", zone="s"`, l, ns(2*time.Second)),
			fmt.Sprintf(`%s %d "http.method and http_method" | host_id="h-resource", http_method="get", scope_name="lib", zone="s"`, l, ns(3*time.Second)),
			fmt.Sprintf(`%s %d "scope_name attribute" | host_id="h-resource", scope_name="lib", zone="s"`, l, ns(4*time.Second)),
			fmt.Sprintf(`%s %d "no collision" | host_id="h-resource", scope_name="lib", zone="s"`, l, ns(5*time.Second)),
		))
		// zone (resource, scope) in all 5; host_id, trace_id,
		// http_method, scope_name once each.
		if got := metricValue(t, e, "hay_structured_metadata_collisions_total", "", "") - before; got != 9 {
			t.Errorf("%s: collisions metric went up by %v, want 9", enc.tenant, got)
		}
	}

	// Loki push JSON and protobuf: names equal after normalization, a
	// JSON object's duplicate key, a value that is not UTF-8.
	ts := base
	push := fmt.Sprintf(`{"streams":[{"stream":{"app":"x"},"values":[["%d","a.b and a_b",{"a.b":"1","a_b":"2"}],["%d","dup",{"k":"1","k":"2"}],["%d","fine",{"a":"1"}]]}]}`, ts, ts+1, ts+2)
	e.mustPush("/loki/api/v1/push", []byte(push), "Content-Type", "application/json", "X-Scope-OrgID", "lj")
	wantStored(t, "lj", e, "lj", []string{
		fmt.Sprintf(`{app="x", service_name="x"} %d "a.b and a_b" | a_b="2"`, ts),
		fmt.Sprintf(`{app="x", service_name="x"} %d "dup" | k="2"`, ts+1),
		fmt.Sprintf(`{app="x", service_name="x"} %d "fine" | a="1"`, ts+2),
	})
	pb := protoBody([]PushStream{{Labels: `{app="x"}`, Entries: []PushEntry{{ts, "not utf-8"}, {ts + 1, "b"}},
		Metadata: [][]attrs.Pair{pp("bad", "\xffok", "a.b", "1", "a_b", "2"), pp("x", "1")}}})
	e.mustPush("/loki/api/v1/push", pb, "Content-Type", "application/x-protobuf", "X-Scope-OrgID", "lp")
	wantStored(t, "lp", e, "lp", []string{
		fmt.Sprintf(`{app="x", service_name="x"} %d "not utf-8" | a_b="2", bad="\xffok"`, ts),
		fmt.Sprintf(`{app="x", service_name="x"} %d "b" | x="1"`, ts+1),
	})
}

// TestMetadataNotUTF8Answers: a metadata value kept as bytes that are not
// UTF-8 comes back in every JSON answer as valid JSON, each bad byte as
// U+FFFD (encoding/json's replacement), in the merged labels, the
// categorized structuredMetadata and the native search answer.
func TestMetadataNotUTF8Answers(t *testing.T) {
	e := newEnv(t, nil)
	pb := protoBody([]PushStream{{Labels: `{app="u"}`, Entries: []PushEntry{{base, "line"}},
		Metadata: [][]attrs.Pair{pp("bad", "\xffok")}}})
	e.mustPush("/loki/api/v1/push", pb, "Content-Type", "application/x-protobuf")
	rng := fmt.Sprintf("&start=%d&end=%d", base-int64(time.Hour), base+1)
	for _, c := range []struct {
		path string
		hdr  []string
	}{
		{"/loki/api/v1/query_range?query=" + q(`{app="u"}`) + rng, nil},
		{"/loki/api/v1/query_range?query=" + q(`{app="u"}`) + rng, []string{"X-Loki-Response-Encoding-Flags", "categorize-labels"}},
		{"/api/v1/search?q=" + q(`{app="u"}`) + rng, nil},
	} {
		code, body := e.get(c.path, c.hdr...)
		if code != 200 || !utf8.ValidString(body) {
			t.Errorf("%s %v: %d, valid UTF-8 %v: %q", c.path, c.hdr, code, utf8.ValidString(body), body)
			continue
		}
		var strs []string
		// The native answer is one JSON object a line.
		d := json.NewDecoder(strings.NewReader(body))
		for {
			var v any
			if err := d.Decode(&v); err != nil {
				break
			}
			strs = appendJSONStrings(strs, v)
		}
		if !slices.Contains(strs, "\ufffdok") {
			t.Errorf("%s %v: no string \"\\ufffdok\" in %q", c.path, c.hdr, body)
		}
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

// appendJSONStrings appends every string (keys too) of a decoded JSON
// value.
func appendJSONStrings(dst []string, v any) []string {
	switch v := v.(type) {
	case string:
		dst = append(dst, v)
	case []any:
		for _, e := range v {
			dst = appendJSONStrings(dst, e)
		}
	case map[string]any:
		for k, e := range v {
			dst = appendJSONStrings(append(dst, k), e)
		}
	}
	return dst
}

// TestPushNullMetadata (F7): a null third element of a Loki push JSON
// value is no metadata, as Loki's decoder reads it.
func TestPushNullMetadata(t *testing.T) {
	e := newEnv(t, nil)
	push := fmt.Sprintf(`{"streams":[{"stream":{"app":"n"},"values":[["%d","with null",null],["%d","with null and spaces", null ],["%d","other"]]}]}`, base, base+1, base+2)
	e.mustPush("/loki/api/v1/push", []byte(push), "Content-Type", "application/json")
	wantStored(t, "null", e, "fake", []string{
		fmt.Sprintf(`{app="n", service_name="n"} %d "with null" | `, base),
		fmt.Sprintf(`{app="n", service_name="n"} %d "with null and spaces" | `, base+1),
		fmt.Sprintf(`{app="n", service_name="n"} %d "other" | `, base+2),
	})
}

// TestJSONLMetadataKeys (F4): jsonl's metadata keys match exactly;
// "metadata" is metadata only as an object of strings, and anything else
// under it, or another letter case of either key, is not metadata and
// refuses nothing.
func TestJSONLMetadataKeys(t *testing.T) {
	e := newEnv(t, nil)
	lines := []string{
		`{"labels":{"app":"x"},"ts":1,"line":"l1","Metadata":{"user":{"id":1}}}`,
		`{"labels":{"app":"x"},"ts":2,"line":"l2","metadata":{"user":{"id":1}}}`,
		`{"labels":{"app":"x"},"ts":3,"line":"l3","metadata":"text"}`,
		`{"labels":{"app":"x"},"ts":4,"line":"l4","METADATA":{"a":"1"}}`,
		`{"labels":{"app":"x"},"ts":5,"line":"l5","StructuredMetadata":{"a":1}}`,
		`{"labels":{"app":"x"},"ts":6,"line":"l6","metadata":{"a":"1"}}`,
		`{"labels":{"app":"x"},"ts":7,"line":"l7","structuredMetadata":{"a":"1"},"metadata":{"b":"2"}}`,
		`{"labels":{"app":"x"},"ts":8,"line":"l8","structuredMetadata":{"a":"1"},"metadata":[1]}`,
		`{"labels":{"app":"x"},"ts":9,"line":"l9","\u006detadata":{"c":"3"}}`,
		`{"labels":{"app":"x"},"ts":10,"line":"l10","structuredMetadata":null,"metadata":{"d":"4"}}`,
	}
	e.mustPush("/api/v1/push/jsonl", []byte(strings.Join(lines, "\n")))
	l := `{app="x", service_name="x"}`
	wantStored(t, "jsonl", e, "fake", []string{
		l + ` 1 "l1" | `, l + ` 10 "l10" | d="4"`, l + ` 2 "l2" | `, l + ` 3 "l3" | `, l + ` 4 "l4" | `, l + ` 5 "l5" | `,
		l + ` 6 "l6" | a="1"`, l + ` 7 "l7" | a="1"`, l + ` 8 "l8" | a="1"`, l + ` 9 "l9" | c="3"`,
	})
	// structuredMetadata itself must still be an object of strings.
	code, body := e.do("POST", "/api/v1/push/jsonl", []byte(`{"labels":{"app":"x"},"line":"x","structuredMetadata":{"a":1}}`))
	if code != 400 || !strings.Contains(body, `structured metadata \"a\": value must be a string`) {
		t.Errorf("%d %s", code, body)
	}
}

// TestPushEmptyMetadataValues (F5): pairs with an empty value are
// dropped at push, as Loki's distributor drops them.
func TestPushEmptyMetadataValues(t *testing.T) {
	e := newEnv(t, nil)
	push := fmt.Sprintf(`{"streams":[{"stream":{"app":"a"},"values":[["%d","l",{"k":""}],["%d","m",{"k":"","j":"1"}]]}]}`, base, base+1)
	e.mustPush("/loki/api/v1/push", []byte(push), "Content-Type", "application/json")
	pb := protoBody([]PushStream{{Labels: `{app="b"}`, Entries: []PushEntry{{base, "p"}}, Metadata: [][]attrs.Pair{pp("trace_id", "")}}})
	e.mustPush("/loki/api/v1/push", pb, "Content-Type", "application/x-protobuf")
	e.mustPush("/api/v1/push/jsonl", []byte(fmt.Sprintf(`{"labels":{"app":"c"},"ts":%d,"line":"q","structuredMetadata":{"e":""}}`, base)))
	wantStored(t, "empty", e, "fake", []string{
		fmt.Sprintf(`{app="a", service_name="a"} %d "l" | `, base),
		fmt.Sprintf(`{app="a", service_name="a"} %d "m" | j="1"`, base+1),
		fmt.Sprintf(`{app="b", service_name="b"} %d "p" | `, base),
		fmt.Sprintf(`{app="c", service_name="c"} %d "q" | `, base),
	})
}

// TestOTLPArrayAttributeMemory (F1): an attribute of a million empty
// AnyValues (2 bytes each on the wire) costs a bounded amount of memory
// and refuses only its record (its value renders past attrs' 64 KiB);
// the request's other record is stored.
func TestOTLPArrayAttributeMemory(t *testing.T) {
	e := newEnv(t, nil)
	const n = 1 << 20
	for _, kind := range []int{5, 6} { // ArrayValue{values}, KeyValueList{values}
		arr := bytes.Repeat(pbLen(1, nil), n)                   // n empty AnyValues / KeyValues
		val := pbLen(kind, arr)                                 // AnyValue
		attr := append(pbLen(1, []byte("a")), pbLen(2, val)...) // KeyValue
		lr := append(pbFixed64(1, ns(time.Second)), pbLen(5, pbLen(1, []byte("big")))...)
		lr = append(lr, pbLen(6, attr)...)
		ok := append(pbFixed64(1, ns(2*time.Second)), pbLen(5, pbLen(1, []byte("small")))...)
		rl := append(pbLen(1, pbLen(1, kvS("service.name", "a").proto())), pbLen(2, append(pbLen(2, lr), pbLen(2, ok)...))...)
		body := pbLen(1, rl)
		tenant := fmt.Sprint("k", kind)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		code, _, resp := e.otlpPost(body, "Content-Type", "application/x-protobuf", "X-Scope-OrgID", tenant)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("kind %d: a push of %d bytes allocated %d bytes (%.1fx)", kind, len(body), alloc, float64(alloc)/float64(len(body)))
		if limit := uint64(16 * len(body)); alloc > limit {
			t.Errorf("kind %d: a push of %d bytes allocated %d MB (%.0fx the body), want under %d MB", kind, len(body), alloc>>20, float64(alloc)/float64(len(body)), limit>>20)
		}
		if code != 200 || !bytes.Contains(resp, []byte(`log record 0: structured metadata: attribute "a": structured metadata too large: more than 65536 values`)) {
			t.Errorf("kind %d: %d %q", kind, code, resp)
		}
		wantStored(t, tenant, e, tenant, []string{fmt.Sprintf(`{service_name="a"} %d "small" | `, ns(2*time.Second))})
	}
	if got := metricValue(t, e, "hay_rejected_total", "reason", "structured_metadata_too_large"); got != 2 {
		t.Errorf("structured_metadata_too_large %v, want 2", got)
	}
}

// TestOTLPAttributeRenderLimit (F1): an array attribute within the value
// bound that renders past 64 KiB refuses its record; one just under it
// is stored as rendered.
func TestOTLPAttributeRenderLimit(t *testing.T) {
	e := newEnv(t, nil)
	long := make([]tv, 0, 20000)
	for range 20000 {
		long = append(long, tInt(1)) // "1," each: 40,001 bytes
	}
	longer := append(slices.Clone(long), long...) // 80,001 bytes
	rec := func(d time.Duration, line string, a ...tkv) tRec {
		return tRec{time: ns(d), body: strBody(line), attrs: a}
	}
	req := []tRes{{attrs: []tkv{kvS("service.name", "a")}, scopes: []tScope{{recs: []tRec{
		rec(1*time.Second, "fits", tkv{"arr", tArr(long...)}),
		rec(2*time.Second, "too large", tkv{"arr", tArr(longer...)}),
	}}}}}
	code, _, resp := e.otlpPost(otlpProtoReq(req), "Content-Type", "application/x-protobuf")
	if code != 200 || !bytes.Contains(resp, []byte(`log record 1: structured metadata: attribute "arr": structured metadata too large: its value renders to more than 65536 bytes`)) {
		t.Errorf("%d %q", code, resp)
	}
	want := "[" + strings.TrimSuffix(strings.Repeat("1,", 20000), ",") + "]"
	wantStored(t, "fake", e, "fake", []string{fmt.Sprintf(`{service_name="a"} %d "fits" | arr=%q`, ns(time.Second), want)})
}

// TestOTLPRenderOracle: otlpValue.render against encoding/json's
// marshaling of the value's plain Go form (what String did before), on
// random values: strings with escapes, HTML bytes, invalid UTF-8, U+2028;
// doubles of every magnitude, NaN and infinities inside; bytes; maps with
// repeated keys; nesting. With a limit, render gives up exactly when the
// rendering is longer.
func TestOTLPRenderOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	strs := []string{"", "a", "<>&", "\"\\", "\x00\x01\x1f\x7f", "\b\f\n\r\t", "é", "\xff", "a\xc3", "\u2028\u2029", "\U0001F600", "\ufffd"}
	var gen func(depth int) otlpValue
	gen = func(depth int) otlpValue {
		k := r.IntN(8)
		if depth > 3 && k >= 6 {
			k = 1
		}
		switch k {
		case 0:
			return otlpValue{}
		case 1:
			return otlpValue{kind: otlpString, bytes: []byte(strs[r.IntN(len(strs))] + strs[r.IntN(len(strs))])}
		case 2:
			return otlpValue{kind: otlpBool, num: int64(r.IntN(2))}
		case 3:
			return otlpValue{kind: otlpInt, num: r.Int64() - r.Int64()}
		case 4:
			ds := []float64{0, math.Copysign(0, -1), 1e-7, 1e-6, 1e20, 1e21, 123.456, -5e-324, math.MaxFloat64, 0.1}
			d := ds[r.IntN(len(ds))]
			if r.IntN(40) == 0 {
				d = []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[r.IntN(3)]
			} else if r.IntN(2) == 0 {
				d = math.Float64frombits(r.Uint64())
				if math.IsNaN(d) || math.IsInf(d, 0) {
					d = 1
				}
			}
			return otlpValue{kind: otlpDouble, dbl: d}
		case 5:
			var b []byte
			if r.IntN(3) > 0 {
				b = make([]byte, r.IntN(5))
				for i := range b {
					b[i] = byte(r.IntN(256))
				}
			}
			return otlpValue{kind: otlpBytes, bytes: b}
		case 6:
			v := otlpValue{kind: otlpArray}
			for range r.IntN(4) {
				v.arr = append(v.arr, gen(depth+1))
			}
			return v
		default:
			v := otlpValue{kind: otlpMap}
			for range r.IntN(4) {
				v.kvs = append(v.kvs, otlpKV{key: []string{"a", "b", "<", "\xff", ""}[r.IntN(5)], val: gen(depth + 1)})
			}
			return v
		}
	}
	for i := range 20000 {
		v := gen(0)
		want := renderOracle(v)
		got, ok := v.render(-1)
		if !ok || got != want {
			t.Fatalf("value %d %#v:\n got %q (%v)\nwant %q", i, v, got, ok, want)
		}
		if got := v.String(); got != want {
			t.Fatalf("value %d: String %q, want %q", i, got, want)
		}
		limit := r.IntN(len(want) + 2)
		got, ok = v.render(limit)
		if ok != (len(want) <= limit) || ok && got != want {
			t.Fatalf("value %d %#v: render(%d) = %q, %v; full %q", i, v, limit, got, ok, want)
		}
		// The same value decoded from protobuf: arrays and maps kept
		// as their messages (otlpValue.wire).
		w, err := decodeOTLPValue(otlpValueProto(v), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, ok = w.render(limit)
		if ok != (len(want) <= limit) || ok && got != want || w.String() != want {
			t.Fatalf("value %d %#v from protobuf: render(%d) = %q, %v; String %q; want %q", i, v, limit, got, ok, w.String(), want)
		}
		if v.kind != otlpString {
			// (A string body is the line as it is, not rendered.)
			checkText(t, v, limit, want)
			checkText(t, w, limit, want)
			checkText(t, w, -1, want)
		}
	}
}

// renderOracle is how otlpValue.String rendered before review 9's F1:
// json.Marshal of the value's plain Go form.
func renderOracle(v otlpValue) string {
	switch v.kind {
	case otlpString:
		return string(v.bytes)
	case otlpDouble:
		if math.IsNaN(v.dbl) || math.IsInf(v.dbl, 0) {
			return "json: unsupported value: " + fmt.Sprint(v.dbl)
		}
	case otlpEmpty:
		return ""
	case otlpBytes:
		return base64.StdEncoding.EncodeToString(v.bytes)
	}
	b, err := json.Marshal(oracleRaw(v))
	if err != nil {
		return ""
	}
	return string(b)
}

func oracleRaw(v otlpValue) any {
	switch v.kind {
	case otlpString:
		return string(v.bytes)
	case otlpBool:
		return v.num != 0
	case otlpInt:
		return v.num
	case otlpDouble:
		return v.dbl
	case otlpBytes:
		if v.bytes == nil {
			return []byte{}
		}
		return v.bytes
	case otlpArray:
		a := []any{}
		v.eachElem(func(e otlpValue) bool {
			a = append(a, oracleRaw(e))
			return true
		})
		return a
	case otlpMap:
		m := map[string]any{}
		v.eachKV(func(k string, e otlpValue) bool {
			m[k] = oracleRaw(e)
			return true
		})
		return m
	}
	return nil
}
