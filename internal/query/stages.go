package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"text/template/parse"
)

// ErrTemplate is the __error__ value of a line_format or label_format
// template that fails on an entry, as Loki names it.
const ErrTemplate = "TemplateFormatErr"

// validLabelName reports whether s is a Prometheus label name.
func validLabelName(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentStart(s[i]) && !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// ---- regexp ----

// compileRegexpParser compiles the expression of `| regexp`: Go RE2,
// unanchored, '.' not matching '\n' (Loki compiles it without flags). It
// needs at least one named group, and the names must be distinct label
// names. names[i] is group i's label name, "" for unnamed groups.
func compileRegexpParser(expr string, pos int) (*regexp.Regexp, []string, error) {
	if err := checkRegex(expr, pos, false); err != nil {
		return nil, nil, err
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, nil, errAt(pos, "invalid regular expression: "+err.Error())
	}
	names := re.SubexpNames()
	seen := map[string]bool{}
	for _, n := range names[1:] {
		if n == "" {
			continue
		}
		if !validLabelName(n) {
			return nil, nil, errAt(pos, "regexp group name "+strconv.Quote(n)+" is not a valid label name")
		}
		if n == "__error__" || n == "__error_details__" {
			return nil, nil, errAt(pos, "regexp cannot extract into "+n+": only the pipeline sets it")
		}
		if seen[n] {
			return nil, nil, errAt(pos, "regexp names the group "+strconv.Quote(n)+" twice")
		}
		seen[n] = true
	}
	if len(seen) == 0 {
		return nil, nil, errAt(pos, "regexp needs at least one named group such as (?P<name>...)")
	}
	return re, names, nil
}

// ---- pattern ----

// patternExpr is a compiled pattern expression: literal text, then
// alternately a capture and the literal after it.
type patternExpr struct {
	prefix []byte    // literal the line must start with ("" for none)
	parts  []patPart // each a capture and the literal that ends it ("" for the last)
	names  []string  // the named captures, in order
}

type patPart struct {
	name string // "" for <_>
	lit  []byte // the literal after the capture; empty only for the last part
}

// compilePattern parses a pattern expression (Loki's documented syntax):
// <name> captures, <_> skips, anything else is literal. A `<` that does
// not start a capture (no identifier then `>`) is literal. Two captures
// may not be adjacent, at least one capture must be named, and names are
// distinct.
func compilePattern(expr string, pos int) (*patternExpr, error) {
	if len(expr) > MaxPatternLen {
		return nil, errAt(pos, fmt.Sprintf("pattern is %d bytes, longer than the limit of %d", len(expr), MaxPatternLen))
	}
	type node struct {
		capture bool
		text    string
	}
	var nodes []node
	var lit []byte
	for i := 0; i < len(expr); {
		if expr[i] == '<' {
			j := i + 1
			for j < len(expr) && (isIdentStart(expr[j]) || isDigit(expr[j])) {
				j++
			}
			if j < len(expr) && expr[j] == '>' && j > i+1 && isIdentStart(expr[i+1]) {
				if len(lit) > 0 {
					nodes = append(nodes, node{text: string(lit)})
					lit = nil
				}
				if len(nodes) > 0 && nodes[len(nodes)-1].capture {
					return nil, errAt(pos, "pattern has two consecutive captures ("+nodes[len(nodes)-1].text+" and "+expr[i:j+1]+"): a literal must separate them")
				}
				nodes = append(nodes, node{capture: true, text: expr[i : j+1]})
				i = j + 1
				continue
			}
		}
		lit = append(lit, expr[i])
		i++
	}
	if len(lit) > 0 {
		nodes = append(nodes, node{text: string(lit)})
	}
	pe := &patternExpr{}
	seen := map[string]bool{}
	for k, n := range nodes {
		if !n.capture {
			if k == 0 {
				pe.prefix = []byte(n.text)
			} else {
				pe.parts[len(pe.parts)-1].lit = []byte(n.text)
			}
			continue
		}
		name := n.text[1 : len(n.text)-1]
		if name == "_" {
			name = ""
		} else {
			if name == "__error__" || name == "__error_details__" {
				return nil, errAt(pos, "pattern cannot extract into "+name+": only the pipeline sets it")
			}
			if seen[name] {
				return nil, errAt(pos, "pattern names the capture "+n.text+" twice")
			}
			seen[name] = true
			pe.names = append(pe.names, name)
		}
		pe.parts = append(pe.parts, patPart{name: name})
	}
	if len(pe.names) == 0 {
		return nil, errAt(pos, "pattern needs at least one named capture such as <status>")
	}
	return pe, nil
}

// match calls add for each named capture the line gives. Matching is
// anchored at the line's start: a line not starting with the leading
// literal gives nothing. Each capture takes the text up to the first
// occurrence of the literal after it (the last capture, with no literal
// after it, takes the rest of the line); when that literal is missing the
// capture takes the rest of the line and matching stops, so the later
// captures are not added. It reports whether every literal was found.
func (pe *patternExpr) match(line []byte, add func(name string, value []byte)) bool {
	if !bytes.HasPrefix(line, pe.prefix) {
		return false
	}
	rest := line[len(pe.prefix):]
	for _, part := range pe.parts {
		if len(part.lit) == 0 {
			if part.name != "" {
				add(part.name, rest)
			}
			return true
		}
		i := bytes.Index(rest, part.lit)
		if i < 0 {
			if part.name != "" {
				add(part.name, rest)
			}
			return false
		}
		if part.name != "" {
			add(part.name, rest[:i])
		}
		rest = rest[i+len(part.lit):]
	}
	return true
}

// ---- json and logfmt parameters ----

// pathElem is one step of a JSON path: an object key, or an array index
// when key is "" and index >= 0.
type pathElem struct {
	key   string
	index int
}

// parseJSONPath parses a json parameter's expression: keys joined by
// '.', array indexes [0], and quoted keys ["a b"] (Loki's documented
// forms: servers[0], request.headers["User-Agent"]).
func parseJSONPath(s string) ([]pathElem, error) {
	var out []pathElem
	i := 0
	for i < len(s) {
		switch c := s[i]; {
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unclosed [ at byte %d", i)
			}
			inner := s[i+1 : i+j]
			if len(inner) >= 2 && inner[0] == '"' {
				// A quoted key may hold ']': find its closing quote.
				k, err := strconv.QuotedPrefix(s[i+1:])
				if err != nil || i+1+len(k) >= len(s) || s[i+1+len(k)] != ']' {
					return nil, fmt.Errorf("bad quoted key at byte %d", i)
				}
				key, _ := strconv.Unquote(k)
				out = append(out, pathElem{key: key, index: -1})
				i += 1 + len(k) + 1
				continue
			}
			n, err := strconv.Atoi(inner)
			if err != nil || n < 0 || !isPlainNumber(inner) {
				return nil, fmt.Errorf("bad array index %q at byte %d", inner, i)
			}
			out = append(out, pathElem{index: n})
			i += j + 1
		case c == '.':
			if i == 0 || i+1 >= len(s) || s[i+1] == '.' || s[i+1] == '[' {
				return nil, fmt.Errorf("misplaced . at byte %d", i)
			}
			i++
		default:
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				j++
			}
			out = append(out, pathElem{key: s[i:j], index: -1})
			i = j
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty expression")
	}
	return out, nil
}

// checkParamPath validates a json or logfmt parameter's expression.
func checkParamPath(kind ParserKind, path string, pos int) error {
	if kind == ParserLogfmt {
		if path == "" {
			return errAt(pos, "empty logfmt key")
		}
		return nil
	}
	if _, err := parseJSONPath(path); err != nil {
		return errAt(pos, "invalid json expression "+strconv.Quote(path)+": "+err.Error())
	}
	return nil
}

// jsonAt returns the raw text of the value at path in src (already
// validated by json.Valid), or false when the path does not exist.
func jsonAt(src []byte, path []pathElem) ([]byte, bool) {
	j := jsonWalker{src: src}
	j.skipWS()
	for _, el := range path {
		if j.i >= len(src) {
			return nil, false
		}
		switch {
		case el.index < 0 && src[j.i] == '{':
			if !j.findKey(el.key) {
				return nil, false
			}
		case el.index >= 0 && src[j.i] == '[':
			if !j.findIndex(el.index) {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	start := j.i
	j.skipValue()
	return src[start:j.i], true
}

// findKey moves from '{' to the value of the first member named key.
func (j *jsonWalker) findKey(key string) bool {
	j.i++ // '{'
	for {
		j.skipWS()
		if j.src[j.i] == '}' {
			return false
		}
		if j.src[j.i] == ',' {
			j.i++
			j.skipWS()
		}
		k := j.str()
		j.skipWS()
		j.i++ // ':'
		j.skipWS()
		if string(k) == key {
			return true
		}
		j.skipValue()
	}
}

// findIndex moves from '[' to element n.
func (j *jsonWalker) findIndex(n int) bool {
	j.i++ // '['
	for k := 0; ; k++ {
		j.skipWS()
		if j.src[j.i] == ']' {
			return false
		}
		if j.src[j.i] == ',' {
			j.i++
			j.skipWS()
		}
		if k == n {
			return true
		}
		j.skipValue()
	}
}

// jsonValue is a label's value for raw JSON: strings unescaped, null
// empty, numbers, booleans, objects and arrays as written.
func jsonValue(raw []byte) string {
	if len(raw) > 0 && raw[0] == '"' {
		j := jsonWalker{src: raw}
		return string(j.str())
	}
	if string(raw) == "null" {
		return ""
	}
	return string(raw)
}

// jsonParams runs `| json name="path", ...`: only the named labels, from
// their paths; a path the line lacks adds nothing.
func (ls *labelSet) jsonParams(ps []paramEval, line []byte) {
	if !json.Valid(line) {
		ls.setErr(ErrJSON, "invalid JSON")
		return
	}
	j := jsonWalker{src: line}
	j.skipWS()
	if j.i >= len(line) || line[j.i] != '{' {
		ls.setErr(ErrJSON, "not a JSON object")
		return
	}
	for _, p := range ps {
		if raw, ok := jsonAt(line, p.path); ok {
			ls.add([]byte(p.name), jsonValue(raw))
		}
	}
}

// paramEval is a compiled extraction parameter.
type paramEval struct {
	name string
	key  string     // logfmt
	path []pathElem // json
}

// logfmtParams runs `| logfmt name="key", ...`: the first value of each
// named key.
func (ls *labelSet) logfmtParams(st *ParserStage, ps []paramEval, line []byte) {
	vals := make([]*string, len(ps))
	err := parseLogfmt(line, st.Strict, st.KeepEmpty, func(k []byte, v string) {
		for i, p := range ps {
			if vals[i] == nil && p.key == string(k) {
				vals[i] = &v
			}
		}
	})
	if err != "" {
		ls.setErr(ErrLogfmt, err)
	}
	for i, p := range ps {
		if vals[i] != nil {
			ls.add([]byte(p.name), *vals[i])
		}
	}
}

// ---- unpack ----

// unpack runs `| unpack`: the line is a JSON object whose string members
// are labels (Promtail's pack stage), except _entry, which becomes the
// line. Members of other types are ignored. A line that is not a JSON
// object sets __error__=JSONParserErr and is kept.
func (ls *labelSet) unpack(line []byte) []byte {
	if !json.Valid(line) {
		ls.setErr(ErrJSON, "invalid JSON")
		return line
	}
	j := jsonWalker{src: line, ls: ls}
	j.skipWS()
	if j.i >= len(line) || line[j.i] != '{' {
		ls.setErr(ErrJSON, "not a JSON object")
		return line
	}
	out := line
	j.i++
	for {
		j.skipWS()
		if line[j.i] == '}' {
			return out
		}
		if line[j.i] == ',' {
			j.i++
			j.skipWS()
		}
		k := j.str()
		j.skipWS()
		j.i++ // ':'
		j.skipWS()
		if line[j.i] != '"' {
			j.skipValue()
			continue
		}
		v := j.str()
		if string(k) == "_entry" {
			out = v
			continue
		}
		ls.add(k, string(v))
	}
}

// ---- decolorize ----

// ansiRe matches ANSI escape sequences: CSI sequences (colours, cursor
// moves) and OSC sequences ended by BEL, as the widespread ansi-regex
// pattern does. Compiled on first use: at package init it was most of
// the start-up of every hay command (0.3-0.5 ms).
var ansiRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`[\x1b\x{9b}][\[\]()#;?]*(?:(?:(?:[a-zA-Z\d]*(?:;[a-zA-Z\d]*)*)?\x07)|(?:(?:\d{1,4}(?:;\d{0,4})*)?[\dA-PRZcf-ntqry=><~]))`)
})

// decolorize removes ANSI escape sequences from line.
func decolorize(line []byte) []byte {
	if bytes.IndexByte(line, 0x1b) < 0 && !bytes.Contains(line, []byte("\u009b")) {
		return line
	}
	return ansiRe().ReplaceAllLiteral(line, nil)
}

// ---- templates ----

// boundedFuncs are the Loki template functions Haystack supports (Loki's
// template_functions documentation; argument orders as documented there:
// the lower-case ones take the string last so that they chain in a
// pipeline), bound to one template instance in: every function that
// builds a string charges it to the running entry's budget (in.b), and
// checks what it would build first when that can be large (repeat, the
// replacements, printf's widths). text/template's own print, printf,
// println, html, js and urlquery are replaced by bounded versions: they
// concatenate any number of arguments. Any other function is refused when
// the query is parsed. __line__ gives the current line (see prepareTree).
func boundedFuncs(in *tmplInst, rc *regexpCache) template.FuncMap {
	// ret charges a built result.
	ret := func(s string) (string, error) {
		if err := in.b.charge(len(s)); err != nil {
			return "", err
		}
		return s, nil
	}
	caseFn := func(f func(string) string) func(string) (string, error) {
		// Changing case can triple a string (invalid UTF-8 becomes
		// U+FFFD): checked on the input, charged on the result.
		return func(s string) (string, error) {
			if err := in.b.check(len(s)); err != nil {
				return "", err
			}
			return ret(f(s))
		}
	}
	escaper := func(f func(...any) string) func(...any) (string, error) {
		return func(args ...any) (string, error) {
			if err := in.b.check(argsLen(args)); err != nil {
				return "", err
			}
			return ret(f(args...))
		}
	}
	regexpFn := func(literal bool) func(re, s, repl string) (string, error) {
		return func(re, s, repl string) (string, error) {
			r, err := rc.get(re)
			if err != nil {
				return "", err
			}
			if err := checkGrowth(s, "", repl); err != nil {
				return "", err
			}
			if err := in.b.check(len(s)); err != nil {
				return "", err
			}
			if literal {
				return ret(r.ReplaceAllLiteralString(s, repl))
			}
			return ret(r.ReplaceAllString(s, repl))
		}
	}
	return template.FuncMap{
		"__line__": func() string { return "" },
		"ToLower":  caseFn(strings.ToLower),
		"ToUpper":  caseFn(strings.ToUpper),
		"lower":    caseFn(strings.ToLower),
		"upper":    caseFn(strings.ToUpper),
		// sprig's title, which Loki documents: strings.Title's word rule.
		//lint:ignore SA1019 the deprecated rule is the documented behaviour
		"title": caseFn(strings.Title),
		"Replace": func(s, old, new string, n int) (string, error) {
			if err := checkGrowth(s, old, new); err != nil {
				return "", err
			}
			if err := in.b.check(len(s)); err != nil {
				return "", err
			}
			return ret(strings.Replace(s, old, new, n))
		},
		"replace": func(old, new, s string) (string, error) {
			if err := checkGrowth(s, old, new); err != nil {
				return "", err
			}
			if err := in.b.check(len(s)); err != nil {
				return "", err
			}
			return ret(strings.ReplaceAll(s, old, new))
		},
		"regexReplaceAll":        regexpFn(false),
		"regexReplaceAllLiteral": regexpFn(true),
		// The rest return a part of their input: nothing is built.
		"Trim":       strings.Trim,
		"TrimLeft":   strings.TrimLeft,
		"TrimRight":  strings.TrimRight,
		"TrimPrefix": strings.TrimPrefix,
		"TrimSuffix": strings.TrimSuffix,
		"TrimSpace":  strings.TrimSpace,
		"trim":       strings.TrimSpace,
		"trimAll":    func(cutset, s string) string { return strings.Trim(s, cutset) },
		"trimPrefix": func(prefix, s string) string { return strings.TrimPrefix(s, prefix) },
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"hasPrefix":  func(prefix, s string) bool { return strings.HasPrefix(s, prefix) },
		"hasSuffix":  func(suffix, s string) bool { return strings.HasSuffix(s, suffix) },
		"default": func(d string, given ...string) string {
			if len(given) == 0 || given[0] == "" {
				return d
			}
			return given[0]
		},
		"trunc": func(n int, s string) string {
			// Counted in bytes as sprig does; negative n keeps the end.
			switch {
			case n >= 0 && len(s) > n:
				return s[:n]
			case n < 0 && len(s) > -n:
				return s[len(s)+n:]
			}
			return s
		},
		"substr": func(start, end int, s string) string {
			if start < 0 {
				return s[:min(max(end, 0), len(s))]
			}
			if end < 0 || end > len(s) {
				return s[min(start, len(s)):]
			}
			if start > end {
				return ""
			}
			return s[start:end]
		},
		"repeat": func(n int, s string) (string, error) {
			if n < 0 || n > maxTemplateOut/max(len(s), 1) {
				return "", fmt.Errorf("repeat: count %d out of range", n)
			}
			if err := in.b.check(n * len(s)); err != nil {
				return "", err
			}
			return ret(strings.Repeat(s, n))
		},
		"print": func(args ...any) (string, error) {
			if err := in.b.check(argsLen(args) + len(args)); err != nil {
				return "", err
			}
			return ret(fmt.Sprint(args...))
		},
		"println": func(args ...any) (string, error) {
			if err := in.b.check(argsLen(args) + len(args) + 1); err != nil {
				return "", err
			}
			return ret(fmt.Sprintln(args...))
		},
		"printf": func(format string, args ...any) (string, error) {
			n, err := printfSize(format, args)
			if err != nil {
				return "", err
			}
			if err := in.b.check(n); err != nil {
				return "", err
			}
			return ret(fmt.Sprintf(format, args...))
		},
		"html":     escaper(template.HTMLEscaper),
		"js":       escaper(template.JSEscaper),
		"urlquery": escaper(template.URLQueryEscaper),
	}
}

// argLen is an upper bound of the bytes fmt's %v writes for a template
// value (a string, the data map, a number or bool); maxArgOther covers
// the values that are not strings.
func argLen(a any) int {
	switch v := a.(type) {
	case string:
		return len(v)
	case []byte:
		return len(v)
	case map[string]string:
		n := len("map[]")
		for k, x := range v {
			n += len(k) + len(x) + 2
		}
		return n
	}
	return maxArgOther
}

const maxArgOther = 64

func argsLen(args []any) int {
	n := 0
	for _, a := range args {
		n += argLen(a)
	}
	return n
}

// printfSize is an upper bound of what fmt.Sprintf(format, args...)
// writes, so that a width like %0999999d is refused before fmt builds it.
// Each verb costs its width and precision plus its argument (the largest
// one when the format picks arguments by index), four times over for the
// verbs and flags that escape or hex-encode; * widths are refused (the
// value would come from an argument).
func printfSize(format string, args []any) (int, error) {
	indexed := strings.IndexByte(format, '[') >= 0
	largest := 0
	for _, a := range args {
		largest = max(largest, argLen(a))
	}
	n := len(format) + argsLen(args) + 16*len(args) // %!(EXTRA ...)
	next := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		escapes := false
		nums := 0
		for ; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '*':
				return 0, fmt.Errorf("printf: * widths are not supported")
			case c >= '0' && c <= '9':
				v := 0
				for ; i < len(format) && format[i] >= '0' && format[i] <= '9'; i++ {
					v = min(v*10+int(format[i]-'0'), maxTemplateOut+1)
				}
				nums += v
				i--
				continue
			case c == '#' || c == '+':
				escapes = true
				continue
			case strings.IndexByte("-. []", c) >= 0:
				continue
			}
			break
		}
		if i >= len(format) {
			break
		}
		if format[i] == '%' {
			continue
		}
		arg := largest
		if !indexed {
			arg = 0
			if next < len(args) {
				arg = argLen(args[next])
			}
			next++
		}
		k := 1
		if escapes || !strings.ContainsRune("sdv", rune(format[i])) {
			k = 4
		}
		n += nums + k*arg + 16
		if n > maxTemplateWork {
			return n, nil
		}
	}
	return n, nil
}

