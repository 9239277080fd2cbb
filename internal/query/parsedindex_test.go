package query

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"haystack/internal/attrs"
	"haystack/internal/testseed"
)

// gramIndex is a skip index of one entry, as segment builds it: the
// ASCII-lowered 4-grams of the line, and of each metadata value on its
// own. A literal shorter than a gram is a maybe. With escapes (segment
// format 7) an escape leaf (Need.Escaped) asks which ASCII characters
// the line's escapes spell (lineEscapes); without, its whole escapes'
// grams (Need.X), as before format 7.
type gramIndex struct {
	line, values map[string]bool
	escapes      bool
	spelled      [128]bool
}

// lineEscapes reports the ASCII characters an escape in line spells,
// read naively: a backslash, then u and 4 hex digits, U and 8, x and 2,
// or 3 octal digits (whatever precedes the backslash).
func lineEscapes(line []byte) (out [128]bool) {
	for i := range line {
		if line[i] != '\\' {
			continue
		}
		rest := string(line[i+1:])
		for _, f := range []struct {
			prefix string
			digits int
			base   int
		}{{"u", 4, 16}, {"U", 8, 16}, {"x", 2, 16}, {"", 3, 8}} {
			if !strings.HasPrefix(rest, f.prefix) || len(rest) < len(f.prefix)+f.digits {
				continue
			}
			d := rest[len(f.prefix) : len(f.prefix)+f.digits]
			if strings.ContainsAny(d, "+-_") {
				continue
			}
			if v, err := strconv.ParseUint(d, f.base, 32); err == nil && v < 128 {
				out[v] = true
			}
		}
	}
	return out
}

func lowerGrams(dst map[string]bool, s []byte) {
	low := append([]byte(nil), s...)
	for i, c := range low {
		if 'A' <= c && c <= 'Z' {
			low[i] = c + 'a' - 'A'
		}
	}
	for i := 0; i+4 <= len(low); i++ {
		dst[string(low[i:i+4])] = true
	}
}

func newGramIndex(line []byte, meta []byte) gramIndex {
	ix := gramIndex{line: map[string]bool{}, values: map[string]bool{}}
	lowerGrams(ix.line, line)
	attrs.Each(meta, func(_, v []byte) bool {
		lowerGrams(ix.values, v)
		return true
	})
	return ix
}

func (ix gramIndex) mayExpr(x *Expr, grams map[string]bool) bool {
	switch x.Op {
	case OpNone:
		return false
	case OpLit:
		t := []byte(x.Lit.Text)
		if len(t) < 4 {
			return true
		}
		g := map[string]bool{}
		lowerGrams(g, t)
		for k := range g {
			if !grams[k] {
				return false
			}
		}
		return true
	case OpAnd:
		for _, s := range x.Sub {
			if !ix.mayExpr(s, grams) {
				return false
			}
		}
		return true
	case OpOr:
		for _, s := range x.Sub {
			if ix.mayExpr(s, grams) {
				return true
			}
		}
		return false
	}
	return true
}

func (ix gramIndex) may(n *Need) bool {
	if n == nil {
		return true
	}
	switch n.Op {
	case OpNone:
		return false
	case OpLit:
		if n.Values {
			return ix.mayExpr(n.X, ix.values)
		}
		if n.Escaped != "" && ix.escapes {
			for _, c := range []byte(n.Escaped) {
				if ix.spelled[c] {
					return true
				}
			}
			return false
		}
		return ix.mayExpr(n.X, ix.line)
	case OpAnd:
		for _, s := range n.Sub {
			if !ix.may(s) {
				return false
			}
		}
		return true
	case OpOr:
		for _, s := range n.Sub {
			if ix.may(s) {
				return true
			}
		}
		return false
	}
	return true
}

// checkNeed fails when p matches the entry but its LabelIndex rules the
// entry's index out (a lost match); it reports whether p matched and
// whether the index ruled the entry out.
func checkNeed(t *testing.T, p *Plan, src string, stream []Label, meta, line []byte) (matched, pruned bool) {
	t.Helper()
	n := p.LabelIndex(stream)
	ix := newGramIndex(line, meta)
	may := ix.may(n)
	ix.escapes, ix.spelled = true, lineEscapes(line)
	may7 := ix.may(n) // as format 7 answers
	ok := p.MatchEntryAttrs(stream, meta, line)
	if ok && (!may || !may7) {
		t.Fatalf("%s: the entry matches but LabelIndex %v rules it out (without escape grams %v, with %v)\nstream %v\nmeta %q\nline %q",
			src, n, may, may7, stream, meta, line)
	}
	return ok, !may7
}

