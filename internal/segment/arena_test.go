package segment

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// within reports whether the n bytes at address p lie inside mem.
func within(mem []byte, p uintptr, n int) bool {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	return p >= lo && p+uintptr(n) <= lo+uintptr(len(mem))
}

// addr is the address of s's first element.
func addr(s []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(s))) }

// span is a buffer's byte range, for overlap checks.
type span struct {
	name   string
	lo, hi uintptr
}

func spanOf[T any](name string, s []T) span {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return span{name, lo, lo + uintptr(cap(s))*unsafe.Sizeof(*new(T))}
}

// TestArenaSmallAfterLarge: a small block reuses the arena when the
// block's buffers are already in it (those pages are resident); only a
// fresh one keeps a small block on the heap.
func TestArenaSmallAfterLarge(t *testing.T) {
	b := newPooledBlock()
	if b.arena == nil {
		t.Skip("no arenas on this platform (Linux only)")
	}
	b.fit(1<<20, 100, 0, 1000)
	if !within(b.arena.mem, addr(b.Data), 1) {
		t.Fatal("a 1 MiB block was not put in the arena")
	}
	b.fit(100, 3, 0, 1)
	if !within(b.arena.mem, addr(b.Data), 1) || cap(b.Data) < 100+decodeSlack {
		t.Fatal("a small block after a large one left the arena")
	}
}

// TestArenaFit checks the layout fit gives a pooled block: every buffer
// inside the arena, large enough, aligned and disjoint from the others;
// and a block too large for the arena, or one too small to be worth its
// first huge page, left on the heap.
func TestArenaFit(t *testing.T) {
	b := newPooledBlock()
	if b.arena == nil {
		t.Skip("no arenas on this platform (Linux only)")
	}
	cases := []struct {
		data, meta, attrs, n int
		fits                 bool
	}{
		{0, 0, 0, 0, false}, // small blocks stay on the heap (from a heap buffer)
		{1, 3, 0, 1, false},
		{smallBlockBytes - 4096, 3, 0, 1, false},
		{smallBlockBytes, 3, 0, 1, true},
		{1 << 20, 20_000, 0, 4000, true}, // a default block of ~260-byte lines
		{1<<20 - 7, 3, 0, 1, true},
		{arenaSize - 512, 1, 0, 1, true},
		{arenaSize, 0, 0, 1, false},
		{1 << 20, 160_000, 0, 80_000, false}, // 13-byte lines: per-entry arrays too large
		{100, 1 << 20, 0, arenaSize / 8, false},
		{600_000, 20_000, 400_000, 6000, true}, // lines and OTel metadata
		{smallBlockBytes - 4096, 3, 4096, 1, true},
		{1 << 20, 3, 1 << 20, 1, false},
		{100, 3, 1, 1, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d/%d/%d/%d", c.data, c.meta, c.attrs, c.n), func(t *testing.T) {
			heap := []byte("heap")
			b.Data, b.meta, b.Offsets, b.Times, b.Streams = heap, nil, nil, nil, nil
			b.attrs, b.AttrOffsets = heap, []uint32{1}
			b.fit(c.data, c.meta, c.attrs, c.n)
			if !c.fits {
				if addr(b.Data) != addr(heap) || b.meta != nil || b.Offsets != nil || addr(b.attrs) != addr(heap) {
					t.Fatal("a block too large or too small for the arena was put in it")
				}
				return
			}
			if len(b.Data) != 0 || len(b.meta) != 0 || len(b.Offsets) != 0 || len(b.Times) != 0 || len(b.Streams) != 0 ||
				len(b.attrs) != 0 || len(b.AttrOffsets) != 0 || len(b.AttrData) != 0 {
				t.Fatal("fit left non-empty buffers")
			}
			if cap(b.Data) < c.data+decodeSlack || cap(b.meta) < c.meta+decodeSlack || cap(b.Offsets) < c.n+1 ||
				cap(b.Times) < c.n || cap(b.Streams) < c.n {
				t.Fatalf("capacities %d %d %d %d %d too small", cap(b.Data), cap(b.meta), cap(b.Offsets), cap(b.Times), cap(b.Streams))
			}
			spans := []span{spanOf("Data", b.Data), spanOf("meta", b.meta), spanOf("Offsets", b.Offsets)}
			if c.n > 0 {
				spans = append(spans, spanOf("Times", b.Times), spanOf("Streams", b.Streams))
			}
			if c.attrs == 0 {
				// No metadata: no buffer left where an earlier layout put
				// it (it could overlap this one's).
				if b.attrs != nil || b.AttrOffsets != nil {
					t.Fatal("fit kept attrs buffers for a block without metadata")
				}
			} else {
				if cap(b.attrs) < c.attrs+decodeSlack || cap(b.AttrOffsets) < c.n+1 {
					t.Fatalf("attrs capacities %d %d too small", cap(b.attrs), cap(b.AttrOffsets))
				}
				spans = append(spans, spanOf("attrs", b.attrs), spanOf("AttrOffsets", b.AttrOffsets))
			}
			for i, s := range spans {
				if !within(b.arena.mem, s.lo, int(s.hi-s.lo)) {
					t.Errorf("%s outside the arena", s.name)
				}
				if s.lo%8 != 0 {
					t.Errorf("%s not 8-byte aligned", s.name)
				}
				for _, o := range spans[:i] {
					if s.lo < o.hi && o.lo < s.hi {
						t.Errorf("%s overlaps %s", s.name, o.name)
					}
				}
			}
		})
	}
}

