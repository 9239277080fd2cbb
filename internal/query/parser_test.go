package query

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	deep := `{app="x"} | ` + strings.Repeat("(", 65) + `a="b"` + strings.Repeat(")", 65)
	for _, tc := range []struct {
		q   string
		pos int
		msg string
	}{
		{``, 0, `expected a stream selector starting with {, got end of query`},
		{`app="x"`, 0, `expected a stream selector starting with {, got identifier "app"`},
		{`{}`, 1, `expected a label matcher`},
		{`{app="x"} |= `, 13, `expected a string after |=, got end of query`},
		{`{app="x"} |= foo`, 13, `expected a string after |=, got identifier "foo"`},
		{`{app="x"} != 42`, 13, `expected a string after !=, got number 42`},
		{`{app="x"`, 8, `expected "," or "}" in stream selector, got end of query`},
		{`{app="x",}`, 9, `expected a label name in stream selector, got "}"`},
		{`{app="x", app2}`, 14, `expected =, !=, =~ or !~ after label "app2", got "}"`},
		{`{app=x}`, 5, `expected a string after =, got identifier "x"`},
		{`{app=~".*"}`, 0, `needs at least one matcher that does not match the empty value`},
		{`{app="", b!~"x"}`, 0, `needs at least one matcher that does not match the empty value`},
		{`{app=~"a("}`, 6, `invalid regular expression: error parsing regexp: missing closing )`},
		{`{app="x"} |~ "a("`, 13, `invalid regular expression: error parsing regexp: missing closing )`},
		{`{app="x"} |~ "\\Qabc"`, 13, `\Q without \E`},
		{`{app="x"} |~ "` + strings.Repeat("a", MaxPatternLen+1) + `"`, 13, `longer than the limit of 4096`},
		{`{app="x"} | json | status >= "5"`, 26, `>= needs a number, duration or bytes value, got string "5"`},
		{`{app="x"} | status =~ 5`, 19, `=~ needs a string value, got number 5`},
		{`{app="x"} | a > 10x`, 16, `expected a number, duration (10s) or bytes (20MB) value, got "10x"`},
		{`{app="x"} | a > 1e3`, 16, `expected a number, duration (10s) or bytes (20MB) value, got "1e3"`},
		{`{app="x"} | a`, 13, `expected an operator (=, !=, =~, !~, ==, >, >=, <, <=) after label "a", got end of query`},
		{`{app="x"} | line_format "{{.x | nosuch}}"`, 24, `invalid template: 1: function "nosuch" not defined`},
		{`{app="x"} | line_format "{{ __timestamp__ }}"`, 24, `function "__timestamp__" not defined`},
		{`{app="x"} | line_format "{{.x"`, 24, `invalid template: 1: unclosed action`},
		{`{app="x"} | line_format "{{define \"t\"}}x{{end}}"`, 24, `define, block, template and range actions are not supported`},
		{`{app="x"} | line_format x`, 24, `expected a template string after line_format, got identifier "x"`},
		{`{app="x"} | line_format`, 23, `expected a template string after line_format, got end of query`},
		{`{app="x"} | regexp "(\\w+)"`, 19, `regexp needs at least one named group`},
		{`{app="x"} | regexp "(?P<a>x)(?P<a>y)"`, 19, `regexp names the group "a" twice`},
		{`{app="x"} | regexp "(?P<__error__>x)"`, 19, `cannot extract into __error__`},
		{`{app="x"} | regexp "(?P<1a>x)"`, 19, `not a valid label name`},
		{`{app="x"} | regexp "(?P<a>x"`, 19, `missing closing )`},
		{`{app="x"} | regexp a`, 19, `expected a quoted expression after regexp, got identifier "a"`},
		{`{app="x"} | pattern "<a><b>"`, 20, `two consecutive captures (<a> and <b>)`},
		{`{app="x"} | pattern "<_> x <_>"`, 20, `at least one named capture`},
		{`{app="x"} | pattern "plain text"`, 20, `at least one named capture`},
		{`{app="x"} | pattern "<a> <a>"`, 20, `names the capture <a> twice`},
		{`{app="x"} | label_format a`, 26, `expected = after label_format's label "a", got end of query`},
		{`{app="x"} | label_format a=b, a=c`, 30, `label "a" named twice in label_format`},
		{`{app="x"} | label_format a:b="x"`, 25, `label_format: "a:b" is not a valid label name`},
		{`{app="x"} | label_format a=5`, 27, `expected a label name or a quoted template after a=, got number 5`},
		{`{app="x"} | label_format __error__="x"`, 25, `label_format cannot set __error__`},
		{`{app="x"} | label_format a="{{ bad }}"`, 27, `function "bad" not defined`},
		{`{app="x"} | json a="b..c"`, 19, `invalid json expression "b..c": misplaced . at byte 1`},
		{`{app="x"} | json a="b[x]"`, 19, `bad array index "x"`},
		{`{app="x"} | json a="b[0"`, 19, `unclosed [`},
		{`{app="x"} | json a=b`, 19, `expected a quoted json expression after a=, got identifier "b"`},
		{`{app="x"} | json a, a="x"`, 20, `label "a" named twice in json`},
		{`{app="x"} | json a,`, 19, `expected a label name after json's ",", got end of query`},
		{`{app="x"} | logfmt a=""`, 21, `empty logfmt key`},
		{`{app="x"} | logfmt __error__`, 19, `logfmt cannot extract into __error__`},
		{`{app="x"} | unwrap latency`, 12, `the unwrap stage is not supported`},
		{`{app="x"} |> "<_>"`, 10, `pattern line filters (|>) are not supported`},
		{`{app="x"} |= ip("1.2.3.4")`, 13, `ip() line filters are not supported`},
		{`{app="x"} |= "abc`, 13, `unterminated string`},
		{"{app=\"x\"} |= \"a\nb\"", 13, `newline in string`},
		{"{app=\"x\"} |= `abc", 13, `unterminated raw string`},
		{`{app="x"} |= "\q"`, 13, `invalid escape in string "\q"`},
		{`{app="x"} | logfmt --fast`, 19, `unknown logfmt flag --fast`},
		{`{app="x"} | (a="b"`, 18, `expected ")" or and/or in label filter, got end of query`},
		{`{app="x"} | and="b"`, 12, `expected a label name in label filter, got identifier "and"`},
		{`{app="x"} | a="b" or`, 20, `expected a label name or ( in label filter, got end of query`},
		{`{app="x"} | |= "a"`, 12, `expected json, logfmt, regexp, pattern, unpack, line_format, label_format, decolorize, drop, keep or a label filter after | at byte 10, got "|="`},
		{`{app="x"} |= "a" or`, 19, `expected a string after or, got end of query`},
		{`{app="x"} |= "a" or 5`, 20, `expected a string after or, got number 5`},
		{`{app="x"} foo`, 10, `expected |, |=, !=, |~ or !~, got identifier "foo"`},
		{`{app="x"} ! "a"`, 10, `unexpected "!": expected != or !~`},
		{`{app="x"} @ x`, 10, `unexpected character '@'`},
		{"{app=\"x\"} \xff", 10, `unexpected byte 0xff`},
		{`{app="x"} | a=~"[z-a]"`, 15, `invalid character class range`},
		{deep, 12 + 64, `nested too deeply`},
		{`{a="b"}` + strings.Repeat(" ", MaxQueryLen), MaxQueryLen, `longer than the limit of 65536`},
	} {
		_, err := Parse(tc.q)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%.60q) = %v, want a *ParseError", tc.q, err)
			continue
		}
		if pe.Pos != tc.pos || !strings.Contains(pe.Msg, tc.msg) {
			t.Errorf("Parse(%.60q):\n got pos %d %q\nwant pos %d containing %q", tc.q, pe.Pos, pe.Msg, tc.pos, tc.msg)
		}
	}
}

