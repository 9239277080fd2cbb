package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"haystack/internal/attrs"
)

// otlpAllocs pushes body to e as tenant and returns the answer and the
// bytes the process allocated meanwhile.
func otlpAllocs(e *testEnv, body []byte, ctype, tenant string) (int, []byte, uint64) {
	e.t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, _, resp := e.otlpPost(body, "Content-Type", ctype, "X-Scope-OrgID", tenant)
	runtime.ReadMemStats(&after)
	return code, resp, after.TotalAlloc - before.TotalAlloc
}

// otlpOneRecord is a protobuf request of one resource (service.name
// "svc") with one record at ns(time.Second) whose body is the AnyValue
// body and whose attributes are attrs (KeyValue messages).
func otlpOneRecord(body []byte, attrs ...[]byte) []byte {
	lr := pbFixed64(1, ns(time.Second))
	if body != nil {
		lr = append(lr, pbLen(5, body)...)
	}
	for _, a := range attrs {
		lr = append(lr, pbLen(6, a)...)
	}
	rl := append(pbLen(1, pbLen(1, kvS("service.name", "svc").proto())), pbLen(2, pbLen(2, lr))...)
	return pbLen(1, rl)
}

// TestOTLPBodyDecodeBounded (review 9 F1, left by fix 9): an OTLP record
// body that is an array or a map of a million 2-byte AnyValues no longer
// costs ~100 bytes a value before --max-line applies; a body over
// --max-line ends as before (refused naming its whole length, or cut),
// one under it is stored whole, a NaN anywhere still renders empty.
// Before: 66-400x the push in allocations.
func TestOTLPBodyDecodeBounded(t *testing.T) {
	const n = 1 << 20
	empties := bytes.Repeat(pbLen(1, nil), n) // n empty AnyValues (or KeyValues)
	arr := pbLen(5, empties)                  // AnyValue{array_value}
	marker := len(truncMarker)
	render := "[" + strings.Repeat("null,", n-1) + "null]" // 5n+1 bytes
	cases := []struct {
		name     string
		truncate bool
		body     []byte
		code     int
		resp     string   // in the answer
		stored   []string // lines stored
	}{
		{name: "array refused", body: arr, code: 400,
			resp: fmt.Sprintf(`entry 0: line of %d bytes exceeds the limit of 262144; nothing was stored`, 5*n+1)},
		{name: "array cut", truncate: true, body: arr, code: 204,
			stored: []string{render[:262144-marker] + truncMarker}},
		{name: "map of one repeated key", body: pbLen(6, empties), code: 204,
			stored: []string{`{"":null}`}},
		{name: "array with a NaN", body: pbLen(5, append(empties[:len(empties):len(empties)], pbLen(1, pbFixed64(4, math.Float64bits(math.NaN())))...)), code: 204,
			stored: []string{""}},
		{name: "bytes refused", body: pbLen(7, bytes.Repeat([]byte{0xfb, 0xef, 0xbe}, n)), code: 400,
			resp: fmt.Sprintf(`entry 0: line of %d bytes exceeds the limit of 262144; nothing was stored`, 4*n)},
		{name: "bytes cut", truncate: true, body: pbLen(7, bytes.Repeat([]byte{0xfb, 0xef, 0xbe}, n)), code: 204,
			stored: []string{strings.Repeat("+", 262144-marker) + truncMarker}},
		{name: "nested arrays cut", truncate: true, body: pbLen(5, bytes.Repeat(pbLen(1, pbLen(5, pbLen(1, pbLen(1, []byte("<"))))), n/4)), code: 204,
			stored: []string{("[" + strings.Repeat(`["\u003c"],`, n/4))[:262144-marker] + truncMarker}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(cfg *Config) { cfg.TruncateLines = c.truncate })
			req := otlpOneRecord(c.body)
			code, resp, alloc := otlpAllocs(e, req, "application/x-protobuf", "fake")
			t.Logf("a push of %d bytes allocated %d bytes (%.1fx)", len(req), alloc, float64(alloc)/float64(len(req)))
			if limit := uint64(8 * len(req)); alloc > limit {
				t.Errorf("a push of %d bytes allocated %d MB (%.0fx), want under %d MB", len(req), alloc>>20, float64(alloc)/float64(len(req)), limit>>20)
			}
			if code == 200 && len(resp) == 0 {
				code = 204 // (the protobuf success answer is empty)
			}
			if code != c.code || !bytes.Contains(resp, []byte(c.resp)) {
				t.Errorf("answer %d %.300q, want %d with %q", code, resp, c.code, c.resp)
			}
			var want []string
			for _, l := range c.stored {
				want = append(want, fmt.Sprintf(`{service_name="svc"} %d %q | `, ns(time.Second), l))
			}
			wantStored(t, c.name, e, "fake", want)
		})
	}
}

