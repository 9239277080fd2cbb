package server

// Random queries with sort, sort_desc, unary minus, offset, label_replace,
// absent_over_time and group_left/group_right, over the binary-operator
// oracle's expressions (metricq_binop_test.go) and the metric semantics
// oracle's data, checked against an oracle written from Prometheus's
// documentation of each (which Loki's query reference follows),
// independently of metricq_fn.go:
//
//   - sort/sort_desc: the same samples; an instant answer ordered by
//     value (NaN last either way), equal values by labels; a range
//     answer by labels as every answer;
//   - -x: each sample's value negated, labels kept; of a scalar, the
//     negated scalar;
//   - f(... [r] offset o): f's value at t-o, answered at t;
//   - label_replace(v, dst, repl, src, re): where ^(?s:re)$ matches src's
//     value ("" when absent), dst is set to repl with $n expanded (an
//     empty result removes dst); two samples of one step with equal
//     labels afterwards are an error;
//   - absent_over_time(q[r]): 1 at the steps where count_over_time(q[r])
//     has no series, with the labels of the selector's equality matchers;
//   - group_left (group_right): each sample of the left (right) side
//     matched with the one sample of the other side of its signature;
//     its labels, with the group_x labels copied from the one side (or
//     removed if it has none); two one-side samples of a signature, or
//     two results with the same labels at a step, are errors.
//
// HAY_METRICSEM_SEED=N reruns one seed.

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"haystack/internal/segment"
	"haystack/internal/store"
)

type fxExpr struct {
	kind string // "bo", "neg", "sort", "lrep", "offset", "absent", "group"
	bo   *boExpr
	in   *fxExpr
	fn   string    // sort: sort or sort_desc; neg: "-" or "+"
	lr   [4]string // dst, replacement, src, regex
	leaf *msExpr   // offset, absent: a range function
	off  int64
	offT string
	sum  bool // offset: under sum (...)

	op       string
	boolMod  bool
	on       bool
	match    []string
	right    bool // group_right
	include  []string
	l, r     *fxExpr
	parenNeg bool
}

// fxAbsentLabels is absent_over_time's labels for each selector the
// metric semantics oracle draws.
var fxAbsentLabels = map[string]map[string]string{
	`{app=~".+"}`:           {},
	`{app="a"}`:             {"app": "a"},
	`{env="prod"}`:          {"env": "prod"},
	`{app!="b", app=~".+"}`: {},
	`{level=~"info|error"}`: {},
	`{app=~"a.*|é"}`:        {},
}

var (
	fxDst   = []string{"app", "dst", "env", "service_name", "level"}
	fxSrc   = []string{"app", "env", "level", "service_name", "nope"}
	fxRegex = []string{"(.*)", "a(.*)", "(.)(.*)", "", ".+", "(?P<w>[a-z]+)", "pro.", "x|", "é|(a)"}
	fxRepl  = []string{"$1", "x-$1", "", "${2}$1", "$w", "lit", "$1$1"}
	fxOffs  = []struct {
		text string
		ns   int64
	}{{"0s", 0}, {"1s", 1e9}, {"10s", 10e9}, {"1m", 60e9}, {"90s", 90e9}, {"5m", 300e9}}
)

// fxRange draws a range function with integer values and a pipeline
// that cannot leave __error__.
func fxRange(r *rand.Rand) *msExpr {
	for {
		x := msRandRange(r)
		if x.q.p.errOK || strings.Contains(x.q.text, "| keep") && r.IntN(2) == 0 {
			continue // (keep drops the labels group_x matches on)
		}
		x.fn = []string{"count_over_time", "bytes_over_time"}[r.IntN(2)]
		if r.IntN(3) > 0 {
			// Windows wide enough to hold entries most of the time.
			rg := msRanges[5+r.IntN(3)]
			x.rng, x.rngText = rg.ns, rg.text
		}
		return x
	}
}

// fxLeaf is a range function as a vector operand, maybe summed by some
// labels.
func fxLeaf(r *rand.Rand, by []string) *fxExpr {
	x := fxRange(r)
	if by != nil {
		x = &msExpr{kind: "agg", fn: "sum", grouped: true, by: by, inner: x, suffix: r.IntN(2) == 0}
	}
	return &fxExpr{kind: "bo", bo: &boExpr{leaf: x}}
}

// fxVec draws an expression that is a vector.
func fxVec(r *rand.Rand, depth int) *fxExpr {
	x := fxRand(r, depth)
	if x.isScalar() {
		return &fxExpr{kind: "bo", bo: &boExpr{leaf: boLeaf(r)}}
	}
	return x
}

