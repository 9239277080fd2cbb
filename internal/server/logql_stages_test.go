package server

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// stageEnv is dropEnv plus, in the same minute:
//
//	{app="color"}  base-25s  "\x1b[31mERROR\x1b[0m disk full"
//	               base-24s  {"_entry":"packed line","pod":"p1"}
//
// (detected_level: see dropEnv; the colored ERROR is error, the
// escape's parameters being no word, and the packed line, with no level
// field or word, is unknown.)
func stageEnv(t *testing.T) *testEnv {
	e := dropEnv(t)
	// jsonPush's %q would write \x1b, which JSON lacks.
	body := strings.Replace(string(jsonPush(`{"app":"color"}`, base-25e9, "ESC[31mERRORESC[0m disk full")), "ESC", `\u001b`, 2)
	e.mustPush("/loki/api/v1/push", []byte(body), "Content-Type", "application/json")
	e.mustPush("/loki/api/v1/push", jsonPush(`{"app":"color"}`, base-24e9, `{"_entry":"packed line","pod":"p1"}`), "Content-Type", "application/json")
	return e
}

// stageLines reads a streams answer as sorted "labels|line" strings.
func stageLines(t *testing.T, query, body string) []string {
	t.Helper()
	var out []string
	eachStream(t, query, body, func(labels string, values [][2]string) {
		for _, v := range values {
			out = append(out, labels+"|"+v[1])
		}
	})
	slices.Sort(out)
	return out
}

// The new stages through query_range, log and metric queries; expected
// answers worked out by hand from the pushed lines.
func TestLogQLStagesLokiAPI(t *testing.T) {
	e := stageEnv(t)
	for _, c := range []struct {
		query string
		want  []string
	}{
		{`{app="api"} | pattern "level=<lvl> status=<status> <_>" | line_format "{{.status}} {{.lvl | upper}}"`, []string{
			"app=api,detected_level=info,level=info,lvl=error,service_name=api,status=500|500 ERROR",
			"app=api,detected_level=info,level=info,lvl=info,service_name=api,status=200|200 INFO",
		}},
		// A line filter after line_format tests the new line.
		// level is a stream label: the line's is level_extracted.
		{`{app="api"} | logfmt | line_format "{{.msg}}" |= "db" | drop level, status, msg, service_name`, []string{
			"app=api,detected_level=info,level_extracted=error|db timeout",
		}},
		// ... and "level=" is in every stored line, in no formatted one.
		{`{app="api"} | line_format "{{.app}}" |= "level="`, nil},
		{`{app="api"} |= "level=" | regexp "msg=(?P<m>\"[^\"]*\"|\\S+)" | label_format level=m | keep app, level`, []string{
			"app=api,level=\"db timeout\"|level=error status=500 msg=\"db timeout\"",
			"app=api,level=ok|level=info status=200 msg=ok",
		}},
		{`{app="color"} | decolorize |= "ERROR disk"`, []string{"app=color,detected_level=error,service_name=color|ERROR disk full"}},
		{`{app="color"} | unpack |= "packed"`, []string{"app=color,detected_level=unknown,pod=p1,service_name=color|packed line"}},
		// keep leaves __error__ (Loki's rule).
		{`{app="web"} | json l="level" | keep app, l`, []string{
			"__error__=JSONParserErr,__error_details__=invalid JSON,app=web|plain text, not json",
			"app=web,l=warn|{\"level\":\"warn\",\"msg\":\"slow\"}",
		}},
	} {
		code, body := rangeQuery(e, c.query)
		if code != 200 {
			t.Errorf("%s: %d %s", c.query, code, body)
			continue
		}
		if got := stageLines(t, c.query, body); !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.query, got, c.want)
		}
	}
	for _, c := range []struct {
		query string
		want  string
	}{
		{`sum by (status) (count_over_time({app="api"} | pattern "<_> status=<status> <_>" [1m]))`, "status=200@0=1 status=500@0=1"},
		{`sum by (status) (count_over_time({app="api"} | regexp "status=(?P<status>\\d+)" [1m]))`, "status=200@0=1 status=500@0=1"},
		{`sum(sum_over_time({app="api"} | regexp "status=(?P<code>\\d+)" | unwrap code [1m]))`, "@0=700"},
		{`max by (app) (max_over_time({app="api"} | pattern "<_> status=<code> <_>" | unwrap code [1m]))`, "app=api@0=500"},
		// bytes_over_time measures the formatted line.
		{`sum(bytes_over_time({app="api"} | line_format "xy" [1m]))`, "@0=4"},
		{`sum by (lvl) (count_over_time({app="api"} | label_format lvl=level [1m]))`, "lvl=info@0=2"},
		{`sum(count_over_time({app=~"api|web"} | line_format "{{.app}}" |= "web" [1m]))`, "@0=2"},
		// A failing template is a pipeline error in a metric query, as in
		// Loki, unless __error__ is dropped or filtered.
		{`sum(count_over_time({app="api"} | line_format "{{ repeat -1 \"x\" }}" | __error__="" [1m]))`, ""},
	} {
		code, body := rangeQuery(e, c.query)
		if code != 200 {
			t.Errorf("%s: %d %s", c.query, code, body)
			continue
		}
		got := matrixPoints(t, c.query, body)
		want := strings.Fields(c.want)
		if len(want) == 0 {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", c.query, got, want)
		}
	}
	code, body := rangeQuery(e, `sum(count_over_time({app="api"} | line_format "{{ repeat -1 \"x\" }}" [1m]))`)
	if code != 400 || !strings.Contains(body, "TemplateFormatErr") {
		t.Errorf("template error in a metric query: %d %s", code, body)
	}
	code, body = rangeQuery(e, `{app="api"} | line_format "{{ .x | nosuch }}"`)
	if code != 400 || !strings.Contains(body, `function \"nosuch\" not defined`) {
		t.Errorf("unknown function: %d %s", code, body)
	}
}