// TestOTLPAttributesDecodeBounded: attributes each within the bound of
// values (65,536) but many of them in one push cost ~100 bytes a value
// before (the bound is an attribute's); now nothing a value. Their
// records are refused as before.
func TestOTLPAttributesDecodeBounded(t *testing.T) {
	e := newEnv(t, nil)
	const vals = otlpAttrMaxValues // within the bound: rendered, 5x over 64 KiB
	attr := append(pbLen(1, []byte("a")), pbLen(2, pbLen(5, bytes.Repeat(pbLen(1, nil), vals)))...)
	var lr []byte
	for range 16 {
		lr = append(lr, pbLen(6, attr)...)
	}
	var recs []byte
	for i := range 2 {
		r := append(pbFixed64(1, ns(time.Duration(i+1)*time.Second)), pbLen(5, pbLen(1, []byte("x")))...)
		recs = append(recs, pbLen(2, append(r, lr...))...)
	}
	ok := append(pbFixed64(1, ns(3*time.Second)), pbLen(5, pbLen(1, []byte("small")))...)
	recs = append(recs, pbLen(2, ok)...)
	req := pbLen(1, append(pbLen(1, pbLen(1, kvS("service.name", "svc").proto())), pbLen(2, recs)...))
	code, resp, alloc := otlpAllocs(e, req, "application/x-protobuf", "fake")
	t.Logf("a push of %d bytes allocated %d bytes (%.1fx)", len(req), alloc, float64(alloc)/float64(len(req)))
	if limit := uint64(8 * len(req)); alloc > limit {
		t.Errorf("a push of %d bytes allocated %d MB (%.0fx), want under %d MB", len(req), alloc>>20, float64(alloc)/float64(len(req)), limit>>20)
	}
	if code != 200 || !bytes.Contains(resp, []byte(`log record 0: structured metadata: attribute "a": structured metadata too large: its value renders to more than 65536 bytes`)) ||
		!bytes.Contains(resp, []byte(`log record 1: structured metadata: attribute "a"`)) {
		t.Errorf("answer %d %q", code, resp)
	}
	wantStored(t, "stored", e, "fake", []string{fmt.Sprintf(`{service_name="svc"} %d "small" | `, ns(3*time.Second))})
}

