package server

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"haystack/internal/ingest"
	"haystack/internal/query"
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
//	         | UnwrapFn "(" LogQuery Unwrap "[" Duration "]" ")" [ Grouping ]
//	         | "quantile_over_time" "(" Number "," LogQuery Unwrap "[" Duration "]" ")" [ Grouping ] .
//	RangeFn  = "count_over_time" | "rate" | "bytes_over_time" | "bytes_rate" .
//	UnwrapFn = "rate" | "rate_counter" | "sum_over_time" | "avg_over_time" | "max_over_time"
//	         | "min_over_time" | "first_over_time" | "last_over_time"
//	         | "stdvar_over_time" | "stddev_over_time" .
//	Unwrap   = "|" "unwrap" ( Ident | Conv "(" Ident ")" ) { "|" LabelFilter } .
//	Conv     = "duration" | "duration_seconds" | "bytes" .
//
// (The range may also follow the selector, as for RangeFn; Grouping is
// refused for sum_over_time, rate and rate_counter, as Loki does.)
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
	kind string // "const", "range", "agg", "binop", "topk", "unwrap"
	val  float64
	vec  bool // const: an instant vector (vector(n), or arithmetic on one), not a scalar

	fn  string // range function, aggregation, topk or bottomk, binary operator
	log string // range: the log query
	rng time.Duration

	by      []string
	without bool
	inner   *mexpr
	k       int // topk, bottomk

	// unwrap: a range function over the values of a label (log is the
	// log query before "| unwrap")
	unwrap string      // the label
	conv   string      // "", "duration", "duration_seconds" or "bytes"
	post   *query.Plan // label filters after the unwrap, or nil
	q      float64     // quantile_over_time's quantile

	l, r     *mexpr   // binop operands
	boolMod  bool     // binop: a comparison with bool answers 0 or 1
	matching bool     // binop: on (...) or ignoring (...) given
	on       bool     // binop: on; else ignoring
	match    []string // binop: the labels of on or ignoring
	group    string   // binop: "left" or "right" for group_left/group_right (many-to-one)
	include  []string // binop: the labels group_left/group_right copy from the "one" side

	// offset: the range expression inner evaluated rng earlier (off);
	// label_replace: its arguments (metricq_fn.go)
	off    time.Duration
	lrep   *labelReplace
	absent ingest.Labels // absent_over_time's labels
}

// scalar reports whether e is a number rather than an instant vector.
func (e *mexpr) scalar() bool { return e.kind == "const" && !e.vec }

type mparser struct {
	s     string
	pos   int
	depth int // expressions open (parentheses, arguments, ^ chains)
}

// maxMetricQueryBytes bounds a metric query's text, as query.Parse bounds
// a log query's; maxMetricDepth bounds its nesting. The parser recurses
// through seven precedence levels per parenthesis (~2.3 KB of stack): a
// 900 KB query of 450,000 '(' passed Go's 1 GB stack limit and aborted
// the whole server (review 8, F4).
const (
	maxMetricQueryBytes = 64 << 10
	maxMetricDepth      = 256
)

