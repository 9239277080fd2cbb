package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"haystack/internal/attrs"
	"haystack/internal/ingest"
	"haystack/internal/store"
)

const categorizeHdr = "X-Loki-Response-Encoding-Flags"

// TestMetadataResponseShape: the Loki answer to a log query in both
// encodings, byte for byte (as Loki 3's marshal writes them): merged
// labels by default, one stream per label set; with categorize-labels the
// stream's labels, encodingFlags, and a third element on every value
// ({} when the entry has neither metadata nor parsed labels).
func TestMetadataResponseShape(t *testing.T) {
	stream := `{app="api"}`
	sel, err := parseSelection(`{app="api"} | logfmt`, false)
	if err != nil {
		t.Fatal(err)
	}
	sel.categorize = true
	mk := func(ts int64, meta []byte, line string) hit {
		h := hit{Time: ts, Line: []byte(line), Attrs: meta}
		if !sel.labelHit(&h, queryLabels(stream), stream, meta, h.Line) {
			t.Fatalf("%q dropped", line)
		}
		return h
	}
	hits := []hit{
		mk(3, attrs.MustPairs("trace_id", "t1"), "level=info"),
		mk(2, nil, "plain <b>"),
		mk(1, attrs.MustPairs("trace_id", "t2", "app", "m"), "x"),
	}
	enc := func(categorize bool) string {
		d := lokiData{ResultType: "streams", Result: groupStreams(hits, categorize)}
		if categorize {
			d.EncodingFlags = []string{categorizeFlag}
		}
		b, err := json.Marshal(lokiResponse{Status: "success", Data: d})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := `{"status":"success","data":{"resultType":"streams","result":[` +
		`{"stream":{"app":"api","level":"info","trace_id":"t1"},"values":[["3","level=info"]]},` +
		`{"stream":{"app":"api"},"values":[["2","plain \u003cb\u003e"]]},` +
		`{"stream":{"app":"api","app_extracted":"m","trace_id":"t2"},"values":[["1","x"]]}` +
		`],"stats":null}}`
	if got := enc(false); got != want {
		t.Errorf("merged:\n got %s\nwant %s", got, want)
	}
	want = `{"status":"success","data":{"resultType":"streams","encodingFlags":["categorize-labels"],"result":[` +
		`{"stream":{"app":"api"},"values":[` +
		`["3","level=info",{"structuredMetadata":{"trace_id":"t1"},"parsed":{"level":"info"}}],` +
		`["2","plain \u003cb\u003e",{}],` +
		`["1","x",{"structuredMetadata":{"app_extracted":"m","trace_id":"t2"}}]]}` +
		`],"stats":null}}`
	if got := enc(true); got != want {
		t.Errorf("categorized:\n got %s\nwant %s", got, want)
	}
}

// TestMetadataNativeLine: the native API's line carries the metadata as
// stored (not renamed) and its labels do not repeat it.
func TestMetadataNativeLine(t *testing.T) {
	stream := `{app="api"}`
	sel, err := parseSelection(`{app="api"} | logfmt`, false)
	if err != nil {
		t.Fatal(err)
	}
	meta := attrs.MustPairs("trace_id", "t1", "app", "m")
	h := hit{Time: base, Line: []byte("level=info"), Attrs: meta}
	if !sel.labelHit(&h, queryLabels(stream), stream, meta, h.Line) {
		t.Fatal("dropped")
	}
	b, _ := json.Marshal(nativeHit(&h))
	want := `{"ts":"1700000000000000000","time":"2023-11-14T22:13:20Z","labels":{"app":"api","level":"info"},"line":"level=info","metadata":{"app":"m","trace_id":"t1"}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	h = hit{Time: base, Labels: stream, Line: []byte("x")}
	b, _ = json.Marshal(nativeHit(&h))
	if want := `{"ts":"1700000000000000000","time":"2023-11-14T22:13:20Z","labels":{"app":"api"},"line":"x"}`; string(b) != want {
		t.Errorf("no metadata: got  %s\nwant %s", b, want)
	}
}

// TestCategorizedHeader: the header is a comma-separated list of flags.
func TestCategorizedHeader(t *testing.T) {
	for _, c := range []struct {
		v    []string
		want bool
	}{
		{nil, false}, {[]string{""}, false}, {[]string{"categorize-labels"}, true},
		{[]string{"other,categorize-labels"}, true}, {[]string{"other", " categorize-labels "}, true},
		{[]string{"categorize-label"}, false}, {[]string{"categorize-labels-x"}, false},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		for _, v := range c.v {
			r.Header.Add(categorizeHdr, v)
		}
		if got := categorized(r); got != c.want {
			t.Errorf("%q: %v", c.v, got)
		}
	}
}

// metaEntries are entries of two streams, most with metadata: trace_id
// on four of five, env (a stream label's name) on every seventh.
func metaEntries(t *testing.T, n int) []store.LabeledEntry {
	var es []store.LabeledEntry
	for i := range n {
		e := store.LabeledEntry{Labels: `{app="api", env="prod"}`, Time: base - int64(n-i)*int64(time.Second), Line: fmt.Appendf(nil, "line %d", i)}
		if i%2 == 1 {
			e.Labels = `{app="api", env="dev"}`
		}
		var kv []string
		if i%5 != 0 {
			kv = append(kv, "trace_id", "t"+strconv.Itoa(i%3))
		}
		if i%7 == 0 {
			kv = append(kv, "env", "m"+strconv.Itoa(i))
		}
		e.Attrs = attrs.MustPairs(kv...)
		es = append(es, e)
	}
	return es
}

// metaOracle is the answer a Loki 3 gives to {app="api"} (plus an optional
// trace_id="want" filter) over es, newest first, computed naively: the
// entry's labels are the stream's plus its metadata (a name the stream has
// suffixed _extracted); merged, one result stream per whole set;
// categorized, per stream label set with the metadata beside each value.
func metaOracle(t *testing.T, es []store.LabeledEntry, trace string, categorize bool) string {
	type entry struct {
		stream, meta map[string]string
		ts           int64
		line         string
	}
	var sel []entry
	for _, e := range es {
		ls, err := ingest.ParseLabels(e.Labels)
		if err != nil {
			t.Fatal(err)
		}
		st := map[string]string{}
		for _, l := range ls {
			st[l.Name] = l.Value
		}
		ps, err := attrs.Decode(e.Attrs)
		if err != nil {
			t.Fatal(err)
		}
		meta := map[string]string{}
		for _, p := range ps {
			name := p.Name
			if _, ok := st[name]; ok {
				name += "_extracted"
			}
			meta[name] = p.Value
		}
		if trace != "" && meta["trace_id"] != trace {
			continue
		}
		sel = append(sel, entry{st, meta, e.Time, string(e.Line)})
	}
	slices.SortStableFunc(sel, func(a, b entry) int { return int(b.ts - a.ts) })
	type out struct {
		Stream map[string]string `json:"stream"`
		Values [][]any           `json:"values"`
	}
	var res []*out
	idx := map[string]*out{}
	for _, e := range sel {
		key := e.stream
		if !categorize {
			key = maps.Clone(e.stream)
			maps.Copy(key, e.meta)
		}
		k, _ := json.Marshal(key)
		o := idx[string(k)]
		if o == nil {
			o = &out{Stream: key}
			idx[string(k)] = o
			res = append(res, o)
		}
		v := []any{strconv.FormatInt(e.ts, 10), e.line}
		if categorize {
			c := map[string]any{}
			if len(e.meta) > 0 {
				c["structuredMetadata"] = e.meta
			}
			v = append(v, c)
		}
		o.Values = append(o.Values, v)
	}
	data := map[string]any{"resultType": "streams", "result": res}
	if res == nil {
		data["result"] = []any{}
	}
	if categorize {
		data["encodingFlags"] = []string{"categorize-labels"}
	}
	b, _ := json.Marshal(map[string]any{"status": "success", "data": data})
	return string(b)
}

// TestMetadataQueryEndToEnd appends entries with metadata through the
// store's Writer and compares query_range and query answers, in both
// encodings, with metaOracle; and a metric sum by (trace_id) with a count
// by hand; before and after a flush.
func TestMetadataQueryEndToEnd(t *testing.T) {
	e := newEnv(t, nil)
	ts, err := e.srv.openTenant(DefaultTenant, true)
	if err != nil {
		t.Fatal(err)
	}
	es := metaEntries(t, 60)
	if err := ts.w.Append(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		for _, trace := range []string{"", "t1"} {
			qs := `{app="api"}`
			if trace != "" {
				qs += ` | trace_id="` + trace + `"`
			}
			for _, cat := range []bool{false, true} {
				var hdr []string
				if cat {
					hdr = []string{categorizeHdr, categorizeFlag}
				}
				want := metaOracle(t, es, trace, cat)
				for _, path := range []string{
					fmt.Sprintf("/loki/api/v1/query_range?query=%s&start=%d&end=%d&limit=1000", q(qs), base-int64(time.Hour), base+1),
					fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d&limit=1000", q(qs), base),
				} {
					code, body := e.get(path, hdr...)
					if code != 200 {
						t.Fatalf("%s %s: %d %s", when, path, code, body)
					}
					wantJSON(t, fmt.Sprintf("%s %s categorize=%v", when, qs, cat), dropStats(t, body), want)
				}
			}
		}
		// sum by (trace_id): entries without trace_id count under {}.
		counts := map[string]int{}
		for _, e := range es {
			v, _ := attrs.Get(e.Attrs, "trace_id")
			counts[string(v)]++
		}
		var res []string
		for _, k := range slices.Sorted(maps.Keys(counts)) {
			m := "{}"
			if k != "" {
				m = `{"trace_id":"` + k + `"}`
			}
			res = append(res, fmt.Sprintf(`{"metric":%s,"value":[%d,"%d"]}`, m, base/1e9, counts[k]))
		}
		want := `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(res, ",") + `]}}`
		code, body := e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(`sum by (trace_id) (count_over_time({app="api"}[1h]))`), base))
		if code != 200 {
			t.Fatalf("%s metric: %d %s", when, code, body)
		}
		wantJSON(t, when+" sum by (trace_id)", dropStats(t, body), want)
		// The flag is echoed for metric answers too (Loki's encodeData);
		// they are not otherwise changed.
		code, body = e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(`sum by (trace_id) (count_over_time({app="api"}[1h]))`), base), categorizeHdr, categorizeFlag)
		if code != 200 {
			t.Fatalf("%s metric: %d %s", when, code, body)
		}
		wantJSON(t, when+" sum by (trace_id) categorized", dropStats(t, body), strings.Replace(want, `"resultType":"vector",`, `"resultType":"vector","encodingFlags":["categorize-labels"],`, 1))
		// without: metadata are series labels to remove; drop removes the
		// renamed env (env_extracted).
		code, body = e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(`sum without (trace_id) (count_over_time({app="api"} | drop env_extracted [1h]))`), base))
		if code != 200 {
			t.Fatalf("%s without: %d %s", when, code, body)
		}
		wantJSON(t, when+" without", dropStats(t, body), fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":[`+
			`{"metric":{"app":"api","env":"dev"},"value":[%d,"30"]},{"metric":{"app":"api","env":"prod"},"value":[%d,"30"]}]}}`, base/1e9, base/1e9))
		// One stream: search.Run's ordered path decides the filter.
		n := 0
		for _, e := range es {
			if v, _ := attrs.Get(e.Attrs, "trace_id"); string(v) == "t1" && strings.Contains(e.Labels, "prod") {
				n++
			}
		}
		code, body = e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(`sum(count_over_time({app="api", env="prod"} | trace_id="t1" [1h]))`), base))
		if code != 200 {
			t.Fatalf("%s metric: %d %s", when, code, body)
		}
		wantJSON(t, when+" one stream", dropStats(t, body), fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,"%d"]}]}}`, base/1e9, n))
	}
	// The native API: each line's metadata as stored (not renamed), and
	// facets without metadata.
	code, body := e.get(fmt.Sprintf("/api/v1/search?q=%s&start=%d&end=%d&limit=1&direction=forward", q(`{app="api"}`), base-int64(time.Hour), base))
	want := fmt.Sprintf(`{"ts":"%d","time":"%s","labels":{"app":"api","env":"prod"},"line":"line 0","metadata":{"env":"m0"}}`, es[0].Time, time.Unix(0, es[0].Time).UTC().Format(time.RFC3339Nano))
	if first, _, _ := strings.Cut(body, "\n"); code != 200 || first != want {
		t.Errorf("native search: %d\n got %s\nwant %s", code, first, want)
	}
	code, body = e.get(fmt.Sprintf("/api/v1/facets?q=%s&start=%d&end=%d", q(`{app="api"}`), base-int64(time.Hour), base))
	if code != 200 {
		t.Fatalf("facets: %d %s", code, body)
	}
	wantJSON(t, "facets", body, `{"labels":{"app":{"api":60},"env":{"dev":30,"prod":30}}}`)
	// detected_fields: metadata fields, found by no parser (env is the
	// stored name: the field, not the renamed label).
	code, body = e.get(fmt.Sprintf("/loki/api/v1/detected_fields?query=%s&start=%d&end=%d", q(`{app="api"}`), base-int64(time.Hour), base))
	if code != 200 {
		t.Fatalf("detected_fields: %d %s", code, body)
	}
	wantJSON(t, "detected_fields", body, `{"fields":[`+
		`{"label":"env","type":"string","cardinality":9,"parsers":null},`+
		`{"label":"trace_id","type":"string","cardinality":3,"parsers":null}],"limit":1000}`)
	check("head")
	if err := ts.w.Flush(); err != nil {
		t.Fatal(err)
	}
	check("flushed")
}

// TestMetadataTail: a live tail's entries carry their metadata, merged
// into the labels by default and categorized with the header (also as
// encodingFlags at the message's top level, as Loki's tail writes it);
// a label filter on metadata selects them.
func TestMetadataTail(t *testing.T) {
	e := newEnv(t, nil)
	ts, err := e.srv.openTenant(DefaultTenant, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query string
		cat   bool
		want  string
	}{
		{`{app="api"}`, false, `{"streams":[` +
			`{"stream":{"app":"api","trace_id":"t1"},"values":[["1700000000000000001","a"]]},` +
			`{"stream":{"app":"api"},"values":[["1700000000000000002","b"]]},` +
			`{"stream":{"app":"api","app_extracted":"m","trace_id":"t2"},"values":[["1700000000000000003","c"]]}],"dropped_entries":null}`},
		{`{app="api"}`, true, `{"streams":[{"stream":{"app":"api"},"values":[` +
			`["1700000000000000001","a",{"structuredMetadata":{"trace_id":"t1"}}],` +
			`["1700000000000000002","b",{}],` +
			`["1700000000000000003","c",{"structuredMetadata":{"app_extracted":"m","trace_id":"t2"}}]]}],` +
			`"dropped_entries":null,"encodingFlags":["categorize-labels"]}`},
		{`{app="api"} | trace_id="t2" | logfmt`, true, `{"streams":[{"stream":{"app":"api"},"values":[` +
			`["1700000000000000003","c",{"structuredMetadata":{"app_extracted":"m","trace_id":"t2"}}]]}],` +
			`"dropped_entries":null,"encodingFlags":["categorize-labels"]}`},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		u := "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/loki/api/v1/tail?query=" + q(c.query) + fmt.Sprintf("&start=%d", base+int64(time.Hour))
		opts := &websocket.DialOptions{HTTPHeader: http.Header{}}
		if c.cat {
			opts.HTTPHeader.Set(categorizeHdr, categorizeFlag)
		}
		conn, _, err := websocket.Dial(ctx, u, opts)
		if err != nil {
			t.Fatal(err)
		}
		// The replay (nothing after start) comes first only when it has
		// entries: the first message is the live batch.
		es := []store.LabeledEntry{
			{Labels: `{app="api"}`, Time: base + 1, Line: []byte("a"), Attrs: attrs.MustPairs("trace_id", "t1")},
			{Labels: `{app="api"}`, Time: base + 2, Line: []byte("b")},
			{Labels: `{app="api"}`, Time: base + 3, Line: []byte("c"), Attrs: attrs.MustPairs("trace_id", "t2", "app", "m")},
		}
		if err := ts.w.Append(ctx, es); err != nil {
			t.Fatal(err)
		}
		_, b, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%s categorize=%v:\n got %s\nwant %s", c.query, c.cat, b, c.want)
		}
		conn.CloseNow()
		cancel()
	}
}

// TestMetadataUnwrap: a metric query unwraps a metadata value (Loki's
// unwrap reads any label of the entry), and label filters after the
// unwrap see metadata too.
func TestMetadataUnwrap(t *testing.T) {
	e := newEnv(t, nil)
	ts, err := e.srv.openTenant(DefaultTenant, true)
	if err != nil {
		t.Fatal(err)
	}
	var es []store.LabeledEntry
	sum := map[string]int{}
	for i := range 40 {
		route := []string{"/a", "/b"}[i%2]
		es = append(es, store.LabeledEntry{Labels: `{app="api"}`, Time: base - int64(i+1)*int64(time.Second), Line: []byte("served"),
			Attrs: attrs.MustPairs("dur_ms", strconv.Itoa(i), "route", route)})
		if i%3 != 0 {
			sum[route] += i
		}
		if i%3 == 0 {
			es[i].Attrs = attrs.MustPairs("dur_ms", strconv.Itoa(i), "route", route, "skip", "1")
		}
	}
	if err := ts.w.Append(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	code, body := e.get(fmt.Sprintf("/loki/api/v1/query?query=%s&time=%d", q(`sum by (route) (sum_over_time({app="api"} | unwrap dur_ms | skip!="1" [1h]))`), base))
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	wantJSON(t, "unwrap", dropStats(t, body), fmt.Sprintf(`{"status":"success","data":{"resultType":"vector","result":[`+
		`{"metric":{"route":"/a"},"value":[%d,"%d"]},{"metric":{"route":"/b"},"value":[%d,"%d"]}]}}`, base/1e9, sum["/a"], base/1e9, sum["/b"]))
}