// checkGrowth refuses a replacement whose worst case (every position of s
// replaced, as an empty old or regexp does) would pass the output limit:
// the function's result is built before the writer can stop it.
func checkGrowth(s, old, new string) error {
	if len(new) <= len(old) {
		return nil
	}
	if len(s)+1 > 4*maxTemplateOut/len(new) {
		return fmt.Errorf("replacement could grow %d bytes past %d bytes", len(s), maxTemplateOut)
	}
	return nil
}

// regexpCache holds the compiled patterns of one template's
// regexReplaceAll and regexReplaceAllLiteral calls: a template runs once
// per entry, and its pattern is almost always a constant. It keeps at
// most maxTemplateRegexps patterns.
type regexpCache struct {
	m sync.Map // string -> *regexp.Regexp
	n atomic.Int64
}

const maxTemplateRegexps = 64

// get compiles a template function's pattern with the line filters'
// limits, or returns it from the cache.
func (c *regexpCache) get(re string) (*regexp.Regexp, error) {
	if r, ok := c.m.Load(re); ok {
		return r.(*regexp.Regexp), nil
	}
	if err := checkRegex(re, 0, false); err != nil {
		return nil, fmt.Errorf("%s", err.(*ParseError).Msg)
	}
	r, err := regexp.Compile(re)
	if err != nil {
		return nil, err
	}
	if c.n.Add(1) <= maxTemplateRegexps {
		c.m.Store(re, r)
	}
	return r, nil
}

