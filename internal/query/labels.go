package query

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"haystack/internal/attrs"
)

// Values of __error__ a pipeline can set, as Loki names them.
const (
	ErrJSON        = "JSONParserErr"
	ErrLogfmt      = "LogfmtParserErr"
	ErrLabelFilter = "LabelFilterErr"
)

// pipeStage is one stage after the line filters: exactly one of parser,
// filter, drop, line, lineFmt, labelFmt and decolor is set.
type pipeStage struct {
	parser *ParserStage
	filter labelEval
	drop   *dropEval

	// A line filter after a stage that rewrote the line: it tests the
	// new line, in query order.
	line *Filter
	// line_format, label_format, decolorize.
	lineFmt  *boundedTemplate
	labelFmt []labelFmtEval
	decolor  bool

	// The parser's compiled form (regexp, pattern, parameters).
	re     *regexp.Regexp
	names  []string
	pat    *patternExpr
	params []paramEval
}

// labelSet is the label state of one entry while the pipeline runs.
type labelSet struct {
	stream     []Label // the stream's labels (the _extracted rule tests these)
	base       []Label // stream labels still present: stream until a drop, then a copy
	meta       []Label // the entry's structured metadata (see addMeta)
	ext        []Label // extracted, first value of a name wins
	err        string  // __error__
	errDetails string  // __error_details__
	dropped    bool    // a drop, keep or label_format changed a stream label
	// line is the entry's line after the stages that rewrite it
	// (line_format, decolorize, unpack); rewritten says one ran.
	line      []byte
	rewritten bool
	data      map[string]string // templates' data (templateData), reused
	tmpl      tmplBudget        // what the entry's templates built
}

// labelSets recycles the per-entry label state: a pipeline runs once per
// entry, and nothing of a labelSet outlives the call that ran it (results
// are copied out), so its struct and its slices' arrays are reused.
var labelSets = sync.Pool{New: func() any { return new(labelSet) }}

// newLabelSet returns a labelSet from the pool; the caller gives it back
// with release once done with it.
func newLabelSet(stream []Label, meta []byte) *labelSet {
	ls := labelSets.Get().(*labelSet)
	ls.stream, ls.base = stream, stream
	if len(meta) > 0 {
		ls.addMeta(meta)
	}
	return ls
}

// maxPooledLabels bounds the arrays a pooled labelSet keeps: a line with
// thousands of keys must not pin them.
const maxPooledLabels = 256

func (ls *labelSet) release() {
	keep := func(l []Label) []Label {
		if cap(l) > maxPooledLabels {
			return nil
		}
		clear(l) // no strings kept alive
		return l[:0]
	}
	data := ls.data
	if len(data) > maxPooledLabels {
		data = nil
	}
	clear(data) // no strings kept alive
	*ls = labelSet{meta: keep(ls.meta), ext: keep(ls.ext), data: data}
	labelSets.Put(ls)
}

// addMeta records the entry's structured metadata (package attrs'
// encoding) as labels, as Loki 3 does: a name the stream already has gets
// the suffix _extracted (Loki's LabelsBuilder.Add), and so do __error__
// and __error_details__, which only the pipeline sets (Loki would take
// them for the error; Haystack treats them as a parser's keys). Metadata
// that does not decode (attrs.ErrCorrupt; the reader validated it) is
// ignored.
func (ls *labelSet) addMeta(meta []byte) {
	// Validated first: a corrupt encoding adds nothing, not a prefix.
	attrs.Each(meta, func(name, value []byte) bool {
		n := string(name)
		if n == "__error__" || n == "__error_details__" || ls.streamHas(n) {
			n += "_extracted"
		}
		// Two names can meet after the suffix (app and app_extracted on a
		// stream with app): the later value wins, as Loki's Set does.
		for i := range ls.meta {
			if ls.meta[i].Name == n {
				ls.meta[i].Value = string(value)
				return true
			}
		}
		ls.meta = append(ls.meta, Label{n, string(value)})
		return true
	})
}

func (ls *labelSet) streamHas(name string) bool {
	for _, l := range ls.stream {
		if l.Name == name {
			return true
		}
	}
	return false
}

func (ls *labelSet) get(name string) (string, bool) {
	switch name {
	case "__error__":
		return ls.err, ls.err != ""
	case "__error_details__":
		return ls.errDetails, ls.errDetails != ""
	}
	for _, l := range ls.ext {
		if l.Name == name {
			return l.Value, true
		}
	}
	for _, l := range ls.meta {
		if l.Name == name {
			return l.Value, true
		}
	}
	for _, l := range ls.base {
		if l.Name == name {
			return l.Value, true
		}
	}
	return "", false
}

