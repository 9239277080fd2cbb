// Package metricstest parses the Prometheus text exposition format
// (version 0.0.4) strictly, so tests can check that a /metrics body is
// valid and look at what it exports without depending on
// prometheus/common.
//
// Beyond the line syntax it checks what a scraper relies on: HELP and TYPE
// at most once per family and before its samples, the samples of a family
// contiguous, sample names matching the family's type (_bucket, _sum,
// _count), no duplicate series, histogram buckets with increasing le,
// cumulative counts and a +Inf bucket equal to _count, and valid UTF-8.
// It is stricter than Prometheus in two ways, both things the writer under
// test never produces: comments other than HELP and TYPE, and families with
// metadata but no samples, are rejected.
package metricstest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Family is one metric family.
type Family struct {
	Name, Help, Type string // Type is "untyped" when no TYPE line was given
	HasHelp, HasType bool
	Samples          []Sample
}

// Sample is one sample line.
type Sample struct {
	Name   string
	Labels []Label // in the order written
	Value  float64
	// HasTimestamp and Timestamp (milliseconds) are set by an optional
	// trailing timestamp.
	HasTimestamp bool
	Timestamp    int64
}

// Label is one label pair, its value unescaped.
type Label struct{ Name, Value string }

// Get returns the value of the named label and whether it is present.
func (s Sample) Get(name string) (string, bool) {
	for _, l := range s.Labels {
		if l.Name == name {
			return l.Value, true
		}
	}
	return "", false
}

