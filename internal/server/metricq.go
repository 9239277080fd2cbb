package server

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The metric queries Grafana's panels and its data source health check
// send, parsed by hand (internal/query parses log queries only):
//
//	Expr     = Term { ( "+" | "-" | "*" | "/" ) Term }   (left to right)
//	Term     = Number | "vector(" Number ")" | "(" Expr ")" | Agg | Range .
//	Agg      = AggOp [ Grouping ] "(" Expr ")" [ Grouping ] .
//	AggOp    = "sum" | "count" | "min" | "max" | "avg" .
//	Grouping = ( "by" | "without" ) "(" [ Ident { "," Ident } ] ")" .
//	Range    = RangeFn "(" LogQuery "[" Duration "]" ")"
//	         | RangeFn "(" Selector "[" Duration "]" Pipeline ")" .
//	RangeFn  = "count_over_time" | "rate" | "bytes_over_time" | "bytes_rate" .
//
// Arithmetic is supported between constants only (vector(1)+vector(1));
// anything else is a 400 naming what is unsupported. A # comment runs to
// the end of its line, as in LogQL, and counts as whitespace, also inside
// the log query of a range function (a '[' or a quote in it is text).
type mexpr struct {
	kind string // "const", "range", "agg", "binop"
	val  float64

	fn  string // range function or aggregation
	log string // range: the log query
	rng time.Duration

	by      []string
	without bool
	inner   *mexpr
}

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

// expr reads a sum of products: * and / bind tighter than + and -, as
// in Loki (and Prometheus); each level is left-associative.
func (p *mparser) expr() (*mexpr, error) { return p.binary("+-", p.product) }

func (p *mparser) product() (*mexpr, error) { return p.binary("*/", p.term) }

// binary reads operand (op operand)* for the operators in ops, folding
// constants: arithmetic is supported between constants only.
func (p *mparser) binary(ops string, operand func() (*mexpr, error)) (*mexpr, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for {
		p.ws()
		if p.pos >= len(p.s) || !strings.ContainsRune(ops, rune(p.s[p.pos])) {
			return l, nil
		}
		op := p.s[p.pos]
		p.pos++
		r, err := operand()
		if err != nil {
			return nil, err
		}
		if l.kind != "const" || r.kind != "const" {
			return nil, fmt.Errorf("arithmetic %q is supported between constants only", op)
		}
		v := 0.0
		switch op {
		case '+':
			v = l.val + r.val
		case '-':
			v = l.val - r.val
		case '*':
			v = l.val * r.val
		case '/':
			v = l.val / r.val
		}
		l = &mexpr{kind: "const", val: v}
	}
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
		return &mexpr{kind: "const", val: v}, nil
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
		if in.kind == "const" {
			return nil, fmt.Errorf("%s over a constant is not supported", name)
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
	return nil, fmt.Errorf("unsupported function %q (supported: count_over_time, rate, bytes_over_time, bytes_rate, sum, count, min, max, avg, vector)", name)
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
