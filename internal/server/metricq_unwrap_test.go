package server

// Range functions over unwrapped label values, checked against an oracle
// written from Loki's metric query documentation (unwrapped range
// aggregations) and Prometheus's definitions of the _over_time functions,
// independently of metricq.go:
//
//   - an entry's labels are its stream's plus what | logfmt extracts;
//     an entry without the unwrapped label gives no sample; the label's
//     value is a float (strconv.ParseFloat), or with duration(...) /
//     duration_seconds(...) a Go duration in seconds, or with bytes(...)
//     a size ("10KB" = 10000, "1.5KiB" = 1536); the unwrapped label leaves
//     the series' labels;
//   - a value that does not convert makes a sample carrying
//     __error__="SampleExtractionErr": a filter | __error__="" after the
//     unwrap drops it, else the query fails with a pipeline error (400)
//     if that series has a point;
//   - at each step t the samples in (t-range, t]: sum, avg (sum/n), max,
//     min, first and last by time, population variance and its root,
//     quantile (linear interpolation between closest ranks), rate (sum /
//     range seconds), rate_counter (Prometheus's extrapolated counter
//     rate; at least two samples); no sample, no point;
//   - by/without (...) after the function group the samples before the
//     function, as if the labels had been reduced first.
//
// Values are compared within 1e-9 (relative), times exactly.
//
// HAY_METRICSEM_SEED=N reruns one seed.

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

type uwEntry struct {
	stream int
	t      int64
	kv     [][2]string // logfmt fields
}

type uwData struct {
	streams []map[string]string
	es      []uwEntry
	levels  bool // the server adds detected_level (wantLevel's)
}

var (
	uwLat  = []string{"1", "2.5", "-3", "0", "1e3", "7", "12", "abc"}
	uwDur  = []string{"150ms", "2s", "1m", "1.5h", "0s", "90us", "bad"}
	uwSize = []string{"10KB", "1.5KiB", "42", "3MB", "7 B", "2k", "x"}
)

func uwGen(r *rand.Rand) *uwData {
	d := &uwData{streams: []map[string]string{{"app": "a"}, {"app": "a", "env": "prod"}, {"app": "b"}}}
	for range 60 + r.IntN(120) {
		e := uwEntry{stream: r.IntN(len(d.streams)), t: base - 600e9 + r.Int64N(600e9)}
		if r.IntN(6) == 0 {
			e.t = base - 600e9 + r.Int64N(60)*10e9 // on a step
		}
		if r.IntN(2) == 0 {
			e.kv = append(e.kv, [2]string{"level", []string{"info", "error"}[r.IntN(2)]})
		}
		for _, f := range []struct {
			name string
			vals []string
		}{{"lat", uwLat}, {"dur", uwDur}, {"size", uwSize}} {
			if r.IntN(5) > 0 {
				v := f.vals[r.IntN(len(f.vals)-1)]
				if r.IntN(25) == 0 {
					v = f.vals[len(f.vals)-1] // the bad one
				}
				e.kv = append(e.kv, [2]string{f.name, v})
			}
		}
		d.es = append(d.es, e)
	}
	return d
}

func (e uwEntry) line() string {
	var parts []string
	for _, kv := range e.kv {
		v := kv[1]
		if strings.Contains(v, " ") {
			v = strconv.Quote(v)
		}
		parts = append(parts, kv[0]+"="+v)
	}
	return strings.Join(parts, " ")
}

func uwPush(t *testing.T, env *testEnv, r *rand.Rand, d *uwData) {
	t.Helper()
	perm := r.Perm(len(d.es))
	for i := 0; i < len(perm); {
		n := 1 + r.IntN(40)
		var ps []PushStream
		for s := range d.streams {
			var es []PushEntry
			for _, j := range perm[i:min(i+n, len(perm))] {
				if d.es[j].stream == s {
					es = append(es, PushEntry{d.es[j].t, d.es[j].line()})
				}
			}
			if es != nil {
				ps = append(ps, PushStream{Labels: msLabelsText(d.streams[s]), Entries: es})
			}
		}
		env.mustPush("/loki/api/v1/push", protoBody(ps), "Content-Type", "application/x-protobuf")
		i += n
		if k := r.IntN(6); k < 2 {
			env.flushDefault(t, k == 0)
		}
	}
}

