package main

import (
	"bytes"
	"os"
	"regexp"
	"slices"

	"haystack/internal/query"
)

// highlighter finds what a search matched in a printed line, for
// --color: the literals and regexes of its positive line filters (a
// negative filter matches nothing that is printed). Spans are the
// leftmost non-overlapping occurrences of each, merged, as grep colours
// them.
type highlighter struct {
	lits  []hlLiteral
	res   []*regexp.Regexp
	lower []byte // scratch: the line ASCII-lowered, for folded literals

	// word keeps only the occurrences that are whole words (-w); line
	// marks a matching entry whole (-x). The plan's regexes for them
	// include the neighbouring bytes, so such a highlighter is built from
	// the grep patterns instead (newGrepHighlighter).
	word, line bool
}

type hlLiteral struct {
	text []byte // lowered when fold
	fold bool
}

// newHighlighter returns the highlighter of a PATTERN search (pattern,
// fold) or of a plan's positive filters; nil when nothing can be
// highlighted (an empty PATTERN, only negative filters).
func newHighlighter(pattern []byte, fold bool, plan *query.Plan) *highlighter {
	h := &highlighter{}
	if plan == nil {
		h.addLiteral(string(pattern), fold)
	} else {
		for _, f := range plan.Filters {
			if f.Negate {
				continue
			}
			for _, a := range f.Alts {
				if a.Regexp != nil {
					h.res = append(h.res, a.Regexp)
				} else {
					h.addLiteral(a.Needle.Text, a.Needle.Fold)
				}
			}
		}
	}
	if len(h.lits) == 0 && len(h.res) == 0 {
		return nil
	}
	return h
}

// addLiteral adds a literal to mark (an empty one marks nothing), lowered
// when it folds.
func (h *highlighter) addLiteral(text string, fold bool) {
	if text == "" {
		return
	}
	b := []byte(text)
	if fold {
		b = lowerASCII(nil, b)
	}
	h.lits = append(h.lits, hlLiteral{text: b, fold: fold})
}

// newGrepHighlighter returns the highlighter of grep-style patterns
// (-e literals, -E regexes) with -w or -x; nil when there are none.
func newGrepHighlighter(lits, res []string, fold, word, line bool) *highlighter {
	h := &highlighter{word: word, line: line}
	for _, l := range lits {
		h.addLiteral(l, fold)
	}
	for _, r := range res {
		if fold {
			r = "(?i)" + r
		}
		if re, err := regexp.Compile(r); err == nil {
			h.res = append(h.res, re)
		}
	}
	if len(h.lits) == 0 && len(h.res) == 0 {
		return nil
	}
	return h
}

// isWordByte reports whether c is one of grep's word constituents.
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// wholeWord reports whether line[i:j] is neither preceded nor followed
// by a word byte.
func wholeWord(line []byte, i, j int) bool {
	return (i == 0 || !isWordByte(line[i-1])) && (j == len(line) || !isWordByte(line[j]))
}

// spans appends to dst the merged [start, end) byte ranges of line that
// the search's filters match, ascending.
func (h *highlighter) spans(line []byte, dst [][2]int) [][2]int {
	dst = dst[:0]
	if h.line {
		// Only matching entries are marked, and -x matches them whole.
		if len(line) > 0 {
			dst = append(dst, [2]int{0, len(line)})
		}
		return dst
	}
	lowered := false
	for _, l := range h.lits {
		hay := line
		if l.fold {
			if !lowered {
				h.lower = lowerASCII(h.lower[:0], line)
				lowered = true
			}
			hay = h.lower
		}
		for off := 0; off <= len(hay)-len(l.text); {
			i := bytes.Index(hay[off:], l.text)
			if i < 0 {
				break
			}
			start, end := off+i, off+i+len(l.text)
			if h.word && !wholeWord(line, start, end) {
				off = start + 1 // as grep -w: look again further on
				continue
			}
			dst = append(dst, [2]int{start, end})
			off = end
		}
	}
	for _, re := range h.res {
		for _, m := range re.FindAllIndex(line, -1) {
			if m[1] > m[0] && (!h.word || wholeWord(line, m[0], m[1])) {
				dst = append(dst, [2]int{m[0], m[1]})
			}
		}
	}
	if len(dst) < 2 {
		return dst
	}
	slices.SortFunc(dst, func(a, b [2]int) int { return a[0] - b[0] })
	out := dst[:1]
	for _, s := range dst[1:] {
		if last := &out[len(out)-1]; s[0] <= last[1] {
			last[1] = max(last[1], s[1])
		} else {
			out = append(out, s)
		}
	}
	return out
}

// lowerASCII appends b with ASCII letters lowered: the fold -i and (?i)
// literals use (the C locale's, as grep's).
func lowerASCII(dst, b []byte) []byte {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// SGR sequences, as grep's defaults (GREP_COLORS ms=01;31, fn=35, se=36).
const (
	colorMatch = "\x1b[01;31m\x1b[K"
	colorName  = "\x1b[35m\x1b[K"
	colorSep   = "\x1b[36m\x1b[K"
	colorEnd   = "\x1b[m\x1b[K"
)

// useColor decides --color: "always", "never", or "auto" (a terminal,
// unless NO_COLOR is set or TERM is dumb).
func useColor(mode string, tty bool) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	return tty && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}