func TestParseAST(t *testing.T) {
	q, err := Parse("{app=\"api\", env=~`prod|stage`, host!=\"x\", k!~\"re\"} |= \"a\\tb\" or `c` != \"d\" |~ \"e\" !~ \"f\" | logfmt --keep-empty --strict | json | a=\"1\" b==\"2\", c!=\"3\" and d=~\"4\" or e!~\"5\" | (f>1 or g>=2s) and h<3KiB, i<=-4.5, j==5, k!=6, l=7")
	if err != nil {
		t.Fatal(err)
	}
	want := `{app="api", env=~"prod|stage", host!="x", k!~"re"} |= "a\tb" or "c" != "d" |~ "e" !~ "f" | logfmt --strict --keep-empty | json | ((((a="1" and b="2") and c!="3") and d=~"4") or e!~"5") | ((((((f>1 or g>=2s) and h<3KiB) and i<=-4.5) and j==5) and k!=6) and l==7)`
	if got := q.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	lf := q.Stages[0].(*LineFilter)
	if lf.Op != FilterContains || len(lf.Values) != 2 || lf.Values[0] != "a\tb" || lf.Values[1] != "c" || lf.Pos != 51 {
		t.Fatalf("first line filter %+v", lf)
	}
	last := q.Stages[len(q.Stages)-1].(*LabelFilter).Expr.(*LabelBinary)
	if c := last.R.(*LabelCompare); c.Name != "l" || c.Op != CmpEq || c.Kind != KindNumber || c.Value != 7 {
		t.Fatalf("last compare %+v", c)
	}
	g := last.L.(*LabelBinary).L.(*LabelBinary).L.(*LabelBinary).L.(*LabelBinary).L.(*LabelBinary).R.(*LabelCompare)
	if g.Name != "g" || g.Kind != KindDuration || g.Value != 2 {
		t.Fatalf("g compare %+v", g)
	}
	// Keywords are label names when an operator follows.
	q, err = Parse(`{a="b"} | json="x" | logfmt!="y"`)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := q.Stages[0].(*LabelFilter); !ok {
		t.Fatalf("json=\"x\" parsed as %T", q.Stages[0])
	}
}

