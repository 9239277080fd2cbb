package server

// Differential tests of the counting endpoints against oracles computed
// here from the pushed entries, aimed at the edges differential_test.go
// does not draw (it keeps to one minute around dtT0, whole-second hits
// steps and half-second-multiple metric steps):
//
//   - /api/v1/hits (web/API.md): an entry matches when start <= ts <= end;
//     a bucket t (Unix ms, a multiple of step_ms) holds t <= ts < t+step;
//     total is the number of matches. Here: entries on bucket boundaries
//     and on start/end (and one ns either side), steps that do not divide
//     the range, a step wider than the range (one bucket), millisecond
//     steps, times before 1970 and across 0, absent start/end, and the
//     bucket limit (a request over it must be refused with 400, one at it
//     answered exactly).
//   - metric queries (doc.go; Loki's query_range): points at start,
//     start+step, ... <= end, each over (t-range, t], no point for an
//     empty window, rate = count / range in seconds, bytes_* sum line
//     bytes; ranges smaller and larger than the step, 1 ms ranges, equal
//     timestamps, windows whose edges fall exactly on entries, times
//     before 1970, and the 11000-point limit.
//
// HAY_HITS_SEED=N reruns one seed.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/segment"
	"haystack/internal/store"
)

type hoEntry struct {
	t    int64
	app  string
	line string
}

var hoApps = []string{"a", "b", "c"}

// hoSeeds are the seeds to run, or the one HAY_HITS_SEED names.
func hoSeeds(t *testing.T, n uint64) []uint64 {
	if v := os.Getenv("HAY_HITS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("HAY_HITS_SEED=%q", v)
		}
		return []uint64{s}
	}
	var s []uint64
	for i := range n {
		s = append(s, i+1)
	}
	return s
}

func hoFloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// hoData draws entries over the hour from an origin: around now (base), just
// before 1970, or across 0; times on boundaries of several widths, one ns
// off them, and repeated.
func hoData(r *rand.Rand, kind int) (origin int64, es []hoEntry) {
	switch kind {
	case 0: // the last 10 minutes are after "now": absent end drops them
		origin = base - 3000e9
	case 1:
		origin = -7200e9 // 1969-12-31T22:00:00Z
	default:
		origin = -30e9 // the entries straddle 1970-01-01T00:00:00Z
	}
	n := 30 + r.IntN(150)
	widths := []int64{1e6, 1e9, 5e9, 7e9, 60e9, 3600e9}
	for range n {
		var t int64
		switch r.IntN(4) {
		case 0:
			w := widths[r.IntN(len(widths))]
			t = hoFloorDiv(origin+r.Int64N(3600e9), w) * w
		case 1:
			w := widths[r.IntN(len(widths))]
			t = hoFloorDiv(origin+r.Int64N(3600e9), w)*w + int64(r.IntN(3)-1)
		case 2:
			if len(es) > 0 {
				t = es[r.IntN(len(es))].t
				break
			}
			fallthrough
		default:
			t = origin + r.Int64N(3600e9)
		}
		app := hoApps[r.IntN(len(hoApps))]
		word := []string{"ok", "err", "warn", "errand"}[r.IntN(4)]
		es = append(es, hoEntry{t: t, app: app, line: fmt.Sprintf("%s %d%s", word, len(es), strings.Repeat("x", r.IntN(20)))})
	}
	return origin, es
}

// hoPush pushes the entries in random batches (out of time order, as
// Loki allows) and flushes the head to segments part way through.
func hoPush(t *testing.T, env *testEnv, r *rand.Rand, es []hoEntry) {
	perm := r.Perm(len(es))
	for i := 0; i < len(perm); {
		n := 1 + r.IntN(40)
		byApp := map[string][]PushEntry{}
		for _, j := range perm[i:min(i+n, len(perm))] {
			byApp[es[j].app] = append(byApp[es[j].app], PushEntry{es[j].t, es[j].line})
		}
		var ps []PushStream
		for _, a := range hoApps {
			if len(byApp[a]) > 0 {
				ps = append(ps, PushStream{Labels: fmt.Sprintf(`{app=%q}`, a), Entries: byApp[a]})
			}
		}
		env.mustPush("/loki/api/v1/push", protoBody(ps), "Content-Type", "application/x-protobuf")
		i += n
		if k := r.IntN(8); k < 3 {
			env.flushDefault(t, k == 0)
		}
	}
}

