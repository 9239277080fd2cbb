package query

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Label filters after a parser (`| json | trace_id="5f89..."`) and the
// skip index.
//
// A matcher that rejects "" (name="v" with v non-empty, or =~ a regex
// that does not match "") passes only on a value; labelSet.get reads it,
// in this order, from a parser's output (ext), the entry's structured
// metadata (meta) or the stream's labels (base). A parser's key or a
// metadata pair named like a stream label is renamed name_extracted
// (labelSet.add, addMeta), so a matcher on a name the stream has reads
// the stream's value (or "" once a drop removed it): the stream decides,
// as for the filters before any parser. Otherwise the value comes from
// the metadata (the values' index answers) or from a parser that ran on the stored line, and the
// line's index can answer for the parser, whose value the line spells:
//
//   - regexp and pattern: a substring of the line, as it is;
//   - json (and unpack's members, and json's parameters): a number, true,
//     false, or an object or array as written, or a string unescaped
//     (jsonWalker.str): each character is itself, or a short escape
//     \" \\ \/ \b \f \n \r \t, or \uXXXX (a surrogate pair for runes past
//     U+FFFF; a lone surrogate gives U+FFFD). Bytes that are not UTF-8
//     are copied as they are;
//   - logfmt: an unquoted value as it is, or a quoted one unquoted by
//     strconv.Unquote (as written when that fails): each character is
//     itself, or \a \b \f \n \r \t \v \\ \", or a byte from \xHH or
//     \ooo, or a rune from \uHHHH or \UHHHHHHHH; a byte that is not
//     UTF-8 becomes U+FFFD.
//
// So for the value to contain a literal L, split L at the characters an
// escape spells that are never themselves in the stored text of the value
// ("separators": control characters, '"', '\\', '/' for JSON, U+FFFD):
// either every piece is in the line as written, or the line holds an
// escape that spells one of L's other characters. A block whose lines
// hold neither the pieces nor any of those escapes has no entry whose
// parser could produce the value. L not valid UTF-8 gives no
// requirement (every block may match).
//
// The escapes of an ASCII character (of both cases when L folds) form an
// escape leaf (Need.Escaped), which a segment of format 7 answers with
// its escape grams: whether some entry of the block holds any escape of
// the character, exact (segment.Reader.MayHoldEscape). Older segments,
// and non-ASCII characters, look each escape up whole in the index's
// 4-grams (it is ASCII-lowered, as the escapes' hex digits may not be):
// for JSON \uHHHH of the rune (of its high surrogate past U+FFFF); for
// logfmt \uHHHH, \UHHHHHHHH, and \xHH or \ooo of each of its bytes.
// Whole, but not exact: Go's encoding/json writes '<' as \u003c, which
// puts \u00 and u003 in most blocks, and hex ids put 0030 ... 0039 and
// 0061 ... 0066 in nearly every block, so before format 7 the escape
// alternative of a hex trace id kept almost every block of such logs.
//
// The analysis stops at any stage that could make a value out of
// something else (label_format, a template), at a parser after a stage
// that rewrote the line (the line it parses is not the stored one), and
// at any stage it does not know.

// parsedSources is the set of parser kinds before a label filter.
type parsedSources uint8

const (
	fromRaw    parsedSources = 1 << iota // regexp, pattern: substrings of the line
	fromJSON                             // json, unpack: JSON values
	fromLogfmt                           // logfmt: values, quoted ones unquoted
)

// labelNeeds returns the requirements of the label filters that no stage
// makes unanalysable: each metaNode leaf's text is what the stored line
// must contain for a parser before the filter to have produced a value
// the matcher accepts (exprNone when no parser precedes it).
func labelNeeds(stages []Stage) []*metaNode {
	var out []*metaNode
	var src parsedSources
	rewritten := false
	for _, st := range stages {
		switch st := st.(type) {
		case *LineFilter, *DropStage:
			// A line filter drops lines, drop and keep remove labels: a
			// value that passes later still comes from the same places.
		case *ParserStage:
			if rewritten {
				return out // it parses a line the index does not hold
			}
			switch st.Kind {
			case ParserJSON:
				src |= fromJSON
			case ParserLogfmt:
				src |= fromLogfmt
			case ParserRegexp, ParserPattern:
				src |= fromRaw
			case ParserUnpack:
				src |= fromJSON // its members, from the stored line
				rewritten = true
			default:
				return out
			}
		case *LabelFilter:
			n := metaFilter(st.Expr)
			if n.op != OpAll {
				n.setText(src)
				out = append(out, n)
			}
		default:
			// label_format, line_format, decolorize and any later stage.
			return out
		}
	}
	return out
}

