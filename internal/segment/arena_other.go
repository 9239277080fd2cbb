//go:build !linux && !race

package segment

// mapArena returns nil: without the Linux huge page and mapping calls an
// arena would only be a bigger heap allocation, so pooled blocks use the
// heap directly.
func mapArena() []byte { return nil }

// releaseArena is never reached: there are no arenas.
func releaseArena([]byte) bool { return false }