// TestArenaBlocksMatchHeap decodes blocks of several shapes, in an order
// that alternates large and small, into one pooled block and into heap
// blocks, and wants the same rows; the pooled block must use its arena
// for every block that fits.
func TestArenaBlocksMatchHeap(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), (3<<20)/16) // over the arena
	var mixed []Entry
	for i := range 3000 {
		mixed = append(mixed, Entry{Time: int64(i), Stream: uint32(i % 3), Line: fmt.Appendf(nil, "line %d level=%s", i, []string{"info", "warn"}[i%2])})
		if i == 1000 {
			mixed = append(mixed, Entry{Time: int64(i), Stream: 9, Line: big})
		}
	}
	var tiny []Entry // many entries: per-entry arrays beyond the arena
	for i := range 300_000 {
		tiny = append(tiny, Entry{Time: int64(i), Stream: uint32(i % 2), Line: []byte{byte('a' + i%26)}})
	}
	dir := t.TempDir()
	p1, _ := writeSegment(t, dir, "mixed", mixed, Options{BlockSize: 16 << 10})
	p2, _ := writeSegment(t, dir, "tiny", tiny, Options{BlockSize: MaxBlockSize})
	p3, _ := writeSegment(t, dir, "logs", corpora()["logs"], Options{BlockSize: 1 << 20, Codec: CodecLZ4})
	p4, _ := writeSegment(t, dir, "otel", otelEntries(t, 12_000, true), Options{BlockSize: 1 << 20, Codec: CodecLZ4})
	var rs []*Reader
	for _, p := range []string{p1, p2, p3, p4} {
		r, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rs = append(rs, r)
	}
	type ref struct{ r, i int }
	var order []ref
	for k := 0; ; k++ {
		added := false
		for ri, r := range rs {
			if k < r.NumBlocks() {
				order = append(order, ref{ri, k})
				added = true
			}
		}
		if !added {
			break
		}
	}
	pooled := GetBlock()
	defer PutBlock(pooled)
	inArena := 0
	for _, o := range order {
		r, m := rs[o.r], rs[o.r].BlockMeta(o.i)
		if err := r.ReadBlock(o.i, pooled); err != nil {
			t.Fatal(err)
		}
		want := new(Block)
		if err := r.ReadBlock(o.i, want); err != nil {
			t.Fatal(err)
		}
		checkBlock(t, m, pooled)
		if !bytes.Equal(pooled.Data, want.Data) || !slices.Equal(pooled.Offsets, want.Offsets) ||
			!slices.Equal(pooled.Times, want.Times) || !slices.Equal(pooled.Streams, want.Streams) ||
			!bytes.Equal(pooled.AttrData, want.AttrData) || !slices.Equal(pooled.AttrOffsets, want.AttrOffsets) {
			t.Fatalf("segment %d block %d: pooled block differs from the heap one", o.r, o.i)
		}
		if pooled.arena != nil && m.RawBytes >= smallBlockBytes && m.RawBytes < 1<<20 && m.Entries < 10_000 {
			if !within(pooled.arena.mem, addr(pooled.Data), cap(pooled.Data)) {
				t.Fatalf("segment %d block %d (%d bytes) not decoded in the arena", o.r, o.i, m.RawBytes)
			}
			inArena++
		}
		if m.RawBytes > arenaSize && pooled.arena != nil &&
			within(pooled.arena.mem, addr(pooled.Data), 1) {
			t.Fatalf("segment %d block %d: %d bytes decoded in the arena", o.r, o.i, m.RawBytes)
		}
	}
	if pooled.arena != nil && inArena == 0 {
		t.Fatal("no block was decoded in the arena")
	}
}

