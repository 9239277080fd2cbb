package server

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"haystack/internal/query"
	"haystack/internal/store"
)

// dropEnv pushes, all in the minute before base:
//
//	{app="api", level="info"}   base-30s  level=info status=200 msg=ok
//	                            base-29s  level=error status=500 msg="db timeout"
//	{app="web"}                 base-28s  {"level":"warn","msg":"slow"}
//	                            base-27s  plain text, not json
//	{app="db", level="error"}   base-26s  {"status":503}
//
// With detected_level (the default), the entries' levels: api's two its
// stream's level label's (info), web's JSON line warn and its plain line
// unknown, db's its label's (error).
func dropEnv(t *testing.T) *testEnv { return dropEnvMode(t, true) }

func dropEnvMode(t *testing.T, levels bool) *testEnv {
	e := newEnv(t, levelMod(levels))
	push := func(labels string, ts int64, line string) {
		e.mustPush("/loki/api/v1/push", jsonPush(labels, ts, line), "Content-Type", "application/json")
	}
	push(`{"app":"api","level":"info"}`, base-30e9, `level=info status=200 msg=ok`)
	push(`{"app":"api","level":"info"}`, base-29e9, `level=error status=500 msg="db timeout"`)
	push(`{"app":"web"}`, base-28e9, `{"level":"warn","msg":"slow"}`)
	push(`{"app":"web"}`, base-27e9, `plain text, not json`)
	push(`{"app":"db","level":"error"}`, base-26e9, `{"status":503}`)
	return e
}

// rangeQuery sends query_range as Grafana's backend does (start and end
// in ns, step in ms, direction and limit), over the two minutes before
// base.
func rangeQuery(e *testEnv, query string) (int, string) {
	p := url.Values{"query": {query}, "start": {fmt.Sprint(base - 120e9)}, "end": {fmt.Sprint(base)},
		"step": {"60000ms"}, "direction": {"backward"}, "limit": {"1000"}}
	return e.get("/loki/api/v1/query_range?" + p.Encode())
}

// matrixPoints reads a matrix answer as sorted "labels@offset=value"
// strings: labels as k=v joined by ',' in name order ("" for none),
// offset in seconds from base.
func matrixPoints(t *testing.T, query, body string) []string {
	t.Helper()
	var a matrixAnswer
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil || a.Status != "success" || a.Data.ResultType != "matrix" {
		t.Fatalf("%s: want a matrix, got %v %s", query, err, body)
	}
	var out []string
	for _, s := range a.Data.Result {
		var ls []string
		for k, v := range s.Metric {
			ls = append(ls, k+"="+v)
		}
		slices.Sort(ls)
		for _, v := range s.Values {
			sec, _ := v[0].(json.Number).Int64()
			out = append(out, fmt.Sprintf("%s@%d=%v", strings.Join(ls, ","), sec-base/1e9, v[1]))
		}
	}
	slices.Sort(out)
	return out
}

// streamLabels reads a streams answer as sorted "labels:count" strings,
// labels as k=v joined by ',' in name order.
func streamLabels(t *testing.T, query, body string) []string {
	t.Helper()
	var out []string
	eachStream(t, query, body, func(labels string, values [][2]string) {
		out = append(out, fmt.Sprintf("%s:%d", labels, len(values)))
	})
	slices.Sort(out)
	return out
}

