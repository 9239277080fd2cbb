package server

// Binary operators in metric queries: comparisons (with and without
// bool), arithmetic between vectors and scalars, and, or, unless, and
// vector(n), checked against an oracle written from Loki's query
// reference and Prometheus's operator semantics (which Loki's documents
// follow), independently of metricq.go:
//
//   - scalar op scalar is a scalar; a comparison between scalars needs
//     bool and gives 1 or 0; set operators refuse scalars;
//   - vector op scalar (either order) applies the operator to each sample
//     and keeps its labels; a comparison drops the samples for which it is
//     false and keeps the vector's value, or with bool answers 1 or 0;
//   - vector op vector matches samples one-to-one on their whole label
//     set, or on the labels on (...) lists, or on all but those ignoring
//     (...) lists; an unmatched sample is dropped; the result has the left
//     sample's labels, reduced to the matching labels when on or ignoring
//     is given; two right samples with one signature, or two matched left
//     ones, are an error (400);
//   - and keeps the left samples with a match, unless those without, or
//     all left samples plus the right ones whose signature is not on the
//     left;
//   - x/0 and x%0 are NaN, as Loki answers.
//
// The leaves are the range functions and aggregations of the metric
// semantics oracle (metric_semantics_test.go), restricted to exact
// integer values, so every operation is computed on the same numbers in
// the same order and the answers compare exactly (NaN equal to NaN).
//
// HAY_METRICSEM_SEED=N reruns one seed.

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/segment"
	"haystack/internal/store"
)

// boSample is one sample of an instant vector.
type boSample struct {
	labels map[string]string
	v      float64
}

// boVal is a value: a scalar, or an instant vector per step.
type boVal struct {
	scalar bool
	s      float64
	vec    map[int64]map[string]boSample // step → key → sample
}

type boExpr struct {
	leaf     *msExpr // a range function or aggregation
	vector   bool    // a constant: vector(c), or the scalar c
	c        float64
	op       string
	boolMod  bool
	matching string // "", "on", "ignoring"
	match    []string
	l, r     *boExpr
	topk     *boTopk // topk or bottomk over l
}

// boTopk is topk(k, l) or bottomk(k, l) [by|without (...)].
type boTopk struct {
	fn      string
	k       int
	grouped bool
	without bool
	by      []string
}

func (x *boExpr) String() string {
	switch {
	case x.leaf != nil:
		return x.leaf.String()
	case x.topk != nil:
		g := ""
		if x.topk.grouped {
			g = map[bool]string{true: " without", false: " by"}[x.topk.without] + " (" + strings.Join(x.topk.by, ", ") + ")"
		}
		return fmt.Sprintf("%s%s(%d, %s)", x.topk.fn, g, x.topk.k, x.l)
	case x.op == "" && x.vector:
		return "vector(" + strconv.FormatFloat(x.c, 'f', -1, 64) + ")"
	case x.op == "":
		return strconv.FormatFloat(x.c, 'f', -1, 64)
	}
	mod := ""
	if x.boolMod {
		mod += " bool"
	}
	if x.matching != "" {
		mod += " " + x.matching + " (" + strings.Join(x.match, ", ") + ")"
	}
	return "(" + x.l.String() + ") " + x.op + mod + " (" + x.r.String() + ")"
}

var boOps = []string{"==", "!=", ">", ">=", "<", "<=", "+", "-", "*", "/", "%", "^", "and", "or", "unless"}

func boIsCmp(op string) bool { return slices.Contains(boOps[:6], op) }
func boIsSet(op string) bool { return op == "and" || op == "or" || op == "unless" }

// boLeaf draws a range function (count_over_time or bytes_over_time,
// whose values are integers) with no parser that can leave __error__,
// under zero or one aggregation other than avg.
func boLeaf(r *rand.Rand) *msExpr {
	for {
		x := msRandRange(r)
		if x.q.p.errOK {
			continue
		}
		x.fn = []string{"count_over_time", "bytes_over_time"}[r.IntN(2)]
		if r.IntN(2) == 0 {
			x = msRandAgg(r, x)
			if x.fn == "avg" {
				x.fn = "sum"
			}
		}
		return x
	}
}

