package server

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cardStream is one stream of the cardinality test as sent, with what the
// server must report for it.
type cardStream struct {
	sent  map[string]string // labels as pushed ("" values included)
	proto bool              // pushed as protobuf (else Loki JSON)
	ts    []int64
	lines []string
}

// want is the stream's labels as the API must answer them: empty values
// dropped, and (JSON push, or JSON answers) invalid UTF-8 as U+FFFD per
// byte, as encoding/json reads and writes it; service_name added from
// app (withServiceName).
func (c *cardStream) want() map[string]string {
	out := map[string]string{}
	for k, v := range withServiceName(c.sent) {
		if v != "" {
			out[k] = jsonText(v)
		}
	}
	return out
}

// wantEntry is the labels a query answers the stream's j-th entry with:
// want's and the detected_level wantLevel expects (its lines all give
// the same: unknown).
func (c *cardStream) wantEntry(j int) map[string]string {
	return levelLabels(true, c.want(), nil, c.lines[j])
}

// jsonText is s after a trip through a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	var out string
	json.Unmarshal(b, &out)
	return out
}

// lokiLabelText writes labels in Loki's text form for a protobuf push,
// leaving out empty values (as shippers do).
func lokiLabelText(m map[string]string) string {
	var parts []string
	for k, v := range m {
		if v != "" {
			parts = append(parts, k+"="+strconv.Quote(v))
		}
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ", ") + "}"
}

func labelKey(m map[string]string) string {
	b, _ := json.Marshal(m) // sorted keys
	return string(b)
}