// setText sets each leaf's line requirement for values from src. The
// leaves are metaFilter's own (never the shared metaAll).
func (n *metaNode) setText(src parsedSources) {
	if n.op == OpLit {
		n.text = parsedText(n.x, src)
	}
	for _, s := range n.sub {
		s.setText(src)
	}
}

// parsedText maps x, what a label value contains, to what a line
// contains from which a parser in src extracted such a value: a tree of
// line leaves (Need, Values false), some of them escape leaves
// (Need.Escaped).
func parsedText(x *Expr, src parsedSources) *Need {
	switch x.Op {
	case OpLit:
		var xs []*Expr
		var esc escapeSet
		if src&fromRaw != 0 {
			xs = append(xs, litExpr(x.Lit.Text, x.Lit.Fold))
		}
		if src&fromJSON != 0 {
			xs = append(xs, escapedText(x.Lit, false, &esc))
		}
		if src&fromLogfmt != 0 {
			xs = append(xs, escapedText(x.Lit, true, &esc))
		}
		return needOf(OpOr, []*Need{needLeaf(or(xs...), false), esc.need()}) // none: needNone
	case OpAnd, OpOr:
		xs := make([]*Need, len(x.Sub))
		for i, s := range x.Sub {
			xs[i] = parsedText(s, src)
		}
		return needOf(x.Op, xs)
	case OpAll:
		return needAll
	}
	return needNone
}

// escapeSet collects the escapes whose presence in a line lets a value
// contain a literal (escapedText): ASCII characters, for an escape leaf,
// and every escape of them, whole and lowered, for a segment without
// escape grams.
type escapeSet struct {
	chars [utf8.RuneSelf]bool
	grams map[string]bool
}

// need is the escape leaf of s: the line holds an escape of one of its
// characters (needNone for none).
func (s *escapeSet) need() *Need {
	var chars []byte
	for c, ok := range s.chars {
		if ok {
			chars = append(chars, byte(c))
		}
	}
	if len(chars) == 0 {
		return needNone
	}
	return &Need{Op: OpLit, X: gramsExpr(s.grams), Escaped: string(chars)}
}

// gramsExpr is an OR of the grams, in a deterministic order.
func gramsExpr(grams map[string]bool) *Expr {
	keys := make([]string, 0, len(grams))
	for g := range grams {
		keys = append(keys, g)
	}
	slices.Sort(keys)
	xs := make([]*Expr, len(keys))
	for i, g := range keys {
		xs[i] = litExpr(g, false)
	}
	return or(xs...)
}

// escapedText is what a line holds whose JSON (logfmt false) or logfmt
// value contains l (see the comment at the top of this file): the pieces
// of l between separators, or a gram that starts an escape of one of its
// other characters. The escapes of ASCII characters go to esc, which
// parsedText makes an escape leaf of; the result holds the pieces and
// the escapes of the others.
func escapedText(l Lit, logfmt bool, esc *escapeSet) *Expr {
	s := l.Text
	if !utf8.ValidString(s) {
		return exprAll
	}
	var pieces []*Expr
	grams := map[string]bool{}
	start := 0
	for i, r := range s {
		if escapeSeparator(r, logfmt) {
			if i > start {
				pieces = append(pieces, litExpr(s[start:i], l.Fold))
			}
			start = i + utf8.RuneLen(r)
			continue
		}
		rs := []rune{r}
		if l.Fold && r < utf8.RuneSelf && isASCIILetter(byte(r)) {
			rs = append(rs, r^0x20)
		}
		for _, r := range rs {
			if r < utf8.RuneSelf {
				esc.chars[r] = true
				if esc.grams == nil {
					esc.grams = map[string]bool{}
				}
				escapeGrams(esc.grams, r, logfmt)
			} else {
				escapeGrams(grams, r, logfmt)
			}
		}
	}
	if start < len(s) {
		pieces = append(pieces, litExpr(s[start:], l.Fold))
	}
	return or(and(pieces...), gramsExpr(grams)) // no piece: exprAll
}

