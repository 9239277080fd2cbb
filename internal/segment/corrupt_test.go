package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"haystack/internal/attrs"
	"haystack/internal/testseed"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// smallEntries is a few blocks' worth of entries for the exhaustive damage
// tests: small enough that every bit of the file can be flipped quickly.
// Some have metadata: the first few and every other one from the ninth,
// so that there are blocks with an attrs section and blocks without.
func smallEntries() []Entry {
	var es []Entry
	for i := range 12 {
		var a []byte
		if i < 3 || i >= 8 && i%2 == 0 {
			var err error
			a, err = attrs.Encode(nil, []attrs.Pair{{Name: "tid", Value: fmt.Sprint(i * 31)}})
			if err != nil {
				panic(err)
			}
		}
		es = append(es, Entry{
			Time:   1_700_000_000_000_000_000 + int64(i%5)*1000,
			Stream: uint32(i % 3),
			Line:   fmt.Appendf(nil, "line %d: user=%d\nstatus=ok", i, i*7),
			Attrs:  a,
		})
	}
	es = append(es, Entry{Time: 1, Stream: 9}) // an empty entry
	return es
}

// withoutAttrs returns es without their metadata, for the writers of
// versions before 4.
func withoutAttrs(es []Entry) []Entry {
	out := slices.Clone(es)
	for i := range out {
		out[i].Attrs = nil
	}
	return out
}

// asCorrupt returns err's *CorruptError or fails the test.
func asCorrupt(t *testing.T, err error, what string) *CorruptError {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: error %v is not a *CorruptError", what, err)
	}
	return ce
}

// blockOf returns the block whose stored bytes contain file offset off, or
// -1 when off is in the header, block index or footer.
func blockOf(r *Reader, off int64) int {
	for i := range r.NumBlocks() {
		m := r.BlockMeta(i)
		if off >= m.offset && off < m.offset+m.length {
			return i
		}
	}
	return -1
}

// postingsArea returns the file offsets [start, end) of r's version-3
// postings area (covered by the groups' CRCs, not the footer's), or 0, 0.
func postingsArea(r *Reader) (start, end int64) {
	if r.grams == nil {
		return 0, 0
	}
	end = int64(len(r.data) - footerSize)
	if r.vgrams != nil {
		// Version 5: the lines' index ends where the values' begins.
		ft := r.data[len(r.data)-footerSize:]
		d := decoder{b: r.data[binary.LittleEndian.Uint64(ft[24:]):end]}
		n := d.uvarint()
		end = int64(len(r.data)-footerSize-len(d.b)) + int64(n)
	}
	return end - int64(len(r.grams.area)), end
}

// valuesArea is postingsArea for version 5's index of metadata values
// (empty before version 5).
func valuesArea(r *Reader) (start, end int64) {
	if r.vgrams == nil {
		return 0, 0
	}
	end = int64(len(r.data) - footerSize)
	if f := r.vfilters; f != nil && !f.noValues {
		// Version 6: the value filters follow.
		end -= int64(len(f.area) + len(f.table) + uvarintLen(uint64(f.blocks)))
	}
	return end - int64(len(r.vgrams.area)), end
}

// filtersArea is where version 6's value filters lie (not their table,
// which Open checks): damage there is found lazily, per block.
func filtersArea(r *Reader) (start, end int64) {
	if r.vfilters == nil {
		return 0, 0
	}
	end = int64(len(r.data) - footerSize)
	return end - int64(len(r.vfilters.area)), end
}

// corpusLits returns every 4-byte substring of the entries' lines: each
// is a gram of the index, so together they reach every group.
func corpusLits(es []Entry) [][]byte {
	seen := map[string]bool{}
	var lits [][]byte
	add := func(b []byte) {
		for i := 0; i+SkipGram <= len(b); i++ {
			if l := b[i : i+SkipGram]; !seen[string(l)] {
				seen[string(l)] = true
				lits = append(lits, l)
			}
		}
	}
	for _, e := range es {
		add(e.Line)
		// The metadata values' grams reach every group of version 5's
		// values' index.
		attrs.Each(e.Attrs, func(_, v []byte) bool {
			add(v)
			// Whole values reach every block's value filter (version 6).
			if !seen[string(v)] {
				seen[string(v)] = true
				lits = append(lits, v)
			}
			return true
		})
	}
	return lits
}