func boRand(r *rand.Rand, depth int) *boExpr {
	if depth == 0 || r.IntN(4) == 0 {
		switch r.IntN(5) {
		case 0:
			return &boExpr{c: []float64{0, 1, 2, 3.5, -1, 7}[r.IntN(6)]}
		case 1:
			return &boExpr{vector: true, c: []float64{0, 1, 2, 3.5, -1, 7}[r.IntN(6)]}
		}
		return &boExpr{leaf: boLeaf(r)}
	}
	if r.IntN(5) == 0 {
		x := &boExpr{l: boRand(r, depth-1), topk: &boTopk{fn: []string{"topk", "bottomk"}[r.IntN(2)], k: 1 + r.IntN(4)}}
		if x.l.isScalar() {
			x.l = &boExpr{leaf: boLeaf(r)}
		}
		if r.IntN(2) == 0 {
			x.topk.grouped, x.topk.without = true, r.IntN(3) == 0
			x.topk.by = []string{}
			for _, l := range []string{"app", "env", "level", "service_name"} {
				if r.IntN(2) == 0 {
					x.topk.by = append(x.topk.by, l)
				}
			}
		}
		return x
	}
	x := &boExpr{op: boOps[r.IntN(len(boOps))], l: boRand(r, depth-1), r: boRand(r, depth-1)}
	if boIsCmp(x.op) && r.IntN(2) == 0 {
		x.boolMod = true
	}
	if r.IntN(3) == 0 && !x.l.isScalar() && !x.r.isScalar() {
		x.matching = []string{"on", "ignoring"}[r.IntN(2)]
		x.match = []string{}
		for _, l := range []string{"app", "env", "level", "service_name"} {
			if r.IntN(2) == 0 {
				x.match = append(x.match, l)
			}
		}
	}
	if boIsSet(x.op) {
		// Set operators take vectors only (the refusal is tested apart).
		for _, s := range []**boExpr{&x.l, &x.r} {
			switch {
			case !(*s).isScalar():
			case (*s).op == "":
				*s = &boExpr{vector: true, c: (*s).c}
			default:
				*s = &boExpr{leaf: boLeaf(r)}
			}
		}
	}
	return x
}

// isScalar reports whether the expression is a number: constants and
// operators between numbers only.
func (x *boExpr) isScalar() bool {
	switch {
	case x.leaf != nil || x.topk != nil:
		return false
	case x.op == "":
		return !x.vector
	}
	return x.l.isScalar() && x.r.isScalar()
}

// staticErr is the error a query is refused with before it runs: a
// comparison between scalars without bool.
func (x *boExpr) staticErr() error {
	if x.topk != nil {
		return x.l.staticErr()
	}
	if x.op == "" {
		return nil
	}
	if boIsCmp(x.op) && !x.boolMod && x.l.isScalar() && x.r.isScalar() {
		return &boErr{"must use bool"}
	}
	if err := x.l.staticErr(); err != nil {
		return err
	}
	return x.r.staticErr()
}

func boArith(op string, a, b float64) float64 {
	switch op {
	case "+":
		return a + b
	case "-":
		return a - b
	case "*":
		return a * b
	case "/":
		if b == 0 {
			return math.NaN()
		}
		return a / b
	case "%":
		if b == 0 {
			return math.NaN()
		}
		return math.Mod(a, b)
	}
	return math.Pow(a, b)
}

func boCmp(op string, a, b float64) bool {
	switch op {
	case "==":
		return a == b
	case "!=":
		return a != b
	case ">":
		return a > b
	case ">=":
		return a >= b
	case "<":
		return a < b
	}
	return a <= b
}

// boErr is an error the oracle expects the server to answer with 400;
// want is a part of its message.
type boErr struct{ want string }

func (e *boErr) Error() string { return e.want }