// escapeSeparator reports whether r in a value may stand for text that
// does not contain r: a short escape's result, or U+FFFD (a lone
// surrogate's in JSON, an invalid byte's in logfmt).
func escapeSeparator(r rune, logfmt bool) bool {
	return r < 0x20 || r == '"' || r == '\\' || r == utf8.RuneError || (!logfmt && r == '/')
}

// escapeGrams adds, lowered, each escape that spells r: the whole
// escape, so that the index checks all its grams (`\u0035`, not just
// `\u00`, which a Go service's HTML-safe `\u003c` would put in many
// blocks). Even whole, a segment's 4-grams cannot tell `\u0035` from
// `\u003c` and hex ids (`0035` is in most blocks of such ids): from
// format 7 an ASCII character's escapes are asked of the segment's
// escape grams instead (Need.Escaped); these grams remain for older
// segments and other characters.
func escapeGrams(grams map[string]bool, r rune, logfmt bool) {
	switch {
	case r <= 0xFFFF:
		grams[fmt.Sprintf(`\u%04x`, r)] = true
	case !logfmt:
		// A surrogate pair; its high half is enough.
		grams[fmt.Sprintf(`\u%04x`, 0xD800+(r-0x10000)>>10)] = true
	}
	if !logfmt {
		return
	}
	grams[fmt.Sprintf(`\u%08x`, r)] = true // \UHHHHHHHH, lowered
	var buf [utf8.UTFMax]byte
	for _, b := range buf[:utf8.EncodeRune(buf[:], r)] {
		grams[fmt.Sprintf(`\x%02x`, b)] = true
		grams[fmt.Sprintf(`\%03o`, b)] = true
	}
}

func isASCIILetter(c byte) bool {
	c |= 0x20
	return 'a' <= c && c <= 'z'
}

// Need is an AND/OR tree over a block's two skip indexes: a leaf (OpLit)
// is X, a required-literal tree, asked of the index of the lines, or of
// the index of the metadata values when Values. A values leaf may also
// list Exact values: some metadata value must equal one of them, byte
// for byte (under any name), which per-block filters of whole values
// answer (segment format 6); X may then be OpAll (String leaves Exact
// out). OpAll needs nothing; OpNone cannot match.
//
// A line leaf with Escaped (an escape leaf) lists ASCII characters, in
// ascending order: the block's lines must hold an escape that spells one
// of them (a parser's value may hold the character where the line holds
// the escape). From segment format 7 a block's escape grams answer that
// exactly; X is the same requirement as whole escapes' 4-grams
// (`\u0035`, `\x35`, ...), for older segments, whose blocks it keeps
// wherever hex ids and a Go service's `\u003c` supply those grams.
type Need struct {
	Op      ExprOp
	X       *Expr
	Values  bool
	Exact   []string
	Escaped string
	Sub     []*Need
}

var (
	needAll  = &Need{Op: OpAll}
	needNone = &Need{Op: OpNone}
)

func (n *Need) String() string {
	switch n.Op {
	case OpAll:
		return "ALL"
	case OpNone:
		return "NONE"
	case OpLit:
		if n.Values {
			return "values" + n.X.String()
		}
		if n.Escaped != "" {
			return "escaped" + strconv.Quote(n.Escaped)
		}
		return "line" + n.X.String()
	}
	parts := make([]string, len(n.Sub))
	for i, s := range n.Sub {
		parts[i] = s.String()
	}
	op := " AND "
	if n.Op == OpOr {
		op = " OR "
	}
	return "(" + strings.Join(parts, op) + ")"
}