func fxRand(r *rand.Rand, depth int) *fxExpr {
	if depth == 0 || r.IntN(4) == 0 {
		switch r.IntN(6) {
		case 0:
			o := fxOffs[r.IntN(len(fxOffs))]
			return &fxExpr{kind: "offset", leaf: fxRange(r), off: o.ns, offT: o.text, sum: r.IntN(3) == 0}
		case 1:
			x := fxRange(r)
			x.fn = "count_over_time"
			o := fxOffs[r.IntN(len(fxOffs))]
			return &fxExpr{kind: "absent", leaf: x, off: o.ns, offT: o.text}
		}
		if r.IntN(2) == 0 {
			return fxLeaf(r, nil)
		}
		return &fxExpr{kind: "bo", bo: boRand(r, 1+r.IntN(2))}
	}
	switch r.IntN(5) {
	case 0:
		return &fxExpr{kind: "neg", in: fxRand(r, depth-1), fn: []string{"-", "-", "+"}[r.IntN(3)], parenNeg: r.IntN(2) == 0}
	case 1:
		return &fxExpr{kind: "sort", in: fxVec(r, depth-1), fn: []string{"sort", "sort_desc"}[r.IntN(2)]}
	case 2:
		return &fxExpr{kind: "lrep", in: fxVec(r, depth-1), lr: [4]string{fxDst[r.IntN(len(fxDst))], fxRepl[r.IntN(len(fxRepl))], fxSrc[r.IntN(len(fxSrc))], fxRegex[r.IntN(len(fxRegex))]}}
	}
	x := &fxExpr{kind: "group", l: fxVec(r, depth-1), r: fxVec(r, depth-1), op: boOps[r.IntN(12)], on: r.IntN(2) == 0, right: r.IntN(2) == 0}
	if boIsCmp(x.op) && r.IntN(2) == 0 {
		x.boolMod = true
	}
	x.match = []string{}
	for _, l := range []string{"app", "env", "level", "service_name"} {
		if r.IntN(2) == 0 {
			x.match = append(x.match, l)
		}
	}
	if r.IntN(2) == 0 {
		// The one side aggregated by the on labels: unique signatures.
		x.on = true
		one, many := fxLeaf(r, x.match), fxLeaf(r, nil)
		if r.IntN(2) == 0 {
			many = x.l
			if x.right {
				many = x.r
			}
		}
		if x.right {
			x.l, x.r = one, many
		} else {
			x.l, x.r = many, one
		}
	}
	if r.IntN(3) > 0 {
		x.include = []string{}
		for _, l := range []string{"app", "env", "level", "service_name", "nope"} {
			if r.IntN(3) == 0 && !(x.on && slices.Contains(x.match, l) && r.IntN(8) > 0) {
				x.include = append(x.include, l)
			}
		}
	}
	return x
}

func (x *fxExpr) isScalar() bool {
	switch x.kind {
	case "bo":
		return x.bo.isScalar()
	case "neg":
		return x.in.isScalar()
	}
	return false
}

// rangeText writes a range function with an offset, the range after the
// query or after the selector (the pipeline after the offset).
func fxRangeText(x *msExpr, offT string) string {
	off := ""
	if offT != "" {
		off = " offset " + offT
	}
	if i := strings.IndexByte(x.q.text, '}') + 1; x.after && i < len(x.q.text) {
		return fmt.Sprintf("%s(%s[%s]%s%s)", x.fn, x.q.text[:i], x.rngText, off, x.q.text[i:])
	}
	return fmt.Sprintf("%s(%s [%s]%s)", x.fn, x.q.text, x.rngText, off)
}

func (x *fxExpr) String() string {
	switch x.kind {
	case "bo":
		return x.bo.String()
	case "neg":
		if x.parenNeg || x.in.kind != "bo" || x.in.bo.op != "" {
			return x.fn + "(" + x.in.String() + ")"
		}
		return x.fn + x.in.String()
	case "sort":
		return x.fn + "(" + x.in.String() + ")"
	case "lrep":
		return fmt.Sprintf("label_replace(%s, %q, %q, %q, %q)", x.in, x.lr[0], x.lr[1], x.lr[2], x.lr[3])
	case "offset":
		s := fxRangeText(x.leaf, x.offT)
		if x.sum {
			s = "sum(" + s + ")"
		}
		return s
	case "absent":
		x.leaf.fn = "absent_over_time"
		s := fxRangeText(x.leaf, x.offT)
		x.leaf.fn = "count_over_time"
		return s
	}
	mod := ""
	if x.boolMod {
		mod = " bool"
	}
	mod += map[bool]string{true: " on", false: " ignoring"}[x.on] + " (" + strings.Join(x.match, ", ") + ")"
	mod += map[bool]string{true: " group_right", false: " group_left"}[x.right]
	if x.include != nil {
		mod += " (" + strings.Join(x.include, ", ") + ")"
	}
	return "(" + x.l.String() + ") " + x.op + mod + " (" + x.r.String() + ")"
}