func (x *boExpr) eval(d *msData, steps []int64) (boVal, error) {
	switch {
	case x.leaf != nil:
		var ee msEvalErr
		out := boVal{vec: map[int64]map[string]boSample{}}
		for k, se := range x.leaf.eval(d, steps, &ee) {
			for t, v := range se.pts {
				if out.vec[t] == nil {
					out.vec[t] = map[string]boSample{}
				}
				out.vec[t][k] = boSample{se.labels, v}
			}
		}
		return out, nil
	case x.topk != nil:
		in, err := x.l.eval(d, steps)
		if err != nil {
			return boVal{}, err
		}
		return x.topk.eval(in), nil
	case x.op == "" && !x.vector:
		return boVal{scalar: true, s: x.c}, nil
	case x.op == "":
		out := boVal{vec: map[int64]map[string]boSample{}}
		for _, t := range steps {
			out.vec[t] = map[string]boSample{"": {map[string]string{}, x.c}}
		}
		return out, nil
	}
	l, err := x.l.eval(d, steps)
	if err != nil {
		return boVal{}, err
	}
	r, err := x.r.eval(d, steps)
	if err != nil {
		return boVal{}, err
	}
	if l.scalar && r.scalar {
		if boIsCmp(x.op) {
			if !x.boolMod {
				return boVal{}, &boErr{"must use bool"}
			}
			v := 0.0
			if boCmp(x.op, l.s, r.s) {
				v = 1
			}
			return boVal{scalar: true, s: v}, nil
		}
		return boVal{scalar: true, s: boArith(x.op, l.s, r.s)}, nil
	}
	out := boVal{vec: map[int64]map[string]boSample{}}
	put := func(t int64, s boSample) {
		if out.vec[t] == nil {
			out.vec[t] = map[string]boSample{}
		}
		out.vec[t][msKey(s.labels)] = s
	}
	if l.scalar || r.scalar {
		vec, sc, scalarLeft := l.vec, r.s, false
		if l.scalar {
			vec, sc, scalarLeft = r.vec, l.s, true
		}
		for t, m := range vec {
			for _, s := range m {
				a, b := s.v, sc
				if scalarLeft {
					a, b = sc, s.v
				}
				switch {
				case !boIsCmp(x.op):
					put(t, boSample{s.labels, boArith(x.op, a, b)})
				case x.boolMod:
					put(t, boSample{s.labels, map[bool]float64{true: 1}[boCmp(x.op, a, b)]})
				case boCmp(x.op, a, b):
					put(t, s)
				}
			}
		}
		return out, nil
	}
	sig := func(ls map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range ls {
			in := slices.Contains(x.match, k)
			if x.matching == "" || x.matching == "on" && in || x.matching == "ignoring" && !in {
				out[k] = v
			}
		}
		return out
	}
	for _, t := range steps {
		lv, rv := l.vec[t], r.vec[t]
		rsig := map[string][]boSample{}
		for _, s := range rv {
			k := msKey(sig(s.labels))
			rsig[k] = append(rsig[k], s)
		}
		switch x.op {
		case "and", "unless":
			for _, s := range lv {
				if _, ok := rsig[msKey(sig(s.labels))]; ok == (x.op == "and") {
					put(t, s)
				}
			}
			continue
		case "or":
			lsig := map[string]bool{}
			for _, s := range lv {
				lsig[msKey(sig(s.labels))] = true
				put(t, s)
			}
			for _, s := range rv {
				if !lsig[msKey(sig(s.labels))] {
					put(t, s)
				}
			}
			continue
		}
		for _, ss := range rsig {
			if len(ss) > 1 {
				return boVal{}, &boErr{"duplicate series"}
			}
		}
		matched := map[string]bool{}
		for _, s := range lv {
			k := msKey(sig(s.labels))
			m, ok := rsig[k]
			if !ok {
				continue
			}
			if matched[k] {
				return boVal{}, &boErr{"many-to-one"}
			}
			matched[k] = true
			ls := s.labels
			if x.matching != "" {
				ls = sig(ls)
			}
			switch {
			case !boIsCmp(x.op):
				put(t, boSample{ls, boArith(x.op, s.v, m[0].v)})
			case x.boolMod:
				put(t, boSample{ls, map[bool]float64{true: 1}[boCmp(x.op, s.v, m[0].v)]})
			case boCmp(x.op, s.v, m[0].v):
				put(t, boSample{ls, s.v})
			}
		}
	}
	return out, nil
}