type uwQuery struct {
	fn, sel, filter, label, conv, post string
	q                                  float64
	selApp                             string // "" any
	errLevel                           bool   // the filter keeps level=error only
	rng                                int64
	rngText                            string
	grouping                           string // "", "by", "without"
	by                                 []string
}

func (u *uwQuery) String() string {
	target := u.label
	if u.conv != "" {
		target = u.conv + "(" + u.label + ")"
	}
	q := ""
	if u.fn == "quantile_over_time" {
		q = strconv.FormatFloat(u.q, 'f', -1, 64) + ", "
	}
	g := ""
	if u.grouping != "" {
		g = " " + u.grouping + " (" + strings.Join(u.by, ", ") + ")"
	}
	return fmt.Sprintf("%s(%s%s | logfmt%s | unwrap %s%s [%s])%s", u.fn, q, u.sel, u.filter, target, u.post, u.rngText, g)
}

var uwFns = []string{"sum_over_time", "avg_over_time", "max_over_time", "min_over_time", "first_over_time", "last_over_time",
	"stdvar_over_time", "stddev_over_time", "quantile_over_time", "rate", "rate_counter"}

func uwRand(r *rand.Rand) *uwQuery {
	u := &uwQuery{fn: uwFns[r.IntN(len(uwFns))], sel: `{app=~".+"}`}
	if r.IntN(3) == 0 {
		u.sel, u.selApp = `{app="a"}`, "a"
	}
	if r.IntN(4) == 0 {
		u.filter, u.errLevel = ` | level="error"`, true
	}
	switch r.IntN(6) {
	case 0, 1, 2:
		u.label = "lat"
	case 3:
		u.label, u.conv = "dur", []string{"duration", "duration_seconds"}[r.IntN(2)]
	case 4:
		u.label, u.conv = "size", "bytes"
	default:
		u.label = []string{"dur", "size"}[r.IntN(2)] // as floats: mostly errors
	}
	if r.IntN(3) > 0 {
		u.post = ` | __error__=""`
	}
	u.q = []float64{0, 0.25, 0.5, 0.9, 0.99, 1}[r.IntN(6)]
	rg := []struct {
		text string
		ns   int64
	}{{"10s", 10e9}, {"30s", 30e9}, {"1m", 60e9}, {"5m", 300e9}}[r.IntN(4)]
	u.rng, u.rngText = rg.ns, rg.text
	if !slices.Contains([]string{"sum_over_time", "rate", "rate_counter"}, u.fn) && r.IntN(2) == 0 {
		u.grouping = []string{"by", "without"}[r.IntN(2)]
		u.by = []string{}
		for _, l := range []string{"app", "env", "level"} {
			if r.IntN(2) == 0 {
				u.by = append(u.by, l)
			}
		}
	}
	return u
}

