package server

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"haystack/internal/ingest"
)

// The metric queries Grafana's panels and its data source health check
// send, parsed by hand (internal/query parses log queries only):
//
//	Expr     = Or .
//	Or       = And { "or" [ Matching ] And } .
//	And      = Cmp { ( "and" | "unless" ) [ Matching ] Cmp } .
//	Cmp      = Sum { CmpOp [ "bool" ] [ Matching ] Sum } .
//	CmpOp    = "==" | "!=" | ">" | ">=" | "<" | "<=" .
//	Sum      = Product { ( "+" | "-" ) [ Matching ] Product } .
//	Product  = Power { ( "*" | "/" | "%" ) [ Matching ] Power } .
//	Power    = Term [ "^" [ Matching ] Power ] .
//	Matching = ( "on" | "ignoring" ) "(" [ Ident { "," Ident } ] ")" .
//	Term     = Number | "vector(" Number ")" | "(" Expr ")" | Agg | TopK | Range .
//	Agg      = AggOp [ Grouping ] "(" Expr ")" [ Grouping ] .
//	AggOp    = "sum" | "count" | "min" | "max" | "avg" .
//	TopK     = ( "topk" | "bottomk" ) [ Grouping ] "(" Integer "," Expr ")" [ Grouping ] .
//	Grouping = ( "by" | "without" ) "(" [ Ident { "," Ident } ] ")" .
//	Range    = RangeFn "(" LogQuery "[" Duration "]" ")"
//	         | RangeFn "(" Selector "[" Duration "]" Pipeline ")" .
//	RangeFn  = "count_over_time" | "rate" | "bytes_over_time" | "bytes_rate" .
//
// Operators bind as in Loki and Prometheus (loosest first: or; and,
// unless; comparisons; + -; * / %; ^), each level left-associative but
// ^. A number is a scalar and vector(n) a label-less instant vector: the
// semantics of each operator (evalBinop) depend on which sides are
// vectors. Arithmetic and bool comparisons between constants are folded
// here. group_left and group_right (many-to-one matching) are refused. A
// # comment runs to the end of its line, as in LogQL, and counts as
// whitespace, also inside the log query of a range function (a '[' or a
// quote in it is text).
type mexpr struct {
	kind string // "const", "range", "agg", "binop", "topk"
	val  float64
	vec  bool // const: an instant vector (vector(n), or arithmetic on one), not a scalar

	fn  string // range function, aggregation, topk or bottomk, binary operator
	log string // range: the log query
	rng time.Duration

	by      []string
	without bool
	inner   *mexpr
	k       int // topk, bottomk

	l, r     *mexpr   // binop operands
	boolMod  bool     // binop: a comparison with bool answers 0 or 1
	matching bool     // binop: on (...) or ignoring (...) given
	on       bool     // binop: on; else ignoring
	match    []string // binop: the labels of on or ignoring
}

// scalar reports whether e is a number rather than an instant vector.
func (e *mexpr) scalar() bool { return e.kind == "const" && !e.vec }

type mparser struct {
	s   string
	pos int
}

func parseMetric(s string) (*mexpr, error) {
	p := &mparser{s: s}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos != len(p.s) {
		return nil, fmt.Errorf("unexpected %q at column %d", p.rest(8), p.pos+1)
	}
	return e, nil
}

func (p *mparser) rest(n int) string {
	r := p.s[p.pos:]
	if len(r) > n {
		r = r[:n]
	}
	return r
}

// ws skips whitespace and comments ('#' to the end of the line, as in
// LogQL; see skipSpaceAndComments).
func (p *mparser) ws() {
	p.pos = len(p.s) - len(skipSpaceAndComments(p.s[p.pos:]))
}

// skipSpaceAndComments is s without its leading whitespace and # comments.
func skipSpaceAndComments(s string) string {
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if !strings.HasPrefix(s, "#") {
			return s
		}
		nl := strings.IndexByte(s, '\n')
		if nl < 0 {
			return ""
		}
		s = s[nl+1:]
	}
}

