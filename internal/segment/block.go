package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"

	"haystack/internal/attrs"
)

// Block is a decoded block. Entry k is Data[Offsets[k]:Offsets[k+1]], with
// time Times[k] and stream Streams[k]; len(Offsets) is the entry count plus
// one. Data is the entries' bytes concatenated with no separator: the
// search kernel scans it as one buffer and maps hits back with Offsets.
type Block struct {
	Data    []byte
	Offsets []uint32
	Times   []int64
	Streams []uint32
	// AttrData holds the entries' structured metadata concatenated and
	// AttrOffsets its Len()+1 prefix offsets, like Data and Offsets. Both
	// are empty when no entry of the block has metadata.
	AttrData    []byte
	AttrOffsets []uint32

	meta  []byte   // decompressed meta section, reused
	attrs []byte   // decompressed attrs section (AttrData is its tail), reused
	seen  []uint64 // scratch bitmap of the streams seen, reused
	arena *arena   // pooled blocks: memory for the buffers above (see arena.go)
}

// Len returns the number of entries.
func (b *Block) Len() int { return len(b.Times) }

// Line returns entry k's bytes (a subslice of Data, capacity-limited so
// appending to it cannot overwrite the next entry).
func (b *Block) Line(k int) []byte {
	return b.Data[b.Offsets[k]:b.Offsets[k+1]:b.Offsets[k+1]]
}

// Attrs returns entry k's structured metadata (package attrs' encoding;
// empty for none), a capacity-limited subslice of AttrData.
func (b *Block) Attrs(k int) []byte {
	if len(b.AttrOffsets) == 0 {
		return nil
	}
	return b.AttrData[b.AttrOffsets[k]:b.AttrOffsets[k+1]:b.AttrOffsets[k+1]]
}

// Entry returns entry k. Its Line and Attrs alias the block.
func (b *Block) Entry(k int) Entry {
	return Entry{Time: b.Times[k], Stream: b.Streams[k], Line: b.Line(k), Attrs: b.Attrs(k)}
}

var blockPool = sync.Pool{New: func() any { return newPooledBlock() }}

// maxPooledBytes keeps blocks that decoded a huge entry out of the pool, so
// one big line does not pin its buffer for the life of the process.
const maxPooledBytes = 4 << 20

// GetBlock returns an empty Block from a pool, with buffers from earlier use.
// On Linux its buffers live in memory outside the Go heap (see arena.go), so
// a slice taken from it (Data, Line, Offsets, ...) is valid only while b is
// reachable and not yet returned with PutBlock: keep b, not just its slices.
// Not calling PutBlock is fine: the memory is reused once b is collected.
func GetBlock() *Block { return blockPool.Get().(*Block) }

// PutBlock returns b to the pool. b must not be used afterwards, nor any
// slice taken from it.
func PutBlock(b *Block) {
	if b == nil || cap(b.Data) > maxPooledBytes || cap(b.meta) > maxPooledBytes || cap(b.attrs) > maxPooledBytes {
		return
	}
	b.Data, b.Offsets, b.Times, b.Streams, b.meta = b.Data[:0], b.Offsets[:0], b.Times[:0], b.Streams[:0], b.meta[:0]
	b.AttrData, b.AttrOffsets, b.attrs = nil, b.AttrOffsets[:0], b.attrs[:0]
	blockPool.Put(b)
}

// decodeBlock checks and decodes the stored block src described by m,
// from a file of format version, into dst. Every length is checked before
// it is used.
func decodeBlock(src []byte, m *BlockMeta, dst *Block, version uint32) error {
	return decodeBlockOpt(src, m, dst, version, true)
}