// Every table query prints to LogQL that parses back to the same query.
func TestParseRoundTrip(t *testing.T) {
	var qs []string
	for _, c := range loghubCases {
		qs = append(qs, c.q)
	}
	for _, c := range structuredCases {
		qs = append(qs, c.q)
	}
	for _, s := range qs {
		q, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		q2, err := Parse(q.String())
		if err != nil {
			t.Fatalf("reparse of %q: %v", q.String(), err)
		}
		if q2.String() != q.String() {
			t.Fatalf("round trip: %q became %q", q.String(), q2.String())
		}
	}
}

func TestMatchStreamOf(t *testing.T) {
	type other struct{ Name, Value string }
	q, err := Parse(`{app="api", env=~"prod|stage", host!="x", k!~"r.*"}`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ls   []other
		want bool
	}{
		{[]other{{"app", "api"}, {"env", "prod"}}, true},
		{[]other{{"app", "api"}, {"env", "stage"}, {"host", "y"}, {"k", "s"}}, true},
		{[]other{{"app", "api"}, {"env", "production"}}, false}, // anchored
		{[]other{{"app", "api"}, {"env", "prod"}, {"host", "x"}}, false},
		{[]other{{"app", "api"}, {"env", "prod"}, {"k", "re"}}, false},
		{[]other{{"env", "prod"}}, false},
		{nil, false},
	} {
		m := map[string]string{}
		var ls []Label
		for _, l := range tc.ls {
			m[l.Name] = l.Value
			ls = append(ls, Label(l))
		}
		if got := MatchStreamOf(p, tc.ls); got != tc.want {
			t.Errorf("MatchStreamOf(%v) = %v", tc.ls, got)
		}
		if p.MatchStream(ls) != tc.want || p.MatchStreamMap(m) != tc.want {
			t.Errorf("MatchStream/Map(%v) != %v", tc.ls, tc.want)
		}
	}
}

