package server

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"haystack/internal/ingest"
	"haystack/internal/query"
)

// The functions over instant vectors (sort, sort_desc, label_replace),
// unary minus, the offset modifier of range expressions and
// absent_over_time, with Prometheus's semantics, which Loki's query
// reference follows:
//
//	Term    = ... | ( "-" | "+" ) Power
//	        | ( "sort" | "sort_desc" ) "(" Expr ")"
//	        | "label_replace" "(" Expr "," String "," String "," String "," String ")"
//	        | "absent_over_time" "(" LogQuery [ Unwrap ] "[" Duration "]" [ Offset ] ")" .
//	Range   = RangeFn "(" LogQuery "[" Duration "]" [ Offset ] ... ")" .
//	Offset  = "offset" Duration .
//
// A minus before a number is part of the number, as Loki lexes it
// (-2^2 is 4); before anything else it negates what follows, binding
// looser than ^ as in PromQL (-x^2 is -(x^2)).

// labelReplace is label_replace's arguments.
type labelReplace struct {
	dst, repl, src string
	re             *regexp.Regexp
}

// legacyLabelName is Prometheus's label name rule, which Loki keeps.
var legacyLabelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// signedNumber tells whether the sign at p.pos is that of a number
// literal (a digit or '.' follows it, maybe after whitespace).
func (p *mparser) signedNumber() bool {
	r := skipSpaceAndComments(p.s[p.pos+1:])
	return r != "" && (r[0] >= '0' && r[0] <= '9' || r[0] == '.')
}

// unary reads the operand of a unary sign at p.pos: at the ^ level, so
// that -x^2 is -(x^2) as in PromQL. A negated constant folds; a negated
// vector is the vector times -1 (each sample's sign flipped, labels
// kept: Loki's series have no __name__ to drop).
func (p *mparser) unary(neg bool) (*mexpr, error) {
	p.pos++
	if err := p.enter(); err != nil {
		return nil, err
	}
	x, err := p.level(len(mlevels) - 1)
	p.leave()
	if err != nil {
		return nil, err
	}
	if !neg {
		return x, nil
	}
	if x.kind == "const" {
		return &mexpr{kind: "const", val: -x.val, vec: x.vec}, nil
	}
	return &mexpr{kind: "binop", fn: "*", l: x, r: &mexpr{kind: "const", val: -1}}, nil
}

// stringLit reads a string argument: "..." with Go's escapes (as
// LogQL's strings) or `...` raw.
func (p *mparser) stringLit() (string, error) {
	p.ws()
	st := p.pos
	if st >= len(p.s) || p.s[st] != '"' && p.s[st] != '`' {
		return "", fmt.Errorf("want a string at column %d", st+1)
	}
	p.skipString()
	if p.pos >= len(p.s) {
		return "", fmt.Errorf("unterminated string at column %d", st+1)
	}
	p.pos++
	v, err := strconv.Unquote(p.s[st:p.pos])
	if err != nil {
		return "", fmt.Errorf("bad string at column %d: %w", st+1, err)
	}
	return v, nil
}

// function reads sort(v), sort_desc(v) or label_replace(v, dst,
// replacement, src, regex) after its name.
func (p *mparser) function(name string) (*mexpr, error) {
	if !p.eat('(') {
		return nil, fmt.Errorf("%s wants ( at column %d", name, p.pos+1)
	}
	in, err := p.expr()
	if err != nil {
		return nil, err
	}
	if in.scalar() {
		return nil, fmt.Errorf("%s wants a vector, got the scalar %v", name, in.val)
	}
	e := &mexpr{kind: "fn", fn: name, inner: in}
	if name == "label_replace" {
		var args [4]string
		for i := range args {
			if !p.eat(',') {
				return nil, fmt.Errorf("label_replace wants 5 arguments (v, dst, replacement, src, regex): , at column %d", p.pos+1)
			}
			if args[i], err = p.stringLit(); err != nil {
				return nil, fmt.Errorf("label_replace: %w", err)
			}
		}
		lr := &labelReplace{dst: args[0], repl: args[1], src: args[2]}
		// Anchored at both ends, '.' matching newlines too, as
		// Prometheus compiles it.
		if lr.re, err = regexp.Compile("^(?s:" + args[3] + ")$"); err != nil {
			return nil, fmt.Errorf("invalid regular expression in label_replace(): %s", args[3])
		}
		if !legacyLabelName.MatchString(lr.dst) {
			return nil, fmt.Errorf("invalid destination label name in label_replace(): %s", lr.dst)
		}
		e.lrep = lr
	}
	if !p.eat(')') {
		return nil, fmt.Errorf("%s: missing ) at column %d", name, p.pos+1)
	}
	return e, nil
}

