package query

// Differential tests of the pipeline's parsers and label filters against
// small oracles written from the rules in doc.go and ast.go, not from the
// code in labels.go. Where the contract is silent (logfmt escapes, text
// after a closing quote, `k=` without --keep-empty) the oracles take the
// choice labels.go's comments state; /work/notes/logql-findings.md lists
// where that differs from Loki's implementation.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// oracleStream is the stream every oracle test runs on: extracted keys
// named like these get the _extracted suffix.
var oracleStream = []Label{{"app", "web"}, {"host", "h1"}}

// oracleName maps an extracted key to its label name per doc.go: every
// character outside [A-Za-z0-9_:] becomes one '_' (an invalid byte counts
// as one character), a leading digit gets a '_' prefix, and a name the
// stream already has gets "_extracted".
func oracleName(key string, stream []Label) string {
	var b strings.Builder
	for i, r := range key {
		if i == 0 && r >= '0' && r <= '9' {
			b.WriteByte('_')
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == ':':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	for _, l := range stream {
		if l.Name == name {
			return name + "_extracted"
		}
	}
	return name
}

// oracleLabels collects extracted pairs: first value of a name wins, empty
// names are dropped.
type oracleLabels struct {
	names []string
	vals  map[string]string
}

func (o *oracleLabels) add(key, val string, stream []Label) {
	if o.vals == nil {
		o.vals = map[string]string{}
	}
	n := oracleName(key, stream)
	if n == "" {
		return
	}
	if _, dup := o.vals[n]; dup {
		return
	}
	o.names = append(o.names, n)
	o.vals[n] = val
}

// isSep: any byte up to and including ' ' (space, tab, CR, LF, controls)
// separates logfmt pairs.
func isSep(c byte) bool { return c <= ' ' }

// oracleLogfmt reads line as the logfmt stage should. It returns the
// extracted labels and whether __error__=LogfmtParserErr is set.
//
// A pair is a key, then optionally '=' and a value. A key runs to '=' or a
// separator and must be non-empty and hold no '"'. A value is either a run
// of non-separator bytes without '=' or '"', or a double-quoted string
// (backslash escapes the next byte) that must be followed by a separator
// or the end; an unquoted value may be empty (`k=`). A quoted value is
// Go-unquoted, or kept as written between the quotes when it is not a
// valid Go string (labels.go's rule: doc.go does not say). A key without
// '=' is a standalone key: kept as "" only with keepEmpty, never an error.
// A pair breaking any rule is malformed: skipped, or with strict the
// parse stops there with the error. An unterminated quote is malformed and
// ends the line.
func oracleLogfmt(line string, strict, keepEmpty bool, stream []Label) (oracleLabels, bool) {
	var out oracleLabels
	out.vals = map[string]string{}
	i := 0
	for {
		for i < len(line) && isSep(line[i]) {
			i++
		}
		if i == len(line) {
			return out, false
		}
		kStart := i
		for i < len(line) && !isSep(line[i]) && line[i] != '=' {
			i++
		}
		key := line[kStart:i]
		malformed := key == "" || strings.Contains(key, `"`)
		if i == len(line) || isSep(line[i]) {
			// standalone key
			if malformed {
				if strict {
					return out, true
				}
				continue
			}
			if keepEmpty {
				out.add(key, "", stream)
			}
			continue
		}
		i++ // '='
		var val string
		if i < len(line) && line[i] == '"' {
			end := -1
			for j := i + 1; j < len(line); j++ {
				if line[j] == '\\' {
					j++
					continue
				}
				if line[j] == '"' {
					end = j
					break
				}
			}
			if end < 0 {
				return out, strict // the rest of the line is one bad value
			}
			quoted := line[i : end+1]
			if u, err := strconv.Unquote(quoted); err == nil {
				val = u
			} else {
				val = quoted[1 : len(quoted)-1]
			}
			i = end + 1
			if i < len(line) && !isSep(line[i]) {
				malformed = true
				for i < len(line) && !isSep(line[i]) {
					i++
				}
			}
		} else {
			vStart := i
			for i < len(line) && !isSep(line[i]) {
				i++
			}
			val = line[vStart:i]
			if strings.ContainsAny(val, `="`) {
				malformed = true
			}
		}
		if malformed {
			if strict {
				return out, true
			}
			continue
		}
		out.add(key, val, stream)
	}
}

var logfmtPlans = func() map[[2]bool]*Plan {
	ps := map[[2]bool]*Plan{}
	for _, strict := range []bool{false, true} {
		for _, keep := range []bool{false, true} {
			q := `{app="web"} | logfmt`
			if strict {
				q += " --strict"
			}
			if keep {
				q += " --keep-empty"
			}
			ps[[2]bool{strict, keep}] = oraclePlan(q)
		}
	}
	return ps
}()

func oraclePlan(q string) *Plan {
	pq, err := Parse(q)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", q, err))
	}
	p, err := Compile(pq)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", q, err))
	}
	return p
}

