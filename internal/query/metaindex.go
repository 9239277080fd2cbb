package query

import (
	"regexp/syntax"
)

// metaNode is what a label filter needs of an entry's structured metadata
// values before the stream is known (metaNode.need resolves it): an
// AND/OR tree whose leaves name the label a matcher tests and what a
// value must contain for the matcher to pass.
type metaNode struct {
	op   ExprOp     // OpAll (nothing needed), OpLit (a leaf), OpAnd, OpOr
	name string     // a leaf's label name
	m    *evalMatch // a leaf's matcher (= or =~, rejecting "")
	x    *Expr      // a leaf's requirement on the value (never OpAll)
	// text is a leaf's requirement on the stored line, for a value a
	// parser extracted (labelNeeds); nil for none (no parser precedes).
	text *Need
	// exact lists, for a leaf whose matcher passes only on a few whole
	// values (name="v", name=~"a|b"), those values: a metadata value it
	// reads must equal one (segment format 6's value filters answer).
	// Nil when the matcher is not that kind.
	exact []string
	sub   []*metaNode
}

var metaAll = &metaNode{op: OpAll}

// metaFilter is the requirement of one label filter expression that no
// parser precedes.
//
// Why it is sound: with no parser before the filter, the value a matcher
// reads for name (labelSet.get) is __error__ or __error_details__ (set
// only by the pipeline: no requirement), a stream label the stream has
// (no requirement, unless the stream lacks name: see metaNode.need), or
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
