package query

import (
	"bytes"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"haystack/needle"
)

// Label is one stream label. Slices of any struct type with the same two
// fields convert element-wise (see MatchStreamOf).
type Label struct{ Name, Value string }

// Plan is a compiled query: what the search engine runs. It is immutable
// after Compile and safe for concurrent use.
type Plan struct {
	Query *Query

	// Streams are the selector's matchers, ANDed; empty selects all.
	Streams []*StreamMatcher

	// Filters are the line filters of the query before any stage that
	// rewrites the line (line_format, decolorize, unpack), cheapest
	// first. They are ANDed and do not depend on labels, so running them
	// before the parsers and in any order is exact. Line filters after a
	// rewrite test the new line in the pipeline, in query order.
	Filters []*Filter

	// Required is what every matching line contains, for the skip index and
	// the block-level kernel: the AND of the positive Filters'
	// requirements. Negative filters, label filters and line filters after
	// a rewrite contribute nothing.
	Required *Expr
	// Index is Required for the skip index, which needs literals at least
	// a gram long: it spells out the k/s fold partners of (?i) regexes
	// (IndexLiterals). Required keeps the cheaper form for the scan.
	Index *Expr

	stages []pipeStage // parsers, label filters, drop and keep, in query order

	// LabelIndex: what the label filters before and after parsers need
	// of the skip indexes, the names they test, and the result for a
	// stream with none of those names.
	needs     []*metaNode
	needNames map[string]bool
	needAny   *Need

	// Shortcuts for pipelines that cannot drop a line (no label filter)
	// and those that only drop and keep (their result depends on the
	// stream's labels alone: nothing sets __error__ or extracts). Grafana's
	// logs-volume query `... | drop __error__` is the common case: without
	// them it costs a label set per entry.
	noLabelFilter bool
	dropOnly      bool
	rewrites      bool // a stage may replace the line (RewritesLine)
}

// RewritesLine reports whether a stage (line_format, decolorize, unpack)
// may replace an entry's line: the line to show, count and measure is
// then EntryLabels.Line when set, as Loki returns it.
func (p *Plan) RewritesLine() bool { return p.rewrites }

// StreamMatcher is a compiled selector matcher.
type StreamMatcher struct {
	Matcher
	re *regexp.Regexp // anchored, for =~ and !~
}

// Matches reports whether a label value satisfies m; a missing label has
// the value "".
func (m *StreamMatcher) Matches(v string) bool {
	switch m.Type {
	case MatchEqual:
		return v == m.Value
	case MatchNotEqual:
		return v != m.Value
	case MatchRegexp:
		return m.re.MatchString(v)
	}
	return !m.re.MatchString(v)
}

// FilterKind classifies a compiled line filter.
type FilterKind int

// The matcher shapes a line filter compiles to.
const (
	Contains       FilterKind = iota // one literal, maybe folded
	NotContains                      // no line containing one literal
	ContainsAny                      // any of several literals
	NotContainsAny                   // none of several literals
	Regex                            // any of the alternatives, at least one a regex
	NotRegex                         // none of the alternatives
)

func (k FilterKind) String() string {
	return [...]string{"Contains", "NotContains", "ContainsAny", "NotContainsAny", "Regex", "NotRegex"}[k]
}

// Filter is one compiled line filter: a line passes when any alternative
// matches, or, when Negate, when none does.
type Filter struct {
	Kind   FilterKind
	Negate bool
	Alts   []*Alt
	Cost   int // relative per-line cost estimate used for ordering
	Source *LineFilter
}

// Alt is one alternative of a line filter.
type Alt struct {
	// Regexp is nil for a literal alternative: the line contains Needle.
	// For a regex, Prefilter is what any match contains; it is checked
	// first with the needle kernel and the regex only confirms.
	Needle    Lit
	Regexp    *regexp.Regexp
	Prefilter *Expr

	// confirm handles Go's Unicode case folding of k and s (KELVIN SIGN,
	// LONG S) for a folded literal: a line the ASCII fold search misses but
	// that holds one of those runes goes to the regex.
	confirm      *regexp.Regexp
	confirmBytes []byte // lead bytes of the runes that need confirm

	// index, when set, is what a match contains for the skip index
	// (IndexLiterals), where Prefilter or the confirm path's requirement
	// would admit every block.
	index *Expr

	searcher *needle.Searcher
	pre      *evalNode
}