// offset reads an optional "offset <duration>" after a range.
func (p *mparser) offset() (time.Duration, error) {
	save := p.pos
	if !p.word("offset") {
		p.pos = save
		return 0, nil
	}
	p.ws()
	st := p.pos
	for p.pos < len(p.s) && (isIdentByte(p.s[p.pos]) || p.s[p.pos] == '.') {
		p.pos++
	}
	d, err := parsePromDuration(p.s[st:p.pos])
	if err != nil || d < 0 {
		return 0, fmt.Errorf("bad offset %q at column %d: want a duration such as 1h", p.s[st:p.pos], st+1)
	}
	return d, nil
}

// rangeOffset finishes a range function (rangeExpr) and wraps it in its
// offset and, for absent_over_time, in the absent node over the
// count of entries.
func (p *mparser) rangeOffset(e *mexpr, off time.Duration) (*mexpr, error) {
	absent := e.fn == "absent_over_time"
	e, err := p.rangeExpr(e)
	if err != nil {
		return nil, err
	}
	if absent {
		// Whether a window has a sample: any entry (count_over_time),
		// or, unwrapped, any value (last_over_time has a point then).
		e.fn = "count_over_time"
		if e.kind == "unwrap" {
			e.fn = "last_over_time"
		}
	}
	x := e
	if off > 0 {
		x = &mexpr{kind: "offset", inner: e, off: off}
	}
	if absent {
		ls, err := absentLabels(e.log)
		if err != nil {
			return nil, fmt.Errorf("absent_over_time: %w", err)
		}
		x = &mexpr{kind: "absent", fn: "absent_over_time", inner: x, absent: ls}
	}
	return x, nil
}

// absentLabels is the labels absent_over_time answers with: those of
// the selector's equality matchers, a label dropped when another matcher
// names it first, as Prometheus's absent() derives them.
func absentLabels(log string) (ingest.Labels, error) {
	if !isLogQuery(log) {
		return nil, fmt.Errorf("wants a log query {...}, got %q", log)
	}
	ast, err := query.Parse(log)
	if err != nil {
		return nil, err
	}
	var ls ingest.Labels
	has := map[string]bool{}
	for _, m := range ast.Selector {
		if m.Type == query.MatchEqual && !has[m.Name] && legacyLabelName.MatchString(m.Name) {
			ls = ls.With(m.Name, m.Value)
			has[m.Name] = true
		} else if legacyLabelName.MatchString(m.Name) {
			ls = ls.With(m.Name, "")
		}
	}
	return ls, nil
}

// groupModifier reads group_left or group_right and its optional label
// list after on (...) or ignoring (...).
func (p *mparser) groupModifier(e *mexpr) error {
	w := ""
	for _, g := range []string{"group_left", "group_right"} {
		if p.word(g) {
			w = g
			break
		}
	}
	if w == "" {
		return nil
	}
	switch {
	case isSetOp(e.fn):
		return fmt.Errorf("no grouping allowed for %q operation", e.fn)
	case !e.matching:
		return fmt.Errorf("%s must follow on (...) or ignoring (...)", w)
	}
	e.group = strings.TrimPrefix(w, "group_")
	e.include = []string{}
	// The label list is optional: "group_left (sum(...))" is an operand.
	save := p.pos
	if p.eat('(') {
		var names []string
		ok := false
		for {
			if p.eat(')') {
				ok = true
				break
			}
			n := p.ident()
			if n == "" {
				break
			}
			names = append(names, n)
			if !p.eat(',') {
				if p.eat(')') {
					ok = true
				}
				break
			}
		}
		if !ok {
			p.pos = save
			return nil
		}
		e.include = append(e.include, names...)
	}
	if e.on {
		for _, n := range e.include {
			if slices.Contains(e.match, n) {
				return fmt.Errorf("label %q must not occur in ON and GROUP clause at once", n)
			}
		}
	}
	return nil
}