// Template bounds. Every value a template builds is a function's result
// or its output (variables are refused, so nothing else can grow), and
// both are charged to the entry as they are made: one result or output is
// at most maxTemplateOut bytes, all of them together (every template of
// the entry's pipeline, label_format's operands included) at most
// maxTemplateWork, and the labels label_format makes for one entry at
// most maxTemplateOut. Past a bound the template fails
// (__error__=TemplateFormatErr), so the memory one entry costs is bounded
// whatever the query.
const (
	maxTemplateOut  = 1 << 20
	maxTemplateWork = 4 << 20
)

// tmplBudget is what one entry's templates have built so far; its zero
// value is a fresh entry's.
type tmplBudget struct {
	work     int // bytes of function results and outputs
	labelOut int // bytes of label_format values
}

// charge records a result of n bytes, or refuses it.
func (b *tmplBudget) charge(n int) error {
	if err := b.check(n); err != nil {
		return err
	}
	b.work += n
	return nil
}

// check refuses a result of n bytes before it is built.
func (b *tmplBudget) check(n int) error {
	if n > maxTemplateOut {
		return fmt.Errorf("template value of %d bytes, longer than %d", n, maxTemplateOut)
	}
	if b.work+n > maxTemplateWork {
		return fmt.Errorf("templates built more than %d bytes for one entry", maxTemplateWork)
	}
	return nil
}