func (p *mparser) eat(c byte) bool {
	p.ws()
	if p.pos < len(p.s) && p.s[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

func (p *mparser) ident() string {
	p.ws()
	st := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || p.pos > st && c >= '0' && c <= '9' {
			p.pos++
			continue
		}
		break
	}
	return p.s[st:p.pos]
}

// mlevels are the binary operators by precedence, loosest first; each
// list is in the order the scanner tries them (">=" before ">").
var mlevels = [][]string{
	{"or"},
	{"and", "unless"},
	{"==", "!=", ">=", "<=", ">", "<"},
	{"+", "-"},
	{"*", "/", "%"},
	{"^"},
}

// expr reads an expression with the binary operators of LogQL.
func (p *mparser) expr() (*mexpr, error) { return p.level(0) }

// level reads operand (op operand)* for the operators of mlevels[i], its
// operands at the next level; ^ is right-associative, the others left.
func (p *mparser) level(i int) (*mexpr, error) {
	if i == len(mlevels) {
		return p.term()
	}
	l, err := p.level(i + 1)
	if err != nil {
		return nil, err
	}
	for {
		op := p.operator(mlevels[i])
		if op == "" {
			return l, nil
		}
		e := &mexpr{kind: "binop", fn: op}
		if err := p.modifiers(e); err != nil {
			return nil, err
		}
		next := i + 1
		if op == "^" {
			next = i
		}
		r, err := p.level(next)
		if err != nil {
			return nil, err
		}
		e.l, e.r = l, r
		if l, err = fold(e); err != nil {
			return nil, err
		}
	}
}

// operator consumes the first of ops at the input, or returns "". A word
// operator (or, and, unless) must end at a non-identifier byte.
func (p *mparser) operator(ops []string) string {
	p.ws()
	for _, op := range ops {
		if !strings.HasPrefix(p.s[p.pos:], op) {
			continue
		}
		end := p.pos + len(op)
		if isIdentByte(op[0]) && end < len(p.s) && isIdentByte(p.s[end]) {
			continue
		}
		p.pos = end
		return op
	}
	return ""
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// word consumes the identifier w if it comes next.
func (p *mparser) word(w string) bool {
	save := p.pos
	if p.ident() == w {
		return true
	}
	p.pos = save
	return false
}

// isComparison tells the comparison operators.
func isComparison(op string) bool {
	switch op {
	case "==", "!=", ">", ">=", "<", "<=":
		return true
	}
	return false
}

// isSetOp tells the set operators.
func isSetOp(op string) bool { return op == "and" || op == "or" || op == "unless" }

// modifiers reads what may follow a binary operator: bool (comparisons
// only), then on (...) or ignoring (...).
func (p *mparser) modifiers(e *mexpr) error {
	if p.word("bool") {
		if !isComparison(e.fn) {
			return fmt.Errorf("bool modifier can only be used on comparison operators, not %q", e.fn)
		}
		e.boolMod = true
	}
	for _, w := range []string{"on", "ignoring"} {
		if !p.word(w) {
			continue
		}
		e.matching, e.on = true, w == "on"
		if !p.eat('(') {
			return fmt.Errorf("%s wants ( at column %d", w, p.pos+1)
		}
		e.match = []string{}
		for !p.eat(')') {
			n := p.ident()
			if n == "" {
				return fmt.Errorf("%s: bad label list at column %d", w, p.pos+1)
			}
			e.match = append(e.match, n)
			p.eat(',')
		}
		break
	}
	for _, w := range []string{"group_left", "group_right"} {
		if p.word(w) {
			return fmt.Errorf("%s (many-to-one matching) is not supported: only one-to-one matching with on (...) or ignoring (...)", w)
		}
	}
	return nil
}

// fold checks a binary operation's operand types and folds it when both
// are constants and the answer is one (arithmetic, and bool comparisons);
// a comparison that filters a vector(n) stays for evalBinop.
func fold(e *mexpr) (*mexpr, error) {
	l, r := e.l, e.r
	switch {
	case isSetOp(e.fn) && (l.scalar() || r.scalar()):
		return nil, fmt.Errorf("set operator %q not allowed between scalars: both sides must be vectors (write vector(0), not 0)", e.fn)
	case e.matching && (l.scalar() || r.scalar()):
		return nil, fmt.Errorf("vector matching (on, ignoring) only allowed between vectors, not with a scalar in %q", e.fn)
	case isComparison(e.fn) && l.scalar() && r.scalar() && !e.boolMod:
		return nil, fmt.Errorf("comparisons between scalars must use bool: %v %s bool %v", l.val, e.fn, r.val)
	}
	if l.kind != "const" || r.kind != "const" || isSetOp(e.fn) || isComparison(e.fn) && !e.boolMod {
		return e, nil
	}
	v := arith(e.fn, l.val, r.val)
	if isComparison(e.fn) {
		v = 0
		if compare(e.fn, l.val, r.val) {
			v = 1
		}
	}
	return &mexpr{kind: "const", val: v, vec: l.vec || r.vec}, nil
}

// arith applies an arithmetic operator. A division or modulo by zero is
// NaN, as Loki answers (Prometheus would give ±Inf for a division).
func arith(op string, a, b float64) float64 {
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
	case "^":
		return math.Pow(a, b)
	}
	return math.NaN()
}

// compare applies a comparison operator (false with a NaN, but for !=).
func compare(op string, a, b float64) bool {
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
	case "<=":
		return a <= b
	}
	return false
}