// Characters values are made of: hex digits and letters (ids), and those
// an escape may spell or that the parsers treat apart.
var valueRunes = []rune("0123456789abcdefABCDEFxyz_-.: /\"\\\n\té😀\uFFFD\u2028=")

func randValue(rng *rand.Rand) string {
	var b strings.Builder
	n := 1 + rng.IntN(12)
	for range n {
		if rng.IntN(3) > 0 {
			b.WriteByte("0123456789abcdef"[rng.IntN(16)])
		} else {
			b.WriteRune(valueRunes[rng.IntN(len(valueRunes))])
		}
	}
	return b.String()
}

// jsonString writes v as a JSON string, each character raw or escaped in
// one of the ways JSON allows, chosen at random.
func jsonString(rng *rand.Rand, v string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range v {
		esc := rng.IntN(4) == 0
		switch {
		case r == '"' || r == '\\':
			if esc {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteByte('\\')
				b.WriteRune(r)
			}
		case r == '\n':
			b.WriteString([]string{`\n`, `\u000a`}[rng.IntN(2)])
		case r == '\t':
			b.WriteString([]string{`\t`, `\u0009`}[rng.IntN(2)])
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		case r == '/' && esc:
			b.WriteString(`\/`)
		case r == utf8.RuneError && esc:
			b.WriteString(`\ud800`) // a lone surrogate gives U+FFFD
		case esc && r > 0xFFFF:
			r1 := 0xD800 + (r-0x10000)>>10
			r2 := 0xDC00 + (r-0x10000)&0x3FF
			fmt.Fprintf(&b, `\u%04x\u%04X`, r1, r2)
		case esc:
			f := []string{`\u%04x`, `\u%04X`}[rng.IntN(2)]
			fmt.Fprintf(&b, f, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// logfmtValue writes v as a logfmt value: unquoted when it can be,
// otherwise quoted with each character raw or escaped in one of the ways
// strconv.Unquote reads.
func logfmtValue(rng *rand.Rand, v string) string {
	if rng.IntN(3) == 0 && !strings.ContainsAny(v, " \"=\n\t\\") && utf8.ValidString(v) {
		return v
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range v {
		esc := rng.IntN(3) == 0
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString([]string{`\t`, `\x09`, `\011`}[rng.IntN(3)])
		case r == utf8.RuneError && esc:
			b.WriteByte(0xff) // an invalid byte gives U+FFFD
		case esc:
			switch rng.IntN(4) {
			case 0:
				if r <= 0xFFFF {
					fmt.Fprintf(&b, `\u%04X`, r)
				} else {
					fmt.Fprintf(&b, `\U%08x`, r)
				}
			case 1:
				fmt.Fprintf(&b, `\U%08X`, r)
			case 2:
				for _, c := range []byte(string(r)) {
					fmt.Fprintf(&b, `\x%02X`, c)
				}
			default:
				for _, c := range []byte(string(r)) {
					fmt.Fprintf(&b, `\%03o`, c)
				}
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestLabelIndexOracle: for random values written into JSON, logfmt and
// plain lines raw and escaped in every way the parsers read, metadata
// and stream labels that hold them, and random label filters after
// parsers, no entry a plan matches is ruled out by its LabelIndex over
// the entry's grams (the index the segment writes); and the index does
// rule out entries (it is used).
func TestLabelIndexOracle(t *testing.T) {
	seed := testseed.Seed(t, "HAY_PARSEDINDEX_SEED")
	t.Logf("seed %d (HAY_PARSEDINDEX_SEED)", seed)
	rng := rand.New(rand.NewPCG(seed, 92))
	matched, pruned, rejected := 0, 0, 0
	for range 10000 {
		v := randValue(rng)
		other := randValue(rng)
		// The line: the value (or another) under k, in one format.
		lv := v
		if rng.IntN(4) == 0 {
			lv = other
		}
		if rng.IntN(8) == 0 {
			lv = v + other // a value containing v
		}
		var line string
		switch rng.IntN(4) {
		case 0:
			line = fmt.Sprintf(`{"a":1,"k":%s,"n":{"k":%s}}`, jsonString(rng, lv), jsonString(rng, other))
		case 1:
			line = fmt.Sprintf(`{"k":%s,"k":"dup"}`, jsonString(rng, lv))
		case 2:
			line = fmt.Sprintf(`level=info k=%s other=%s`, logfmtValue(rng, lv), logfmtValue(rng, other))
		default:
			line = "GET " + lv + " done"
		}
		stream := []Label{{"app", "a"}}
		if rng.IntN(6) == 0 {
			stream = append(stream, Label{"k", []string{v, other}[rng.IntN(2)]})
		}
		if rng.IntN(10) == 0 {
			stream = append(stream, Label{"k_extracted", v})
		}
		var meta []byte
		switch rng.IntN(5) {
		case 0:
			meta = attrs.MustPairs("k", []string{v, other}[rng.IntN(2)])
		case 1:
			meta = attrs.MustPairs("k_extracted", v, "z", other)
		}
		parser := []string{
			"| json", "| logfmt", "| json | logfmt", `| regexp "GET (?P<k>.*) done"`,
			`| pattern "GET <k> done"`, `| json k="k"`, `| json k="n.k"`, `| logfmt k`, "| unpack",
			"| json n_k", "| drop k | json", "",
		}[rng.IntN(12)]
		var filter string
		q := strconv.Quote(v)
		switch rng.IntN(10) {
		case 0:
			filter = fmt.Sprintf(`k=~%s`, strconv.Quote("(?i)"+regexpQuote(strings.ToUpper(v))))
		case 1:
			filter = fmt.Sprintf(`k=~%s`, strconv.Quote(".*"+regexpQuote(v)+".*"))
		case 2:
			filter = fmt.Sprintf(`k=%s or k=%s`, q, strconv.Quote(other))
		case 3:
			filter = fmt.Sprintf(`k=%s and a="1"`, q)
		case 4:
			filter = fmt.Sprintf(`k_extracted=%s`, q)
		case 5:
			filter = fmt.Sprintf(`n_k=%s`, q)
		case 6:
			filter = fmt.Sprintf(`k=%s | drop a | z!="x"`, q)
		default:
			filter = fmt.Sprintf(`k=%s`, q)
		}
		src := fmt.Sprintf(`{app="a"} %s | %s`, parser, filter)
		p, err := Compile(mustParse(t, src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		ok, pr := checkNeed(t, p, src, stream, meta, []byte(line))
		switch {
		case ok:
			matched++
		case pr:
			pruned++
		default:
			rejected++
		}
	}
	t.Logf("%d entries matched, %d ruled out by the index, %d others", matched, pruned, rejected)
	if matched < 1500 || pruned < 1500 {
		t.Errorf("matched %d, ruled out %d: the test would prove little", matched, pruned)
	}
}

// regexpQuote is regexp.QuoteMeta without importing regexp twice.
func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestLabelIndexRules: the requirement of typical filters after parsers,
// exactly, and where the analysis gives up.
func TestLabelIndexRules(t *testing.T) {
	const id = "5f89b9dc03bdc1981f886353c7c0df13"
	stream := []Label{{"app", "x"}}
	for _, c := range []struct{ q, want string }{
		{`{app="x"} | json | trace_id="` + id + `"`,
			`(values"` + id + `" OR line"` + id + `" OR escaped"01356789bcdf")`},
		{`{app="x"} | regexp "t=(?P<trace_id>\\S+)" | trace_id="` + id + `"`,
			`(values"` + id + `" OR line"` + id + `")`},
		{`{app="x"} | json | path="/api/v1"`,
			`(values"/api/v1" OR line("api" AND "v1") OR escaped"1aipv")`},
		{`{app="x"} | logfmt | user="ab"`,
			`(values"ab" OR line"ab" OR escaped"ab")`},
		{`{app="x"} | json | user=~"(?i)aB"`,
			`(values(?i)"ab" OR line(?i)"ab" OR escaped"ABab")`},
		{`{app="x"} | json | logfmt | user="é1"`,
			`(values"é1" OR line("é1" OR "\\u00e9" OR "\\251" OR "\\303" OR "\\u000000e9" OR "\\xa9" OR "\\xc3") OR escaped"1")`},
		{`{app="x"} | json | user="é"`,
			`(values"é" OR line("é" OR "\\u00e9"))`},
		{`{app="x"} | json | e="😀"`,
			`(values"😀" OR line("😀" OR "\\ud83d"))`},
		// The stream has the label: it decides.
		{`{app="x"} | json | app="x"`, `<nil>`},
		{`{app="x"} | json | app="y"`, `NONE`},
		// Before any parser: metadata only (Plan.MetaIndex).
		{`{app="x"} | trace_id="` + id + `" | json`, `values"` + id + `"`},
		// No requirement.
		{`{app="x"} | json | trace_id=""`, `<nil>`},
		{`{app="x"} | json | trace_id!="` + id + `"`, `<nil>`},
		{`{app="x"} | json | status >= 500`, `<nil>`},
		{`{app="x"} | json | trace_id="` + id + `" or status > 3`, `<nil>`},
		{`{app="x"} | json | label_format trace_id="{{.a}}" | trace_id="` + id + `"`, `<nil>`},
		{`{app="x"} | json | line_format "{{.a}}" | trace_id="` + id + `"`, `<nil>`},
		{`{app="x"} | line_format "{{.a}}" | json | trace_id="` + id + `"`, `<nil>`},
		{`{app="x"} | unpack | json | trace_id="` + id + `"`, `<nil>`},
		{`{app="x"} | json | msg="a\"b"`, `(values"a\"b" OR line("a" AND "b") OR escaped"ab")`},
	} {
		p, err := Compile(mustParse(t, c.q))
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		got := "<nil>"
		if n := p.LabelIndex(stream); n != nil {
			got = n.String()
		}
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.q, got, c.want)
		}
	}
}

// TestEscapeLeafGrams pins an escape leaf's whole escapes, which
// segments before format 7 answer it with (Need.X): every escape of each
// character, lowered, for the parsers before the filter.
func TestEscapeLeafGrams(t *testing.T) {
	for _, c := range []struct{ q, want string }{
		{`{app="x"} | json | user="ab"`, `("\\u0061" OR "\\u0062")`},
		{`{app="x"} | logfmt | user="ab"`,
			`("\\141" OR "\\142" OR "\\u00000061" OR "\\u00000062" OR "\\u0061" OR "\\u0062" OR "\\x61" OR "\\x62")`},
		{`{app="x"} | json | user=~"(?i)A"`, `("\\u0041" OR "\\u0061")`},
	} {
		p, err := Compile(mustParse(t, c.q))
		if err != nil {
			t.Fatal(err)
		}
		n := p.LabelIndex([]Label{{"app", "x"}})
		var leaf *Need
		for _, s := range n.Sub {
			if s.Escaped != "" {
				leaf = s
			}
		}
		if leaf == nil {
			t.Fatalf("%s: no escape leaf in %v", c.q, n)
		}
		if got := leaf.X.String(); got != c.want {
			t.Errorf("%s: escape leaf %v asks\n %s\nwant %s", c.q, leaf, got, c.want)
		}
	}
}

// FuzzLabelIndex: for any line, value and parser, an entry the plan
// `{app="a"} <parser> | k="value"` (or =~ a (?i) form) matches is never
// ruled out by the plan's LabelIndex over the entry's grams.
func FuzzLabelIndex(f *testing.F) {
	f.Add(`{"k":"\u0035f89"}`, "5f89", uint8(0))
	f.Add(`{"k":"a\/b\ud83d\ude00"}`, "a/b😀", uint8(0))
	f.Add(`k="\x35f\070\u0039\U00000041"`, "5f89A", uint8(1))
	f.Add(`k="\xff" j=1`, "\uFFFD", uint8(1))
	f.Add(`GET /x done`, "/x", uint8(2))
	f.Add(`{"k":{"a": [1, 2]}}`, `{"a": [1, 2]}`, uint8(3))
	f.Add(`{"k":12.5e3}`, "12.5E3", uint8(4))
	f.Fuzz(func(t *testing.T, line, v string, which uint8) {
		if v == "" {
			return
		}
		parser := []string{"| json", "| logfmt", `| regexp "GET (?P<k>.*) done"`, `| json k="k"`, `| logfmt | json`, `| pattern "GET <k> done"`}[int(which)%6]
		filter := "k=" + strconv.Quote(v)
		if which >= 128 {
			filter = "k=~" + strconv.Quote("(?i)"+regexpQuote(v))
		}
		src := `{app="a"} ` + parser + " | " + filter
		q, err := Parse(src)
		if err != nil {
			return
		}
		p, err := Compile(q)
		if err != nil {
			return
		}
		stream := []Label{{"app", "a"}}
		checkNeed(t, p, src, stream, nil, []byte(line))
		checkNeed(t, p, src, stream, attrs.MustPairs("k", line), []byte(v))
	})
}
