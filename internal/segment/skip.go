package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
)

// The skip index of format version 2: per block, a bloom filter with one
// hash function over the distinct ASCII-lowered 4-byte n-grams of the
// block's entries (never spanning two entries). Version 3 (grams.go)
// replaced it with exact postings; this file keeps the version-2 reader
// (and the builder, which tests use to write version-2 files).
//
// Why the blooms went: measured on 1M generated lines (8 segments of ~32
// blocks of 1 MiB), they took 6.4% of the stored size at ~1.25-1.6 bits
// per distinct gram, a false-positive rate of ~46% per gram. For the
// needle "status=999", in no line, an exact per-block gram set drops all
// 251 blocks, but the blooms let 63 through, each costing ~1 ms of zstd
// decoding. Per-segment postings of the exact grams measured 10.3% of the
// stored size with a one-byte kind header per gram and ~8.8% with the kind
// folded into the gram's key (version 3), and answer exactly.
//
// Earlier, against trigrams, more bits per n-gram, more hash functions
// (docs/BENCHMARKS.md, "Skip index (issue 6)"): 4-grams at ~1.25 bits
// each were what fit in ~10% of the stored size; trigrams are cheaper
// but every hex trigram of a trace id is in every block.
const (
	// SkipGram is the n-gram length: a needle shorter than this skips
	// nothing.
	SkipGram = 4

	// skipBitsPerGram is the target filter size per distinct n-gram; the
	// filter is the power of two nearest to it (in log scale).
	skipBitsPerGram = 1.25

	// maxSkipBits is the largest filter (32 KiB), and the size every
	// filter is first built at (small enough for a core's L1 cache). A
	// 256 KiB block has at most 256 Ki n-grams, so its filter is never
	// capped; a block of the default 1 MiB of generated logs gets a 16 KiB
	// filter. Blocks with more distinct n-grams (a huge entry, very varied
	// text) may get fewer bits per n-gram and a less selective filter,
	// never a wrong one.
	maxSkipBits = 1 << 18
	minSkipBits = 64
)

// lowerTable maps ASCII upper-case letters to lower case and every other
// byte to itself (the needle package's IndexFold folds the same way).
var lowerTable = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			t[i] = byte(i) + 'a' - 'A'
		}
	}
	return t
}()

// gramHash maps a lowered 4-gram (its bytes big-endian in a uint32) to 32
// well-mixed bits (the middle of a Fibonacci-hashing product); a filter of
// m = 2^k bits uses bit hash mod m.
func gramHash(g uint32) uint32 {
	return uint32((uint64(g) * 0x9E3779B97F4A7C15) >> 32)
}

// skipBuilder builds the per-block filters of one segment.
type skipBuilder struct {
	full *[maxSkipBits / 8]byte // the filter at full size
	out  []byte                 // the encoded skip index so far (without its count)
	n    int                    // filters encoded
}

// add builds the filter of a block of entries (data cut by lens) and
// appends its record: uvarint filter bytes, the filter, CRC-32C of both.
//
// One pass sets each n-gram's bit in a filter of maxSkipBits; the share of
// bits set estimates the distinct n-grams (linear counting), which picks
// the final size m = 2^k; since bit positions are the hash mod m, halving
// the filter is OR-ing its upper half into its lower half. No exact set of
// n-grams is ever built: this costs one hash and one bit per byte.
func (s *skipBuilder) add(data []byte, lens []uint32) {
	if s.full == nil {
		s.full = new([maxSkipBits / 8]byte)
	} else {
		clear(s.full[:])
	}
	bm := s.full
	off := 0
	for _, l := range lens {
		line := data[off : off+int(l)]
		off += int(l)
		if len(line) < SkipGram {
			continue
		}
		g := uint32(lowerTable[line[0]])<<16 | uint32(lowerTable[line[1]])<<8 | uint32(lowerTable[line[2]])
		for _, c := range line[3:] {
			g = g<<8 | uint32(lowerTable[c])
			p := gramHash(g) & (maxSkipBits - 1)
			bm[p>>3] |= 1 << (p & 7)
		}
	}
	set := 0
	for i := 0; i < len(bm); i += 8 {
		set += bits.OnesCount64(binary.LittleEndian.Uint64(bm[i:]))
	}
	m := maxSkipBits
	if set < maxSkipBits {
		distinct := -maxSkipBits * math.Log(1-float64(set)/maxSkipBits)
		k := int(math.Round(math.Log2(max(distinct*skipBitsPerGram, 1))))
		m = min(max(1<<max(k, 0), minSkipBits), maxSkipBits)
	}
	f := bm[:]
	for len(f) > m/8 {
		h := len(f) / 2
		lo, hi := f[:h], f[h:]
		for i := 0; i+8 <= h; i += 8 {
			binary.LittleEndian.PutUint64(lo[i:], binary.LittleEndian.Uint64(lo[i:])|binary.LittleEndian.Uint64(hi[i:]))
		}
		f = lo
	}
	start := len(s.out)
	s.out = binary.AppendUvarint(s.out, uint64(len(f)))
	s.out = append(s.out, f...)
	s.out = binary.LittleEndian.AppendUint32(s.out, crc32.Checksum(s.out[start:], castagnoli))
	s.n++
}