func (p *mparser) number() (float64, error) {
	p.ws()
	st := p.pos
	for p.pos < len(p.s) && strings.ContainsRune("0123456789.eE+-", rune(p.s[p.pos])) {
		if p.pos > st && (p.s[p.pos] == '+' || p.s[p.pos] == '-') && p.s[p.pos-1] != 'e' && p.s[p.pos-1] != 'E' {
			break
		}
		p.pos++
	}
	v, err := strconv.ParseFloat(p.s[st:p.pos], 64)
	if err != nil {
		return 0, fmt.Errorf("bad number at column %d", st+1)
	}
	return v, nil
}

func (p *mparser) term() (*mexpr, error) {
	p.ws()
	if p.pos >= len(p.s) {
		return nil, fmt.Errorf("unexpected end of query")
	}
	c := p.s[p.pos]
	if c == '(' {
		p.pos++
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.eat(')') {
			return nil, fmt.Errorf("missing ) at column %d", p.pos+1)
		}
		return e, nil
	}
	if c >= '0' && c <= '9' || c == '.' || c == '-' {
		v, err := p.number()
		if err != nil {
			return nil, err
		}
		return &mexpr{kind: "const", val: v}, nil
	}
	st := p.pos
	name := p.ident()
	switch name {
	case "vector":
		if !p.eat('(') {
			return nil, fmt.Errorf("vector wants (")
		}
		v, err := p.number()
		if err != nil {
			return nil, err
		}
		if !p.eat(')') {
			return nil, fmt.Errorf("vector wants )")
		}
		return &mexpr{kind: "const", val: v, vec: true}, nil
	case "sum", "count", "min", "max", "avg":
		e := &mexpr{kind: "agg", fn: name}
		if err := p.grouping(e); err != nil {
			return nil, err
		}
		if !p.eat('(') {
			return nil, fmt.Errorf("%s wants ( at column %d", name, p.pos+1)
		}
		in, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.eat(')') {
			return nil, fmt.Errorf("%s: missing ) at column %d", name, p.pos+1)
		}
		if e.by == nil && !e.without {
			if err := p.grouping(e); err != nil {
				return nil, err
			}
		}
		if in.scalar() {
			return nil, fmt.Errorf("%s wants a vector, got the scalar %v (vector(%[2]v) is one)", name, in.val)
		}
		e.inner = in
		return e, nil
	case "topk", "bottomk":
		e := &mexpr{kind: "topk", fn: name}
		if err := p.grouping(e); err != nil {
			return nil, err
		}
		if !p.eat('(') {
			return nil, fmt.Errorf("%s wants ( at column %d", name, p.pos+1)
		}
		p.ws()
		kpos := p.pos
		k, err := p.number()
		// k is a literal integer, as Loki's parser requires.
		if err != nil || k != math.Trunc(k) || k < 1 || k > math.MaxInt32 {
			return nil, fmt.Errorf("%s: invalid parameter %q at column %d: k must be an integer greater than 0, as in %s(5, ...)", name, strings.TrimSpace(p.s[kpos:p.pos]), kpos+1, name)
		}
		e.k = int(k)
		if !p.eat(',') {
			return nil, fmt.Errorf("%s wants , after k at column %d", name, p.pos+1)
		}
		in, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.eat(')') {
			return nil, fmt.Errorf("%s: missing ) at column %d", name, p.pos+1)
		}
		if e.by == nil && !e.without {
			if err := p.grouping(e); err != nil {
				return nil, err
			}
		}
		if in.scalar() {
			return nil, fmt.Errorf("%s wants a vector, got the scalar %v", name, in.val)
		}
		e.inner = in
		return e, nil
	case "count_over_time", "rate", "bytes_over_time", "bytes_rate":
		if !p.eat('(') {
			return nil, fmt.Errorf("%s wants (", name)
		}
		p.ws()
		// The log query runs to the first '[' outside a string.
		qs := p.pos
		comment := false
		for p.pos < len(p.s) && p.s[p.pos] != '[' {
			comment = comment || p.s[p.pos] == '#'
			p.skipString()
			p.pos++
		}
		if p.pos >= len(p.s) {
			return nil, fmt.Errorf("%s: missing [range]", name)
		}
		logq := strings.TrimSpace(p.s[qs:p.pos])
		p.pos++
		end := strings.IndexByte(p.s[p.pos:], ']')
		if end < 0 {
			return nil, fmt.Errorf("%s: missing ]", name)
		}
		d, err := parsePromDuration(strings.TrimSpace(p.s[p.pos : p.pos+end]))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s: bad range %q", name, p.s[p.pos:p.pos+end])
		}
		p.pos += end + 1
		// The range may also follow the selector, with the pipeline after
		// it ("count_over_time({a="b"}[5m] |= "x")", as Loki allows): the
		// rest, up to the closing parenthesis, continues the log query.
		p.ws()
		if rs := p.pos; p.pos < len(p.s) && p.s[p.pos] != ')' {
			depth := 0
		rest:
			for p.pos < len(p.s) {
				p.skipString()
				switch c := byteAt(p.s, p.pos); c {
				case '(':
					depth++
				case ')':
					if depth == 0 {
						break rest
					}
					depth--
				case '[':
					return nil, fmt.Errorf("%s: a second [range] at column %d", name, p.pos+1)
				}
				p.pos++
			}
			p.pos = min(p.pos, len(p.s)) // past the end after an open string
			sep := " "
			if comment {
				sep = "\n" // end the comment the first part ends with
			}
			logq += sep + strings.TrimSpace(p.s[rs:p.pos])
		}
		if !p.eat(')') {
			return nil, fmt.Errorf("%s: missing ) at column %d", name, p.pos+1)
		}
		return &mexpr{kind: "range", fn: name, log: logq, rng: d}, nil
	}
	if name == "" {
		return nil, fmt.Errorf("unexpected %q at column %d", p.rest(8), st+1)
	}
	return nil, fmt.Errorf("unsupported function %q (supported: count_over_time, rate, bytes_over_time, bytes_rate, sum, count, min, max, avg, topk, bottomk, vector)", name)
}