// Parse parses a whole exposition and checks it (see the package doc).
func Parse(text string) ([]Family, error) {
	if !utf8.ValidString(text) {
		return nil, errors.New("not valid UTF-8")
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		return nil, errors.New("last line does not end in a newline")
	}
	p := parser{seen: map[string]bool{}}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if text == "" {
		lines = nil
	}
	for i, line := range lines {
		if err := p.line(line); err != nil {
			return nil, fmt.Errorf("line %d: %w: %q", i+1, err, line)
		}
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.fams, nil
}

type parser struct {
	fams []Family
	seen map[string]bool // family names started
}

func (p *parser) cur() *Family {
	if len(p.fams) == 0 {
		return nil
	}
	return &p.fams[len(p.fams)-1]
}

// family returns the family called name: the current one, or a new one
// after checking the current one is complete.
func (p *parser) family(name string) (*Family, error) {
	if f := p.cur(); f != nil && f.Name == name {
		return f, nil
	}
	if p.seen[name] {
		return nil, fmt.Errorf("family %s appears again after other families", name)
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	p.seen[name] = true
	p.fams = append(p.fams, Family{Name: name, Type: "untyped"})
	return p.cur(), nil
}

func (p *parser) line(line string) error {
	if line == "" {
		return errors.New("empty line")
	}
	if rest, ok := strings.CutPrefix(line, "#"); ok {
		return p.comment(rest)
	}
	s, err := parseSample(line)
	if err != nil {
		return err
	}
	fname, err := p.familyOf(s)
	if err != nil {
		return err
	}
	f, err := p.family(fname)
	if err != nil {
		return err
	}
	if err := checkSampleName(f, s); err != nil {
		return err
	}
	f.Samples = append(f.Samples, s)
	return nil
}

// familyOf returns the family a sample belongs to: the current family if
// its type claims the name, else the sample's own name.
func (p *parser) familyOf(s Sample) (string, error) {
	if f := p.cur(); f != nil {
		switch f.Type {
		case "histogram":
			if s.Name == f.Name+"_bucket" || s.Name == f.Name+"_sum" || s.Name == f.Name+"_count" {
				return f.Name, nil
			}
		case "summary":
			if s.Name == f.Name || s.Name == f.Name+"_sum" || s.Name == f.Name+"_count" {
				return f.Name, nil
			}
		}
	}
	return s.Name, nil
}

func checkSampleName(f *Family, s Sample) error {
	_, hasLe := s.Get("le")
	_, hasQ := s.Get("quantile")
	switch f.Type {
	case "counter", "gauge", "untyped":
		if s.Name != f.Name {
			return fmt.Errorf("sample %s in family %s", s.Name, f.Name)
		}
	case "histogram":
		if s.Name == f.Name+"_bucket" && !hasLe {
			return errors.New("histogram bucket without le")
		}
		if s.Name != f.Name+"_bucket" && hasLe {
			return errors.New("le label outside a bucket")
		}
	case "summary":
		if s.Name == f.Name && !hasQ {
			return errors.New("summary quantile without quantile label")
		}
		if s.Name != f.Name && hasQ {
			return errors.New("quantile label on summary _sum or _count")
		}
	}
	for _, ss := range f.Samples {
		if ss.Name == s.Name && slices.Equal(sortedLabels(ss.Labels), sortedLabels(s.Labels)) {
			return errors.New("duplicate series")
		}
	}
	return nil
}

func sortedLabels(l []Label) []Label {
	l = slices.Clone(l)
	slices.SortFunc(l, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	return l
}

func (p *parser) comment(rest string) error {
	rest, ok := strings.CutPrefix(rest, " ")
	if !ok {
		return errors.New("comment other than HELP or TYPE")
	}
	what, rest, ok := strings.Cut(rest, " ")
	if !ok || (what != "HELP" && what != "TYPE") {
		return errors.New("comment other than HELP or TYPE")
	}
	name, arg, ok := strings.Cut(rest, " ")
	if !ok {
		return fmt.Errorf("%s without text", what)
	}
	if !validMetricName(name) {
		return fmt.Errorf("invalid metric name %q", name)
	}
	f, err := p.family(name)
	if err != nil {
		return err
	}
	if len(f.Samples) > 0 {
		return fmt.Errorf("%s after samples of %s", what, name)
	}
	if what == "HELP" {
		if f.HasHelp {
			return errors.New("second HELP")
		}
		h, err := unescape(arg, false)
		if err != nil {
			return err
		}
		f.Help, f.HasHelp = h, true
		return nil
	}
	if f.HasType {
		return errors.New("second TYPE")
	}
	switch arg {
	case "counter", "gauge", "histogram", "summary", "untyped":
	default:
		return fmt.Errorf("unknown type %q", arg)
	}
	f.Type, f.HasType = arg, true
	return nil
}

// finish checks the current family as a whole.
func (p *parser) finish() error {
	f := p.cur()
	if f == nil {
		return nil
	}
	if len(f.Samples) == 0 {
		return fmt.Errorf("family %s has no samples", f.Name)
	}
	switch f.Type {
	case "histogram":
		return checkHistogram(f)
	case "summary":
		return checkSummary(f)
	}
	return nil
}

// seriesKey is a label set without the named label, for grouping the
// samples of one histogram or summary.
func seriesKey(s Sample, drop string) string {
	var b strings.Builder
	for _, l := range sortedLabels(s.Labels) {
		if l.Name != drop {
			fmt.Fprintf(&b, "%s=%q,", l.Name, l.Value)
		}
	}
	return b.String()
}

func checkHistogram(f *Family) error {
	type hist struct {
		les          []float64
		counts       []float64
		sum, count   float64
		hasS, hasCnt bool
	}
	hs := map[string]*hist{}
	var order []string
	for _, s := range f.Samples {
		k := seriesKey(s, "le")
		h := hs[k]
		if h == nil {
			h = &hist{}
			hs[k] = h
			order = append(order, k)
		}
		switch s.Name {
		case f.Name + "_bucket":
			v, _ := s.Get("le")
			le, err := parseFloat(v)
			if err != nil || math.IsNaN(le) {
				return fmt.Errorf("%s: bad le %q", f.Name, v)
			}
			if n := len(h.les); n > 0 && !(le > h.les[n-1]) {
				return fmt.Errorf("%s{%s}: le %v after %v", f.Name, k, le, h.les[n-1])
			}
			if n := len(h.counts); n > 0 && s.Value < h.counts[n-1] {
				return fmt.Errorf("%s{%s}: bucket counts not cumulative", f.Name, k)
			}
			if s.Value < 0 || math.IsNaN(s.Value) || s.Value != math.Trunc(s.Value) {
				return fmt.Errorf("%s{%s}: bucket count %v", f.Name, k, s.Value)
			}
			h.les = append(h.les, le)
			h.counts = append(h.counts, s.Value)
		case f.Name + "_sum":
			h.sum, h.hasS = s.Value, true
		case f.Name + "_count":
			h.count, h.hasCnt = s.Value, true
		}
	}
	for _, k := range order {
		h := hs[k]
		n := len(h.les)
		if n == 0 || !math.IsInf(h.les[n-1], 1) {
			return fmt.Errorf("%s{%s}: no +Inf bucket", f.Name, k)
		}
		if !h.hasS || !h.hasCnt {
			return fmt.Errorf("%s{%s}: missing _sum or _count", f.Name, k)
		}
		if h.counts[n-1] != h.count {
			return fmt.Errorf("%s{%s}: +Inf bucket %v != _count %v", f.Name, k, h.counts[n-1], h.count)
		}
	}
	return nil
}

func checkSummary(f *Family) error {
	type sum struct{ hasS, hasCnt bool }
	ss := map[string]*sum{}
	var order []string
	for _, s := range f.Samples {
		k := seriesKey(s, "quantile")
		x := ss[k]
		if x == nil {
			x = &sum{}
			ss[k] = x
			order = append(order, k)
		}
		switch s.Name {
		case f.Name:
			v, _ := s.Get("quantile")
			q, err := parseFloat(v)
			if err != nil || !(q >= 0 && q <= 1) {
				return fmt.Errorf("%s: bad quantile %q", f.Name, v)
			}
		case f.Name + "_sum":
			x.hasS = true
		case f.Name + "_count":
			x.hasCnt = true
		}
	}
	for _, k := range order {
		if !ss[k].hasS || !ss[k].hasCnt {
			return fmt.Errorf("%s{%s}: missing _sum or _count", f.Name, k)
		}
	}
	return nil
}

// parseSample parses `name{l="v",...} value [timestamp]`.
func parseSample(line string) (Sample, error) {
	var s Sample
	i := 0
	for i < len(line) && isNameByte(line[i], i == 0, true) {
		i++
	}
	s.Name = line[:i]
	if s.Name == "" {
		return s, errors.New("no metric name")
	}
	rest := line[i:]
	if strings.HasPrefix(rest, "{") {
		var err error
		s.Labels, rest, err = parseLabels(rest[1:])
		if err != nil {
			return s, err
		}
	}
	rest, ok := strings.CutPrefix(rest, " ")
	if !ok {
		return s, errors.New("no space before the value")
	}
	val, ts, hasTS := strings.Cut(rest, " ")
	v, err := parseFloat(val)
	if err != nil {
		return s, fmt.Errorf("bad value %q", val)
	}
	s.Value = v
	if hasTS {
		t, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || ts[0] == '+' {
			return s, fmt.Errorf("bad timestamp %q", ts)
		}
		s.HasTimestamp, s.Timestamp = true, t
	}
	return s, nil
}

// parseLabels parses label pairs after '{' up to and including '}'.
func parseLabels(s string) ([]Label, string, error) {
	var out []Label
	for {
		if r, ok := strings.CutPrefix(s, "}"); ok {
			if len(out) == 0 {
				return nil, "", errors.New("empty label braces")
			}
			return out, r, nil
		}
		if len(out) > 0 {
			var ok bool
			if s, ok = strings.CutPrefix(s, ","); !ok {
				return nil, "", errors.New("no comma between labels")
			}
		}
		i := 0
		for i < len(s) && isNameByte(s[i], i == 0, false) {
			i++
		}
		name := s[:i]
		if name == "" || strings.HasPrefix(name, "__") {
			return nil, "", fmt.Errorf("invalid label name %q", name)
		}
		for _, l := range out {
			if l.Name == name {
				return nil, "", fmt.Errorf("label %s twice", name)
			}
		}
		s = s[i:]
		var ok bool
		if s, ok = strings.CutPrefix(s, `="`); !ok {
			return nil, "", errors.New(`no =" after a label name`)
		}
		// The value ends at the first unescaped quote.
		j := 0
		for j < len(s) && s[j] != '"' {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(s) {
			return nil, "", errors.New("unterminated label value")
		}
		v, err := unescape(s[:j], true)
		if err != nil {
			return nil, "", err
		}
		out = append(out, Label{name, v})
		s = s[j+1:]
	}
}

// unescape undoes \\ and \n, and \" in a label value; any other backslash
// sequence is an error.
func unescape(s string, quote bool) (string, error) {
	if !strings.Contains(s, `\`) {
		if strings.Contains(s, "\n") {
			return "", errors.New("raw newline")
		}
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(s) {
			return "", errors.New("trailing backslash")
		}
		i++
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !quote {
				return "", errors.New(`\" in HELP text`)
			}
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("unknown escape \\%c", s[i])
		}
	}
	return b.String(), nil
}

// parseFloat accepts Go float syntax plus the format's +Inf, -Inf, NaN, and
// rejects the Go-only forms (underscores, hex) a scraper would not read.
func parseFloat(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	if s == "" || strings.ContainsAny(s, "_xXpPiInN") {
		return 0, errors.New("bad float")
	}
	return strconv.ParseFloat(s, 64)
}

func isNameByte(c byte, first, colon bool) bool {
	return c == '_' || (colon && c == ':') || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
}

func validMetricName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i], i == 0, true) {
			return false
		}
	}
	return s != ""
}
