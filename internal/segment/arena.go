package segment

import (
	"runtime"
	"sync"
	"unsafe"
)

// Pooled blocks (GetBlock) decode into an arena: one 2 MiB region, from
// an anonymous mapping on Linux, that holds all of a block's buffers. The
// first decode into fresh memory is what a short search pays for: a
// 1 MiB block touches ~280 new 4 KiB pages (data, meta, per-entry
// arrays), each a page fault of a few µs, and a CLI search that decodes
// two blocks spent ~40% of its page faults there. The arena is aligned to
// 2 MiB and marked MADV_HUGEPAGE, so where transparent huge pages are on
// ("madvise" or "always") the first decode takes one fault for the lot;
// elsewhere it faults as heap memory would. Measured on a 1M-line store
// (2 cores, THP "madvise"; perf stat -r 30): a trace-id search decoding 2
// blocks went from ~1290 to ~550 page faults and 8.0 to 5.7 ms CPU, one
// decoding 12 blocks from ~2200 to ~570 faults and 20 to 14.3 ms CPU; a
// full scan from ~4350 to ~1480 faults and 4% less CPU. Off the heap,
// block buffers also no longer trigger garbage collections (1 and 3
// fewer in those searches), and without THP the arenas still gain half
// of it (no regrowing buffers, no pooled blocks dropped by a GC).
//
// An arena is never unmapped: it goes back to a free list when its block
// is collected (runtime.AddCleanup; a pooled block may be dropped by the
// pool or by a caller that never calls PutBlock), and arenas beyond the
// ones kept warm have their pages given back with MADV_DONTNEED, keeping
// the mapping. So a stale slice of a block's buffers can read changed
// data, as with a pooled heap buffer, but never unmapped memory.

// arenaSize is the size and alignment of an arena: one huge page on
// x86-64 and arm64 with 4 KiB pages.
const arenaSize = 2 << 20

// arenaAlign is the alignment of each buffer within an arena (int64
// arrays need 8; 64 keeps buffers on cache lines of their own).
const arenaAlign = 64

type arena struct {
	mem []byte // arenaSize bytes
}

// arenaPool holds the arenas of collected blocks. Warm ones keep their
// pages (reuse costs no fault); cold ones gave them back to the OS.
type arenaPool struct {
	mu         sync.Mutex
	warm, cold []*arena
}

// arenas is the process's pool: blocks come and go on every goroutine.
var arenas arenaPool

// maxWarmArenas bounds the memory kept for blocks not in use: a search
// holds up to about 3 decoded blocks per worker at a time (2 per worker
// waiting in order, one being decoded), and no more than 128 MiB stays
// resident for a big machine's idle pool.
func maxWarmArenas() int { return min(3*runtime.GOMAXPROCS(0)+1, 64) }

// get returns a free arena, warm first, else a new one; nil where arenas
// bring nothing or memory cannot be mapped (the block then uses the heap).
func (p *arenaPool) get() *arena {
	p.mu.Lock()
	var a *arena
	if n := len(p.warm); n > 0 {
		a, p.warm = p.warm[n-1], p.warm[:n-1]
	} else if n := len(p.cold); n > 0 {
		a, p.cold = p.cold[n-1], p.cold[:n-1]
	}
	p.mu.Unlock()
	if a != nil {
		return a
	}
	mem := mapArena()
	if mem == nil {
		return nil
	}
	return &arena{mem: mem}
}

// put takes back an arena no slice points into any more.
func (p *arenaPool) put(a *arena) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.warm) < maxWarmArenas() {
		p.warm = append(p.warm, a)
		return
	}
	if releaseArena(a.mem) {
		p.cold = append(p.cold, a)
	}
	// Otherwise (heap memory) the collector frees it.
}

// putArena returns a collected block's arena to the process's pool.
func putArena(a *arena) { arenas.put(a) }

// newPooledBlock returns a Block for the pool, with an arena when one is
// available. The arena returns to the free list when the block is
// collected, never earlier: until then the block's slices may point in it.
func newPooledBlock() *Block {
	b := new(Block)
	if a := arenas.get(); a != nil {
		b.arena = a
		runtime.AddCleanup(b, putArena, a)
	}
	return b
}

// smallBlockBytes is the size under which a block's buffers stay on the
// heap unless they already point into its arena (see fit).
const smallBlockBytes = 128 << 10

// inArena reports whether b's data buffer points into its arena (pages a
// previous decode made resident).
func (b *Block) inArena() bool {
	if cap(b.Data) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b.Data)))
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b.arena.mem)))
	return p >= lo && p < lo+uintptr(len(b.arena.mem))
}

// fit points b's buffers into its arena, sized for a block of data,
// meta and attrs bytes and n entries, when the whole block fits; otherwise
// the buffers grow on the heap as usual. The buffers' contents are not
// kept.
//
// A layout places every buffer, the attrs ones too (none when attrs is
// 0): a buffer left where an earlier layout put it could overlap this
// layout's others, and a later block too large for the arena, which
// decodes into whichever buffers are large enough, would then decode two
// sections into the same bytes.
func (b *Block) fit(data, meta, attrs, n int) {
	if b.arena == nil {
		return
	}
	up := func(x int) int { return (x + arenaAlign - 1) &^ (arenaAlign - 1) }
	dataCap, metaCap, attrsCap := data+decodeSlack, meta+decodeSlack, 0
	attrOffs := 0
	if attrs > 0 {
		attrsCap, attrOffs = attrs+decodeSlack, n+1
	}
	offData := 0
	offMeta := offData + up(dataCap)
	offOffs := offMeta + up(metaCap)
	offTimes := offOffs + up(4*(n+1))
	offStreams := offTimes + up(8*n)
	offAttrs := offStreams + up(4*n)
	offAttrOffs := offAttrs + up(attrsCap)
	end := offAttrOffs + 4*attrOffs
	if data < 0 || meta < 0 || attrs < 0 || n < 0 || end > len(b.arena.mem) || end < 0 {
		return
	}
	if end < smallBlockBytes && !b.inArena() {
		// A small block stays on the heap: its first touch of a fresh
		// arena would fault in a whole 2 MiB huge page. A search that
		// holds one block per stream (a store of many small ingested
		// files) took 2 MiB per stream: 4.1 GB for 2,000 files of 600 B.
		return
	}
	mem := b.arena.mem
	b.Data = mem[offData:offData:dataCap]
	b.meta = mem[offMeta : offMeta : offMeta+metaCap]
	b.Offsets = unsafe.Slice((*uint32)(unsafe.Pointer(&mem[offOffs])), n+1)[:0]
	b.Times, b.Streams = nil, nil
	if n > 0 {
		b.Times = unsafe.Slice((*int64)(unsafe.Pointer(&mem[offTimes])), n)[:0]
		b.Streams = unsafe.Slice((*uint32)(unsafe.Pointer(&mem[offStreams])), n)[:0]
	}
	b.attrs, b.AttrData, b.AttrOffsets = nil, nil, nil
	if attrs > 0 {
		b.attrs = mem[offAttrs : offAttrs : offAttrs+attrsCap]
		b.AttrOffsets = unsafe.Slice((*uint32)(unsafe.Pointer(&mem[offAttrOffs])), attrOffs)[:0]
	}
}