// staticErr is the refusal a query gets before it runs, in the order
// the parser meets them.
func (x *fxExpr) staticErr() error {
	switch x.kind {
	case "bo":
		return x.bo.staticErr()
	case "neg", "sort", "lrep":
		return x.in.staticErr()
	case "group":
		if err := x.l.staticErr(); err != nil {
			return err
		}
		if x.on {
			for _, n := range x.include {
				if slices.Contains(x.match, n) {
					return &boErr{"must not occur in ON and GROUP clause at once"}
				}
			}
		}
		return x.r.staticErr()
	}
	return nil
}

// fxSteps converts an oracle range evaluation to instant vectors per
// step, each time moved by shift.
func fxSteps(m map[string]*msSeries, shift int64) boVal {
	out := boVal{vec: map[int64]map[string]boSample{}}
	for k, se := range m {
		for t, v := range se.pts {
			if out.vec[t+shift] == nil {
				out.vec[t+shift] = map[string]boSample{}
			}
			out.vec[t+shift][k] = boSample{se.labels, v}
		}
	}
	return out
}

func (x *fxExpr) eval(d *msData, steps []int64) (boVal, error) {
	switch x.kind {
	case "bo":
		return x.bo.eval(d, steps)
	case "offset", "absent":
		shifted := make([]int64, len(steps))
		for i, t := range steps {
			shifted[i] = t - x.off
		}
		var ee msEvalErr
		v := fxSteps(x.leaf.eval(d, shifted, &ee), x.off)
		if x.kind == "absent" {
			out := boVal{vec: map[int64]map[string]boSample{}}
			ls := fxAbsentLabels[x.leaf.q.text[:strings.IndexByte(x.leaf.q.text, '}')+1]]
			for _, t := range steps {
				if len(v.vec[t]) == 0 {
					out.vec[t] = map[string]boSample{msKey(ls): {ls, 1}}
				}
			}
			return out, nil
		}
		if x.sum {
			for t, m := range v.vec {
				s := 0.0
				for _, smp := range m {
					s += smp.v
				}
				v.vec[t] = map[string]boSample{"": {map[string]string{}, s}}
			}
		}
		return v, nil
	}
	if x.kind != "group" {
		in, err := x.in.eval(d, steps)
		if err != nil {
			return boVal{}, err
		}
		switch x.kind {
		case "neg":
			if x.fn == "+" {
				return in, nil
			}
			if in.scalar {
				return boVal{scalar: true, s: -in.s}, nil
			}
			for t, m := range in.vec {
				for k, s := range m {
					m[k] = boSample{s.labels, -s.v}
				}
				in.vec[t] = m
			}
			return in, nil
		case "sort":
			return in, nil
		}
		re := regexp.MustCompile("^(?s:" + x.lr[3] + ")$")
		out := boVal{vec: map[int64]map[string]boSample{}}
		for _, t := range steps {
			for _, s := range in.vec[t] {
				ls := maps.Clone(s.labels)
				src := ls[x.lr[2]]
				if m := re.FindStringSubmatchIndex(src); m != nil {
					ls[x.lr[0]] = string(re.ExpandString(nil, x.lr[1], src, m))
					if ls[x.lr[0]] == "" {
						delete(ls, x.lr[0])
					}
				}
				if out.vec[t] == nil {
					out.vec[t] = map[string]boSample{}
				}
				k := msKey(ls)
				if _, dup := out.vec[t][k]; dup {
					return boVal{}, &boErr{"vector cannot contain metrics with the same labelset"}
				}
				out.vec[t][k] = boSample{ls, s.v}
			}
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
	sig := func(ls map[string]string) string {
		out := map[string]string{}
		for k, v := range ls {
			if slices.Contains(x.match, k) == x.on {
				out[k] = v
			}
		}
		return msKey(out)
	}
	many, one := l, r
	if x.right {
		many, one = r, l
	}
	out := boVal{vec: map[int64]map[string]boSample{}}
	for _, t := range steps {
		ones := map[string]boSample{}
		for _, s := range one.vec[t] {
			k := sig(s.labels)
			if _, dup := ones[k]; dup {
				return boVal{}, &boErr{"many-to-many matching not allowed: matching labels must be unique on one side"}
			}
			ones[k] = s
		}
		for _, s := range many.vec[t] {
			o, ok := ones[sig(s.labels)]
			if !ok {
				continue
			}
			lv, rv := s.v, o.v
			if x.right {
				lv, rv = o.v, s.v
			}
			v := boArith(x.op, lv, rv)
			if boIsCmp(x.op) {
				c := boCmp(x.op, lv, rv)
				switch {
				case x.boolMod:
					v = map[bool]float64{true: 1}[c]
				case !c:
					continue
				default:
					v = lv
				}
			}
			ls := maps.Clone(s.labels)
			for _, n := range x.include {
				if o.labels[n] != "" {
					ls[n] = o.labels[n]
				} else {
					delete(ls, n)
				}
			}
			if out.vec[t] == nil {
				out.vec[t] = map[string]boSample{}
			}
			k := msKey(ls)
			if _, dup := out.vec[t][k]; dup {
				return boVal{}, &boErr{"grouping labels must ensure unique matches"}
			}
			out.vec[t][k] = boSample{ls, v}
		}
	}
	return out, nil
}

// fxSortedBefore is the order sort (or sort_desc) gives two samples.
func fxSortedBefore(desc bool, a, b *boSeries) int {
	av, bv := a.pts[a.order[0]], b.pts[b.order[0]]
	an, bn := math.IsNaN(av), math.IsNaN(bv)
	switch {
	case an != bn:
		return cmpBool(an, bn)
	case !an && av != bv && !desc:
		return cmpFloat(av, bv)
	case !an && av != bv:
		return cmpFloat(bv, av)
	}
	return boLabels(a.labels).Compare(boLabels(b.labels))
}

func TestMetricFnOracle(t *testing.T) {
	var total, errs, points, sorted int
	kinds, answered := map[string]int{}, map[string]int{}
	msEach(t, 3, 0x666e, func(t *testing.T, seed uint64, r *rand.Rand) {
		env := newEnv(t, func(c *Config) {
			c.Store = store.Options{HeadBytes: 4 << 10, Segment: segment.Options{BlockSize: 512 << (seed % 3)}}
		})
		d := msGen(r)
		d.levels = env.levelsOn()
		msPush(t, env, r, d)
		for range 120 {
			x := fxRand(r, 1+r.IntN(3))
			if r.IntN(4) == 0 && x.kind != "sort" {
				x = &fxExpr{kind: "sort", in: x, fn: []string{"sort", "sort_desc"}[r.IntN(2)]}
				if x.in.isScalar() || r.IntN(2) == 0 {
					// A range function's many series to order.
					x.in = fxLeaf(r, nil)
				}
				if r.IntN(3) == 0 {
					// (v-1)/(v-1): NaN where v is 1, else 1, to order NaN.
					v := fxRange(r)
					m1 := &boExpr{op: "-", l: &boExpr{leaf: v}, r: &boExpr{c: 1}}
					x.in = &fxExpr{kind: "bo", bo: &boExpr{op: "/", l: m1, r: m1}}
				}
			}
			kinds[x.kind]++
			p := url.Values{"query": {x.String()}}
			path := "/loki/api/v1/query_range"
			instant := r.IntN(3) == 0 || x.kind == "sort" && r.IntN(2) == 0
			var steps []int64
			if instant {
				at := d.es[r.IntN(len(d.es))].t + int64(r.IntN(3)-1)
				if r.IntN(3) == 0 {
					at += fxOffs[r.IntN(len(fxOffs))].ns // where an offset reaches the entries
				}
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
			root := x
			for root.kind == "neg" && root.fn == "+" {
				root = root.in // +x is x, sort's order included
			}
			if instant && root.kind == "sort" {
				// In value order; then compared as a set.
				for i := 1; i < len(got); i++ {
					if fxSortedBefore(root.fn == "sort_desc", got[i-1], got[i]) >= 0 {
						t.Fatalf("%s: %v before %v: not in %s order", desc, got[i-1], got[i], root.fn)
					}
				}
				sorted += len(got)
				got = slices.Clone(got)
				slices.SortFunc(got, func(a, b *boSeries) int { return boLabels(a.labels).Compare(boLabels(b.labels)) })
			}
			boCompare(t, desc, got, want, steps)
			if instant && want.scalar != (len(got) == 1 && got[0].scalar) {
				t.Fatalf("%s: a scalar answered as a vector, or the reverse (want scalar: %v)", desc, want.scalar)
			}
			if len(got) > 0 {
				answered[x.kind]++
			}
			for _, se := range got {
				points += len(se.pts)
			}
		}
	})
	t.Logf("%d queries compared (%d expected errors), %d points, %d samples in sort order checked; roots %v, of which answered with series %v", total, errs, points, sorted, kinds, answered)
}