func (ls *labelSet) setErr(kind, details string) {
	if ls.err == "" {
		ls.err, ls.errDetails = kind, details
	}
}

// add records an extracted label: the name is sanitized, suffixed with
// _extracted when a stream label has it (even one a drop removed) or it
// is __error__ or
// __error_details__ (which only the pipeline sets), and ignored when
// already extracted. A metadata label of that name is replaced: parsed
// labels take precedence over metadata (Loki's LabelsBuilder.Set).
func (ls *labelSet) add(key []byte, value string) {
	name := sanitizeKey(key)
	if name == "" {
		return
	}
	if name == "__error__" || name == "__error_details__" {
		// The pipeline's own labels: a key of the line cannot set them.
		name += "_extracted"
	}
	if ls.streamHas(name) {
		name += "_extracted"
	}
	for _, l := range ls.ext {
		if l.Name == name {
			return
		}
	}
	if len(ls.meta) > 0 {
		ls.meta = slices.DeleteFunc(ls.meta, func(l Label) bool { return l.Name == name })
	}
	ls.ext = append(ls.ext, Label{name, value})
}

// sanitizeKey maps a key to a label name: bytes other than ASCII letters,
// digits, '_' and ':' become '_', and a leading digit gets a '_' prefix.
func sanitizeKey(key []byte) string {
	if len(key) == 0 {
		return ""
	}
	b := make([]byte, 0, len(key)+1)
	if isDigit(key[0]) {
		b = append(b, '_')
	}
	for i := 0; i < len(key); {
		c := key[i]
		if isIdentByte(c) {
			b = append(b, c)
			i++
			continue
		}
		// One '_' per character, not per byte, for multi-byte runes.
		_, n := utf8.DecodeRune(key[i:])
		b = append(b, '_')
		i += n
	}
	return string(b)
}

func (ls *labelSet) parse(st *ParserStage, line []byte) {
	switch st.Kind {
	case ParserJSON:
		if !json.Valid(line) {
			ls.setErr(ErrJSON, "invalid JSON")
			return
		}
		j := jsonWalker{src: line, ls: ls}
		j.skipWS()
		if j.i >= len(line) || line[j.i] != '{' {
			ls.setErr(ErrJSON, "not a JSON object")
			return
		}
		j.object(nil)
	case ParserLogfmt:
		if err := parseLogfmt(line, st.Strict, st.KeepEmpty, ls.add); err != "" {
			ls.setErr(ErrLogfmt, err)
		}
	}
}

// jsonWalker flattens an object already validated by json.Valid.
type jsonWalker struct {
	src []byte
	i   int
	ls  *labelSet
}

func (j *jsonWalker) skipWS() {
	for j.i < len(j.src) {
		switch j.src[j.i] {
		case ' ', '\t', '\n', '\r':
			j.i++
		default:
			return
		}
	}
}

// object walks {...} at j.i; prefix is the flattened key so far.
func (j *jsonWalker) object(prefix []byte) {
	j.i++ // '{'
	for {
		j.skipWS()
		if j.src[j.i] == '}' {
			j.i++
			return
		}
		if j.src[j.i] == ',' {
			j.i++
			j.skipWS()
		}
		k := j.str()
		key := append(append([]byte(nil), prefix...), k...)
		j.skipWS()
		j.i++ // ':'
		j.skipWS()
		switch c := j.src[j.i]; {
		case c == '{':
			j.object(append(key, '_'))
		case c == '[':
			j.skipValue() // arrays are skipped
		case c == '"':
			j.ls.add(key, string(j.str()))
		default:
			start := j.i
			j.skipValue()
			v := string(j.src[start:j.i])
			if v == "null" {
				v = ""
			}
			j.ls.add(key, v)
		}
	}
}

// str decodes the string at j.i.
func (j *jsonWalker) str() []byte {
	j.i++ // '"'
	var out []byte
	for {
		c := j.src[j.i]
		switch c {
		case '"':
			j.i++
			return out
		case '\\':
			e := j.src[j.i+1]
			j.i += 2
			switch e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := j.hex4()
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if j.i+1 < len(j.src) && j.src[j.i] == '\\' && j.src[j.i+1] == 'u' {
						save := j.i
						j.i += 2
						r2 = j.hex4()
						if utf16.DecodeRune(r, r2) == utf8.RuneError {
							j.i = save
							r2 = -1
						}
					}
					r = utf16.DecodeRune(r, r2)
				}
				out = utf8.AppendRune(out, r)
			default: // " \ /
				out = append(out, e)
			}
		default:
			out = append(out, c)
			j.i++
		}
	}
}

