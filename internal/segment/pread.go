package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Blocks are read with pread(2) from a descriptor the Reader keeps, when
// it has one, rather than through the mapping. A full scan reads every
// block once, and reading a mapping costs a page fault per few pages
// plus the release of the pages afterwards (release.go); pread copies
// the same page-cache bytes into a reused buffer with neither. On a VM
// whose page tables are costly to change (a PVM guest, 2026-12-01),
// checksumming a 32 MB segment 130 KB at a time took 21-36 ms through a
// fresh mapping against 6-7 ms with pread into one buffer, and `hay
// search -c level=info` on 1M lines used 10-20% less CPU. The index,
// the block metadata and the skip index stay mapped: they are small,
// read sparsely, and kept for the Reader's life. So a segment file cut
// short after Open (which nothing in hay does: segments are immutable)
// gives a *CorruptError when a block past the cut is read, but a lookup
// in its skip index, at the file's end, still faults (SIGBUS) as every
// read through the mapping did before (review h111 P1).
//
// A kept descriptor is one more per open segment, and a server holds
// many tenants' segments open for long. So descriptors are kept only up
// to a process-wide budget (fileBudget) and a Reader past it reads
// through its mapping as before. The budget is a sixteenth of the
// descriptor limit: the server's tenant bound (server.DefaultMaxOpenTenants)
// takes half of the table and leaves the rest for connections and for
// files being written; this takes a quarter of that rest.

// fileBudget returns how many Readers may keep a descriptor; a variable
// for tests.
var fileBudget = sync.OnceValue(func() int64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 64 // a sixteenth of the usual 1024
	}
	return int64(min(rl.Cur/16, 1<<20))
})

// keptFiles counts the descriptors Readers hold.
var keptFiles atomic.Int64

// keepFile reports whether a Reader may keep one more descriptor and,
// if so, counts it; dropFile gives it back.
func keepFile() bool {
	if keptFiles.Add(1) > fileBudget() {
		keptFiles.Add(-1)
		return false
	}
	return true
}

func dropFile() { keptFiles.Add(-1) }

// storedBufs holds the heap buffers blocks too small or too large for
// an arena (storedArena) are read into: one per reading goroutine at a
// time, each as large as the largest block it read.
var storedBufs = sync.Pool{New: func() any { return new([]byte) }}

// readBlockFile is readBlock through r.file: it reads the stored block
// into a pooled buffer and decodes it from there. A block the file no
// longer holds (cut after Open; read through the mapping, its pages past
// the end would be a SIGBUS that kills the process) is a *CorruptError;
// another read error names the file.
func (r *Reader) readBlockFile(i int, m *BlockMeta, dst *Block, withAttrs bool) error {
	var src []byte
	if a := storedArena(m.length); a != nil {
		defer arenas.put(a)
		src = a.mem[:m.length]
	} else {
		bp := storedBufs.Get().(*[]byte)
		defer storedBufs.Put(bp)
		if int64(cap(*bp)) < m.length {
			*bp = make([]byte, m.length)
		}
		src = (*bp)[:m.length]
	}
	if _, err := r.file.ReadAt(src, m.offset); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return &CorruptError{File: r.path, Block: i, Reason: "file ends before the block does (truncated after it was opened)"}
		}
		return fmt.Errorf("segment %s: block %d: %w", r.path, i, err)
	}
	if err := decodeBlockOpt(src, m, dst, r.version, withAttrs); err != nil {
		return &CorruptError{File: r.path, Block: i, Reason: err.Error()}
	}
	return nil
}

// keptFile is a descriptor a Reader keeps, counted in keptFiles until
// it is given back once: by Close, or by a cleanup when the Reader is
// collected without one (a Reader dropped unclosed must not shrink the
// budget for the life of the process: review h111 P2).
type keptFile struct {
	f     *os.File
	given atomic.Bool
}

// giveBack closes k's descriptor and uncounts it, the first time only.
func (k *keptFile) giveBack() error {
	if !k.given.CompareAndSwap(false, true) {
		return nil
	}
	dropFile()
	return k.f.Close()
}

// storedArena returns an arena (arena.go) to read a stored block of n
// bytes into, or nil for a heap buffer: the arena's huge page takes one
// fault where fresh heap buffers for ~130 KB blocks took ~115 in a
// search reading 12 blocks (the kernel's copy faulting them in, and a
// new buffer for each larger block), 2-3% of `hay search -c panic:`'s
// CPU on 1M lines. The arena goes back to the warm pool after the
// decode. Blocks under stagedHeapBytes stay on the heap: faulting in
// a huge page for them costs more than it saves.
func storedArena(n int64) *arena {
	if n < stagedHeapBytes || n > arenaSize {
		return nil
	}
	return arenas.get()
}

// stagedHeapBytes is the stored size under which a block is read into
// a pooled heap buffer rather than an arena.
const stagedHeapBytes = 16 << 10

// closeFile closes r's kept descriptor, if any.
func (r *Reader) closeFile() error {
	if r.kept == nil {
		return nil
	}
	err := r.kept.giveBack()
	r.file, r.kept = nil, nil
	if err != nil {
		return fmt.Errorf("segment: close %s: %w", r.path, err)
	}
	return nil
}

// keepFileOf is what OpenIn does with the descriptor it mapped the
// segment through: r keeps it for reading blocks when the budget allows,
// and otherwise it is closed (the mapping outlives it).
func (r *Reader) keepFileOf(f *os.File) {
	if !keepFile() {
		f.Close()
		return
	}
	r.file, r.kept = f, &keptFile{f: f}
	runtime.AddCleanup(r, func(k *keptFile) { k.giveBack() }, r.kept)
}
