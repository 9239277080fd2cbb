package segment

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// releaseBatch is how many bytes of blocks read through mappings, over
// all Readers of the process, wait before their pages are released
// together (a variable for tests).
var releaseBatch = 8 << 20

// released batches the release of mapped block pages, which only Readers
// past the budget of kept descriptors have (pread.go: the others read
// their blocks with pread and never touch them). A full scan through
// mappings touches every page of every segment, and touched pages of a mapping
// stay in the process's resident set until it exits, so without a
// release a scan's RSS grows with the data (1.2 GB at 20M lines) although
// those pages are only reclaimable page cache. MADV_DONTNEED on a
// read-only file mapping drops just the page table entries: the pages
// stay cached, and a later read faults them back in with the same bytes.
//
// Releasing each block's pages as it was read cost a system call and a
// TLB flush per block (~27 KB): on a VM whose page tables are costly to
// change (a PVM guest, 2026-12-01) a full scan of 1M lines spent 35 ms
// more wall time and 70 ms more CPU than without any release, and 64 MB
// read 32 KB at a time took 350 ms against 23 ms. Batched, a scan makes
// one call per Reader every releaseBatch bytes. A scan's resident pages
// then stay under releaseBatch plus the pages a fault maps around the
// blocks being read (the page cache's large folios: ~0.5 MB around a
// 16 KB block on ext4, Linux 6.18). Sparse reads of single blocks leave
// more, as the per-block release did (review h107 B2: 16-25 times the
// batch in a test of random reads; 70 MB after 150 needle queries on a
// 249 MB store, 69 MB before batching).
var released struct {
	mu      sync.Mutex
	pending int // bytes read and not released
	// spans holds, per Reader with pending bytes, the range of its
	// mapping those reads covered. Close removes its Reader under mu
	// before unmapping, so a release never touches a closed mapping.
	spans map[*Reader]mappedSpan
}

type mappedSpan struct{ lo, hi int }

// release records that the mapped bytes [off, off+n) of r were read, and
// once releaseBatch bytes are pending releases them all.
func (r *Reader) release(off, n int) {
	if !r.mapped {
		// On ordinary memory (a Reader over a byte slice, as in tests)
		// MADV_DONTNEED would zero the pages.
		return
	}
	released.mu.Lock()
	defer released.mu.Unlock()
	if r.closed.Load() {
		return
	}
	if released.spans == nil {
		released.spans = map[*Reader]mappedSpan{}
	}
	s, ok := released.spans[r]
	if !ok {
		s = mappedSpan{off, off + n}
	}
	s.lo, s.hi = min(s.lo, off), max(s.hi, off+n)
	released.spans[r] = s
	released.pending += n
	if released.pending < releaseBatch {
		return
	}
	page := os.Getpagesize()
	for rr, s := range released.spans {
		// Rounded out to whole pages: a page shared with a block not
		// read yet is faulted back in by that read.
		start := s.lo &^ (page - 1)
		end := min(len(rr.data), (s.hi+page-1)&^(page-1))
		if start < end {
			_ = unix.Madvise(rr.data[start:end], unix.MADV_DONTNEED)
		}
	}
	clear(released.spans)
	released.pending = 0
}

// forgetReleases drops r's pending span, before its mapping goes.
func (r *Reader) forgetReleases() {
	released.mu.Lock()
	delete(released.spans, r)
	released.mu.Unlock()
}
