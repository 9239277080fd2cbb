package query

import (
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"
)

// Limits on the input. They bound the work a single query can ask for:
// RE2 is linear in the input but its compiled size grows with the pattern.
const (
	MaxQueryLen   = 64 << 10 // bytes of query text
	MaxPatternLen = 4 << 10  // bytes of one regular expression
	maxParenDepth = 64       // nesting of ( ) in label filters
	maxRegexSize  = 20000    // nodes of a regex with counted repetitions expanded
)

// expandedSize estimates the node count of re once counted repetitions are
// expanded, saturating at limit.
func expandedSize(re *syntax.Regexp, limit int) int {
	n := 1
	for _, s := range re.Sub {
		n += expandedSize(s, limit)
		if n >= limit {
			return limit
		}
	}
	if re.Op == syntax.OpRepeat {
		k := re.Max
		if k < re.Min {
			k = re.Min // {n,} expands to n copies and a star
		}
		if k > 1 && n > limit/k {
			return limit
		}
		if k > 1 {
			n *= k
		}
	}
	return min(n, limit)
}

// ParseError is a syntax or validation error in a query.
type ParseError struct {
	Pos int    // byte offset in the query where the problem is
	Msg string // what was expected and what was found
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("query: at byte %d: %s", e.Pos, e.Msg)
}

func errAt(pos int, msg string) *ParseError { return &ParseError{Pos: pos, Msg: msg} }

// unsupportedStages are Loki stages recognised only to be refused with a
// clear message.
var unsupportedStages = map[string]bool{
	"unwrap": true, "ip": true,
}

// stageNames lists the stages a "|" may start, for error messages.
const stageNames = "json, logfmt, regexp, pattern, unpack, line_format, label_format, decolorize, drop, keep or a label filter"

type parser struct {
	lex   lexer
	tok   token // current token
	depth int
}