// boSeries is a parsed answer: per series (key), its points by time.
type boSeries struct {
	labels map[string]string
	pts    map[int64]float64
	order  []int64
	scalar bool // an instant query's scalar answer
}

// boAnswer runs a query and parses its answer: the series in the order
// given, or the status and body of an error.
func boAnswer(t *testing.T, env *testEnv, path string, instant bool) (out []*boSeries, code int, body string) {
	t.Helper()
	code, body = env.get(path)
	if code != 200 {
		return nil, code, body
	}
	var resp struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("%s: %v: %.300s", path, err, body)
	}
	if instant && resp.Data.ResultType == "scalar" {
		// A number at an instant: [<time>, "<value>"], returned as a
		// label-less series marked scalar.
		var sc [2]json.RawMessage
		if err := json.Unmarshal(resp.Data.Result, &sc); err != nil {
			t.Fatalf("%s: scalar result: %v: %.300s", path, err, body)
		}
		resp.Data.ResultType = "vector"
		resp.Data.Result = []byte(`[{"metric":{},"value":[` + string(sc[0]) + `,` + string(sc[1]) + `]}]`)
		defer func() { out[0].scalar = true }()
	}
	var result []struct {
		Metric map[string]string    `json:"metric"`
		Values [][2]json.RawMessage `json:"values"`
		Value  *[2]json.RawMessage  `json:"value"`
	}
	if err := json.Unmarshal(resp.Data.Result, &result); err != nil {
		t.Fatalf("%s: %v: %.300s", path, err, body)
	}
	want := map[bool]string{true: "vector", false: "matrix"}[instant]
	if resp.Status != "success" || resp.Data.ResultType != want {
		t.Fatalf("%s: status %q, resultType %q, want %s", path, resp.Status, resp.Data.ResultType, want)
	}
	for _, r := range result {
		vals := r.Values
		if instant {
			if r.Value == nil || r.Values != nil {
				t.Fatalf("%s: a vector sample wants value, not values: %.300s", path, body)
			}
			vals = [][2]json.RawMessage{*r.Value}
		}
		se := &boSeries{labels: r.Metric, pts: map[int64]float64{}}
		for _, v := range vals {
			ns, ok := boSecToNs(string(v[0]))
			if !ok {
				t.Fatalf("%s: timestamp %s is not a whole number of nanoseconds", path, v[0])
			}
			var vs string
			if err := json.Unmarshal(v[1], &vs); err != nil {
				t.Fatalf("%s: value %s is not a string", path, v[1])
			}
			f, err := strconv.ParseFloat(vs, 64)
			if err != nil {
				t.Fatalf("%s: value %q", path, vs)
			}
			se.pts[ns] = f
			se.order = append(se.order, ns)
		}
		out = append(out, se)
	}
	return out, 200, body
}

// boCompare checks an answer against the oracle's value: the same series
// (a series with no point is not answered), sorted by labels as Loki
// sorts them, each with exactly the expected points in time order.
func boCompare(t *testing.T, desc string, got []*boSeries, want boVal, steps []int64) {
	t.Helper()
	exp := map[string]*boSeries{}
	if want.scalar {
		// A scalar at the top: the API answers it at every step.
		s := want.s
		want = boVal{vec: map[int64]map[string]boSample{}}
		for _, st := range steps {
			want.vec[st] = map[string]boSample{"": {map[string]string{}, s}}
		}
	}
	for _, st := range steps {
		for k, s := range want.vec[st] {
			if exp[k] == nil {
				exp[k] = &boSeries{labels: s.labels, pts: map[int64]float64{}}
			}
			exp[k].pts[st] = s.v
		}
	}
	if len(got) != len(exp) {
		t.Fatalf("%s: %d series, want %d: %v", desc, len(got), len(exp), slices.Sorted(maps.Keys(exp)))
	}
	var prev ingest.Labels
	for i, se := range got {
		ls := boLabels(se.labels)
		if i > 0 && prev.Compare(ls) >= 0 {
			t.Fatalf("%s: series %s after %s: not sorted by labels", desc, ls, prev)
		}
		prev = ls
		w := exp[msKey(se.labels)]
		if w == nil {
			t.Fatalf("%s: unexpected series %s; want %v", desc, ls, slices.Sorted(maps.Keys(exp)))
		}
		if !slices.IsSorted(se.order) || len(se.order) != len(w.pts) {
			t.Fatalf("%s: series %s: points %v, want %v", desc, ls, se.pts, w.pts)
		}
		for ts, v := range w.pts {
			g, ok := se.pts[ts]
			if !ok || g != v && !(math.IsNaN(g) && math.IsNaN(v)) {
				t.Fatalf("%s: series %s at %d: %v (present %v), want %v", desc, ls, ts, g, ok, v)
			}
		}
	}
}