// skipString moves from the opening quote of a string ("..." with
// backslash escapes, or `...`) to its closing quote, or to the end of the
// input if it is not closed; from the '#' of a comment to the newline
// that ends it, or to the end of the input; elsewhere it does nothing.
// So a bracket or a quote inside a comment does not end a log query.
func (p *mparser) skipString() {
	if p.pos >= len(p.s) {
		return
	}
	q := p.s[p.pos]
	if q == '#' {
		if nl := strings.IndexByte(p.s[p.pos:], '\n'); nl >= 0 {
			p.pos += nl
		} else {
			p.pos = len(p.s)
		}
		return
	}
	if q != '"' && q != '`' {
		return
	}
	p.pos++
	for p.pos < len(p.s) && p.s[p.pos] != q {
		if q == '"' && p.s[p.pos] == '\\' {
			p.pos++
		}
		p.pos++
	}
}

// byteAt is s[i], or 0 past the end.
func byteAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func (p *mparser) grouping(e *mexpr) error {
	save := p.pos
	w := p.ident()
	if w != "by" && w != "without" {
		p.pos = save
		return nil
	}
	e.without = w == "without"
	if !p.eat('(') {
		return fmt.Errorf("%s wants (", w)
	}
	e.by = []string{}
	for !p.eat(')') {
		n := p.ident()
		if n == "" {
			return fmt.Errorf("%s: bad label list at column %d", w, p.pos+1)
		}
		e.by = append(e.by, n)
		p.eat(',')
	}
	return nil
}

// evalMore evaluates the expressions evalMetric hands on: binary
// operators between vectors, and topk/bottomk.
func evalMore(ctx context.Context, ts *tenantStore, e *mexpr, start, end, step int64) ([]*series, error) {
	switch e.kind {
	case "binop":
		return evalBinop(ctx, ts, e, start, end, step)
	case "topk":
		in, err := evalMetric(ctx, ts, e.inner, start, end, step)
		if err != nil {
			return nil, err
		}
		return topkSeries(e, in)
	}
	return nil, fmt.Errorf("unsupported expression %q", e.kind)
}

// vecPoint is one sample of an instant vector.
type vecPoint struct {
	ls ingest.Labels
	v  float64
}

// instants regroups series by time: the instant vector at each time one
// of them has a point.
func instants(ss []*series) map[int64][]vecPoint {
	m := map[int64][]vecPoint{}
	for _, se := range ss {
		for i, t := range se.ts {
			m[t] = append(m[t], vecPoint{se.labels, se.vs[i]})
		}
	}
	return m
}