// uwConvert converts a value as the query asks (the sizes drawn are
// few: their values are spelled out).
func uwConvert(conv, v string) (float64, bool) {
	switch conv {
	case "duration", "duration_seconds":
		d, err := time.ParseDuration(v)
		return d.Seconds(), err == nil
	case "bytes":
		f, ok := map[string]float64{"10KB": 10000, "1.5KiB": 1536, "42": 42, "3MB": 3e6, "7 B": 7, "2k": 2000}[v]
		return f, ok
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}

type uwSample struct {
	t int64
	v float64
}

// eval returns the expected series (key → step → value), or whether the
// query must fail with a pipeline error.
func (u *uwQuery) eval(d *uwData, steps []int64) (map[string]map[int64]float64, map[string]map[string]string, bool) {
	groups := map[string][]uwSample{}
	glabels := map[string]map[string]string{}
	errd := map[string]bool{}
	for _, e := range d.es {
		st := withServiceName(d.streams[e.stream])
		if u.selApp != "" && st["app"] != u.selApp {
			continue
		}
		ls := maps.Clone(st)
		if d.levels {
			if l := wantLevel(st, nil, e.line()); l != "" {
				ls["detected_level"] = l // the entry's metadata, a label
			}
		}
		for _, kv := range e.kv {
			ls[kv[0]] = kv[1]
		}
		if u.errLevel && ls["level"] != "error" {
			continue
		}
		raw, ok := ls[u.label]
		if !ok {
			continue
		}
		delete(ls, u.label)
		v, ok := uwConvert(u.conv, raw)
		bad := !ok
		if bad {
			if u.post != "" {
				continue
			}
			ls["__error__"] = "SampleExtractionErr"
			ls["__error_details__"] = raw // stands for the details: one series per bad value
		}
		if u.grouping != "" && !bad {
			g := map[string]string{}
			for k, x := range ls {
				if slices.Contains(u.by, k) == (u.grouping == "by") {
					g[k] = x
				}
			}
			ls = g
		}
		k := msKey(ls)
		groups[k] = append(groups[k], uwSample{e.t, v})
		glabels[k], errd[k] = ls, bad
	}
	out := map[string]map[int64]float64{}
	for k, ss := range groups {
		slices.SortFunc(ss, func(a, b uwSample) int {
			if a.t != b.t {
				return cmp.Compare(a.t, b.t)
			}
			return cmp.Compare(a.v, b.v)
		})
		pts := map[int64]float64{}
		for _, t := range steps {
			var w []uwSample
			for _, s := range ss {
				if s.t > t-u.rng && s.t <= t {
					w = append(w, s)
				}
			}
			if v, ok := u.apply(w, t); ok {
				pts[t] = v
			}
		}
		if len(pts) == 0 {
			continue
		}
		if errd[k] {
			return nil, nil, true
		}
		out[k] = pts
	}
	return out, glabels, false
}

func (u *uwQuery) apply(w []uwSample, t int64) (float64, bool) {
	if len(w) == 0 {
		return 0, false
	}
	var vs []float64
	sum := 0.0
	for _, s := range w {
		vs = append(vs, s.v)
		sum += s.v
	}
	n := float64(len(vs))
	switch u.fn {
	case "sum_over_time":
		return sum, true
	case "avg_over_time":
		return sum / n, true
	case "rate":
		return sum / (float64(u.rng) / 1e9), true
	case "max_over_time":
		return slices.Max(vs), true
	case "min_over_time":
		return slices.Min(vs), true
	case "first_over_time":
		return vs[0], true
	case "last_over_time":
		return vs[len(vs)-1], true
	case "stdvar_over_time", "stddev_over_time":
		mean := sum / n
		ss := 0.0
		for _, v := range vs {
			ss += (v - mean) * (v - mean)
		}
		if u.fn == "stddev_over_time" {
			return math.Sqrt(ss / n), true
		}
		return ss / n, true
	case "quantile_over_time":
		s := slices.Sorted(slices.Values(vs))
		pos := u.q * (n - 1)
		i := int(pos)
		if i+1 >= len(s) {
			return s[len(s)-1], true
		}
		return s[i] + (s[i+1]-s[i])*(pos-float64(i)), true
	}
	// rate_counter: the increase (resets add the value before them),
	// extrapolated from the sampled interval towards the window's edges
	// (all the way when the gap is within 1.1 average intervals, else
	// half an interval; not before the time the counter would have been
	// zero), per second of the range.
	if len(w) < 2 {
		return 0, false
	}
	inc := vs[len(vs)-1] - vs[0]
	for i := 1; i < len(vs); i++ {
		if vs[i] < vs[i-1] {
			inc += vs[i-1]
		}
	}
	sec := func(ns int64) float64 { return float64(ns) / 1e9 }
	sampled := sec(w[len(w)-1].t - w[0].t)
	avg := sampled / float64(len(w)-1)
	toStart, toEnd := sec(w[0].t-(t-u.rng)), sec(t-w[len(w)-1].t)
	if inc > 0 && vs[0] >= 0 && sampled*(vs[0]/inc) < toStart {
		toStart = sampled * (vs[0] / inc)
	}
	ext := sampled
	for _, gap := range []float64{toStart, toEnd} {
		if gap < avg*1.1 {
			ext += gap
		} else {
			ext += avg / 2
		}
	}
	return inc * ext / sampled / (float64(u.rng) / 1e9), true
}

func uwClose(a, b float64) bool {
	if a == b || math.IsNaN(a) && math.IsNaN(b) {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))+1e-12
}