// TestOTLPWireRender: values decoded from protobuf (arrays and maps kept
// as their messages) render as the same values built in memory, and as
// encoding/json marshals them; text's prefix and length are the
// rendering's.
func TestOTLPWireRender(t *testing.T) {
	vals := []tv{
		tArr(), tMap(),
		tArr(tStr("a<b"), tInt(-3), tDbl(1e21), tBool(true), tBytes([]byte{0, 1, 2, 3}), tArr(tArr()), tMap(kvS("z", "1"), kvS("a", "2"), kvS("z", "3"))),
		tMap(tkv{"k", tArr(tDbl(math.Inf(1)))}),
		tMap(tkv{"\xff", tStr("\u2028\x01\xff")}, tkv{"", tMap()}, tkv{"b", tBytes(nil)}),
	}
	for _, v := range vals {
		pv, err := decodeOTLPValue(v.proto(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The same value, arrays and maps decoded.
		var mem func(w otlpValue) otlpValue
		mem = func(w otlpValue) otlpValue {
			switch w.kind {
			case otlpArray:
				m := otlpValue{kind: otlpArray, arr: []otlpValue{}}
				w.eachElem(func(e otlpValue) bool { m.arr = append(m.arr, mem(e)); return true })
				return m
			case otlpMap:
				m := otlpValue{kind: otlpMap, kvs: []otlpKV{}}
				w.eachKV(func(k string, e otlpValue) bool { m.kvs = append(m.kvs, otlpKV{k, mem(e)}); return true })
				return m
			}
			return w
		}
		mv := mem(pv)
		want := renderOracle(mv)
		if pv.enc != otlpWire || mv.enc != otlpDecoded {
			t.Fatalf("%s: enc %v, decoded %v", want, pv.enc, mv.enc)
		}
		for _, x := range []otlpValue{pv, mv} {
			if got := x.String(); got != want {
				t.Errorf("String %q, want %q", got, want)
			}
			for limit := -1; limit <= len(want)+1; limit++ {
				p, n := x.text(limit)
				keep := len(want)
				if limit >= 0 {
					keep = min(keep, limit+1)
				}
				if string(p) != want[:keep] || n != len(want) {
					t.Errorf("text(%d) = %q, %d; want %q, %d", limit, p, n, want[:keep], len(want))
				}
			}
		}
	}
	// Quoting against encoding/json (HTML escapes, controls, bad UTF-8).
	for _, s := range []string{"", "a", "<>&\"\\", "\x00\x1f\x7f\b\f\n\r\t", "é\xff\xc3", "\u2028x\u2029", "\U0001F600\ufffd"} {
		want, _ := json.Marshal(s)
		if got := appendJSONString([]byte("x"), []byte(s)); string(got) != "x"+string(want) {
			t.Errorf("appendJSONString(%q) = %s, want %s", s, got[1:], want)
		}
	}
}

// otlpValueProto encodes v as an AnyValue message.
func otlpValueProto(v otlpValue) []byte {
	switch v.kind {
	case otlpString:
		return pbLen(1, v.bytes)
	case otlpBool:
		return pbVarint(2, uint64(v.num))
	case otlpInt:
		return pbVarint(3, uint64(v.num))
	case otlpDouble:
		return pbFixed64(4, math.Float64bits(v.dbl))
	case otlpBytes:
		return pbLen(7, v.bytes)
	case otlpArray:
		var a []byte
		v.eachElem(func(e otlpValue) bool {
			a = append(a, pbLen(1, otlpValueProto(e))...)
			return true
		})
		return pbLen(5, a)
	case otlpMap:
		var a []byte
		v.eachKV(func(k string, e otlpValue) bool {
			a = append(a, pbLen(1, append(pbLen(1, []byte(k)), pbLen(2, otlpValueProto(e))...))...)
			return true
		})
		return pbLen(6, a)
	}
	return nil
}

// checkText checks v.text against the whole rendering want.
func checkText(t *testing.T, v otlpValue, limit int, want string) {
	t.Helper()
	p, n := v.text(limit)
	keep := len(want)
	if limit >= 0 {
		keep = min(keep, limit+1)
	}
	if string(p) != want[:keep] || n != len(want) {
		t.Fatalf("%#v: text(%d) = %q, %d; want %q, %d", v, limit, p, n, want[:keep], len(want))
	}
}

// TestOTLPJSONBodyDecodeBounded: OTLP/JSON bodies of a million tiny
// values ("{}"), refused or cut as before (the same answer), allocate
// about what a string body of the same size does (8x: encoding/json's
// buffers); before, 290x.
func TestOTLPJSONBodyDecodeBounded(t *testing.T) {
	const n = 1 << 19
	req := func(body string) []byte {
		return []byte(`{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},"scopeLogs":[{"logRecords":[{"timeUnixNano":"` +
			fmt.Sprint(ns(time.Second)) + `","body":` + body + `}]}]}]}`)
	}
	list := func(el string) string { return strings.TrimSuffix(strings.Repeat(el+",", n), ",") }
	marker := len(truncMarker)
	cases := []struct {
		name     string
		truncate bool
		body     string
		code     int
		resp     string
		stored   []string
	}{
		{name: "array refused", body: `{"arrayValue":{"values":[` + list(`{}`) + `]}}`, code: 400,
			resp: fmt.Sprintf(`entry 0: line of %d bytes exceeds the limit of 262144; nothing was stored`, 5*n+1)},
		{name: "array of arrays cut", truncate: true, body: `{"arrayValue":{"values":[` + list(` {"arrayValue":{}}`) + `]}}`, code: 200,
			stored: []string{("[" + strings.Repeat("[],", n))[:262144-marker] + truncMarker}},
		{name: "map of one key", body: `{"kvlistValue":{"values":[` + list(`{"key":"k"}`) + `]}}`, code: 200,
			stored: []string{`{"k":null}`}},
		{name: "array with a NaN", body: `{"arrayValue":{"values":[` + list(`{"intValue":"7"}`) + `,{"doubleValue":"NaN"}]}}`, code: 200,
			stored: []string{""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(cfg *Config) { cfg.TruncateLines = c.truncate })
			b := req(c.body)
			code, resp, alloc := otlpAllocs(e, b, "application/json", "fake")
			t.Logf("a push of %d bytes allocated %d bytes (%.1fx)", len(b), alloc, float64(alloc)/float64(len(b)))
			if limit := uint64(12 * len(b)); alloc > limit {
				t.Errorf("a push of %d bytes allocated %d MB (%.0fx), want under %d MB", len(b), alloc>>20, float64(alloc)/float64(len(b)), limit>>20)
			}
			if code != c.code || !bytes.Contains(resp, []byte(c.resp)) {
				t.Errorf("answer %d %.300q, want %d with %q", code, resp, c.code, c.resp)
			}
			var want []string
			for _, l := range c.stored {
				want = append(want, fmt.Sprintf(`{service_name="svc"} %d %q | `, ns(time.Second), l))
			}
			wantStored(t, c.name, e, "fake", want)
		})
	}
}

// otlpJSONAnyOracle and otlpJSONKVOracle are how OTLP/JSON values were
// decoded before: encoding/json all the way down.
type otlpJSONAnyOracle struct {
	StringValue *string        `json:"stringValue"`
	BoolValue   *bool          `json:"boolValue"`
	IntValue    *otlpJSONInt   `json:"intValue"`
	DoubleValue *otlpJSONFloat `json:"doubleValue"`
	BytesValue  *otlpJSONBytes `json:"bytesValue"`
	ArrayValue  *struct {
		Values []otlpJSONAnyOracle `json:"values"`
	} `json:"arrayValue"`
	KvlistValue *struct {
		Values []otlpJSONKVOracle `json:"values"`
	} `json:"kvlistValue"`
}

type otlpJSONKVOracle struct {
	Key   string             `json:"key"`
	Value *otlpJSONAnyOracle `json:"value"`
}

// decode is the decoder before (values in arr and kvs).
func (a *otlpJSONAnyOracle) decode(depth int) (otlpValue, error) {
	var v otlpValue
	if depth >= otlpMaxDepth {
		return v, fmt.Errorf("values nested deeper than %d", otlpMaxDepth)
	}
	n := 0
	if a.StringValue != nil {
		n++
		v = otlpValue{kind: otlpString, bytes: []byte(*a.StringValue)}
	}
	if a.BoolValue != nil {
		n++
		v = otlpValue{kind: otlpBool}
		if *a.BoolValue {
			v.num = 1
		}
	}
	if a.IntValue != nil {
		n++
		v = otlpValue{kind: otlpInt, num: int64(*a.IntValue)}
	}
	if a.DoubleValue != nil {
		n++
		v = otlpValue{kind: otlpDouble, dbl: float64(*a.DoubleValue)}
	}
	if a.BytesValue != nil {
		n++
		v = otlpValue{kind: otlpBytes, bytes: []byte(*a.BytesValue)}
	}
	if a.ArrayValue != nil {
		n++
		v = otlpValue{kind: otlpArray, arr: []otlpValue{}}
		for i := range a.ArrayValue.Values {
			e, err := a.ArrayValue.Values[i].decode(depth + 1)
			if err != nil {
				return v, err
			}
			v.arr = append(v.arr, e)
		}
	}
	if a.KvlistValue != nil {
		n++
		v = otlpValue{kind: otlpMap, kvs: []otlpKV{}}
		for _, e := range a.KvlistValue.Values {
			kv := otlpKV{key: e.Key}
			if e.Value != nil {
				val, err := e.Value.decode(depth + 1)
				if err != nil {
					return v, err
				}
				kv.val = val
			}
			v.kvs = append(v.kvs, kv)
		}
	}
	if n > 1 {
		return v, fmt.Errorf("more than one value")
	}
	return v, nil
}

// TestOTLPJSONValuesOracle: random OTLP/JSON AnyValues, with key case
// variants, escapes, unknown keys, nulls, repeated keys, numbers as
// strings, bytes, bad UTF-8, deep nesting, decode (the plain ones
// without encoding/json: jsonAnyFast) as encoding/json decoded them
// before: the same refusals and the same renderings.
func TestOTLPJSONValuesOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	var gen func(depth int) string
	var genKV func(depth int) string
	list := func(depth int, el func(int) string) string {
		var parts []string
		for range r.IntN(4) {
			parts = append(parts, el(depth+1))
		}
		return pick("", " ", "\n") + "[" + strings.Join(parts, pick(",", " , ")) + "]"
	}
	gen = func(depth int) string {
		if depth > 6 || r.IntN(12) == 0 {
			return pick(`null`, `{}`, ` { } `)
		}
		var members []string
		// Members of different fields: a field given twice, the first
		// time with a value of the wrong type, refused the request
		// before and no longer does (the later value is decoded).
		for _, f := range r.Perm(8)[:1+r.IntN(2)] {
			var k, v string
			switch f {
			case 0:
				k, v = pick("stringValue", "StringValue", "string\\u0056alue", "\u017ftringValue"), pick(`"a"`, `"\u00e9<"`, `"\ud800x"`, `"a\"b"`, "\"\xff\"", `null`, `1`, `""`)
			case 1:
				k, v = pick("boolValue", "BOOLVALUE"), pick(`true`, `false`, `"true"`, `null`)
			case 2:
				k, v = "intValue", pick(`1`, `"-2"`, `1.5e3`, `"x"`, `1.5`, `null`, `{}`)
			case 3:
				k, v = "doubleValue", pick(`1.5`, `"NaN"`, `"Infinity"`, `1e400`, `"-0"`, `null`, `"x"`)
			case 4:
				k, v = "bytesValue", pick(`"AAE="`, `"_-8"`, `"!"`, `null`)
			case 5:
				k = pick("arrayValue", "arrayvalue", "arrayValue", "arrayValue")
				v = pick(`null`, `{}`, `{"values":null}`, `{"values":`+list(depth, gen)+`}`, `{"values":`+list(depth, gen)+`,"x":1}`, `{"Values":`+list(depth, gen)+`}`, `[]`, `{"values":{}}`, `{"values":"x"}`)
			case 6:
				k = pick("kvlistValue", "kvlistValue", "KvlistValue")
				v = pick(`null`, `{}`, `{"values":`+list(depth, genKV)+`}`, `{"values":[1]}`)
			default:
				k, v = pick("x", "key", "value", "values"), pick(`1`, `{"stringValue":"a"}`, `[null]`)
			}
			members = append(members, `"`+k+`"`+pick(":", " : ")+v)
		}
		return "{" + strings.Join(members, ",") + "}"
	}
	genKV = func(depth int) string {
		var members []string
		for _, f := range r.Perm(5)[:r.IntN(3)] {
			switch f {
			case 0, 1:
				members = append(members, `"key":`+pick(`"k"`, `"a"`, `"\u006b"`, `""`, `null`, `1`, "\"\xfe\""))
			case 2:
				members = append(members, `"value":`+gen(depth))
			default:
				members = append(members, pick(`"Key":"K"`, `"z":[]`))
			}
		}
		if r.IntN(15) == 0 {
			return pick(`null`, `1`, `[]`)
		}
		return "{" + strings.Join(members, ",") + "}"
	}
	accepted := 0
	for i := range 20000 {
		text := gen(0)
		if i%3 == 0 {
			// As an array's element: the fast path on the top value too.
			text = `{"arrayValue":{"values":[` + text + `]}}`
		}
		var old otlpJSONAnyOracle
		var want otlpValue
		err := json.Unmarshal([]byte(text), &old)
		if err == nil {
			want, err = old.decode(0)
		}
		var a otlpJSONAny
		var got otlpValue
		err2 := json.Unmarshal([]byte(text), &a)
		if err2 == nil {
			got, err2 = a.decode(0, nil)
		}
		if (err == nil) != (err2 == nil) {
			t.Fatalf("%s:\nbefore: %v\nnow: %v", text, err, err2)
		}
		if err != nil {
			continue
		}
		accepted++
		if w, g := renderOracle(want), got.String(); w != g {
			t.Fatalf("%s:\nbefore %q\nnow    %q", text, w, g)
		}
		if w, g := want.String(), got.String(); w != g {
			t.Fatalf("%s: String before %q, now %q", text, w, g)
		}
	}
	if accepted < 5000 {
		t.Errorf("only %d of 20000 accepted", accepted)
	}
}

