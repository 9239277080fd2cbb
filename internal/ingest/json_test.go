package ingest

import (
	"encoding/json"
	"testing"
	"time"
)

func TestJSONTime(t *testing.T) {
	sec := utc(2023, 11, 14, 22, 13, 20, 0) // unix 1700000000
	tests := []struct {
		line string
		want int64 // 0: no time; 1: the epoch
	}{
		{`{"time":"2015-07-29T17:41:44.747Z","msg":"x"}`, utc(2015, 7, 29, 17, 41, 44, 747e6)},
		{`{"msg":"x","ts":1700000000}`, sec},
		{`{"msg":"x","ts":1700000000.5}`, sec + 5e8},
		{`{"msg":"x","ts":1700000000.123456789}`, sec + 123456789},
		{`{"ts":1700000000123}`, sec + 123e6},
		{`{"ts":1700000000123.456}`, sec + 123456000},
		{`{"ts":1700000000123456}`, sec + 123456000},
		{`{"ts":1700000000123456.7}`, sec + 123456700},
		{`{"ts":1700000000123456789}`, sec + 123456789},
		{`{"ts":1.7e9}`, sec},
		{`{"ts":1.7E+12}`, sec},
		{`{"ts":0}`, 1},
		{`{"ts":"1700000000"}`, sec},
		{`{"timestamp":"2015-07-29 17:41:44,747"}`, utc(2015, 7, 29, 17, 41, 44, 747e6)},
		{`{"@timestamp":"2015-07-29T19:41:44+02:00"}`, utc(2015, 7, 29, 17, 41, 44, 0)},
		{`{"@timestamp":"Mon, 02 Jan 2006 15:04:05 -0700"}`, utc(2006, 1, 2, 22, 4, 5, 0)},
		{`{"time":"Mon Jan  2 15:04:05 UTC 2006"}`, utc(2006, 1, 2, 15, 4, 5, 0)},
		{`{"time":"2015\/07\/29 17:41:44"}`, utc(2015, 7, 29, 17, 41, 44, 0)},
		{`{"\u0074ime":"2015-07-29T17:41:44Z"}`, utc(2015, 7, 29, 17, 41, 44, 0)},
		{`  { "level" : "info" , "nested": {"time": 5, "a": [1, "}", {"ts": 6}]}, "ts" : 1700000000 }`, sec},
		{`{"a":"quote \" and \\","ts":1700000000}`, sec},
		{`{"a":"\\","ts":1700000000}`, sec},
		{`{"a":true,"b":null,"c":-1.5e3,"ts":1700000000}`, sec},
		// The first key that holds a time wins; keys that do not are skipped.
		{`{"time":null,"ts":1700000000}`, sec},
		{`{"time":"soon","ts":1700000000}`, sec},
		{`{"ts":1700000000,"time":"2015-07-29T17:41:44Z"}`, sec},
		{`{"ts":1700000000,"broken`, sec}, // the rest is not looked at

		{"\xef\xbb\xbf{\"ts\":1700000000}", sec},
		{``, 0},
		{`{}`, 0},
		{`[{"ts":1700000000}]`, 0},
		{`"ts":1700000000`, 0},
		{`{"msg":"ts"}`, 0},
		{`{"Time":"2015-07-29T17:41:44Z"}`, 0},
		{`{"nested":{"ts":1700000000}}`, 0},
		{`{"ts":-1}`, 0},
		{`{"ts":1e400}`, 0},
		{`{"ts":99999999999999999999}`, 0},
		{`{"ts":9223372036854775807}`, 0},
		{`{"ts":7258118400}`, 0},          // 2200-01-01… is fine, 7258118400 is 2200-01-01: see below
		{`{"ts":1700000000x}`, 0},         // not a number
		{`{"ts":1700000000.}`, 0},         // not a number
		{`{"ts":true}`, 0},                // not a time
		{`{"time":"Jun 14 15:16:01"}`, 0}, // no year and no reference
		{`{"time":"2015-07-29T17:41:44Z"`, utc(2015, 7, 29, 17, 41, 44, 0)},
		{`{"msg":"unterminated`, 0},
		{`{"msg" "x","ts":1}`, 0},
		{`{"msg":"x" "ts":1}`, 0},
		{`{"time":"\u00zz"}`, 0},
	}
	for _, tc := range tests {
		want, wantOK := tc.want, tc.want != 0
		if want == 1 {
			want = 0
		}
		if tc.line == `{"ts":7258118400}` {
			// 7258118400 s is 2200-01-01T00:00:00Z: inside the range.
			want, wantOK = utc(2200, 1, 1, 0, 0, 0, 0), true
		}
		got, ok := JSONTime([]byte(tc.line))
		if ok != wantOK || got != want {
			t.Errorf("JSONTime(%s) = %v, %v; want %v, %v", tc.line, fmtNano(got), ok, fmtNano(want), wantOK)
		}
	}
}