// checkLogfmt compares the package with oracleLogfmt for all four flag
// combinations; it returns a description of the first difference.
func checkLogfmt(line string) string {
	for flags, p := range logfmtPlans {
		want, wantErr := oracleLogfmt(line, flags[0], flags[1], oracleStream)
		if reservedExtracted(want) {
			return ""
		}
		ls, ok := p.Labels(oracleStream, []byte(line))
		if !ok {
			return fmt.Sprintf("strict=%v keep-empty=%v: line %q dropped", flags[0], flags[1], line)
		}
		got := map[string]string{}
		gotErr := ""
		dup := ""
		for _, l := range ls {
			switch l.Name {
			case "__error__":
				gotErr = l.Value
				continue
			case "__error_details__":
				continue
			}
			if _, d := got[l.Name]; d {
				dup = l.Name
			}
			got[l.Name] = l.Value
		}
		wantErrS := ""
		if wantErr {
			wantErrS = ErrLogfmt
		}
		if dup != "" || gotErr != wantErrS || len(got) != len(want.vals) || !mapsEqual(got, want.vals) {
			return fmt.Sprintf("strict=%v keep-empty=%v line %q:\n got %q (__error__=%q)\nwant %q (__error__=%q)",
				flags[0], flags[1], line, ls, gotErr, want.vals, wantErrS)
		}
	}
	return ""
}