// otlpJSONRequestOracle is otlpJSONRequest as it was decoded before:
// values by encoding/json all the way down.
type otlpJSONRequestOracle struct {
	ResourceLogs []struct {
		Resource struct {
			Attributes []otlpJSONKVOracle `json:"attributes"`
		} `json:"resource"`
		ScopeLogs []struct {
			Scope struct {
				Name                   string             `json:"name"`
				Version                string             `json:"version"`
				Attributes             []otlpJSONKVOracle `json:"attributes"`
				DroppedAttributesCount otlpJSONUint       `json:"droppedAttributesCount"`
			} `json:"scope"`
			LogRecords []struct {
				TimeUnixNano           otlpJSONUint       `json:"timeUnixNano"`
				ObservedTimeUnixNano   otlpJSONUint       `json:"observedTimeUnixNano"`
				SeverityNumber         otlpJSONSeverity   `json:"severityNumber"`
				SeverityText           string             `json:"severityText"`
				Body                   *otlpJSONAnyOracle `json:"body"`
				Attributes             []otlpJSONKVOracle `json:"attributes"`
				DroppedAttributesCount otlpJSONUint       `json:"droppedAttributesCount"`
				Flags                  otlpJSONUint       `json:"flags"`
				TraceID                string             `json:"traceId"`
				SpanID                 string             `json:"spanId"`
				EventName              string             `json:"eventName"`
			} `json:"logRecords"`
		} `json:"scopeLogs"`
	} `json:"resourceLogs"`
}