// hoQuery is a query both as the API reads it and as the oracle does.
type hoQuery struct {
	native string // /api/v1/hits q
	fold   bool   // /api/v1/hits fold=1
	logql  string // the log query inside a metric query
	match  func(e hoEntry) bool
}

var hoQueries = []hoQuery{
	{native: "", logql: `{app=~".+"}`, match: func(hoEntry) bool { return true }},
	{native: "err", logql: `{app=~".+"} |= "err"`, match: func(e hoEntry) bool { return strings.Contains(e.line, "err") }},
	{native: `{app="b"}`, logql: `{app="b"}`, match: func(e hoEntry) bool { return e.app == "b" }},
	{native: `{app=~"a|c"} != "errand"`, logql: `{app=~"a|c"} != "errand"`, match: func(e hoEntry) bool { return e.app != "b" && !strings.Contains(e.line, "errand") }},
	{native: "ERRAND", fold: true, logql: `{app=~".+"} |~ "(?i)errand"`, match: func(e hoEntry) bool { return strings.Contains(e.line, "errand") }},
}

// hoTimeParam formats t as RFC 3339 or, where it has more than ten
// digits, as Unix nanoseconds (both exact).
func hoTimeParam(r *rand.Rand, t int64) string {
	if (t >= 1e10 || t <= -1e10) && r.IntN(2) == 0 {
		return strconv.FormatInt(t, 10)
	}
	return time.Unix(0, t).UTC().Format(time.RFC3339Nano)
}

func hoNewEnv(t *testing.T, seed uint64) *testEnv {
	return newEnv(t, func(c *Config) {
		c.Store = store.Options{HeadBytes: 8 << 10, Segment: segment.Options{BlockSize: 512 << (seed % 3)}}
	})
}

func TestHitsOracle(t *testing.T) {
	total := 0
	for _, seed := range hoSeeds(t, 6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("rerun: HAY_HITS_SEED=%d go test -run TestHitsOracle ./internal/server", seed)
				}
			}()
			r := rand.New(rand.NewPCG(seed, 0x4175))
			env := hoNewEnv(t, seed)
			origin, es := hoData(r, int(seed%3))
			hoPush(t, env, r, es)
			for range 60 {
				hoHits(t, env, r, origin, es)
				total++
			}
		})
	}
	t.Logf("%d hits requests compared", total)
}

type hoHitsResp struct {
	StepMS  int64 `json:"step_ms"`
	Buckets []struct {
		T     int64 `json:"t"`
		Count int64 `json:"count"`
	} `json:"buckets"`
	Total int64 `json:"total"`
}

// hoAutoWidths are the readable widths API.md lists (and search.ChooseBuckets
// uses, then multiples of 30 days).
var hoAutoWidths = []int64{1e9, 5e9, 10e9, 30e9, 60e9, 300e9, 600e9, 1800e9, 3600e9, 3 * 3600e9, 6 * 3600e9, 12 * 3600e9, 86400e9, 7 * 86400e9, 30 * 86400e9}

