package server

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"haystack/internal/ingest"
	"haystack/internal/testseed"
)

// TestStepwiseBinopReference: binopSeries and topkSeries (step by step,
// F2) against the instant-map evaluation they replaced (refBinop,
// refTopk below, as b7ad4ea and e8493cf wrote them), on random operands:
// labels from a small alphabet (so signatures and whole label sets
// collide: duplicate-match errors, series merged by or), points on the
// step grid or off it, NaN and infinities. The answers must be the same
// series in the same order with the same bits, the errors the same
// messages. With a series limit, the answer is the same when it has at
// most that many series and too_many_series when it has more; and every
// operand keepsSeries names has each of its series in the answer.
func TestStepwiseBinopReference(t *testing.T) {
	seed := testseed.Seed(t, "HAY_STEPWISE_SEED")
	t.Logf("seed %d (replay: HAY_STEPWISE_SEED=%d go test -run TestStepwiseBinopReference ./internal/server)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0x5732))
	ops := []string{"+", "-", "*", "/", "%", "^", "==", "!=", ">", ">=", "<", "<=", "and", "or", "unless"}
	var cases, errs, limited int
	for range 4000 {
		start, step := int64(r.IntN(5))-2, int64(1+r.IntN(3))
		nsteps := 1 + r.IntN(8)
		end := start + int64(nsteps-1)*step + int64(r.IntN(int(step)))
		off := r.IntN(8) == 0
		var e *mexpr
		var lss, rss []*series
		if r.IntN(5) == 0 {
			e = &mexpr{kind: "topk", fn: []string{"topk", "bottomk"}[r.IntN(2)], k: 1 + r.IntN(3)}
			if r.IntN(2) == 0 {
				e.by, e.without = swRandNames(r), r.IntN(2) == 0
			}
			lss = swRandSeries(r, start, step, nsteps, off)
		} else {
			e = &mexpr{kind: "binop", fn: ops[r.IntN(len(ops))]}
			e.l, e.r = &mexpr{kind: "range"}, &mexpr{kind: "range"}
			if !isSetOp(e.fn) && r.IntN(3) == 0 {
				sc := &mexpr{kind: "const", val: swRandValue(r)}
				if r.IntN(2) == 0 {
					e.l = sc
				} else {
					e.r = sc
				}
			}
			e.boolMod = isComparison(e.fn) && r.IntN(2) == 0
			if !e.l.scalar() && !e.r.scalar() && r.IntN(2) == 0 {
				e.matching, e.on, e.match = true, r.IntN(2) == 0, swRandNames(r)
			}
			if !e.l.scalar() {
				lss = swRandSeries(r, start, step, nsteps, off)
			}
			if !e.r.scalar() {
				rss = swRandSeries(r, start, step, nsteps, off)
			}
		}
		desc := fmt.Sprintf("%s start %d end %d step %d\nleft %s\nright %s", swDesc(e), start, end, step, swDump(lss), swDump(rss))
		eval := func(limit int) ([]*series, error) {
			if e.kind == "topk" {
				return topkSeries(context.Background(), e, swClone(lss), start, end, step, limit)
			}
			return binopSeries(context.Background(), e, lss, rss, start, end, step, limit)
		}
		var want []*series
		var werr error
		if e.kind == "topk" {
			want, werr = refTopk(e, swClone(lss))
		} else {
			want, werr = refBinop(e, lss, rss)
		}
		got, err := eval(0)
		cases++
		switch {
		case werr != nil:
			errs++
			if err == nil || err.Error() != werr.Error() {
				t.Fatalf("%s\nerror %v, want %v", desc, err, werr)
			}
		case err != nil:
			t.Fatalf("%s\nerror %v, want %s", desc, err, swDump(want))
		default:
			if d := swDiff(got, want); d != "" {
				t.Fatalf("%s\ngot  %s\nwant %s\n%s", desc, swDump(got), swDump(want), d)
			}
		}
		limit := 1 + r.IntN(4)
		got, err = eval(limit)
		switch {
		case werr != nil:
			if err == nil {
				t.Fatalf("%s\nlimit %d: no error, want one", desc, limit)
			}
		case len(want) > limit:
			limited++
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("maximum number of series (%d) reached", limit)) {
				t.Fatalf("%s\nlimit %d, %d series: error %v, want too_many_series", desc, limit, len(want), err)
			}
		case err != nil:
			t.Fatalf("%s\nlimit %d, %d series: error %v", desc, limit, len(want), err)
		default:
			if d := swDiff(got, want); d != "" {
				t.Fatalf("%s\nlimit %d: %s", desc, limit, d)
			}
		}
		if werr != nil || e.kind != "binop" {
			continue
		}
		answered := map[string]bool{}
		for _, se := range want {
			answered[se.labels.String()] = true
		}
		for _, x := range []struct {
			x  *mexpr
			ss []*series
		}{{e.l, lss}, {e.r, rss}} {
			if x.x.scalar() || !keepsSeries(e, x.x) {
				continue
			}
			for _, se := range x.ss {
				if len(se.ts) > 0 && !answered[se.labels.String()] {
					t.Fatalf("%s\nkeepsSeries holds for an operand whose series %s is not in the answer %s", desc, se.labels, swDump(want))
				}
			}
		}
	}
	t.Logf("%d cases, %d errors, %d over a series limit", cases, errs, limited)
}