// eachStream decodes a streams answer and calls fn with each stream's
// labels (k=v joined by ',' in name order) and values.
func eachStream(t *testing.T, query, body string, fn func(labels string, values [][2]string)) {
	t.Helper()
	var a struct {
		Status string
		Data   struct {
			ResultType string
			Result     []struct {
				Stream map[string]string
				Values [][2]string
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil || a.Status != "success" || a.Data.ResultType != "streams" {
		t.Fatalf("%s: want streams, got %v %s", query, err, body)
	}
	for _, s := range a.Data.Result {
		var ls []string
		for k, v := range s.Stream {
			ls = append(ls, k+"="+v)
		}
		slices.Sort(ls)
		fn(strings.Join(ls, ","), s.Values)
	}
}

// TestDropStageExploreLogsVolume sends Grafana 11/12 Explore's logs-volume
// query, `sum by (level, detected_level) (count_over_time(<expr> | drop
// __error__[$__auto]))`, through query_range the way Grafana's backend
// does, for a query without and with a parser. Without the drop, the
// json query is a pipeline error (400), as in Loki.
//
// It runs with detected_level (want) and without (wantOff).
func TestDropStageExploreLogsVolume(t *testing.T) {
	levelModes(t, testDropStageExploreLogsVolume)
}

func testDropStageExploreLogsVolume(t *testing.T, on bool) {
	e := dropEnvMode(t, on)
	for _, c := range []struct {
		expr          string
		want, wantOff string
	}{
		// Levels from the stream labels; web has none (its entries'
		// detected_level: warn for the JSON line, unknown for the other).
		{`{app=~".+"}`, `detected_level=error,level=error@0=1 detected_level=info,level=info@0=2 detected_level=unknown@0=1 detected_level=warn@0=1`,
			`@0=2 level=error@0=1 level=info@0=2`},
		{`{app=~".+"} |= ""`, `detected_level=error,level=error@0=1 detected_level=info,level=info@0=2 detected_level=unknown@0=1 detected_level=warn@0=1`,
			`@0=2 level=error@0=1 level=info@0=2`},
		// The api lines are not JSON: their __error__ is dropped and they
		// count under the stream's level; web's JSON line has level warn.
		{`{app=~".+"} | json`, `detected_level=error,level=error@0=1 detected_level=info,level=info@0=2 detected_level=unknown@0=1 detected_level=warn,level=warn@0=1`,
			`@0=1 level=error@0=1 level=info@0=2 level=warn@0=1`},
		// logfmt: the api lines' level is extracted as level_extracted
		// (the stream has level); status >= 500 keeps line 2 and, as the
		// web and db lines have no status, drops them.
		{`{app=~".+"} | logfmt | status >= 500`, `detected_level=info,level=info@0=1`, `level=info@0=1`},
	} {
		if !on {
			c.want = c.wantOff
		}
		vol := `sum by (level, detected_level) (count_over_time(` + c.expr + ` | drop __error__[1m]))`
		code, body := rangeQuery(e, vol)
		if code != 200 {
			t.Fatalf("%s: %d %s", vol, code, body)
		}
		if got, want := matrixPoints(t, vol, body), strings.Fields(c.want); !slices.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", vol, got, want)
		}
	}
	// The same json query without the drop stage fails as Loki's does.
	vol := `sum by (level, detected_level) (count_over_time({app=~".+"} | json[1m]))`
	if code, body := rangeQuery(e, vol); code != 400 || !strings.Contains(body, "pipeline error: 'JSONParserErr'") {
		t.Errorf("%s: %d %s; want 400 pipeline error", vol, code, body)
	}
}

// Metric queries fail with a pipeline error only when __error__ survives
// the pipeline: dropping __error_details__ alone, or a keep stage (which
// never removes the error labels), leaves it.
func TestDropStageMetricPipelineError(t *testing.T) {
	e := dropEnv(t)
	for _, c := range []struct {
		query string
		code  int
		want  string // points separated by "; ", or the error text for a 400
	}{
		{`count_over_time({app="web"} | json | drop __error_details__ [1m])`, 400, `pipeline error: 'JSONParserErr'`},
		{`count_over_time({app="web"} | json | keep app [1m])`, 400, `pipeline error: 'JSONParserErr'`},
		{`count_over_time({app="web"} | json | drop __error__="LogfmtParserErr" [1m])`, 400, `pipeline error: 'JSONParserErr'`},
		{`count_over_time({app="web"} | json | drop __error__=~"JSON.*" [1m])`, 200,
			`__error_details__=invalid JSON,app=web,detected_level=unknown,service_name=web@0=1; app=web,detected_level=warn,level=warn,msg=slow,service_name=web@0=1`},
		{`count_over_time({app="web"} | json | keep app | drop __error__, __error_details__ [1m])`, 200, `app=web@0=2`},
		// A later label filter sees no error after the drop.
		{`count_over_time({app="web"} | json | drop __error__ | __error__="" [1m])`, 200,
			`__error_details__=invalid JSON,app=web,detected_level=unknown,service_name=web@0=1; app=web,detected_level=warn,level=warn,msg=slow,service_name=web@0=1`},
		// Stream labels and matchers: status 500 is dropped, 200 kept.
		{`sum by (status) (count_over_time({app="api"} | logfmt | drop status="500" [1m]))`, 200, `@0=1; status=200@0=1`},
		{`sum(count_over_time({app=~".+"} | drop app, level [1m]))`, 200, `@0=5`},
		// service_name is the one discovered from app at push; each
		// entry's detected_level stays.
		{`count_over_time({app=~".+"} | drop app, level, service_name [1m])`, 200, `detected_level=error@0=1; detected_level=info@0=2; detected_level=unknown@0=1; detected_level=warn@0=1`},
		{`count_over_time({app=~".+"} | drop app, level, service_name, detected_level [1m])`, 200, `@0=5`},
		{`count_over_time({app=~".+"} | drop app, level [1m])`, 200, `detected_level=error,service_name=db@0=1; detected_level=info,service_name=api@0=2; detected_level=unknown,service_name=web@0=1; detected_level=warn,service_name=web@0=1`},
	} {
		code, body := rangeQuery(e, c.query)
		if code != c.code {
			t.Errorf("%s: %d %s; want %d", c.query, code, body, c.code)
			continue
		}
		if code != 200 {
			if !strings.Contains(body, c.want) {
				t.Errorf("%s: %s; want %q", c.query, body, c.want)
			}
			continue
		}
		if got, want := matrixPoints(t, c.query, body), strings.Split(c.want, "; "); !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", c.query, got, want)
		}
	}
}

// Log queries: the streams of the answer carry the labels left after drop
// and keep, stream labels included; Logs Drilldown's suffix gives streams
// without __error__.
func TestDropStageLogQueries(t *testing.T) {
	e := dropEnv(t)
	for _, c := range []struct{ query, want string }{ // want: "; "-separated
		{`{app=~".+"} | json | logfmt | drop __error__, __error_details__`,
			`app=api,detected_level=info,level=info,level_extracted=error,msg=db timeout,service_name=api,status=500:1; ` +
				`app=api,detected_level=info,level=info,level_extracted=info,msg=ok,service_name=api,status=200:1; ` +
				`app=db,detected_level=error,level=error,service_name=db,status=503:1; ` +
				`app=web,detected_level=unknown,service_name=web:1; ` +
				`app=web,detected_level=warn,level=warn,msg=slow,service_name=web:1`},
		{`{app="api"} | drop level`, `app=api,detected_level=info,service_name=api:2`},
		{`{app="api"} | drop level, detected_level`, `app=api,service_name=api:2`},
		{`{app="api"} | drop level="error"`, `app=api,detected_level=info,level=info,service_name=api:2`},
		{`{app="api"} | logfmt | keep status, level="error"`, `status=200:1; status=500:1`},
		{`{app="api"} | logfmt | keep status, level_extracted=~"err.*"`, `level_extracted=error,status=500:1; status=200:1`},
		{`{app=~".+"} | keep nothing`, `:5`},
		// Drop never filters; a label filter after it sees the result.
		{`{app=~".+"} | drop level | level=""`, `app=api,detected_level=info,service_name=api:2; app=db,detected_level=error,service_name=db:1; app=web,detected_level=unknown,service_name=web:1; app=web,detected_level=warn,service_name=web:1`},
		{`{app=~".+"} | drop level | level="info"`, ``},
		// Comments, with a bracket and a quote in them.
		{"{app=\"api\"} # the [api] \"service\n | drop level # all of it", `app=api,detected_level=info,service_name=api:2`},
		{"# api only\n{app=\"api\"} | drop level", `app=api,detected_level=info,service_name=api:2`},
	} {
		code, body := rangeQuery(e, c.query)
		if code != 200 {
			t.Errorf("%s: %d %s", c.query, code, body)
			continue
		}
		var want []string
		if c.want != "" {
			want = strings.Split(c.want, "; ")
		}
		if got := streamLabels(t, c.query, body); !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", c.query, got, want)
		}
	}
}