// needLeaf is a leaf on one index, simplified.
func needLeaf(x *Expr, values bool) *Need {
	switch x.Op {
	case OpAll:
		return needAll
	case OpNone:
		return needNone
	}
	return &Need{Op: OpLit, X: x, Values: values}
}

// needOf combines xs with op (OpAnd or OpOr), dropping identities and
// stopping at an absorbing element.
func needOf(op ExprOp, xs []*Need) *Need {
	unit, zero := needAll, needNone
	if op == OpOr {
		unit, zero = needNone, needAll
	}
	var subs []*Need
	for _, x := range xs {
		switch x.Op {
		case unit.Op:
		case zero.Op:
			return zero
		case op:
			subs = append(subs, x.Sub...)
		default:
			subs = append(subs, x)
		}
	}
	switch len(subs) {
	case 0:
		return unit
	case 1:
		return subs[0]
	}
	return &Need{Op: op, Sub: subs}
}

// need resolves n for an entry of a stream with the given labels. A leaf
// whose label the stream has reads the stream's value, or "" once a drop
// or keep removed it: no metadata pair or parser's key can take that name
// (either is read as name_extracted), so the leaf passes or fails for the
// whole stream; except for a name ending in _extracted, which such a pair
// or key may take: that leaf needs nothing. A leaf whose label the stream
// lacks passes on a metadata value or, after a parser, on a line holding
// its text.
func (n *metaNode) need(stream []Label) *Need {
	switch n.op {
	case OpLit:
		for _, l := range stream {
			if l.Name != n.name {
				continue
			}
			if strings.HasSuffix(n.name, "_extracted") || n.m.matches(l.Value) {
				return needAll
			}
			return needNone // the matcher rejects "" (metaFilter)
		}
		text := n.text
		if text == nil {
			text = needNone
		}
		values := needLeaf(n.x, true)
		if n.exact != nil {
			values = &Need{Op: OpLit, X: n.x, Values: true, Exact: n.exact}
		}
		return needOf(OpOr, []*Need{values, text})
	case OpAnd, OpOr:
		xs := make([]*Need, len(n.sub))
		for i, s := range n.sub {
			xs[i] = s.need(stream)
		}
		return needOf(n.op, xs)
	}
	return needAll
}

// names adds the label names n's leaves test.
func (n *metaNode) names(dst map[string]bool) {
	if n.op == OpLit {
		dst[n.name] = true
	}
	for _, s := range n.sub {
		s.names(dst)
	}
}

// LabelIndex is what an entry of a stream with the given labels needs of
// a block's skip indexes for the plan's label filters to pass, before
// and after parsers (see the top of parsedindex.go): nil when nothing.
// The filters before any parser need metadata values; for a filter
// after json, logfmt, regexp or pattern, the value may come from the
// line instead. A search may drop a
// block where every selected stream fails it (and keep it where an
// index is missing: a leaf on it is a maybe). The result may be OpNone:
// no entry of the stream can pass. Streams that have none of the
// filters' label names share one result.
func (p *Plan) LabelIndex(stream []Label) *Need {
	if len(p.needs) == 0 {
		return nil
	}
	if !slices.ContainsFunc(stream, func(l Label) bool { return p.needNames[l.Name] }) {
		return p.needAny
	}
	return p.labelIndex(stream)
}

func (p *Plan) labelIndex(stream []Label) *Need {
	xs := make([]*Need, len(p.needs))
	for i, n := range p.needs {
		xs[i] = n.need(stream)
	}
	x := needOf(OpAnd, xs)
	if x.Op == OpAll {
		return nil
	}
	return x
}

// HasLabelIndex reports whether LabelIndex may require anything (for
// some stream).
func (p *Plan) HasLabelIndex() bool { return len(p.needs) > 0 }

// compileNeeds fills the plan's LabelIndex fields.
func (p *Plan) compileNeeds(stages []Stage) {
	p.needs = labelNeeds(stages)
	if len(p.needs) == 0 {
		return
	}
	p.needNames = map[string]bool{}
	for _, n := range p.needs {
		n.names(p.needNames)
	}
	p.needAny = p.labelIndex(nil)
}