// otlpJSONCheckOracle is what FuzzOTLPJSON checks against the decoding
// before: a request it accepted is accepted (when it was not refused for
// the fields the oracle does not decode: ids, dropped counts) with the
// same bodies and attribute values. (The other way may differ: a field
// given twice in one object, the first of a wrong type inside its
// arrays, was refused and is now decoded.)
func otlpJSONCheckOracle(t *testing.T, b []byte, res []otlpResource, err error) {
	var old otlpJSONRequestOracle
	if decodeJSONBody(b, &old) != nil {
		return
	}
	str := func(v *otlpJSONAnyOracle) (string, bool) {
		if v == nil {
			return "", true
		}
		d, err := v.decode(0)
		return d.String(), err == nil
	}
	type pair struct {
		old  *otlpJSONAnyOracle
		now  otlpValue
		body bool
	}
	var pairs []pair
	for i, rl := range old.ResourceLogs {
		for _, kv := range rl.Resource.Attributes {
			if _, ok := str(kv.Value); !ok {
				return
			}
		}
		for _, sl := range rl.ScopeLogs {
			for _, kv := range sl.Scope.Attributes {
				if _, ok := str(kv.Value); !ok {
					return
				}
			}
			for _, lr := range sl.LogRecords {
				if _, ok := str(lr.Body); !ok {
					return
				}
				for _, kv := range lr.Attributes {
					if _, ok := str(kv.Value); !ok {
						return
					}
				}
			}
		}
		if err != nil {
			continue
		}
		r := res[i]
		for j, kv := range rl.Resource.Attributes {
			pairs = append(pairs, pair{old: kv.Value, now: r.attrs.list()[j].val})
		}
		for j, sl := range rl.ScopeLogs {
			for l, kv := range sl.Scope.Attributes {
				pairs = append(pairs, pair{old: kv.Value, now: r.scopes[j].attrs.list()[l].val})
			}
			for l, lr := range sl.LogRecords {
				pairs = append(pairs, pair{old: lr.Body, now: r.scopes[j].records[l].body, body: true})
				for m, kv := range lr.Attributes {
					pairs = append(pairs, pair{old: kv.Value, now: r.scopes[j].records[l].attrs.list()[m].val})
				}
			}
		}
	}
	if err != nil {
		if !strings.Contains(err.Error(), "Id ") && !strings.Contains(err.Error(), "does not fit 32 bits") && !strings.Contains(err.Error(), "Count") {
			t.Fatalf("refused now: %v; accepted before", err)
		}
		return
	}
	for _, p := range pairs {
		if p.now.kind == otlpTooLarge {
			continue
		}
		if want, _ := str(p.old); p.now.String() != want {
			t.Fatalf("decoded before as %q, now %q", want, p.now.String())
		}
	}
}

