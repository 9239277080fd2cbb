package query

import (
	"regexp"
	"strconv"
	"strings"
)

// Query is a parsed LogQL log query: a stream selector and a pipeline of
// stages applied left to right.
type Query struct {
	// Selector holds the stream matchers, ANDed. Parse always fills it;
	// FromGrep leaves it empty, which selects every stream.
	Selector []*Matcher
	Stages   []Stage
}

// MatchType is the operator of a label matcher.
type MatchType int

// The label matching operators, as in Prometheus.
const (
	MatchEqual     MatchType = iota // =
	MatchNotEqual                   // !=
	MatchRegexp                     // =~ (fully anchored)
	MatchNotRegexp                  // !~ (fully anchored)
)

func (t MatchType) String() string {
	switch t {
	case MatchEqual:
		return "="
	case MatchNotEqual:
		return "!="
	case MatchRegexp:
		return "=~"
	case MatchNotRegexp:
		return "!~"
	}
	return "?"
}

// Matcher is one label matcher, in a stream selector or a label filter.
type Matcher struct {
	Name  string
	Type  MatchType
	Value string
	Pos   int // byte offset of Name in the query
}

func (m *Matcher) String() string {
	return m.Name + m.Type.String() + strconv.Quote(m.Value)
}

// Stage is one pipeline stage: *LineFilter, *ParserStage, *LabelFilter,
// *DropStage, *LineFormatStage, *LabelFormatStage or *DecolorizeStage.
type Stage interface {
	String() string
	stage()
}

// FilterOp is the operator of a line filter.
type FilterOp int

// The line filter operators.
const (
	FilterContains    FilterOp = iota // |=
	FilterNotContains                 // !=
	FilterRegexp                      // |~ (unanchored)
	FilterNotRegexp                   // !~ (unanchored)
)

func (op FilterOp) String() string {
	switch op {
	case FilterContains:
		return "|="
	case FilterNotContains:
		return "!="
	case FilterRegexp:
		return "|~"
	case FilterNotRegexp:
		return "!~"
	}
	return "?"
}

// Negated reports whether op keeps the lines that do not match.
func (op FilterOp) Negated() bool { return op == FilterNotContains || op == FilterNotRegexp }

// IsRegexp reports whether op's operands are regular expressions.
func (op FilterOp) IsRegexp() bool { return op == FilterRegexp || op == FilterNotRegexp }

// LineFilter is `OP "a" or "b" ...`. For the positive operators a line
// passes when any value matches; for the negated ones when none does
// (`!= "a" or "b"` keeps lines containing neither).
type LineFilter struct {
	Op     FilterOp
	Values []string // at least one
	Pos    int      // byte offset of the operator

	// FoldASCII makes the literal operators (|= and !=) match ASCII
	// letters of either case, and every other byte exactly, as grep -F -i
	// does in the C locale. LogQL has no syntax for it: only FromGrep sets
	// it (String shows it as the nearest LogQL, a (?i) regex, which also
	// folds non-ASCII letters).
	FoldASCII bool
}

func (*LineFilter) stage() {}

func (f *LineFilter) String() string {
	var b strings.Builder
	op := f.Op
	fold := f.FoldASCII && !op.IsRegexp()
	if fold {
		op = FilterRegexp
		if op.Negated() != f.Op.Negated() {
			op = FilterNotRegexp
		}
	}
	b.WriteString(op.String())
	for i, v := range f.Values {
		if i > 0 {
			b.WriteString(" or")
		}
		b.WriteByte(' ')
		if fold {
			v = "(?i)" + regexp.QuoteMeta(v)
		}
		b.WriteString(strconv.Quote(v))
	}
	return b.String()
}

// ParserKind names a parser stage.
type ParserKind int

// The supported parsers. All of them only add labels (they never drop a
// line); unpack also replaces the line with its _entry key.
const (
	ParserJSON ParserKind = iota
	ParserLogfmt
	ParserRegexp  // | regexp "re": the named groups of the first match
	ParserPattern // | pattern "<a> - <b>": Loki's pattern expressions
	ParserUnpack  // | unpack: Promtail's packed JSON
)

// ParserStage is `| json [params]`, `| logfmt [--strict] [--keep-empty]
// [params]`, `| regexp "re"`, `| pattern "expr"` or `| unpack`.
type ParserStage struct {
	Kind      ParserKind
	Strict    bool // logfmt only: stop at the first malformed pair
	KeepEmpty bool // logfmt only: keep standalone keys with value ""
	// Expr is the regular expression (regexp) or pattern expression
	// (pattern).
	Expr string
	// Params, for json and logfmt, extract only the labels they name
	// (`| json first="servers[0]", ua`); none extracts every key.
	Params []*ExtractParam
	Pos    int // byte offset of the parser name
}

// ExtractParam is one extraction parameter of json or logfmt: label Name
// gets the value at Path (a JSON path such as a.b[0] or a["x y"], or a
// logfmt key). A bare name is its own path.
type ExtractParam struct {
	Name string
	Path string
	Pos  int // byte offset of Name
}

func (*ParserStage) stage() {}

func (p *ParserStage) String() string {
	var s string
	switch p.Kind {
	case ParserJSON:
		s = "| json"
	case ParserLogfmt:
		s = "| logfmt"
		if p.Strict {
			s += " --strict"
		}
		if p.KeepEmpty {
			s += " --keep-empty"
		}
	case ParserRegexp:
		return "| regexp " + strconv.Quote(p.Expr)
	case ParserPattern:
		return "| pattern " + strconv.Quote(p.Expr)
	case ParserUnpack:
		return "| unpack"
	}
	for i, x := range p.Params {
		if i > 0 {
			s += ","
		}
		s += " " + x.Name + "=" + strconv.Quote(x.Path)
	}
	return s
}