// Costs per alternative, in rough units of one exact kernel pass.
const (
	costLiteral   = 2
	costFold      = 3
	costPrefilter = 8  // regex behind a literal prefilter
	costRegex     = 40 // regex on every line
)

// Compile turns a parsed query into a plan. Its errors are *ParseError
// (positions refer to the query text Parse saw).
func Compile(q *Query) (*Plan, error) {
	p := &Plan{Query: q}
	for _, m := range q.Selector {
		sm := &StreamMatcher{Matcher: *m}
		if m.Type == MatchRegexp || m.Type == MatchNotRegexp {
			if err := checkRegex(m.Value, m.Pos, false); err != nil {
				return nil, err
			}
			re, err := compileAnchored(m.Value, m.Pos)
			if err != nil {
				return nil, err
			}
			sm.re = re
		}
		p.Streams = append(p.Streams, sm)
	}
	var reqs, idx []*Expr
	// Once a stage rewrites the line (line_format, decolorize, unpack),
	// later line filters test the new line: they run in the pipeline, in
	// query order, and say nothing of the stored line, so they add
	// nothing to Required (the skip index would prune blocks wrongly).
	rewritten := false
	for _, st := range q.Stages {
		switch st := st.(type) {
		case *LineFilter:
			f, err := compileFilter(st)
			if err != nil {
				return nil, err
			}
			if rewritten {
				p.stages = append(p.stages, pipeStage{line: f})
				continue
			}
			p.Filters = append(p.Filters, f)
			if !f.Negate {
				reqs = append(reqs, f.required())
				idx = append(idx, f.indexRequired())
			}
		case *ParserStage:
			ps, err := compileParser(st)
			if err != nil {
				return nil, err
			}
			p.stages = append(p.stages, ps)
			if st.Kind == ParserUnpack {
				rewritten = true
			}
		case *LabelFilter:
			e, err := compileLabelExpr(st.Expr)
			if err != nil {
				return nil, err
			}
			p.stages = append(p.stages, pipeStage{filter: e})
		case *DropStage:
			// Dropping labels never changes which lines can match: it adds
			// nothing to Required and no line filter.
			d, err := compileDrop(st)
			if err != nil {
				return nil, err
			}
			p.stages = append(p.stages, pipeStage{drop: d})
		case *LineFormatStage:
			t, err := compileTemplate(st.Template, st.Pos)
			if err != nil {
				return nil, err
			}
			p.stages = append(p.stages, pipeStage{lineFmt: t})
			rewritten = true
		case *DecolorizeStage:
			p.stages = append(p.stages, pipeStage{decolor: true})
			rewritten = true
		case *LabelFormatStage:
			ps := pipeStage{labelFmt: []labelFmtEval{}}
			seen := map[string]bool{}
			for _, f := range st.Labels {
				if seen[f.Name] || !validLabelName(f.Name) || f.Name == "__error__" || f.Name == "__error_details__" {
					return nil, errAt(f.Pos, "label_format: bad or repeated label name "+f.Name)
				}
				seen[f.Name] = true
				e := labelFmtEval{name: f.Name, rename: f.Value}
				if !f.Rename {
					t, err := compileTemplate(f.Value, f.Pos)
					if err != nil {
						return nil, err
					}
					e.tmpl, e.rename = t, ""
				}
				ps.labelFmt = append(ps.labelFmt, e)
			}
			if len(ps.labelFmt) == 0 {
				return nil, errAt(st.Pos, "label_format without a label")
			}
			p.stages = append(p.stages, ps)
		default:
			return nil, fmt.Errorf("query: unknown stage %T", st)
		}
	}
	p.rewrites = rewritten
	p.noLabelFilter, p.dropOnly = true, len(p.stages) > 0
	for _, st := range p.stages {
		if st.filter != nil || st.line != nil {
			p.noLabelFilter = false
		}
		if st.drop == nil {
			p.dropOnly = false
		}
	}
	sort.SliceStable(p.Filters, func(i, j int) bool { return p.Filters[i].Cost < p.Filters[j].Cost })
	p.Required, p.Index = and(reqs...), and(idx...)
	p.compileNeeds(q.Stages)
	return p, nil
}