// TestOTLPManyAttributesBounded: a record or resource of half a million
// attributes (an empty KeyValue is 2 bytes) cost ~110 bytes each before
// any limit (320x the push); now about the push's size, with the same
// answers, stored metadata (the last value of a name wins, empty values
// dropped) and collisions counted.
func TestOTLPManyAttributesBounded(t *testing.T) {
	const n = 1 << 18
	alternating := func(f int, name string, a, b string) []byte {
		var out []byte
		for i := range n {
			v := a
			if i%2 == 1 {
				v = b
			}
			out = append(out, pbLen(f, append(pbLen(1, []byte(name)), pbLen(2, pbLen(1, []byte(v)))...))...)
		}
		return out
	}
	rec := func(d time.Duration, line string, attrs []byte) []byte {
		r := append(pbFixed64(1, ns(d)), pbLen(5, pbLen(1, []byte(line)))...)
		return pbLen(2, append(r, attrs...))
	}
	res := append(pbLen(1, kvS("service.name", "svc").proto()), alternating(1, "r", "x", "y")...)
	recs := append(rec(1*time.Second, "many", alternating(6, "a", "v", "w")), rec(2*time.Second, "one", pbLen(6, kvS("a", "z").proto()))...)
	noValues := bytes.Repeat(pbLen(6, pbLen(1, []byte("e"))), 4*n) // e, no value: dropped
	recs = append(recs, rec(3*time.Second, "empty values", append(noValues, pbLen(6, kvS("b", "1").proto())...))...)
	empties := bytes.Repeat(pbLen(6, nil), 4*n) // no name: refused
	recs = append(recs, rec(4*time.Second, "no names", empties)...)
	req := pbLen(1, append(pbLen(1, res), pbLen(2, recs)...))

	e := newEnv(t, nil)
	code, resp, alloc := otlpAllocs(e, req, "application/x-protobuf", "fake")
	t.Logf("a push of %d bytes allocated %d bytes (%.1fx)", len(req), alloc, float64(alloc)/float64(len(req)))
	if limit := uint64(8 * len(req)); alloc > limit {
		t.Errorf("a push of %d bytes allocated %d MB (%.0fx), want under %d MB", len(req), alloc>>20, float64(alloc)/float64(len(req)), limit>>20)
	}
	if code != 200 || !bytes.Contains(resp, []byte(`resource 0, log record 3: structured metadata: attribute "": empty name; 1 entries refused, the other 3 stored`)) {
		t.Errorf("answer %d %q", code, resp)
	}
	wantStored(t, "stored", e, "fake", []string{
		fmt.Sprintf(`{service_name="svc"} %d "empty values" | b="1", r="y"`, ns(3*time.Second)),
		fmt.Sprintf(`{service_name="svc"} %d "one" | a="z", r="y"`, ns(2*time.Second)),
		fmt.Sprintf(`{service_name="svc"} %d "many" | a="w", r="y"`, ns(time.Second)),
	})
	// Each change of value counts: a's n-1 in the first record, r's in
	// each of the three records that got to encoding.
	if got, want := metricValue(t, e, "hay_structured_metadata_collisions_total", "", ""), float64(4*(n-1)); got != want {
		t.Errorf("collisions %v, want %v", got, want)
	}
}