// reservedExtracted reports whether a key named __error__ or
// __error_details__ was extracted. The oracles decline such lines: doc.go
// does not say what happens then, and the package reports two labels of
// that name (a known finding, kept in an uncommitted test).
func reservedExtracted(o oracleLabels) bool {
	_, e := o.vals["__error__"]
	_, d := o.vals["__error_details__"]
	return e || d
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Hand-written lines with their labels per doc.go, so the oracle itself
// is checked, not only compared.
func TestLogfmtOracleExact(t *testing.T) {
	type want struct {
		labels map[string]string
		err    bool
	}
	cases := []struct {
		line                      string
		plain, strict, keep, both want
	}{
		{"", want{}, want{}, want{}, want{}},
		{"a=1 b=\"x y\"", want{labels: map[string]string{"a": "1", "b": "x y"}}, want{labels: map[string]string{"a": "1", "b": "x y"}},
			want{labels: map[string]string{"a": "1", "b": "x y"}}, want{labels: map[string]string{"a": "1", "b": "x y"}}},
		// standalone key: kept only with --keep-empty, never an error
		{"flag a=1", want{labels: map[string]string{"a": "1"}}, want{labels: map[string]string{"a": "1"}},
			want{labels: map[string]string{"flag": "", "a": "1"}}, want{labels: map[string]string{"flag": "", "a": "1"}}},
		// = inside quotes, escaped quote
		{`msg="k=v \"q\"" x=2`, want{labels: map[string]string{"msg": `k=v "q"`, "x": "2"}}, want{labels: map[string]string{"msg": `k=v "q"`, "x": "2"}},
			want{labels: map[string]string{"msg": `k=v "q"`, "x": "2"}}, want{labels: map[string]string{"msg": `k=v "q"`, "x": "2"}}},
		// malformed value skipped; strict stops and keeps what came before
		{"a=1 b=c=d e=2", want{labels: map[string]string{"a": "1", "e": "2"}}, want{labels: map[string]string{"a": "1"}, err: true},
			want{labels: map[string]string{"a": "1", "e": "2"}}, want{labels: map[string]string{"a": "1"}, err: true}},
		// duplicate: first wins; stream label clash: _extracted
		{"app=x a=1 a=2 host=y", want{labels: map[string]string{"app_extracted": "x", "a": "1", "host_extracted": "y"}},
			want{labels: map[string]string{"app_extracted": "x", "a": "1", "host_extracted": "y"}},
			want{labels: map[string]string{"app_extracted": "x", "a": "1", "host_extracted": "y"}},
			want{labels: map[string]string{"app_extracted": "x", "a": "1", "host_extracted": "y"}}},
		// sanitising: '.', '-', leading digit, a multi-byte rune, an invalid byte
		{"a.b=1 1x=2 ü=3 \xffz=4 c:d=5", want{labels: map[string]string{"a_b": "1", "_1x": "2", "_": "3", "_z": "4", "c:d": "5"}},
			want{labels: map[string]string{"a_b": "1", "_1x": "2", "_": "3", "_z": "4", "c:d": "5"}},
			want{labels: map[string]string{"a_b": "1", "_1x": "2", "_": "3", "_z": "4", "c:d": "5"}},
			want{labels: map[string]string{"a_b": "1", "_1x": "2", "_": "3", "_z": "4", "c:d": "5"}}},
		// unterminated quote (trailing backslash escapes the would-be end)
		{`a=1 b="x\"`, want{labels: map[string]string{"a": "1"}}, want{labels: map[string]string{"a": "1"}, err: true},
			want{labels: map[string]string{"a": "1"}}, want{labels: map[string]string{"a": "1"}, err: true}},
		// tabs and CRLF separate; empty values
		{"a=\tb=\"\"\r\nc=3", want{labels: map[string]string{"a": "", "b": "", "c": "3"}}, want{labels: map[string]string{"a": "", "b": "", "c": "3"}},
			want{labels: map[string]string{"a": "", "b": "", "c": "3"}}, want{labels: map[string]string{"a": "", "b": "", "c": "3"}}},
		// missing key
		{"=1 a=2", want{labels: map[string]string{"a": "2"}}, want{err: true},
			want{labels: map[string]string{"a": "2"}}, want{err: true}},
	}
	for _, tc := range cases {
		for i, w := range []want{tc.plain, tc.strict, tc.keep, tc.both} {
			strict, keep := i&1 == 1, i&2 == 2
			o, oerr := oracleLogfmt(tc.line, strict, keep, oracleStream)
			wl := w.labels
			if wl == nil {
				wl = map[string]string{}
			}
			if !mapsEqual(o.vals, wl) || oerr != w.err {
				t.Errorf("oracle strict=%v keep=%v %q: %q err=%v, want %q err=%v", strict, keep, tc.line, o.vals, oerr, wl, w.err)
			}
		}
		if d := checkLogfmt(tc.line); d != "" {
			t.Error(d)
		}
	}
}

var (
	lfKeys = []string{"a", "b", "level", "app", "host", "app_extracted", "a.b", "a-b", "a_b", "1x", "ü", "日本",
		"\xff", "k\xc3", "x:y", `k"q`, "", "_", "A"}
	lfVals = []string{"", "1", "x", "5s", "10KB", "ü", "\xfe", "a=b", `a"b`, `"q"`, `"x y"`, `"a=b"`, `"\""`, `"\\"`,
		`"tab\tnl\n"`, `"\x41"`, `"\q"`, `"\u00e9"`, `"trail\`, `"`, `""`, `"x"y`, `"日本 語"`, `"\xff"`, `"\` + "\xff" + `"`}
	lfSeps = []string{" ", " ", "  ", "\t", "\r\n", "\n", "\x00", "\x1f", ""}
)

func randLogfmtLine(r *rand.Rand) string {
	var b strings.Builder
	n := r.IntN(6)
	for i := 0; i < n; i++ {
		if i > 0 || r.IntN(4) == 0 {
			b.WriteString(lfSeps[r.IntN(len(lfSeps))])
		}
		b.WriteString(lfKeys[r.IntN(len(lfKeys))])
		switch r.IntN(6) {
		case 0: // standalone
		case 1:
			b.WriteString("=")
		default:
			b.WriteString("=" + lfVals[r.IntN(len(lfVals))])
		}
	}
	if r.IntN(5) == 0 {
		b.WriteString(lfSeps[r.IntN(len(lfSeps))])
	}
	return b.String()
}

func TestLogfmtOracleRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fails := 0
	// what the generated lines exercise, so that a generator that stops
	// producing some shape is noticed
	var strictErrs, standalone, clashes, quoted int
	for i := 0; i < 20000; i++ {
		line := randLogfmtLine(r)
		if _, e := oracleLogfmt(line, true, false, oracleStream); e {
			strictErrs++
		}
		plain, _ := oracleLogfmt(line, false, false, oracleStream)
		keep, _ := oracleLogfmt(line, false, true, oracleStream)
		if len(keep.vals) > len(plain.vals) {
			standalone++
		}
		if _, ok := plain.vals["app_extracted"]; ok {
			clashes++
		}
		if strings.Contains(line, `="`) {
			quoted++
		}
		if d := checkLogfmt(line); d != "" {
			t.Error(d)
			if fails++; fails > 5 {
				t.FailNow()
			}
		}
	}
	t.Logf("20000 lines x 4 flag sets: %d strict errors, %d with standalone keys, %d with app_extracted, %d with quoted values",
		strictErrs, standalone, clashes, quoted)
	if strictErrs < 1000 || standalone < 1000 || clashes < 1000 || quoted < 1000 {
		t.Errorf("generator too narrow")
	}
}

// FuzzLogfmtOracle compares the logfmt stage with oracleLogfmt on
// arbitrary lines, for every combination of --strict and --keep-empty.
func FuzzLogfmtOracle(f *testing.F) {
	for _, s := range []string{
		"a=1 b=\"x y\" flag", `msg="k=v \"q\"" x=2`, "a=1 b=c=d e=2", "app=x a=1 a=2 host=y",
		"a.b=1 1x=2 ü=3 \xffz=4", `a=1 b="x\"`, "a=\tb=\"\"\r\nc=3", "=1 a=2", `a="x"y b=1`, `k"q=1 c=2`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if d := checkLogfmt(line); d != "" {
			t.Fatal(d)
		}
	})
}

