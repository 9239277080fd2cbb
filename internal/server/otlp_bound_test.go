package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
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
			wantLines(t, c.name, e.stored("fake"), want)
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
	wantLines(t, "stored", e.stored("fake"), []string{fmt.Sprintf(`{service_name="svc"} %d "small" | `, ns(3*time.Second))})
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
		if !pv.wire || mv.wire {
			t.Fatalf("%s: wire %v, decoded %v", want, pv.wire, mv.wire)
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
