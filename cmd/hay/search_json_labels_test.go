package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/query"
	"haystack/internal/server"
)

// jsonLabelsEntry is an entry of hay search --json or of the server's
// categorize-labels answer, reduced to what both say.
type jsonLabelsEntry struct {
	Time                     int64
	Line                     string
	Stream, Metadata, Parsed map[string]string
}

// TestSearchJSONPipelineLabels: hay search --json prints, for a query
// with parsers, label_format, drop or keep, the labels Loki returns
// (parsed; stream and structuredMetadata where they differ from the
// stored labels and metadata), in exact lines, and the same labels as
// hay serve's query_range with categorize-labels for the same store and
// query (the oracle). A label filter alone prints as stored.
func TestSearchJSONPipelineLabels(t *testing.T) {
	dir := t.TempDir()
	s, err := server.New(server.Config{DataDir: dir, NoLogLevelDiscovery: true}) // the metadata sent, no detected_level
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Close() })
	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixNano()
	body := fmt.Sprintf(`{"streams":[
		{"stream":{"app":"api","env":"prod"},"values":[
			["%d","level=info msg=\"hello world\" app=x dur=5ms",{"trace_id":"t1"}],
			["%d","{\"level\":\"warn\",\"user\":{\"id\":7},\"servers\":[\"a\",\"b\"]}"],
			["%d","GET /users 200",{"app":"m"}]]},
		{"stream":{"app":"pk"},"values":[["%d","{\"_entry\":\"inner line\",\"k\":\"v\"}"]]}]}`, base+1e9, base+2e9, base+3e9, base+4e9)
	resp, err := http.Post(hs.URL+"/loki/api/v1/push", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("push: %s", resp.Status)
	}
	ts := func(sec int64) string { return time.Unix(0, base+sec*1e9).UTC().Format(time.RFC3339Nano) }
	const labels = `"labels":{"app":"api","env":"prod","service_name":"api"}`
	l1 := func(extra string) string {
		return `{"time":"` + ts(1) + `",` + labels + `,"line":"level=info msg=\"hello world\" app=x dur=5ms","metadata":{"trace_id":"t1"}` + extra + "}\n"
	}
	l2 := func(extra string) string {
		return `{"time":"` + ts(2) + `",` + labels + `,"line":"{\"level\":\"warn\",\"user\":{\"id\":7},\"servers\":[\"a\",\"b\"]}"` + extra + "}\n"
	}
	l3 := func(extra string) string {
		return `{"time":"` + ts(3) + `",` + labels + `,"line":"GET /users 200","metadata":{"app":"m"}` + extra + "}\n"
	}
	const appM = `,"structuredMetadata":{"app_extracted":"m"}`
	tenant := filepath.Join(dir, "fake")
	for _, tc := range []struct {
		query, want string
		asStored    bool // no label stage: stored labels, not compared with the server
	}{
		// logfmt: a key the stream has gets _extracted; metadata unchanged.
		{`{app="api"} |= "level=" | logfmt`,
			l1(`,"parsed":{"app_extracted":"x","dur":"5ms","level":"info","msg":"hello world"}`), false},
		// json with parameters.
		{`{app="api"} |= "warn" | json lvl="level", uid="user.id", first="servers[0]"`,
			l2(`,"parsed":{"first":"a","lvl":"warn","uid":"7"}`), false},
		// regexp; the metadata name the stream has becomes app_extracted.
		{`{app="api"} |= "GET" | regexp "^(?P<method>\\S+) (?P<path>\\S+) (?P<status>\\d+)$"`,
			l3(appM + `,"parsed":{"method":"GET","path":"/users","status":"200"}`), false},
		{`{app="api"} |= "GET" | pattern "<method> <path> <_>"`,
			l3(appM + `,"parsed":{"method":"GET","path":"/users"}`), false},
		// label_format: a rename, and a template over a stream label,
		// which then is parsed and no longer the stream's.
		{`{app="api"} |= "level=" | logfmt | label_format lv=level, env="{{.env}}-{{.dur}}"`,
			l1(`,"stream":{"app":"api","service_name":"api"},"parsed":{"app_extracted":"x","dur":"5ms","env":"prod-5ms","lv":"info","msg":"hello world"}`), false},
		// drop and keep of stream labels and metadata.
		{`{app="api"} | drop env, trace_id`,
			l1(`,"stream":{"app":"api","service_name":"api"},"structuredMetadata":{}`) +
				l2(`,"stream":{"app":"api","service_name":"api"}`) +
				l3(`,"stream":{"app":"api","service_name":"api"}`+appM), false},
		{`{app="api"} | keep app, app_extracted`,
			l1(`,"stream":{"app":"api"},"structuredMetadata":{}`) +
				l2(`,"stream":{"app":"api"}`) +
				l3(`,"stream":{"app":"api"}`+appM), false},
		// A parser's error.
		{`{app="api"} |= "GET" | json`,
			l3(appM + `,"parsed":{"__error__":"JSONParserErr","__error_details__":"` + jsonErrDetails(t, hs.URL, base) + `"}`), false},
		// unpack: the packed line, its other keys parsed (not with
		// --server, whose line is the rewritten one).
		{`{app="pk"} | unpack`,
			`{"time":"` + ts(4) + `","labels":{"app":"pk","service_name":"pk"},"line":"inner line","parsed":{"k":"v"}}` + "\n", false},
		// No label stage: as stored, nothing added (the server's answer
		// names entry 3's metadata app_extracted; --json's "metadata" is
		// the stored pairs, as the native API's and TestSearchJSONMetadata
		// pin them).
		{`{app="api"} | trace_id="t1"`, l1(""), true},
		{`{app="api"} |= "GET" | line_format "{{.app}}"`,
			`{"time":"` + ts(3) + `",` + labels + `,"line":"api","metadata":{"app":"m"}}` + "\n", true},
	} {
		args := []string{"search", "--data", tenant, "--json", "--order", "oldest", "--query", tc.query}
		out, code := hayInProcess(t, args...)
		if code != 0 || string(out) != tc.want {
			t.Errorf("hay search --json --query %s: exit %d\n got %s\nwant %s", tc.query, code, out, tc.want)
		}
		if !strings.Contains(tc.query, "unpack") && !strings.Contains(tc.query, "line_format") {
			// --server: the same lines, the pipeline run on what the
			// server sends (metadata as stored, in any order: one pair
			// here).
			args[1], args[2] = "--server", hs.URL
			if rout, code := hayInProcess(t, args...); code != 0 || string(rout) != tc.want {
				t.Errorf("hay search --server --json --query %s: exit %d\n got %s\nwant %s", tc.query, code, rout, tc.want)
			}
		}
		if tc.asStored {
			continue
		}
		got := cliEntries(t, out)
		want := serverEntries(t, hs.URL, tc.query, base)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("query %s:\n hay search %+v\nquery_range %+v", tc.query, got, want)
		}
	}
}

