package ingest

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Label is one name="value" pair of a stream's labels.
type Label struct{ Name, Value string }

// Labels are a stream's labels, sorted by name, names unique, values
// non-empty (as in Loki and Prometheus, an empty value means "no such
// label"). ParseLabels and With keep these invariants.
type Labels []Label

// ParseLabels parses labels as given to `hay ingest --stream`: "k=v,k2=v2".
// Blanks around names, values and commas are ignored; a value may be quoted
// with Go syntax ("a,b" or `a,b`) to hold a comma, '}' or edge blanks.
// It also accepts Loki's form {k="v", k2="v2"}, where values must be quoted
// (what Labels.String writes). Names must match [a-zA-Z_][a-zA-Z0-9_]*;
// duplicate names and empty values are errors. Errors name the 1-based
// column. An empty string or "{}" gives no labels.
func ParseLabels(s string) (Labels, error) {
	p := labelParser{s: s}
	return p.parse()
}

// ParsePushLabels is ParseLabels for labels a client pushes: a label with
// an empty value is dropped rather than an error, as Loki and Prometheus
// read it ("no such label"), so that a stream is the same stream whether
// it came as a JSON map (where hay always dropped them) or as text.
func ParsePushLabels(s string) (Labels, error) {
	p := labelParser{s: s, allowEmpty: true}
	ls, err := p.parse()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ls, func(l Label) bool { return l.Value == "" }), nil
}

type labelParser struct {
	s          string
	i          int
	allowEmpty bool // ParsePushLabels: empty values parse (and are dropped)
}

func (p *labelParser) errorf(format string, args ...any) error {
	return fmt.Errorf("labels %q: column %d: "+format, append([]any{p.s, p.i + 1}, args...)...)
}

func (p *labelParser) skipBlanks() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *labelParser) parse() (Labels, error) {
	p.skipBlanks()
	braces := p.i < len(p.s) && p.s[p.i] == '{'
	if braces {
		p.i++
	}
	var ls Labels
	for {
		p.skipBlanks()
		if p.i == len(p.s) {
			if braces {
				return nil, p.errorf("missing closing '}'")
			}
			break
		}
		if braces && p.s[p.i] == '}' {
			p.i++
			p.skipBlanks()
			if p.i != len(p.s) {
				return nil, p.errorf("unexpected %q after '}'", p.s[p.i:])
			}
			break
		}
		if len(ls) > 0 {
			if p.s[p.i] != ',' {
				return nil, p.errorf("expected ',' between labels, found %q", p.s[p.i])
			}
			p.i++
			p.skipBlanks()
			if p.i == len(p.s) || (braces && p.s[p.i] == '}') {
				// A trailing comma, as Prometheus allows.
				continue
			}
		}
		l, err := p.label(braces)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
	}
	slices.SortStableFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	for k := 1; k < len(ls); k++ {
		if ls[k].Name == ls[k-1].Name {
			return nil, fmt.Errorf("labels %q: duplicate label %q", p.s, ls[k].Name)
		}
	}
	return ls, nil
}

