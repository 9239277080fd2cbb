package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
)

// The skip index (format version 2): per block, a bloom filter with one
// hash function over the distinct ASCII-lowered 4-byte n-grams of the
// block's entries (never spanning two entries). Measured against trigrams,
// more bits per n-gram, more hash functions and per-segment postings lists
// in docs/BENCHMARKS.md, "Skip index (issue 6)": 4-grams at ~1.25 bits
// each are what fits in ~10% of the stored size on log text while still
// dropping most blocks for absent and rare needles; trigrams are cheaper
// but every hex trigram of a trace id is in every block.
const (
	// SkipGram is the n-gram length: a needle shorter than this skips
	// nothing.
	SkipGram = 4

	// skipBitsPerGram sizes a block's filter from its estimated count of
	// distinct n-grams.
	skipBitsPerGram = 1.25

	// maxSkipBits caps a filter (1 MiB): only a block holding one huge
	// entry gets near it, and its filter is then merely less selective.
	maxSkipBits = 8 << 20

	// countBits is the size of the linear-counting bitmap that estimates a
	// block's distinct n-grams before the filter is sized.
	countBits = 1 << 20
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
// well-mixed bits (Fibonacci hashing); a filter of m bits uses bit
// hash*m>>32.
func gramHash(g uint32) uint32 {
	return uint32((uint64(g) * 0x9E3779B97F4A7C15) >> 32)
}

// skipBuilder builds the per-block filters of one segment.
type skipBuilder struct {
	count []byte // linear-counting bitmap, countBits bits
	out   []byte // the encoded skip index so far (without its count)
	n     int    // filters encoded
}

// setGrams sets, in the bitmap bm of m bits, the bit of each lowered
// 4-gram of each entry of data (cut by lens). Written out rather than with
// a callback: it runs twice per byte ingested.
func setGrams(bm []byte, m uint64, data []byte, lens []uint32) {
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
			p := uint64(gramHash(g)) * m >> 32
			bm[p>>3] |= 1 << (p & 7)
		}
	}
}

// add builds the filter of a block of entries (data cut by lens) and
// appends its record: uvarint filter bytes, the filter, CRC-32C of both.
func (s *skipBuilder) add(data []byte, lens []uint32) {
	if s.count == nil {
		s.count = make([]byte, countBits/8)
	} else {
		clear(s.count)
	}
	// Estimate the distinct n-grams by linear counting: the filter's size
	// follows the distinct count, and deduplicating exactly would cost a
	// hash set per block.
	setGrams(s.count, countBits, data, lens)
	set := 0
	for i := 0; i+8 <= len(s.count); i += 8 {
		set += bits.OnesCount64(binary.LittleEndian.Uint64(s.count[i:]))
	}
	var distinct float64
	if set == countBits {
		distinct = math.Inf(1)
	} else {
		distinct = -countBits * math.Log(1-float64(set)/countBits)
	}
	m := uint64(math.Ceil(distinct*skipBitsPerGram/64)) * 64
	m = min(max(m, 64), maxSkipBits)

	start := len(s.out)
	s.out = binary.AppendUvarint(s.out, m/8)
	hdr := len(s.out)
	s.out = append(s.out, make([]byte, m/8)...)
	filter := s.out[hdr:]
	setGrams(filter, m, data, lens)
	s.out = binary.LittleEndian.AppendUint32(s.out, crc32.Checksum(s.out[start:], castagnoli))
	s.n++
}

// mayContain reports whether filter (one block's) may hold every 4-gram of
// lit, lowered. Short needles say yes.
func mayContain(filter, lit []byte) bool {
	if len(lit) < SkipGram {
		return true
	}
	m := uint64(len(filter)) * 8
	g := uint32(lowerTable[lit[0]])<<16 | uint32(lowerTable[lit[1]])<<8 | uint32(lowerTable[lit[2]])
	for _, c := range lit[3:] {
		g = g<<8 | uint32(lowerTable[c])
		p := uint64(gramHash(g)) * m >> 32
		if filter[p>>3]&(1<<(p&7)) == 0 {
			return false
		}
	}
	return true
}

// MayContain reports whether block i may hold an entry containing lit
// (ASCII case-insensitively when fold; the index is lowered, so it answers
// both). False is certain: no entry of the block contains lit. True is a
// maybe, and always the answer for a version-1 segment (no skip index),
// for lit shorter than SkipGram bytes, and after Close. It panics if i is
// out of range, like BlockMeta.
func (r *Reader) MayContain(i int, lit []byte, fold bool) bool {
	_ = fold        // the filter holds lowered n-grams: exact and folded alike
	_ = r.blocks[i] // the range check
	if r.skip == nil || r.closed.Load() {
		return true
	}
	f := r.skip[i]
	if f == nil || r.closed.Load() {
		return true
	}
	return mayContain(f, lit)
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
		if size == 0 || size%8 != 0 || size > maxSkipBits/8 || size+4 > uint64(len(d.b)) {
			return &CorruptError{File: r.path, Block: -1, Reason: skipReason(i, "filter size out of range")}
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