// TestManyStreamsExact pushes 3,000 streams (half as Loki JSON, half as
// protobuf) whose labels hold quotes, '=', '}', commas, backslashes,
// newlines, NUL, invalid UTF-8, long values and empty values, and checks
// every metadata endpoint and regex selectors over many streams against
// what was sent.
func TestManyStreamsExact(t *testing.T) {
	e := newEnv(t, nil)
	odd := []string{`q"uote`, `eq=ual`, `br}ace`, `co,mma`, `back\slash`, "new\nline", `{a="b"}`, " lead", "trail ", "tab\tx", "ünï", `\"`, `\\`, "\x00nul", "\u2028sep"}
	const n = 3000
	streams := make([]*cardStream, n)
	for i := range streams {
		c := &cardStream{proto: i%2 == 1, sent: map[string]string{"app": fmt.Sprintf("c%d", i)}}
		c.sent["odd"] = odd[i%len(odd)] + strconv.Itoa(i%7)
		if c.proto && i%5 == 1 {
			c.sent["odd"] += "\xff\xfe" // invalid UTF-8: only protobuf carries it
		}
		switch i % 4 {
		case 0:
			c.sent["long"] = strings.Repeat(string(rune('a'+i%26)), 2000) + strconv.Itoa(i%3)
		case 1:
			c.sent["empty"] = "" // no such label
		}
		for j := range 2 {
			c.ts = append(c.ts, base-int64(time.Hour)+int64(i)*1000+int64(j))
			c.lines = append(c.lines, fmt.Sprintf("entry %d of stream %d", j, i))
		}
		streams[i] = c
	}

	// Push in rounds of 500 streams: their 250 JSON ones in one push, their
	// 250 protobuf ones in another.
	for lo := 0; lo < n; lo += 500 {
		var js []string
		var ps []PushStream
		for _, c := range streams[lo : lo+500] {
			if c.proto {
				p := PushStream{Labels: lokiLabelText(c.sent)}
				for j := range c.ts {
					p.Entries = append(p.Entries, PushEntry{Time: c.ts[j], Line: c.lines[j]})
				}
				ps = append(ps, p)
				continue
			}
			var vals []string
			for j := range c.ts {
				vals = append(vals, fmt.Sprintf(`[%q,%s]`, strconv.FormatInt(c.ts[j], 10), mustJSON(t, c.lines[j])))
			}
			js = append(js, fmt.Sprintf(`{"stream":%s,"values":[%s]}`, mustJSON(t, c.sent), strings.Join(vals, ",")))
		}
		e.mustPush("/loki/api/v1/push", []byte(`{"streams":[`+strings.Join(js, ",")+`]}`), "Content-Type", "application/json")
		e.mustPush("/loki/api/v1/push", protoBody(ps), "Content-Type", "application/x-protobuf")
	}

	rng := fmt.Sprintf("start=%d&end=%d", base-2*int64(time.Hour), base)
	getJSON := func(path string, v any) {
		t.Helper()
		code, body := e.get(path)
		if code != 200 {
			t.Fatalf("%s: %d %.300s", path, code, body)
		}
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}

	// The oracle's answers.
	names := map[string]bool{}
	values := map[string]map[string]bool{}
	series := map[string]bool{}
	for _, c := range streams {
		w := c.want()
		series[labelKey(w)] = true
		for k, v := range w {
			names[k] = true
			if values[k] == nil {
				values[k] = map[string]bool{}
			}
			values[k][v] = true
		}
	}
	sortedKeys := func(m map[string]bool) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}

	var lab struct{ Data []string }
	getJSON("/loki/api/v1/labels?"+rng, &lab)
	if want := sortedKeys(names); !slices.Equal(lab.Data, want) {
		t.Fatalf("labels: got %q, want %q", lab.Data, want)
	}
	for name := range names {
		var vals struct{ Data []string }
		getJSON("/loki/api/v1/label/"+name+"/values?"+rng, &vals)
		// The answer is sorted by byte value of the stored text; compare
		// as sets, and that it has no duplicates.
		got := slices.Clone(vals.Data)
		slices.Sort(got)
		if want := sortedKeys(values[name]); !slices.Equal(got, want) {
			t.Fatalf("label %s values: got %d, want %d (first got %.80q, want %.80q)", name, len(got), len(want), got[:min(1, len(got))], want[:min(1, len(want))])
		}
	}
	var ser struct{ Data []map[string]string }
	getJSON("/loki/api/v1/series?"+rng, &ser)
	gotSeries := map[string]bool{}
	for _, m := range ser.Data {
		k := labelKey(m)
		if gotSeries[k] {
			t.Fatalf("series: %s twice", k)
		}
		gotSeries[k] = true
	}
	if want := sortedKeys(series); !slices.Equal(sortedKeys(gotSeries), want) {
		t.Fatalf("series: got %d, want %d", len(gotSeries), len(want))
	}

	// Regex selectors over many streams: the count over all of them
	// (metric query) and the entries themselves where they fit one page.
	type row struct {
		labels, line string
		ts           int64
	}
	for _, re := range []string{"c1.*", "c12.*", "c2999", "c.*7", `c[0-9]{3}`} {
		rx := regexp.MustCompile("^(?:" + re + ")$")
		var want []row
		for _, c := range streams {
			if rx.MatchString(c.sent["app"]) {
				for j := range c.ts {
					want = append(want, row{labelKey(c.wantEntry(j)), c.lines[j], c.ts[j]})
				}
			}
		}
		var mr struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				}
			}
		}
		getJSON(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(fmt.Sprintf(`sum(count_over_time({app=~%q}[2h]))`, re)), base), &mr)
		if len(mr.Data.Result) != 1 || mr.Data.Result[0].Value[1] != strconv.Itoa(len(want)) {
			t.Fatalf("count of {app=~%q}: got %v, want %d", re, mr.Data.Result, len(want))
		}
		var qr struct {
			Data struct {
				Result []struct {
					Stream map[string]string
					Values [][2]string
				}
			}
		}
		getJSON(fmt.Sprintf("/loki/api/v1/query_range?query=%s&limit=5000&direction=forward&%s", q(fmt.Sprintf(`{app=~%q}`, re)), rng), &qr)
		var got []row
		for _, s := range qr.Data.Result {
			for _, v := range s.Values {
				ts, _ := strconv.ParseInt(v[0], 10, 64)
				got = append(got, row{labelKey(s.Stream), v[1], ts})
			}
		}
		cmpRow := func(a, b row) int {
			if a.ts != b.ts {
				return int(a.ts - b.ts)
			}
			return strings.Compare(a.line, b.line)
		}
		slices.SortFunc(got, cmpRow)
		slices.SortFunc(want, cmpRow)
		if !slices.Equal(got, want) {
			t.Fatalf("{app=~%q}: got %d entries, want %d", re, len(got), len(want))
		}
	}

	// Exact selectors naming every label, the odd and invalid bytes
	// written as LogQL string escapes.
	for i := 0; i < n; i += 37 {
		c := streams[i]
		var sel []string
		for k, v := range c.sent {
			if v != "" {
				sel = append(sel, k+"="+strconv.Quote(v))
			}
		}
		var qr struct {
			Data struct {
				Result []struct {
					Stream map[string]string
					Values [][2]string
				}
			}
		}
		getJSON(fmt.Sprintf("/loki/api/v1/query_range?query=%s&direction=forward&%s", q("{"+strings.Join(sel, ",")+"}"), rng), &qr)
		if len(qr.Data.Result) != 1 || labelKey(qr.Data.Result[0].Stream) != labelKey(c.wantEntry(0)) {
			t.Fatalf("stream %d: got %d streams", i, len(qr.Data.Result))
		}
		vals := qr.Data.Result[0].Values
		if len(vals) != len(c.ts) {
			t.Fatalf("stream %d: %d entries, want %d", i, len(vals), len(c.ts))
		}
		for j, v := range vals {
			if v[0] != strconv.FormatInt(c.ts[j], 10) || v[1] != c.lines[j] {
				t.Fatalf("stream %d entry %d: got %q", i, j, v)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