func hoHits(t *testing.T, env *testEnv, r *rand.Rand, origin int64, es []hoEntry) {
	t.Helper()
	hq := hoQueries[r.IntN(len(hoQueries))]
	p := url.Values{}
	if hq.native != "" || r.IntN(2) == 0 {
		p.Set("q", hq.native)
	}
	if hq.fold {
		p.Set("fold", "1")
	}
	pick := func() int64 {
		e := es[r.IntN(len(es))].t
		switch r.IntN(5) {
		case 0, 1:
			return e
		case 2:
			return e + int64(r.IntN(3)-1)
		case 3:
			return hoFloorDiv(e, 1e9) * 1e9
		default:
			return origin + r.Int64N(3600e9)
		}
	}
	start, end := int64(math.MinInt64), base // absent: all before, now
	if r.IntN(6) != 0 {
		start = pick()
		p.Set("start", hoTimeParam(r, start))
	}
	if r.IntN(6) != 0 {
		end = pick()
		if end < start {
			start, end = end, start
			p.Set("start", hoTimeParam(r, start))
		}
		p.Set("end", hoTimeParam(r, end))
	}
	var ts []int64 // ascending
	for _, e := range es {
		if e.t >= start && e.t <= end && hq.match(e) {
			ts = append(ts, e.t)
		}
	}
	slices.Sort(ts)
	// The step: none (the server chooses), whole or fractional seconds,
	// milliseconds, one wider than the range, or one that gives just
	// about the bucket limit.
	var stepNS int64
	switch r.IntN(7) {
	case 0, 1:
	case 2:
		stepNS = []int64{1e9, 7e9, 60e9, 3600e9}[r.IntN(4)]
		p.Set("step", strconv.FormatInt(stepNS/1e9, 10))
	case 3:
		stepNS = []int64{1e6, 3e6, 250e6, 1500e6}[r.IntN(4)]
		if r.IntN(2) == 0 {
			p.Set("step", time.Duration(stepNS).String())
		} else {
			p.Set("step", strconv.FormatFloat(float64(stepNS)/1e9, 'f', -1, 64))
		}
	case 4:
		stepNS = 86400e9 * int64(1+r.IntN(1000)) // wider than the data: one or two buckets
		p.Set("step", time.Duration(stepNS).String())
	default:
		if start == math.MinInt64 || end-start < 11000e6 {
			stepNS = 1e9
		} else {
			// Near 11000 buckets: a whole number of ms giving 10999..11002.
			want := int64(10999 + r.IntN(4))
			stepNS = max(1e6, (end-start)/want/1e6*1e6)
		}
		p.Set("step", fmt.Sprintf("%dms", stepNS/1e6))
	}
	desc := "GET /api/v1/hits?" + p.Encode()
	code, body := env.get("/api/v1/hits?" + p.Encode())
	if start > end { // a start after now without end: API.md's 400
		if code != 400 || !strings.Contains(body, `"error"`) {
			t.Fatalf("%s: start after end: status %d %s, want 400", desc, code, body)
		}
		return
	}
	if stepNS != 0 {
		// Over 11000 buckets the request is refused. Without start the
		// buckets begin at the first entry that can match, which the
		// block index gives: somewhere between the first entry of all
		// and the first match.
		nMin, nMax := int64(0), int64(0)
		switch {
		case start != math.MinInt64:
			nMin = hoFloorDiv(end, stepNS) - hoFloorDiv(start, stepNS) + 1
			nMax = nMin
		default:
			// Even without a match, a block the index cannot rule
			// out starts the range (seed 5713401071726794113: no
			// "errand" before end, 484,441 buckets of 3 ms, a 400).
			first := es[0].t
			for _, e := range es {
				first = min(first, e.t)
			}
			nMax = hoFloorDiv(end, stepNS) - hoFloorDiv(first, stepNS) + 1
			if len(ts) > 0 {
				nMin = hoFloorDiv(end, stepNS) - hoFloorDiv(ts[0], stepNS) + 1
			}
		}
		// Over 11000 the server first narrows the range to the blocks
		// that can match (the response lists only non-empty buckets, so
		// nothing is lost): a 400 (with an error) only when that is
		// still too many, otherwise the exact answer below.
		if nMin > 11000 && code == 400 {
			if !strings.Contains(body, `"error"`) {
				t.Fatalf("%s: %d buckets: status 400 without an error: %s", desc, nMin, body)
			}
			return
		}
		if nMax > 11000 && code == 400 {
			return // either answer is right
		}
	}
	if code != 200 {
		t.Fatalf("%s: status %d: %s", desc, code, body)
	}
	var h hoHitsResp
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("%s: %v: %s", desc, err, body)
	}
	if stepNS != 0 && h.StepMS*1e6 != stepNS {
		t.Fatalf("%s: step_ms %d, want %d", desc, h.StepMS, stepNS/1e6)
	}
	w := h.StepMS * 1e6
	if stepNS == 0 {
		if !slices.Contains(hoAutoWidths, w) && (w <= 0 || w%(30*86400e9) != 0) {
			t.Fatalf("%s: chosen step_ms %d is not a readable width", desc, h.StepMS)
		}
		if start != math.MinInt64 {
			n := hoFloorDiv(end, w) - hoFloorDiv(start, w) + 1
			if n > 150 {
				t.Fatalf("%s: chosen step_ms %d gives %d buckets over the range", desc, h.StepMS, n)
			}
			// The smallest readable width that keeps to 150.
			if i := slices.Index(hoAutoWidths, w); i > 0 {
				pw := hoAutoWidths[i-1]
				if pn := hoFloorDiv(end, pw) - hoFloorDiv(start, pw) + 1; pn <= 150 {
					t.Fatalf("%s: chosen step_ms %d, but %d ms gives %d buckets", desc, h.StepMS, pw/1e6, pn)
				}
			}
		}
	}
	want := map[int64]int64{}
	for _, x := range ts {
		want[hoFloorDiv(x, w)*h.StepMS]++
	}
	if h.Total != int64(len(ts)) {
		t.Fatalf("%s: total %d, want %d\n%s", desc, h.Total, len(ts), body)
	}
	prev := int64(math.MinInt64)
	for _, b := range h.Buckets {
		if b.T <= prev || b.T%h.StepMS != 0 {
			t.Fatalf("%s: bucket t %d after %d (step_ms %d)", desc, b.T, prev, h.StepMS)
		}
		prev = b.T
		if b.Count != want[b.T] {
			t.Fatalf("%s: bucket %d: %d, want %d", desc, b.T, b.Count, want[b.T])
		}
		delete(want, b.T)
	}
	for bt, c := range want {
		t.Fatalf("%s: bucket %d with %d entries missing", desc, bt, c)
	}
}