func compileFilter(lf *LineFilter) (*Filter, error) {
	if len(lf.Values) == 0 {
		return nil, errAt(lf.Pos, "line filter without a value")
	}
	f := &Filter{Negate: lf.Op.Negated(), Source: lf}
	anyRegex := false
	for _, v := range lf.Values {
		var a *Alt
		if lf.Op.IsRegexp() {
			if err := checkRegex(v, lf.Pos, true); err != nil {
				return nil, err
			}
			a = compileRegexAlt(v)
		} else if lf.FoldASCII {
			v = lowerASCII(v)
			a = &Alt{Needle: Lit{Text: v, Fold: hasASCIILetter(v)}}
		} else {
			a = &Alt{Needle: Lit{Text: v}}
		}
		switch {
		case a.Regexp != nil:
			anyRegex = true
			if a.Prefilter.Op == OpAll {
				f.Cost += costRegex
			} else {
				f.Cost += costPrefilter
				a.pre = compileEval(a.Prefilter)
			}
		case a.Needle.Fold:
			f.Cost += costFold
			a.searcher = needle.NewFold([]byte(a.Needle.Text))
		default:
			f.Cost += costLiteral
			a.searcher = needle.New([]byte(a.Needle.Text))
		}
		f.Alts = append(f.Alts, a)
	}
	switch {
	case anyRegex && f.Negate:
		f.Kind = NotRegex
	case anyRegex:
		f.Kind = Regex
	case len(f.Alts) == 1 && f.Negate:
		f.Kind = NotContains
	case len(f.Alts) == 1:
		f.Kind = Contains
	case f.Negate:
		f.Kind = NotContainsAny
	default:
		f.Kind = ContainsAny
	}
	return f, nil
}

// compileRegexAlt compiles a validated line-filter regex. Patterns that are
// a literal, plain or (?i), become literal alternatives.
func compileRegexAlt(v string) *Alt {
	re, _ := syntax.Parse(v, syntax.Perl|syntax.DotNL) // validated by checkRegex
	re = re.Simplify()
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	if lit, ok := literalOf(re); ok {
		a := &Alt{Needle: lit}
		if lit.Fold {
			var lead []byte
			for _, c := range []byte(lit.Text) {
				if c == 'k' {
					lead = append(lead, 0xE2) // U+212A is E2 84 AA
				}
				if c == 's' {
					lead = append(lead, 0xC5) // U+017F is C5 BF
				}
			}
			if lead != nil {
				a.confirm = regexp.MustCompile("(?s)" + v)
				a.confirmBytes = lead
				a.index = IndexLiterals(re)
			}
		}
		return a
	}
	return &Alt{
		Regexp:    regexp.MustCompile("(?s)" + v),
		Prefilter: RequiredLiterals(re),
		index:     IndexLiterals(re),
	}
}

// literalOf recognises a regex that matches exactly one literal, exactly or
// with case folding that ASCII folding reproduces (plus the k/s partners,
// which the caller confirms).
func literalOf(re *syntax.Regexp) (Lit, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return Lit{}, true
	case syntax.OpLiteral:
	default:
		return Lit{}, false
	}
	fold := re.Flags&syntax.FoldCase != 0
	for _, r := range re.Rune {
		if r == utf8.RuneError {
			return Lit{}, false // also matches invalid bytes
		}
		if fold && r >= utf8.RuneSelf && unicode.SimpleFold(r) != r {
			return Lit{}, false // non-ASCII case pair: needs the regex
		}
	}
	s := string(re.Rune)
	if fold {
		s = lowerASCII(s)
		if !hasASCIILetter(s) {
			fold = false
		}
	}
	return Lit{Text: s, Fold: fold}, true
}

func hasASCIILetter(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if 'a' <= c && c <= 'z' {
			return true
		}
	}
	return false
}

// required is what a line passing the (positive) filter contains.
func (f *Filter) required() *Expr {
	xs := make([]*Expr, len(f.Alts))
	for i, a := range f.Alts {
		xs[i] = a.required()
	}
	return or(xs...)
}