// boSecToNs reads a JSON number of seconds exactly (the API writes step
// times as exact decimals).
func boSecToNs(s string) (int64, bool) {
	rt, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, false
	}
	rt.Mul(rt, big.NewRat(1e9, 1))
	if !rt.IsInt() || !rt.Num().IsInt64() {
		return 0, false
	}
	return rt.Num().Int64(), true
}

func boLabels(m map[string]string) ingest.Labels {
	var ls ingest.Labels
	for _, k := range slices.Sorted(maps.Keys(m)) {
		ls = append(ls, ingest.Label{Name: k, Value: m[k]})
	}
	return ls
}

func TestMetricBinopOracle(t *testing.T) {
	var total, errs, points int
	msEach(t, 3, 0x626f, func(t *testing.T, seed uint64, r *rand.Rand) {
		env := newEnv(t, func(c *Config) {
			c.Store = store.Options{HeadBytes: 4 << 10, Segment: segment.Options{BlockSize: 512 << (seed % 3)}}
		})
		d := msGen(r)
		d.levels = env.levelsOn()
		msPush(t, env, r, d)
		for range 150 {
			x := boRand(r, 1+r.IntN(3))
			p := url.Values{"query": {x.String()}}
			path := "/loki/api/v1/query_range"
			instant := r.IntN(4) == 0
			var steps []int64
			if instant {
				at := d.es[r.IntN(len(d.es))].t + int64(r.IntN(3)-1)
				path = "/loki/api/v1/query"
				p.Set("time", strconv.FormatInt(at, 10))
				steps = []int64{at}
			} else {
				start := d.origin + r.Int64N(600e9)
				step := []int64{1e9, 5e9, 10e9, 60e9}[r.IntN(4)]
				end := start + int64(r.IntN(60))*step
				p.Set("start", strconv.FormatInt(start, 10))
				p.Set("end", strconv.FormatInt(end, 10))
				p.Set("step", time.Duration(step).String())
				for s := start; s <= end; s += step {
					steps = append(steps, s)
				}
			}
			desc := "GET " + path + "?" + p.Encode() + "\n" + x.String()
			err := x.staticErr()
			var want boVal
			if err == nil {
				want, err = x.eval(d, steps)
			}
			got, code, body := boAnswer(t, env, path+"?"+p.Encode(), instant)
			total++
			if err != nil {
				errs++
				if code != 400 || !strings.Contains(body, err.Error()) {
					t.Fatalf("%s: %d %.300s; want 400 naming %q", desc, code, body, err)
				}
				continue
			}
			if code != 200 {
				t.Fatalf("%s: %d %.400s", desc, code, body)
			}
			boCompare(t, desc, got, want, steps)
			if instant && want.scalar != (len(got) == 1 && got[0].scalar) {
				t.Fatalf("%s: a scalar answered as a vector, or the reverse (want scalar: %v)", desc, want.scalar)
			}
			for _, se := range got {
				points += len(se.pts)
			}
		}
	})
	t.Logf("%d queries with binary operators compared (%d expected errors), %d points", total, errs, points)
}