// ---- label filters ----

// lfTerm is a random label filter: a leaf predicate or a left-folded chain
// of terms joined by and/or (written as and, or, ',' or juxtaposition).
type lfTerm struct {
	// leaf
	name, op, lit string
	str           bool // string matcher (lit is the unquoted string)
	// chain
	terms []*lfTerm
	ors   []bool // ors[i] joins terms[i] and terms[i+1]
	paren bool
}

var (
	lfNames    = []string{"a", "b", "c", "missing", "app", "app_extracted", "__error__"}
	lfNumLits  = []string{"0", "1", "-1", "1.5", "500", "1000", "0.001", "-0.5"}
	lfDurLits  = []string{"1s", "500ms", "1.5s", "1m", "1h30m", "0s", "-2s", "100us", "1µs"}
	lfByteLits = []string{"1KB", "1kB", "1KiB", "1kib", "10MB", "1.5MiB", "20B", "20b", "1GB", "0B"}
	lfStrLits  = []string{"", "1", "abc", "5s", "10KB", "LabelFilterErr", "web"}
	lfReLits   = []string{".*", "a.*", "[0-9]+", "", ".+s", "(?i)ABC"}
	// values the extracted labels take: numbers, durations and sizes in
	// forms each conversion accepts or refuses
	lfValues = []string{"", "0", "1", "-1", "1.5", "500", "1000", "0.001", "1e3", "NaN", "Inf", "0x10", "abc",
		"1s", "500ms", "1000ms", "1.5s", "60s", "1m", "90m", "1h30m", "-2s", "0.1us", "1µs",
		"1KB", "1000", "1kb", "1KiB", "1024B", "1024", "1.5MiB", "20B", "10 KB", "1k", "1Ki", "1.5", "-1KB", ".5KB", "5.KB", "1GB", "web"}
)