// indexDamageCheck opens a file whose version-3 postings area is damaged
// (one group's CRC fails): Open must succeed and every block read fine;
// looking up lits (reaching every group) must never answer "no" where
// the undamaged good reader answers "maybe", must record the damage for
// IndexDamage, and Verify must report it naming the file.
func indexDamageCheck(t *testing.T, path, what string, open func() (*Reader, error), good *Reader, lits [][]byte) {
	t.Helper()
	r, err := open()
	if err != nil {
		t.Fatalf("%s: Open failed on postings damage: %v", what, err)
	}
	defer r.Close()
	b := GetBlock()
	defer PutBlock(b)
	for i := range r.NumBlocks() {
		if err := r.ReadBlock(i, b); err != nil {
			t.Fatalf("%s: block %d: %v", what, i, err)
		}
	}
	if err := r.IndexDamage(); err != nil {
		t.Fatalf("%s: damage reported before any lookup: %v", what, err)
	}
	for _, l := range lits {
		for i := range r.NumBlocks() {
			if !r.MayContain(i, l, false) && good.MayContain(i, l, false) {
				t.Fatalf("%s: MayContain(%d, %q) false on the damaged index, true on the good one", what, i, l)
			}
			if !r.MayContainValue(i, l, false) && good.MayContainValue(i, l, false) {
				t.Fatalf("%s: MayContainValue(%d, %q) false on the damaged index, true on the good one", what, i, l)
			}
			// Whole values (corpusLits); its 4-byte grams are not worth
			// the time (thousands of flips).
			if len(l) != SkipGram && !r.MayHaveValue(i, l) && good.MayHaveValue(i, l) {
				t.Fatalf("%s: MayHaveValue(%d, %q) false on the damaged filter, true on the good one", what, i, l)
			}
		}
	}
	// Escape grams (version 7): the characters the lines' escapes spell
	// (TestEveryTruncationAndBitFlip's \u003c\x35) and one they do not.
	for i := range r.NumBlocks() {
		for _, c := range []byte{'<', '5', 'A'} {
			if !r.MayHoldEscape(i, c) && good.MayHoldEscape(i, c) {
				t.Fatalf("%s: MayHoldEscape(%d, %q) false on the damaged index, true on the good one", what, i, c)
			}
		}
	}
	ce := asCorrupt(t, r.IndexDamage(), what+": IndexDamage")
	if ce.File != path || ce.Block != -1 || !strings.Contains(ce.Reason, "checksum mismatch") {
		t.Fatalf("%s: IndexDamage %q names file %q block %d", what, ce, ce.File, ce.Block)
	}
	verr := r.Verify()
	if verr == nil {
		t.Fatalf("%s: Verify succeeded", what)
	}
	if ce := asCorrupt(t, verr, what); ce.Block != -1 || ce.File != path || !strings.Contains(verr.Error(), path) {
		t.Fatalf("%s: Verify: %v", what, verr)
	}
}

// skipSection is where a segment's skip index lies (empty in version 1):
// damage there, outside the lazily checked areas, is found by Open, which
// then opens the segment without a skip index (headDamageCheck).
func skipSection(r *Reader) (start, end int64) {
	if r.version < formatV2 {
		return 0, 0
	}
	ft := r.data[len(r.data)-footerSize:]
	return int64(binary.LittleEndian.Uint64(ft[24:])), int64(len(r.data) - footerSize)
}

// headDamageCheck opens a file whose skip index Open finds damaged (its
// head, or a version-2 filter): Open must succeed, without a skip index
// (every lookup "maybe"), every block must read as in good, and
// IndexDamage (at once, before any lookup) and Verify must name the
// file.
func headDamageCheck(t *testing.T, path, what string, open func() (*Reader, error), good *Reader) {
	t.Helper()
	r, err := open()
	if err != nil {
		t.Fatalf("%s: Open failed on skip index damage: %v", what, err)
	}
	defer r.Close()
	ce := asCorrupt(t, r.IndexDamage(), what+": IndexDamage")
	if ce.File != path || ce.Block != -1 || !strings.Contains(ce.Error(), "skip index") {
		t.Fatalf("%s: IndexDamage %q names file %q block %d", what, ce, ce.File, ce.Block)
	}
	if r.NumBlocks() != good.NumBlocks() || r.Info().Entries != good.Info().Entries {
		t.Fatalf("%s: %d blocks, %d entries; want %d, %d", what, r.NumBlocks(), r.Info().Entries, good.NumBlocks(), good.Info().Entries)
	}
	b, gb := GetBlock(), GetBlock()
	defer PutBlock(b)
	defer PutBlock(gb)
	absent := []byte("\x00\x01no such text\x02")
	for i := range r.NumBlocks() {
		if err := r.ReadBlock(i, b); err != nil {
			t.Fatalf("%s: block %d: %v", what, i, err)
		}
		if err := good.ReadBlock(i, gb); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Data, gb.Data) || !slices.Equal(b.Offsets, gb.Offsets) {
			t.Fatalf("%s: block %d reads differently from the undamaged file", what, i)
		}
		if !r.MayContain(i, absent, false) || !r.MayContainValue(i, absent, false) || !r.MayHaveValue(i, absent) || !r.MayHoldEscape(i, '5') {
			t.Fatalf("%s: block %d: a lookup trusted the damaged skip index", what, i)
		}
	}
	if r.MetaIndexed() || r.EscapeIndexed() {
		t.Fatalf("%s: MetaIndexed or EscapeIndexed with a damaged skip index", what)
	}
	verr := r.Verify()
	if verr == nil {
		t.Fatalf("%s: Verify succeeded", what)
	}
	if ce := asCorrupt(t, verr, what); ce.Block != -1 || ce.File != path || !strings.Contains(verr.Error(), path) {
		t.Fatalf("%s: Verify: %v", what, verr)
	}
}

// damageCheck opens the damaged file at path and requires an error naming
// the file, and block wantBlock (-1: Open must fail).
func damageCheck(t *testing.T, path string, wantBlock int, what string) {
	t.Helper()
	damageCheckWith(t, path, wantBlock, what, func() (*Reader, error) { return Open(path) })
}

