package query

import (
	"regexp/syntax"
	"strings"
)

// metaNode is what a label filter needs of an entry's structured metadata
// values before the stream is known (Plan.MetaIndex resolves it): an
// AND/OR tree whose leaves name the label a matcher tests and what a
// value must contain for the matcher to pass.
type metaNode struct {
	op   ExprOp     // OpAll (nothing needed), OpLit (a leaf), OpAnd, OpOr
	name string     // a leaf's label name
	m    *evalMatch // a leaf's matcher (= or =~, rejecting "")
	x    *Expr      // a leaf's requirement on the value (never OpAll)
	// text is a leaf's requirement on the stored line, for a value a
	// parser extracted (labelNeeds); nil for none (no parser precedes).
	text *Expr
	// exact lists, for a leaf whose matcher passes only on a few whole
	// values (name="v", name=~"a|b"), those values: a metadata value it
	// reads must equal one (segment format 6's value filters answer).
	// Nil when the matcher is not that kind.
	exact []string
	sub   []*metaNode
}

var metaAll = &metaNode{op: OpAll}

// metaFilters returns the requirements of the label filters that come
// before any stage that may set labels from the line: only line filters,
// drop and keep (which remove labels) may precede them. Any other stage
// (a parser, and whatever stage a later version adds: a template that
// formats labels or lines) ends the list, so that a new stage is never
// taken for one that sets no label.
func metaFilters(stages []Stage) []*metaNode {
	var out []*metaNode
	for _, st := range stages {
		switch st := st.(type) {
		case *LineFilter, *DropStage:
		case *LabelFilter:
			if n := metaFilter(st.Expr); n.op != OpAll {
				out = append(out, n)
			}
		default:
			return out
		}
	}
	return out
}

// metaFilter is the requirement of one label filter expression that no
// parser precedes.
//
// Why it is sound: with no parser before the filter, the value a matcher
// reads for name (labelSet.get) is __error__ or __error_details__ (set
// only by the pipeline: no requirement), a stream label the stream has
// (no requirement, unless the stream lacks name: see Plan.MetaIndex), or
// a metadata label, whose value is one of the entry's metadata values,
// whatever its name (a pair whose name the stream has is read as
// name_extracted, so `x_extracted="v"` may read pair x, and `x="v"` may
// read a pair literally named x_extracted...). A matcher that passes only
// on a value containing some literals therefore needs some metadata value
// of the entry to contain them, which the skip index of format 5 answers.
// Drop and keep only remove labels: a later matcher that rejects "" still
// needs a value, and the value still comes from one of those places.
func metaFilter(e LabelExpr) *metaNode {
	switch e := e.(type) {
	case *LabelBinary:
		l, r := metaFilter(e.L), metaFilter(e.R)
		if e.Or {
			if l.op == OpAll || r.op == OpAll {
				return metaAll
			}
			return &metaNode{op: OpOr, sub: []*metaNode{l, r}}
		}
		switch {
		case l.op == OpAll:
			return r
		case r.op == OpAll:
			return l
		}
		return &metaNode{op: OpAnd, sub: []*metaNode{l, r}}
	case *LabelMatch:
		if e.Name == "__error__" || e.Name == "__error_details__" {
			return metaAll
		}
		var x *Expr
		var exact []string
		m := &evalMatch{m: e.Matcher}
		switch e.Type {
		case MatchEqual:
			if e.Value == "" {
				return metaAll // a missing label passes
			}
			x = litExpr(e.Value, false)
			exact = []string{e.Value}
		case MatchRegexp:
			re, err := syntax.Parse(e.Value, syntax.Perl) // as checkRegex parsed it
			if err != nil {
				return metaAll
			}
			if m.re, err = compileAnchored(e.Value, 0); err != nil || m.re.MatchString("") {
				return metaAll // a missing label passes
			}
			x = IndexLiterals(re)
			if vals, ok := exactValues(re); ok {
				exact = vals
			}
		default:
			return metaAll // != and !~ pass on values without any literal
		}
		if x.Op == OpAll && exact == nil {
			return metaAll
		}
		return &metaNode{op: OpLit, name: e.Name, m: m, x: x, exact: exact}
	}
	// Number, duration and bytes comparisons: no literal.
	return metaAll
}

// resolve turns n into an Expr for an entry of a stream with the given
// labels. A leaf whose label the stream has reads the stream's value,
// or "" once a drop or keep removed it: no metadata label can take that
// name (a metadata pair of the name is read as name_extracted), so the
// leaf passes or fails for the whole stream. Except for a name ending
// in _extracted, which a pair renamed so may take: that leaf needs
// nothing.
func (n *metaNode) resolve(stream []Label) *Expr {
	switch n.op {
	case OpLit:
		for _, l := range stream {
			if l.Name != n.name {
				continue
			}
			if strings.HasSuffix(n.name, "_extracted") || n.m.matches(l.Value) {
				return exprAll
			}
			return exprNone // the matcher rejects "" (metaFilter)
		}
		return n.x
	case OpAnd, OpOr:
		xs := make([]*Expr, len(n.sub))
		for i, s := range n.sub {
			xs[i] = s.resolve(stream)
		}
		if n.op == OpAnd {
			return and(xs...)
		}
		return or(xs...)
	}
	return exprAll
}

// MetaIndex is what an entry of a stream with the given labels must hold
// among its structured metadata values (some value containing each
// literal the tree requires) for the plan's label filters to pass, for
// a skip index that covers metadata values (segment format 5); nil when
// the label filters need nothing of them. Only label filters before the
// first parser count (a parser's keys come from the line, unescaped, so
// their values need not be anywhere verbatim), and a matcher on a label
// the stream has is decided by the stream's value. An entry the plan matches satisfies
// Index (its line) and MetaIndex (its metadata); a skip index holding
// the grams of both may drop a block only where a stream it holds fails
// them. The result may be OpNone: no entry of the stream can pass.
// LabelIndex covers it and the filters after parsers; search asks that.
func (p *Plan) MetaIndex(stream []Label) *Expr {
	if len(p.meta) == 0 {
		return nil
	}
	xs := make([]*Expr, len(p.meta))
	for i, n := range p.meta {
		xs[i] = n.resolve(stream)
	}
	x := and(xs...)
	if x.Op == OpAll {
		return nil
	}
	return x
}

// HasMetaIndex reports whether MetaIndex may require anything (for some
// stream): whether a label filter before any parser needs a literal.
func (p *Plan) HasMetaIndex() bool { return len(p.meta) > 0 }