// TestOTLPCompactPairsOracle: attribute lists long enough to be
// compacted (otlpCompactPairs) encode to the same metadata, refusal and
// collision count as the whole list given to encode, with later pairs
// (a record's fields, its resource's) after them.
func TestOTLPCompactPairsOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	names := []string{"a", "a.b", "a_b", "b", "c", "1x", "_y"}
	vals := []string{"", "v", "w", "x"}
	for i := range 300 {
		var kvs []otlpKV
		nn := 1 + r.IntN(len(names))
		for range r.IntN(5000) {
			kvs = append(kvs, otlpKV{names[r.IntN(nn)], otlpValue{kind: otlpString, bytes: []byte(vals[r.IntN(len(vals))])}})
		}
		if r.IntN(4) == 0 {
			for j := range r.IntN(300) {
				kvs = append(kvs, otlpKV{fmt.Sprint("d", j), otlpValue{kind: otlpString, bytes: []byte("1")}})
			}
		}
		var later []attrs.Pair
		for range r.IntN(4) {
			later = append(later, attrs.Pair{Name: names[r.IntN(nn)], Value: vals[r.IntN(len(vals))]})
		}
		var me1, me2 metaEncoder
		got, err := otlpAttrPairs(&me1, nil, &otlpAttrs{kvs: kvs}, nil)
		if err != nil {
			t.Fatal(err)
		}
		enc1, ref1 := me1.encode(append(got, later...))
		var all []attrs.Pair
		for _, kv := range kvs {
			if all, err = otlpAttrPair(&me2, &otlpFlat{budget: attrs.MaxBytes}, all, kv.key, kv.val, ""); err != nil {
				t.Fatal(err)
			}
		}
		enc2, ref2 := me2.encode(append(all, later...))
		if !bytes.Equal(enc1, enc2) || (ref1 == nil) != (ref2 == nil) || ref1 != nil && *ref1 != *ref2 || me1.collisions != me2.collisions {
			t.Fatalf("list %d of %d: %q %v %d; whole %q %v %d", i, len(kvs), enc1, ref1, me1.collisions, enc2, ref2, me2.collisions)
		}
		if len(kvs) > 2*otlpCompactPairs && len(got) > otlpCompactPairs+nn+300 {
			t.Fatalf("list %d: %d pairs kept of %d", i, len(got), len(kvs))
		}
	}
}