// Parse parses a LogQL log query. The error, if any, is a *ParseError.
func Parse(src string) (*Query, error) {
	if len(src) > MaxQueryLen {
		return nil, errAt(MaxQueryLen, fmt.Sprintf("query is %d bytes, longer than the limit of %d", len(src), MaxQueryLen))
	}
	p := &parser{lex: lexer{src: src}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	q := &Query{}
	sel, err := p.selector()
	if err != nil {
		return nil, err
	}
	q.Selector = sel
	for p.tok.kind != tEOF {
		st, err := p.stage()
		if err != nil {
			return nil, err
		}
		q.Stages = append(q.Stages, st)
	}
	return q, nil
}

func (p *parser) advance() error {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) expected(what string) error {
	return errAt(p.tok.pos, "expected "+what+", got "+p.tok.describe())
}

// selector = "{" matcher { "," matcher } "}" .
func (p *parser) selector() ([]*Matcher, error) {
	if p.tok.kind != tLBrace {
		return nil, p.expected("a stream selector starting with {")
	}
	open := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	var ms []*Matcher
	for {
		if p.tok.kind == tRBrace && len(ms) == 0 {
			return nil, errAt(p.tok.pos, "expected a label matcher such as app=\"api\", got \"}\": a selector needs at least one")
		}
		m, err := p.matcher("in stream selector")
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
		if p.tok.kind == tComma {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if p.tok.kind != tRBrace {
			return nil, p.expected("\",\" or \"}\" in stream selector")
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		break
	}
	// Loki refuses selectors that would select every stream.
	for _, m := range ms {
		if !matcherMatchesEmpty(m) {
			return ms, nil
		}
	}
	return nil, errAt(open, "stream selector needs at least one matcher that does not match the empty value (app=~\".*\" does not qualify, app=~\".+\" does)")
}

// matcherMatchesEmpty reports whether m accepts a missing or empty label.
// m's regex, if any, has been validated.
func matcherMatchesEmpty(m *Matcher) bool {
	switch m.Type {
	case MatchEqual:
		return m.Value == ""
	case MatchNotEqual:
		return m.Value != ""
	}
	re, err := compileAnchored(m.Value, m.Pos)
	if err != nil {
		return true // reported when the matcher is compiled
	}
	return re.MatchString("") == (m.Type == MatchRegexp)
}

// compileAnchored compiles a validated label-matcher regex, fully anchored.
func compileAnchored(v string, pos int) (*regexp.Regexp, error) {
	re, err := regexp.Compile(anchored(v))
	if err != nil {
		return nil, errAt(pos, "invalid regular expression: "+err.Error())
	}
	return re, nil
}

// anchored wraps a label-matcher regex so that it must match the whole
// value, as Prometheus does. Parsing the pattern first (checkRegex) makes
// the wrapping safe: a valid pattern cannot close the group early, and \Q
// without \E is refused there.
func anchored(re string) string { return "^(?:" + re + ")$" }

func (p *parser) matcher(where string) (*Matcher, error) {
	if p.tok.kind != tIdent {
		return nil, p.expected("a label name " + where)
	}
	m := &Matcher{Name: p.tok.text, Pos: p.tok.pos}
	if err := p.advance(); err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case tEq:
		m.Type = MatchEqual
	case tNeq:
		m.Type = MatchNotEqual
	case tRe:
		m.Type = MatchRegexp
	case tNre:
		m.Type = MatchNotRegexp
	default:
		return nil, p.expected("=, !=, =~ or !~ after label " + strconv.Quote(m.Name))
	}
	op := p.tok.text
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tString {
		return nil, p.expected("a string after " + op)
	}
	m.Value = p.tok.val
	if m.Type == MatchRegexp || m.Type == MatchNotRegexp {
		if err := checkRegex(m.Value, p.tok.pos, false); err != nil {
			return nil, err
		}
	}
	return m, p.advance()
}

// checkRegex validates a pattern against the length cap and RE2's syntax.
// dotNL is the flag line filters use.
func checkRegex(re string, pos int, dotNL bool) error {
	if len(re) > MaxPatternLen {
		return errAt(pos, fmt.Sprintf("regular expression is %d bytes, longer than the limit of %d", len(re), MaxPatternLen))
	}
	if unterminatedQuote(re) {
		// Unterminated \Q...: valid RE2, but it would swallow the group we
		// wrap around label-matcher patterns. Require the \E.
		return errAt(pos, "invalid regular expression: \\Q without \\E")
	}
	flags := syntax.Perl
	if dotNL {
		flags |= syntax.DotNL
	}
	parsed, err := syntax.Parse(re, flags)
	if err != nil {
		return errAt(pos, "invalid regular expression: "+err.Error())
	}
	if n := expandedSize(parsed, maxRegexSize+1); n > maxRegexSize {
		// Nested counted repetitions (a{1000}){1000} are short to write
		// but expand to millions of states.
		return errAt(pos, fmt.Sprintf("regular expression too complex: its repetitions expand to more than %d nodes", maxRegexSize))
	}
	if _, err := regexp.Compile(re); err != nil {
		return errAt(pos, "invalid regular expression: "+err.Error())
	}
	return nil
}

// unterminatedQuote reports whether re has a \Q with no \E after it.
func unterminatedQuote(re string) bool {
	for i := 0; i < len(re); i++ {
		if re[i] != '\\' {
			continue
		}
		if i+1 < len(re) && re[i+1] == 'Q' {
			end := strings.Index(re[i+2:], `\E`)
			if end < 0 {
				return true
			}
			i += 2 + end + 1
			continue
		}
		i++ // skip the escaped byte
	}
	return false
}

func (p *parser) stage() (Stage, error) {
	switch p.tok.kind {
	case tPipeEq, tNeq, tPipeTilde, tNre:
		return p.lineFilter()
	case tPattern:
		return nil, errAt(p.tok.pos, "pattern line filters ("+p.tok.text+") are not supported: expected |=, !=, |~ or !~")
	case tPipe:
	default:
		return nil, p.expected("|, |=, !=, |~ or !~")
	}
	pipe := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tIdent {
		// A keyword followed by an operator is a label named like it,
		// except that != and !~ after a stage that takes no argument
		// start a line filter, as |= does (Loki reserves the keywords:
		// `| json != "x"` is the json stage then a line filter, like
		// `| logfmt --strict != "x"`).
		name, pos := p.tok.text, p.tok.pos
		save := *p
		if err := p.advance(); err != nil {
			return nil, err
		}
		bare := name == "json" || name == "logfmt" || name == "unpack" || name == "decolorize"
		if !isLabelOp(p.tok.kind) || bare && (p.tok.kind == tNeq || p.tok.kind == tNre) {
			switch {
			case name == "json":
				st := &ParserStage{Kind: ParserJSON, Pos: pos}
				return st, p.extractParams(st)
			case name == "logfmt":
				return p.logfmtFlags(pos)
			case name == "regexp", name == "pattern":
				return p.exprParser(name, pos)
			case name == "unpack":
				return &ParserStage{Kind: ParserUnpack, Pos: pos}, nil
			case name == "decolorize":
				return &DecolorizeStage{Pos: pos}, nil
			case name == "line_format":
				if p.tok.kind != tString {
					return nil, p.expected("a template string after line_format")
				}
				st := &LineFormatStage{Template: p.tok.val, Pos: pos}
				if _, err := compileTemplate(st.Template, p.tok.pos); err != nil {
					return nil, err
				}
				return st, p.advance()
			case name == "label_format":
				return p.labelFormat(pos)
			case name == "drop", name == "keep":
				return p.dropStage(name == "keep", pos)
			case unsupportedStages[name]:
				return nil, errAt(pos, "the "+name+" stage is not supported: expected "+stageNames)
			}
		}
		*p = save
	}
	if p.tok.kind != tIdent && p.tok.kind != tLParen {
		return nil, errAt(p.tok.pos, "expected "+stageNames+" after | at byte "+strconv.Itoa(pipe)+", got "+p.tok.describe())
	}
	pos := p.tok.pos
	e, err := p.labelExpr()
	if err != nil {
		return nil, err
	}
	return &LabelFilter{Expr: e, Pos: pos}, nil
}

func isLabelOp(k tokKind) bool {
	switch k {
	case tEq, tEqEq, tNeq, tRe, tNre, tGt, tGe, tLt, tLe:
		return true
	}
	return false
}

func (p *parser) logfmtFlags(pos int) (Stage, error) {
	st := &ParserStage{Kind: ParserLogfmt, Pos: pos}
	for p.tok.kind == tFlag {
		switch p.tok.text {
		case "--strict":
			st.Strict = true
		case "--keep-empty":
			st.KeepEmpty = true
		default:
			return nil, errAt(p.tok.pos, "unknown logfmt flag "+p.tok.text+": expected --strict or --keep-empty")
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	return st, p.extractParams(st)
}

// extractParams reads json's or logfmt's optional parameters,
// Ident [ "=" String ] { "," Ident [ "=" String ] }; the keyword and
// flags have been read.
func (p *parser) extractParams(st *ParserStage) error {
	kw := "json"
	if st.Kind == ParserLogfmt {
		kw = "logfmt"
	}
	if p.tok.kind != tIdent {
		return nil
	}
	for {
		if p.tok.kind != tIdent {
			return p.expected("a label name after " + kw + "'s \",\"")
		}
		x := &ExtractParam{Name: p.tok.text, Path: p.tok.text, Pos: p.tok.pos}
		pathPos := x.Pos
		if err := p.advance(); err != nil {
			return err
		}
		if p.tok.kind == tEq {
			if err := p.advance(); err != nil {
				return err
			}
			if p.tok.kind != tString {
				return p.expected("a quoted " + kw + " expression after " + x.Name + "=")
			}
			x.Path, pathPos = p.tok.val, p.tok.pos
			if err := p.advance(); err != nil {
				return err
			}
		}
		if err := checkParamPath(st.Kind, x.Path, pathPos); err != nil {
			return err
		}
		if x.Name == "__error__" || x.Name == "__error_details__" {
			return errAt(x.Pos, kw+" cannot extract into "+x.Name+": only the pipeline sets it")
		}
		for _, y := range st.Params {
			if y.Name == x.Name {
				return errAt(x.Pos, "label "+strconv.Quote(x.Name)+" named twice in "+kw)
			}
		}
		st.Params = append(st.Params, x)
		if p.tok.kind != tComma {
			return nil
		}
		if err := p.advance(); err != nil {
			return err
		}
	}
}

// exprParser reads the string of `regexp "re"` or `pattern "expr"` and
// validates it; the keyword has been read.
func (p *parser) exprParser(name string, pos int) (Stage, error) {
	if p.tok.kind != tString {
		return nil, p.expected("a quoted expression after " + name)
	}
	st := &ParserStage{Kind: ParserRegexp, Expr: p.tok.val, Pos: pos}
	if name == "pattern" {
		st.Kind = ParserPattern
		if _, err := compilePattern(st.Expr, p.tok.pos); err != nil {
			return nil, err
		}
	} else if _, _, err := compileRegexpParser(st.Expr, p.tok.pos); err != nil {
		return nil, err
	}
	return st, p.advance()
}

// labelFormat = "label_format" Ident "=" ( Ident | String ) { "," ... } ;
// the keyword has been read.
func (p *parser) labelFormat(pos int) (Stage, error) {
	st := &LabelFormatStage{Pos: pos}
	for {
		if p.tok.kind != tIdent {
			return nil, p.expected("a label name after label_format")
		}
		f := &LabelFormat{Name: p.tok.text, Pos: p.tok.pos}
		if !validLabelName(f.Name) {
			return nil, errAt(f.Pos, "label_format: "+strconv.Quote(f.Name)+" is not a valid label name")
		}
		if f.Name == "__error__" || f.Name == "__error_details__" {
			return nil, errAt(f.Pos, "label_format cannot set "+f.Name+": only the pipeline sets it")
		}
		for _, g := range st.Labels {
			if g.Name == f.Name {
				return nil, errAt(f.Pos, "label "+strconv.Quote(f.Name)+" named twice in label_format")
			}
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tEq {
			return nil, p.expected("= after label_format's label " + strconv.Quote(f.Name))
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		switch p.tok.kind {
		case tIdent:
			f.Value, f.Rename = p.tok.text, true
		case tString:
			f.Value = p.tok.val
			if _, err := compileTemplate(f.Value, p.tok.pos); err != nil {
				return nil, err
			}
		default:
			return nil, p.expected("a label name or a quoted template after " + f.Name + "=")
		}
		st.Labels = append(st.Labels, f)
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tComma {
			return st, nil
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
}

// dropStage = ( "drop" | "keep" ) dropLabel { "," dropLabel } ,
// dropLabel = Ident [ MatchOp String ] ; the keyword has been read.
func (p *parser) dropStage(keep bool, pos int) (Stage, error) {
	kw := "drop"
	if keep {
		kw = "keep"
	}
	st := &DropStage{Keep: keep, Pos: pos}
	for {
		if p.tok.kind != tIdent {
			return nil, p.expected("a label name after " + kw)
		}
		save := *p
		if err := p.advance(); err != nil {
			return nil, err
		}
		switch k := p.tok.kind; {
		case k == tEq || k == tNeq || k == tRe || k == tNre:
			*p = save
			m, err := p.matcher("in " + kw)
			if err != nil {
				return nil, err
			}
			st.Labels = append(st.Labels, &DropLabel{Matcher: *m})
		case isLabelOp(k):
			return nil, errAt(p.tok.pos, kw+" takes label names and the matchers =, !=, =~ and !~, got "+p.tok.describe())
		default:
			st.Labels = append(st.Labels, &DropLabel{Matcher: Matcher{Name: save.tok.text, Pos: save.tok.pos}, Any: true})
		}
		if p.tok.kind != tComma {
			return st, nil
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
}

// lineFilter = op string { "or" string } .
func (p *parser) lineFilter() (Stage, error) {
	f := &LineFilter{Pos: p.tok.pos}
	switch p.tok.kind {
	case tPipeEq:
		f.Op = FilterContains
	case tNeq:
		f.Op = FilterNotContains
	case tPipeTilde:
		f.Op = FilterRegexp
	case tNre:
		f.Op = FilterNotRegexp
	}
	op := p.tok.text
	if err := p.advance(); err != nil {
		return nil, err
	}
	for {
		if p.tok.kind != tString {
			if p.tok.kind == tIdent && p.tok.text == "ip" {
				return nil, errAt(p.tok.pos, "ip() line filters are not supported: expected a string after "+op)
			}
			return nil, p.expected("a string after " + op)
		}
		if f.Op.IsRegexp() {
			if err := checkRegex(p.tok.val, p.tok.pos, true); err != nil {
				return nil, err
			}
		}
		f.Values = append(f.Values, p.tok.val)
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tIdent || p.tok.text != "or" {
			return f, nil
		}
		op = "or"
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
}

// labelExpr = labelTerm { ( "and" | "or" | "," | ) labelTerm } ,
// folded left to right as Loki documents: a or b and c == (a or b) and c.
func (p *parser) labelExpr() (LabelExpr, error) {
	left, err := p.labelTerm()
	if err != nil {
		return nil, err
	}
	for {
		or := false
		switch {
		case p.tok.kind == tIdent && p.tok.text == "or":
			or = true
			if err := p.advance(); err != nil {
				return nil, err
			}
		case p.tok.kind == tIdent && p.tok.text == "and", p.tok.kind == tComma:
			if err := p.advance(); err != nil {
				return nil, err
			}
		case p.tok.kind == tIdent, p.tok.kind == tLParen:
			// juxtaposition means and
		default:
			return left, nil
		}
		right, err := p.labelTerm()
		if err != nil {
			return nil, err
		}
		left = &LabelBinary{Or: or, L: left, R: right}
	}
}

func (p *parser) labelTerm() (LabelExpr, error) {
	if p.tok.kind == tLParen {
		if p.depth >= maxParenDepth {
			return nil, errAt(p.tok.pos, "label filter nested too deeply")
		}
		p.depth++
		if err := p.advance(); err != nil {
			return nil, err
		}
		e, err := p.labelExpr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.expected("\")\" or and/or in label filter")
		}
		p.depth--
		return e, p.advance()
	}
	if p.tok.kind != tIdent {
		return nil, p.expected("a label name or ( in label filter")
	}
	if p.tok.text == "and" || p.tok.text == "or" {
		return nil, p.expected("a label name in label filter")
	}
	name, pos := p.tok.text, p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	opTok := p.tok
	if !isLabelOp(opTok.kind) {
		return nil, p.expected("an operator (=, !=, =~, !~, ==, >, >=, <, <=) after label " + strconv.Quote(name))
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case tString:
		m := &LabelMatch{Matcher{Name: name, Value: p.tok.val, Pos: pos}}
		switch opTok.kind {
		case tEq, tEqEq:
			m.Type = MatchEqual
		case tNeq:
			m.Type = MatchNotEqual
		case tRe:
			m.Type = MatchRegexp
		case tNre:
			m.Type = MatchNotRegexp
		default:
			return nil, errAt(opTok.pos, opTok.text+" needs a number, duration or bytes value, got "+p.tok.describe())
		}
		if m.Type == MatchRegexp || m.Type == MatchNotRegexp {
			if err := checkRegex(m.Value, p.tok.pos, false); err != nil {
				return nil, err
			}
		}
		return m, p.advance()
	case tNumber:
		c := &LabelCompare{Name: name, Text: p.tok.text, Pos: pos}
		switch opTok.kind {
		case tEq, tEqEq:
			c.Op = CmpEq
		case tNeq:
			c.Op = CmpNe
		case tGt:
			c.Op = CmpGt
		case tGe:
			c.Op = CmpGe
		case tLt:
			c.Op = CmpLt
		case tLe:
			c.Op = CmpLe
		default:
			return nil, errAt(opTok.pos, opTok.text+" needs a string value, got "+p.tok.describe())
		}
		kind, v, ok := parseTypedValue(p.tok.text)
		if !ok {
			return nil, errAt(p.tok.pos, "expected a number, duration (10s) or bytes (20MB) value, got "+strconv.Quote(p.tok.text))
		}
		c.Kind, c.Value = kind, v
		return c, p.advance()
	}
	return nil, p.expected("a string or number after " + opTok.text)
}

// parseTypedValue classifies a literal: plain number, Go duration, or bytes
// with a unit.
func parseTypedValue(s string) (ValueKind, float64, bool) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && isPlainNumber(s) {
		return KindNumber, f, true
	}
	if d, err := time.ParseDuration(s); err == nil {
		return KindDuration, d.Seconds(), true
	}
	if b, ok := parseBytes(s, false); ok {
		return KindBytes, b, true
	}
	return 0, 0, false
}

// isPlainNumber accepts -?digits[.digits]: ParseFloat alone would take
// "Inf", "0x1p3" and "1e3", which are not LogQL numbers.
func isPlainNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasDot := strings.Cut(s, ".")
	if intPart == "" || (hasDot && frac == "") {
		return false
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if !isDigit(part[i]) {
				return false
			}
		}
	}
	return true
}

var byteUnits = map[string]float64{
	"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15, "eb": 1e18,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50, "eib": 1 << 60,
	// forms without the B, as humanized sizes often print them
	"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15, "e": 1e18,
	"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40, "pi": 1 << 50, "ei": 1 << 60,
}

// parseBytes parses "42MB", "1.5KiB", "20B" (units case-insensitive, as
// humanized sizes are). With bare, a plain number is a count of bytes and a
// space may separate number and unit: that is the form label values take.
func parseBytes(s string, bare bool) (float64, bool) {
	i := 0
	if strings.HasPrefix(s, "-") {
		i++ // Number = [ "-" ] Digits [ "." Digits ] (isPlainNumber checks)
	}
	for i < len(s) && (isDigit(s[i]) || s[i] == '.') {
		i++
	}
	num, unit := s[:i], s[i:]
	if bare {
		unit = strings.TrimLeft(unit, " ")
	}
	if !isPlainNumber(num) {
		return 0, false
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, false
	}
	if unit == "" {
		return f, bare
	}
	mult, ok := byteUnits[strings.ToLower(unit)]
	if !ok || (!bare && !strings.HasSuffix(strings.ToLower(unit), "b")) {
		// In a query "10m" is a duration and "10k" or "10Ki" is not a
		// LogQL bytes literal; only label values get the unit-without-B
		// forms.
		return 0, false
	}
	v := f * mult
	if math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}