// indexRequired is required for the skip index: the alternatives' index
// expressions where they have one.
func (f *Filter) indexRequired() *Expr {
	xs := make([]*Expr, len(f.Alts))
	for i, a := range f.Alts {
		if xs[i] = a.index; xs[i] == nil {
			xs[i] = a.required()
		}
	}
	return or(xs...)
}

// required is what a line the alternative matches contains.
func (a *Alt) required() *Expr {
	switch {
	case a.Regexp != nil:
		return a.Prefilter
	case a.confirm != nil:
		alts := []*Expr{litExpr(a.Needle.Text, true)}
		if bytes.IndexByte(a.confirmBytes, 0xE2) >= 0 {
			alts = append(alts, litExpr(string(kelvin), false))
		}
		if bytes.IndexByte(a.confirmBytes, 0xC5) >= 0 {
			alts = append(alts, litExpr(string(longS), false))
		}
		return or(alts...)
	}
	return litExpr(a.Needle.Text, a.Needle.Fold)
}

// matches reports whether the alternative matches line.
func (a *Alt) matches(line []byte) bool {
	if a.Regexp != nil {
		if a.pre != nil && !a.pre.eval(line) {
			return false
		}
		return a.Regexp.Match(line)
	}
	if a.searcher.Index(line) >= 0 {
		return true
	}
	if a.confirm != nil {
		for _, c := range a.confirmBytes {
			if bytes.IndexByte(line, c) >= 0 {
				return a.confirm.Match(line)
			}
		}
	}
	return false
}

// Pass reports whether line passes the filter.
func (f *Filter) Pass(line []byte) bool {
	for _, a := range f.Alts {
		if a.matches(line) {
			return !f.Negate
		}
	}
	return f.Negate
}

// evalNode is an Expr with a prepared searcher per literal.
type evalNode struct {
	op  ExprOp
	s   *needle.Searcher
	sub []*evalNode
}

func compileEval(e *Expr) *evalNode {
	n := &evalNode{op: e.Op}
	if e.Op == OpLit {
		if e.Lit.Fold {
			n.s = needle.NewFold([]byte(e.Lit.Text))
		} else {
			n.s = needle.New([]byte(e.Lit.Text))
		}
	}
	for _, s := range e.Sub {
		n.sub = append(n.sub, compileEval(s))
	}
	return n
}

func (n *evalNode) eval(line []byte) bool {
	switch n.op {
	case OpAll:
		return true
	case OpNone:
		return false
	case OpLit:
		return n.s.Index(line) >= 0
	case OpAnd:
		for _, s := range n.sub {
			if !s.eval(line) {
				return false
			}
		}
		return true
	}
	for _, s := range n.sub {
		if s.eval(line) {
			return true
		}
	}
	return false
}

// MatchStream reports whether a stream with these labels is selected.
func (p *Plan) MatchStream(labels []Label) bool {
	for _, m := range p.Streams {
		v := ""
		for _, l := range labels {
			if l.Name == m.Name {
				v = l.Value
				break
			}
		}
		if !m.Matches(v) {
			return false
		}
	}
	return true
}

// MatchStreamMap is MatchStream for labels held in a map.
func (p *Plan) MatchStreamMap(labels map[string]string) bool {
	for _, m := range p.Streams {
		if !m.Matches(labels[m.Name]) {
			return false
		}
	}
	return true
}

// MatchStreamOf is MatchStream for any slice of {Name, Value string}
// structs, such as ingest.Labels.
func MatchStreamOf[L ~struct{ Name, Value string }](p *Plan, labels []L) bool {
	for _, m := range p.Streams {
		v := ""
		for _, l := range labels {
			if l := Label(l); l.Name == m.Name {
				v = l.Value
				break
			}
		}
		if !m.Matches(v) {
			return false
		}
	}
	return true
}

// MatchLine runs only the line filters, cheapest first.
func (p *Plan) MatchLine(line []byte) bool {
	for _, f := range p.Filters {
		if !f.Pass(line) {
			return false
		}
	}
	return true
}

// Match reports whether line passes the pipeline: the line filters, then
// the parsers and label filters, with no stream labels. It does not check
// the selector (see MatchStream).
func (p *Plan) Match(line []byte) bool { return p.MatchEntry(nil, line) }

