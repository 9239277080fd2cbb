package query

import (
	"bytes"
	"regexp/syntax"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Lit is a literal a line must contain: exactly, or with ASCII case folding
// (the needle package's IndexFold: bytes >= 0x80 compare exactly). A fold
// literal's text is stored lower-cased in ASCII.
type Lit struct {
	Text string
	Fold bool
}

func (l Lit) String() string {
	if l.Fold {
		return "(?i)" + strconv.Quote(l.Text)
	}
	return strconv.Quote(l.Text)
}

// In reports whether line contains l.
func (l Lit) In(line []byte) bool {
	if l.Fold {
		return indexFoldASCII(line, l.Text) >= 0
	}
	return bytes.Contains(line, []byte(l.Text))
}

// ExprOp is the kind of a required-literal expression node.
type ExprOp int

// The node kinds of Expr.
const (
	OpAll  ExprOp = iota // true: no requirement
	OpNone               // false: nothing can match
	OpLit                // the line contains Lit
	OpAnd                // all of Sub
	OpOr                 // any of Sub
)

// Expr is a boolean AND/OR tree of literals that every matching line
// satisfies. It is over-inclusive by construction: a line may satisfy it
// and still not match, never the reverse, so a skip index may drop a block
// that fails it.
type Expr struct {
	Op  ExprOp
	Lit Lit
	Sub []*Expr
}

var (
	exprAll  = &Expr{Op: OpAll}
	exprNone = &Expr{Op: OpNone}
)

func litExpr(text string, fold bool) *Expr {
	return &Expr{Op: OpLit, Lit: Lit{Text: text, Fold: fold}}
}

func (e *Expr) String() string {
	switch e.Op {
	case OpAll:
		return "ALL"
	case OpNone:
		return "NONE"
	case OpLit:
		return e.Lit.String()
	}
	parts := make([]string, len(e.Sub))
	for i, s := range e.Sub {
		parts[i] = s.String()
	}
	op := " AND "
	if e.Op == OpOr {
		op = " OR "
	}
	return "(" + strings.Join(parts, op) + ")"
}

// Eval reports whether line satisfies e (plain scans; for tests and tools).
func (e *Expr) Eval(line []byte) bool {
	switch e.Op {
	case OpAll:
		return true
	case OpNone:
		return false
	case OpLit:
		return e.Lit.In(line)
	case OpAnd:
		for _, s := range e.Sub {
			if !s.Eval(line) {
				return false
			}
		}
		return true
	}
	for _, s := range e.Sub {
		if s.Eval(line) {
			return true
		}
	}
	return false
}

// Lits returns the distinct literals in e.
func (e *Expr) Lits() []Lit {
	var out []Lit
	var walk func(*Expr)
	walk = func(e *Expr) {
		if e.Op == OpLit {
			if !slices.Contains(out, e.Lit) {
				out = append(out, e.Lit)
			}
		}
		for _, s := range e.Sub {
			walk(s)
		}
	}
	walk(e)
	return out
}

// implies reports whether a line containing a necessarily contains b.
func (a Lit) implies(b Lit) bool {
	if b.Fold {
		return indexFoldASCII([]byte(a.Text), b.Text) >= 0
	}
	return !a.Fold && strings.Contains(a.Text, b.Text)
}

// and builds a simplified conjunction.
func and(xs ...*Expr) *Expr { return combine(OpAnd, xs) }

// or builds a simplified disjunction.
func or(xs ...*Expr) *Expr { return combine(OpOr, xs) }

func combine(op ExprOp, xs []*Expr) *Expr {
	unit, zero := exprAll, exprNone // identity and absorbing element for AND
	if op == OpOr {
		unit, zero = exprNone, exprAll
	}
	var subs []*Expr
	for _, x := range xs {
		switch {
		case x.Op == unit.Op:
			continue
		case x.Op == zero.Op:
			return zero
		case x.Op == op:
			subs = append(subs, x.Sub...)
		default:
			subs = append(subs, x)
		}
	}
	// Drop literals made redundant by another: in an AND keep the stronger
	// (AND("err", "error") = "error"), in an OR the weaker.
	keep := subs[:0:0]
	for i, x := range subs {
		redundant := false
		if x.Op == OpLit {
			for j, y := range subs {
				if i == j || y.Op != OpLit {
					continue
				}
				var covered bool
				if op == OpAnd {
					covered = y.Lit.implies(x.Lit)
				} else {
					covered = x.Lit.implies(y.Lit)
				}
				// On mutual implication (equal literals) keep the first.
				if covered && (!sameLitClass(x.Lit, y.Lit) || j < i) {
					redundant = true
					break
				}
			}
		} else {
			for _, y := range keep {
				if y.equal(x) {
					redundant = true
					break
				}
			}
		}
		if !redundant {
			keep = append(keep, x)
		}
	}
	switch len(keep) {
	case 0:
		return unit
	case 1:
		return keep[0]
	}
	return &Expr{Op: op, Sub: keep}
}

// sameLitClass reports mutual implication.
func sameLitClass(a, b Lit) bool { return a.implies(b) && b.implies(a) }

func (e *Expr) equal(f *Expr) bool {
	if e.Op != f.Op || e.Lit != f.Lit || len(e.Sub) != len(f.Sub) {
		return false
	}
	for i := range e.Sub {
		if !e.Sub[i].equal(f.Sub[i]) {
			return false
		}
	}
	return true
}

// ---- regular expression analysis ----

// maxSet bounds the alternatives tracked exactly; past it the analysis
// keeps what it has as an OR and starts afresh, which stays correct.
const maxSet = 16

// str is one exact alternative: the text a match is made of, possibly with
// ASCII folding (then Text is lower-cased in ASCII).
type str = Lit

// info is what the analysis knows about a regexp node.
type info struct {
	exact []str // the node matches exactly one of these (nil: unknown)
	match *Expr // what any match of the node contains
}

// The two runes outside ASCII that Go's case folding maps onto ASCII
// letters: KELVIN SIGN (k, K) and LATIN SMALL LETTER LONG S (s, S).
const (
	kelvin = '\u212A'
	longS  = '\u017F'
)

type analyzer struct {
	// specials collects the non-ASCII fold partners (kelvin, longS) a match
	// might use where the analysis wrote an ASCII fold literal.
	specials map[rune]bool
	// inline keeps those partners in the exact sets instead, as
	// alternatives of their own (see IndexLiterals).
	inline bool
}

// RequiredLiterals returns an expression every line matching the regular
// expression re (Go syntax, with flags as line filters compile it) must
// satisfy. Folded literals use ASCII folding; when the pattern can match
// the non-ASCII fold partners of k or s, the result also admits lines
// containing those runes, so it stays a necessary condition.
func RequiredLiterals(re *syntax.Regexp) *Expr {
	a := &analyzer{specials: map[rune]bool{}}
	e := a.analyze(re.Simplify()).toExpr()
	if e.Op == OpAll {
		return e
	}
	var alts []*Expr
	for _, r := range []rune{kelvin, longS} {
		if a.specials[r] {
			alts = append(alts, litExpr(string(r), false))
		}
	}
	return or(append([]*Expr{e}, alts...)...)
}

// IndexLiterals is RequiredLiterals for the skip index. RequiredLiterals
// admits the k and s partners as bare runes (KELVIN SIGN is 3 bytes, LONG
// S 2), which keeps the scan to one folded needle plus the two runes, but
// a rune shorter than the index's grams is in every block: any (?i)
// regex with a k or an s pruned nothing. Here each partner is an
// alternative inside the literal ((?i)"kernel" OR (?i)"\u212aernel"), as
// long as the literal, so the index prunes on it; the variants multiply
// (up to maxSet, past which the pieces between them are ANDed), which
// costs the index a few lookups and the scan nothing.
func IndexLiterals(re *syntax.Regexp) *Expr {
	a := &analyzer{specials: map[rune]bool{}, inline: true}
	return a.analyze(re.Simplify()).toExpr()
}

func (in info) toExpr() *Expr {
	if in.exact == nil {
		return in.match
	}
	return setExpr(in.exact)
}

// setExpr is the OR of an exact set. A wide set of single bytes ([0-9],
// \d) is almost always present and costs a scan per byte, so it becomes
// no requirement at all: weaker, still correct.
func setExpr(set []str) *Expr {
	if len(set) > 3 {
		short := true
		for _, s := range set {
			short = short && len(s.Text) <= 1
		}
		if short {
			return exprAll
		}
	}
	xs := make([]*Expr, len(set))
	for i, s := range set {
		if s.Text == "" {
			return exprAll
		}
		xs[i] = litExpr(s.Text, s.Fold)
	}
	if len(xs) == 0 {
		return exprNone
	}
	return or(xs...)
}

func unknown() info { return info{match: exprAll} }

func (a *analyzer) analyze(re *syntax.Regexp) info {
	switch re.Op {
	case syntax.OpNoMatch:
		return info{exact: []str{}, match: exprNone}
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine,
		syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return info{exact: []str{{}}, match: exprAll}
	case syntax.OpLiteral:
		fold := re.Flags&syntax.FoldCase != 0
		parts := make([]info, len(re.Rune))
		for i, r := range re.Rune {
			parts[i] = a.runeInfo(r, fold)
		}
		return a.concat(parts)
	case syntax.OpCharClass:
		return a.classInfo(re.Rune)
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return unknown()
	case syntax.OpCapture:
		return a.analyze(re.Sub[0])
	case syntax.OpStar:
		return unknown()
	case syntax.OpQuest:
		sub := a.analyze(re.Sub[0])
		if sub.exact != nil && len(sub.exact) < maxSet {
			return info{exact: union(sub.exact, []str{{}}), match: exprAll}
		}
		return unknown()
	case syntax.OpPlus:
		sub := a.analyze(re.Sub[0])
		return info{match: sub.toExpr()}
	case syntax.OpRepeat:
		sub := a.analyze(re.Sub[0])
		if re.Min == 0 {
			return unknown()
		}
		if re.Min == 1 && re.Max == 1 {
			return sub
		}
		return info{match: sub.toExpr()}
	case syntax.OpConcat:
		parts := make([]info, len(re.Sub))
		for i, s := range re.Sub {
			parts[i] = a.analyze(s)
		}
		return a.concat(parts)
	case syntax.OpAlternate:
		var set []str
		exact := true
		xs := make([]*Expr, len(re.Sub))
		for i, s := range re.Sub {
			in := a.analyze(s)
			xs[i] = in.toExpr()
			if in.exact == nil {
				exact = false
			} else if exact {
				set = union(set, in.exact)
				if len(set) > maxSet {
					exact = false
				}
			}
		}
		if exact {
			if set == nil {
				set = []str{}
			}
			return info{exact: set, match: setExpr(set)}
		}
		return info{match: or(xs...)}
	}
	return unknown()
}

// concat joins parts in sequence: runs of exact parts multiply into one
// exact set while it stays small; everything else is ANDed.
func (a *analyzer) concat(parts []info) info {
	var conj []*Expr
	cur := []str{{}} // exact set of the current run
	allExact := true
	for _, p := range parts {
		if p.exact == nil {
			allExact = false
			conj = append(conj, setExpr(cur), p.match)
			cur = []str{{}}
			continue
		}
		if len(cur)*len(p.exact) > maxSet || maxLen(cur)+maxLen(p.exact) > maxLitLen {
			allExact = false
			conj = append(conj, setExpr(cur))
			cur = p.exact
			continue
		}
		cur = cross(cur, p.exact)
	}
	if allExact {
		return info{exact: cur, match: setExpr(cur)}
	}
	conj = append(conj, setExpr(cur))
	return info{match: and(conj...)}
}

// maxLitLen bounds an exact alternative: a longer literal is split into
// ANDed pieces, which keeps the analysis linear in the pattern.
const maxLitLen = 256

func maxLen(set []str) int {
	n := 0
	for _, s := range set {
		n = max(n, len(s.Text))
	}
	return n
}

func cross(xs, ys []str) []str {
	out := make([]str, 0, len(xs)*len(ys))
	for _, x := range xs {
		for _, y := range ys {
			s := str{Text: x.Text + y.Text, Fold: x.Fold || y.Fold}
			if s.Fold {
				s.Text = lowerASCII(s.Text)
			}
			out = union(out, []str{s})
		}
	}
	return out
}

func union(xs, ys []str) []str {
	out := slices.Clone(xs)
	if out == nil {
		out = []str{}
	}
	for _, y := range ys {
		if !slices.Contains(out, y) {
			out = append(out, y)
		}
	}
	return out
}

// runeInfo describes one literal rune, folded or not.
func (a *analyzer) runeInfo(r rune, fold bool) info {
	if r == utf8.RuneError {
		// Go's regexp matches U+FFFD against any invalid byte too, so the
		// line need not contain its UTF-8 encoding.
		return unknown()
	}
	if !fold {
		return info{exact: []str{{Text: string(r)}}}
	}
	orbit := []rune{r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		orbit = append(orbit, f)
	}
	return a.classFromRunes(orbit)
}

// classInfo describes a character class given as sorted ranges.
func (a *analyzer) classInfo(ranges []rune) info {
	n := 0
	for i := 0; i+1 < len(ranges); i += 2 {
		n += int(ranges[i+1]-ranges[i]) + 1
		if n > 2*maxSet {
			return unknown()
		}
	}
	var runes []rune
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1]; r++ {
			runes = append(runes, r)
		}
	}
	return a.classFromRunes(runes)
}