func TestJSONTimeAllocs(t *testing.T) {
	for _, line := range []string{
		`{"level":"info","msg":"hello \"world\"","time":"2015-07-29T17:41:44.747Z"}`,
		`{"level":"info","ts":1700000000.123,"caller":"main.go:12"}`,
		`{"@timestamp":"2015\/07\/29 17:41:44","a":{"b":[1,2,3]}}`,
		`{"level":"info"}`,
	} {
		b := []byte(line)
		if n := testing.AllocsPerRun(10, func() { JSONTime(b) }); n != 0 {
			t.Errorf("JSONTime(%s) allocates %v times", line, n)
		}
	}
}

// TestJSONTimeEncodingJSON builds lines with encoding/json, which escapes
// '<', '>' and '&' and may order keys differently than hand-written tests.
func TestJSONTimeEncodingJSON(t *testing.T) {
	want := utc(2021, 3, 4, 5, 6, 7, 890e6)
	v := map[string]any{
		"msg":   "<b>&</b> \u2028 \x00",
		"attrs": map[string]any{"time": 1, "list": []any{"}", "{", nil}},
		"time":  time.Unix(0, want).UTC(),
	}
	line, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := JSONTime(line)
	if !ok || got != want {
		t.Fatalf("JSONTime(%s) = %v, %v; want %v", line, fmtNano(got), ok, fmtNano(want))
	}
}