// label parses one name=value at p.i.
func (p *labelParser) label(braces bool) (Label, error) {
	start := p.i
	for p.i < len(p.s) && isNameByte(p.s[p.i], p.i == start) {
		p.i++
	}
	if p.i == start {
		if p.i < len(p.s) && isDigit(p.s[p.i]) {
			return Label{}, p.errorf("label name must not start with a digit")
		}
		return Label{}, p.errorf("expected a label name ([a-zA-Z_][a-zA-Z0-9_]*), found %q", p.s[p.i:p.i+1])
	}
	name := p.s[start:p.i]
	p.skipBlanks()
	if p.i == len(p.s) || p.s[p.i] != '=' {
		if p.i < len(p.s) && !isNameByte(p.s[p.i], false) && p.s[p.i] != ',' && p.s[p.i] != '}' {
			return Label{}, p.errorf("invalid character %q in label name %q", p.s[p.i], name)
		}
		return Label{}, p.errorf("expected '=' after label name %q", name)
	}
	p.i++
	p.skipBlanks()
	var value string
	if p.i < len(p.s) && (p.s[p.i] == '"' || p.s[p.i] == '`') {
		v, err := p.quoted()
		if err != nil {
			return Label{}, err
		}
		value = v
	} else {
		if braces {
			if p.i < len(p.s) && p.s[p.i] == '~' {
				return Label{}, p.errorf("label %q: a stream's labels take '=' only, not a matcher", name)
			}
			return Label{}, p.errorf("label %q: value must be quoted inside {}", name)
		}
		vs := p.i
		for p.i < len(p.s) && p.s[p.i] != ',' {
			if p.s[p.i] == '"' || p.s[p.i] == '`' {
				return Label{}, p.errorf("label %q: quote inside an unquoted value", name)
			}
			p.i++
		}
		value = strings.TrimRight(p.s[vs:p.i], " \t")
	}
	if value == "" && !p.allowEmpty {
		return Label{}, p.errorf("label %q has an empty value", name)
	}
	return Label{Name: name, Value: value}, nil
}

// quoted parses a Go string literal at p.i.
func (p *labelParser) quoted() (string, error) {
	start := p.i
	q := p.s[p.i]
	p.i++
	for p.i < len(p.s) && p.s[p.i] != q {
		if q == '"' && p.s[p.i] == '\\' {
			p.i++
		}
		p.i++
	}
	if p.i >= len(p.s) {
		p.i = start
		return "", p.errorf("unterminated quoted value")
	}
	p.i++
	lit := p.s[start:p.i]
	v, err := strconv.Unquote(lit)
	if err != nil {
		p.i = start
		return "", p.errorf("bad quoted value %s: %w", lit, err)
	}
	return v, nil
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || isLetter(c) || (!first && isDigit(c))
}

// validName reports whether name matches [a-zA-Z_][a-zA-Z0-9_]*.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isNameByte(name[i], i == 0) {
			return false
		}
	}
	return true
}

// String returns the canonical Loki form, {a="x", b="y"}: sorted by name,
// values quoted with Go escaping (strconv.Quote). No labels give "{}".
// ParseLabels reads it back.
func (l Labels) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, x := range l {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(x.Name)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(x.Value))
	}
	b.WriteByte('}')
	return b.String()
}

// Get returns the value of the label name, or "" if there is none.
func (l Labels) Get(name string) string {
	i, ok := slices.BinarySearchFunc(l, name, func(x Label, n string) int { return strings.Compare(x.Name, n) })
	if ok {
		return l[i].Value
	}
	return ""
}

// Compare orders label sets as Prometheus' labels.Compare (and Loki's
// series): name, then value, label by label; a prefix first.
func (l Labels) Compare(o Labels) int {
	for i := range min(len(l), len(o)) {
		if c := strings.Compare(l[i].Name, o[i].Name); c != 0 {
			return c
		}
		if c := strings.Compare(l[i].Value, o[i].Value); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(l), len(o))
}

// With returns a sorted copy of l with the label name set to value; an empty
// value removes the label. l itself is not modified. With panics on an
// invalid name, a programming error (names from users go through
// ParseLabels).
func (l Labels) With(name, value string) Labels {
	if !validName(name) {
		panic(fmt.Sprintf("ingest: invalid label name %q", name))
	}
	i, ok := slices.BinarySearchFunc(l, name, func(x Label, n string) int { return strings.Compare(x.Name, n) })
	out := make(Labels, 0, len(l)+1)
	out = append(out, l[:i]...)
	if value != "" {
		out = append(out, Label{Name: name, Value: value})
	}
	if ok {
		i++
	}
	return append(out, l[i:]...)
}

// Equal reports whether l and m hold the same labels.
func (l Labels) Equal(m Labels) bool { return slices.Equal(l, m) }