// boExactEnv pushes a small data set whose answers are computed by hand
// below: {app="x"} has "err a" at base-50s, "ok" at base-40s and "err b"
// at base-10s; {app="y"} has "err c" at base-100s.
//
// Without detected_level (noLevels): these tests pin vector matching
// (on, ignoring, group_left/right) on hand-written label sets; with it
// every series of this data would carry detected_level="unknown" and
// ignoring (service_name) would match nothing (an unaggregated series is
// per stream and level, as in Loki 3, see the README). The metric
// oracles (TestMetricBinopOracle, TestMetricFnOracle) run the same
// operators with the level.
func boExactEnv(t *testing.T) *testEnv {
	t.Helper()
	env := newEnv(t, noLevels)
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{app="x"}`, Entries: []PushEntry{{Time: base - 50e9, Line: "err a"}, {Time: base - 40e9, Line: "ok"}, {Time: base - 10e9, Line: "err b"}}},
		{Labels: `{app="y"}`, Entries: []PushEntry{{Time: base - 100e9, Line: "err c"}}},
	}), "Content-Type", "application/x-protobuf")
	return env
}

// TestMetricBinopExact: hand-computed answers of query_range over steps
// base-120s, -90s, -60s, -30s and base (windows of 1m: (t-60s, t]), and of
// instant queries, compared as whole JSON documents.
func TestMetricBinopExact(t *testing.T) {
	env := boExactEnv(t)
	const rangeQ = "/loki/api/v1/query_range?start=1699999880&end=1700000000&step=30&query="
	// The "err" lines of x per window: -120: 0 points, -90: -, -60: -,
	// -30: 1 (-50), 0: 2 (-50, -10).
	errX := `sum(count_over_time({app="x"} |= "err" [1m]))`
	matrix := func(res string) string {
		return `{"status":"success","data":{"resultType":"matrix","result":[` + res + `]}}`
	}
	for _, c := range []struct{ q, want string }{
		{errX + ` or vector(0)`, `{"metric":{},"values":[[1699999880,"0"],[1699999910,"0"],[1699999940,"0"],[1699999970,"1"],[1700000000,"2"]]}`},
		{`vector(0) or ` + errX, `{"metric":{},"values":[[1699999880,"0"],[1699999910,"0"],[1699999940,"0"],[1699999970,"0"],[1700000000,"0"]]}`},
		{errX + ` > 1`, `{"metric":{},"values":[[1700000000,"2"]]}`},
		{errX + ` >= 1`, `{"metric":{},"values":[[1699999970,"1"],[1700000000,"2"]]}`},
		{errX + ` == 1`, `{"metric":{},"values":[[1699999970,"1"]]}`},
		{errX + ` != 1`, `{"metric":{},"values":[[1700000000,"2"]]}`},
		{errX + ` < 2`, `{"metric":{},"values":[[1699999970,"1"]]}`},
		{errX + ` <= 0`, ``},
		{errX + ` > bool 1`, `{"metric":{},"values":[[1699999970,"0"],[1700000000,"1"]]}`},
		{`1 < bool ` + errX, `{"metric":{},"values":[[1699999970,"0"],[1700000000,"1"]]}`},
		{`2 <= ` + errX, `{"metric":{},"values":[[1700000000,"2"]]}`}, // the vector's value, not the scalar's
		{`(` + errX + ` > 1) or vector(0)`, `{"metric":{},"values":[[1699999880,"0"],[1699999910,"0"],[1699999940,"0"],[1699999970,"0"],[1700000000,"2"]]}`},
		{errX + ` * 10 + 1`, `{"metric":{},"values":[[1699999970,"11"],[1700000000,"21"]]}`},
		{errX + ` / 0`, `{"metric":{},"values":[[1699999970,"NaN"],[1700000000,"NaN"]]}`},
		{errX + ` / ` + errX, `{"metric":{},"values":[[1699999970,"1"],[1700000000,"1"]]}`},
		{errX + ` and vector(1)`, `{"metric":{},"values":[[1699999970,"1"],[1700000000,"2"]]}`},
		{errX + ` unless vector(1)`, ``},
		{`sum(count_over_time({app="nope"}[1m])) > 0`, ``},
		// Per app: x all lines -30: 2, 0: 3; y (one err line) -90: 1, -60: 1.
		{`sum by (app) (count_over_time({app=~"x|y"}[1m])) - sum by (app) (count_over_time({app=~"x|y"} |= "err" [1m]))`,
			`{"metric":{"app":"x"},"values":[[1699999970,"1"],[1700000000,"1"]]},{"metric":{"app":"y"},"values":[[1699999910,"0"],[1699999940,"0"]]}`},
		{`sum by (app) (count_over_time({app=~"x|y"} |= "err" [1m])) unless sum by (app) (count_over_time({app="y"}[1m]))`,
			`{"metric":{"app":"x"},"values":[[1699999970,"1"],[1700000000,"2"]]}`},
		// x's "ok" (-40) is in the 30s window (-60, -30] only.
		{`sum by (app) (count_over_time({app=~"x|y"} |= "err" [1m])) and sum by (app) (count_over_time({app=~"x|y"} |= "ok" [30s]))`,
			`{"metric":{"app":"x"},"values":[[1699999970,"1"]]}`},
		// Matching on () drops every label; or adds the right side
		// where its signature is absent on the left.
		{`sum by (app) (count_over_time({app="y"}[1m])) or on () vector(5)`,
			`{"metric":{},"values":[[1699999880,"5"],[1699999970,"5"],[1700000000,"5"]]},{"metric":{"app":"y"},"values":[[1699999910,"1"],[1699999940,"1"]]}`},
		// Stream labels (service_name is added at push) ignored, and
		// the result reduced to the matching labels.
		{`count_over_time({app="x"} |= "err" [1m]) + ignoring (service_name) sum by (app) (count_over_time({app="x"}[1m]))`,
			`{"metric":{"app":"x"},"values":[[1699999970,"3"],[1700000000,"5"]]}`},
		{`count_over_time({app="x"} |= "err" [1m]) > bool on (app) sum by (app) (count_over_time({app="x"} |= "ok" [1m]))`,
			`{"metric":{"app":"x"},"values":[[1699999970,"0"],[1700000000,"1"]]}`},
		{`count_over_time({app="x"} |= "err" [1m]) >= on (app) sum by (app) (count_over_time({app="x"} |= "ok" [1m]))`,
			`{"metric":{"app":"x"},"values":[[1699999970,"1"],[1700000000,"2"]]}`},
		{`vector(1) > 0`, `{"metric":{},"values":[[1699999880,"1"],[1699999910,"1"],[1699999940,"1"],[1699999970,"1"],[1700000000,"1"]]}`},
		{`vector(1) > 2`, ``},
	} {
		code, body := env.get(rangeQ + url.QueryEscape(c.q))
		if code != 200 {
			t.Errorf("%s: %d %s", c.q, code, body)
			continue
		}
		wantJSON(t, c.q, dropStats(t, body), matrix(c.want))
	}
	for _, c := range []struct {
		at      string
		q, want string
	}{
		{"1700000000", errX + ` or vector(0)`, `{"metric":{},"value":[1700000000,"2"]}`},
		{"1699999900", errX + ` or vector(0)`, `{"metric":{},"value":[1699999900,"0"]}`},
		{"1700000000", errX + ` > bool 2`, `{"metric":{},"value":[1700000000,"0"]}`},
		{"1700000000", errX + ` > 2`, ``},
	} {
		code, body := env.get("/loki/api/v1/query?time=" + c.at + "&query=" + url.QueryEscape(c.q))
		if code != 200 {
			t.Errorf("%s: %d %s", c.q, code, body)
			continue
		}
		wantJSON(t, c.q, dropStats(t, body), `{"status":"success","data":{"resultType":"vector","result":[`+c.want+`]}}`)
	}
}

// TestMetricBinopErrors: operators used where Loki refuses them get a
// 400 whose message says what is wrong, on both endpoints.
func TestMetricBinopErrors(t *testing.T) {
	env := boExactEnv(t)
	for _, c := range []struct{ q, msg string }{
		{`1 > 2`, "comparisons between scalars must use bool"},
		{`sum(count_over_time({app="x"}[1m])) or 0`, `set operator \"or\" not allowed between scalars`},
		{`0 and vector(1)`, `set operator \"and\" not allowed`},
		{`vector(1) + bool 1`, "bool modifier can only be used on comparison operators"},
		{`sum(count_over_time({app="x"}[1m])) * group_left vector(2)`, "group_left must follow on (...) or ignoring (...)"},
		{`vector(1) / on (app) 2`, "vector matching (on, ignoring) only allowed between vectors"},
		{`sum(count_over_time({app="x"}[1m])) >`, "unexpected end of query"},
		{`sum(count_over_time({app="x"}[1m])) => 1`, "unexpected"},
		// Two left series match the one right sample: many-to-one.
		{`count_over_time({app=~"x|y"} |= "err" [5m]) + on () vector(1)`, "many-to-one matching must be explicit"},
		// Two right series for one left sample.
		{`vector(1) + on () count_over_time({app=~"x|y"} |= "err" [5m])`, "found duplicate series for the match group {} on the right hand-side"},
	} {
		for _, path := range []string{"/loki/api/v1/query?time=1700000000&query=", "/loki/api/v1/query_range?start=1699999880&end=1700000000&step=30&query="} {
			code, body := env.get(path + url.QueryEscape(c.q))
			if code != 400 || !strings.Contains(body, c.msg) {
				t.Errorf("%s%s: %d %s; want 400 with %q", path, c.q, code, body, c.msg)
			}
		}
	}
}