// boundedTemplate is a compiled line_format or label_format template.
// Its functions charge an entry's budget, which they cannot receive as an
// argument: each execution takes an instance (a Clone sharing the parsed
// tree, with functions bound to the instance) from a pool, so one
// template serves entries concurrently.
type boundedTemplate struct {
	t    *template.Template
	re   *regexpCache
	pool sync.Pool // *tmplInst
}

type tmplInst struct {
	t *template.Template
	b *tmplBudget // the running entry's
}

// exec runs the template over data with the entry's budget b; the output
// is at most limit bytes and is charged to b.
func (bt *boundedTemplate) exec(data map[string]string, b *tmplBudget, limit int) ([]byte, error) {
	in, _ := bt.pool.Get().(*tmplInst)
	if in == nil {
		t, err := bt.t.Clone()
		if err != nil {
			return nil, err
		}
		in = &tmplInst{}
		in.t = t.Funcs(boundedFuncs(in, bt.re))
	}
	in.b = b
	w := &limitWriter{max: min(limit, maxTemplateOut, maxTemplateWork-b.work)}
	err := in.t.Execute(w, data)
	in.b = nil
	bt.pool.Put(in)
	if err != nil {
		return nil, err
	}
	b.work += len(w.b)
	return w.b, nil
}

// compileTemplate parses a line_format or label_format template. Unknown
// functions are refused here, with the template's position. Missing
// labels read as "".
func compileTemplate(text string, pos int) (*boundedTemplate, error) {
	if len(text) > MaxPatternLen {
		return nil, errAt(pos, fmt.Sprintf("template is %d bytes, longer than the limit of %d", len(text), MaxPatternLen))
	}
	bt := &boundedTemplate{re: new(regexpCache)}
	// The parse sees the bounded functions' names; each instance binds
	// its own (boundedFuncs).
	t, err := template.New("").Option("missingkey=zero").Funcs(boundedFuncs(&tmplInst{}, bt.re)).Parse(text)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "template: :")
		return nil, errAt(pos, "invalid template: "+msg)
	}
	if !prepareTree(t) {
		return nil, errAt(pos, "invalid template: define, block, template and range actions are not supported, nor are variables")
	}
	bt.t = t
	return bt, nil
}

