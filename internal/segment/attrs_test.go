package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"haystack/internal/attrs"
)

// maxAttrs returns a valid encoding of exactly attrs.MaxBytes: one pair
// "a" whose value fills the rest (1 count + 1 + "a" + 3 + value).
func maxAttrs(t testing.TB) []byte {
	t.Helper()
	b := attrs.MustPairs("a", strings.Repeat("v", attrs.MaxBytes-6))
	if len(b) != attrs.MaxBytes {
		t.Fatalf("encoding of %d bytes", len(b))
	}
	return b
}

// otelEntries returns n log lines with OTel-like metadata (trace_id and
// span_id as random hex, a severity) on every entry, or on none.
func otelEntries(t testing.TB, n int, withAttrs bool) []Entry {
	rng := rand.New(rand.NewPCG(7, 8))
	hex := func(k int) string {
		b := make([]byte, k)
		for i := range b {
			b[i] = "0123456789abcdef"[rng.IntN(16)]
		}
		return string(b)
	}
	es := make([]Entry, 0, n)
	for i := range n {
		e := Entry{
			Time:   1_700_000_000_000_000_000 + int64(i)*1_000_000,
			Stream: uint32(i % 4),
			Line: fmt.Appendf(nil, "2026-11-30T01:%02d:%02d.%03dZ level=%s msg=%q user=%d latency=%dms",
				i/60%60, i%60, i%1000, []string{"info", "warn", "error", "debug"}[rng.IntN(4)],
				[]string{"request served", "cache miss", "timeout talking to db", "retrying"}[rng.IntN(4)],
				rng.IntN(10000), rng.IntN(2000)),
		}
		if withAttrs {
			e.Attrs = attrs.MustPairs("trace_id", hex(32), "span_id", hex(16), "severity_text", []string{"INFO", "WARN"}[i%2])
		}
		es = append(es, e)
	}
	return es
}

// attrCorpora returns entry sets with metadata: mixed with entries and
// runs of blocks without, on empty lines, at the limit, in blocks of one.
func attrCorpora(t testing.TB) map[string][]Entry {
	c := map[string][]Entry{}
	rng := rand.New(rand.NewPCG(11, 12))
	var mixed []Entry
	for i := range 3000 {
		e := Entry{Time: int64(i) * 1e6, Stream: uint32(i % 5), Line: fmt.Appendf(nil, "line %d status=%d", i, 200+i%7)}
		switch {
		case i/500%2 == 1: // runs of entries, so whole blocks, without metadata
		case i%3 == 0:
			e.Attrs = attrs.MustPairs("trace_id", fmt.Sprintf("%032x", rng.Uint64()), "span_id", fmt.Sprintf("%016x", rng.Uint64()))
		case i%3 == 1:
			e.Attrs = attrs.MustPairs("k", strings.Repeat("x\x00\xff\n", rng.IntN(5)))
		}
		mixed = append(mixed, e)
	}
	c["attrs-mixed"] = mixed
	c["attrs-empty-lines"] = []Entry{
		{Time: 1, Attrs: attrs.MustPairs("a", "")},
		{Time: 2},
		{Time: 3, Attrs: attrs.MustPairs("_", "v", "Z9", "w")},
		{Time: 4, Line: []byte("x")},
	}
	big := maxAttrs(t)
	c["attrs-limit"] = []Entry{
		{Time: 1, Line: []byte("before"), Attrs: attrs.MustPairs("a", "1")},
		{Time: 2, Line: []byte("at the limit"), Attrs: big},
		{Time: 3, Line: bytes.Repeat([]byte("y"), 70_000), Attrs: big},
		{Time: 4, Line: []byte("after")},
		{Time: 5, Attrs: big},
	}
	c["attrs-otel"] = otelEntries(t, 2000, true)
	return c
}

