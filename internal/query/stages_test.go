package query

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// runStages runs q on one entry of the stream {app="a", env="prod"}: the
// entry's whole label set as name=value pairs joined by ",", the line
// after the pipeline, and whether it passed.
func runStages(t *testing.T, q string, line string) (string, string, bool) {
	t.Helper()
	ast, err := Parse(q)
	if err != nil {
		t.Fatalf("Parse(%q): %v", q, err)
	}
	if ast.String() != mustReparse(t, ast.String()) {
		t.Fatalf("%q does not round-trip: %q", q, ast.String())
	}
	p, err := Compile(ast)
	if err != nil {
		t.Fatalf("Compile(%q): %v", q, err)
	}
	stream := []Label{{"app", "a"}, {"env", "prod"}}
	l, changed, ok := p.LabelSetAttrs(stream, nil, []byte(line))
	if ok != p.MatchEntry(stream, []byte(line)) {
		t.Fatalf("%q on %q: LabelSetAttrs ok=%v, MatchEntry disagrees", q, line, ok)
	}
	set := l.All
	if !changed {
		set = stream
	}
	var parts []string
	for _, x := range set {
		parts = append(parts, x.Name+"="+x.Value)
	}
	out := line
	if l.Line != nil {
		out = string(l.Line)
	}
	return strings.Join(parts, ","), out, ok
}

