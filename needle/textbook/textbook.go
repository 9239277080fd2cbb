// Package textbook holds the textbook substring searches that Haystack's
// needle package is measured against: a naive double loop, Boyer-Moore-
// Horspool, Knuth-Morris-Pratt, and two SWAR ("SIMD within a register")
// prefilters over 8-byte words, one anchored on the needle's first byte and
// one on its first and last bytes.
//
// They follow the textbook descriptions (and those of the blog post that
// compared them on log lines) on purpose, without the refinements that make
// package needle fast: they are the baselines of `hay bench kernels`, not
// code to search with. Each has bytes.Index semantics (an empty needle
// matches at 0; -1 when absent) and is tested against bytes.Index.
//
// Algorithms with preprocessing (Horspool's shift table, KMP's failure
// table) also come in a prepared form, so a benchmark can build the table
// once per needle rather than once per line.
//
// The searches are marked noinline: a benchmark then pays one call per
// line for every method, as it does for bytes.Index and needle, and each
// loop's machine code does not depend on its caller. Inlined into the
// closures of `hay bench kernels`, the naive and KMP loops ran up to 2x
// slower, by different amounts from one build to the next.
package textbook

// Naive is the double loop: at every start position compare the needle
// byte by byte, leaving at the first mismatch. It is O(n·m) in the worst
// case, and every byte costs a bounds-checked load, a compare and a
// data-dependent branch.
//
//go:noinline
func Naive(haystack, needle []byte) int {
	n, m := len(haystack), len(needle)
	if m == 0 {
		return 0
	}
	for i := 0; i <= n-m; i++ {
		j := 0
		for j < m && haystack[i+j] == needle[j] {
			j++
		}
		if j == m {
			return i
		}
	}
	return -1
}
