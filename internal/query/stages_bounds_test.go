package query

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// entryAlloc runs q's pipeline on one entry and returns its labels, line
// and the bytes allocated meanwhile.
func entryAlloc(t *testing.T, q, line string) (EntryLabels, uint64) {
	t.Helper()
	ast, err := Parse(q)
	if err != nil {
		t.Fatalf("Parse(%q): %v", q, err)
	}
	p, err := Compile(ast)
	if err != nil {
		t.Fatalf("Compile(%q): %v", q, err)
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	l, _, _ := p.LabelSetAttrs([]Label{{"app", "a"}}, nil, []byte(line))
	runtime.ReadMemStats(&m1)
	return l, m1.TotalAlloc - m0.TotalAlloc
}

func labelValue(l EntryLabels, name string) string {
	for _, x := range l.All {
		if x.Name == name {
			return x.Value
		}
	}
	return ""
}

// Every way a template could build more than its output bound costs one
// entry a few MiB at most and fails the template. Before the bounds these
// allocated 100 MiB to 400 MiB (printf widths, print's arguments) or kept
// 32 MiB of labels.
func TestTemplateMemoryBounded(t *testing.T) {
	rep := ` (repeat 1048576 "x")`
	cases := []struct{ name, q string }{
		{"printf width", "{app=\"a\"} | line_format `{{len (printf \"" + strings.Repeat("%0999999d", 64) + "\"" + strings.Repeat(" 1", 64) + ")}}`"},
		{"printf precision", "{app=\"a\"} | line_format `{{len (printf \"" + strings.Repeat("%.999999f", 64) + "\"" + strings.Repeat(" 1.5", 64) + ")}}`"},
		{"printf index", "{app=\"a\"} | line_format `{{len (printf \"" + strings.Repeat("%[1]s", 64) + "\"" + rep + ")}}`"},
		{"print args", "{app=\"a\"} | line_format `{{len (print" + strings.Repeat(rep, 24) + ")}}`"},
		{"println args", "{app=\"a\"} | line_format `{{len (println" + strings.Repeat(rep, 24) + ")}}`"},
		{"html args", "{app=\"a\"} | line_format `{{len (html" + strings.Repeat(rep, 24) + ")}}`"},
		{"urlquery", "{app=\"a\"} | line_format `{{len (urlquery" + strings.Repeat(` (repeat 300000 "<>")`, 8) + ")}}`"},
		{"many calls", "{app=\"a\"} | line_format `" + strings.Repeat(`{{len (repeat 1048576 "x")}}`, 64) + "`"},
		{"upper chain", "{app=\"a\"} | line_format `{{len (repeat 1048576 \"\\xff\"" + strings.Repeat(" | upper", 16) + ")}}`"},
	}
	for _, c := range cases {
		l, alloc := entryAlloc(t, c.q, "l")
		if alloc > 16<<20 {
			t.Errorf("%s: one entry allocated %d MiB (bound: 4 MiB of results, each call at most 3x its input)", c.name, alloc>>20)
		}
		if got := labelValue(l, "__error__"); got != ErrTemplate {
			t.Errorf("%s: __error__=%q line %.40q, want %s", c.name, got, l.Line, ErrTemplate)
		}
	}
}

// label_format's operands, and several label_format stages, share one
// 1 MiB bound for the labels they make per entry.
func TestLabelFormatSharedBound(t *testing.T) {
	var ops, stages []string
	for i := range 32 {
		ops = append(ops, fmt.Sprintf(`l%d="{{repeat 1048576 \"x\"}}"`, i))
		stages = append(stages, fmt.Sprintf(`| label_format m%d="{{repeat 600000 \"y\"}}"`, i))
	}
	for _, q := range []string{
		`{app="a"} | label_format ` + strings.Join(ops, ", "),
		`{app="a"} ` + strings.Join(stages, " "),
	} {
		l, alloc := entryAlloc(t, q, "l")
		total := 0
		for _, x := range l.All {
			if x.Name != "app" && !strings.HasPrefix(x.Name, "__") {
				total += len(x.Value)
			}
		}
		if total > 1<<20 || alloc > 12<<20 {
			t.Errorf("%.60s...: labels hold %d bytes (bound %d), allocated %d MiB", q, total, 1<<20, alloc>>20)
		}
		if labelValue(l, "__error__") != ErrTemplate {
			t.Errorf("%.60s...: no template error", q)
		}
	}
	// Under the bound every operand is made.
	l, _ := entryAlloc(t, `{app="a"} | label_format a="{{repeat 400000 \"x\"}}", b="{{repeat 400000 \"y\"}}"`, "l")
	if len(labelValue(l, "a")) != 400000 || len(labelValue(l, "b")) != 400000 || labelValue(l, "__error__") != "" {
		t.Errorf("two 400 kB operands: a %d b %d error %q", len(labelValue(l, "a")), len(labelValue(l, "b")), labelValue(l, "__error__"))
	}
}

// Variables would hold values that are never written: refused.
func TestTemplateVariablesRefused(t *testing.T) {
	for _, tmpl := range []string{
		`{{$a := __line__}}{{$a}}`,
		`{{$a := 1}}{{$a = 2}}`,
		`{{with $x := .app}}{{$x}}{{end}}`,
		`{{if $x := .app}}{{end}}`,
	} {
		_, err := Parse("{app=\"a\"} | line_format `" + tmpl + "`")
		if err == nil || !strings.Contains(err.Error(), "nor are variables") {
			t.Errorf("%s: err %v, want variables refused", tmpl, err)
		}
	}
	// $ alone reads the root.
	if _, out, ok := runStages(t, "{app=\"a\"} | line_format `{{with .env}}{{$.app}}{{end}}`", "x"); !ok || out != "a" {
		t.Errorf("$.app inside with: %q", out)
	}
}

// The bounded print functions format as text/template's own.
func TestBoundedPrintFuncs(t *testing.T) {
	cases := []struct{ tmpl, want string }{
		{`{{printf "%05d-%s-%.2f-%x" 3 .app 1.5 "hi"}}`, "00003-a-1.50-6869"},
		{`{{printf "%[2]s%[1]s" "a" "b"}}`, "ba"},
		{`{{printf "%d%%"  7}}`, "7%"},
		{`{{print "a" 1 2 "b"}}`, "a1 2b"},
		{`{{println "a" 1}}`, "a 1\n"},
		{`{{html "<a&b>"}}`, "&lt;a&amp;b&gt;"},
		{`{{js "a'b"}}`, `a\'b`},
		{`{{urlquery "a b&c"}}`, "a+b%26c"},
		{`{{__line__ | printf "[%s]"}}`, "[l]"},
		{`{{printf "%v" .}}`, "map[__line__:l app:a env:prod]"},
	}
	for _, c := range cases {
		if _, out, ok := runStages(t, "{app=\"a\"} | line_format `"+c.tmpl+"`", "l"); !ok || out != c.want {
			t.Errorf("%s: got %q, want %q", c.tmpl, out, c.want)
		}
	}
	// A * width would come from an argument: refused.
	l, _ := entryAlloc(t, "{app=\"a\"} | line_format `{{printf \"%*d\" 999999 1}}`", "l")
	if labelValue(l, "__error__") != ErrTemplate {
		t.Errorf("printf * width: no template error, line %.40q", l.Line)
	}
}

// __line__ reads the entry's line wherever dot is.
func TestLineInsideWith(t *testing.T) {
	for _, c := range []struct{ tmpl, want string }{
		{`{{with .app}}{{.}}:{{__line__}}{{end}}`, "a:hello"},
		{`{{with .nothing}}x{{else}}{{__line__ | upper}}{{end}}`, "HELLO"},
		{`{{if .app}}{{with .env}}{{.}}{{len __line__}}{{end}}{{end}}`, "prod5"},
	} {
		if _, out, ok := runStages(t, "{app=\"a\"} | line_format `"+c.tmpl+"`", "hello"); !ok || out != c.want {
			t.Errorf("%s: got %q ok=%v, want %q", c.tmpl, out, ok, c.want)
		}
	}
	l, _, ok := runStages(t, `{app="a"} | label_format x="{{with .env}}{{__line__}}{{end}}" | __error__=""`, "hello")
	if !ok || !strings.Contains(l, "x=hello") {
		t.Errorf("label_format: labels %s ok=%v, want x=hello", l, ok)
	}
}

// != and !~ after a stage keyword without arguments start a line filter,
// as after `logfmt --strict`.
func TestKeywordThenNegatedLineFilter(t *testing.T) {
	cases := []struct {
		q, want, line string
		pass          bool
	}{
		{`{app="a"} | decolorize != "alpha"`, `{app="a"} | decolorize != "alpha"`, "\x1b[31malpha\x1b[0m", false},
		{`{app="a"} | decolorize !~ "^alpha$"`, `{app="a"} | decolorize !~ "^alpha$"`, "\x1b[31malpha\x1b[0m", false},
		{`{app="a"} | decolorize != "beta"`, `{app="a"} | decolorize != "beta"`, "\x1b[31malpha\x1b[0m", true},
		{`{app="a"} | unpack != "unp"`, `{app="a"} | unpack != "unp"`, `{"_entry":"unp x"}`, false},
		{`{app="a"} | unpack !~ "^unp"`, `{app="a"} | unpack !~ "^unp"`, `{"_entry":"unp x"}`, false},
		{`{app="a"} | json != "x"`, `{app="a"} | json != "x"`, `{"a":"x"}`, false},
		{`{app="a"} | logfmt !~ "x"`, `{app="a"} | logfmt !~ "x"`, `a=x`, false},
		{`{app="a"} | logfmt != "y"`, `{app="a"} | logfmt != "y"`, `a=x`, true},
	}
	for _, c := range cases {
		ast, err := Parse(c.q)
		if err != nil {
			t.Errorf("%s: %v", c.q, err)
			continue
		}
		if len(ast.Stages) != 2 || ast.String() != c.want {
			t.Errorf("%s parsed as %q (%d stages), want %q", c.q, ast.String(), len(ast.Stages), c.want)
			continue
		}
		p, err := Compile(ast)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.MatchEntry([]Label{{"app", "a"}}, []byte(c.line)); got != c.pass {
			t.Errorf("%s on %q: match %v, want %v", c.q, c.line, got, c.pass)
		}
	}
	// = and =~ still read as a label filter on a label named like it.
	ast, err := Parse(`{app="a"} | json = "x"`)
	if err != nil || len(ast.Stages) != 1 {
		t.Errorf(`| json = "x": %v %v`, ast, err)
	}
}