func TestMetricUnwrapOracle(t *testing.T) {
	var total, fails, points int
	msEach(t, 3, 0x7577, func(t *testing.T, seed uint64, r *rand.Rand) {
		env := newEnv(t, nil)
		d := uwGen(r)
		d.levels = env.levelsOn()
		uwPush(t, env, r, d)
		for range 120 {
			u := uwRand(r)
			p := url.Values{"query": {u.String()}}
			path := "/loki/api/v1/query_range"
			instant := r.IntN(4) == 0
			var steps []int64
			if instant {
				at := d.es[r.IntN(len(d.es))].t + int64(r.IntN(3)-1)
				if r.IntN(2) == 0 { // on the grid of entries on a step: windows' edges on entries
					at = base - 600e9 + r.Int64N(61)*10e9
				}
				path = "/loki/api/v1/query"
				p.Set("time", strconv.FormatInt(at, 10))
				steps = []int64{at}
			} else {
				start := base - 620e9 + r.Int64N(600e9)
				if r.IntN(2) == 0 {
					start = base - 600e9 + r.Int64N(60)*10e9
				}
				step := []int64{1e9, 5e9, 10e9, 60e9}[r.IntN(4)]
				end := start + int64(r.IntN(60))*step
				p.Set("start", strconv.FormatInt(start, 10))
				p.Set("end", strconv.FormatInt(end, 10))
				p.Set("step", time.Duration(step).String())
				for s := start; s <= end; s += step {
					steps = append(steps, s)
				}
			}
			desc := "GET " + path + "?" + p.Encode() + "\n" + u.String()
			want, wlabels, fail := u.eval(d, steps)
			got, code, body := boAnswer(t, env, path+"?"+p.Encode(), instant)
			total++
			if fail {
				fails++
				if code != 400 || !strings.Contains(body, "pipeline error: 'SampleExtractionErr'") {
					t.Fatalf("%s: %d %.300s; want a 400 pipeline error", desc, code, body)
				}
				continue
			}
			if code != 200 {
				t.Fatalf("%s: %d %.400s", desc, code, body)
			}
			if len(got) != len(want) {
				t.Fatalf("%s: %d series, want %d: %v", desc, len(got), len(want), wlabels)
			}
			for i, se := range got {
				k := msKey(se.labels)
				w, ok := want[k]
				if !ok {
					t.Fatalf("%s: unexpected series %v; want %v", desc, se.labels, slices.Collect(maps.Keys(want)))
				}
				if i > 0 && boLabels(got[i-1].labels).Compare(boLabels(se.labels)) >= 0 {
					t.Fatalf("%s: series not sorted by labels", desc)
				}
				if len(se.pts) != len(w) || !slices.IsSorted(se.order) {
					t.Fatalf("%s: series %v: points %v, want %v", desc, se.labels, se.pts, w)
				}
				for ts, v := range w {
					if g, ok := se.pts[ts]; !ok || !uwClose(g, v) {
						t.Fatalf("%s: series %v at %d: %v (present %v), want %v", desc, se.labels, ts, g, ok, v)
					}
				}
				points += len(w)
			}
		}
	})
	t.Logf("%d unwrap queries compared (%d pipeline errors), %d points", total, fails, points)
}