// damageCheckWith is damageCheck with the reader opened by open: Open on
// the file, or newReader on the damaged bytes in memory (what Open runs
// after mapping the file; the exhaustive test does most of its thousands
// of cases that way to stay fast).
func damageCheckWith(t *testing.T, path string, wantBlock int, what string, open func() (*Reader, error)) {
	t.Helper()
	r, err := open()
	if wantBlock < 0 {
		if err == nil {
			r.Close()
			t.Fatalf("%s: Open succeeded", what)
		}
		ce := asCorrupt(t, err, what)
		if ce.File != path || ce.Block != -1 || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: error %q names file %q block %d", what, err, ce.File, ce.Block)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: Open failed on block damage: %v", what, err)
	}
	defer r.Close()
	b := GetBlock()
	defer PutBlock(b)
	for i := range r.NumBlocks() {
		err := r.ReadBlock(i, b)
		if i != wantBlock {
			if err != nil {
				t.Fatalf("%s: undamaged block %d: %v", what, i, err)
			}
			continue
		}
		if err == nil {
			t.Fatalf("%s: ReadBlock(%d) succeeded", what, i)
		}
		ce := asCorrupt(t, err, what)
		if ce.File != path || ce.Block != i || !strings.Contains(err.Error(), fmt.Sprintf("block %d", i)) {
			t.Fatalf("%s: error %q names file %q block %d", what, err, ce.File, ce.Block)
		}
	}
	verr := r.Verify()
	if verr == nil {
		t.Fatalf("%s: Verify succeeded", what)
	}
	if ce := asCorrupt(t, verr, what); ce.Block != wantBlock {
		t.Fatalf("%s: Verify names block %d, want %d", what, ce.Block, wantBlock)
	}
}