// lineKey is the data key that __line__ reads: prepareTree rewrites the
// function call into the field $.__line__ of the root data, so that one
// parsed template serves every entry concurrently (a per-entry function
// would need a Clone each time).
// No label has the name: names starting with __ are reserved.
const lineKey = "__line__"

// prepareTree rewrites each __line__ call of t into the field $.__line__
// (the root's, so that it reads the line inside {{with}} too) and reports
// false when t defines or calls other templates (a query's template is
// one text, and recursion through {{template}} could run forever), has a
// range action, or declares or assigns a variable (a variable holds a
// value that is never written: doubled with printf in a loop of actions,
// it would grow past any output bound).
func prepareTree(t *template.Template) bool {
	if len(t.Templates()) > 1 {
		return false
	}
	ok := true
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c)
			}
		case *parse.TemplateNode:
			ok = false
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			// {{range 1000000000}} loops without writing: no bound
			// would stop it.
			ok = false
		case *parse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.PipeNode:
			if n == nil {
				return
			}
			if len(n.Decl) > 0 || n.IsAssign {
				ok = false
			}
			for _, c := range n.Cmds {
				walk(c)
			}
		case *parse.ChainNode:
			walk(n.Node)
		case *parse.CommandNode:
			for i, a := range n.Args {
				if id, isID := a.(*parse.IdentifierNode); isID && id.Ident == lineKey {
					n.Args[i] = &parse.VariableNode{NodeType: parse.NodeVariable, Pos: id.Pos, Ident: []string{"$", lineKey}}
					continue
				}
				walk(a)
			}
		}
	}
	if t.Tree != nil {
		walk(t.Tree.Root)
	}
	return ok
}