// mayContain reports whether filter (one block's) may hold every 4-gram of
// lit, lowered. Short needles say yes.
func mayContain(filter, lit []byte) bool {
	if len(lit) < SkipGram {
		return true
	}
	mask := uint32(len(filter))*8 - 1
	g := uint32(lowerTable[lit[0]])<<16 | uint32(lowerTable[lit[1]])<<8 | uint32(lowerTable[lit[2]])
	for _, c := range lit[3:] {
		g = g<<8 | uint32(lowerTable[c])
		p := gramHash(g) & mask
		if filter[p>>3]&(1<<(p&7)) == 0 {
			return false
		}
	}
	return true
}

// MayContain reports whether block i may hold an entry containing lit
// (ASCII case-insensitively when fold; the index is lowered, so it answers
// both). False is certain: no entry of the block contains lit. In a
// version-3 segment it is also exact: false exactly when some lowered
// 4-gram of lit occurs in no entry of the (indexed) block. True is a
// maybe, and always the answer for a version-1 segment (no skip index),
// for lit shorter than SkipGram bytes, for an unindexed block, and after
// Close. A version-3 Reader computes lit's blocks once and caches them,
// so asking for every block costs one lookup. It is safe for concurrent
// use (not with Close) and panics if i is out of range, like BlockMeta.
func (r *Reader) MayContain(i int, lit []byte, fold bool) bool {
	_ = fold        // the index holds lowered n-grams: exact and folded alike
	_ = r.blocks[i] // the range check
	if len(lit) < SkipGram || r.closed.Load() {
		return true
	}
	if r.grams != nil {
		return r.grams.mayContain(i, lit)
	}
	if r.skip == nil {
		return true
	}
	f := r.skip[i]
	if f == nil || r.closed.Load() {
		return true
	}
	return mayContain(f, lit)
}

// EscapeIndexed reports whether the lines' index holds escape grams
// (format version 7): then MayHoldEscape false means that no entry of
// the block holds an escape spelling the character. Older segments
// answer "maybe" there; a caller asks them for the escapes' own grams
// (MayContain of `\u0035`, `\x35`, ...) instead.
func (r *Reader) EscapeIndexed() bool { return r.version >= formatVersion && r.grams != nil }

// MayContainBlocks is MayContain asked of every block at once: a bitmap
// with bit i%64 of word i/64 set when block i may hold lit, or nil when
// every block may (lit shorter than SkipGram bytes, no skip index, a
// damaged group, after Close). The bitmap may be shared with the
// Reader's cache: the caller must not modify it. One call costs one
// lookup of lit, however many blocks: a search with more literals than
// the cache holds would otherwise look each one up again for every
// block (review 15 H100-1: 1,100 ids in ~2,000 blocks, 73 s against
// 0.16 s without the index).
func (r *Reader) MayContainBlocks(lit []byte, fold bool) []uint64 {
	_ = fold // the index holds lowered n-grams: exact and folded alike
	if len(lit) < SkipGram || r.closed.Load() {
		return nil
	}
	if r.grams != nil {
		return r.grams.literalBlocks(lit)
	}
	if r.skip == nil {
		return nil
	}
	bm := make([]uint64, (len(r.blocks)+63)/64)
	for i, f := range r.skip {
		if f == nil || mayContain(f, lit) {
			bm[i/64] |= 1 << (i % 64)
		}
	}
	return bm
}