// jsonErrDetails is the server's __error_details__ for | json on the
// line "GET /users 200" (the parser's message, not pinned here).
func jsonErrDetails(t *testing.T, base string, from int64) string {
	t.Helper()
	for _, e := range serverEntries(t, base, `{app="api"} |= "GET" | json`, from) {
		return e.Parsed["__error_details__"]
	}
	t.Fatal("no entry for | json")
	return ""
}

// cliEntries reads hay search --json output: "stream" or else "labels",
// "structuredMetadata" or else "metadata", and "parsed".
func cliEntries(t *testing.T, out []byte) []jsonLabelsEntry {
	t.Helper()
	var es []jsonLabelsEntry
	for _, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var o struct {
			Time                                                 string
			Line                                                 string
			Labels, Metadata, Stream, StructuredMetadata, Parsed map[string]string
		}
		if err := json.Unmarshal(line, &o); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		tm, err := time.Parse(time.RFC3339Nano, o.Time)
		if err != nil {
			t.Fatal(err)
		}
		e := jsonLabelsEntry{Time: tm.UnixNano(), Line: o.Line, Stream: o.Labels, Metadata: o.Metadata, Parsed: o.Parsed}
		if o.Stream != nil {
			e.Stream = o.Stream
		}
		if o.StructuredMetadata != nil {
			e.Metadata = o.StructuredMetadata
		}
		es = append(es, normEntry(e))
	}
	return es
}