// ---- metric queries ----

type hoPoint struct {
	t int64
	v float64
}

func hoLabelKey(m map[string]string) string {
	var ks []string
	for k, v := range m {
		ks = append(ks, k+"="+v)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

func TestMetricOracle(t *testing.T) {
	total := 0
	for _, seed := range hoSeeds(t, 6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("rerun: HAY_HITS_SEED=%d go test -run TestMetricOracle ./internal/server", seed)
				}
			}()
			r := rand.New(rand.NewPCG(seed, 0x6d65))
			env := hoNewEnv(t, seed)
			origin, es := hoData(r, int(seed%3))
			hoPush(t, env, r, es)
			for range 50 {
				hoMetric(t, env, r, origin, es)
				total++
			}
		})
	}
	t.Logf("%d metric queries compared", total)
}

func hoMetric(t *testing.T, env *testEnv, r *rand.Rand, origin int64, es []hoEntry) {
	t.Helper()
	hq := hoQueries[r.IntN(len(hoQueries))]
	fn := []string{"count_over_time", "rate", "bytes_over_time", "bytes_rate"}[r.IntN(4)]
	rngs := []string{"1ms", "500ms", "1s", "7s", "1m", "5m", "1h"}
	rngNS := []int64{1e6, 500e6, 1e9, 7e9, 60e9, 300e9, 3600e9}
	ri := r.IntN(len(rngs))
	rng := rngNS[ri]
	inner := fmt.Sprintf("%s(%s [%s])", fn, hq.logql, rngs[ri])
	aggs := []struct {
		op, grouping string
		keep         func(string) bool // which label survives
	}{
		{"", "", func(string) bool { return true }},
		{"sum", "", func(string) bool { return false }},
		{"sum", " by (app)", func(k string) bool { return k == "app" }},
		{"count", " by (app)", func(k string) bool { return k == "app" }},
		{"max", "", func(string) bool { return false }},
		{"min", " without (app)", func(k string) bool { return k != "app" }},
		{"max", " without (app, service_name)", func(k string) bool { return k != "app" && k != "service_name" }},
		{"avg", "", func(string) bool { return false }},
	}
	agg := aggs[r.IntN(len(aggs))]
	expr := inner
	if agg.op != "" {
		expr = agg.op + agg.grouping + " (" + inner + ")"
	}

	// Evaluation times: start, start+step, ... <= end, with start and
	// end on entries, one ns off, or anywhere; or one instant.
	pick := func() int64 {
		e := es[r.IntN(len(es))].t
		switch r.IntN(4) {
		case 0:
			return e
		case 1:
			return e + rngNS[r.IntN(len(rngNS))] // the window's open edge on an entry
		case 2:
			return e + int64(r.IntN(3)-1)
		default:
			return origin + r.Int64N(3600e9)
		}
	}
	p := url.Values{"query": {expr}}
	var steps []int64
	path := "/loki/api/v1/query_range"
	instant := r.IntN(5) == 0
	if instant {
		at := pick()
		p.Set("time", hoTimeParam(r, at))
		steps = []int64{at}
		path = "/loki/api/v1/query"
	} else {
		start := pick()
		stepNS := []int64{1e6, 1e9, 3e9, 7e9, 60e9, 3600e9}[r.IntN(6)]
		end := start + int64(r.IntN(60))*stepNS + int64(r.IntN(3))*stepNS/2
		if r.IntN(6) == 0 { // at the 11000-point limit, or past it
			end = start + stepNS*int64(11000+r.IntN(2)) + int64(r.IntN(2))
		}
		p.Set("start", hoTimeParam(r, start))
		p.Set("end", hoTimeParam(r, end))
		switch r.IntN(5) {
		case 0, 1:
			p.Set("step", time.Duration(stepNS).String())
		case 2, 3:
			p.Set("step", strconv.FormatFloat(float64(stepNS)/1e9, 'f', -1, 64))
		default:
			// No step: Loki's default, whole seconds of a 250th of the
			// range, at least one.
			stepNS = max(1, (end-start)/1e9/250) * 1e9
		}
		if (end-start)/stepNS > 11000 {
			desc := "GET " + path + "?" + p.Encode()
			code, body := env.get(path + "?" + p.Encode())
			if code != 400 {
				t.Fatalf("%s: more than 11000 points: status %d, want 400: %.200s", desc, code, body)
			}
			return
		}
		for x := start; x <= end; x += stepNS {
			steps = append(steps, x)
		}
	}
	desc := "GET " + path + "?" + p.Encode()

	// The oracle: per stream, then aggregated.
	// A series is a stream and, with detected_level, the level wantLevel
	// expects of its entries' lines (their metadata, a series label).
	byApp := map[[2]string][]hoEntry{}
	for _, e := range es {
		if hq.match(e) {
			k := [2]string{e.app, ""}
			if env.levelsOn() {
				k[1] = wantLevel(map[string]string{"app": e.app}, nil, e.line)
			}
			byApp[k] = append(byApp[k], e)
		}
	}
	type acc struct {
		sum, min, max float64
		n             int
	}
	groups := map[string]map[int64]*acc{}
	for app, list := range byApp {
		// The stream's labels as stored: app and the service_name
		// discovered from it (withServiceName).
		g := map[string]string{}
		labs := withServiceName(map[string]string{"app": app[0]})
		if app[1] != "" {
			labs["detected_level"] = app[1]
		}
		for k, v := range labs {
			if agg.keep(k) {
				g[k] = v
			}
		}
		gk := hoLabelKey(g)
		for _, x := range steps {
			var n, b int64
			for _, e := range list {
				if e.t > x-rng && e.t <= x {
					n++
					b += int64(len(e.line))
				}
			}
			if n == 0 {
				continue
			}
			v := oracleWindowValue(fn, n, b, rng)
			if groups[gk] == nil {
				groups[gk] = map[int64]*acc{}
			}
			a := groups[gk][x]
			if a == nil {
				a = &acc{min: math.Inf(1), max: math.Inf(-1)}
				groups[gk][x] = a
			}
			a.sum += v
			a.n++
			a.min, a.max = min(a.min, v), max(a.max, v)
		}
	}
	want := map[string][]hoPoint{}
	for gk, pts := range groups {
		for _, x := range steps {
			a := pts[x]
			if a == nil {
				continue
			}
			v := a.sum
			switch agg.op {
			case "count":
				v = float64(a.n)
			case "max":
				v = a.max
			case "min":
				v = a.min
			case "avg":
				v = a.sum / float64(a.n)
			}
			want[gk] = append(want[gk], hoPoint{x, v})
		}
	}

	code, body := env.get(path + "?" + p.Encode())
	if code != 200 {
		t.Fatalf("%s: status %d: %.300s", desc, code, body)
	}
	var resp struct {
		Data struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]json.Number  `json:"values"`
				Value  []json.RawMessage `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	d := json.NewDecoder(strings.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&resp); err != nil {
		t.Fatalf("%s: %v: %.300s", desc, err, body)
	}
	wantType := "matrix"
	if instant {
		wantType = "vector"
	}
	if resp.Data.ResultType != wantType {
		t.Fatalf("%s: resultType %q, want %q", desc, resp.Data.ResultType, wantType)
	}
	got := map[string][]hoPoint{}
	for _, s := range resp.Data.Result {
		gk := hoLabelKey(s.Metric)
		if _, dup := got[gk]; dup {
			t.Fatalf("%s: series %s twice", desc, gk)
		}
		vals := s.Values
		if instant {
			if len(s.Value) != 2 {
				t.Fatalf("%s: vector value %v", desc, s.Value)
			}
			var tt json.Number
			var vv string
			if json.Unmarshal(s.Value[0], &tt) != nil || json.Unmarshal(s.Value[1], &vv) != nil {
				t.Fatalf("%s: vector value %s", desc, s.Value)
			}
			vals = [][2]json.Number{{tt, json.Number(vv)}}
		}
		var pts []hoPoint
		for _, pv := range vals {
			sec, err1 := pv[0].Float64()
			v, err2 := strconv.ParseFloat(string(pv[1]), 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: point %v", desc, pv)
			}
			// Times are float seconds: match to the nearest step time
			// (steps are at least 1 ms apart; a float64 of 1.7e9 s is
			// off by under 0.3 µs).
			x := int64(math.Round(sec * 1e9))
			best := x
			for _, s := range steps {
				if d := s - x; d >= -2000 && d <= 2000 {
					best = s
				}
			}
			pts = append(pts, hoPoint{best, v})
		}
		got[gk] = pts
	}
	for gk, wp := range want {
		gp := got[gk]
		if len(gp) != len(wp) {
			t.Fatalf("%s: series {%s}: %d points, want %d\n got %v\nwant %v", desc, gk, len(gp), len(wp), gp, wp)
		}
		for i := range wp {
			if gp[i].t != wp[i].t || !hoClose(gp[i].v, wp[i].v) {
				t.Fatalf("%s: series {%s} point %d: %v, want %v", desc, gk, i, gp[i], wp[i])
			}
		}
		delete(got, gk)
	}
	for gk, gp := range got {
		t.Fatalf("%s: unexpected series {%s}: %v", desc, gk, gp)
	}
}

// hoClose: counts and byte sums are exact; rates may differ in the last
// bits (a sum of quotients against a quotient of sums).
func hoClose(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b))
}

// TestHitsEdgeTable pins the edges by hand: buckets of entries one ns
// either side of 0 and of a second, equal times, a step wider than the
// range, a range of one instant, an empty range, and the matching metric
// windows (t-range, t] whose open edge falls on an entry.
func TestHitsEdgeTable(t *testing.T) {
	env := newEnv(t, nil)
	ts := []int64{-1000000001, -1, 0, 999999, 1000000, 999999999, 1e9, 1e9, 2e9 - 1}
	var pe []PushEntry
	for i, x := range ts {
		pe = append(pe, PushEntry{x, fmt.Sprintf("e%d", i)})
	}
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{{Labels: `{app="a"}`, Entries: pe}}), "Content-Type", "application/x-protobuf")
	rfc := func(x int64) string { return url.QueryEscape(time.Unix(0, x).UTC().Format(time.RFC3339Nano)) }
	for _, c := range []struct {
		start, end int64
		step, want string
	}{
		{-1, 1e9, "0.001", `{"step_ms":1,"buckets":[{"t":-1,"count":1},{"t":0,"count":2},{"t":1,"count":1},{"t":999,"count":1},{"t":1000,"count":2}],"total":7}`},
		{-1000000001, 2e9 - 2, "1", `{"step_ms":1000,"buckets":[{"t":-2000,"count":1},{"t":-1000,"count":1},{"t":0,"count":4},{"t":1000,"count":2}],"total":8}`},
		{-1000000001, 2e9 - 1, "1s", `{"step_ms":1000,"buckets":[{"t":-2000,"count":1},{"t":-1000,"count":1},{"t":0,"count":4},{"t":1000,"count":3}],"total":9}`},
		{-1, 0, "10", `{"step_ms":10000,"buckets":[{"t":-10000,"count":1},{"t":0,"count":1}],"total":2}`},
		{0, 0, "1", `{"step_ms":1000,"buckets":[{"t":0,"count":1}],"total":1}`},
		{1e9, 1e9, "0.001", `{"step_ms":1,"buckets":[{"t":1000,"count":2}],"total":2}`},
		{1, 999998, "0.001", `{"step_ms":1,"buckets":[],"total":0}`},
		{-1, 1e9, "", `{"step_ms":1000,"buckets":[{"t":-1000,"count":1},{"t":0,"count":4},{"t":1000,"count":2}],"total":7}`},
	} {
		p := fmt.Sprintf("/api/v1/hits?start=%s&end=%s", rfc(c.start), rfc(c.end))
		if c.step != "" {
			p += "&step=" + c.step
		}
		code, body := env.get(p)
		if code != 200 {
			t.Errorf("GET %s: %d %s", p, code, body)
			continue
		}
		if canon(t, body) != canon(t, c.want) {
			t.Errorf("GET %s:\n got %s\nwant %s", p, body, c.want)
		}
	}
	if code, body := env.get(fmt.Sprintf("/api/v1/hits?start=%s&end=%s", rfc(1), rfc(0))); code != 400 {
		t.Errorf("start after end: %d %s, want 400", code, body)
	}

	for _, c := range []struct {
		query, params, want string
	}{
		// (t-1s, t] at t=-1ns holds -1 only: -1000000001 is on the open edge.
		{`count_over_time({app="a"}[1s])`, fmt.Sprintf("start=%s&end=%s&step=1", rfc(-1), rfc(1e9)),
			`[{"metric":{"app":"a",` + dlJSON(true, "e0") + `"service_name":"a"},"values":[[-0.000000001,"1"],[0.999999999,"4"]]}]`},
		// (t-2s, t]: 2 entries at -1 ns, 5 at 1 s - 1 ns; rate divides by 2.
		{`rate({app="a"}[2s])`, fmt.Sprintf("start=%s&end=%s&step=1", rfc(-1), rfc(1e9)),
			`[{"metric":{"app":"a",` + dlJSON(true, "e0") + `"service_name":"a"},"values":[[-0.000000001,"1"],[0.999999999,"2.5"]]}]`},
		// A 1 ms range, steps of 1 ms from 0: (-1ms, 0] holds -1 and 0,
		// (0, 1ms] 999999 and 1000000, later windows nothing.
		{`count_over_time({app="a"}[1ms])`, fmt.Sprintf("start=%s&end=%s&step=0.001", rfc(0), rfc(3e6)),
			`[{"metric":{"app":"a",` + dlJSON(true, "e0") + `"service_name":"a"},"values":[[0,"2"],[0.001,"2"]]}]`},
		{`bytes_over_time({app="a"}[10s])`, fmt.Sprintf("start=%s&end=%s&step=100", rfc(2e9-1), rfc(2e9-1)),
			`[{"metric":{"app":"a",` + dlJSON(true, "e0") + `"service_name":"a"},"values":[[1.999999999,"18"]]}]`},
		{`bytes_rate({app="a"}[4s])`, fmt.Sprintf("start=%s&end=%s&step=100", rfc(2e9-1), rfc(2e9-1)),
			`[{"metric":{"app":"a",` + dlJSON(true, "e0") + `"service_name":"a"},"values":[[1.999999999,"4.5"]]}]`},
		// Nothing in (1e9, 2e9-2]: no point at all, not a zero.
		{`count_over_time({app="a"}[999999998ns])`, fmt.Sprintf("start=%s&end=%s&step=1", rfc(2e9-2), rfc(2e9-2)),
			`[]`},
	} {
		p := "/loki/api/v1/query_range?query=" + url.QueryEscape(c.query) + "&" + c.params
		code, body := env.get(p)
		want := `{"status":"success","data":{"resultType":"matrix","result":` + c.want + `}}`
		if code != 200 || canon(t, dropStats(t, body)) != canon(t, want) {
			t.Errorf("GET %s: %d\n got %s\nwant %s", p, code, body, want)
		}
	}
}

// flushDefault flushes the default tenant's head into a segment and, when
// merge, compacts its segments into 1 KiB blocks (equal times then lie
// across segments and blocks).
func (e *testEnv) flushDefault(t *testing.T, merge bool) {
	t.Helper()
	ts, err := e.srv.openTenant(DefaultTenant, false)
	if err != nil || ts == nil {
		t.Fatalf("tenant: %v", err)
	}
	if err := ts.w.Flush(); err != nil {
		t.Fatal(err)
	}
	if merge {
		if _, err := ts.w.Compact(context.Background(), store.CompactOptions{Segment: &segment.Options{BlockSize: 1 << 10}}); err != nil {
			t.Fatal(err)
		}
	}
}