func swRandNames(r *rand.Rand) []string {
	names := []string{}
	for _, n := range []string{"a", "b", "c"} {
		if r.IntN(2) == 0 {
			names = append(names, n)
		}
	}
	return names
}

func swRandValue(r *rand.Rand) float64 {
	return []float64{0, 1, 2, 3, -1, 0.5, 10, math.NaN(), math.Inf(1), math.Inf(-1)}[r.IntN(10)]
}

// swRandSeries is up to 6 series with labels over a, b, c (values 0-1,
// so sets repeat) and points at random steps; off moves some points off
// the grid (still ascending in each series).
func swRandSeries(r *rand.Rand, start, step int64, nsteps int, off bool) []*series {
	ss := make([]*series, r.IntN(7))
	for i := range ss {
		se := &series{}
		for _, n := range []string{"a", "b", "c"} {
			if r.IntN(3) != 0 {
				se.labels = append(se.labels, ingest.Label{Name: n, Value: fmt.Sprint(r.IntN(2))})
			}
		}
		for k := range nsteps {
			if r.IntN(3) == 0 {
				continue
			}
			t := start + int64(k)*step
			if off && r.IntN(4) == 0 {
				t++ // before the next step's time when step > 1, else on it (and still ascending)
				if step == 1 {
					continue
				}
			}
			se.ts = append(se.ts, t)
			se.vs = append(se.vs, swRandValue(r))
		}
		ss[i] = se
	}
	return ss
}

func swClone(ss []*series) []*series {
	out := make([]*series, len(ss))
	for i, se := range ss {
		out[i] = &series{labels: se.labels, ts: slices.Clone(se.ts), vs: slices.Clone(se.vs)}
	}
	return out
}

func swDesc(e *mexpr) string {
	if e.kind == "topk" {
		return fmt.Sprintf("%s(%d) by %v without %v", e.fn, e.k, e.by, e.without)
	}
	side := func(x *mexpr) string {
		if x.scalar() {
			return fmt.Sprint(x.val)
		}
		return "V"
	}
	return fmt.Sprintf("%s %s bool=%v matching=%v on=%v %v %s", side(e.l), e.fn, e.boolMod, e.matching, e.on, e.match, side(e.r))
}

func swDump(ss []*series) string {
	var b strings.Builder
	for _, se := range ss {
		fmt.Fprintf(&b, "%s%v%v ", se.labels, se.ts, se.vs)
	}
	return b.String()
}

// swDiff compares answers exactly: order, labels, times, value bits.
func swDiff(got, want []*series) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d series, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.labels.String() != w.labels.String() || !slices.Equal(g.ts, w.ts) || len(g.vs) != len(w.vs) {
			return fmt.Sprintf("series %d: %s%v, want %s%v", i, g.labels, g.ts, w.labels, w.ts)
		}
		for j := range g.vs {
			if math.Float64bits(g.vs[j]) != math.Float64bits(w.vs[j]) {
				return fmt.Sprintf("series %d point %d: %v, want %v", i, j, g.vs[j], w.vs[j])
			}
		}
	}
	return ""
}

// refPoint is one sample of an instant vector.
type refPoint struct {
	ls ingest.Labels
	v  float64
}

// refInstants regroups series by time: the instant vector at each time one
// of them has a point.
func refInstants(ss []*series) map[int64][]refPoint {
	m := map[int64][]refPoint{}
	for _, se := range ss {
		for i, t := range se.ts {
			m[t] = append(m[t], refPoint{se.labels, se.vs[i]})
		}
	}
	return m
}

// refBuilder (seriesBuilder before F2) assembles series from instant vectors added in time
// order.
type refBuilder struct {
	idx map[string]*series
	out []*series
}

// add appends a point; a second point for the same labels at the same
// time is Prometheus's "vector cannot contain metrics with the same
// labelset" (e.g. on (...) dropped the labels that told two apart).
func (b *refBuilder) add(t int64, ls ingest.Labels, v float64) error {
	if b.idx == nil {
		b.idx = map[string]*series{}
	}
	k := ls.String()
	se := b.idx[k]
	if se == nil {
		se = &series{labels: ls}
		b.idx[k] = se
		b.out = append(b.out, se)
	} else if se.ts[len(se.ts)-1] == t {
		return badRequest("bad_query", "multiple matches for labels %s: vector cannot contain metrics with the same labelset", k)
	}
	se.ts = append(se.ts, t)
	se.vs = append(se.vs, v)
	return nil
}