// eval keeps, per step and group, the k largest (topk) or smallest
// (bottomk) samples; NaN ranks last; equal values go to the labels that
// sort first.
func (tk *boTopk) eval(in boVal) boVal {
	out := boVal{vec: map[int64]map[string]boSample{}}
	for t, m := range in.vec {
		groups := map[string][]boSample{}
		for _, s := range m {
			g := map[string]string{}
			for k, v := range s.labels {
				if !tk.grouped || slices.Contains(tk.by, k) != tk.without {
					g[k] = v
				}
			}
			if !tk.grouped {
				g = map[string]string{}
			}
			groups[msKey(g)] = append(groups[msKey(g)], s)
		}
		out.vec[t] = map[string]boSample{}
		for _, ss := range groups {
			sort.Slice(ss, func(i, j int) bool {
				a, b := ss[i], ss[j]
				if math.IsNaN(a.v) != math.IsNaN(b.v) {
					return math.IsNaN(b.v)
				}
				if a.v != b.v && !math.IsNaN(a.v) {
					return a.v > b.v == (tk.fn == "topk")
				}
				return boLabels(a.labels).Compare(boLabels(b.labels)) < 0
			})
			for _, s := range ss[:min(tk.k, len(ss))] {
				out.vec[t][msKey(s.labels)] = s
			}
		}
	}
	return out
}