func (j *jsonWalker) hex4() rune {
	v, _ := strconv.ParseUint(string(j.src[j.i:j.i+4]), 16, 32)
	j.i += 4
	return rune(v)
}

// skipValue moves past one scalar, array or object.
func (j *jsonWalker) skipValue() {
	depth := 0
	for j.i < len(j.src) {
		switch c := j.src[j.i]; c {
		case '"':
			j.str()
			if depth == 0 {
				return
			}
			continue
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				return
			}
			depth--
			if depth == 0 {
				j.i++
				return
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return
			}
		}
		j.i++
	}
}

// parseLogfmt calls add for each key=value pair. Without strict, malformed
// pairs are skipped; with strict the first one stops the parse and its
// description is returned. Standalone keys are kept (value "") only with
// keepEmpty.
func parseLogfmt(line []byte, strict, keepEmpty bool, add func([]byte, string)) string {
	i := 0
	n := len(line)
	for {
		for i < n && line[i] <= ' ' {
			i++
		}
		if i >= n {
			return ""
		}
		start := i
		bad := ""
		for i < n && line[i] > ' ' && line[i] != '=' {
			if line[i] == '"' {
				bad = "unexpected '\"' in key"
			}
			i++
		}
		key := line[start:i]
		if len(key) == 0 {
			bad = "missing key before '='"
		}
		if i >= n || line[i] != '=' {
			if bad == "" && keepEmpty {
				add(key, "")
			}
			if bad != "" && strict {
				return bad + " at byte " + strconv.Itoa(start)
			}
			continue
		}
		i++ // '='
		var value string
		if i < n && line[i] == '"' {
			vstart := i
			i++
			for i < n && line[i] != '"' {
				if line[i] == '\\' {
					i++
				}
				i++
			}
			if i >= n {
				// An unterminated quote eats the rest of the line.
				if strict {
					return "unterminated quoted value at byte " + strconv.Itoa(vstart)
				}
				return ""
			}
			i++
			v, err := strconv.Unquote(string(line[vstart:i]))
			if err != nil {
				// Not a Go-style escape: keep the text between the quotes.
				v = string(line[vstart+1 : i-1])
			}
			value = v
			if i < n && line[i] > ' ' {
				bad = "garbage after quoted value"
				for i < n && line[i] > ' ' {
					i++
				}
			}
		} else {
			vstart := i
			for i < n && line[i] > ' ' {
				if line[i] == '=' || line[i] == '"' {
					bad = "unexpected '" + string(line[i]) + "' in value"
				}
				i++
			}
			value = string(line[vstart:i])
		}
		if bad != "" {
			if strict {
				return bad + " at byte " + strconv.Itoa(start)
			}
			continue
		}
		add(key, value)
	}
}

// ---- drop and keep ----

// dropEval is a compiled drop or keep stage.
type dropEval struct {
	keep   bool
	labels []dropLabel
}

type dropLabel struct {
	name string
	any  bool
	m    evalMatch
}

// selects reports whether some operand of d names the label name=value.
func (d *dropEval) selects(name, value string) bool {
	for i := range d.labels {
		l := &d.labels[i]
		if l.name == name && (l.any || l.m.matches(value)) {
			return true
		}
	}
	return false
}

// removes reports whether d takes the label name=value out of the set.
func (d *dropEval) removes(name, value string) bool {
	if d.keep {
		// keep leaves the pipeline's error labels to drop (Loki's rule).
		return name != "__error__" && name != "__error_details__" && !d.selects(name, value)
	}
	return d.selects(name, value)
}

// apply removes the labels d selects (drop) or does not select (keep).
func (d *dropEval) apply(ls *labelSet) {
	for i, l := range ls.base {
		if !d.removes(l.Name, l.Value) {
			continue
		}
		// Copy on the first removal: ls.base is the caller's stream
		// labels until then.
		kept := append([]Label(nil), ls.base[:i]...)
		for _, l := range ls.base[i+1:] {
			if !d.removes(l.Name, l.Value) {
				kept = append(kept, l)
			}
		}
		ls.base, ls.dropped = kept, true
		break
	}
	ls.ext = d.filter(ls.ext)
	ls.meta = d.filter(ls.meta)
	// A label the entry does not have is never removed: an unset error
	// stays unset whatever the matcher.
	if ls.err != "" && d.removes("__error__", ls.err) {
		ls.err = ""
	}
	if ls.errDetails != "" && d.removes("__error_details__", ls.errDetails) {
		ls.errDetails = ""
	}
}