// MayHoldEscape reports whether block i may hold an entry with an escape
// that spells the ASCII character c (c < 0x80): a backslash, then u or U
// and 4 or 8 hex digits, x or X and 2, or 3 octal digits, of value c
// (escapedASCII). False is certain and exact: the block is indexed and
// none of its entries holds such an escape. True is a maybe, and always
// the answer before format 7 (EscapeIndexed false), for c >= 0x80, and
// after Close. Safe for concurrent use as MayContain.
func (r *Reader) MayHoldEscape(i int, c byte) bool {
	_ = r.blocks[i] // the range check
	if !r.EscapeIndexed() || c >= 0x80 || r.closed.Load() {
		return true
	}
	var g [4]byte
	binary.BigEndian.PutUint32(g[:], EscapeGram(c))
	return r.grams.mayContainKey(i, g[:])
}

// MayHoldEscapeBlocks is MayHoldEscape asked of every block at once: a
// bitmap with bit i%64 of word i/64 set when block i may hold an escape
// of c, or nil when every block may (before format 7, c >= 0x80, a
// damaged group, after Close). Like MayContainBlocks, one call costs one
// lookup and the bitmap must not be modified.
func (r *Reader) MayHoldEscapeBlocks(c byte) []uint64 {
	if !r.EscapeIndexed() || c >= 0x80 || r.closed.Load() {
		return nil
	}
	var g [4]byte
	binary.BigEndian.PutUint32(g[:], EscapeGram(c))
	return r.grams.cachedBlocks(g[:])
}

// MayContainValue reports whether block i may hold an entry with a
// structured metadata value containing lit (ASCII case-insensitively
// when fold; the index is lowered, so it answers both). False is
// certain, and exact as MayContain is for lines: some lowered 4-gram of
// lit is in no metadata value of the (indexed) block. True is a maybe,
// and always the answer before version 5 (MetaIndexed false), for lit
// shorter than SkipGram bytes, and after Close. Safe for concurrent use
// as MayContain.
func (r *Reader) MayContainValue(i int, lit []byte, fold bool) bool {
	_ = fold
	_ = r.blocks[i] // the range check
	if len(lit) < SkipGram || r.vgrams == nil || r.closed.Load() {
		return true
	}
	return r.vgrams.mayContain(i, lit)
}

// MayContainValueBlocks is MayContainValue asked of every block at
// once: a bitmap with bit i%64 of word i/64 set when block i may hold a
// metadata value containing lit, or nil when every block may (before
// version 5, lit shorter than SkipGram bytes, a damaged group, after
// Close). Like MayContainBlocks, one call costs one lookup of lit and
// the bitmap must not be modified: a search for label values asks its
// literals this way rather than block by block, which past the Reader's
// 1,024 cached literals rebuilt every literal's bitmap for every block.
func (r *Reader) MayContainValueBlocks(lit []byte, fold bool) []uint64 {
	_ = fold
	if len(lit) < SkipGram || r.vgrams == nil || r.closed.Load() {
		return nil
	}
	return r.vgrams.literalBlocks(lit)
}

// parseSkip splits a version-2 skip index into the blocks' filters,
// checking each record's checksum (the footer's skipCRC, checked by the
// caller, covers the whole section as well).
func (r *Reader) parseSkip(skip []byte) error {
	d := decoder{b: skip}
	n := d.uvarint()
	r.skip = make([][]byte, len(r.blocks))
	if d.err == nil && n != uint64(len(r.blocks)) {
		return &CorruptError{File: r.path, Block: -1, Reason: "skip index: block count differs from the block index"}
	}
	for i := range r.blocks {
		rec := d.b
		size := d.uvarint()
		if d.err != nil {
			break
		}
		hdr := len(rec) - len(d.b)
		if size < minSkipBits/8 || size > maxSkipBits/8 || size&(size-1) != 0 || size+4 > uint64(len(d.b)) {
			return &CorruptError{File: r.path, Block: -1, Reason: skipReason(i, "filter size not a power of two in range")}
		}
		end := hdr + int(size)
		if crc32.Checksum(rec[:end], castagnoli) != binary.LittleEndian.Uint32(rec[end:]) {
			return &CorruptError{File: r.path, Block: -1, Reason: skipReason(i, "checksum mismatch")}
		}
		r.skip[i] = rec[hdr:end:end]
		d.b = rec[end+4:]
	}
	if d.err != nil {
		return &CorruptError{File: r.path, Block: -1, Reason: "skip index: " + d.err.Error()}
	}
	if len(d.b) != 0 {
		return &CorruptError{File: r.path, Block: -1, Reason: "skip index: trailing bytes"}
	}
	return nil
}

// skipReason names the block whose filter is damaged. The error's Block
// stays -1: the damage is found by Open, outside the block's stored bytes.
func skipReason(i int, what string) string {
	return fmt.Sprintf("skip index of block %d: %s", i, what)
}