// MatchEntry is Match for an entry of a stream with the given labels, which
// label filters can test and which extracted labels do not override.
func (p *Plan) MatchEntry(stream []Label, line []byte) bool {
	return p.MatchEntryAttrs(stream, nil, line)
}

// MatchEntryAttrs is MatchEntry for an entry with structured metadata
// (package attrs' encoding; empty for none), which label filters see as
// labels of the entry.
func (p *Plan) MatchEntryAttrs(stream []Label, meta, line []byte) bool {
	if !p.MatchLine(line) {
		return false
	}
	if p.noLabelFilter {
		return true // parsers, drop and keep never drop a line
	}
	ls, ok := p.run(stream, meta, line)
	ls.release()
	return ok
}

// run runs the stages after the line filters on an entry: its final label
// state, and whether it passed. The caller releases the state.
func (p *Plan) run(stream []Label, meta, line []byte) (*labelSet, bool) {
	ls := newLabelSet(stream, meta)
	ls.line = line
	for i := range p.stages {
		st := &p.stages[i]
		switch {
		case st.parser != nil:
			if l := ls.runParser(st, ls.line); !sameSlice(l, ls.line) {
				ls.line, ls.rewritten = l, true
			}
		case st.drop != nil:
			st.drop.apply(ls)
		case st.line != nil:
			if !st.line.Pass(ls.line) {
				return ls, false
			}
		// A stage that gives the line back as it was (decolorize without
		// an escape, a line_format whose template failed) rewrote nothing:
		// EntryLabels.Line stays nil, so a rewritten line is always memory
		// of its own, never the caller's (a search's pooled block), which
		// the server keeps without a copy.
		case st.lineFmt != nil:
			if l := ls.lineFormat(st.lineFmt, ls.line); !sameSlice(l, ls.line) {
				ls.line, ls.rewritten = l, true
			}
		case st.decolor:
			if l := decolorize(ls.line); !sameSlice(l, ls.line) {
				ls.line, ls.rewritten = l, true
			}
		case st.labelFmt != nil:
			ls.labelFormat(st.labelFmt, ls.line)
		case !st.filter.eval(ls):
			return ls, false
		}
	}
	return ls, true
}