// TestOTLPJSONManyAttributesBounded is TestOTLPManyAttributesBounded in
// OTLP/JSON (before: 70-255x the push).
func TestOTLPJSONManyAttributesBounded(t *testing.T) {
	const n = 1 << 17
	alternating := func(name, a, b string) string {
		var parts []string
		for i := range n {
			v := a
			if i%2 == 1 {
				v = b
			}
			parts = append(parts, `{"key":"`+name+`","value":{"stringValue":"`+v+`"}}`)
		}
		return strings.Join(parts, ",")
	}
	rec := func(d time.Duration, line, attrs string) string {
		return `{"timeUnixNano":"` + fmt.Sprint(ns(d)) + `","body":{"stringValue":"` + line + `"},"attributes":[` + attrs + `]}`
	}
	recs := []string{
		rec(time.Second, "many", alternating("a", "v", "w")),
		rec(2*time.Second, "one", `{"key":"a","value":{"stringValue":"z"}}`),
		rec(3*time.Second, "empty values", strings.Repeat(`{"key":"e"},`, 4*n)+`{"key":"b","value":{"stringValue":"1"}}`),
		rec(4*time.Second, "no names", strings.TrimSuffix(strings.Repeat(`{},`, 4*n), ",")),
	}
	req := []byte(`{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}},` + alternating("r", "x", "y") +
		`]},"scopeLogs":[{"logRecords":[` + strings.Join(recs, ",") + `]}]}]}`)
	e := newEnv(t, nil)
	code, resp, alloc := otlpAllocs(e, req, "application/json", "fake")
	t.Logf("a push of %d bytes allocated %d bytes (%.1fx)", len(req), alloc, float64(alloc)/float64(len(req)))
	if limit := uint64(12 * len(req)); alloc > limit {
		t.Errorf("a push of %d bytes allocated %d MB (%.0fx), want under %d MB", len(req), alloc>>20, float64(alloc)/float64(len(req)), limit>>20)
	}
	if code != 200 || !bytes.Contains(resp, []byte(`resource 0, log record 3: structured metadata: attribute \"\": empty name; 1 entries refused, the other 3 stored`)) {
		t.Errorf("answer %d %q", code, resp)
	}
	wantStored(t, "stored", e, "fake", []string{
		fmt.Sprintf(`{service_name="svc"} %d "empty values" | b="1", r="y"`, ns(3*time.Second)),
		fmt.Sprintf(`{service_name="svc"} %d "one" | a="z", r="y"`, ns(2*time.Second)),
		fmt.Sprintf(`{service_name="svc"} %d "many" | a="w", r="y"`, ns(time.Second)),
	})
	if got, want := metricValue(t, e, "hay_structured_metadata_collisions_total", "", ""), float64(4*(n-1)); got != want {
		t.Errorf("collisions %v, want %v", got, want)
	}
}
