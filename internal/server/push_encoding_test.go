package server

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"strings"
	"testing"

	"github.com/klauspost/compress/snappy"
)

// TestPushEncodings sends the same entries in every body form Loki's
// shippers use (Content-Type and Content-Encoding as Alloy, Vector,
// Promtail, Fluent Bit and hand-written clients set them) and checks
// each one is stored exactly once, and that broken or unknown forms are
// refused with nothing stored.
func TestPushEncodings(t *testing.T) {
	deflate := func(b []byte, zlibWrap bool) []byte {
		var out bytes.Buffer
		if zlibWrap {
			zw := zlib.NewWriter(&out)
			zw.Write(b)
			zw.Close()
		} else {
			zw, _ := flate.NewWriter(&out, flate.DefaultCompression)
			zw.Write(b)
			zw.Close()
		}
		return out.Bytes()
	}
	gz := func(b []byte) []byte {
		var out bytes.Buffer
		zw := gzip.NewWriter(&out)
		zw.Write(b)
		zw.Close()
		return out.Bytes()
	}
	cases := []struct {
		name     string
		body     func(app string) []byte
		hdr      []string
		wantCode int
	}{
		{"protobuf", func(app string) []byte { return protoOf(app) }, []string{"Content-Type", "application/x-protobuf"}, 204},
		{"protobuf, Content-Encoding snappy (Alloy, Vector)", func(app string) []byte { return protoOf(app) },
			[]string{"Content-Type", "application/x-protobuf", "Content-Encoding", "snappy"}, 204},
		{"protobuf, no Content-Type", func(app string) []byte { return protoOf(app) }, []string{"Content-Type", ""}, 204},
		{"protobuf, octet-stream", func(app string) []byte { return protoOf(app) }, []string{"Content-Type", "application/octet-stream"}, 204},
		{"protobuf, no Content-Type, Content-Encoding snappy", func(app string) []byte { return protoOf(app) },
			[]string{"Content-Type", "", "Content-Encoding", "snappy"}, 204},
		{"protobuf, gzip", func(app string) []byte { return gz(protoOf(app)) },
			[]string{"Content-Type", "application/x-protobuf", "Content-Encoding", "gzip"}, 204},
		{"json", func(app string) []byte { return jsonOf(app) }, []string{"Content-Type", "application/json"}, 204},
		{"json, no Content-Type", func(app string) []byte { return jsonOf(app) }, []string{"Content-Type", ""}, 204},
		{"json, leading space, octet-stream", func(app string) []byte { return append([]byte(" \n"), jsonOf(app)...) },
			[]string{"Content-Type", "application/octet-stream"}, 204},
		{"json, Content-Encoding snappy", func(app string) []byte { return snappy.Encode(nil, jsonOf(app)) },
			[]string{"Content-Type", "application/json", "Content-Encoding", "snappy"}, 204},
		{"json, deflate (zlib)", func(app string) []byte { return deflate(jsonOf(app), true) },
			[]string{"Content-Type", "application/json", "Content-Encoding", "deflate"}, 204},
		{"json, deflate (raw)", func(app string) []byte { return deflate(jsonOf(app), false) },
			[]string{"Content-Type", "application/json", "Content-Encoding", "Deflate"}, 204},
		{"json, gzip", func(app string) []byte { return gz(jsonOf(app)) },
			[]string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, 204},
		// Refused, nothing stored.
		{"json, Content-Encoding br", func(app string) []byte { return jsonOf(app) },
			[]string{"Content-Type", "application/json", "Content-Encoding", "br"}, 415},
		{"json sent as deflate but plain", func(app string) []byte { return jsonOf(app) },
			[]string{"Content-Type", "application/json", "Content-Encoding", "deflate"}, 400},
		{"protobuf, not snappy", func(app string) []byte { return EncodePushProto(streamsOf(app)) },
			[]string{"Content-Type", "application/x-protobuf"}, 400},
		{"garbage, no Content-Type", func(string) []byte { return []byte("\xff\xff\xff\xff\xff") }, []string{"Content-Type", ""}, 400},
	}
	e := newEnv(t, nil)
	for i, c := range cases {
		app := fmt.Sprintf("enc%d", i)
		code, body := e.do("POST", "/loki/api/v1/push", c.body(app), c.hdr...)
		if code != c.wantCode {
			t.Errorf("%s: %d %s, want %d", c.name, code, strings.TrimSpace(body), c.wantCode)
		}
		want := 0
		if c.wantCode == 204 {
			want = 2
		}
		_, res := e.get(fmt.Sprintf("/api/v1/search?q=%s&end=%d", q(`{app="`+app+`"}`), base+10))
		if got := strings.Count(res, `"line":"`+app+` line`); got != want {
			t.Errorf("%s: stored %d entries, want %d: %s", c.name, got, want, res)
		}
	}
}