// TestArenaRecycledWhenCollected drops a pooled block without PutBlock
// and wants its arena back in the process's pool once the block is
// collected.
func TestArenaRecycledWhenCollected(t *testing.T) {
	b := newPooledBlock()
	a := b.arena
	if a == nil {
		t.Skip("no arenas on this platform (Linux only)")
	}
	runtime.KeepAlive(b)
	b = nil
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		arenas.mu.Lock()
		back := slices.Contains(arenas.warm, a) || slices.Contains(arenas.cold, a)
		arenas.mu.Unlock()
		if back {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the arena of a collected block never came back")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestArenaWarmBound returns more arenas to a pool than it keeps warm:
// the rest must go cold (pages released) or, for heap arenas, to the
// collector; warm ones are reused first, then cold ones.
func TestArenaWarmBound(t *testing.T) {
	var p arenaPool
	n := maxWarmArenas() + 3
	var got []*arena
	for range n {
		a := p.get()
		if a == nil {
			t.Skip("no arenas on this platform (Linux only)")
		}
		if len(a.mem) != arenaSize {
			t.Fatalf("arena of %d bytes", len(a.mem))
		}
		for i := range a.mem {
			a.mem[i] = 0xAA
		}
		got = append(got, a)
	}
	for _, a := range got {
		p.put(a)
	}
	warm, cold := slices.Clone(p.warm), slices.Clone(p.cold)
	if len(warm) != maxWarmArenas() || !slices.Equal(warm, got[:len(warm)]) {
		t.Fatalf("%d warm arenas, want the first %d returned", len(warm), maxWarmArenas())
	}
	if len(cold) != 0 && !slices.Equal(cold, got[len(warm):]) {
		t.Fatalf("%d cold arenas, want the last 3 returned (or none where they go to the collector)", len(cold))
	}
	for _, a := range warm {
		if a.mem[0] != 0xAA || a.mem[arenaSize-1] != 0xAA {
			t.Fatal("a warm arena lost its contents")
		}
	}
	for _, a := range cold {
		if i := slices.IndexFunc(a.mem, func(c byte) bool { return c != 0 }); i >= 0 {
			t.Fatalf("a cold arena kept byte %d: its pages were not released", i)
		}
	}
	for i := range warm {
		if a := p.get(); a != warm[len(warm)-1-i] {
			t.Fatal("get did not take the warm arenas first")
		}
	}
	for i := range cold {
		if a := p.get(); a != cold[len(cold)-1-i] {
			t.Fatal("get mapped a new arena while cold ones were free")
		}
	}
}