func FuzzJSONTime(f *testing.F) {
	f.Add([]byte(`{"time":"2015-07-29T17:41:44.747Z","msg":"x"}`))
	f.Add([]byte(`{"msg":"x","ts":1700000000.123}`))
	f.Add([]byte(`{"a":{"b":["}"]},"@timestamp":"2015\/07\/29 17:41:44"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ts, ok := JSONTime(line)
		if !ok {
			return
		}
		if y := time.Unix(0, ts).UTC().Year(); y < 1970 || y > 2200 {
			t.Fatalf("JSONTime(%q) = %v, outside 1970..2200", line, fmtNano(ts))
		}
		// A valid JSON object with a number under "ts" must agree with
		// encoding/json about which key it is.
		var m map[string]json.RawMessage
		if json.Unmarshal(line, &m) == nil {
			if _, has := m["ts"]; !has {
				if _, has := m["time"]; !has {
					if _, has := m["timestamp"]; !has {
						if _, has := m["@timestamp"]; !has {
							t.Fatalf("JSONTime(%q) found a time but encoding/json sees no time key", line)
						}
					}
				}
			}
		}
	})
}

// TestJSONTimeZoneNames: RFC 822 strings (which start with the day) are
// read; a zone name in the RFC 822/1123/850 and Unix date layouts counts
// with its offset, from RFC 822's list, and an unknown one makes no time
// rather than UTC (time.Parse gives it offset 0: "05:06:07 PST" would be
// eight hours off). Found by the ingest differential test.
func TestJSONTimeZoneNames(t *testing.T) {
	at := func(h, m, s int) int64 { return time.Date(2021, 1, 4, h, m, s, 0, time.UTC).UnixNano() }
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{`{"time":"04 Jan 21 05:06 -0700"}`, at(12, 6, 0), true},
		{`{"time":"04 Jan 21 05:06 UTC"}`, at(5, 6, 0), true},
		{`{"time":"04 Jan 21 05:06 EST"}`, at(10, 6, 0), true},
		{`{"time":"Mon, 04 Jan 2021 05:06:07 PST"}`, at(13, 6, 7), true},
		{`{"time":"Mon, 04 Jan 2021 05:06:07 PDT"}`, at(12, 6, 7), true},
		{`{"time":"Mon, 04 Jan 2021 05:06:07 GMT"}`, at(5, 6, 7), true},
		{`{"time":"Mon Jan  4 05:06:07 CST 2021"}`, at(11, 6, 7), true},
		{`{"time":"Monday, 04-Jan-21 05:06:07 MDT"}`, at(11, 6, 7), true},
		{`{"time":"Mon, 04 Jan 2021 05:06:07 XYZ"}`, 0, false},
		{`{"time":"Mon, 04 Jan 2021 05:06:07 -0800"}`, at(13, 6, 7), true},
		{`{"time":"Mon Jan 04 05:06:07 +0000 2021"}`, at(5, 6, 7), true},
		{`{"time":"Mon Jan 04 05:06:07 -0300 2021"}`, at(8, 6, 7), true},
	} {
		got, ok := JSONTime([]byte(c.in))
		if ok != c.ok || got != c.want {
			t.Errorf("JSONTime(%s) = %s, %v; want %s, %v", c.in, time.Unix(0, got).UTC(), ok, time.Unix(0, c.want).UTC(), c.ok)
		}
	}
}

// TestJSONTimeZoneLocal: a JSON time string's zone name means the same
// whatever the machine's zone (time.Parse read "CST" as +8 where the local
// zone is China's), and tzdata's numeric names carry their offset (they
// were read as UTC).
func TestJSONTimeZoneLocal(t *testing.T) {
	cases := []struct{ line, want string }{
		{`{"time":"Mon, 02 Jan 2006 15:04:05 CST"}`, "2006-01-02T21:04:05Z"},
		{`{"time":"Mon Jan  2 15:04:05 PST 2006"}`, "2006-01-02T23:04:05Z"},
		{`{"time":"Mon Nov 30 10:00:00 -03 2026"}`, "2026-11-30T13:00:00Z"},
		{`{"time":"Mon, 30 Nov 2026 10:00:00 +04"}`, "2026-11-30T06:00:00Z"},
		{`{"time":"Monday, 30-Nov-26 10:00:00 -03"}`, "2026-11-30T13:00:00Z"},
		{`{"time":"Mon Nov 30 10:00:00 +0530 2026"}`, "2026-11-30T04:30:00Z"},
		{`{"time":"Mon, 30 Nov 2026 10:00:00 IST"}`, ""}, // ambiguous: refused
		{`{"time":"Mon Nov 30 10:00:00 +15 2026"}`, ""},
	}
	check := func(zone string) {
		for _, c := range cases {
			got, ok := JSONTime([]byte(c.line))
			if c.want == "" {
				if ok {
					t.Errorf("TZ %s: JSONTime(%s) = %s, want none", zone, c.line, time.Unix(0, got).UTC().Format(time.RFC3339))
				}
				continue
			}
			if w, _ := time.Parse(time.RFC3339, c.want); !ok || got != w.UnixNano() {
				t.Errorf("TZ %s: JSONTime(%s) = %s, %v; want %s", zone, c.line, time.Unix(0, got).UTC().Format(time.RFC3339), ok, c.want)
			}
		}
	}
	check("UTC")
	old := time.Local
	defer func() { time.Local = old }()
	for _, name := range []string{"Asia/Shanghai", "Asia/Kolkata", "America/Sao_Paulo"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			continue // no tzdata for it on this machine: the UTC run stands
		}
		time.Local = loc
		check(name)
	}
}