// sortsByValue tells whether an instant answer of e keeps the order
// evaluation gave it (sort or sort_desc at the root) instead of being
// sorted by labels.
func sortsByValue(e *mexpr) bool {
	return e.kind == "fn" && (e.fn == "sort" || e.fn == "sort_desc")
}

// passLimit evaluates x, an operand of e whose series all reach e's
// answer, under e's series limit.
func passLimit(ctx context.Context, e, x *mexpr) context.Context {
	st := stateOf(ctx)
	if st.limitNode == e {
		st.limitNode = x
		return context.WithValue(ctx, evalStateKey{}, st)
	}
	return ctx
}

// evalFunction evaluates sort, sort_desc, label_replace, offset and
// absent_over_time.
func evalFunction(ctx context.Context, ts *tenantStore, e *mexpr, start, end, step int64) ([]*series, error) {
	switch e.kind {
	case "offset":
		off := int64(e.off)
		if start < math.MinInt64+off {
			return nil, badRequest("bad_query", "offset %v reaches before the earliest time", e.off)
		}
		in, err := evalMetric(passLimit(ctx, e, e.inner), ts, e.inner, start-off, end-off, step)
		if err != nil {
			return nil, err
		}
		for _, se := range in {
			for i := range se.ts {
				se.ts[i] += off
			}
		}
		return in, nil
	case "absent":
		// Only which steps have a sample matters, not the series.
		in, err := evalMetric(context.WithValue(ctx, evalStateKey{}, evalState{held: stateOf(ctx).held}), ts, e.inner, start, end, step)
		if err != nil {
			return nil, err
		}
		g := newStepGrid(start, end, step)
		seen := make([]bool, len(g.times))
		for _, se := range in {
			for _, t := range se.ts {
				if k := g.index(t); k >= 0 {
					seen[k] = true
				}
			}
		}
		out := &series{labels: e.absent}
		for k, t := range g.times {
			if !seen[k] {
				out.ts = append(out.ts, t)
				out.vs = append(out.vs, 1)
			}
		}
		return []*series{out}, nil
	}
	in, err := evalMetric(passLimit(ctx, e, e.inner), ts, e.inner, start, end, step)
	if err != nil {
		return nil, err
	}
	switch e.fn {
	case "sort", "sort_desc":
		// By each series' first value (an instant answer has one), NaN
		// last either way as in Prometheus, equal values by labels.
		first := func(se *series) float64 {
			if len(se.vs) == 0 {
				return math.NaN()
			}
			return se.vs[0]
		}
		slices.SortStableFunc(in, func(a, b *series) int {
			av, bv := first(a), first(b)
			an, bn := math.IsNaN(av), math.IsNaN(bv)
			switch {
			case an || bn:
				if an != bn {
					return cmpBool(an, bn)
				}
			case av != bv && e.fn == "sort":
				return cmpFloat(av, bv)
			case av != bv:
				return cmpFloat(bv, av)
			}
			return a.labels.Compare(b.labels)
		})
		return in, nil
	case "label_replace":
		return labelReplaceSeries(ctx, e.lrep, in)
	}
	return nil, fmt.Errorf("unsupported function %q", e.fn)
}