// TestRoundTripAttrs writes and reads back entries with metadata with
// every option set, and checks the blocks' sizes count the metadata.
func TestRoundTripAttrs(t *testing.T) {
	dir := t.TempDir()
	for name, entries := range attrCorpora(t) {
		for _, o := range optionSets() {
			t.Run(fmt.Sprintf("%s/%v-%d-%d", name, o.Codec, o.BlockSize, o.Level), func(t *testing.T) {
				path, winfo := writeSegment(t, dir, "seg", entries, o)
				got, r := readAll(t, path)
				equalEntries(t, got, entries)
				if r.Info() != winfo {
					t.Fatalf("reader info %+v, writer %+v", r.Info(), winfo)
				}
				if err := r.Verify(); err != nil {
					t.Fatal(err)
				}
				checkBlockSizes(t, r, o)
			})
		}
	}
}

// TestNoAttrsCostsThreeBytes: a segment without metadata is version 3's
// plus exactly three bytes a block (the attrs codec and two zero
// lengths; and a byte more in the index when a block's length varint
// grows), and a block without metadata in a segment with some has an
// empty attrs section.
func TestNoAttrsCostsThreeBytes(t *testing.T) {
	for name, entries := range corpora() {
		for _, o := range []Options{{Codec: CodecNone, BlockSize: 100}, {BlockSize: 4096}, {Codec: CodecZstd}} {
			dir := t.TempDir()
			p3, i3 := writeSegmentVersion(t, dir, "v3", entries, o, formatV3)
			// Version 5 adds a few bytes a segment to version 4's skip
			// index (TestMetaIndexNoAttrsSameIndex).
			p4, i4 := writeSegmentVersion(t, dir, "v4", entries, o, formatV4)
			r3, err := Open(p3)
			if err != nil {
				t.Fatal(err)
			}
			r4, err := Open(p4)
			if err != nil {
				t.Fatal(err)
			}
			// Three bytes a block, and the index's varint of a block's
			// length may grow by a byte.
			want := i3.FileBytes
			for i := range min(r3.NumBlocks(), r4.NumBlocks()) {
				l3, l4 := r3.BlockMeta(i).length, r4.BlockMeta(i).length
				if l4 != l3+3 {
					t.Errorf("%s %+v: block %d of %d bytes in version 4, %d in version 3", name, o, i, l4, l3)
				}
				want += 3 + int64(uvarintLen(uint64(l4))-uvarintLen(uint64(l3)))
			}
			if i4.Blocks != i3.Blocks || i4.FileBytes != want {
				t.Errorf("%s %+v: version 4 %d bytes in %d blocks, version 3 %d in %d", name, o, i4.FileBytes, i4.Blocks, i3.FileBytes, i3.Blocks)
			}
			r3.Close()
			r4.Close()
		}
	}
	path, _ := writeSegment(t, t.TempDir(), "s", attrCorpora(t)["attrs-mixed"], Options{BlockSize: 4096})
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	with, without := 0, 0
	for i := range r.NumBlocks() {
		m := r.BlockMeta(i)
		blk := r.data[m.offset : m.offset+m.length]
		d := decoder{b: blk[3:]}
		for range 5 {
			d.uvarint()
		}
		raw, stored := d.uvarint(), d.uvarint()
		var b Block
		if err := r.ReadBlock(i, &b); err != nil {
			t.Fatal(err)
		}
		if len(b.AttrOffsets) == 0 {
			without++
			if raw != 0 || stored != 0 || blk[2] != byte(CodecNone) {
				t.Errorf("block %d without metadata: attrs codec %d, %d raw, %d stored", i, blk[2], raw, stored)
			}
		} else {
			with++
			if raw == 0 || stored == 0 {
				t.Errorf("block %d with metadata: %d raw, %d stored", i, raw, stored)
			}
		}
	}
	if with == 0 || without == 0 {
		t.Fatalf("%d blocks with metadata, %d without: want both", with, without)
	}
}