// refSortedTimes is the keys of the instant maps, ascending.
func refSortedTimes(ms ...map[int64][]refPoint) []int64 {
	var ts []int64
	for _, m := range ms {
		for t := range m {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return slices.Compact(ts)
}

// refBinop is evalBinop as b7ad4ea wrote it (each side regrouped by time
// into a map of instant vectors), over the operands' series (nil for a
// scalar side): the reference the step-by-step evaluation must match.
func refBinop(e *mexpr, lss, rss []*series) ([]*series, error) {
	ctx := context.Background()
	var lm, rm map[int64][]refPoint
	if !e.l.scalar() {
		lm = refInstants(lss)
	}
	if !e.r.scalar() {
		rm = refInstants(rss)
	}
	var b refBuilder
	// A scalar side: one sample value against each sample of the other.
	if e.l.scalar() || e.r.scalar() {
		m, s, swap := lm, e.r.val, false
		if e.l.scalar() {
			m, s, swap = rm, e.l.val, true
		}
		for _, t := range refSortedTimes(m) {
			for _, p := range m[t] {
				a, c := p.v, s
				if swap {
					a, c = s, p.v
				}
				v, keep := binopValue(e, a, c)
				if isComparison(e.fn) && !e.boolMod {
					v = p.v // the vector's sample, whichever side it is on
				}
				if keep {
					if err := b.add(t, p.ls, v); err != nil {
						return nil, err
					}
				}
			}
		}
		return b.out, nil
	}
	for _, t := range refSortedTimes(lm, rm) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		left, right := lm[t], rm[t]
		if isSetOp(e.fn) {
			sigs := map[string]bool{}
			for _, p := range right {
				sigs[e.signature(p.ls)] = true
			}
			if e.fn == "or" {
				lsigs := map[string]bool{}
				for _, p := range left {
					lsigs[e.signature(p.ls)] = true
					if err := b.add(t, p.ls, p.v); err != nil {
						return nil, err
					}
				}
				for _, p := range right {
					if !lsigs[e.signature(p.ls)] {
						if err := b.add(t, p.ls, p.v); err != nil {
							return nil, err
						}
					}
				}
				continue
			}
			for _, p := range left {
				if sigs[e.signature(p.ls)] == (e.fn == "and") {
					if err := b.add(t, p.ls, p.v); err != nil {
						return nil, err
					}
				}
			}
			continue
		}
		// One-to-one: each signature at most once on each side.
		rs := map[string]refPoint{}
		for _, p := range right {
			k := e.signature(p.ls)
			if o, dup := rs[k]; dup {
				return nil, badRequest("bad_query", "found duplicate series for the match group %s on the right hand-side of the operation: [%s, %s]; many-to-many matching not allowed: matching labels must be unique on one side", k, o.ls, p.ls)
			}
			rs[k] = p
		}
		seen := map[string]ingest.Labels{}
		for _, p := range left {
			k := e.signature(p.ls)
			r, ok := rs[k]
			if !ok {
				continue
			}
			if o, dup := seen[k]; dup {
				return nil, badRequest("bad_query", "multiple matches for labels %s on the left hand-side of the operation: [%s, %s]; many-to-one matching must be explicit (group_left/group_right)", k, o, p.ls)
			}
			seen[k] = p.ls
			v, keep := binopValue(e, p.v, r.v)
			if !keep {
				continue
			}
			ls := p.ls
			if e.matching {
				ls = project(ls, e.match, e.on)
			}
			if err := b.add(t, ls, v); err != nil {
				return nil, err
			}
		}
	}
	return b.out, nil
}

// refTopk is topkSeries as e8493cf wrote it.
func refTopk(e *mexpr, in []*series) ([]*series, error) {
	slices.SortFunc(in, func(a, b *series) int { return a.labels.Compare(b.labels) })
	m := refInstants(in) // each time's samples in label order
	var b refBuilder
	for _, t := range refSortedTimes(m) {
		groups := map[string][]refPoint{}
		var order []string
		for _, p := range m[t] {
			k := project(p.ls, e.by, !e.without).String()
			if groups[k] == nil {
				order = append(order, k)
			}
			groups[k] = append(groups[k], p)
		}
		for _, k := range order {
			g := groups[k]
			slices.SortStableFunc(g, func(x, y refPoint) int {
				xn, yn := math.IsNaN(x.v), math.IsNaN(y.v)
				switch {
				case xn || yn:
					return cmpBool(xn, yn)
				case e.fn == "topk":
					return cmpFloat(y.v, x.v)
				}
				return cmpFloat(x.v, y.v)
			})
			for _, p := range g[:min(e.k, len(g))] {
				if err := b.add(t, p.ls, p.v); err != nil {
					return nil, err
				}
			}
		}
	}
	return b.out, nil
}