func streamsOf(app string) []PushStream {
	return []PushStream{{Labels: `{app="` + app + `"}`, Entries: []PushEntry{{Time: base - 2e9, Line: app + " line 1"}, {Time: base - 1e9, Line: app + " line 2"}}}}
}

func protoOf(app string) []byte { return protoBody(streamsOf(app)) }

func jsonOf(app string) []byte {
	return []byte(fmt.Sprintf(`{"streams":[{"stream":{"app":%q},"values":[["%d","%s line 1"],["%d","%s line 2"]]}]}`, app, base-2e9, app, base-1e9, app))
}

// TestPushEmptyLabelValue: a label with an empty value is no label, in
// every push encoding: the JSON map always dropped it, protobuf and JSON
// lines refused the whole push. All three land in one stream.
func TestPushEmptyLabelValue(t *testing.T) {
	e := newEnv(t, nil)
	e.mustPush("/loki/api/v1/push", []byte(fmt.Sprintf(`{"streams":[{"stream":{"app":"x","env":""},"values":[["%d","json"]]}]}`, base-3e9)), "Content-Type", "application/json")
	e.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="x", env=""}`, Entries: []PushEntry{{Time: base - 2e9, Line: "proto"}}}}), "Content-Type", "application/x-protobuf")
	e.mustPush("/api/v1/push/jsonl", []byte(fmt.Sprintf(`{"labels":"{app=\"x\", env=\"\"}","ts":"%d","line":"jsonl"}`, base-1e9)))
	_, body := e.get(fmt.Sprintf("/loki/api/v1/series?match[]=%s&start=%d&end=%d", q(`{app="x"}`), base-10e9, base))
	if !strings.Contains(body, `"data":[{"app":"x","service_name":"x"}]`) {
		t.Errorf("series: %s; want the one stream {app=\"x\", service_name=\"x\"}", body)
	}
	_, body = e.get(fmt.Sprintf("/api/v1/search?q=%s&end=%d&direction=forward", q(`{app="x"}`), base))
	for _, l := range []string{"json", "proto", "jsonl"} {
		if !strings.Contains(body, `"line":"`+l+`"`) {
			t.Errorf("search lacks %q: %s", l, body)
		}
	}
}

// TestPushCrossSite: a push sent by another site's page (a CORS "simple"
// request: a form or a no-cors fetch, which browsers mark with
// Sec-Fetch-Site or Origin) is refused and stores nothing; shippers, which
// send neither header, and the same origin are served.
func TestPushCrossSite(t *testing.T) {
	e := newEnv(t, nil)
	body := func(line string) []byte {
		return []byte(fmt.Sprintf(`{"streams":[{"stream":{"app":"csrf"},"values":[["%d","%s"]]}]}`, base-1e9, line))
	}
	for _, c := range []struct {
		hdr  []string
		code int
	}{
		{[]string{"Content-Type", "text/plain", "Sec-Fetch-Site", "cross-site"}, 403},
		{[]string{"Content-Type", "text/plain", "Sec-Fetch-Site", "same-site"}, 403},
		{[]string{"Content-Type", "text/plain", "Origin", "https://evil.example"}, 403},
		{[]string{"Content-Type", "application/json"}, 204},
		{[]string{"Content-Type", "application/json", "Sec-Fetch-Site", "same-origin"}, 204},
		{[]string{"Content-Type", "application/json", "Sec-Fetch-Site", "none"}, 204},
	} {
		line := strings.Join(c.hdr, " ")
		if code, resp := e.do("POST", "/loki/api/v1/push", body(line), c.hdr...); code != c.code {
			t.Errorf("push with %q: %d %s, want %d", c.hdr, code, resp, c.code)
		}
		_, res := e.get(fmt.Sprintf("/api/v1/search?q=%s&end=%d", q(`{app="csrf"}`), base))
		if stored := strings.Contains(res, line); stored != (c.code == 204) {
			t.Errorf("push with %q: stored %v", c.hdr, stored)
		}
	}
	if code, _ := e.do("POST", "/api/v1/push/jsonl", []byte(`{"labels":{"app":"csrf"},"line":"jsonl"}`), "Sec-Fetch-Site", "cross-site"); code != 403 {
		t.Errorf("cross-site jsonl push: %d, want 403", code)
	}
}
