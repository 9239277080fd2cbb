package query

import (
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"
)

func required(t testing.TB, re string) *Expr {
	t.Helper()
	r, err := syntax.Parse(re, syntax.Perl|syntax.DotNL)
	if err != nil {
		t.Fatal(err)
	}
	return RequiredLiterals(r)
}

func TestRequiredLiterals(t *testing.T) {
	for _, tc := range []struct{ re, want string }{
		{`error.*timeout`, `("error" AND "timeout")`},
		{`(foo|bar)baz`, `("foobaz" OR "barbaz")`},
		{`abc`, `"abc"`},
		{`(?i)abc`, `(?i)"abc"`},
		{`a+b`, `("a" AND "b")`},
		{`[Ee]rror`, `(?i)"error"`},
		{`(?i)kernel`, `((?i)"kernel" OR "` + "\u212a" + `")`},
		{`(?i)session`, `((?i)"session" OR "ſ")`},
		{`(?i)timeout`, `(?i)"timeout"`},
		{`[a-c]x[0-9]`, `("ax" OR "bx" OR "cx")`},
		{`\d+ms`, `"ms"`},
		{`colou?r`, `("colour" OR "color")`},
		{`^foo$`, `"foo"`},
		{`.*`, `ALL`},
		{`a|.*`, `ALL`},
		{`a|`, `ALL`},
		{`(?i)é`, `("É" OR "é")`},
		{`\x{FFFD}`, `ALL`},
		{`ab\x{FFFD}cd`, `("ab" AND "cd")`},
		{`x[^a]y`, `("x" AND "y")`},
		{`(abc)+def`, `("abc" AND "def")`},
		{`(ab){2,3}`, `"abab"`},
		{`[Kk\x{212A}]ey`, `((?i)"key" OR "` + "\u212a" + `")`},
		{`[Kk]ey`, `(?i)"key"`},
		{`abc|abd`, `("abc" OR "abd")`},
		{`err(or)?`, `"err"`},
		{`error|err`, `"err"`},
		{`(?i)Straße`, `((?i)"straße" OR (?i)"straẞe" OR "ſ")`},
		{`[^\x00-\x{10FFFF}]`, `NONE`},
		{`a[^\x00-\x{10FFFF}]|b`, `"b"`},
		{`a[bc][de][fg][hi][jk]`, `(("abdfh" OR "abdfi" OR "abdgh" OR "abdgi" OR "abefh" OR "abefi" OR "abegh" OR "abegi" OR "acdfh" OR "acdfi" OR "acdgh" OR "acdgi" OR "acefh" OR "acefi" OR "acegh" OR "acegi") AND ("j" OR "k"))`},
		{`(?i)ab(?-i)CD`, `(?i)"abcd"`},
		{`tsdb-ops.*io:2003`, `("tsdb-ops" AND "io:2003")`},
		{`error=\w+`, `"error="`},
		{`(a|b)(c|d)`, `("ac" OR "ad" OR "bc" OR "bd")`},
		{`(GET|POST) /api/(users|orders)`, `("GET /api/users" OR "GET /api/orders" OR "POST /api/users" OR "POST /api/orders")`},
		{`(?s)begin.end`, `("begin" AND "end")`},
		{`\bword\b`, `"word"`},
		{`a*`, `ALL`},
		{`(?:abc)*x`, `"x"`},
	} {
		if got := required(t, tc.re).String(); got != tc.want {
			t.Errorf("RequiredLiterals(%q) = %s, want %s", tc.re, got, tc.want)
		}
	}
}

// genRegex builds a random regex from a small grammar whose atoms include
// the awkward cases: case folding (with the k/s partners), classes,
// U+FFFD, anchors and empty alternatives.
func genRegex(r *rand.Rand, depth int) string {
	atoms := []string{"a", "b", "k", "K", "s", "S", "é", "É", "ſ", "\u212a", "ab", "ka",
		".", "[ab]", "[^a]", "[a-c]", `\d`, "[Kk]", "[Ss\u017f]", `\x{FFFD}`, "^", "$", `\b`, "x", "1"}
	if depth <= 0 || r.IntN(3) == 0 {
		return atoms[r.IntN(len(atoms))]
	}
	switch r.IntN(8) {
	case 0, 1:
		return genRegex(r, depth-1) + genRegex(r, depth-1)
	case 2:
		return "(?:" + genRegex(r, depth-1) + "|" + genRegex(r, depth-1) + ")"
	case 3:
		return "(?i:" + genRegex(r, depth-1) + ")"
	case 4:
		return "(?:" + genRegex(r, depth-1) + ")" + []string{"?", "*", "+", "{2}", "{1,3}"}[r.IntN(5)]
	case 5:
		return "(" + genRegex(r, depth-1) + ")"
	case 6:
		return "(?:" + genRegex(r, depth-1) + "|)"
	}
	return genRegex(r, depth-1) + genRegex(r, depth-1) + genRegex(r, depth-1)
}

