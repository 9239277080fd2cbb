//go:build linux && !race

package segment

import (
	"testing"
	"unsafe"
)

// TestArenaAligned checks that mapped arenas start on a huge page
// boundary, without which the kernel cannot back them with a huge page.
func TestArenaAligned(t *testing.T) {
	for range 4 {
		mem := mapArena()
		if mem == nil {
			t.Fatal("mapArena failed")
		}
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(mem))); p%arenaSize != 0 || len(mem) != arenaSize {
			t.Fatalf("arena at %#x, %d bytes: want %d-aligned", p, len(mem), arenaSize)
		}
		mem[0], mem[arenaSize-1] = 1, 2 // writable end to end
		putArena(&arena{mem: mem})
	}
}