// filter removes from ls, in place, the labels d takes out.
func (d *dropEval) filter(ls []Label) []Label {
	kept := ls[:0]
	for _, l := range ls {
		if !d.removes(l.Name, l.Value) {
			kept = append(kept, l)
		}
	}
	clear(ls[len(kept):])
	return kept
}

func compileDrop(st *DropStage) (*dropEval, error) {
	if len(st.Labels) == 0 {
		return nil, errAt(st.Pos, "drop or keep without a label")
	}
	d := &dropEval{keep: st.Keep}
	for _, l := range st.Labels {
		dl := dropLabel{name: l.Name, any: l.Any, m: evalMatch{m: l.Matcher}}
		if !l.Any && (l.Type == MatchRegexp || l.Type == MatchNotRegexp) {
			if err := checkRegex(l.Value, l.Pos, false); err != nil {
				return nil, err
			}
			re, err := compileAnchored(l.Value, l.Pos)
			if err != nil {
				return nil, err
			}
			dl.m.re = re
		}
		d.labels = append(d.labels, dl)
	}
	return d, nil
}

// ---- label filter evaluation ----

type labelEval interface {
	eval(ls *labelSet) bool
}

type evalBinary struct {
	or   bool
	l, r labelEval
}

func (b *evalBinary) eval(ls *labelSet) bool {
	if b.or {
		return b.l.eval(ls) || b.r.eval(ls)
	}
	return b.l.eval(ls) && b.r.eval(ls)
}

type evalMatch struct {
	m  Matcher
	re *regexp.Regexp
}

func (e *evalMatch) eval(ls *labelSet) bool {
	v, _ := ls.get(e.m.Name)
	return e.matches(v)
}

// matches applies the matcher to a value.
func (e *evalMatch) matches(v string) bool {
	switch e.m.Type {
	case MatchEqual:
		return v == e.m.Value
	case MatchNotEqual:
		return v != e.m.Value
	case MatchRegexp:
		return e.re.MatchString(v)
	}
	return !e.re.MatchString(v)
}

type evalCompare struct{ c *LabelCompare }

func (e *evalCompare) eval(ls *labelSet) bool {
	if ls.err != "" {
		// Only string matchers may filter out a line carrying an error.
		return true
	}
	v, ok := ls.get(e.c.Name)
	if !ok {
		return false
	}
	var x float64
	var conv bool
	switch e.c.Kind {
	case KindNumber:
		f, err := strconv.ParseFloat(v, 64)
		x, conv = f, err == nil
	case KindDuration:
		d, err := time.ParseDuration(v)
		x, conv = d.Seconds(), err == nil
	case KindBytes:
		x, conv = parseBytes(v, true)
	}
	if !conv {
		ls.setErr(ErrLabelFilter, "cannot convert "+strconv.Quote(v)+" of label "+e.c.Name)
		return true
	}
	y := e.c.Value
	switch e.c.Op {
	case CmpEq:
		return x == y
	case CmpNe:
		return x != y
	case CmpGt:
		return x > y
	case CmpGe:
		return x >= y
	case CmpLt:
		return x < y
	}
	return x <= y
}

// compileLabelExpr compiles a label filter expression, with its ORs of
// equalities on one name as set lookups (mergeLabelSets).
func compileLabelExpr(e LabelExpr) (labelEval, error) {
	ev, err := compileLabelTree(e)
	if err != nil {
		return nil, err
	}
	return mergeLabelSets(ev), nil
}

// compileLabelTree compiles e node for node, one matcher per leaf.
func compileLabelTree(e LabelExpr) (labelEval, error) {
	switch e := e.(type) {
	case *LabelBinary:
		l, err := compileLabelTree(e.L)
		if err != nil {
			return nil, err
		}
		r, err := compileLabelTree(e.R)
		if err != nil {
			return nil, err
		}
		return &evalBinary{or: e.Or, l: l, r: r}, nil
	case *LabelMatch:
		m := &evalMatch{m: e.Matcher}
		if e.Type == MatchRegexp || e.Type == MatchNotRegexp {
			if err := checkRegex(e.Value, e.Pos, false); err != nil {
				return nil, err
			}
			re, err := compileAnchored(e.Value, e.Pos)
			if err != nil {
				return nil, err
			}
			m.re = re
		}
		return m, nil
	case *LabelCompare:
		return &evalCompare{c: e}, nil
	}
	return nil, errAt(0, "unknown label filter expression")
}
