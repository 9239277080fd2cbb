package main

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"haystack/internal/query"
	"haystack/internal/testseed"
)

// TestHighlighterSpans compares the spans --color marks with a byte-by-byte
// oracle over random lines: each literal's leftmost non-overlapping
// occurrences (ASCII-folded with -i), each regex's matches, the union of
// the bytes they cover.
func TestHighlighterSpans(t *testing.T) {
	seed := testseed.Seed(t, "HAY_HIGHLIGHT_SEED")
	t.Logf("seed %d (HAY_HIGHLIGHT_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	alphabet := "abAB-x"
	randWord := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for round := range 2000 {
		var lits []hlLiteral
		var oracleLits []string
		fold := rng.IntN(2) == 0
		for range 1 + rng.IntN(3) {
			w := randWord(1 + rng.IntN(3))
			oracleLits = append(oracleLits, w)
			b := []byte(w)
			if fold {
				b = lowerASCII(nil, b)
			}
			lits = append(lits, hlLiteral{text: b, fold: fold})
		}
		var res []*regexp.Regexp
		if rng.IntN(3) == 0 {
			res = append(res, regexp.MustCompile("x[ab]+"))
		}
		h := &highlighter{lits: lits, res: res}
		line := randWord(rng.IntN(30))
		want := make([]bool, len(line))
		for _, w := range oracleLits {
			for i := 0; i+len(w) <= len(line); {
				a, b := line[i:i+len(w)], w
				if fold {
					a, b = strings.ToLower(a), strings.ToLower(b) // ASCII only here
				}
				if a == b {
					for k := i; k < i+len(w); k++ {
						want[k] = true
					}
					i += len(w)
				} else {
					i++
				}
			}
		}
		for _, re := range res {
			for _, m := range re.FindAllStringIndex(line, -1) {
				for k := m[0]; k < m[1]; k++ {
					want[k] = true
				}
			}
		}
		got := make([]bool, len(line))
		prevEnd := -1
		for _, s := range h.spans([]byte(line), nil) {
			if s[0] <= prevEnd || s[0] >= s[1] {
				t.Fatalf("round %d: spans not ascending, disjoint and merged: %v", round, h.spans([]byte(line), nil))
			}
			prevEnd = s[1]
			for k := s[0]; k < s[1]; k++ {
				got[k] = true
			}
		}
		for k := range line {
			if got[k] != want[k] {
				t.Fatalf("round %d: line %q literals %q fold %v regexes %v: byte %d marked %v, want %v (spans %v)",
					round, line, oracleLits, fold, res, k, got[k], want[k], h.spans([]byte(line), nil))
			}
		}
	}
}

// TestNewHighlighter checks what a search highlights: PATTERN, the
// positive filters of a query (literals and regexes), never a negative
// filter; nil when nothing can be.
func TestNewHighlighter(t *testing.T) {
	plan := func(src string) *query.Plan {
		t.Helper()
		q, err := query.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		p, err := query.Compile(q)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		h          *highlighter
		line, want string
	}{
		{newHighlighter([]byte("err"), false, nil), "err ERR errerr", "[err] ERR [errerr]"},
		{newHighlighter([]byte("err"), true, nil), "err ERR eRr", "[err] [ERR] [eRr]"},
		{newHighlighter(nil, false, plan(`{a="b"} |= "time" != "debug" |~ "out+"`)), "timeout debug outt", "[timeout] debug [outt]"},
		{newHighlighter(nil, false, plan(`{a="b"} |~ "(?i)warn"`)), "WARN warn", "[WARN] [warn]"},
		{newHighlighter(nil, false, plan(`{a="b"} |= "x" or "yy"`)), "x yy y", "[x] [yy] y"},
	}
	for i, c := range cases {
		if got := markSpans(c.h, c.line); got != c.want {
			t.Errorf("case %d: %q marked %q, want %q", i, c.line, got, c.want)
		}
	}
	if h := newHighlighter(nil, false, plan(`{a="b"} != "debug"`)); h != nil {
		t.Errorf("a negative filter alone highlights %+v", h)
	}
	if h := newHighlighter(nil, false, nil); h != nil {
		t.Errorf("an empty PATTERN highlights %+v", h)
	}
}

// markSpans writes line with each span h marks in brackets.
func markSpans(h *highlighter, line string) string {
	var b strings.Builder
	at := 0
	for _, s := range h.spans([]byte(line), nil) {
		b.WriteString(line[at:s[0]] + "[" + line[s[0]:s[1]] + "]")
		at = s[1]
	}
	return b.String() + line[at:]
}

// TestGrepHighlighterWord checks -w and -x highlighting: only whole-word
// occurrences (an occurrence inside a word is skipped and the search
// goes on, as grep -w), the whole entry with -x.
func TestGrepHighlighterWord(t *testing.T) {
	cases := []struct {
		h          *highlighter
		line, want string
	}{
		{newGrepHighlighter([]string{"error"}, nil, false, true, false), "xerror error, error_x error", "xerror [error], error_x [error]"},
		{newGrepHighlighter([]string{"ERR"}, nil, true, true, false), "err errx Err", "[err] errx [Err]"},
		{newGrepHighlighter(nil, []string{"e[a-z]+r"}, false, true, false), "xeaar ebbr", "xeaar [ebbr]"},
		{newGrepHighlighter([]string{"a b"}, nil, false, false, true), "a b", "[a b]"},
	}
	for i, c := range cases {
		if got := markSpans(c.h, c.line); got != c.want {
			t.Errorf("case %d: %q marked %q, want %q", i, c.line, got, c.want)
		}
	}
	if h := newGrepHighlighter(nil, nil, false, true, false); h != nil {
		t.Errorf("-w -v alone highlights %+v", h)
	}
}