// decodeBlockOpt is decodeBlock, which decodes the attrs section only
// when withAttrs (ReadBlockLines): the checksum and the header's sizes
// and codecs are checked either way.
func decodeBlockOpt(src []byte, m *BlockMeta, dst *Block, version uint32, withAttrs bool) error {
	if len(src) < minBlockLen(version) {
		return errors.New("block shorter than its header")
	}
	body := src[:len(src)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(src[len(src)-4:]) {
		return errors.New("checksum mismatch")
	}
	dataCodec, metaCodec, attrsCodec := Codec(body[0]), Codec(body[1]), CodecNone
	d := decoder{b: body[2:]}
	if version >= formatV4 {
		attrsCodec = Codec(body[2])
		d.b = body[3:]
	}
	entries := d.uvarint()
	dataRaw := d.uvarint()
	dataStored := d.uvarint()
	metaRaw := d.uvarint()
	metaStored := d.uvarint()
	var attrsRaw, attrsStored uint64
	if version >= formatV4 {
		attrsRaw = d.uvarint()
		attrsStored = d.uvarint()
	}
	if d.err != nil {
		return fmt.Errorf("header: %v", d.err)
	}
	switch {
	case !validCodec(dataCodec) || !validCodec(metaCodec) || !validCodec(attrsCodec):
		if version < formatV4 {
			return fmt.Errorf("unknown codec %d/%d", uint8(dataCodec), uint8(metaCodec))
		}
		return fmt.Errorf("unknown codec %d/%d/%d", uint8(dataCodec), uint8(metaCodec), uint8(attrsCodec))
	case entries != uint64(m.Entries):
		return fmt.Errorf("header has %d entries, index %d", entries, m.Entries)
	case dataRaw != uint64(m.RawBytes):
		return fmt.Errorf("header has %d raw bytes, index %d", dataRaw, m.RawBytes)
	case metaRaw > maxMetaPerEntry*entries+1:
		return fmt.Errorf("meta size %d too large for %d entries", metaRaw, entries)
	case attrsRaw > maxAttrsRaw(entries):
		return fmt.Errorf("attrs size %d too large for %d entries", attrsRaw, entries)
	case dataStored > uint64(len(d.b)) || metaStored > uint64(len(d.b))-dataStored ||
		attrsStored != uint64(len(d.b))-dataStored-metaStored:
		return fmt.Errorf("section sizes %d+%d+%d do not fill the %d bytes stored", dataStored, metaStored, attrsStored, len(d.b))
	}
	n := int(entries)
	if !withAttrs {
		attrsRaw, attrsStored = 0, 0 // checked above; not decoded
	}
	dst.fit(int(dataRaw), int(metaRaw), int(attrsRaw), n)
	var err error
	dst.Data, err = decompress(dataCodec, dst.Data, d.b[:dataStored], int(dataRaw))
	if err != nil {
		return fmt.Errorf("data section: %w", err)
	}
	metaEnd := dataStored + metaStored
	dst.meta, err = decompress(metaCodec, dst.meta, d.b[dataStored:metaEnd], int(metaRaw))
	if err != nil {
		return fmt.Errorf("meta section: %w", err)
	}
	// Whatever follows fails or fills them: a block without metadata
	// must not show the previous block's.
	dst.AttrData, dst.AttrOffsets = nil, dst.AttrOffsets[:0]
	if attrsRaw > 0 || attrsStored > 0 {
		dst.attrs, err = decompress(attrsCodec, dst.attrs, d.b[metaEnd:], int(attrsRaw))
		if err != nil {
			return fmt.Errorf("attrs section: %w", err)
		}
		if err := dst.decodeAttrs(n); err != nil {
			return fmt.Errorf("attrs section: %w", err)
		}
	}

	// The meta loops run once per entry, so they read varints inline with
	// a one-byte fast path (most lengths and many time deltas are small)
	// and check for errors (p < 0) once per loop.
	mb := dst.meta
	p := 0
	offs := slices.Grow(dst.Offsets[:0], n+1)[:n+1]
	var sum uint64
	offs[0] = 0
	for k := 1; k <= n; k++ {
		var v uint64
		if uint(p) < uint(len(mb)) && mb[p] < 0x80 { // one-byte fast path
			v, p = uint64(mb[p]), p+1
		} else if uint(p) < uint(len(mb)-1) && mb[p+1] < 0x80 { // two bytes: lines of 128 B-16 KiB (p >= 0: not after an error)
			v, p = uint64(mb[p]&0x7f)|uint64(mb[p+1])<<7, p+2
		} else {
			v, p = uvarintSlow(mb, p)
		}
		sum += v
		if sum > dataRaw { // also stops an error's garbage from running on
			break
		}
		offs[k] = uint32(sum)
	}
	dst.Offsets = offs
	if p < 0 {
		return errors.New("meta section: bad or truncated entry length")
	}
	if sum != dataRaw {
		return fmt.Errorf("meta section: entry lengths do not add up to the data's %d bytes", dataRaw)
	}

	if uint(p) >= uint(len(mb)) || mb[p] > maxTimeScale {
		return errors.New("meta section: bad or missing time scale")
	}
	unit := uint64(pow10[mb[p]])
	p++
	times := slices.Grow(dst.Times[:0], n)[:n]
	var t uint64
	lo, hi := m.MaxTime, m.MinTime
	for k := range times {
		var v uint64
		if uint(p) < uint(len(mb)) && mb[p] < 0x80 {
			v, p = uint64(mb[p]), p+1
		} else {
			v, p = uvarintSlow(mb, p)
		}
		d := v>>1 ^ -(v & 1) // zig-zag, as binary.Varint
		if k == 0 {
			t = d
		} else {
			t += d * unit
		}
		times[k] = int64(t)
		lo, hi = min(lo, int64(t)), max(hi, int64(t))
	}
	dst.Times = times
	if p < 0 {
		return errors.New("meta section: bad or truncated time")
	}
	if lo != m.MinTime || hi != m.MaxTime {
		return fmt.Errorf("meta section: times span [%d, %d], index says [%d, %d]", lo, hi, m.MinTime, m.MaxTime)
	}

	streams := slices.Grow(dst.Streams[:0], n)[:n]
	if len(m.Streams) == 1 {
		for k := range streams {
			streams[k] = m.Streams[0]
		}
	} else {
		// Every listed stream must occur, or the index would send stream
		// filters to blocks without their rows (harmless, but a lie).
		words := (len(m.Streams) + 63) / 64
		seen := slices.Grow(dst.seen[:0], words)[:words]
		clear(seen)
		dst.seen = seen
		distinct := 0
		for k := range streams {
			var v uint64
			if uint(p) < uint(len(mb)) && mb[p] < 0x80 {
				v, p = uint64(mb[p]), p+1
			} else {
				v, p = uvarintSlow(mb, p)
			}
			if v >= uint64(len(m.Streams)) {
				if p < 0 {
					return errors.New("meta section: bad or truncated stream index")
				}
				return fmt.Errorf("meta section: stream index %d out of range (%d streams)", v, len(m.Streams))
			}
			streams[k] = m.Streams[v]
			if w, bit := v/64, uint64(1)<<(v%64); seen[w]&bit == 0 {
				seen[w] |= bit
				distinct++
			}
		}
		if p >= 0 && distinct != len(m.Streams) {
			return fmt.Errorf("meta section: %d of the %d streams the index lists occur", distinct, len(m.Streams))
		}
	}
	dst.Streams = streams
	if p < 0 {
		return errors.New("meta section: bad or truncated stream index")
	}
	if p != len(mb) {
		return fmt.Errorf("meta section: %d trailing bytes", len(mb)-p)
	}
	return nil
}

// decodeAttrs decodes the attrs section in b.attrs for n entries into
// AttrData (its tail, not copied) and AttrOffsets, checking each entry's
// metadata with attrs.Validate: a reader must never hand out metadata
// that the attrs package would misread.
func (b *Block) decodeAttrs(n int) error {
	ab := b.attrs
	p := 0
	offs := slices.Grow(b.AttrOffsets[:0], n+1)[:n+1]
	var sum uint64
	offs[0] = 0
	for k := 1; k <= n; k++ {
		var v uint64
		if uint(p) < uint(len(ab)) && ab[p] < 0x80 {
			v, p = uint64(ab[p]), p+1
		} else {
			v, p = uvarintSlow(ab, p)
		}
		if p < 0 || v > uint64(len(ab)) {
			return errors.New("bad or truncated metadata length")
		}
		if sum += v; sum > uint64(len(ab)) { // no overflow: both <= len(ab)
			return errors.New("metadata lengths exceed the section")
		}
		offs[k] = uint32(sum)
	}
	if sum != uint64(len(ab)-p) {
		return fmt.Errorf("metadata lengths add up to %d bytes, %d follow them", sum, len(ab)-p)
	}
	if sum == 0 {
		// The writer stores an empty section when no entry has metadata:
		// one block content, one encoding.
		return errors.New("present but no entry has metadata")
	}
	data := ab[p:len(ab):len(ab)]
	// Validate costs ~55 ns for an entry of three pairs (trace_id,
	// span_id, severity); entries often repeat the previous entry's
	// metadata (a service's constant pairs), which need no second check.
	var prev []byte
	for k := range n {
		a := data[offs[k]:offs[k+1]]
		if len(a) == 0 || bytes.Equal(a, prev) {
			continue
		}
		if err := attrs.Validate(a); err != nil {
			return fmt.Errorf("entry %d: %w", k, err)
		}
		prev = a
	}
	b.AttrData, b.AttrOffsets = data, offs
	return nil
}

// uvarintSlow decodes the uvarint at b[p:] and returns it with the
// position after it; the loops above test the one-byte case inline first.
// A bad or truncated varint, or p < 0 (an earlier error), gives p = -1,
// which stays -1 through later calls.
func uvarintSlow(b []byte, p int) (uint64, int) {
	if p < 0 || p >= len(b) {
		return 0, -1
	}
	v, n := binary.Uvarint(b[p:])
	if n <= 0 {
		return 0, -1
	}
	return v, p + n
}

func validCodec(c Codec) bool { return c == CodecNone || c == CodecLZ4 || c == CodecZstd }