func randLeaf(r *rand.Rand) *lfTerm {
	t := &lfTerm{name: lfNames[r.IntN(len(lfNames))]}
	switch r.IntN(5) {
	case 0:
		t.str = true
		t.op = []string{"=", "==", "!="}[r.IntN(3)]
		t.lit = lfStrLits[r.IntN(len(lfStrLits))]
	case 1:
		t.str = true
		t.op = []string{"=~", "!~"}[r.IntN(2)]
		t.lit = lfReLits[r.IntN(len(lfReLits))]
	default:
		t.op = []string{"==", "=", "!=", ">", ">=", "<", "<="}[r.IntN(7)]
		pool := [][]string{lfNumLits, lfDurLits, lfByteLits}[r.IntN(3)]
		t.lit = pool[r.IntN(len(pool))]
	}
	return t
}

func randExpr(r *rand.Rand, depth int) *lfTerm {
	n := 1 + r.IntN(4)
	c := &lfTerm{}
	for i := 0; i < n; i++ {
		if depth > 0 && r.IntN(4) == 0 {
			sub := randExpr(r, depth-1)
			sub.paren = true
			c.terms = append(c.terms, sub)
		} else {
			c.terms = append(c.terms, randLeaf(r))
		}
		if i > 0 {
			c.ors = append(c.ors, r.IntN(2) == 0)
		}
	}
	return c
}

func (t *lfTerm) render(r *rand.Rand, b *strings.Builder) {
	if t.terms == nil {
		b.WriteString(t.name + t.op)
		if t.str {
			b.WriteString(strconv.Quote(t.lit))
		} else {
			b.WriteString(t.lit)
		}
		return
	}
	if t.paren {
		b.WriteString("(")
	}
	for i, s := range t.terms {
		if i > 0 {
			if t.ors[i-1] {
				b.WriteString(" or ")
			} else {
				b.WriteString([]string{" and ", ", ", " "}[r.IntN(3)])
			}
		}
		s.render(r, b)
	}
	if t.paren {
		b.WriteString(")")
	}
}

// oracleEnv is the label state while a filter runs: labels visible to
// predicates and the __error__ value.
type oracleEnv struct {
	labels map[string]string
	err    string
}

func (e *oracleEnv) get(name string) (string, bool) {
	if name == "__error__" {
		return e.err, e.err != ""
	}
	v, ok := e.labels[name]
	return v, ok
}

// oracleLitValue converts a query literal per doc.go's grammar: a plain
// number, else a Go duration, else a number with a bytes unit.
func oracleLitValue(s string) (kind int, v float64) {
	if plainNumberRE.MatchString(s) {
		f, _ := strconv.ParseFloat(s, 64)
		return 0, f
	}
	if d, err := time.ParseDuration(s); err == nil {
		return 1, d.Seconds()
	}
	v, ok := oracleBytes(s)
	if !ok {
		panic("bad literal " + s)
	}
	return 2, v
}