// TestMetricBinopLevels: boExactEnv's data served with detected_level
// (the default): an unaggregated series is per stream and level (all
// unknown here), so ignoring (service_name) matches nothing against sum
// by (app), and ignoring detected_level too gives TestMetricBinopExact's
// answer (review h107 A1; the README says so).
func TestMetricBinopLevels(t *testing.T) {
	env := newEnv(t, nil)
	env.mustPush("/loki/api/v1/push", protoBody([]PushStream{
		{Labels: `{app="x"}`, Entries: []PushEntry{{Time: base - 50e9, Line: "err a"}, {Time: base - 40e9, Line: "ok"}, {Time: base - 10e9, Line: "err b"}}},
		{Labels: `{app="y"}`, Entries: []PushEntry{{Time: base - 100e9, Line: "err c"}}},
	}), "Content-Type", "application/x-protobuf")
	matrix := func(res string) string {
		return `{"status":"success","data":{"resultType":"matrix","result":[` + res + `]}}`
	}
	errX, allX := `count_over_time({app="x"} |= "err" [1m])`, `sum by (app) (count_over_time({app="x"}[1m]))`
	fnCheck(t, env, fnRange, []struct{ q, want string }{
		{errX + ` + ignoring (service_name) ` + allX, ``},
		{errX + ` + ignoring (service_name, detected_level) ` + allX, `{"metric":{"app":"x"},"values":[[1699999970,"3"],[1700000000,"5"]]}`},
		{`count_over_time({app="x"}[1m])`, `{"metric":{"app":"x",` + dlJSON(true, "err a") + `"service_name":"x"},"values":[[1699999970,"2"],[1700000000,"3"]]}`},
	}, matrix)
}