// Comments in metric queries, including a leading one and a range
// function whose log query holds a comment with a '[' and a quote in it.
func TestDropStageComments(t *testing.T) {
	e := dropEnv(t)
	for _, query := range []string{
		"sum by (level) (count_over_time({app=~\".+\"} | drop __error__[1m]))",
		"# volume by level\nsum by (level) (count_over_time({app=~\".+\"} | drop __error__[1m]))",
		"sum by (level) ( # by level\n  count_over_time({app=~\".+\"} # all apps [not a range] \"x\n  | drop __error__ [1m]) # per minute\n)",
		"sum by (level) (count_over_time({app=~\".+\"} # all apps [x] \"y\n [1m] | drop __error__ # and ) here\n))",
	} {
		code, body := rangeQuery(e, query)
		if code != 200 {
			t.Errorf("%q: %d %s", query, code, body)
			continue
		}
		if got, want := matrixPoints(t, query, body), []string{"@0=2", "level=error@0=1", "level=info@0=2"}; !slices.Equal(got, want) {
			t.Errorf("%q:\n got %v\nwant %v", query, got, want)
		}
	}
	// A comment that swallows the closing parenthesis is an error.
	if code, body := rangeQuery(e, `sum(count_over_time({app="api"}[1m])) # )`); code != 200 {
		t.Errorf("trailing comment: %d %s", code, body)
	}
	if code, body := rangeQuery(e, `sum(count_over_time({app="api"}[1m]) # )`); code != 400 {
		t.Errorf("comment hiding the closing ): %d %s; want 400", code, body)
	}
}

// A live tail's entries carry the labels left after drop and keep too.
func TestDropStageTail(t *testing.T) {
	for _, c := range []struct{ query, line, want string }{
		{`{app="api"} | logfmt | keep app, status`, `status=500 level=error`, `{app="api", status="500"}`},
		{`{app="api"} | drop level`, `x`, `{app="api"}`},
		{`{app="api"} | drop level="debug"`, `x`, `{app="api", level="info"}`},
		{`{app="api"} | json | drop __error__, __error_details__`, `not json`, `{app="api", level="info"}`},
		{`{app="api"} | json`, `not json`, `{__error__="JSONParserErr", __error_details__="invalid JSON", app="api", level="info"}`},
	} {
		sel, err := parseSelection(c.query, false)
		if err != nil {
			t.Fatal(err)
		}
		f := &tailFilter{sel: sel, cache: map[string][]query.Label{}}
		got, ok := f.match(&store.LabeledEntry{Labels: `{app="api", level="info"}`, Time: base, Line: []byte(c.line)})
		if !ok || got.Labels != c.want {
			t.Errorf("%s on %q: %q %v, want %q", c.query, c.line, got.Labels, ok, c.want)
		}
	}
}