// sameSlice reports whether a and b are the same bytes in memory.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// dropStream is LabelSet for a plan of drop and keep stages only: with no
// parser or label filter nothing is extracted and __error__ is never set,
// so a stream label survives when no stage removes it, and nothing is
// allocated when none does.
func (p *Plan) dropStream(stream []Label) ([]Label, bool) {
	removed := func(l Label) bool {
		for _, st := range p.stages {
			if st.drop.removes(l.Name, l.Value) {
				return true
			}
		}
		return false
	}
	for i, l := range stream {
		if !removed(l) {
			continue
		}
		set := append(make([]Label, 0, len(stream)-1), stream[:i]...)
		for _, l := range stream[i+1:] {
			if !removed(l) {
				set = append(set, l)
			}
		}
		slices.SortFunc(set, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
		return set, true
	}
	return nil, false
}

// Labels runs the pipeline on an entry and returns the resulting extracted
// labels (including __error__ and __error_details__ when set and not
// dropped), and whether the entry passed. Stream labels a drop or keep
// removed are not reported: LabelSet gives the whole set.
func (p *Plan) Labels(stream []Label, line []byte) ([]Label, bool) {
	if !p.MatchLine(line) {
		return nil, false
	}
	ls, ok := p.run(stream, nil, line)
	defer ls.release()
	if !ok {
		return nil, false
	}
	out := append([]Label(nil), ls.ext...)
	return ls.appendErr(out), true
}

// appendErr appends __error__ and __error_details__ when set.
func (ls *labelSet) appendErr(out []Label) []Label {
	if ls.err != "" {
		out = append(out, Label{"__error__", ls.err})
	}
	if ls.errDetails != "" {
		out = append(out, Label{"__error_details__", ls.errDetails})
	}
	return out
}

// LabelSet runs the pipeline on an entry and returns whether it passed
// and, when the pipeline changed the entry's labels, its whole label set
// sorted by name: the stream labels no drop or keep removed, the extracted
// labels with a non-empty value (an empty value is no label, as in
// Prometheus), and __error__ and __error_details__ when set. changed is
// false, and set nil, when that set equals the stream's labels, so a
// caller can reuse the stream's text.
func (p *Plan) LabelSet(stream []Label, line []byte) (set []Label, changed, ok bool) {
	l, changed, ok := p.LabelSetAttrs(stream, nil, line)
	return l.All, changed, ok
}

// EntryLabels is an entry's label set after the pipeline, with the part
// that came from its structured metadata, so that a caller can tell the
// origins apart as Loki's categorize-labels responses do (Split).
type EntryLabels struct {
	// All is the whole set, sorted by name (see LabelSet).
	All []Label
	// Meta are the labels of All that come from the entry's structured
	// metadata, sorted by name; a name the stream has carries the suffix
	// _extracted. Nil when there are none.
	Meta []Label
	// Line is the entry's line after a stage rewrote it (line_format,
	// decolorize, unpack's _entry), as Loki returns it; nil when no stage
	// did, or every one that ran gave the line back as it was. When set,
	// it never shares memory with the line passed in. Set whatever
	// changed says of the labels.
	Line []byte
}

// Split divides All by origin, given the stream's labels (the stream
// argument of LabelSetAttrs): the stream labels the pipeline kept, and
// the parsed ones (a parser's keys, __error__ and __error_details__).
// With Meta, they partition All. A metadata or parsed name never equals
// a stream label's (it gets the suffix _extracted), so a label of All
// named like a stream label is that stream label, unless label_format set
// it: one whose value differs from the stream's is counted as parsed.
func (e *EntryLabels) Split(stream []Label) (kept, parsed []Label) {
	for _, l := range e.All {
		switch {
		case l.Name != "__error__" && l.Name != "__error_details__" && slices.Contains(stream, l):
			kept = append(kept, l)
		case !hasName(e.Meta, l.Name):
			parsed = append(parsed, l)
		}
	}
	return kept, parsed
}

func hasName(ls []Label, name string) bool {
	for _, l := range ls {
		if l.Name == name {
			return true
		}
	}
	return false
}

// LabelSetAttrs is LabelSet for an entry with structured metadata
// (package attrs' encoding; empty for none): the metadata's pairs are
// labels of the entry, which label filters, drop and keep see, and which
// the result holds (Loki 3 merges them into each entry's labels). A
// metadata name the stream has gets the suffix _extracted; a parser's key
// of the same name as a metadata label replaces it (Loki's precedence:
// parsed, then metadata, then stream). changed is false, and l empty but
// for Line, when the set equals the stream's labels.
func (p *Plan) LabelSetAttrs(stream []Label, meta, line []byte) (l EntryLabels, changed, ok bool) {
	if !p.MatchLine(line) {
		return l, false, false
	}
	if p.dropOnly && len(meta) == 0 {
		l.All, changed = p.dropStream(stream)
		return l, changed, true
	}
	ls, ok := p.run(stream, meta, line)
	defer ls.release()
	if !ok {
		return l, false, false
	}
	if ls.rewritten {
		l.Line = ls.line
		if l.Line == nil {
			l.Line = []byte{} // rewritten to nothing: still not the stored line
		}
	}
	changed = ls.dropped || ls.err != "" || ls.errDetails != "" || nonEmpty(ls.ext) || nonEmpty(ls.meta)
	if !changed {
		return l, false, true
	}
	set := make([]Label, 0, len(ls.base)+len(ls.meta)+len(ls.ext)+2)
	set = append(set, ls.base...)
	if nonEmpty(ls.meta) {
		// Only an entry with metadata pays for the copy.
		l.Meta = appendNonEmpty(nil, ls.meta)
		set = append(set, l.Meta...)
	}
	set = ls.appendErr(appendNonEmpty(set, ls.ext))
	byName := func(a, b Label) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(set, byName)
	slices.SortFunc(l.Meta, byName)
	l.All = set
	return l, true, true
}

func nonEmpty(ls []Label) bool {
	for _, l := range ls {
		if l.Value != "" {
			return true
		}
	}
	return false
}

// appendNonEmpty appends the labels of ls with a value: an empty value is
// no label, as in Prometheus.
func appendNonEmpty(dst, ls []Label) []Label {
	for _, l := range ls {
		if l.Value != "" {
			dst = append(dst, l)
		}
	}
	return dst
}