// seriesBuilder assembles series from instant vectors added in time
// order.
type seriesBuilder struct {
	idx map[string]*series
	out []*series
}

// add appends a point; a second point for the same labels at the same
// time is Prometheus's "vector cannot contain metrics with the same
// labelset" (e.g. on (...) dropped the labels that told two apart).
func (b *seriesBuilder) add(t int64, ls ingest.Labels, v float64) error {
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

// project keeps the labels named in names (keep) or all the others.
func project(ls ingest.Labels, names []string, keep bool) ingest.Labels {
	var out ingest.Labels
	for _, l := range ls {
		if slices.Contains(names, l.Name) == keep {
			out = append(out, l)
		}
	}
	return out
}

// signature is the key two samples match on: all labels, or those of
// on (...), or all but those of ignoring (...).
func (e *mexpr) signature(ls ingest.Labels) string {
	if !e.matching {
		return ls.String()
	}
	return project(ls, e.match, e.on).String()
}

// sortedTimes is the keys of the instant maps, ascending.
func sortedTimes(ms ...map[int64][]vecPoint) []int64 {
	var ts []int64
	for _, m := range ms {
		for t := range m {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return slices.Compact(ts)
}

// evalBinop evaluates a binary operator at each step, as Loki and
// Prometheus do:
//
//   - vector op scalar (either side): arithmetic on each sample, labels
//     kept; a comparison keeps the samples for which it holds, with their
//     value, or with bool answers 1 or 0 for each;
//   - vector op vector: samples match one-to-one on their labels (or on
//     the labels on (...) keeps, or all but those ignoring (...) names),
//     a sample without a match is dropped, and the result carries the
//     left sample's labels, reduced to the matching ones when on or
//     ignoring is given; a comparison keeps the left value;
//   - and: the left samples that have a match on the right; unless: those
//     that have none; or: all left samples, and the right ones whose
//     signature no left sample has (so `or vector(0)` fills the steps a
//     label-less left side has no point at).
func evalBinop(ctx context.Context, ts *tenantStore, e *mexpr, start, end, step int64) ([]*series, error) {
	side := func(x *mexpr) (map[int64][]vecPoint, error) {
		if x.scalar() {
			return nil, nil
		}
		ss, err := evalMetric(ctx, ts, x, start, end, step)
		if err != nil {
			return nil, err
		}
		return instants(ss), nil
	}
	lm, err := side(e.l)
	if err != nil {
		return nil, err
	}
	rm, err := side(e.r)
	if err != nil {
		return nil, err
	}
	var b seriesBuilder
	// A scalar side: one sample value against each sample of the other.
	if e.l.scalar() || e.r.scalar() {
		m, s, swap := lm, e.r.val, false
		if e.l.scalar() {
			m, s, swap = rm, e.l.val, true
		}
		for _, t := range sortedTimes(m) {
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
	for _, t := range sortedTimes(lm, rm) {
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
		rs := map[string]vecPoint{}
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
				return nil, badRequest("bad_query", "multiple matches for labels %s on the left hand-side of the operation: [%s, %s]; many-to-one matching must be explicit (group_left/group_right), which is not supported", k, o, p.ls)
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

// binopValue applies an arithmetic or comparison operator to two sample
// values: the value (for a comparison: the left one, or 1 or 0 with
// bool) and whether the sample is kept.
func binopValue(e *mexpr, a, b float64) (float64, bool) {
	if !isComparison(e.fn) {
		return arith(e.fn, a, b), true
	}
	ok := compare(e.fn, a, b)
	if e.boolMod {
		if ok {
			return 1, true
		}
		return 0, true
	}
	return a, ok
}

// topkSeries keeps, at each step and in each group (by/without as for
// sum), the k samples with the largest (topk) or smallest (bottomk)
// values, with their own labels; a series appears at the steps where it
// is among them. NaN ranks last in both. Ties go to the series whose
// labels sort first (Loki leaves the choice among equal values open).
func topkSeries(e *mexpr, in []*series) ([]*series, error) {
	slices.SortFunc(in, func(a, b *series) int { return a.labels.Compare(b.labels) })
	m := instants(in) // each time's samples in label order
	var b seriesBuilder
	for _, t := range sortedTimes(m) {
		groups := map[string][]vecPoint{}
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
			slices.SortStableFunc(g, func(x, y vecPoint) int {
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

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// cmpFloat compares two numbers that are not NaN.
func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