// LineFormatStage is `| line_format "template"`: the line becomes the Go
// text/template's output over the entry's labels (see doc.go for the
// functions). Later line filters test the new line.
type LineFormatStage struct {
	Template string
	Pos      int // byte offset of the keyword
}

func (*LineFormatStage) stage() {}

func (l *LineFormatStage) String() string { return "| line_format " + strconv.Quote(l.Template) }

// LabelFormatStage is `| label_format dst=src, dst2="template", ...`.
type LabelFormatStage struct {
	Labels []*LabelFormat // at least one, distinct Names
	Pos    int            // byte offset of the keyword
}

// LabelFormat is one operand of label_format: with Rename, label Name
// takes the value of label Value, which is removed; otherwise Name gets
// the output of the template Value.
type LabelFormat struct {
	Name   string
	Value  string
	Rename bool
	Pos    int // byte offset of Name
}

func (*LabelFormatStage) stage() {}

func (l *LabelFormatStage) String() string {
	var b strings.Builder
	b.WriteString("| label_format")
	for i, f := range l.Labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte(' ')
		b.WriteString(f.Name)
		b.WriteByte('=')
		if f.Rename {
			b.WriteString(f.Value)
		} else {
			b.WriteString(strconv.Quote(f.Value))
		}
	}
	return b.String()
}

// DecolorizeStage is `| decolorize`: ANSI escape sequences (colours) are
// removed from the line.
type DecolorizeStage struct {
	Pos int
}

func (*DecolorizeStage) stage() {}

func (*DecolorizeStage) String() string { return "| decolorize" }

// LabelFilter is `| <label filter expression>`.
type LabelFilter struct {
	Expr LabelExpr
	Pos  int // byte offset of the expression
}

func (*LabelFilter) stage() {}

func (f *LabelFilter) String() string { return "| " + f.Expr.String() }

// DropStage is `| drop a, b="v", ...` or, with Keep, `| keep ...`. drop
// removes the labels it names from the entry's label set; keep removes
// every label it does not name, except __error__ and __error_details__
// (only drop removes those). A bare name selects the label whatever its
// value; a matcher selects it only when its value matches. Neither
// filters lines.
type DropStage struct {
	Keep   bool
	Labels []*DropLabel // at least one
	Pos    int          // byte offset of the keyword
}

func (*DropStage) stage() {}

func (d *DropStage) String() string {
	var b strings.Builder
	if d.Keep {
		b.WriteString("| keep")
	} else {
		b.WriteString("| drop")
	}
	for i, l := range d.Labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte(' ')
		b.WriteString(l.String())
	}
	return b.String()
}

// DropLabel is one operand of drop or keep: with Any, the label named
// Name whatever its value; otherwise the label when Matcher matches its
// value (a label the entry does not have is never selected).
type DropLabel struct {
	Matcher
	Any bool
}

func (l *DropLabel) String() string {
	if l.Any {
		return l.Name
	}
	return l.Matcher.String()
}

// LabelExpr is a label filter expression: *LabelBinary, *LabelMatch or
// *LabelCompare.
type LabelExpr interface {
	String() string
	labelExpr()
}

// LabelBinary is `L and R` or `L or R`, evaluated left to right with
// short-circuit.
type LabelBinary struct {
	Or   bool // false: and
	L, R LabelExpr
}

func (*LabelBinary) labelExpr() {}

func (b *LabelBinary) String() string {
	op := " and "
	if b.Or {
		op = " or "
	}
	return "(" + b.L.String() + op + b.R.String() + ")"
}

// LabelMatch is a string predicate on a label, with Prometheus matcher
// semantics: a missing label has the value "", regexes are fully anchored.
type LabelMatch struct {
	Matcher
}

func (*LabelMatch) labelExpr() {}

func (m *LabelMatch) String() string { return m.Matcher.String() }

// CmpOp is a numeric comparison operator.
type CmpOp int

// The comparison operators of numeric, duration and bytes predicates.
const (
	CmpEq CmpOp = iota // == (also written =)
	CmpNe              // !=
	CmpGt              // >
	CmpGe              // >=
	CmpLt              // <
	CmpLe              // <=
)

func (op CmpOp) String() string {
	return [...]string{"==", "!=", ">", ">=", "<", "<="}[op]
}

// ValueKind is how a comparison converts the label value.
type ValueKind int

// The typed values of a comparison.
const (
	KindNumber   ValueKind = iota // strconv.ParseFloat
	KindDuration                  // time.ParseDuration, compared in seconds
	KindBytes                     // "42MB", "1.5KiB", compared in bytes
)

// LabelCompare is `name OP value` with a number, duration or bytes value.
// The label value is converted the same way; a failed conversion keeps the
// line and sets __error__, a missing label drops it (Loki's semantics).
type LabelCompare struct {
	Name  string
	Op    CmpOp
	Kind  ValueKind
	Value float64 // seconds for durations, bytes for sizes
	Text  string  // the literal as written
	Pos   int
}

func (*LabelCompare) labelExpr() {}

func (c *LabelCompare) String() string { return c.Name + c.Op.String() + c.Text }

// String renders q as LogQL that parses back to an equal query.
func (q *Query) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range q.Selector {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.String())
	}
	b.WriteByte('}')
	for _, s := range q.Stages {
		b.WriteByte(' ')
		b.WriteString(s.String())
	}
	return b.String()
}