func parseMetric(s string) (*mexpr, error) {
	if len(s) > maxMetricQueryBytes {
		return nil, fmt.Errorf("query of %d bytes is longer than the limit of %d", len(s), maxMetricQueryBytes)
	}
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
func (p *mparser) expr() (*mexpr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	return p.level(0)
}

// enter counts one more open expression, refusing past maxMetricDepth;
// leave closes it.
func (p *mparser) enter() error {
	p.depth++
	if p.depth > maxMetricDepth {
		return fmt.Errorf("query nested deeper than %d levels at column %d", maxMetricDepth, p.pos+1)
	}
	return nil
}

func (p *mparser) leave() { p.depth-- }

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
			next = i // right-associative: a chain of ^ recurses
			if err := p.enter(); err != nil {
				return nil, err
			}
		}
		r, err := p.level(next)
		if op == "^" {
			p.leave()
		}
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
	return p.groupModifier(e)
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
	if p.pos < len(p.s) && (p.s[p.pos] == '-' || p.s[p.pos] == '+') {
		// A sign in an operand's place is unary, and may stand apart
		// from its number (x * - 1), as in PromQL.
		neg := p.s[p.pos] == '-'
		p.pos++
		p.ws()
		if p.pos < len(p.s) && p.s[p.pos] != '-' && p.s[p.pos] != '+' {
			v, err := p.number()
			if neg {
				v = -v
			}
			return v, err
		}
		p.pos = st
	}
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
	if (c == '-' || c == '+') && !p.signedNumber() {
		return p.unary(c == '-')
	}
	if c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+' {
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
		if err := p.aggregation(e, nil); err != nil {
			return nil, err
		}
		if e.inner.scalar() {
			return nil, fmt.Errorf("%s wants a vector, got the scalar %v (vector(%[2]v) is one)", name, e.inner.val)
		}
		return e, nil
	case "topk", "bottomk":
		e := &mexpr{kind: "topk", fn: name}
		readK := func() error {
			p.ws()
			kpos := p.pos
			k, err := p.number()
			// k is a literal integer, as Loki's parser requires.
			if err != nil || k != math.Trunc(k) || k < 1 || k > math.MaxInt32 {
				return fmt.Errorf("%s: invalid parameter %q at column %d: k must be an integer greater than 0, as in %s(5, ...)", name, strings.TrimSpace(p.s[kpos:p.pos]), kpos+1, name)
			}
			e.k = int(k)
			if !p.eat(',') {
				return fmt.Errorf("%s wants , after k at column %d", name, p.pos+1)
			}
			return nil
		}
		if err := p.aggregation(e, readK); err != nil {
			return nil, err
		}
		if e.inner.scalar() {
			return nil, fmt.Errorf("%s wants a vector, got the scalar %v", name, e.inner.val)
		}
		return e, nil
	case "sort", "sort_desc", "label_replace":
		return p.function(name)
	case "absent_over_time", "count_over_time", "rate", "bytes_over_time", "bytes_rate",
		"sum_over_time", "avg_over_time", "max_over_time", "min_over_time", "first_over_time", "last_over_time",
		"stdvar_over_time", "stddev_over_time", "quantile_over_time", "rate_counter":
		if !p.eat('(') {
			return nil, fmt.Errorf("%s wants (", name)
		}
		var q float64
		if name == "quantile_over_time" {
			v, err := p.number()
			if err != nil {
				return nil, fmt.Errorf("quantile_over_time wants a number (the quantile) first: %w", err)
			}
			if !p.eat(',') {
				return nil, fmt.Errorf("quantile_over_time wants , after the quantile at column %d", p.pos+1)
			}
			q = v
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
		off, err := p.offset()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
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
		return p.rangeOffset(&mexpr{kind: "range", fn: name, log: logq, rng: d, q: q}, off)
	}
	if name == "" {
		return nil, fmt.Errorf("unexpected %q at column %d", p.rest(8), st+1)
	}
	return nil, fmt.Errorf("unsupported function %q (supported: count_over_time, rate, bytes_over_time, bytes_rate, sum_over_time, avg_over_time, max_over_time, min_over_time, first_over_time, last_over_time, stdvar_over_time, stddev_over_time, quantile_over_time, rate_counter, absent_over_time, sum, count, min, max, avg, topk, bottomk, sort, sort_desc, label_replace, vector)", name)
}

// skipString moves from the opening quote of a string ("..." with
// backslash escapes, or `...`) to its closing quote, or to the end of the
// input if it is not closed; from the '#' of a comment to the newline
// that ends it, or to the end of the input; elsewhere it does nothing.
// So a bracket or a quote inside a comment does not end a log query.
// aggregation reads the rest of aggregation e after its name: a
// grouping before or after the parenthesised operand, and, with readK, a
// parameter before it (topk's k). The operand goes to e.inner.
func (p *mparser) aggregation(e *mexpr, readK func() error) error {
	if err := p.grouping(e); err != nil {
		return err
	}
	if !p.eat('(') {
		return fmt.Errorf("%s wants ( at column %d", e.fn, p.pos+1)
	}
	if readK != nil {
		if err := readK(); err != nil {
			return err
		}
	}
	in, err := p.expr()
	if err != nil {
		return err
	}
	if !p.eat(')') {
		return fmt.Errorf("%s: missing ) at column %d", e.fn, p.pos+1)
	}
	if e.by == nil && !e.without {
		if err := p.grouping(e); err != nil {
			return err
		}
	}
	e.inner = in
	return nil
}

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
		limit := 0
		if st := stateOf(ctx); st.limitNode == e {
			limit = st.maxSeries
		}
		return topkSeries(ctx, e, in, start, end, step, limit)
	case "unwrap":
		return evalUnwrap(ctx, ts, e, start, end, step, nil)
	case "fn", "offset", "absent":
		return evalFunction(ctx, ts, e, start, end, step)
	}
	return nil, fmt.Errorf("unsupported expression %q", e.kind)
}

// A binary operator or topk at the root of a query may answer many
// series from operands the store expands into millions of points, and
// --max-query-series refuses most such answers; so they are evaluated
// step by step over their operands' series (all on the query's step
// grid), with an index of which series have a point at each step (4 bytes
// a point) instead of a map of instant vectors (32 bytes a point, plus
// the map, a copy of each side), the output series found once per source
// series instead of by a label string per point, and two limits applied
// while they run rather than on the answer: evalState.
//
// Review 8 (F2): over 20,000 streams and 241 steps,
// `count_over_time(...) and count_over_time(...)` peaked at 757 MiB (the
// plain range vector at 107 MiB) before the same 400; docs/BENCHMARKS.md
// has the numbers after.