// The new stages through the pre-grouped sum (metaFree may read blocks
// without metadata): the answer equals the range vector over every full
// label set, then summed, on preGroupStore's entries with metadata. A
// stage that can set labels from metadata (label_format, line_format
// followed by a filter) must keep metadata.
func TestLogQLStagesPreGroup(t *testing.T) {
	for _, c := range []struct {
		q    string
		want bool
	}{
		{`sum by (app) (count_over_time({app="a"} | regexp "level=(?P<lvl>\\w+)" [1m]))`, true},
		{`sum by (app) (count_over_time({app="a"} | pattern "level=<lvl> <_>" [1m]))`, true},
		{`sum by (app) (count_over_time({app="a"} | label_format app=route [1m]))`, false},
		{`sum(count_over_time({app="a"} | line_format "{{.route}}" |= "/a" [1m]))`, false},
		{`sum(count_over_time({app="a"} | label_format x="{{.route}}" [1m]))`, false},
	} {
		me, err := parseMetric(c.q)
		if err != nil {
			t.Fatal(err)
		}
		sel, err := parseSelection(me.inner.log, false)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if got := preGroupOf(me).metaFree(sel); got != c.want {
			t.Errorf("%s: metaFree %v, want %v", c.q, got, c.want)
		}
	}
	e := newEnv(t, nil)
	ts := preGroupStore(t, e)
	answered := 0
	for _, qs := range []string{
		`sum by (app) (count_over_time({app=~".+"} | label_format app=route [1h]))`,
		`sum by (x) (count_over_time({app=~".+"} | label_format x="{{.route}}-{{.region}}" [1h]))`,
		`sum (count_over_time({app=~".+"} | line_format "{{.route}}" |= "/a" [1h]))`,
		`sum by (lvl) (count_over_time({app=~".+"} | pattern "level=<lvl> <_>" [1h]))`,
		`sum by (lvl, route) (bytes_over_time({app=~".+"} | regexp "level=(?P<lvl>\\w+)" | line_format "{{.lvl}}" [1h]))`,
		`sum by (app) (count_over_time({app="a"} | regexp "took=(?P<app>\\d)" [1h]))`,
		`sum by (app_extracted) (count_over_time({app="a"} | regexp "took=(?P<app>\\d)" [1h]))`,
	} {
		me, err := parseMetric(qs)
		if err != nil {
			t.Fatalf("%s: %v", qs, err)
		}
		start, step := base-1800e9, int64(600e9)
		var steps []int64
		for t := start; t <= base; t += step {
			steps = append(steps, t)
		}
		got, gotErr := evalMetric(context.Background(), ts, me, start, base, step)
		in, wantErr := evalRange(context.Background(), ts, me.inner, start, base, steps, nil)
		if gotErr != nil || wantErr != nil {
			t.Fatalf("%s: %v, %v", qs, gotErr, wantErr)
		}
		want := aggregate(me, in)
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("%s: %d series, want %d (not 0)", qs, len(got), len(want))
		}
		for j := range want {
			g, w := got[j], want[j]
			if g.labels.String() != w.labels.String() || !slices.Equal(g.ts, w.ts) || !slices.Equal(g.vs, w.vs) {
				t.Fatalf("%s: series %d %s %v %v, want %s %v %v", qs, j, g.labels, g.ts, g.vs, w.labels, w.ts, w.vs)
			}
		}
		answered += len(want)
	}
	if answered < 15 {
		t.Errorf("only %d series answered", answered)
	}
}
