package search

import (
	"testing"
)

// TestFoldRegexPrunes: a (?i) regex literal must prune blocks about as
// well as the same literal under -i (ASCII folding). With a k or an s in it,
// Plan.Required is OR(fold literal, "\u212a" or "\u017f"), and those
// partners alone are 3 and 2 bytes, shorter than a gram: the index pruned
// nothing until Plan.Index spelled the partners out inside the literal
// (query.IndexLiterals).
func TestFoldRegexPrunes(t *testing.T) {
	c := generatedCorpus(t, 20000)
	for _, tc := range []struct{ fold, regex string }{
		{`{app=~".+"} |= "kernel panic"`, `{app=~".+"} |~ "(?i)kernel panic"`},
		{`{app=~".+"} |= "segfault at"`, `{app=~".+"} |~ "(?i)segfault at"`},
		{`{app=~".+"} |= "out of memory"`, `{app=~".+"} |~ "(?i)out of memory"`},
		{`{app=~".+"} |= "xyzzy_absent"`, `{app=~".+"} |~ "(?i)xyzzy_absent"`},
		{`{app=~".+"} |= "xyzzy_absent"`, `{app=~".+"} |~ "(?i)xyzzy_(?:absent|missing)"`},
	} {
		_, _, lit, _ := runBoth(t, c, indexQuery{logql: tc.fold}, true)
		idx, brute, re, _ := runBoth(t, c, indexQuery{logql: tc.regex}, true)
		t.Logf("%s: %d of %d blocks pruned; %s: %d pruned (%s matches, brute force %s)", tc.fold, lit.PrunedIndex, lit.Blocks, tc.regex, re.PrunedIndex, idx[0].line, brute[0].line)
		if lit.PrunedIndex > 0 && re.PrunedIndex < lit.PrunedIndex/2 {
			t.Errorf("%s pruned %d blocks, %s only %d", tc.fold, lit.PrunedIndex, tc.regex, re.PrunedIndex)
		}
	}
}