// TestMetricUnwrapExact: hand-computed answers at base over the window
// (base-60s, base]. {app="u"} has lat 2, 4, "abc" (does not convert), 9
// and an entry without lat; dur 150ms, 2s, 1m; size 1KiB, "7 B", 3MB.
// {app="c"} is a counter 10, 20, 5 (reset), 15 at base-50s ... base-20s.
func TestMetricUnwrapExact(t *testing.T) {
	env := newEnv(t, nil)
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{app="u"}`, Entries: []PushEntry{
			{Time: base - 50e9, Line: `lat=2 dur=150ms size=1KiB`},
			{Time: base - 40e9, Line: `lat=4 dur=2s size="7 B"`},
			{Time: base - 30e9, Line: `lat=abc level=x`},
			{Time: base - 20e9, Line: `lat=9 dur=1m size=3MB`},
			{Time: base - 10e9, Line: `level=x`},
		}},
		{Labels: `{app="c"}`, Entries: []PushEntry{
			{Time: base - 50e9, Line: `c=10`}, {Time: base - 40e9, Line: `c=20`},
			{Time: base - 30e9, Line: `c=5`}, {Time: base - 20e9, Line: `c=15`},
		}},
	}), "Content-Type", "application/x-protobuf")
	lat := func(fn string) string {
		return fn + `({app="u"} | logfmt | keep lat | unwrap lat | __error__="" [1m])`
	}
	for _, c := range []struct{ q, want string }{
		{lat("sum_over_time"), `{"metric":{},"value":[1700000000,"15"]}`},
		{lat("avg_over_time"), `{"metric":{},"value":[1700000000,"5"]}`},
		{lat("max_over_time"), `{"metric":{},"value":[1700000000,"9"]}`},
		{lat("min_over_time"), `{"metric":{},"value":[1700000000,"2"]}`},
		{lat("first_over_time"), `{"metric":{},"value":[1700000000,"2"]}`},
		{lat("last_over_time"), `{"metric":{},"value":[1700000000,"9"]}`},
		{lat("stdvar_over_time"), `{"metric":{},"value":[1700000000,"8.666666666666666"]}`},
		{lat("stddev_over_time"), `{"metric":{},"value":[1700000000,"2.943920288775949"]}`},
		{lat("rate"), `{"metric":{},"value":[1700000000,"0.25"]}`},
		{`quantile_over_time(0.5, {app="u"} | logfmt | keep lat | unwrap lat | __error__="" [1m])`, `{"metric":{},"value":[1700000000,"4"]}`},
		{`quantile_over_time(0.25, {app="u"} | logfmt | keep lat | unwrap lat | __error__="" [1m])`, `{"metric":{},"value":[1700000000,"3"]}`},
		{`quantile_over_time(1.5, {app="u"} | logfmt | keep lat | unwrap lat | __error__="" [1m])`, `{"metric":{},"value":[1700000000,"+Inf"]}`},
		// Without keep, each entry's other labels make its own series;
		// by (app) groups them (the unwrapped label is gone anyway).
		{`max_over_time({app="u"} | logfmt | unwrap lat | __error__="" [1m]) by (app)`, `{"metric":{"app":"u"},"value":[1700000000,"9"]}`},
		{`avg_over_time({app="u"} | logfmt | unwrap lat | __error__="" [1m]) without (dur, size, service_name)`, `{"metric":{"app":"u",` + strings.TrimSuffix(dlJSON(true, "lat=2"), ",") + `},"value":[1700000000,"5"]}`},
		{`sum by (app) (sum_over_time({app="u"} | logfmt | unwrap duration(dur) [1m]))`, `{"metric":{"app":"u"},"value":[1700000000,"62.15"]}`},
		{`sum by (app) (sum_over_time({app="u"} | logfmt | unwrap duration_seconds(dur) [1m]))`, `{"metric":{"app":"u"},"value":[1700000000,"62.15"]}`},
		{`sum by (app) (sum_over_time({app="u"} | logfmt | unwrap bytes(size) [1m]))`, `{"metric":{"app":"u"},"value":[1700000000,"3001031"]}`},
		// A filter after the unwrap on another label.
		{`sum(sum_over_time({app="u"} | logfmt | unwrap lat | level!="x" [1m]))`, `{"metric":{},"value":[1700000000,"15"]}`},
		// The series labels: the unwrapped one leaves them.
		{`last_over_time({app="u"} | logfmt | unwrap lat | __error__="" [1m])`,
			`{"metric":{"app":"u",` + dlJSON(true, "lat=2") + `"dur":"150ms","service_name":"u","size":"1KiB"},"value":[1700000000,"2"]},{"metric":{"app":"u",` + dlJSON(true, "lat=2") + `"dur":"1m","service_name":"u","size":"3MB"},"value":[1700000000,"9"]},{"metric":{"app":"u",` + dlJSON(true, "lat=2") + `"dur":"2s","service_name":"u","size":"7 B"},"value":[1700000000,"4"]}`},
		// Increase 15-10 plus the 20 before the reset = 25 over 30 s
		// sampled; extrapolated 10 s to the start (within 1.1 x the 10 s
		// average gap) and 5 s towards the end (20 s away: half a gap):
		// 25 x 45/30 / 60 s.
		{`rate_counter({app="c"} | logfmt | keep c | unwrap c [1m])`, `{"metric":{},"value":[1700000000,"0.625"]}`},
		{`rate_counter({app="c"} | logfmt | keep c | unwrap c [15s])`, ``}, // one sample: no point
		{`sum_over_time({app="nope"} | logfmt | unwrap lat [1m])`, ``},
		{`sum_over_time({app="u"} | logfmt | unwrap nope [1m])`, ``},
		{`topk(1, max_over_time({app="u"} | logfmt | unwrap lat | __error__="" [1m]) by (app)) > 5 or vector(0)`, `{"metric":{},"value":[1700000000,"0"]},{"metric":{"app":"u"},"value":[1700000000,"9"]}`},
	} {
		code, body := env.get("/loki/api/v1/query?time=1700000000&query=" + url.QueryEscape(c.q))
		if code != 200 {
			t.Errorf("%s: %d %s", c.q, code, body)
			continue
		}
		wantJSON(t, c.q, dropStats(t, body), `{"status":"success","data":{"resultType":"vector","result":[`+c.want+`]}}`)
	}
	// Range query: steps base-60s, base-30s, base; windows of 30s.
	code, body := env.get("/loki/api/v1/query_range?start=1699999940&end=1700000000&step=30&query=" + url.QueryEscape(`sum_over_time({app="u"} | logfmt | keep lat | unwrap lat | __error__="" [30s])`))
	if code != 200 {
		t.Fatalf("range: %d %s", code, body)
	}
	// (-90, -60]: none; (-60, -30]: 2 + 4 ("abc" dropped); (-30, 0]: 9.
	wantJSON(t, "range", dropStats(t, body), `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1699999970,"6"],[1700000000,"9"]]}]}}`)

	for _, c := range []struct{ q, msg string }{
		// "abc" does not convert: Loki's pipeline error.
		{`sum_over_time({app="u"} | logfmt | keep lat | unwrap lat [1m])`, `pipeline error: 'SampleExtractionErr' for series: '{__error__=\"SampleExtractionErr\", __error_details__=\"cannot convert \\\"abc\\\" to a float\"}'`},
		{`max_over_time({app="u"} | logfmt | unwrap lat [1m]) by (app)`, `pipeline error: 'SampleExtractionErr'`},
		{`sum_over_time({app="u"} | logfmt | unwrap dur [1m])`, `pipeline error: 'SampleExtractionErr'`},
		{`sum_over_time({app="u"} | logfmt | unwrap bytes(lat) [1m])`, `pipeline error: 'SampleExtractionErr'`},
		{`count_over_time({app="u"} | logfmt | unwrap lat [1m])`, `invalid aggregation count_over_time with unwrap`},
		{`sum_over_time({app="u"} | logfmt [1m])`, `invalid aggregation sum_over_time without unwrap`},
		{`sum_over_time({app="u"} | logfmt | unwrap lat [1m]) by (app)`, `sum_over_time does not take by or without`},
		{`sum_over_time({app="u"} | logfmt | unwrap lat | logfmt [1m])`, `after unwrap lat only label filters are allowed`},
	} {
		for _, path := range []string{"/loki/api/v1/query?time=1700000000&query=", "/loki/api/v1/query_range?start=1699999940&end=1700000000&step=30&query="} {
			code, body := env.get(path + url.QueryEscape(c.q))
			if code != 400 || !strings.Contains(body, c.msg) {
				t.Errorf("%s%s: %d %s; want 400 with %s", path, c.q, code, body, c.msg)
			}
		}
	}
}