// labelReplaceSeries applies label_replace to each series: when the
// anchored regex matches the source label's value (empty when absent),
// the destination label is set to the replacement with $1, ${name} ...
// expanded, or removed if that is empty; otherwise the series is kept as
// it is. Series whose new labels coincide merge, and two of them with a
// point at one step are Prometheus's "vector cannot contain metrics with
// the same labelset".
func labelReplaceSeries(ctx context.Context, lr *labelReplace, in []*series) ([]*series, error) {
	idx := map[string]*series{}
	var out []*series
	for _, se := range in {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(se.ts) == 0 {
			continue
		}
		ls := se.labels
		src := ls.Get(lr.src)
		if m := lr.re.FindStringSubmatchIndex(src); m != nil {
			v := string(lr.re.ExpandString(nil, lr.repl, src, m))
			ls = ls.With(lr.dst, v)
		}
		k := ls.String()
		prev := idx[k]
		if prev == nil {
			ns := &series{labels: ls, ts: se.ts, vs: se.vs}
			idx[k] = ns
			out = append(out, ns)
			continue
		}
		// Merge by time; a shared step is two samples of one label set.
		var ts []int64
		var vs []float64
		i, j := 0, 0
		for i < len(prev.ts) || j < len(se.ts) {
			switch {
			case j == len(se.ts) || i < len(prev.ts) && prev.ts[i] < se.ts[j]:
				ts, vs = append(ts, prev.ts[i]), append(vs, prev.vs[i])
				i++
			case i == len(prev.ts) || se.ts[j] < prev.ts[i]:
				ts, vs = append(ts, se.ts[j]), append(vs, se.vs[j])
				j++
			default:
				return nil, badRequest("bad_query", "label_replace: vector cannot contain metrics with the same labelset %s", ls)
			}
		}
		prev.ts, prev.vs = ts, vs
	}
	return out, nil
}

// groupSeries is a binary operator with group_left (the left side is
// the "many" one) or group_right, as Prometheus evaluates many-to-one
// matching: at each step, each sample of the many side whose signature
// (on/ignoring) has a sample on the one side is combined with it; the
// result has the many sample's labels, with each label group_x lists
// taken from the one sample (removed where it has none). Two samples of
// one signature on the one side, or two results with one label set, are
// errors (400).
func groupSeries(ctx context.Context, e *mexpr, lss, rss []*series, g *stepGrid, limit int) ([]*series, error) {
	manySS, oneSS, oneSide := lss, rss, "right"
	if e.group == "right" {
		manySS, oneSS, oneSide = rss, lss, "left"
	}
	many, one := newStepSide(manySS, g), newStepSide(oneSS, g)
	msig, osig, sigs := e.signatureIDs(manySS, oneSS)
	stamp := make([]int32, len(sigs))
	who := make([]int32, len(sigs))
	val := make([]float64, len(sigs))
	pairs := map[[2]int32]*series{}
	idx := map[string]*series{}
	var out []*series
	for k, t := range g.times {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st := int32(k + 1)
		for _, i := range one.step(k) {
			id := osig[i]
			if stamp[id] == st {
				return nil, badRequest("bad_query", "found duplicate series for the match group %s on the %s hand-side of the operation: [%s, %s]; many-to-many matching not allowed: matching labels must be unique on one side", sigs[id], oneSide, oneSS[who[id]].labels, oneSS[i].labels)
			}
			stamp[id], who[id], val[id] = st, i, one.next(i)
		}
		for _, i := range many.step(k) {
			id := msig[i]
			v := many.next(i)
			if stamp[id] != st {
				continue
			}
			j := who[id]
			lv, rv := v, val[id]
			if e.group == "right" {
				lv, rv = rv, v
			}
			res, keep := binopValue(e, lv, rv)
			if !keep {
				continue
			}
			se := pairs[[2]int32{i, j}]
			if se == nil {
				ls := manySS[i].labels
				for _, n := range e.include {
					if legacyLabelName.MatchString(n) {
						ls = ls.With(n, oneSS[j].labels.Get(n))
					}
				}
				key := ls.String()
				if se = idx[key]; se == nil {
					if limit > 0 && len(out) >= limit {
						return nil, tooManySeries(limit)
					}
					se = &series{labels: ls}
					idx[key] = se
					out = append(out, se)
				}
				pairs[[2]int32{i, j}] = se
			}
			if n := len(se.ts); n > 0 && se.ts[n-1] == t {
				return nil, badRequest("bad_query", "multiple matches for labels %s: grouping labels must ensure unique matches", se.labels)
			}
			se.ts = append(se.ts, t)
			se.vs = append(se.vs, res)
		}
	}
	return out, nil
}