// TestEveryTruncationAndBitFlip damages a small segment of a few blocks in
// every possible single way: each proper prefix, and each bit of each byte
// flipped. Every one must be reported, naming the file and the block; a
// flip in the skip index's postings (checked per group, lazily) when the
// damaged group is looked up and by Verify, and it must never make the
// index answer "no" where the undamaged one answers "maybe".
func TestEveryTruncationAndBitFlip(t *testing.T) {
	for _, o := range []Options{
		{Codec: CodecNone, BlockSize: 64},
		{Codec: CodecLZ4, BlockSize: 128},
		{Codec: CodecZstd, BlockSize: 128},
	} {
		t.Run(o.Codec.String(), func(t *testing.T) {
			// The codecs' cases share nothing (own entries, directory,
			// readers): on two cores they take half the time.
			t.Parallel()
			dir := t.TempDir()
			// smallEntries with metadata values long enough for grams,
			// so that version 5's values' index has postings to damage.
			// Some lines with escapes, for version 7's escape grams.
			es := smallEntries()
			for i := range es {
				if len(es[i].Attrs) > 0 {
					es[i].Attrs = attrs.MustPairs("tid", fmt.Sprintf("trace-%d", i*31))
				}
				if i%4 == 1 {
					es[i].Line = append(es[i].Line, ` \u003c\x35`...)
				}
			}
			src, _ := writeSegment(t, dir, "good", es, o)
			lits := corpusLits(es)
			orig, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Open(src)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.NumBlocks() < 3 {
				t.Fatalf("want a few blocks, got %d", r.NumBlocks())
			}
			with := 0
			for i := range r.NumBlocks() {
				var b Block
				if err := r.ReadBlock(i, &b); err != nil {
					t.Fatal(err)
				}
				if len(b.AttrOffsets) > 0 {
					with++
				}
			}
			if with == 0 || with == r.NumBlocks() {
				t.Fatalf("%d of %d blocks have metadata: want some with, some without", with, r.NumBlocks())
			}
			t.Logf("%d bytes, %d blocks", len(orig), r.NumBlocks())
			path := filepath.Join(dir, "damaged")
			write := func(b []byte) {
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for n := range len(orig) {
				write(orig[:n])
				damageCheck(t, path, -1, fmt.Sprintf("truncated to %d", n))
			}
			// Every bit flip, in memory through newReader; one flip in 16
			// through a real file and Open as well. Under emulation
			// (testseed.Emulated) one bit of each byte, bit off%8: every
			// byte of every section is still damaged, and every bit
			// position, in an eighth of the time; the native run flips
			// every bit.
			emulated := testseed.Emulated()
			areaStart, areaEnd := postingsArea(r)
			if areaEnd-areaStart < 16 {
				t.Fatalf("postings area %d..%d", areaStart, areaEnd)
			}
			valStart, valEnd := valuesArea(r)
			if valEnd-valStart < 16 {
				t.Fatalf("values' postings area %d..%d", valStart, valEnd)
			}
			filtStart, filtEnd := filtersArea(r)
			if filtEnd-filtStart < 4 {
				t.Fatalf("value filters %d..%d", filtStart, filtEnd)
			}
			skipStart, skipEnd := skipSection(r)
			buf := bytes.Clone(orig)
			for off := range buf {
				for bit := range 8 {
					if emulated && bit != off%8 {
						continue
					}
					buf[off] ^= 1 << bit
					what := fmt.Sprintf("bit %d of byte %d flipped", bit, off)
					inMem := func() (*Reader, error) { return newReader(path, buf) }
					inArea := int64(off) >= areaStart && int64(off) < areaEnd || int64(off) >= valStart && int64(off) < valEnd ||
						int64(off) >= filtStart && int64(off) < filtEnd
					inHead := !inArea && int64(off) >= skipStart && int64(off) < skipEnd
					check := func(open func() (*Reader, error)) {
						switch {
						case inArea:
							indexDamageCheck(t, path, what, open, r, lits)
						case inHead:
							headDamageCheck(t, path, what, open, r)
						default:
							damageCheckWith(t, path, blockOf(r, int64(off)), what, open)
						}
					}
					check(inMem)
					if (off*8+bit)%16 == 0 {
						write(buf)
						check(func() (*Reader, error) { return Open(path) })
					}
					buf[off] ^= 1 << bit
				}
			}
			// An appended byte is damage too.
			write(append(bytes.Clone(orig), 0))
			damageCheck(t, path, -1, "extended by one byte")
		})
	}
}

// TestDamageIsolated checks that a damaged segment does not affect another
// one read at the same time.
func TestDamageIsolated(t *testing.T) {
	dir := t.TempDir()
	entries := corpora()["logs"]
	good, _ := writeSegment(t, dir, "good", entries, Options{BlockSize: 4096})
	bad, _ := writeSegment(t, dir, "bad", entries, Options{BlockSize: 4096})
	rb, err := Open(bad)
	if err != nil {
		t.Fatal(err)
	}
	m := rb.BlockMeta(2)
	rb.Close()
	data, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	data[m.offset+m.length/2] ^= 0x10
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rb, err = Open(bad)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	rg, err := Open(good)
	if err != nil {
		t.Fatal(err)
	}
	defer rg.Close()

	// Interleave reads of both.
	var got []Entry
	b1, b2 := GetBlock(), GetBlock()
	for i := range rg.NumBlocks() {
		err := rb.ReadBlock(i, b1)
		if (i == 2) != (err != nil) {
			t.Fatalf("damaged segment block %d: %v", i, err)
		}
		if err != nil && asCorrupt(t, err, "bad").File != bad {
			t.Fatalf("error names %v", err)
		}
		if err := rg.ReadBlock(i, b2); err != nil {
			t.Fatal(err)
		}
		for k := range b2.Len() {
			e := b2.Entry(k)
			e.Line = bytes.Clone(e.Line)
			got = append(got, e)
		}
	}
	equalEntries(t, got, entries)
	if err := rg.Verify(); err != nil {
		t.Fatal(err)
	}
	if err := rb.Verify(); err == nil || asCorrupt(t, err, "verify").Block != 2 {
		t.Fatalf("Verify of damaged segment: %v", err)
	}

	// A truncated segment fails to open; the good one is unaffected.
	if err := os.WriteFile(bad, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(bad); err == nil {
		t.Fatal("truncated segment opened")
	}
	if err := rg.Verify(); err != nil {
		t.Fatal(err)
	}
}

// forged describes one block for forge, which builds files whose checksums
// are all valid but whose structure may not be: the decoder must catch
// what the checksums cannot.
type forged struct {
	// block header and sections
	codec, metaCodec Codec
	entries          uint64
	dataRaw, metaRaw uint64
	data, meta       []byte // stored sections
	// version 4: the attrs section
	attrsCodec Codec
	attrsRaw   uint64
	attrs      []byte // stored
	// index entry
	minT, maxT       int64
	ixEntries, ixRaw uint64
	ixStreams        []uint32
}

// forgeMeta encodes a meta section from parts, with time scale 0.
func forgeMeta(lens []uint64, times []int64, streamIdx ...uint64) []byte {
	var m []byte
	for _, l := range lens {
		m = binary.AppendUvarint(m, l)
	}
	m = append(m, 0)
	prev := int64(0)
	for i, t := range times {
		if i == 0 {
			m = binary.AppendVarint(m, t)
		} else {
			m = binary.AppendVarint(m, t-prev)
		}
		prev = t
	}
	for _, r := range streamIdx {
		m = binary.AppendUvarint(m, r)
	}
	return m
}

// forge builds a whole version-1 segment file from blocks with valid
// checksums.
func forge(blocks []forged) []byte { return forgeV(formatV1, blocks) }

// forgeV is forge in format version 1, 4, 5 or 6 (blocks with an attrs
// section, and a skip index that leaves every block unindexed).
func forgeV(version uint32, blocks []forged) []byte {
	f := []byte(magic)
	f = binary.LittleEndian.AppendUint32(f, version)
	f = binary.LittleEndian.AppendUint32(f, 0)
	idx := binary.AppendUvarint(nil, uint64(len(blocks)))
	for _, b := range blocks {
		blk := []byte{byte(b.codec), byte(b.metaCodec)}
		if version >= formatV4 {
			blk = append(blk, byte(b.attrsCodec))
		}
		blk = binary.AppendUvarint(blk, b.entries)
		blk = binary.AppendUvarint(blk, b.dataRaw)
		blk = binary.AppendUvarint(blk, uint64(len(b.data)))
		blk = binary.AppendUvarint(blk, b.metaRaw)
		blk = binary.AppendUvarint(blk, uint64(len(b.meta)))
		if version >= formatV4 {
			blk = binary.AppendUvarint(blk, b.attrsRaw)
			blk = binary.AppendUvarint(blk, uint64(len(b.attrs)))
		}
		blk = append(blk, b.data...)
		blk = append(blk, b.meta...)
		blk = append(blk, b.attrs...)
		blk = binary.LittleEndian.AppendUint32(blk, crc32.Checksum(blk, castagnoli))
		f = append(f, blk...)
		idx = binary.AppendUvarint(idx, uint64(len(blk)))
		idx = binary.AppendVarint(idx, b.minT)
		idx = binary.AppendUvarint(idx, uint64(b.maxT-b.minT))
		idx = binary.AppendUvarint(idx, b.ixEntries)
		idx = binary.AppendUvarint(idx, b.ixRaw)
		idx = binary.AppendUvarint(idx, uint64(len(b.ixStreams)))
		for i, s := range b.ixStreams {
			if i == 0 {
				idx = binary.AppendUvarint(idx, uint64(s))
			} else {
				idx = binary.AppendUvarint(idx, uint64(s-b.ixStreams[i-1]))
			}
		}
	}
	if version == formatV1 {
		return appendIndexAndFooter(f, idx, uint32(len(blocks)))
	}
	// Skip index: B blocks, all B unindexed (ids 0, then gaps-1 of 0),
	// no grams.
	skip := binary.AppendUvarint(nil, uint64(len(blocks)))
	skip = binary.AppendUvarint(skip, uint64(len(blocks)))
	for range blocks {
		skip = append(skip, 0)
	}
	skip = append(skip, 0)
	if version >= formatV5 {
		// Version 5: the lines' index framed by its length, then the
		// values' index (here the same: every block unindexed).
		one := skip
		skip = binary.AppendUvarint(nil, uint64(len(one)))
		skip = append(skip, one...)
		if version >= formatV6 {
			// Version 6 (and 7) frames it too, and adds value filters: here
			// none (every record empty: "maybe" for every value).
			skip = binary.AppendUvarint(skip, uint64(len(one)))
			skip = append(skip, one...)
			skip = binary.AppendUvarint(skip, uint64(len(blocks)))
			for range blocks {
				skip = binary.LittleEndian.AppendUint32(skip, 0) // end
				skip = binary.LittleEndian.AppendUint32(skip, 0) // CRC-32C of nothing
			}
		} else {
			skip = append(skip, one...)
		}
	}
	return appendIndexSkipAndFooter(f, idx, skip, uint32(len(blocks)), version)
}

func appendIndexAndFooter(f, idx []byte, count uint32) []byte {
	return appendIndexSkipAndFooter(f, idx, nil, count, formatV1)
}

func appendIndexSkipAndFooter(f, idx, skip []byte, count, version uint32) []byte {
	off := len(f)
	f = append(f, idx...)
	var ft [footerSize]byte
	binary.LittleEndian.PutUint64(ft[0:], uint64(off))
	binary.LittleEndian.PutUint64(ft[8:], uint64(len(idx)))
	binary.LittleEndian.PutUint32(ft[16:], crc32.Checksum(idx, castagnoli))
	binary.LittleEndian.PutUint32(ft[20:], count)
	if version > formatV1 {
		binary.LittleEndian.PutUint64(ft[24:], uint64(len(f)))
		binary.LittleEndian.PutUint64(ft[32:], uint64(len(skip)))
		binary.LittleEndian.PutUint32(ft[40:], crc32.Checksum(skip, castagnoli))
		f = append(f, skip...)
	}
	binary.LittleEndian.PutUint32(ft[44:], version)
	binary.LittleEndian.PutUint64(ft[48:], uint64(len(f)+footerSize))
	binary.LittleEndian.PutUint32(ft[60:], crc32.Checksum(ft[:60], castagnoli))
	copy(ft[64:], magic)
	return append(f, ft[:]...)
}

// okBlock is a valid three-entry block: "ab", "", "cde" at times 10, 5, 7
// in streams 4, 4, 6.
func okBlock() forged {
	data := []byte("abcde")
	meta := forgeMeta([]uint64{2, 0, 3}, []int64{10, 5, 7}, 0, 0, 1)
	return forged{
		codec: CodecNone, metaCodec: CodecNone, attrsCodec: CodecNone, entries: 3, dataRaw: 5, metaRaw: uint64(len(meta)),
		data: data, meta: meta,
		minT: 5, maxT: 10, ixEntries: 3, ixRaw: 5, ixStreams: []uint32{4, 6},
	}
}

// TestForgedStructure feeds the reader files whose checksums are valid but
// whose contents contradict themselves; each must be an error, never rows.
func TestForgedStructure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "forged")

	// The unmodified forgery must decode, or the cases below prove nothing.
	if err := os.WriteFile(path, forge([]forged{okBlock()}), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, path)
	equalEntries(t, got, []Entry{{Time: 10, Stream: 4, Line: []byte("ab")}, {Time: 5, Stream: 4}, {Time: 7, Stream: 6, Line: []byte("cde")}})

	zframe := zstdDecoderTestFrame(bytes.Repeat([]byte("x"), 1<<20))
	lz4garbage := []byte{0xf0, 0xff, 0xff, 0xff, 0x01, 'a', 'b'}
	var lz4big = make([]byte, lz4.CompressBlockBound(1<<20))
	n, _ := lz4.CompressBlock(bytes.Repeat([]byte("y"), 1<<20), lz4big, nil)
	lz4big = lz4big[:n]

	blockCases := map[string]func(b *forged){
		"lengths exceed data":   func(b *forged) { b.meta = forgeMeta([]uint64{2, 1, 3}, []int64{10, 5, 7}, 0, 0, 1) },
		"lengths short of data": func(b *forged) { b.meta = forgeMeta([]uint64{2, 0, 2}, []int64{10, 5, 7}, 0, 0, 1) },
		"huge length":           func(b *forged) { b.meta = forgeMeta([]uint64{1 << 40, 0, 3}, []int64{10, 5, 7}, 0, 0, 1) },
		"time below index":      func(b *forged) { b.meta = forgeMeta([]uint64{2, 0, 3}, []int64{10, 4, 7}, 0, 0, 1) },
		"time above index":      func(b *forged) { b.meta = forgeMeta([]uint64{2, 0, 3}, []int64{11, 5, 7}, 0, 0, 1) },
		"max time not attained": func(b *forged) { b.meta = forgeMeta([]uint64{2, 0, 3}, []int64{9, 5, 7}, 0, 0, 1) },
		"stream index too big":  func(b *forged) { b.meta = forgeMeta([]uint64{2, 0, 3}, []int64{10, 5, 7}, 0, 2, 1) },
		"stream index huge":     func(b *forged) { b.meta = forgeMeta([]uint64{2, 0, 3}, []int64{10, 5, 7}, 0, 1<<40, 1) },
		"listed stream absent":  func(b *forged) { b.meta = forgeMeta([]uint64{2, 0, 3}, []int64{10, 5, 7}, 0, 0, 0) },
		"stream index missing":  func(b *forged) { b.meta = forgeMeta([]uint64{2, 0, 3}, []int64{10, 5, 7}, 0, 0) },
		"time scale too big": func(b *forged) {
			b.meta = forgeMeta([]uint64{2, 0, 3}, []int64{10, 5, 7}, 0, 0, 1)
			b.meta[3] = maxTimeScale + 1
		},
		"time scale wrong": func(b *forged) {
			b.meta = forgeMeta([]uint64{2, 0, 3}, []int64{10, 5, 7}, 0, 0, 1)
			b.meta[3] = 1
		},
		// An overflowing varint mid-lengths, then a well-formed byte: the
		// decoder must not read on from a failed position.
		"overflowing length varint": func(b *forged) {
			bad := append([]byte{0}, bytes.Repeat([]byte{0xff}, 10)...)
			b.meta = append(append(bad, 0x01), forgeMeta(nil, []int64{10, 5, 7}, 0, 0, 1)...)
		},
		"trailing meta":         func(b *forged) { b.meta = forgeMeta([]uint64{2, 0, 3}, []int64{10, 5, 7}, 0, 0, 1, 0) },
		"meta truncated varint": func(b *forged) { b.meta = append(b.meta[:len(b.meta)-1], 0x80) },
		"header entries":        func(b *forged) { b.entries = 2 },
		"header raw":            func(b *forged) { b.dataRaw = 6 },
		"header meta raw":       func(b *forged) { b.metaRaw++ },
		"meta raw bound":        func(b *forged) { b.metaRaw = 1000 },
		"unknown codec":         func(b *forged) { b.codec = 7 },
		"default codec stored":  func(b *forged) { b.codec = CodecDefault },
		"unknown meta codec":    func(b *forged) { b.metaCodec = 4 },
		"meta lz4 garbage":      func(b *forged) { b.metaCodec = CodecLZ4; b.meta = lz4garbage },
		"meta zstd wrong size": func(b *forged) {
			b.metaCodec = CodecZstd
			b.meta = zstdDecoderTestFrame(append(bytes.Clone(b.meta), 0))
		},
		"lz4 garbage":            func(b *forged) { b.codec = CodecLZ4; b.data = lz4garbage },
		"lz4 too much output":    func(b *forged) { b.codec = CodecLZ4; b.data = lz4big },
		"zstd garbage":           func(b *forged) { b.codec = CodecZstd; b.data = []byte("not a zstd frame") },
		"zstd too much output":   func(b *forged) { b.codec = CodecZstd; b.data = zframe },
		"zstd truncated":         func(b *forged) { b.codec = CodecZstd; b.data = zframe[:len(zframe)-3] },
		"empty data nonzero raw": func(b *forged) { b.data = nil },
	}
	for name, mutate := range blockCases {
		b := okBlock()
		metaRaw := b.metaRaw
		mutate(&b)
		if b.metaRaw == metaRaw && b.metaCodec == CodecNone {
			// Keep the sizes consistent so that the check under test, not
			// the size check, is the one that fires.
			b.metaRaw = uint64(len(b.meta))
		}
		if err := os.WriteFile(path, forge([]forged{okBlock(), b}), 0o644); err != nil {
			t.Fatal(err)
		}
		damageCheck(t, path, 1, name)
		if testing.Verbose() {
			r, _ := Open(path)
			t.Logf("%s: %v", name, r.ReadBlock(1, new(Block)))
			r.Close()
		}
	}

	indexCases := map[string]func(b *forged){
		"no streams":        func(b *forged) { b.ixStreams = nil },
		"more streams":      func(b *forged) { b.ixStreams = []uint32{1, 2, 3, 4} },
		"streams unordered": func(b *forged) { b.ixStreams = []uint32{6, 4} },
		"zero entries":      func(b *forged) { b.ixEntries = 0 },
		"huge raw":          func(b *forged) { b.ixRaw = MaxBlockRawBytes + 1 },
		"huge entries":      func(b *forged) { b.ixEntries = maxBlockEntries + 1 },
		"inverted time":     func(b *forged) { b.minT, b.maxT = 10, 5 },
	}
	for name, mutate := range indexCases {
		b := okBlock()
		mutate(&b)
		if err := os.WriteFile(path, forge([]forged{b}), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(path)
		if err == nil {
			// An index lie the reader cannot see at Open must surface
			// when the block is read.
			err = r.Verify()
			r.Close()
		}
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		asCorrupt(t, err, name)
	}

	// Index framing: count mismatch, trailing bytes, a block count too
	// large for the index.
	framing := map[string]func() []byte{
		"count mismatch": func() []byte {
			f := forge([]forged{okBlock()})
			ft := f[len(f)-footerSize:]
			binary.LittleEndian.PutUint32(ft[20:], 2)
			binary.LittleEndian.PutUint32(ft[60:], crc32.Checksum(ft[:60], castagnoli))
			return f
		},
		"huge count": func() []byte {
			return appendIndexAndFooter([]byte(magic+"\x01\x00\x00\x00\x00\x00\x00\x00"), binary.AppendUvarint(nil, 1<<40), 0)
		},
		"trailing index bytes": func() []byte {
			idx := binary.AppendUvarint(nil, 0)
			return appendIndexAndFooter([]byte(magic+"\x01\x00\x00\x00\x00\x00\x00\x00"), append(idx, 0), 0)
		},
		"gap before index": func() []byte {
			return appendIndexAndFooter([]byte(magic+"\x01\x00\x00\x00\x00\x00\x00\x00\x00"), binary.AppendUvarint(nil, 0), 0)
		},
		"version 5": func() []byte {
			f := forge(nil)
			ft := f[len(f)-footerSize:]
			binary.LittleEndian.PutUint32(ft[44:], formatVersion+1)
			binary.LittleEndian.PutUint32(ft[60:], crc32.Checksum(ft[:60], castagnoli))
			return f
		},
		"skip index in v1": func() []byte {
			f := forge(nil)
			ft := f[len(f)-footerSize:]
			ft[30] = 1
			binary.LittleEndian.PutUint32(ft[60:], crc32.Checksum(ft[:60], castagnoli))
			return f
		},
	}
	for name, build := range framing {
		if err := os.WriteFile(path, build(), 0o644); err != nil {
			t.Fatal(err)
		}
		damageCheck(t, path, -1, name)
	}
	// An empty forged file is valid (sanity check of the framing cases).
	if err := os.WriteFile(path, forge(nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := Open(path); err != nil {
		t.Fatal(err)
	} else {
		r.Close()
	}
}

func zstdDecoderTestFrame(raw []byte) []byte {
	e, err := zstd.NewWriter(nil)
	if err != nil {
		panic(err)
	}
	return e.EncodeAll(raw, nil)
}

// okAttrsBlock is okBlock in version 4 with metadata on its first and
// last entries, stored raw.
func okAttrsBlock(t testing.TB) forged {
	b := okBlock()
	a0, a2 := attrs.MustPairs("trace_id", "abc"), attrs.MustPairs("a", "", "b", "\xff")
	b.attrsCodec = CodecNone
	b.attrs = forgeAttrs([]uint64{uint64(len(a0)), 0, uint64(len(a2))}, a0, a2)
	b.attrsRaw = uint64(len(b.attrs))
	return b
}

// forgeAttrs encodes an attrs section from lengths and metadata bytes.
func forgeAttrs(lens []uint64, parts ...[]byte) []byte {
	var a []byte
	for _, l := range lens {
		a = binary.AppendUvarint(a, l)
	}
	for _, p := range parts {
		a = append(a, p...)
	}
	return a
}

// TestForgedAttrs feeds the reader version-4 files whose checksums are
// valid but whose attrs section or its header lie; each must be a
// *CorruptError naming file and block, never rows.
func TestForgedAttrs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "forged")
	ok := okAttrsBlock(t)
	a0, a2 := attrs.MustPairs("trace_id", "abc"), attrs.MustPairs("a", "", "b", "\xff")

	// The unmodified forgeries must decode, or the cases below prove
	// nothing: one with metadata, one without (empty section).
	none := okBlock()
	if err := os.WriteFile(path, forgeV(formatVersion, []forged{ok, none}), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ := readAll(t, path)
	rows := []Entry{{Time: 10, Stream: 4, Line: []byte("ab"), Attrs: a0}, {Time: 5, Stream: 4}, {Time: 7, Stream: 6, Line: []byte("cde"), Attrs: a2}}
	equalEntries(t, got, append(slices.Clone(rows), Entry{Time: 10, Stream: 4, Line: []byte("ab")}, Entry{Time: 5, Stream: 4}, Entry{Time: 7, Stream: 6, Line: []byte("cde")}))

	zattrs := zstdDecoderTestFrame(ok.attrs)
	l4 := make([]byte, lz4.CompressBlockBound(len(ok.attrs)*40))
	n, _ := lz4.CompressBlock(bytes.Repeat(ok.attrs, 40), l4, nil)
	l4 = l4[:n]
	big := bytes.Repeat([]byte{'v'}, attrs.MaxBytes)
	overMax := append(binary.AppendUvarint([]byte{1, 1, 'a'}, uint64(len(big))), big...)

	cases := map[string]func(b *forged){
		"lengths exceed section": func(b *forged) { b.attrs = forgeAttrs([]uint64{uint64(len(a0)), 0, uint64(len(a2)) + 1}, a0, a2) },
		"lengths short":          func(b *forged) { b.attrs = forgeAttrs([]uint64{uint64(len(a0)), 0, uint64(len(a2)) - 1}, a0, a2) },
		"lengths shifted":        func(b *forged) { b.attrs = forgeAttrs([]uint64{uint64(len(a0)) + 1, 0, uint64(len(a2)) - 1}, a0, a2) },
		"huge length":            func(b *forged) { b.attrs = forgeAttrs([]uint64{1 << 40, 0, 3}, a0, a2) },
		"wrapping lengths":       func(b *forged) { b.attrs = forgeAttrs([]uint64{1<<64 - 1, 1, uint64(len(a0) + len(a2))}, a0, a2) },
		"overflowing varint":     func(b *forged) { b.attrs = append(bytes.Repeat([]byte{0xff}, 10), append([]byte{1}, a0...)...) },
		"truncated varint":       func(b *forged) { b.attrs = []byte{byte(len(a0)), 0, 0x80} },
		"missing lengths":        func(b *forged) { b.attrs = forgeAttrs([]uint64{uint64(len(a0))}, a0) },
		"all lengths zero":       func(b *forged) { b.attrs = forgeAttrs([]uint64{0, 0, 0}) },
		"all zero, trailing":     func(b *forged) { b.attrs = forgeAttrs([]uint64{0, 0, 0}, []byte{0}) },
		"trailing byte":          func(b *forged) { b.attrs = append(bytes.Clone(ok.attrs), 0) },
		"invalid name":           func(b *forged) { b.attrs = forgeAttrs([]uint64{5, 0, 0}, []byte{1, 1, '9', 1, 'x'}) },
		"invalid after a repeat": func(b *forged) {
			b.attrs = forgeAttrs([]uint64{uint64(len(a0)), uint64(len(a0)), 5}, a0, a0, []byte{1, 1, 'x', 1, 0xff})
			b.attrs[len(b.attrs)-3] = '-' // the name "-": a repeat is skipped, this one is not
		},
		"names unsorted":          func(b *forged) { b.attrs = forgeAttrs([]uint64{7, 0, 0}, []byte{2, 1, 'b', 0, 1, 'a', 0}) },
		"names repeated":          func(b *forged) { b.attrs = forgeAttrs([]uint64{7, 0, 0}, []byte{2, 1, 'a', 0, 1, 'a', 0}) },
		"zero pairs":              func(b *forged) { b.attrs = forgeAttrs([]uint64{1, 0, 0}, []byte{0}) },
		"value past the entry":    func(b *forged) { b.attrs = forgeAttrs([]uint64{4, uint64(len(a2)), 0}, []byte{1, 1, 'a', 2}, a2) },
		"entry over attrs max":    func(b *forged) { b.attrs = forgeAttrs([]uint64{uint64(len(overMax)), 0, 0}, overMax) },
		"header raw too large":    func(b *forged) { b.attrsRaw++ },
		"header raw too small":    func(b *forged) { b.attrsRaw-- },
		"header raw zero":         func(b *forged) { b.attrsRaw = 0 },
		"header raw over bound":   func(b *forged) { b.attrsCodec = CodecZstd; b.attrsRaw = maxAttrsRaw(3) + 1; b.attrs = zattrs },
		"header raw, no section":  func(b *forged) { b.attrs = nil },
		"unknown codec":           func(b *forged) { b.attrsCodec = 4 },
		"default codec stored":    func(b *forged) { b.attrsCodec = CodecDefault },
		"lz4 garbage":             func(b *forged) { b.attrsCodec = CodecLZ4; b.attrs = []byte{0xf0, 0xff, 0xff, 0xff, 0x01, 'a', 'b'} },
		"lz4 too much output":     func(b *forged) { b.attrsCodec = CodecLZ4; b.attrs = l4 },
		"zstd wrong size":         func(b *forged) { b.attrsCodec = CodecZstd; b.attrs = zattrs; b.attrsRaw-- },
		"zstd truncated":          func(b *forged) { b.attrsCodec = CodecZstd; b.attrs = zattrs[:len(zattrs)-2] },
		"zstd garbage":            func(b *forged) { b.attrsCodec = CodecZstd; b.attrs = []byte("not a zstd frame") },
		"meta takes attrs' bytes": func(b *forged) { b.meta = append(b.meta, b.attrs...); b.attrs = nil; b.attrsRaw = 0 },
	}
	// The cases ReadBlockLines, which does not decode the section, must
	// still refuse: the header's codecs and sizes are wrong.
	headerLies := map[string]bool{"header raw over bound": true, "unknown codec": true, "default codec stored": true, "meta takes attrs' bytes": true}
	for name, mutate := range cases {
		b := okAttrsBlock(t)
		raw := b.attrsRaw
		mutate(&b)
		if b.attrsRaw == raw && b.attrsCodec == CodecNone && !strings.HasPrefix(name, "header") {
			// Keep the sizes consistent so that the check under test, not
			// the size check, is the one that fires.
			b.attrsRaw = uint64(len(b.attrs))
		}
		if err := os.WriteFile(path, forgeV(formatVersion, []forged{okAttrsBlock(t), b, okBlock()}), 0o644); err != nil {
			t.Fatal(err)
		}
		damageCheck(t, path, 1, name)
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		err = r.ReadBlock(1, new(Block))
		// ReadBlockLines checks the checksum, the header's codecs and
		// sizes, but not what the section holds: it reads the lines of
		// all but the blocks whose header lies (see readlines_test.go).
		lines, good := new(Block), new(Block)
		lerr := r.ReadBlockLines(1, lines)
		if gerr := r.ReadBlock(0, good); gerr != nil {
			t.Fatal(gerr)
		}
		r.Close()
		if headerLies[name] {
			if lerr == nil {
				t.Errorf("%s: ReadBlockLines succeeded", name)
			} else {
				asCorrupt(t, lerr, name)
			}
		} else if lerr != nil {
			t.Errorf("%s: ReadBlockLines: %v", name, lerr)
		} else {
			sameLines(t, name, lines, good)
		}
		t.Logf("%s: %v", name, err)
		// The bound is checked before anything is allocated for it.
		if name == "header raw over bound" && !strings.Contains(err.Error(), "attrs size 196618 too large") {
			t.Fatalf("%s: %v", name, err)
		}
	}

	// Compressed forms decode (the cases above are not rejected for
	// their codec alone).
	for _, c := range []struct {
		codec Codec
		data  []byte
	}{{CodecZstd, zattrs}, {CodecLZ4, lz4Of(ok.attrs)}} {
		b := okAttrsBlock(t)
		b.attrsCodec, b.attrs = c.codec, c.data
		if err := os.WriteFile(path, forgeV(formatVersion, []forged{b}), 0o644); err != nil {
			t.Fatal(err)
		}
		got, _ := readAll(t, path)
		equalEntries(t, got, rows)
	}
}

// lz4Of compresses b as one raw LZ4 block.
func lz4Of(b []byte) []byte {
	out := make([]byte, lz4.CompressBlockBound(len(b)))
	n, err := lz4.CompressBlock(b, out, nil)
	if err != nil || n == 0 {
		panic(fmt.Sprintf("lz4 of %d bytes: %d, %v", len(b), n, err))
	}
	return out[:n]
}