// evalState is what a metric query's evaluation carries down its tree in
// the context (evalMetric's signature is shared with loki.go).
type evalState struct {
	// held is the points the evaluation holds already: the operands of
	// enclosing binary operators evaluated before this one. A range
	// leaf's points plus these must stay within maxRangePoints, so that
	// `x and x` cannot hold twice what one range vector may.
	held int
	// limitNode is the expression whose series all reach the answer (the
	// root, and the operands whose series a binary operator's answer
	// keeps: both sides of or without on/ignoring, the left of it with
	// them, the vector of arithmetic or bool comparison with a scalar);
	// more than maxSeries of them is --max-query-series's 400, answered
	// as soon as that many are built.
	limitNode *mexpr
	maxSeries int
}

type evalStateKey struct{}

func stateOf(ctx context.Context) evalState {
	st, _ := ctx.Value(evalStateKey{}).(evalState)
	return st
}

// withSeriesLimit starts the evaluation of the query e whose answer may
// have at most maxSeries series (0: no limit).
func withSeriesLimit(ctx context.Context, e *mexpr, maxSeries int) context.Context {
	return context.WithValue(ctx, evalStateKey{}, evalState{limitNode: e, maxSeries: maxSeries})
}

// checkRangePoints refuses a range leaf of fn over n series and the given
// steps when its points (series × steps, an upper bound) and those the
// query holds already pass maxRangePoints.
func checkRangePoints(ctx context.Context, fn string, n, steps int) error {
	pts := n * steps
	held := stateOf(ctx).held
	if pts+held <= maxRangePoints {
		return nil
	}
	if held == 0 {
		return badRequest("too_many_points", "%s over %d series and %d steps is %d points, more than the limit of %d: narrow the selector, or use a larger step", fn, n, steps, pts, maxRangePoints)
	}
	return badRequest("too_many_points", "%s over %d series and %d steps is %d points, which with the %d points of the other operands the query holds is more than the limit of %d: narrow the selectors, aggregate the operands (sum by ...), or use a larger step", fn, n, steps, pts, held, maxRangePoints)
}

// tooManySeries is --max-query-series refusing an answer that is still
// being built.
func tooManySeries(max int) error {
	return badRequest("too_many_series", "maximum number of series (%d) reached for a single query; the answer has more than %d: narrow the selector or aggregate (sum by ...)", max, max)
}

// countPoints is the points of ss.
func countPoints(ss []*series) int {
	n := 0
	for _, se := range ss {
		n += len(se.ts)
	}
	return n
}

// stepGrid numbers the times of series: start, start+step, ... as
// evalMetric makes them, or, should a point be off that grid, the sorted
// distinct times of the points.
type stepGrid struct {
	start, step int64
	times       []int64
	onGrid      bool
}

func newStepGrid(start, end, step int64, sides ...[]*series) *stepGrid {
	g := &stepGrid{start: start, step: step, onGrid: step > 0}
	if g.onGrid {
		for t := start; t <= end; t += step {
			g.times = append(g.times, t)
			if t > math.MaxInt64-step || len(g.times) > 11000 {
				break // as evalMetric
			}
		}
	}
check:
	for _, ss := range sides {
		for _, se := range ss {
			for _, t := range se.ts {
				if !g.onGrid {
					break check
				}
				if k := g.index(t); k < 0 {
					g.onGrid = false
				}
			}
		}
	}
	if !g.onGrid {
		g.times = g.times[:0]
		for _, ss := range sides {
			for _, se := range ss {
				g.times = append(g.times, se.ts...)
			}
		}
		slices.Sort(g.times)
		g.times = slices.Compact(g.times)
	}
	return g
}

// index is the number of time t, or -1 if t is off the grid.
func (g *stepGrid) index(t int64) int {
	if !g.onGrid {
		k, _ := slices.BinarySearch(g.times, t)
		return k
	}
	if t < g.start {
		return -1
	}
	d := uint64(t) - uint64(g.start)
	k := d / uint64(g.step)
	if k >= uint64(len(g.times)) || k*uint64(g.step) != d {
		return -1
	}
	return int(k)
}

// stepSide is one operand of a step-by-step evaluation: its series, which
// of them have a point at each step (in the series' order, as an instant
// vector lists them), the next point of each, and the output series each
// one's samples went to.
type stepSide struct {
	ss  []*series
	off []int   // step k's series are at[off[k]:off[k+1]]
	at  []int32 // series indexes
	cur []int32 // per series: its next point (a series' times ascend)
	out []*series
}