// limitWriter fails once more than its limit is written.
type limitWriter struct {
	b   []byte
	max int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if len(w.b)+len(p) > w.max {
		return 0, fmt.Errorf("template output longer than %d bytes", w.max)
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// templateData is the entry's current labels and line as a template's
// data.
//
// The map is the labelSet's, reused from entry to entry (pooled with it):
// a template does not keep its data after Execute.
func (ls *labelSet) templateData(line []byte) map[string]string {
	m := ls.data
	if m == nil {
		m = make(map[string]string, len(ls.base)+len(ls.meta)+len(ls.ext)+3)
		ls.data = m
	}
	clear(m)
	for _, l := range ls.base {
		m[l.Name] = l.Value
	}
	for _, l := range ls.meta {
		m[l.Name] = l.Value
	}
	for _, l := range ls.ext {
		m[l.Name] = l.Value
	}
	if ls.err != "" {
		m["__error__"] = ls.err
	}
	if ls.errDetails != "" {
		m["__error_details__"] = ls.errDetails
	}
	m[lineKey] = string(line)
	return m
}

// lineFormat runs `| line_format`: the new line, or on a template error
// the line unchanged and __error__=TemplateFormatErr.
func (ls *labelSet) lineFormat(t *boundedTemplate, line []byte) []byte {
	out, err := t.exec(ls.templateData(line), &ls.tmpl, maxTemplateOut)
	if err != nil {
		ls.setErr(ErrTemplate, err.Error())
		return line
	}
	return out
}

// labelFmtEval is a compiled label_format operand.
type labelFmtEval struct {
	name   string
	rename string           // source label for a rename
	tmpl   *boundedTemplate // otherwise
}

// labelFormat runs `| label_format`: every operand reads the labels as
// they were before the stage. A rename of a label the entry does not have
// changes nothing; a template that fails sets
// __error__=TemplateFormatErr and leaves its label unchanged.
func (ls *labelSet) labelFormat(fs []labelFmtEval, line []byte) {
	type result struct {
		value string
		ok    bool
	}
	res := make([]result, len(fs))
	var data map[string]string // built once, for every template
	for i, f := range fs {
		if f.tmpl == nil {
			v, ok := ls.get(f.rename)
			res[i] = result{v, ok}
			continue
		}
		if data == nil {
			data = ls.templateData(line)
		}
		// All operands, and every label_format of the pipeline, share
		// one bound: the labels made live on into the results.
		out, err := f.tmpl.exec(data, &ls.tmpl, maxTemplateOut-ls.tmpl.labelOut)
		if err != nil {
			ls.setErr(ErrTemplate, err.Error())
			continue
		}
		ls.tmpl.labelOut += len(out)
		res[i] = result{string(out), true}
	}
	for i, f := range fs {
		if f.tmpl == nil && res[i].ok && f.rename != f.name {
			ls.remove(f.rename)
		}
	}
	for i, f := range fs {
		if res[i].ok {
			ls.set(f.name, res[i].value)
		}
	}
}

// remove takes the label name out of the entry's labels, wherever it
// came from.
func (ls *labelSet) remove(name string) {
	drop := func(l Label) bool { return l.Name == name }
	ls.ext = deleteLabels(ls.ext, drop)
	ls.meta = deleteLabels(ls.meta, drop)
	for i, l := range ls.base {
		if l.Name == name {
			kept := append([]Label(nil), ls.base[:i]...)
			ls.base, ls.dropped = append(kept, ls.base[i+1:]...), true
			break
		}
	}
}

func deleteLabels(ls []Label, drop func(Label) bool) []Label {
	kept := ls[:0]
	for _, l := range ls {
		if !drop(l) {
			kept = append(kept, l)
		}
	}
	clear(ls[len(kept):])
	return kept
}

// set gives label name the value v, replacing it wherever it came from
// (a stream label too, unlike a parser's keys: label_format names its
// target exactly).
func (ls *labelSet) set(name, v string) {
	ls.remove(name)
	ls.ext = append(ls.ext, Label{name, v})
}

// ---- compiled stages ----

// compileParser prepares a parser stage.
func compileParser(st *ParserStage) (pipeStage, error) {
	ps := pipeStage{parser: st}
	switch st.Kind {
	case ParserRegexp:
		re, names, err := compileRegexpParser(st.Expr, st.Pos)
		if err != nil {
			return ps, err
		}
		ps.re, ps.names = re, names
	case ParserPattern:
		pe, err := compilePattern(st.Expr, st.Pos)
		if err != nil {
			return ps, err
		}
		ps.pat = pe
	case ParserJSON, ParserLogfmt:
		for _, x := range st.Params {
			if err := checkParamPath(st.Kind, x.Path, x.Pos); err != nil {
				return ps, err
			}
			pe := paramEval{name: x.Name, key: x.Path}
			if st.Kind == ParserJSON {
				pe.path, _ = parseJSONPath(x.Path)
			}
			ps.params = append(ps.params, pe)
		}
	}
	return ps, nil
}

// runParser runs a compiled parser on the current line and returns the
// line after it (unpack may replace it).
func (ls *labelSet) runParser(st *pipeStage, line []byte) []byte {
	switch st.parser.Kind {
	case ParserRegexp:
		m := st.re.FindSubmatchIndex(line)
		if m == nil {
			return line
		}
		for i, n := range st.names {
			if n == "" {
				continue
			}
			v := ""
			if m[2*i] >= 0 {
				v = string(line[m[2*i]:m[2*i+1]])
			}
			ls.add([]byte(n), v)
		}
	case ParserPattern:
		st.pat.match(line, func(n string, v []byte) { ls.add([]byte(n), string(v)) })
	case ParserUnpack:
		return ls.unpack(line)
	case ParserJSON:
		if st.params != nil {
			ls.jsonParams(st.params, line)
			return line
		}
		ls.parse(st.parser, line)
	case ParserLogfmt:
		if st.params != nil {
			ls.logfmtParams(st.parser, st.params, line)
			return line
		}
		ls.parse(st.parser, line)
	}
	return line
}