// TestWriterRejectsBadAttrs: Add and AddBlock refuse metadata that
// attrs.Validate refuses, and a version-3 writer refuses any; nothing of
// a refused entry is stored.
func TestWriterRejectsBadAttrs(t *testing.T) {
	good := attrs.MustPairs("a", "1")
	bad := map[string][]byte{
		"bad name":     {1, 2, '1', 'x', 0},
		"unsorted":     {2, 1, 'b', 0, 1, 'a', 0},
		"truncated":    good[:len(good)-1],
		"trailing":     append(bytes.Clone(good), 0),
		"zero pairs":   {0},
		"over the max": append(maxAttrs(t), 0),
	}
	dir := t.TempDir()
	for name, a := range bad {
		if attrs.Validate(a) == nil {
			t.Fatalf("%s: attrs.Validate accepts %q", name, a)
		}
		path := filepath.Join(dir, "s")
		w, err := Create(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(Entry{Time: 1, Line: []byte("ok"), Attrs: good}); err != nil {
			t.Fatal(err)
		}
		err = w.Add(Entry{Time: 2, Line: []byte("bad"), Attrs: a})
		if !errors.Is(err, attrs.ErrCorrupt) {
			t.Fatalf("%s: Add: %v", name, err)
		}
		// AddBlock, whether it would write the block whole or not.
		for _, bs := range []int{1, 1 << 20} {
			blk := &Block{
				Data: []byte("xy"), Offsets: []uint32{0, 1, 2}, Times: []int64{3, 4}, Streams: []uint32{0, 0},
				AttrData: append(bytes.Clone(good), a...), AttrOffsets: []uint32{0, uint32(len(good)), uint32(len(good) + len(a))},
			}
			w.blockSize = bs
			if err := w.AddBlock(blk); !errors.Is(err, attrs.ErrCorrupt) {
				t.Fatalf("%s: AddBlock (block size %d): %v", name, bs, err)
			}
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		got, _ := readAll(t, path)
		// Each AddBlock stored its first entry before the second failed:
		// Add's behaviour, entry by entry (a block that fails the checks
		// is not written whole).
		x := Entry{Time: 3, Line: []byte("x"), Attrs: good}
		equalEntries(t, got, []Entry{{Time: 1, Line: []byte("ok"), Attrs: good}, x, x})
	}
	w, err := create(filepath.Join(dir, "v3"), Options{}, formatV3)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Add(Entry{Line: []byte("x"), Attrs: good}); err == nil {
		t.Fatal("a version 3 writer stored metadata")
	}
}

// TestAddBlockAttrs: AddBlock of blocks with metadata (AttrOffsets of
// Len()+1, or empty for none), cut by Add's rule counting the metadata,
// writes the same file as Add of each entry.
func TestAddBlockAttrs(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	dir := t.TempDir()
	const bs = 400
	for trial := range 200 {
		var all []Entry
		for range 1 + rng.IntN(50) {
			e := Entry{Time: int64(len(all)), Stream: uint32(rng.IntN(3)), Line: bytes.Repeat([]byte("ab"), rng.IntN(40))}
			if rng.IntN(3) > 0 && trial%5 != 0 {
				e.Attrs = attrs.MustPairs("trace_id", strings.Repeat("f", rng.IntN(60)))
			}
			if rng.IntN(30) == 0 {
				e.Line = bytes.Repeat([]byte("L"), bs+rng.IntN(100))
			}
			all = append(all, e)
		}
		// Blocks cut as Add cuts them.
		var blocks []*Block
		var b *Block
		fill := 0
		for _, e := range all {
			if b == nil || !BlockHasRoom(fill, len(e.Line)+len(e.Attrs), bs) {
				b = &Block{Offsets: []uint32{0}}
				blocks = append(blocks, b)
				fill = 0
			}
			b.Data = append(b.Data, e.Line...)
			b.Offsets = append(b.Offsets, uint32(len(b.Data)))
			b.Times = append(b.Times, e.Time)
			b.Streams = append(b.Streams, e.Stream)
			b.AttrData = append(b.AttrData, e.Attrs...)
			b.AttrOffsets = append(b.AttrOffsets, uint32(len(b.AttrData)))
			fill += len(e.Line) + len(e.Attrs) + 1
			if fill >= bs {
				b = nil
			}
		}
		for _, b := range blocks {
			if trial%2 == 0 && len(b.AttrData) == 0 {
				b.AttrOffsets = nil // the form of a block without metadata
			} else {
				b.AttrOffsets = append([]uint32{0}, b.AttrOffsets...)
			}
		}
		path := filepath.Join(dir, fmt.Sprint("block-", trial))
		w, err := Create(path, Options{BlockSize: bs})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			if err := w.AddBlock(b); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		got, _ := readAll(t, path)
		equalEntries(t, got, all)
		want, _ := writeSegment(t, dir, fmt.Sprint("add-", trial), all, Options{BlockSize: bs})
		x, _ := os.ReadFile(want)
		y, _ := os.ReadFile(path)
		if !bytes.Equal(x, y) {
			t.Fatalf("trial %d: AddBlock wrote a different segment (%d bytes, Add %d)", trial, len(y), len(x))
		}
	}
}

// TestPooledBlockNoStaleAttrs decodes blocks with and without metadata,
// in turns, into one pooled block and into fresh ones: a block without
// metadata must show none (not the previous block's), and every block
// must equal its fresh decode. The blocks' sizes make the arena layouts
// move: a block with metadata, a large one without (its data where the
// first put its metadata), then one with metadata too large for the
// arena, which decodes into whichever buffers are large enough.
func TestPooledBlockNoStaleAttrs(t *testing.T) {
	dir := t.TempDir()
	var es []Entry
	add := func(n, lineLen int, a []byte) {
		for range n {
			es = append(es, Entry{Time: int64(len(es)), Line: bytes.Repeat([]byte{byte('a' + len(es)%26)}, lineLen), Attrs: a})
		}
	}
	tid := attrs.MustPairs("trace_id", "0123456789abcdef0123456789abcdef")
	add(2000, 100, tid)    // 200 KB of data, 88 KB of metadata: in the arena
	add(1, 2_000_000, nil) // most of the arena, no metadata
	add(2000, 1000, tid)   // 2 MB and 88 KB: with its arrays, not in the arena
	add(1, 100, nil)       // small, no metadata
	add(30_000, 40, nil)   // 1.2 MB, no metadata
	add(1, 10, tid)
	w, err := Create(filepath.Join(dir, "s"), Options{Codec: CodecLZ4, BlockSize: MaxBlockSize})
	if err != nil {
		t.Fatal(err)
	}
	// One block per run.
	for i, e := range es {
		if i > 0 && (len(e.Attrs) > 0) != (len(es[i-1].Attrs) > 0) || i > 0 && len(e.Line) != len(es[i-1].Line) {
			w.flushBlock()
		}
		if err := w.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumBlocks() != 6 {
		t.Fatalf("%d blocks, want 6", r.NumBlocks())
	}
	// A pooled block (its arena's layouts) and a heap block (no arena:
	// only the decoder clears what a block without metadata leaves).
	pooled := GetBlock()
	defer PutBlock(pooled)
	for _, reused := range []*Block{pooled, new(Block)} {
		for _, i := range []int{0, 1, 2, 3, 0, 4, 5, 1, 2, 1} {
			if err := r.ReadBlock(i, reused); err != nil {
				t.Fatal(err)
			}
			fresh := new(Block)
			if err := r.ReadBlock(i, fresh); err != nil {
				t.Fatal(err)
			}
			checkBlock(t, r.BlockMeta(i), reused)
			if !bytes.Equal(reused.Data, fresh.Data) || !slices.Equal(reused.Offsets, fresh.Offsets) ||
				!bytes.Equal(reused.AttrData, fresh.AttrData) || !slices.Equal(reused.AttrOffsets, fresh.AttrOffsets) {
				t.Fatalf("block %d: the reused block differs from a fresh one", i)
			}
			first := 0
			for j := range i {
				first += r.BlockMeta(j).Entries
			}
			for e := range reused.Len() {
				if want := es[first+e].Attrs; !bytes.Equal(reused.Attrs(e), want) {
					t.Fatalf("block %d entry %d: metadata %q, want %q", i, e, trunc(reused.Attrs(e)), want)
				}
			}
			if (len(es[first].Attrs) == 0) != (len(reused.AttrOffsets) == 0) {
				t.Fatalf("block %d: %d attr offsets", i, len(reused.AttrOffsets))
			}
		}
	}
	// PutBlock and GetBlock again: nothing of the last block's metadata.
	if err := r.ReadBlock(0, pooled); err != nil {
		t.Fatal(err)
	}
	PutBlock(pooled)
	pooled = GetBlock()
	if len(pooled.AttrOffsets) != 0 || len(pooled.AttrData) != 0 {
		t.Fatalf("a block from the pool has %d attr offsets", len(pooled.AttrOffsets))
	}
}

// TestAttrsAtTheLimit: the writer never writes an attrs section the
// reader refuses. Blocks of the largest size full of the largest
// metadata, and full of the smallest (the most lengths per byte), read
// back; and maxAttrsRaw is what the doc says.
func TestAttrsAtTheLimit(t *testing.T) {
	big := maxAttrs(t)
	small := attrs.MustPairs("a", "")
	var es []Entry
	for i := range 200 {
		es = append(es, Entry{Time: int64(i), Attrs: big})
	}
	for i := range 1_000_000 {
		es = append(es, Entry{Time: int64(i), Attrs: small})
	}
	path, info := writeSegment(t, t.TempDir(), "s", es, Options{BlockSize: MaxBlockSize, Codec: CodecLZ4})
	got, r := readAll(t, path)
	equalEntries(t, got, es)
	if info.Blocks < 2 {
		t.Fatalf("%d blocks", info.Blocks)
	}
	for i := range r.NumBlocks() {
		var b Block
		if err := r.ReadBlock(i, &b); err != nil {
			t.Fatal(err)
		}
		raw := len(b.AttrData)
		for k := range b.Len() {
			raw += uvarintLen(uint64(b.AttrOffsets[k+1] - b.AttrOffsets[k]))
		}
		if uint64(raw) > maxAttrsRaw(uint64(b.Len())) {
			t.Fatalf("block %d: %d bytes of attrs section for %d entries", i, raw, b.Len())
		}
	}
	if maxAttrsRaw(1) != 65536+3 || maxAttrsRaw(1000) != 8<<20 {
		t.Fatalf("maxAttrsRaw(1) = %d, (1000) = %d; the doc says 65539 and 8 MiB", maxAttrsRaw(1), maxAttrsRaw(1000))
	}
}

// BenchmarkReadBlockAttrs measures ReadBlock of 1 MiB blocks of log
// lines with and without OTel-like metadata (trace_id, span_id,
// severity_text on every entry): what a block's metadata adds to a
// search's decode, per byte of lines (SetBytes counts the lines only).
// It also reports the stored bytes per entry.
//
//	go test ./internal/segment -run='^$' -bench=ReadBlockAttrs
func BenchmarkReadBlockAttrs(b *testing.B) {
	for _, codec := range []Codec{CodecDefault, CodecLZ4, CodecZstd} {
		for _, with := range []bool{false, true} {
			name := "without"
			if with {
				name = "with"
			}
			b.Run(fmt.Sprintf("%v/%s", codec, name), func(b *testing.B) {
				es := otelEntries(b, 40_000, with)
				path, info := writeSegment(b, b.TempDir(), "s", es, Options{Codec: codec})
				r, err := Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				blk := GetBlock()
				defer PutBlock(blk)
				b.SetBytes(info.RawBytes)
				var attrBytes int
				for _, e := range es {
					attrBytes += len(e.Attrs)
				}
				for b.Loop() {
					for i := range r.NumBlocks() {
						if err := r.ReadBlock(i, blk); err != nil {
							b.Fatal(err)
						}
					}
				}
				// After the loop: b.Loop's start clears reported metrics.
				b.ReportMetric(float64(info.FileBytes)/float64(info.Entries), "stored-B/entry")
				b.ReportMetric(float64(attrBytes)/float64(len(es)), "attrs-B/entry")
				b.ReportMetric(float64(r.NumBlocks()), "blocks")
			})
		}
	}
}