func TestFilterOrder(t *testing.T) {
	q, err := Parse(`{a="b"} |~ ".*x.*y" |~ "err.*or" |~ "(?i)warn" != "debug" |= "a" or "b"`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range p.Filters {
		got = append(got, f.Kind.String()+" "+f.Source.String())
	}
	want := []string{`NotContains != "debug"`, `Contains |~ "(?i)warn"`, `ContainsAny |= "a" or "b"`, `Regex |~ ".*x.*y"`, `Regex |~ "err.*or"`}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("order\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s := p.Required.String(); s != `("x" AND "y" AND "err" AND "or" AND (?i)"warn" AND ("a" OR "b"))` {
		t.Fatalf("Required = %s", s)
	}
}

func TestFromGrep(t *testing.T) {
	streams := loadLoghub(t)
	for _, tc := range []struct {
		opts  GrepOptions
		logql string
		kinds string
	}{
		{GrepOptions{Patterns: []string{"error", "fail"}}, `{a="b"} |= "error" or "fail"`, "ContainsAny"},
		{GrepOptions{Patterns: []string{"error"}, Fold: true}, `{a="b"} |~ "(?i)error"`, "Contains"},
		{GrepOptions{Patterns: []string{"error", "fail"}, Exclude: []string{"mod_jk", "INFO"}, Fold: true},
			`{a="b"} |~ "(?i)error" or "(?i)fail" !~ "(?i)mod_jk" !~ "(?i)info"`, "NotContains NotContains ContainsAny"},
		{GrepOptions{Patterns: []string{"a.b"}, Regex: []string{`blk_-\d+ terminating`}}, `{a="b"} |= "a.b" or "blk_-" |~ "blk_-\\d+ terminating"`, "Regex"},
		{GrepOptions{Exclude: []string{"e"}}, `{a="b"} != "e"`, "NotContains"},
		{GrepOptions{}, `{a="b"}`, ""},
	} {
		q, err := FromGrep(tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(q)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, f := range p.Filters {
			kinds = append(kinds, f.Kind.String())
		}
		if strings.Join(kinds, " ") != tc.kinds {
			t.Errorf("%+v: kinds %v, want %s", tc.opts, kinds, tc.kinds)
		}
		ref, err := Parse(tc.logql)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := Compile(ref)
		if err != nil {
			t.Fatal(err)
		}
		// The grep semantics, by hand, for the comparison.
		oracle := func(line string) bool {
			norm := func(s string) string {
				if tc.opts.Fold {
					return strings.ToLower(s)
				}
				return s
			}
			l := norm(line)
			for _, x := range tc.opts.Exclude {
				if strings.Contains(l, norm(x)) {
					return false
				}
			}
			if len(tc.opts.Patterns)+len(tc.opts.Regex) == 0 {
				return true
			}
			for _, x := range tc.opts.Patterns {
				if strings.Contains(l, norm(x)) {
					return true
				}
			}
			for _, x := range tc.opts.Regex {
				if rx(x)(line) {
					return true
				}
			}
			return false
		}
		n := 0
		for _, s := range streams {
			for _, l := range s.lines {
				got := p.Match([]byte(l))
				if got != oracle(l) || (rp.Match([]byte(l)) != oracle(l) && tc.opts.Regex == nil) {
					t.Fatalf("%+v on %q: Match %v, oracle %v", tc.opts, l, got, oracle(l))
				}
				if got {
					n++
				}
			}
		}
		if n == 0 {
			t.Errorf("%+v matched nothing", tc.opts)
		}
	}
	if _, err := FromGrep(GrepOptions{Regex: []string{"a("}}); err == nil {
		t.Error("FromGrep accepted a bad regex")
	}
}

func TestRegexTooComplex(t *testing.T) {
	for _, re := range []string{`(?:a{1000}){1000}`, `((a{100}){100}){100}`, `(?:x{2,}){20000}`} {
		_, err := Parse(`{a="b"} |~ "` + re + `"`)
		if err == nil || !strings.Contains(err.Error(), "too complex") {
			// Go's own parser may refuse some first; either way no plan.
			if err == nil {
				t.Errorf("%s accepted", re)
			}
		}
	}
	if _, err := Parse(`{a="b"} |~ "\\d{1,1000}x"`); err != nil {
		t.Errorf("a single counted repetition was refused: %v", err)
	}
}

// TestFromGrepFoldASCII: with Fold, the literals fold ASCII letters only,
// as grep -F -i in the C locale (and hay search -i PATTERN): not the
// Kelvin sign for k, not σ for Σ, and a literal that is not valid UTF-8
// still works; the regexes fold as (?i), Unicode included. Literals ORed
// with a regex keep the ASCII folding.
func TestFromGrepFoldASCII(t *testing.T) {
	lines := []string{"k", "K", "\u212a", "\u03c3", "\u03a3", "x\xffy", "X\xffY", "sSs", "\u017f", "Error", "eRROR"}
	for _, c := range []struct {
		opts GrepOptions
		want string // indexes of the lines that match
	}{
		{GrepOptions{Patterns: []string{"k"}, Fold: true}, "0 1"},
		{GrepOptions{Patterns: []string{"\u03a3"}, Fold: true}, "4"},
		{GrepOptions{Patterns: []string{"x\xffy"}, Fold: true}, "5 6"},
		{GrepOptions{Patterns: []string{"S"}, Fold: true}, "7"},
		{GrepOptions{Patterns: []string{"error", "\u03a3"}, Fold: true}, "4 9 10"},
		{GrepOptions{Exclude: []string{"K", "s"}, Fold: true}, "2 3 4 5 6 8 9 10"},
		{GrepOptions{Regex: []string{"k"}, Fold: true}, "0 1 2"},
		{GrepOptions{Patterns: []string{"k"}, Regex: []string{"\u03c3"}, Fold: true}, "0 1 3 4"},
		{GrepOptions{Patterns: []string{"s.s"}, Regex: []string{"^$"}, Fold: true}, ""},
		{GrepOptions{Patterns: []string{"ss"}, Regex: []string{"^$"}, Fold: true}, "7"},
		{GrepOptions{Patterns: []string{"\u03a3K"}, Regex: []string{"^$"}, Fold: true}, ""},
		{GrepOptions{Patterns: []string{"\u03a3", "kk"}, Regex: []string{"^$"}, Fold: true}, "4"},
	} {
		q, err := FromGrep(c.opts)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(q)
		if err != nil {
			t.Fatalf("%+v: %v", c.opts, err)
		}
		var got []string
		for i, l := range lines {
			if p.Match([]byte(l)) {
				got = append(got, strconv.Itoa(i))
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%+v (%s): lines %v match, want %s", c.opts, q, got, c.want)
		}
	}
}

// TestFromGrepFoldInvalidUTF8: a literal that is not UTF-8, ORed with a
// regex, is refused with -i as without it (RE2 cannot hold the byte), not
// turned into one that matches U+FFFD.
func TestFromGrepFoldInvalidUTF8(t *testing.T) {
	for _, fold := range []bool{false, true} {
		if _, err := FromGrep(GrepOptions{Patterns: []string{"a\xffb"}, Regex: []string{"x"}, Fold: fold}); err == nil {
			t.Errorf("fold %v: a literal with byte 0xff ORed with a regex was accepted", fold)
		}
	}
	if got := foldASCIIRegex("aZ.\xce\xa3\xff"); got != "[Aa][Zz]\\.\xce\xa3\xff" {
		t.Errorf("foldASCIIRegex: %q", got)
	}
}

// The new stages' ASTs, positions (byte offsets counted with Python's
// str.index on the same text) and String forms.
func TestParseStagesAST(t *testing.T) {
	src := "{a=\"b\"} | regexp `(?P<x>\\d+)` | pattern \"<p> <_>\" | json f=\"a.b[0]\", g | logfmt --strict h, i=\"j\" | unpack | decolorize | line_format \"{{.x}}\" |= \"y\" | label_format k=x, l=\"{{.p}}\""
	q, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	want := `{a="b"} | regexp "(?P<x>\\d+)" | pattern "<p> <_>" | json f="a.b[0]", g="g" | logfmt --strict h="h", i="j" | unpack | decolorize | line_format "{{.x}}" |= "y" | label_format k=x, l="{{.p}}"`
	if got := q.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if q2 := mustParse(t, want); q2.String() != want {
		t.Fatalf("round trip %s", q2)
	}
	re := q.Stages[0].(*ParserStage)
	if re.Kind != ParserRegexp || re.Expr != `(?P<x>\d+)` || re.Pos != 10 {
		t.Errorf("regexp %+v", re)
	}
	pt := q.Stages[1].(*ParserStage)
	if pt.Kind != ParserPattern || pt.Expr != "<p> <_>" || pt.Pos != 32 {
		t.Errorf("pattern %+v", pt)
	}
	js := q.Stages[2].(*ParserStage)
	if js.Kind != ParserJSON || len(js.Params) != 2 || *js.Params[0] != (ExtractParam{"f", "a.b[0]", 57}) || *js.Params[1] != (ExtractParam{"g", "g", 69}) {
		t.Errorf("json %+v %+v", js, js.Params)
	}
	lf := q.Stages[3].(*ParserStage)
	if lf.Kind != ParserLogfmt || !lf.Strict || len(lf.Params) != 2 || *lf.Params[1] != (ExtractParam{"i", "j", 92}) {
		t.Errorf("logfmt %+v", lf)
	}
	if u := q.Stages[4].(*ParserStage); u.Kind != ParserUnpack || u.Pos != 100 {
		t.Errorf("unpack %+v", u)
	}
	if d := q.Stages[5].(*DecolorizeStage); d.Pos != 109 {
		t.Errorf("decolorize %+v", d)
	}
	if l := q.Stages[6].(*LineFormatStage); l.Template != "{{.x}}" || l.Pos != 122 {
		t.Errorf("line_format %+v", l)
	}
	if f := q.Stages[7].(*LineFilter); f.Op != FilterContains || f.Values[0] != "y" {
		t.Errorf("filter %+v", f)
	}
	lb := q.Stages[8].(*LabelFormatStage)
	if len(lb.Labels) != 2 || *lb.Labels[0] != (LabelFormat{"k", "x", true, 165}) || *lb.Labels[1] != (LabelFormat{"l", "{{.p}}", false, 170}) {
		t.Errorf("label_format %+v %+v", lb.Labels[0], lb.Labels[1])
	}
}
