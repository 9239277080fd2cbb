// Package testdiff says where two sequences first differ, for the failure
// messages of the tests that compare a whole ordered answer with an
// oracle's (the search, server and CLI order tests).
package testdiff

// First returns the first index at which got and want differ, counting a
// missing element as a difference, or -1 if they are equal.
func First[T comparable](got, want []T) int {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return i
		}
	}
	if len(got) != len(want) {
		return min(len(got), len(want))
	}
	return -1
}

// At returns s[i] for a message, or "(none)" when i is past the end.
func At[T any](s []T, i int) any {
	if i >= 0 && i < len(s) {
		return s[i]
	}
	return "(none)"
}
