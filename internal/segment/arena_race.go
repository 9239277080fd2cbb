//go:build race

package segment

// With the race detector, arenas come from the Go heap: the detector does
// not see memory outside it, and an arena reused while a slice of its
// previous block is still read is the kind of race it should report.
func mapArena() []byte { return make([]byte, arenaSize) }

// releaseArena lets the collector free heap arenas beyond the warm ones.
func releaseArena([]byte) bool { return false }
