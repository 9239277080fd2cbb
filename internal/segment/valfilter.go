package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"sync/atomic"
)

// Value filters (format version 6): per block, a bloom filter of the
// whole metadata values of its entries, so that a label filter needing an
// exact value (`| trace_id="5f89..."`) skips the blocks without it.
//
// Why, beside the values' 4-gram index of version 5 (review R11c-2):
// with short log bodies a 1 MiB block holds ~14,000 entries, whose hex
// trace and span ids cover ~95% of the 65,536 hex 4-grams, so an id's
// 29 grams are all in almost every block and the gram index let 17 of 18
// blocks through for an absent id. A filter of whole values does not
// saturate: it costs valueFilterBits bits a distinct value (~1.25 bytes,
// against ~17 stored bytes of a 32-digit hex id) for a false-positive
// rate of ~0.8% per block, whatever the block holds. Substrings and
// regexes still ask the gram index. Names are left out, as in the gram
// index: a matcher on x may read a pair named x or x_extracted, and
// hashing the value alone keeps the filter sound whatever name it is
// read under; a value under another name only costs a false positive.
//
// Layout and rules are in doc.go ("Value filters, version 6").

const (
	// valueFilterBits is the filter size per distinct value: 10 bits
	// and 7 probes give a false-positive rate of ~0.8%.
	valueFilterBits = 10

	// valueFilterMaxK bounds the probes a filter may ask for.
	valueFilterMaxK = 16

	// valueFilterShare: a block's filter takes at most 1/valueFilterShare
	// of the block's stored bytes (and at least valueFilterMinBytes when
	// it needs them). Values that are shorter when stored than 10 bits
	// each (small unique numbers) get fewer bits a value, and no filter
	// below valueFilterMinBits a value (~40% false positives).
	valueFilterShare    = 8
	valueFilterMinBytes = 64
	valueFilterMinBits  = 2

	// valueFilterEntry is a table entry: u32 end offset, u32 CRC-32C.
	valueFilterEntry = 8
)

// valueHash is the 64-bit hash of a metadata value that the filters of
// format 6 use: part of the format (doc.go spells it out), so it must
// never change for version 6. It reads 8 bytes at a time (little-endian,
// the last word zero-padded), starting from (length+1)*m1, and
// finishes with splitmix64's mixer.
func valueHash(v []byte) uint64 {
	const m1, m2, m3 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
	h := (uint64(len(v)) + 1) * m1
	for len(v) >= 8 {
		h = (h ^ binary.LittleEndian.Uint64(v)) * m2
		h ^= h >> 29
		v = v[8:]
	}
	if len(v) > 0 {
		var t [8]byte
		copy(t[:], v)
		h = (h ^ binary.LittleEndian.Uint64(t[:])) * m2
		h ^= h >> 29
	}
	h ^= h >> 30
	h *= m2
	h ^= h >> 27
	h *= m3
	h ^= h >> 31
	return h
}

// filterBit is probe j's bit of hash h in a filter of m bits
// (Kirsch-Mitzenmacher double hashing, reduced to [0, m) by a
// multiply-shift).
func filterBit(h uint64, j uint32, m uint64) uint64 {
	x := uint32(h) + j*uint32(h>>32)
	return uint64(x) * m >> 32
}

// appendValueFilter appends block's filter record, for the hashes hs (of
// each value of the block's entries; sorted and deduplicated here) and a
// block of stored bytes: empty for no filter, else u8 k and the bits.
func appendValueFilter(dst []byte, hs []uint64, stored int64) ([]byte, []uint64) {
	slices.Sort(hs)
	hs = slices.Compact(hs)
	n := len(hs)
	if n == 0 {
		return append(dst, 1), hs // no value: a filter of no bits
	}
	size := (int64(n)*valueFilterBits + 7) / 8
	size = min(size, max(valueFilterMinBytes, stored/valueFilterShare))
	if size*8 < int64(n)*valueFilterMinBits || size > math.MaxUint32/16 {
		return dst, hs // too few bits to prune anything: no filter
	}
	m := uint64(size) * 8
	k := int(math.Round(float64(m) / float64(n) * math.Ln2))
	k = min(max(k, 1), valueFilterMaxK)
	dst = append(dst, byte(k))
	start := len(dst)
	dst = append(dst, make([]byte, size)...)
	bits := dst[start:]
	for _, h := range hs {
		for j := range uint32(k) {
			p := filterBit(h, j, m)
			bits[p>>3] |= 1 << (p & 7)
		}
	}
	return dst, hs
}

// valueFilters is a parsed value-filters section: the table and the
// filters point into the mapping; a block's CRC is checked the first
// time a lookup reads its filter.
type valueFilters struct {
	blocks   int
	noValues bool   // an empty section: no block holds a value
	table    []byte // blocks x (u32 end, u32 CRC)
	area     []byte // the filters concatenated

	// Filters whose CRC has been checked, one bit each, as gramIndex's
	// groups: ok once it matched, bad once it did not.
	ok, bad []atomic.Uint32
	// damage is the first damaged or malformed filter met by a lookup.
	damage atomic.Pointer[filterError]
}

// filterError is a damaged (checksum mismatch) or malformed filter.
type filterError struct {
	block  int
	reason string
}

func (e *filterError) Error() string {
	return fmt.Sprintf("value filter of block %d: %s", e.block, e.reason)
}

