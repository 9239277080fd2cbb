package query

import (
	"regexp/syntax"
	"testing"
)

// TestIndexLiterals: for the skip index, the k/s fold partners are
// alternatives inside the literal, each as long as it (RequiredLiterals
// adds them as bare runes, shorter than a gram, which prune nothing);
// without a k or s, and for exact literals, both are the same.
func TestIndexLiterals(t *testing.T) {
	for _, c := range []struct{ re, want string }{
		{`(?i)kernel`, `((?i)"kernel" OR (?i)"` + "\u212a" + `ernel")`},
		{`(?i)ask`, `((?i)"ask" OR (?i)"as` + "\u212a" + `" OR (?i)"a` + "\u017f" + `k" OR (?i)"a` + "\u017f\u212a" + `")`},
		{`(?i)timeout`, `(?i)"timeout"`},
		{`kernel`, `"kernel"`},
		{`[Kk\x{212A}]ey`, `((?i)"key" OR "` + "\u212a" + `ey")`},
		{`(?i)Straße`, `((?i)"straße" OR (?i)"straẞe" OR (?i)"ſtraße" OR (?i)"ſtraẞe")`},
		{`\d+ms`, `"ms"`},
	} {
		re, err := syntax.Parse(c.re, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		if got := IndexLiterals(re).String(); got != c.want {
			t.Errorf("IndexLiterals(%s) = %s, want %s", c.re, got, c.want)
		}
	}
}

// TestPlanIndex: a plan's Index keeps the spelled-out partners for the
// skip index while Required keeps the cheap form the scan uses.
func TestPlanIndex(t *testing.T) {
	q, err := Parse(`{app="x"} |~ "(?i)kernel" |= "panic"`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Index.String(), `(((?i)"kernel" OR (?i)"`+"\u212a"+`ernel") AND "panic")`; got != want {
		t.Errorf("Index = %s, want %s", got, want)
	}
	if got, want := p.Required.String(), `(((?i)"kernel" OR "`+"\u212a"+`") AND "panic")`; got != want {
		t.Errorf("Required = %s, want %s", got, want)
	}
}
