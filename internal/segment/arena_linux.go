//go:build linux && !race

package segment

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapArena maps arenaSize bytes aligned to arenaSize and asks for
// transparent huge pages there: the kernel only backs a whole aligned
// 2 MiB range with a huge page, hence the alignment. It maps twice the
// size and unmaps the unaligned head and tail, before anyone can hold a
// slice of them. It returns nil if the mapping fails.
func mapArena() []byte {
	const n = 2 * arenaSize
	p, err := unix.MmapPtr(-1, 0, nil, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	head := uintptr(-int(uintptr(p))) & (arenaSize - 1) // bytes to the next boundary
	if head > 0 {
		_ = unix.MunmapPtr(p, head)
	}
	a := unsafe.Add(p, head)
	if tail := n - head - arenaSize; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(a, arenaSize), tail)
	}
	mem := unsafe.Slice((*byte)(a), arenaSize)
	// EINVAL where the kernel has no THP support: the arena then takes
	// 4 KiB pages, like the heap.
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	return mem
}

// releaseArena gives an idle arena's pages back to the OS, keeping the
// mapping (a stale slice reads zeros, never faults on unmapped memory).
// The next use takes fresh zero pages.
func releaseArena(mem []byte) bool {
	_ = unix.Madvise(mem, unix.MADV_DONTNEED)
	return true
}