// classFromRunes turns a small set of runes into exact alternatives,
// merging an ASCII letter's two cases into one fold alternative.
func (a *analyzer) classFromRunes(runes []rune) info {
	has := map[rune]bool{}
	for _, r := range runes {
		if r == utf8.RuneError {
			return unknown()
		}
		has[r] = true
	}
	var set []str
	done := map[rune]bool{}
	sort.Slice(runes, func(i, j int) bool { return runes[i] < runes[j] })
	for _, r := range runes {
		if done[r] {
			continue
		}
		lo := unicode.ToLower(r)
		up := unicode.ToUpper(r)
		if r < utf8.RuneSelf && lo != up && has[lo] && has[up] {
			set = union(set, []str{{Text: string(lo), Fold: true}})
			done[lo], done[up] = true, true
			continue
		}
		set = union(set, []str{{Text: string(r)}})
		done[r] = true
	}
	// A fold "k" or "s" stands for the ASCII pair only; the non-ASCII
	// partner, if in the class, is covered at the top (see RequiredLiterals)
	// rather than tripling the set.
	for _, sp := range []struct {
		r     rune
		ascii string
	}{{kelvin, "k"}, {longS, "s"}} {
		if !a.inline && has[sp.r] && slices.Contains(set, str{Text: sp.ascii, Fold: true}) {
			a.specials[sp.r] = true
			i := slices.Index(set, str{Text: string(sp.r)})
			set = slices.Delete(set, i, i+1)
		}
	}
	if len(set) > maxSet {
		return unknown()
	}
	if set == nil {
		set = []str{}
	}
	return info{exact: set, match: setExpr(set)}
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// indexFoldASCII is a plain reference: the index of lowerNeedle (already
// ASCII lower-case) in h with ASCII folding, or -1.
func indexFoldASCII(h []byte, lowerNeedle string) int {
	n := len(lowerNeedle)
	for i := 0; i+n <= len(h); i++ {
		j := 0
		for j < n {
			c := h[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lowerNeedle[j] {
				break
			}
			j++
		}
		if j == n {
			return i
		}
	}
	return -1
}