// serverEntries asks the server's query_range with categorize-labels,
// entries oldest first.
func serverEntries(t *testing.T, base, query string, from int64) []jsonLabelsEntry {
	t.Helper()
	u := base + "/loki/api/v1/query_range?direction=forward&limit=100&query=" + url.QueryEscape(query) +
		"&start=" + strconv.FormatInt(from, 10) + "&end=" + strconv.FormatInt(from+10e9, 10)
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("X-Loki-Response-Encoding-Flags", "categorize-labels")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Stream map[string]string
				Values [][3]json.RawMessage
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("query_range %s: %s %v", query, resp.Status, err)
	}
	var es []jsonLabelsEntry
	for _, st := range r.Data.Result {
		for _, v := range st.Values {
			var tsText, line string
			var cats struct{ StructuredMetadata, Parsed map[string]string }
			if json.Unmarshal(v[0], &tsText) != nil || json.Unmarshal(v[1], &line) != nil || json.Unmarshal(v[2], &cats) != nil {
				t.Fatalf("query_range %s: value %s", query, v)
			}
			n, _ := strconv.ParseInt(tsText, 10, 64)
			es = append(es, normEntry(jsonLabelsEntry{Time: n, Line: line, Stream: maps.Clone(st.Stream), Metadata: cats.StructuredMetadata, Parsed: cats.Parsed}))
		}
	}
	// Entries of several result streams, back in time order.
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].Time < es[j-1].Time; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	return es
}

// normEntry makes a missing object an empty one, which both mean.
func normEntry(e jsonLabelsEntry) jsonLabelsEntry {
	for _, m := range []*map[string]string{&e.Stream, &e.Metadata, &e.Parsed} {
		if *m == nil {
			*m = map[string]string{}
		}
	}
	return e
}

// TestAppendLabelsField: the fields --json adds are the bytes
// encoding/json writes for the same labels as a map (as the "labels"
// field is written), for plain, escaped, HTML, control, non-ASCII and
// invalid UTF-8 names and values.
func TestAppendLabelsField(t *testing.T) {
	for _, ls := range [][]query.Label{
		nil,
		{{Name: "a", Value: ""}},
		{{Name: "a", Value: "1"}, {Name: "b", Value: `q"\<>&`}, {Name: "c", Value: "\x00\x1f\x7f\u0085\u2028é\xff"}},
		{{Name: "__error__", Value: "JSONParserErr"}, {Name: "z\xc3", Value: "end\n"}},
	} {
		checkLabelsField(t, ls)
	}
}

func checkLabelsField(t *testing.T, ls []query.Label) {
	t.Helper()
	obj := map[string]string{}
	for _, l := range ls {
		obj[l.Name] = l.Value
	}
	j, _ := json.Marshal(obj)
	want := `,"parsed":` + string(j)
	if got := string(appendLabelsField(nil, "parsed", ls)); got != want {
		t.Errorf("%q: got %s, want %s", ls, got, want)
	}
}

// FuzzAppendLabelsField: two labels, sorted by name, against
// encoding/json's map encoding.
func FuzzAppendLabelsField(f *testing.F) {
	f.Add("a", "1", "b", "x y")
	f.Add("k", "<&>\"\\", "l", "\xff\u2028\x01")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		if n1 >= n2 {
			return // a label set: distinct names, sorted
		}
		checkLabelsField(t, []query.Label{{Name: n1, Value: v1}, {Name: n2, Value: v2}})
	})
}