var (
	plainNumberRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	bytesLitRE    = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([A-Za-z]+)$`)
)

var oracleUnits = map[string]float64{"b": 1, "kb": 1000, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15, "eb": 1e18,
	"kib": 1024, "mib": 1024 * 1024, "gib": 1 << 30, "tib": 1 << 40, "pib": 1 << 50, "eib": 1 << 60}

// oracleBytes reads "<number><unit>" with a unit of doc.go's list.
func oracleBytes(s string) (float64, bool) {
	m := bytesLitRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	mult, ok := oracleUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, false
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	return f * mult, true
}

// oracleValueBytes converts a label value to bytes. doc.go only says the
// value is converted; ast.go documents "42MB", "1.5KiB". Values of other
// shapes are decided by the caller (see byteValueDecided).
func oracleValueBytes(s string) (float64, bool) {
	if plainNumberRE.MatchString(s) && s[0] != '-' {
		f, _ := strconv.ParseFloat(s, 64)
		return f, true // a plain count of bytes
	}
	return oracleBytes(s)
}

// byteValueDecided reports whether the contract decides how a label value
// converts to bytes: a plain number, a number with one of doc.go's units,
// or something with no digits at all.
func byteValueDecided(s string) bool {
	if _, ok := oracleValueBytes(s); ok {
		return true
	}
	return !strings.ContainsAny(s, "0123456789")
}

func (t *lfTerm) eval(e *oracleEnv) bool {
	if t.terms != nil {
		res := t.terms[0].eval(e)
		for i, s := range t.terms[1:] {
			if t.ors[i] {
				res = res || s.eval(e)
			} else {
				res = res && s.eval(e)
			}
		}
		return res
	}
	if t.str {
		v, _ := e.get(t.name)
		switch t.op {
		case "=", "==":
			return v == t.lit
		case "!=":
			return v != t.lit
		}
		m := regexp.MustCompile(`^(?:` + t.lit + `)$`).MatchString(v)
		return m == (t.op == "=~")
	}
	if e.err != "" {
		return true
	}
	v, ok := e.get(t.name)
	if !ok {
		return false
	}
	kind, y := oracleLitValue(t.lit)
	var x float64
	var err error
	switch kind {
	case 0:
		x, err = strconv.ParseFloat(v, 64)
	case 1:
		var d time.Duration
		d, err = time.ParseDuration(v)
		x = d.Seconds()
	case 2:
		var ok bool
		x, ok = oracleValueBytes(v)
		if !ok {
			err = strconv.ErrSyntax
		}
	}
	if err != nil {
		e.err = ErrLabelFilter
		return true
	}
	switch t.op {
	case "==", "=":
		return x == y
	case "!=":
		return x != y
	case ">":
		return x > y
	case ">=":
		return x >= y
	case "<":
		return x < y
	}
	return x <= y
}

// usesUndecided reports whether a bytes predicate of t meets a value whose
// conversion the contract leaves open.
func (t *lfTerm) usesUndecided(vals map[string]string) bool {
	if t.terms != nil {
		for _, s := range t.terms {
			if s.usesUndecided(vals) {
				return true
			}
		}
		return false
	}
	if t.str {
		return false
	}
	if k, _ := oracleLitValue(t.lit); k != 2 {
		return false
	}
	v, ok := vals[t.name]
	return ok && !byteValueDecided(v)
}

func TestLabelFilterOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	stream := []Label{{"app", "web"}}
	cases, skipped, fails, passed, filterErrs := 0, 0, 0, 0, 0
	for i := 0; i < 6000; i++ {
		// extracted labels a, b, c (some missing) and app_extracted
		vals := map[string]string{"app": "web"}
		var line strings.Builder
		for _, k := range []string{"a", "b", "c", "app"} {
			if r.IntN(5) == 0 {
				continue
			}
			v := lfValues[r.IntN(len(lfValues))]
			fmt.Fprintf(&line, "%s=%s ", k, strconv.Quote(v))
			if k == "app" {
				k = "app_extracted"
			}
			vals[k] = v
		}
		parser := "logfmt"
		preErr := ""
		if r.IntN(5) == 0 {
			// a malformed pair last: __error__ is set before the filters
			line.WriteString("z=a=b")
			parser, preErr = "logfmt --strict", ErrLogfmt
		}
		expr := randExpr(r, 2)
		var qb strings.Builder
		expr.render(r, &qb)
		// a second filter stage shows how __error__ carries on
		tail := []string{"", ` | __error__=""`, ` | __error__!=""`, " | a > 0"}[r.IntN(4)]
		q := `{app="web"} | ` + parser + ` | ` + qb.String() + tail
		if expr.usesUndecided(vals) {
			skipped++
			continue
		}
		p := oraclePlan(q)
		env := &oracleEnv{labels: vals, err: preErr}
		want := expr.eval(env)
		if want {
			switch tail {
			case ` | __error__=""`:
				want = env.err == ""
			case ` | __error__!=""`:
				want = env.err != ""
			case " | a > 0":
				want = (&lfTerm{name: "a", op: ">", lit: "0"}).eval(env)
			}
		}
		cases++
		if want {
			passed++
		}
		if env.err == ErrLabelFilter {
			filterErrs++
		}
		ls, ok := p.Labels(stream, []byte(line.String()))
		gotErr := ""
		for _, l := range ls {
			if l.Name == "__error__" {
				gotErr = l.Value
			}
		}
		wantErr := env.err
		if !want {
			wantErr = ""
		}
		if ok != want || gotErr != wantErr {
			t.Errorf("%s on %q: passed=%v __error__=%q, want passed=%v __error__=%q", q, line.String(), ok, gotErr, want, wantErr)
			if fails++; fails > 5 {
				t.FailNow()
			}
		}
	}
	t.Logf("%d filter cases compared (%d pass, %d set LabelFilterErr), %d left out (bytes conversion of a value the contract does not decide)",
		cases, passed, filterErrs, skipped)
	if passed < cases/5 || cases-passed < cases/5 || filterErrs < cases/20 {
		t.Errorf("generator too narrow")
	}
}

// ---- json ----

// oracleJSON flattens a JSON object with encoding/json per doc.go: nested
// keys joined with "_", arrays skipped, strings unescaped, numbers and
// booleans as written, null as "", names sanitized and suffixed like
// logfmt's. ok is false when the line is not a JSON object.
func oracleJSON(line string, stream []Label) (oracleLabels, bool) {
	var out oracleLabels
	out.vals = map[string]string{}
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var top json.RawMessage
	if err := dec.Decode(&top); err != nil || !json.Valid([]byte(line)) {
		return out, false
	}
	if t := strings.TrimLeft(string(top), " \t\r\n"); !strings.HasPrefix(t, "{") {
		return out, false
	}
	var walk func(prefix string, raw json.RawMessage)
	walk = func(prefix string, raw json.RawMessage) {
		d := json.NewDecoder(strings.NewReader(string(raw)))
		d.UseNumber()
		d.Token() // '{'
		for d.More() {
			kt, _ := d.Token()
			var v json.RawMessage
			if err := d.Decode(&v); err != nil {
				panic(err)
			}
			key := prefix + kt.(string)
			switch s := strings.TrimSpace(string(v)); {
			case strings.HasPrefix(s, "{"):
				walk(key+"_", v)
			case strings.HasPrefix(s, "["):
			case strings.HasPrefix(s, `"`):
				var str string
				json.Unmarshal(v, &str)
				out.add(key, str, stream)
			case s == "null":
				out.add(key, "", stream)
			default:
				out.add(key, s, stream)
			}
		}
	}
	walk("", top)
	return out, true
}