func genLine(r *rand.Rand) string {
	pieces := []string{"a", "b", "k", "K", "s", "S", "é", "É", "ſ", "\u212a", "x", "1", " ", "\n", "\xff", "\xc3", "A", "B", "ab", "ka", "sk"}
	var b strings.Builder
	for n := r.IntN(12); n > 0; n-- {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// TestRequiredLiteralsNoFalseNegatives: whenever a regex matches a line,
// the line satisfies the regex's required literals; and a compiled line
// filter agrees exactly with Go's regexp on the same line.
func TestRequiredLiteralsNoFalseNegatives(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	matched := 0
	for i := 0; i < 3000; i++ {
		src := genRegex(r, 4)
		re, err := regexp.Compile("(?s)" + src)
		if err != nil {
			continue
		}
		req := required(t, src)
		p, err := Compile(&Query{Stages: []Stage{&LineFilter{Op: FilterRegexp, Values: []string{src}}}})
		if err != nil {
			t.Fatalf("Compile %q: %v", src, err)
		}
		for j := 0; j < 30; j++ {
			line := []byte(genLine(r))
			m := re.Match(line)
			if m {
				matched++
				if !req.Eval(line) {
					t.Fatalf("regex %q matches %q but the line fails its required literals %v", src, line, req)
				}
				if !p.Required.Eval(line) {
					t.Fatalf("regex %q matches %q but the line fails Plan.Required %v", src, line, p.Required)
				}
			}
			if got := p.Match(line); got != m {
				t.Fatalf("filter |~ %q on %q: Match = %v, regexp says %v (kind %v)", src, line, got, m, p.Filters[0].Kind)
			}
		}
	}
	if matched < 1000 {
		t.Fatalf("only %d matching pairs: the generator is too weak", matched)
	}
}

func TestFoldLiteralFilter(t *testing.T) {
	for _, tc := range []struct {
		re   string
		kind FilterKind
		fold bool
	}{
		{`(?i)timeout`, Contains, true},
		{`timeout`, Contains, false},
		{`(?i)1234`, Contains, false},
		{`(timeout)`, Contains, false},
		{`(?i)kernel`, Contains, true},
		{`(?i)é`, Regex, false},
		{`\Qa.b\E`, Contains, false},
		{`a.b`, Regex, false},
		{`\x{FFFD}`, Regex, false},
	} {
		p, err := Compile(&Query{Stages: []Stage{&LineFilter{Op: FilterRegexp, Values: []string{tc.re}}}})
		if err != nil {
			t.Fatal(err)
		}
		f := p.Filters[0]
		if f.Kind != tc.kind || f.Alts[0].Needle.Fold != tc.fold {
			t.Errorf("%q: kind %v fold %v, want %v %v", tc.re, f.Kind, f.Alts[0].Needle.Fold, tc.kind, tc.fold)
		}
	}
	// The Unicode fold partners of k and s still match, via the confirm.
	p, _ := Compile(&Query{Stages: []Stage{&LineFilter{Op: FilterRegexp, Values: []string{`(?i)kernel`, `(?i)ssh`}}}})
	for line, want := range map[string]bool{
		"KERNEL": true, "\u212aernel": true, "\u017f\u017fh": true, "sSh": true, "kerne": false, "\u212aerne": false, "": false,
	} {
		if got := p.Match([]byte(line)); got != want {
			t.Errorf("Match(%q) = %v, want %v", line, got, want)
		}
	}
}

func TestExprSimplify(t *testing.T) {
	l := func(s string, fold bool) *Expr { return litExpr(s, fold) }
	for _, tc := range []struct {
		e    *Expr
		want string
	}{
		{and(l("err", false), l("error", false)), `"error"`},
		{or(l("err", false), l("error", false)), `"err"`},
		{and(l("abc", true), l("ABC", false)), `"ABC"`},
		{or(l("abc", true), l("ABC", false)), `(?i)"abc"`},
		{and(l("a", false), exprAll), `"a"`},
		{and(l("a", false), exprNone), `NONE`},
		{or(l("a", false), exprAll), `ALL`},
		{or(l("a", false), exprNone), `"a"`},
		{and(), `ALL`},
		{or(), `NONE`},
		{and(l("a", false), and(l("b", false), l("c", false))), `("a" AND "b" AND "c")`},
		{or(and(l("a", false), l("b", false)), and(l("a", false), l("b", false))), `("a" AND "b")`},
	} {
		if got := tc.e.String(); got != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
	}
}