// sortedParts sorts the ","-separated fragments of s.
func sortedParts(s string) string {
	parts := strings.Split(s, ",")
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func mustReparse(t *testing.T, s string) string {
	t.Helper()
	q, err := Parse(s)
	if err != nil {
		t.Fatalf("reparse of %q: %v", s, err)
	}
	return q.String()
}

// The expected values are worked out by hand from Loki's documentation of
// each stage (query/log_queries, query/template_functions).
func TestStages(t *testing.T) {
	const base = "app=a,env=prod"
	for _, tc := range []struct {
		q, line string
		labels  string // "" for the stream's own
		out     string // "" for the line unchanged
		drop    bool
	}{
		// regexp: named groups of the first match; unnamed groups ignored.
		{q: `| regexp "(?P<method>\\w+) (?P<path>\\S+) (\\S+)"`, line: "GET /x HTTP/1.1 GET /y Z",
			labels: "app=a,env=prod,method=GET,path=/x"},
		// No match: nothing added, the line kept.
		{q: `| regexp "(?P<method>[A-Z]+) /"`, line: "get /x"},
		// An empty capture is a label with an empty value: not in the set,
		// and a matcher sees "".
		{q: `| regexp "a(?P<x>b*)c"`, line: "ac"},
		{q: `| regexp "a(?P<x>b*)c" | x=""`, line: "ac"},
		{q: `| regexp "a(?P<x>b*)c" | x!=""`, line: "ac", drop: true},
		{q: `| regexp "a(?P<x>b*)c" | x!=""`, line: "abbc", labels: base + ",x=bb"},
		// A group that does not take part in the match.
		{q: `| regexp "(?P<a>x)|(?P<b>y)"`, line: "y", labels: base + ",b=y"},
		// A stream label's name gets _extracted.
		{q: `| regexp "(?P<app>\\w+)"`, line: "zzz", labels: base + ",app_extracted=zzz"},
		// '.' does not match '\n'; bytes are kept as they are.
		{q: `| regexp "(?P<r>.*)"`, line: "a\nb", labels: base + ",r=a"},
		{q: `| regexp "(?P<r>.*)"`, line: "a\r", labels: base + ",r=a\r"},
		{q: `| regexp "(?P<r>b.+)"`, line: "\xff\xfeab\xfe", labels: base + ",r=b\xfe"},
		// The first value of a name wins over a later parser's.
		{q: `| logfmt | regexp "(?P<level>\\w+)"`, line: "level=info", labels: base + ",level=info"},
		{q: `| regexp "(?P<level>\\w+)" | logfmt`, line: "level=info", labels: base + ",level=level"},

		// pattern.
		{q: `| pattern "<_> - <user> [<ts>] \"<method> <path> <_>\" <status> <size>"`,
			line:   `1.2.3.4 - bob [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326`,
			labels: base + ",method=GET,path=/a.gif,size=2326,status=200,ts=10/Oct/2000:13:55:36 -0700,user=bob"},
		// The last capture takes the rest of the line.
		{q: `| pattern "<ip> <rest>"`, line: "1.2.3.4 a b c", labels: base + ",ip=1.2.3.4,rest=a b c"},
		// Anchored at the start: a leading literal must begin the line.
		{q: `| pattern "x=<v>"`, line: "y=1 x=2"},
		{q: `| pattern "x=<v>"`, line: "x=2 y=1", labels: base + ",v=2 y=1"},
		// A literal not found: the capture before it takes the rest, later
		// captures are not added.
		{q: `| pattern "<a> <b>;<c>"`, line: "1 2 3", labels: base + ",a=1,b=2 3"},
		{q: `| pattern "<a> <b>;<c>" | c=""`, line: "1 2 3", labels: base + ",a=1,b=2 3"},
		// Empty captures are empty values.
		{q: `| pattern "<a>,<b>"`, line: ",x", labels: base + ",b=x"},
		{q: `| pattern "<a>,<b>"`, line: "", labels: ""},
		// The first occurrence of the literal ends the capture.
		{q: `| pattern "<a>:<b>"`, line: "k:v:w", labels: base + ",a=k,b=v:w"},
		{q: `| pattern "<app> <x>"`, line: "web 1", labels: base + ",app_extracted=web,x=1"},
		{q: `| pattern "<a> <b>"`, line: "x y\r", labels: base + ",a=x,b=y\r"},
		{q: `| pattern "<a> <b>"`, line: "\xff \xfe", labels: base + ",a=\xff,b=\xfe"},
		// A '<' that starts no capture is literal.
		{q: `| pattern "<a> < <b>"`, line: "1 < 2", labels: base + ",a=1,b=2"},
		{q: `| pattern "<_> status=<s> <_>" | s >= 500`, line: "x status=503 y", labels: base + ",s=503"},
		{q: `| pattern "<_> status=<s> <_>" | s >= 500`, line: "x status=200 y", drop: true},

		// line_format: the line changes, later line filters test it.
		{q: `| logfmt | line_format "{{.level | upper}} {{.msg}}"`, line: `level=info msg=hi`,
			labels: base + ",level=info,msg=hi", out: "INFO hi"},
		{q: `| logfmt | line_format "{{.level | upper}} {{.msg}}" |= "INFO hi"`, line: `level=info msg=hi`,
			labels: base + ",level=info,msg=hi", out: "INFO hi"},
		{q: `| logfmt | line_format "{{.level | upper}} {{.msg}}" |= "level="`, line: `level=info msg=hi`, drop: true},
		{q: `|= "level=" | line_format "{{.app}}"`, line: `level=info`, out: "a"},
		{q: `| line_format "[{{.missing}}]"`, line: "x", out: "[]"},
		{q: `| line_format "[{{__line__}}] {{.env}}"`, line: "x\r", out: "[x\r] prod"},
		{q: `| line_format "{{ __line__ | trimPrefix \"ab\" | trimSuffix \"yz\" | replace \"c\" \"C\" }}"`, line: "abcdcyz", out: "CdC"},
		{q: `| line_format "{{ TrimPrefix __line__ \"a\" }}|{{ Replace __line__ \"a\" \"b\" 1 }}|{{ ToUpper .env }}|{{ lower \"AB\" }}|{{ trim \"  x \" }}"`, line: "aaa", out: "aa|baa|PROD|ab|x"},
		{q: `| line_format "{{ default \"none\" .missing }}/{{ default \"none\" .env }}/{{ printf \"%05d\" 42 }}/{{ len .env }}"`, line: "x", out: "none/prod/00042/4"},
		{q: `| line_format "{{ regexReplaceAll \"(\\\\d+)\" __line__ \"<$1>\" }}"`, line: "a1b22", out: "a<1>b<22>"},
		{q: `| line_format "{{ if contains \"err\" __line__ }}E{{ else }}-{{ end }}{{ trunc 2 __line__ }}"`, line: "an err", out: "Ean"},
		// A template that fails: the line kept, __error__ set.
		{q: `| line_format "{{ repeat -1 __line__ }}"`, line: "x",
			labels: base + ",__error__=TemplateFormatErr,__error_details__=template: :1:3: executing \"\" at <repeat -1 $.__line__>: error calling repeat: repeat: count -1 out of range"},
		{q: `| line_format "{{ repeat -1 __line__ }}" | __error__=""`, line: "x", drop: true},
		// Parsers after line_format read the new line.
		{q: `| line_format "{\"k\":\"{{.env}}\"}" | json`, line: "x", labels: base + ",k=prod", out: `{"k":"prod"}`},
		{q: `| line_format "{{.app}} {{.env}}" | pattern "<a> <e>" | regexp "(?P<r>o+)"`, line: "x", labels: base + ",a=a,e=prod,r=o", out: "a prod"},
		// Extracted labels collide with stream labels as before.
		{q: `| json | line_format "{{.app}} {{.app_extracted}}"`, line: `{"app":"b"}`, labels: base + ",app_extracted=b", out: "a b"},

		// label_format.
		{q: `| logfmt | label_format lvl=level`, line: "level=warn", labels: base + ",lvl=warn"},
		{q: `| label_format service=app`, line: "x", labels: "env=prod,service=a"},
		{q: `| label_format app="{{.app}}-{{.env}}"`, line: "x", labels: "app=a-prod,env=prod"},
		{q: `| label_format x=nosuch`, line: "x"},
		{q: `| label_format x=app, y=env`, line: "x", labels: "x=a,y=prod"},
		// Every operand reads the labels as they were before the stage.
		{q: `| label_format app=env, env=app`, line: "x", labels: "app=prod,env=a"},
		{q: `| label_format x="{{ __line__ }}" | x="line"`, line: "line", labels: base + ",x=line"},
		{q: `| label_format x="{{ repeat -1 \"a\" }}" | __error__!=""`, line: "x",
			labels: base + ",__error__=TemplateFormatErr,__error_details__=template: :1:3: executing \"\" at <repeat -1 \"a\">: error calling repeat: repeat: count -1 out of range"},
		{q: `| label_format env="" | env=""`, line: "x", labels: "app=a"},

		// decolorize.
		{q: `| decolorize`, line: "\x1b[31mERROR\x1b[0m x \x1b[1;32mok\x1b[m", out: "ERROR x ok"},
		{q: `| decolorize |= "ERROR x"`, line: "\x1b[31mERROR\x1b[0m x", out: "ERROR x"},
		{q: `|= "ERROR x" | decolorize`, line: "\x1b[31mERROR\x1b[0m x", drop: true},
		{q: `| decolorize`, line: "plain \xff", out: "plain \xff"},

		// unpack.
		{q: `| unpack`, line: `{"_entry":"hello \"w\"","pod":"p1","n":5,"o":{"a":"b"}}`, labels: base + ",pod=p1", out: `hello "w"`},
		{q: `| unpack |= "hello"`, line: `{"_entry":"hello","app":"x"}`, labels: base + ",app_extracted=x", out: "hello"},
		{q: `| unpack |= "_entry"`, line: `{"_entry":"hello"}`, drop: true},
		{q: `| unpack`, line: `{"pod":"p1"}`, labels: base + ",pod=p1"},
		{q: `| unpack`, line: `not json`, labels: base + ",__error__=JSONParserErr,__error_details__=invalid JSON"},

		// json and logfmt parameters.
		{q: `| json first="a.b", second="list[1].c", obj="a", ua="h[\"User-Agent\"]", nope="zz", l="list", n="list[0]", top`,
			line:   `{"a":{"b":"x"},"list":[1,{"c":2}],"h":{"User-Agent":"ua"},"top":null}`,
			labels: base + `,first=x,l=[1,{"c":2}],n=1,obj={"b":"x"},second=2,ua=ua`},
		{q: `| json app="a"`, line: `{"a":"v"}`, labels: base + ",app_extracted=v"},
		{q: `| json x="a"`, line: `[1]`, labels: base + ",__error__=JSONParserErr,__error_details__=not a JSON object"},
		{q: `| json x="a[0]"`, line: `{"a":{"0":1}}`},
		{q: `| json x="[\"a b\"]"`, line: `{"a b":"sp"}`, labels: base + ",x=sp"},
		{q: `| logfmt host, level="lvl"`, line: `host=h1 lvl=warn x=1 host=h2`, labels: base + ",host=h1,level=warn"},
		{q: `| logfmt --strict level="lvl"`, line: `lvl=warn "bad`, labels: base + `,__error__=LogfmtParserErr,__error_details__=unexpected '"' in key at byte 9,level=warn`},
	} {
		q := `{app="a"} ` + tc.q
		labels, out, ok := runStages(t, q, tc.line)
		wantLabels, wantOut := tc.labels, tc.out
		if wantLabels == "" {
			wantLabels = base
		}
		if wantOut == "" {
			wantOut = tc.line
		}
		if tc.drop {
			if ok {
				t.Errorf("%s on %q: passed, want dropped", q, tc.line)
			}
			continue
		}
		// The set is sorted by name; the table lists it in any order.
		if !ok || sortedParts(labels) != sortedParts(wantLabels) || out != wantOut {
			t.Errorf("%s on %q:\n got ok=%v labels %q line %q\nwant labels %q line %q", q, tc.line, ok, labels, out, wantLabels, wantOut)
		}
	}
}

// Line filters after a stage that rewrites the line test the new line:
// they must not reach Required (the skip index and the block scan look at
// the stored line) nor Filters.
func TestRewriteRequired(t *testing.T) {
	for _, tc := range []struct {
		q, required string
		filters     int
	}{
		{`{app="a"} |= "abc" | line_format "x" |= "zzz"`, `"abc"`, 1},
		{`{app="a"} |= "abc" | decolorize |~ "z+z"`, `"abc"`, 1},
		{`{app="a"} | unpack |= "zzz" |= "yyy"`, `ALL`, 0},
		{`{app="a"} |= "abc" | regexp "(?P<x>zzz)" | pattern "<y> q" | label_format z=x |= "def"`, `("abc" AND "def")`, 2},
		{`{app="a"} | json first="a" |= "zzz" | logfmt x |= "yyy"`, `("zzz" AND "yyy")`, 2},
	} {
		q, err := Parse(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(q)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Required.String(); got != tc.required || len(p.Filters) != tc.filters {
			t.Errorf("%s: Required %s, %d filters; want %s, %d", tc.q, got, len(p.Filters), tc.required, tc.filters)
		}
		if p.Index.String() != p.Required.String() {
			t.Errorf("%s: Index %s", tc.q, p.Index)
		}
	}
}

// Template functions that could build huge values fail instead, and a
// range action (which could loop without writing) is refused.
func TestTemplateBounds(t *testing.T) {
	big := strings.Repeat("x", 1<<16)
	for _, q := range []string{
		`{app="a"} | line_format "{{ repeat 100000000 __line__ }}"`,
		`{app="a"} | line_format "{{ replace \"\" __line__ __line__ }}"`,
		`{app="a"} | line_format "{{ Replace __line__ \"\" __line__ -1 }}"`,
		`{app="a"} | line_format "{{ regexReplaceAll \"\" __line__ __line__ }}"`,
		`{app="a"} | line_format "{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}{{ __line__ }}"`,
	} {
		labels, out, ok := runStages(t, q, big)
		if !ok || out != big || !strings.Contains(labels, "__error__=TemplateFormatErr") {
			t.Errorf("%s: ok=%v, line of %d bytes, labels %.200q", q, ok, len(out), labels)
		}
	}
	if _, err := Parse(`{app="a"} | line_format "{{ range 1000000000 }}{{ end }}"`); err == nil || !strings.Contains(err.Error(), "range actions are not supported") {
		t.Errorf("range: %v", err)
	}
}

// A line rewritten to nothing is an empty line, not the stored one.
func TestRewriteEmpty(t *testing.T) {
	for _, q := range []string{`{app="a"} | line_format ""`, `{app="a"} | line_format "{{.nosuch}}"`, `{app="a"} | decolorize`, `{app="a"} | unpack`} {
		p, err := Compile(mustParse(t, q))
		if err != nil {
			t.Fatal(err)
		}
		line := "\x1b[31m"
		if strings.Contains(q, "unpack") {
			line = `{"_entry":""}`
		}
		l, _, ok := p.LabelSetAttrs(nil, nil, []byte(line))
		if !ok || l.Line == nil || len(l.Line) != 0 {
			t.Errorf("%s: ok=%v Line=%q (nil %v)", q, ok, l.Line, l.Line == nil)
		}
	}
}

func mustParse(t *testing.T, s string) *Query {
	t.Helper()
	q, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// BenchmarkStages runs LabelSetAttrs per line over all Loghub samples for
// the new stages, against logfmt alone as the reference.
func BenchmarkStages(b *testing.B) {
	lines, n := benchLines(b)
	stream := []Label{{"app", "x"}}
	for _, c := range []struct{ name, q string }{
		{"logfmt", `{app="x"} | logfmt`},
		{"regexp", `{app="x"} | regexp "(?P<first>\\S+) (?P<second>\\S+)"`},
		{"pattern", `{app="x"} | pattern "<first> <second> <_>"`},
		{"line_format", `{app="x"} | line_format "{{.app}} {{ __line__ | lower }}"`},
		{"label_format", `{app="x"} | label_format x="{{.app}}-y", y=app`},
		{"decolorize", `{app="x"} | decolorize`},
	} {
		p := mustPlan(b, c.q)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(n)
			b.ReportAllocs()
			for b.Loop() {
				for _, l := range lines {
					p.LabelSetAttrs(stream, nil, l)
				}
			}
		})
	}
}

// A stream label that label_format set to another value is parsed, not
// the stream's, in Split (categorize-labels responses).
func TestSplitLabelFormat(t *testing.T) {
	p, err := Compile(mustParse(t, `{app="a"} | label_format app="{{.app}}2", env=env, x=env`))
	if err != nil {
		t.Fatal(err)
	}
	stream := []Label{{"app", "a"}, {"env", "prod"}}
	l, changed, ok := p.LabelSetAttrs(stream, nil, []byte("x"))
	if !ok || !changed {
		t.Fatalf("ok=%v changed=%v", ok, changed)
	}
	kept, parsed := l.Split(stream)
	if fmt.Sprint(kept) != "[{env prod}]" || fmt.Sprint(parsed) != "[{app a2} {x prod}]" {
		t.Errorf("kept %v, parsed %v", kept, parsed)
	}
}

func TestTemplateTitleSubstr(t *testing.T) {
	for _, c := range [][2]string{
		{`{{ title "hello wORLD-x_y émile" }}`, "Hello WORLD-X_y Émile"},
		{`{{ substr 1 3 "abcdef" }}|{{ substr -1 2 "abcdef" }}|{{ substr 2 99 "abcdef" }}|{{ substr 4 2 "abcdef" }}`, "bc|ab|cdef|"},
		{`{{ trunc 2 "abc" }}|{{ trunc -2 "abc" }}|{{ trunc 9 "abc" }}`, "ab|bc|abc"},
		{`{{ trimAll "$" "$5.00$" }}|{{ Trim "xxaxx" "x" }}|{{ TrimLeft "xxaxx" "x" }}|{{ TrimRight "xxaxx" "x" }}|{{ TrimSpace " a " }}|{{ TrimSuffix "ab" "b" }}`, "5.00|a|axx|xxa|a|a"},
		{`{{ if hasPrefix "ab" "abc" }}p{{ end }}{{ if hasSuffix "bc" "abc" }}s{{ end }}{{ repeat 3 "ab" }}`, "psababab"},
		{`{{ regexReplaceAllLiteral "b+" "abbcb" "$1" }}`, "a$1c$1"},
	} {
		_, out, ok := runStages(t, `{app="a"} | line_format `+"`"+c[0]+"`", "x")
		if !ok || out != c[1] {
			t.Errorf("%s: %q, want %q", c[0], out, c[1])
		}
	}
}

// A label filter after a stage that can set labels never needs a
// metadata value alone of the skip index: after a parser the value may
// come from the line (LabelIndex allows a line leaf), and after a stage
// that can make a value out of anything (label_format, and line_format
// and decolorize conservatively) nothing is required.
func TestStagesEndMetaIndex(t *testing.T) {
	if p, _ := Compile(mustParse(t, `{app="a"} |= "x" | trace_id="abcdef"`)); p.LabelIndex(nil).String() != `values"abcdef"` {
		t.Fatalf("baseline: a label filter first needs a metadata value, got %v", p.LabelIndex(nil))
	}
	for _, c := range []struct {
		stage string
		line  bool // the value may come from the line; otherwise nothing is required
	}{
		{`| regexp "(?P<trace_id>\\w+)"`, true}, {`| pattern "<trace_id> <_>"`, true}, {`| unpack`, true},
		{`| json trace_id="a"`, true}, {`| logfmt trace_id`, true},
		{`| label_format trace_id=x`, false}, {`| line_format "x"`, false}, {`| decolorize`, false},
	} {
		q := `{app="a"} ` + c.stage + ` | trace_id="abcdef"`
		p, err := Compile(mustParse(t, q))
		if err != nil {
			t.Fatal(err)
		}
		n := p.LabelIndex(nil)
		switch {
		case !c.line && (n != nil || p.HasLabelIndex()):
			t.Errorf("%s: LabelIndex %v, want nothing required", q, n)
		case c.line && (n == nil || !strings.Contains(n.String(), "line")):
			t.Errorf("%s: LabelIndex %v, want a metadata value or the line", q, n)
		}
	}
}