// parseValueFilters parses the value-filters section of a version-6
// skip index over nb blocks: the count and the table (ends ascending,
// the last one the area's end), not the filters, which lookups check
// lazily and Verify checks whole. head is the length of the bytes the
// footer's skipCRC covers (the count and the table).
func parseValueFilters(b []byte, nb int) (f *valueFilters, head int, err error) {
	if len(b) == 0 {
		// An empty section: no block holds a metadata value.
		return &valueFilters{blocks: nb, noValues: true}, 0, nil
	}
	d := decoder{b: b}
	n := d.uvarint()
	if d.err != nil {
		return nil, 0, d.err
	}
	if n != uint64(nb) {
		return nil, 0, errors.New("block count differs from the block index")
	}
	if uint64(len(d.b))/valueFilterEntry < n {
		return nil, 0, errors.New("table exceeds the section")
	}
	head = len(b) - len(d.b) + nb*valueFilterEntry
	f = &valueFilters{blocks: nb, table: d.b[:nb*valueFilterEntry], area: d.b[nb*valueFilterEntry:]}
	prev := uint32(0)
	for i := range nb {
		end := binary.LittleEndian.Uint32(f.table[i*valueFilterEntry:])
		if end < prev || uint64(end) > uint64(len(f.area)) {
			return nil, 0, errors.New("filter offsets not ascending inside the section")
		}
		prev = end
	}
	if uint64(prev) != uint64(len(f.area)) {
		return nil, 0, errors.New("filters do not end at the section's end")
	}
	f.ok = make([]atomic.Uint32, (nb+31)/32)
	f.bad = make([]atomic.Uint32, (nb+31)/32)
	return f, head, nil
}

// record returns block i's filter record (empty: no filter).
func (f *valueFilters) record(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = binary.LittleEndian.Uint32(f.table[(i-1)*valueFilterEntry:])
	}
	end := binary.LittleEndian.Uint32(f.table[i*valueFilterEntry:])
	return f.area[start:end]
}

// verify checks block i's record (its CRC and its k) the first time it
// is used, and returns a *filterError (also recorded as the damage) when
// it fails.
func (f *valueFilters) verify(i int) error {
	w, bit := i/32, uint32(1)<<(i%32)
	if f.ok[w].Load()&bit != 0 {
		return nil
	}
	if f.bad[w].Load()&bit != 0 {
		return &filterError{block: i, reason: "damaged"}
	}
	rec := f.record(i)
	var err *filterError
	switch {
	case crc32.Checksum(rec, castagnoli) != binary.LittleEndian.Uint32(f.table[i*valueFilterEntry+4:]):
		err = &filterError{block: i, reason: "checksum mismatch"}
	case len(rec) > 0 && (rec[0] == 0 || rec[0] > valueFilterMaxK):
		err = &filterError{block: i, reason: fmt.Sprintf("%d probes out of range 1..%d", rec[0], valueFilterMaxK)}
	}
	if err != nil {
		f.bad[w].Or(bit)
		f.damage.CompareAndSwap(nil, err)
		return err
	}
	f.ok[w].Or(bit)
	return nil
}

// mayHave reports whether block i may hold a value of hash h: false
// only when its (checked) filter lacks one of h's bits.
func (f *valueFilters) mayHave(i int, h uint64) bool {
	if f.noValues {
		return false
	}
	if f.verify(i) != nil {
		return true // never trusted: results stay exact, the skip is lost
	}
	rec := f.record(i)
	if len(rec) == 0 {
		return true
	}
	k, bits := uint32(rec[0]), rec[1:]
	m := uint64(len(bits)) * 8
	if m == 0 {
		return false // the block holds no value
	}
	for j := range k {
		p := filterBit(h, j, m)
		if bits[p>>3]&(1<<(p&7)) == 0 {
			return false
		}
	}
	return true
}

// filtered reports whether some block has a filter.
func (f *valueFilters) filtered() bool {
	return f.blocks > 0 && (f.noValues || len(f.area) > 0)
}

// check verifies every block's record, returning the first error.
func (f *valueFilters) check() error {
	if f.noValues {
		return nil
	}
	for i := range f.blocks {
		if err := f.verify(i); err != nil {
			return err
		}
	}
	return nil
}

// ValueFiltered reports whether the segment has value filters (format
// version 6) that may rule a block out for an exact metadata value
// (MayHaveValue). Older segments answer "maybe" to every value.
func (r *Reader) ValueFiltered() bool { return r.vfilters != nil && r.vfilters.filtered() }

// MayHaveValue reports whether block i may hold an entry with a
// structured metadata value equal to v, byte for byte, under any name.
// False is certain; true is a maybe (~1% of the blocks without v when
// the block has a filter of valueFilterBits a value), and always the
// answer before version 6, for a block without a filter, for a filter
// that is damaged (IndexDamage reports it), and after Close. Safe for
// concurrent use as MayContain; it panics if i is out of range.
func (r *Reader) MayHaveValue(i int, v []byte) bool {
	_ = r.blocks[i] // the range check
	if r.vfilters == nil || r.closed.Load() {
		return true
	}
	return r.vfilters.mayHave(i, valueHash(v))
}

// MayHaveValueBlocks is MayHaveValue asked of every block at once: a
// bitmap (a new one, the caller's) with bit i%64 of word i/64 set when
// block i may hold a metadata value equal to v, or nil when every block
// may (before version 6, after Close). v is hashed once, not once a
// block.
func (r *Reader) MayHaveValueBlocks(v []byte) []uint64 {
	if r.vfilters == nil || r.closed.Load() {
		return nil
	}
	h := valueHash(v)
	bm := make([]uint64, (len(r.blocks)+63)/64)
	for i := range r.blocks {
		if r.vfilters.mayHave(i, h) {
			bm[i/64] |= 1 << (i % 64)
		}
	}
	return bm
}