func checkJSON(line string) string {
	p := jsonPlan
	want, isObj := oracleJSON(line, oracleStream)
	if reservedExtracted(want) {
		return ""
	}
	ls, ok := p.Labels(oracleStream, []byte(line))
	if !ok {
		return fmt.Sprintf("line %q dropped", line)
	}
	got := map[string]string{}
	gotErr := ""
	for _, l := range ls {
		switch l.Name {
		case "__error__":
			gotErr = l.Value
			continue
		case "__error_details__":
			continue
		}
		if _, d := got[l.Name]; d {
			return fmt.Sprintf("line %q: label %s twice in %q", line, l.Name, ls)
		}
		got[l.Name] = l.Value
	}
	if !isObj {
		if gotErr != ErrJSON {
			return fmt.Sprintf("line %q is not a JSON object: got %q", line, ls)
		}
		return ""
	}
	if gotErr != "" || !mapsEqual(got, want.vals) {
		return fmt.Sprintf("line %q:\n got %q\nwant %q", line, ls, want.vals)
	}
	return ""
}

var jsonPlan = oraclePlan(`{app="web"} | json`)

func TestJSONOracleExact(t *testing.T) {
	cases := []struct {
		line string
		want map[string]string // nil: JSONParserErr
	}{
		{`{}`, map[string]string{}},
		{` { "a" : { "b" : { "c" : 1 } } , "d":[1,{"e":2}], "f":null, "g":true, "h":-1.50e+3 } `,
			map[string]string{"a_b_c": "1", "f": "", "g": "true", "h": "-1.50e+3"}},
		{`{"app":"x","app_extracted":"y","host":{"n":1}}`, map[string]string{"app_extracted": "x", "host_n": "1"}},
		{`{"a_b":1,"a":{"b":2},"a.b":3}`, map[string]string{"a_b": "1"}},
		{`{"a":1,"a":2}`, map[string]string{"a": "1"}},
		{`{"1x":1,"ü":2,"a-b":3,"":4,"c:d":5,"\u0041":6}`, map[string]string{"_1x": "1", "_": "2", "a_b": "3", "c:d": "5", "A": "6"}},
		{`{"s":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800x"}`, map[string]string{"s": "\"\\/\b\f\n\r\té😀\ufffdx"}},
		{`{"e":{},"arr":[]}`, map[string]string{}},
		{`[{"a":1}]`, nil}, {`"a"`, nil}, {`1`, nil}, {`{"a":1`, nil}, {``, nil}, {`{"a":1} {}`, nil}, {`null`, nil},
	}
	for _, tc := range cases {
		o, ok := oracleJSON(tc.line, oracleStream)
		if ok != (tc.want != nil) || (ok && !mapsEqual(o.vals, tc.want)) {
			t.Errorf("oracle %q: %q %v, want %q", tc.line, o.vals, ok, tc.want)
		}
		if d := checkJSON(tc.line); d != "" {
			t.Error(d)
		}
	}
}