func newStepSide(ss []*series, g *stepGrid) *stepSide {
	s := &stepSide{ss: ss, off: make([]int, len(g.times)+1), cur: make([]int32, len(ss)), out: make([]*series, len(ss))}
	for _, se := range ss {
		for _, t := range se.ts {
			s.off[g.index(t)+1]++
		}
	}
	for k := range len(g.times) {
		s.off[k+1] += s.off[k]
	}
	s.at = make([]int32, s.off[len(g.times)])
	fill := slices.Clone(s.off[:len(g.times)])
	for i, se := range ss {
		for _, t := range se.ts {
			k := g.index(t)
			s.at[fill[k]] = int32(i)
			fill[k]++
		}
	}
	return s
}

// step is the indexes of the series with a point at step k.
func (s *stepSide) step(k int) []int32 { return s.at[s.off[k]:s.off[k+1]] }

// next is series i's value at the step being visited.
func (s *stepSide) next(i int32) float64 {
	v := s.ss[i].vs[s.cur[i]]
	s.cur[i]++
	return v
}

// seriesBuilder assembles series from instant vectors added in time
// order; with limit > 0, more series than that is too_many_series.
type seriesBuilder struct {
	idx   map[string]*series
	out   []*series
	limit int
}

// add appends a point of source series src (of side s; ls and key, its
// output labels and their text, are computed only for its first point);
// a second point for the same labels at the same time is Prometheus's
// "vector cannot contain metrics with the same labelset" (e.g. on (...)
// dropped the labels that told two apart).
func (b *seriesBuilder) add(s *stepSide, src int32, t int64, v float64, labels func(*series) ingest.Labels) error {
	se := s.out[src]
	if se == nil {
		ls := s.ss[src].labels
		if labels != nil {
			ls = labels(s.ss[src])
		}
		k := ls.String()
		if se = b.idx[k]; se == nil {
			if b.idx == nil {
				b.idx = map[string]*series{}
			}
			if b.limit > 0 && len(b.out) >= b.limit {
				return tooManySeries(b.limit)
			}
			se = &series{labels: ls}
			b.idx[k] = se
			b.out = append(b.out, se)
		}
		s.out[src] = se
	}
	if n := len(se.ts); n > 0 && se.ts[n-1] == t {
		return badRequest("bad_query", "multiple matches for labels %s: vector cannot contain metrics with the same labelset", se.labels)
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
// signatureIDs numbers the signatures of both sides' series: a[i] and
// b[j] are the numbers of a's and b's series, sigs the signature of each
// number (each series' signature is built once, and both sides share the
// numbers).
func (e *mexpr) signatureIDs(as, bs []*series) (a, b []int32, sigs []string) {
	ids := map[string]int32{}
	of := func(ss []*series) []int32 {
		out := make([]int32, len(ss))
		for i, se := range ss {
			k := e.signature(se.labels)
			id, ok := ids[k]
			if !ok {
				id = int32(len(sigs))
				ids[k] = id
				sigs = append(sigs, k)
			}
			out[i] = id
		}
		return out
	}
	a = of(as)
	b = of(bs)
	return a, b, sigs
}

func (e *mexpr) signature(ls ingest.Labels) string {
	if !e.matching {
		return ls.String()
	}
	return project(ls, e.match, e.on).String()
}

// keepsSeries tells whether every series of operand x (e.l or e.r) with
// a point has one with its labels in e's answer: arithmetic and bool
// comparisons with a scalar keep each sample; or keeps all the left
// samples, and, matching on all labels, a sample of the right side's
// labels at each of its steps.
func keepsSeries(e, x *mexpr) bool {
	switch {
	case e.l.scalar() || e.r.scalar():
		return !isComparison(e.fn) || e.boolMod
	case e.fn == "or":
		return x == e.l || !e.matching
	}
	return false
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
//
// The right side is evaluated holding the left one's points (evalState).
func evalBinop(ctx context.Context, ts *tenantStore, e *mexpr, start, end, step int64) ([]*series, error) {
	st := stateOf(ctx)
	limit := 0
	if st.limitNode == e {
		limit = st.maxSeries
	}
	operand := func(x *mexpr, held int) ([]*series, error) {
		if x.scalar() {
			return nil, nil
		}
		xs := evalState{held: held, maxSeries: st.maxSeries}
		if limit > 0 && keepsSeries(e, x) {
			xs.limitNode = x
		}
		return evalMetric(context.WithValue(ctx, evalStateKey{}, xs), ts, x, start, end, step)
	}
	lss, err := operand(e.l, st.held)
	if err != nil {
		return nil, err
	}
	rss, err := operand(e.r, st.held+countPoints(lss))
	if err != nil {
		return nil, err
	}
	return binopSeries(ctx, e, lss, rss, start, end, step, limit)
}

// binopSeries is e over its operands' series (nil for a scalar side), at
// most limit series of answer (0: any).
func binopSeries(ctx context.Context, e *mexpr, lss, rss []*series, start, end, step int64, limit int) ([]*series, error) {
	g := newStepGrid(start, end, step, lss, rss)
	b := seriesBuilder{limit: limit}
	// A scalar side: one sample value against each sample of the other.
	if e.l.scalar() || e.r.scalar() {
		ss, s, swap := lss, e.r.val, false
		if e.l.scalar() {
			ss, s, swap = rss, e.l.val, true
		}
		side := newStepSide(ss, g)
		for k, t := range g.times {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			for _, i := range side.step(k) {
				pv := side.next(i)
				a, c := pv, s
				if swap {
					a, c = s, pv
				}
				v, keep := binopValue(e, a, c)
				if isComparison(e.fn) && !e.boolMod {
					v = pv // the vector's sample, whichever side it is on
				}
				if keep {
					if err := b.add(side, i, t, v, nil); err != nil {
						return nil, err
					}
				}
			}
		}
		return b.out, nil
	}
	if e.group != "" {
		return groupSeries(ctx, e, lss, rss, g, limit)
	}
	left, right := newStepSide(lss, g), newStepSide(rss, g)
	lsig, rsig, sigs := e.signatureIDs(lss, rss)
	// Per signature, the step (k+1) it was last seen at on each side, by
	// which series, and the right value.
	rStamp, lStamp := make([]int32, len(sigs)), make([]int32, len(sigs))
	rWho, lWho := make([]int32, len(sigs)), make([]int32, len(sigs))
	rVal := make([]float64, len(sigs))
	var projected func(*series) ingest.Labels
	if e.matching {
		projected = func(se *series) ingest.Labels { return project(se.labels, e.match, e.on) }
	}
	for k, t := range g.times {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		stamp := int32(k + 1)
		if isSetOp(e.fn) {
			if e.fn == "or" {
				for _, i := range left.step(k) {
					lStamp[lsig[i]] = stamp
					if err := b.add(left, i, t, left.next(i), nil); err != nil {
						return nil, err
					}
				}
				for _, i := range right.step(k) {
					v := right.next(i)
					if lStamp[rsig[i]] != stamp {
						if err := b.add(right, i, t, v, nil); err != nil {
							return nil, err
						}
					}
				}
				continue
			}
			for _, i := range right.step(k) {
				right.next(i)
				rStamp[rsig[i]] = stamp
			}
			for _, i := range left.step(k) {
				v := left.next(i)
				if (rStamp[lsig[i]] == stamp) == (e.fn == "and") {
					if err := b.add(left, i, t, v, nil); err != nil {
						return nil, err
					}
				}
			}
			continue
		}
		// One-to-one: each signature at most once on each side.
		for _, i := range right.step(k) {
			id := rsig[i]
			if rStamp[id] == stamp {
				return nil, badRequest("bad_query", "found duplicate series for the match group %s on the right hand-side of the operation: [%s, %s]; many-to-many matching not allowed: matching labels must be unique on one side", sigs[id], rss[rWho[id]].labels, rss[i].labels)
			}
			rStamp[id], rWho[id], rVal[id] = stamp, i, right.next(i)
		}
		for _, i := range left.step(k) {
			id := lsig[i]
			v := left.next(i)
			if rStamp[id] != stamp {
				continue
			}
			if lStamp[id] == stamp {
				return nil, badRequest("bad_query", "multiple matches for labels %s on the left hand-side of the operation: [%s, %s]; many-to-one matching must be explicit (group_left/group_right)", sigs[id], lss[lWho[id]].labels, lss[i].labels)
			}
			lStamp[id], lWho[id] = stamp, i
			v, keep := binopValue(e, v, rVal[id])
			if !keep {
				continue
			}
			if err := b.add(left, i, t, v, projected); err != nil {
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
// Step by step, as evalBinop; limit > 0 refuses more series than that.
func topkSeries(ctx context.Context, e *mexpr, in []*series, start, end, step int64, limit int) ([]*series, error) {
	slices.SortFunc(in, func(a, b *series) int { return a.labels.Compare(b.labels) })
	g := newStepGrid(start, end, step, in)
	side := newStepSide(in, g) // each step's samples in label order
	// Each series' group once, as a number.
	gids := make([]int32, len(in))
	ids := map[string]int32{}
	for i, se := range in {
		k := project(se.labels, e.by, !e.without).String()
		id, ok := ids[k]
		if !ok {
			id = int32(len(ids))
			ids[k] = id
		}
		gids[i] = id
	}
	type sample struct {
		i int32
		v float64
	}
	groups := make([][]sample, len(ids))
	stamps := make([]int32, len(ids))
	ids = nil
	var order []int32
	b := seriesBuilder{limit: limit}
	for k, t := range g.times {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		order = order[:0]
		for _, i := range side.step(k) {
			id := gids[i]
			if stamps[id] != int32(k+1) {
				stamps[id] = int32(k + 1)
				order = append(order, id)
				groups[id] = groups[id][:0]
			}
			groups[id] = append(groups[id], sample{i, side.next(i)})
		}
		for _, id := range order {
			gs := groups[id]
			slices.SortStableFunc(gs, func(x, y sample) int {
				xn, yn := math.IsNaN(x.v), math.IsNaN(y.v)
				switch {
				case xn || yn:
					return cmpBool(xn, yn)
				case e.fn == "topk":
					return cmpFloat(y.v, x.v)
				}
				return cmpFloat(x.v, y.v)
			})
			for _, p := range gs[:min(e.k, len(gs))] {
				if err := b.add(side, p.i, t, p.v, nil); err != nil {
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

// unwrapFns are the range functions over unwrapped values, and whether
// Loki lets each take by/without.
var unwrapFns = map[string]bool{
	"rate": false, "rate_counter": false, "sum_over_time": false, "absent_over_time": false,
	"avg_over_time": true, "max_over_time": true, "min_over_time": true, "first_over_time": true, "last_over_time": true,
	"stdvar_over_time": true, "stddev_over_time": true, "quantile_over_time": true,
}

// rangeExpr finishes a range function: a log query ending in
// "| unwrap ..." makes it an unwrap expression (checked against the
// function, as Loki's "invalid aggregation ... with/without unwrap"),
// which may be followed by by/without.
func (p *mparser) rangeExpr(e *mexpr) (*mexpr, error) {
	pre, spec, found := splitUnwrap(e.log)
	grouping, allowed := unwrapFns[e.fn]
	switch {
	case !found && allowed && e.fn != "rate" && e.fn != "absent_over_time":
		return nil, fmt.Errorf("invalid aggregation %s without unwrap: its log query must end in | unwrap <label>", e.fn)
	case !found:
		return e, nil
	case !allowed:
		return nil, fmt.Errorf("invalid aggregation %s with unwrap", e.fn)
	}
	e.kind, e.log = "unwrap", pre
	if err := parseUnwrap(e, spec); err != nil {
		return nil, err
	}
	save := p.pos
	if err := p.grouping(e); err != nil {
		return nil, err
	}
	if p.pos != save && !grouping {
		return nil, fmt.Errorf("%s does not take by or without (Loki refuses grouping there): aggregate it instead, as sum by (...) (%[1]s(...))", e.fn)
	}
	return e, nil
}

// splitUnwrap finds "| unwrap" outside strings and comments in a log
// query: the query before it and the text after "unwrap".
func splitUnwrap(q string) (pre, spec string, found bool) {
	p := &mparser{s: q}
	for p.pos < len(p.s) {
		p.skipString()
		if p.pos >= len(p.s) {
			break
		}
		if p.s[p.pos] == '|' {
			r := skipSpaceAndComments(p.s[p.pos+1:])
			if strings.HasPrefix(r, "unwrap") && (len(r) == 6 || !isIdentByte(r[6])) {
				return strings.TrimSpace(p.s[:p.pos]), r[6:], true
			}
		}
		p.pos++
	}
	return q, "", false
}

// parseUnwrap reads what follows "unwrap": a label, or a conversion of
// one, then label filters only.
func parseUnwrap(e *mexpr, spec string) error {
	p := &mparser{s: spec}
	name := p.ident()
	switch name {
	case "duration", "duration_seconds", "bytes":
		if p.eat('(') {
			e.conv = name
			if name = p.ident(); name == "" || !p.eat(')') {
				return fmt.Errorf("unwrap %s( wants a label and ) at column %d of %q", e.conv, p.pos+1, spec)
			}
		}
	case "":
		return fmt.Errorf("unwrap wants a label name, got %q", strings.TrimSpace(spec))
	}
	e.unwrap = name
	p.ws()
	rest := p.s[p.pos:]
	if rest == "" {
		return nil
	}
	if rest[0] != '|' {
		return fmt.Errorf("unexpected %q after unwrap %s: only label filters (| __error__=\"\") may follow", p.rest(12), name)
	}
	// The filters are read by internal/query after a stand-in selector.
	const sel = `{__unwrap__="x"} `
	ast, err := query.Parse(sel + rest)
	if err != nil {
		return fmt.Errorf("after unwrap %s: %w", name, err)
	}
	if st, ok := query.OnlyLabelFilters(ast); !ok {
		return fmt.Errorf("after unwrap %s only label filters are allowed, not %s", name, st)
	}
	plan, err := query.Compile(ast)
	if err != nil {
		return fmt.Errorf("after unwrap %s: %w", name, err)
	}
	e.post = plan
	return nil
}

// unwrapSample is the outcome of unwrapping one label set: the series it
// belongs to and the value, or skip (no such label, or a post filter
// dropped it).
type unwrapSample struct {
	key  string
	v    float64
	skip bool
}

// unwrapLabels unwraps an entry's labels (stream and extracted, as the
// pipeline left them), as Loki does: an entry without the label (or with
// an empty value) gives no sample; a value that does not convert gives 0
// and sets __error__=SampleExtractionErr (the query then fails with a
// pipeline error unless a filter after the unwrap drops it); the label
// itself leaves the series' labels; the filters after the unwrap run;
// by/without reduce the labels, but for a sample carrying __error__.
func unwrapLabels(e *mexpr, text string) (unwrapSample, ingest.Labels) {
	ls, _ := ingest.ParseLabels(text)
	raw := ls.Get(e.unwrap)
	if raw == "" {
		return unwrapSample{skip: true}, nil
	}
	v, err := convertUnwrapped(e.conv, raw)
	if err != nil {
		ls = ls.With("__error__", "SampleExtractionErr").With("__error_details__", err.Error())
	}
	// The filters after unwrap still see the unwrapped label (as Loki's:
	// `| unwrap lat | lat > 5`); the series then leaves it out.
	if e.post != nil {
		in := make([]query.Label, len(ls))
		for i, l := range ls {
			in[i] = query.Label{Name: l.Name, Value: l.Value}
		}
		out, ok := e.post.FilterLabels(in)
		if !ok {
			return unwrapSample{skip: true}, nil
		}
		ls = make(ingest.Labels, len(out))
		for i, l := range out {
			ls[i] = ingest.Label{Name: l.Name, Value: l.Value}
		}
	}
	ls = ls.With(e.unwrap, "")
	if e.by != nil && ls.Get("__error__") == "" {
		ls = project(ls, e.by, !e.without)
	}
	return unwrapSample{key: ls.String(), v: v}, ls
}

// convertUnwrapped converts an unwrapped value: a float (Go's
// strconv.ParseFloat, as Loki), or a Go duration in seconds, or bytes.
func convertUnwrapped(conv, s string) (float64, error) {
	switch conv {
	case "duration", "duration_seconds":
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("cannot convert %q to a duration", s)
		}
		return d.Seconds(), nil
	case "bytes":
		v, ok := query.ParseBytesValue(s)
		if !ok {
			return 0, fmt.Errorf("cannot convert %q to bytes", s)
		}
		return v, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot convert %q to a float", s)
	}
	return v, nil
}

// evalUnwrap evaluates a range function over unwrapped values at start,
// start+step, ... <= end, each over the samples in (t-range, t]; a window
// without samples gives no point (nor does rate_counter's with fewer
// than two).
//
// With g (the outer sum's grouping, preGroupOf: e is sum_over_time or
// rate), samples are grouped by their labels projected on g, so that
// samples differing only in labels the sum drops (each entry's trace_id,
// a parsed value) share one series, whose sum is the sum of theirs. A
// sample carrying __error__ keeps its labels, as e's own by does: its
// series fails the query where it has a point, as before.
func evalUnwrap(ctx context.Context, ts *tenantStore, e *mexpr, start, end, step int64, g *preGroup) ([]*series, error) {
	if !isLogQuery(e.log) {
		return nil, badRequest("bad_query", "%s wants a log query {...}, got %q", e.fn, e.log)
	}
	sel, err := parseSelection(e.log, false)
	if err != nil {
		return nil, err
	}
	rng := int64(e.rng)
	sel.start, sel.end = minusRange(start, rng)+1, end
	type acc struct {
		labels ingest.Labels
		ts     []int64
		vs     []float64
	}
	groups := map[string]*acc{}
	seen := map[string]unwrapSample{} // per label text: labels repeat
	if ts != nil {
		v, err := ts.w.View()
		if err != nil {
			return nil, err
		}
		err = run(ctx, v, sel, anyOrder, 0, func(h *hit) bool {
			u, ok := seen[h.Labels]
			if !ok {
				var ls ingest.Labels
				u, ls = unwrapLabels(e, h.Labels)
				if g != nil && !u.skip && ls.Get("__error__") == "" {
					ls = project(ls, g.by, !g.without)
					u.key = ls.String()
				}
				if len(seen) >= 1<<14 {
					// Label sets unique to an entry (metadata, parsed
					// values) would keep one each.
					clear(seen)
				}
				seen[h.Labels] = u
				if !u.skip && groups[u.key] == nil {
					groups[u.key] = &acc{labels: ls}
				}
			}
			if !u.skip {
				a := groups[u.key]
				a.ts = append(a.ts, h.Time)
				a.vs = append(a.vs, u.v)
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	var steps []int64
	for t := start; t <= end; t += step {
		steps = append(steps, t)
		if t > math.MaxInt64-step || len(steps) > 11000 {
			break
		}
	}
	if err := checkRangePoints(ctx, e.fn, len(groups), len(steps)); err != nil {
		return nil, err
	}
	var out []*series
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a := groups[k]
		// By time; equal times by value, so first and last are the same
		// whatever order the scan found them in.
		idx := make([]int, len(a.ts))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(i, j int) int {
			if c := cmp.Compare(a.ts[i], a.ts[j]); c != 0 {
				return c
			}
			return cmp.Compare(a.vs[i], a.vs[j])
		})
		times := make([]int64, len(idx))
		vals := make([]float64, len(idx))
		for i, j := range idx {
			times[i], vals[i] = a.ts[j], a.vs[j]
		}
		se := &series{labels: a.labels}
		for _, t := range steps {
			from := minusRange(t, rng)
			lo := sort.Search(len(times), func(i int) bool { return times[i] > from })
			hi := sort.Search(len(times), func(i int) bool { return times[i] > t })
			if hi == lo {
				continue
			}
			v, ok := unwrapValue(e, times[lo:hi], vals[lo:hi], from, t)
			if !ok {
				continue
			}
			se.ts = append(se.ts, t)
			se.vs = append(se.vs, v)
		}
		if len(se.ts) > 0 {
			if err := pipelineError(k); err != nil {
				return nil, err
			}
			out = append(out, se)
		}
	}
	return out, nil
}

// unwrapValue applies e's range function to the samples of one window
// (from, t], in time order; ok is false when it gives no point.
func unwrapValue(e *mexpr, ts []int64, vs []float64, from, t int64) (float64, bool) {
	n := float64(len(vs))
	switch e.fn {
	case "sum_over_time", "rate", "avg_over_time":
		var sum float64
		for _, v := range vs {
			sum += v
		}
		switch e.fn {
		case "rate":
			return sum / e.rng.Seconds(), true
		case "avg_over_time":
			return sum / n, true
		}
		return sum, true
	case "max_over_time", "min_over_time":
		// NaN counts only when every value is NaN, as in Prometheus.
		m := vs[0]
		for _, v := range vs[1:] {
			if math.IsNaN(m) || e.fn == "max_over_time" && v > m || e.fn == "min_over_time" && v < m {
				m = v
			}
		}
		return m, true
	case "first_over_time":
		return vs[0], true
	case "last_over_time":
		return vs[len(vs)-1], true
	case "stdvar_over_time", "stddev_over_time":
		// Welford's running mean and sum of squared deviations
		// (population variance), as Prometheus computes it.
		var count, mean, aux float64
		for _, v := range vs {
			count++
			d := v - mean
			mean += d / count
			aux += d * (v - mean)
		}
		if e.fn == "stddev_over_time" {
			return math.Sqrt(aux / count), true
		}
		return aux / count, true
	case "quantile_over_time":
		return quantile(e.q, vs), true
	case "rate_counter":
		return counterRate(ts, vs, from, t, e.rng)
	}
	return 0, false
}

// quantile is the q-quantile of vs, interpolated linearly between the
// closest ranks as Prometheus's quantile_over_time: q < 0 gives -Inf,
// q > 1 +Inf.
func quantile(q float64, vs []float64) float64 {
	switch {
	case math.IsNaN(q):
		return math.NaN()
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(1)
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	rank := q * float64(len(s)-1)
	lo := max(0, int(math.Floor(rank)))
	hi := min(len(s)-1, lo+1)
	w := rank - math.Floor(rank)
	return s[lo]*(1-w) + s[hi]*w
}

// counterRate is rate_counter: the values taken as a counter (a drop is
// a reset to zero), its increase over the window extrapolated to the
// window's edges and divided by the range, as Prometheus's rate().
// Fewer than two samples give no point.
func counterRate(ts []int64, vs []float64, from, t int64, rng time.Duration) (float64, bool) {
	if len(vs) < 2 {
		return 0, false
	}
	first, last := vs[0], vs[len(vs)-1]
	inc := last - first
	prev := 0.0
	for _, v := range vs {
		if v < prev {
			inc += prev
		}
		prev = v
	}
	toStart := float64(ts[0]-from) / 1e9
	toEnd := float64(t-ts[len(ts)-1]) / 1e9
	sampled := float64(ts[len(ts)-1]-ts[0]) / 1e9
	avgGap := sampled / float64(len(vs)-1)
	if inc > 0 && first >= 0 {
		// The counter cannot have started below zero.
		if toZero := sampled * (first / inc); toZero < toStart {
			toStart = toZero
		}
	}
	threshold := avgGap * 1.1
	interval := sampled
	if toStart < threshold {
		interval += toStart
	} else {
		interval += avgGap / 2
	}
	if toEnd < threshold {
		interval += toEnd
	} else {
		interval += avgGap / 2
	}
	return inc * (interval / sampled) / rng.Seconds(), true
}