func randJSONValue(r *rand.Rand, depth int, b *strings.Builder) {
	switch k := r.IntN(9); {
	case k == 0 && depth > 0:
		randJSONObject(r, depth-1, b)
	case k == 1 && depth > 0:
		b.WriteString("[")
		for i := r.IntN(3); i > 0; i-- {
			randJSONValue(r, depth-1, b)
			if i > 1 {
				b.WriteString(",")
			}
		}
		b.WriteString("]")
	case k == 2:
		b.WriteString([]string{"null", "true", "false"}[r.IntN(3)])
	case k == 3:
		b.WriteString([]string{"0", "-0", "1.5", "1e3", "-2.50E-1", "12345678901234567890123"}[r.IntN(6)])
	default:
		b.WriteString([]string{`""`, `"x"`, `"a b"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\ud800"`, `"\"\\\/"`, `"tab\t"`, `"日本"`, `"k=v"`}[r.IntN(10)])
	}
}

var jsonKeys = []string{"a", "b", "a_b", "app", "host", "app_extracted", "a.b", "1x", "ü", "", "\\u0041", "x y", "_"}

func randJSONObject(r *rand.Rand, depth int, b *strings.Builder) {
	ws := []string{"", " ", "\n", "\t"}
	b.WriteString("{" + ws[r.IntN(4)])
	n := r.IntN(5)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(ws[r.IntN(4)] + "," + ws[r.IntN(4)])
		}
		b.WriteString(`"` + jsonKeys[r.IntN(len(jsonKeys))] + `"` + ws[r.IntN(4)] + ":" + ws[r.IntN(4)])
		randJSONValue(r, depth, b)
	}
	b.WriteString(ws[r.IntN(4)] + "}")
}

func TestJSONOracleRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	fails := 0
	for i := 0; i < 10000; i++ {
		var b strings.Builder
		randJSONObject(r, 3, &b)
		line := b.String()
		if r.IntN(10) == 0 && len(line) > 1 {
			line = line[:r.IntN(len(line))] // mostly invalid
		}
		if d := checkJSON(line); d != "" {
			t.Error(d)
			if fails++; fails > 5 {
				t.FailNow()
			}
		}
	}
}

// FuzzJSONOracle compares the json stage with oracleJSON on arbitrary
// lines. Lines that are not valid UTF-8 are left out: encoding/json turns
// invalid bytes into U+FFFD and doc.go does not say what the stage keeps.
func FuzzJSONOracle(f *testing.F) {
	for _, s := range []string{
		`{"a":{"b":1},"d":[1,{"e":2}],"f":null,"g":true,"h":-1.5e3}`,
		`{"app":"x","app_extracted":"y","a_b":1,"a":{"b":2}}`,
		`{"1x":1,"\u00fc":2,"":3,"s":"\ud83d\ude00\ud800"}`,
		`[1]`, `{"a":1`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if !utf8.ValidString(line) {
			return
		}
		if d := checkJSON(line); d != "" {
			t.Fatal(d)
		}
	})
}
