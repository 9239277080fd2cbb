package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"haystack/internal/dirfs"
)

// CorruptError reports a damaged segment.
type CorruptError struct {
	File   string // path of the segment
	Block  int    // damaged block, or -1 for the header, footer or block index
	Reason string // what is wrong, for people
}

// Error returns "segment FILE: block N: REASON" (no block for -1).
func (e *CorruptError) Error() string {
	if e.Block < 0 {
		return fmt.Sprintf("segment %s: corrupt: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("segment %s: block %d: corrupt: %s", e.File, e.Block, e.Reason)
}

// BlockMeta describes one block, from the block index.
type BlockMeta struct {
	MinTime, MaxTime int64    // time range of the block's entries
	Entries          int      // number of entries
	RawBytes         int      // len(Block.Data) once decoded
	Streams          []uint32 // streams present, sorted, distinct; do not modify

	offset, length int64 // where the block is stored
}

// Reader reads one segment: its index through a read-only memory mapping,
// its blocks with pread from a descriptor it keeps or, past the
// process's budget of kept descriptors, through the mapping too
// (pread.go). ReadBlock,
// BlockMeta and the other getters are safe for concurrent use; Close must
// not run concurrently with them.
type Reader struct {
	path     string
	data     []byte // the mapping
	info     Info
	blocks   []BlockMeta
	skip     [][]byte      // version 2: per block, its bloom filter (into data)
	grams    *gramIndex    // versions 3 to 7: the postings index of the lines (from 7 with escape grams)
	vgrams   *gramIndex    // versions 5 to 7: the postings index of the metadata values
	vfilters *valueFilters // versions 6 and 7: per block, a filter of whole metadata values
	// skipDamage is the *CorruptError of a skip index that Open found
	// damaged (its checked head, or a version-2 filter): the Reader then
	// has no skip index, every block answers "maybe", and the blocks,
	// which the index does not describe, are read as usual.
	skipDamage error
	version    uint32 // format version, which decides the block layout
	mapped     bool   // data is a mapping to unmap on Close (tests read from memory)
	// file is the segment's descriptor, kept to read blocks with pread
	// when the process-wide budget allowed it (pread.go); nil otherwise,
	// and blocks are then read through the mapping.
	file   *os.File
	kept   *keptFile // file's count in the budget, given back once
	closed atomic.Bool
}

// Open maps the segment at path and validates its header, footer and block
// index. Damage is reported as a *CorruptError; blocks are checked by
// ReadBlock and Verify. A damaged skip index is not an error here: the
// segment opens without one (every block may match, so searches stay
// exact and only scan more), and IndexDamage and Verify report it.
func Open(path string) (*Reader, error) {
	return OpenIn(byPath, path)
}

// OpenIn is Open of the segment at name inside dir: with a dir from
// dirfs.Open it is the file in that directory even if the directory was
// renamed or replaced meanwhile. Errors name the file by its full path.
func OpenIn(dir *dirfs.Dir, name string) (*Reader, error) {
	f, err := dir.Open(name)
	path := dir.Path(name)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	r, err := mapFile(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	// The mapping outlives the descriptor, which r keeps only to read
	// blocks with pread (pread.go).
	r.keepFileOf(f)
	return r, nil
}

// mapFile maps the segment open as f and returns a Reader over the
// mapping.
func mapFile(f *os.File, path string) (*Reader, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	size := st.Size()
	if size < headerSize+footerSize {
		return nil, &CorruptError{File: path, Block: -1, Reason: fmt.Sprintf("file of %d bytes is shorter than a header and footer", size)}
	}
	if size > math.MaxInt {
		return nil, &CorruptError{File: path, Block: -1, Reason: "file too large to map"}
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("segment: mmap %s: %w", path, err)
	}
	r, err := newReader(path, data)
	if err != nil {
		unix.Munmap(data)
		return nil, err
	}
	r.mapped = true
	return r, nil
}

// newReader validates data, a whole segment file, and returns a Reader
// over it.
func newReader(path string, data []byte) (*Reader, error) {
	bad := func(format string, args ...any) error {
		return &CorruptError{File: path, Block: -1, Reason: fmt.Sprintf(format, args...)}
	}
	size := int64(len(data))
	if size < headerSize+footerSize {
		return nil, bad("file of %d bytes is shorter than a header and footer", size)
	}
	ft := data[size-footerSize:]
	if string(ft[64:]) != magic {
		return nil, bad("footer magic missing (truncated or not a segment)")
	}
	if got, want := crc32.Checksum(ft[:60], castagnoli), binary.LittleEndian.Uint32(ft[60:]); got != want {
		return nil, bad("footer checksum mismatch")
	}
	version := binary.LittleEndian.Uint32(ft[44:])
	if version < formatV1 || version > formatVersion {
		return nil, bad("unsupported format version %d (this build reads %d to %d)", version, formatV1, formatVersion)
	}
	if fs := binary.LittleEndian.Uint64(ft[48:]); fs != uint64(size) {
		return nil, bad("file is %d bytes, footer says %d (truncated or extended)", size, fs)
	}
	if fl := binary.LittleEndian.Uint32(ft[56:]); fl != 0 {
		return nil, bad("unknown footer flags %#x", fl)
	}
	if version == formatV1 {
		for _, b := range ft[24:44] {
			if b != 0 {
				return nil, bad("skip index fields set in a version 1 file")
			}
		}
	}
	h := data[:headerSize]
	if string(h[:8]) != magic {
		return nil, bad("header magic missing")
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != version {
		return nil, bad("header version %d differs from footer version %d", v, version)
	}
	if fl := binary.LittleEndian.Uint32(h[12:]); fl != 0 {
		return nil, bad("unknown header flags %#x", fl)
	}
	idxOff := binary.LittleEndian.Uint64(ft[0:])
	idxLen := binary.LittleEndian.Uint64(ft[8:])
	end := uint64(size - footerSize)
	var skip []byte
	if version >= 2 {
		// The skip index lies between the block index and the footer.
		skipOff := binary.LittleEndian.Uint64(ft[24:])
		skipLen := binary.LittleEndian.Uint64(ft[32:])
		if skipOff < headerSize || skipOff > end || skipLen != end-skipOff {
			return nil, bad("skip index at %d+%d does not end at the footer (%d)", skipOff, skipLen, end)
		}
		skip = data[skipOff:end]
		end = skipOff
	}
	if idxOff < headerSize || idxOff > end || idxLen != end-idxOff {
		return nil, bad("block index at %d+%d does not end at the footer or skip index (%d)", idxOff, idxLen, end)
	}
	idx := data[idxOff:end]
	if crc32.Checksum(idx, castagnoli) != binary.LittleEndian.Uint32(ft[16:]) {
		return nil, bad("block index checksum mismatch")
	}
	count := binary.LittleEndian.Uint32(ft[20:])

	d := decoder{b: idx}
	n := d.uvarint()
	if d.err == nil && n != uint64(count) {
		return nil, bad("block index has %d blocks, footer says %d", n, count)
	}
	// Each index entry takes at least 7 bytes: bounds the allocation.
	if d.err == nil && n > uint64(len(idx))/7 {
		return nil, bad("block count %d too large for a %d-byte index", n, len(idx))
	}
	r := &Reader{path: path, data: data, blocks: make([]BlockMeta, 0, n), version: version}
	off := int64(headerSize)
	for i := uint64(0); i < n && d.err == nil; i++ {
		var m BlockMeta
		length := d.uvarint()
		m.MinTime = d.varint()
		span := d.uvarint()
		m.MaxTime = int64(uint64(m.MinTime) + span)
		entries := d.uvarint()
		raw := d.uvarint()
		ns := d.uvarint()
		if d.err != nil {
			break
		}
		switch {
		case length < uint64(minBlockLen(version)) || length > end-uint64(off):
			return nil, bad("block %d: length %d out of range", i, length)
		case m.MaxTime < m.MinTime:
			return nil, bad("block %d: time range overflows", i)
		case entries == 0 || entries > maxBlockEntries:
			return nil, bad("block %d: %d entries out of range", i, entries)
		case raw > MaxBlockRawBytes:
			return nil, bad("block %d: raw size %d exceeds the limit", i, raw)
		case ns == 0 || ns > entries || ns > uint64(len(d.b)):
			return nil, bad("block %d: %d streams for %d entries", i, ns, entries)
		}
		m.Entries, m.RawBytes = int(entries), int(raw)
		m.Streams = make([]uint32, ns)
		var s uint64
		for j := range m.Streams {
			v := d.uvarint()
			if j > 0 && v == 0 {
				d.fail("stream ids not ascending")
			}
			s += v
			if s > math.MaxUint32 {
				d.fail("stream id overflows")
			}
			if d.err != nil {
				break
			}
			m.Streams[j] = uint32(s)
		}
		m.offset, m.length = off, int64(length)
		off += int64(length)
		r.blocks = append(r.blocks, m)
		if len(r.blocks) == 1 {
			r.info.MinTime, r.info.MaxTime = m.MinTime, m.MaxTime
		} else {
			r.info.MinTime = min(r.info.MinTime, m.MinTime)
			r.info.MaxTime = max(r.info.MaxTime, m.MaxTime)
		}
		r.info.Entries += int64(entries)
		r.info.RawBytes += int64(raw)
	}
	if d.err != nil {
		return nil, bad("block index: %v", d.err)
	}
	if len(d.b) != 0 {
		return nil, bad("block index: %d trailing bytes", len(d.b))
	}
	if uint64(off) != idxOff {
		return nil, bad("blocks end at %d, index starts at %d", off, idxOff)
	}
	if skip != nil {
		r.info.SkipBytes = int64(len(skip))
		if err := r.parseSkipSection(skip, ft); err != nil {
			// The blocks do not depend on their index: open without it.
			r.skip, r.grams, r.vgrams, r.vfilters = nil, nil, nil, nil
			r.skipDamage = err
		}
	}
	r.info.Blocks = len(r.blocks)
	r.info.FileBytes = size
	return r, nil
}

// parseSkipSection checks a segment's skip index (the bytes between the
// block index and the footer, ft) as far as Open checks it, and sets the
// Reader's indexes from it. Its error is a *CorruptError naming the file.
func (r *Reader) parseSkipSection(skip, ft []byte) error {
	bad := func(format string, args ...any) error {
		return &CorruptError{File: r.path, Block: -1, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case r.version == formatV2:
		// Each block's record has its own CRC, checked first so that the
		// error names the damaged block's filter; the footer's CRC of the
		// whole section then covers the count and the framing.
		if err := r.parseSkip(skip); err != nil {
			return err
		}
		if crc32.Checksum(skip, castagnoli) != binary.LittleEndian.Uint32(ft[40:]) {
			return bad("skip index checksum mismatch")
		}
	case r.version >= 3:
		// The footer's CRC covers the section's head (counts and group
		// table), checked here before the table is trusted; parseGrams
		// bounds-checks what it reads first. Each group of postings has
		// its CRC in the table, checked when a lookup first decodes the
		// group (a search reads a few of thousands), so Open never
		// reads the postings (~700 KiB per segment of logs).
		lines, vals, prefix := skip, []byte(nil), 0
		var vprefix, filters []byte // version 6: the values' index length, the filters
		if r.version >= formatV5 {
			// Version 5: the lines' index framed by its length, then
			// the values' index; version 6 frames that too, and the
			// value filters follow.
			d := decoder{b: skip}
			n := d.uvarint()
			if d.err != nil || n > uint64(len(d.b)) {
				return bad("skip index: lines' index length out of range")
			}
			prefix = len(skip) - len(d.b)
			lines, vals = d.b[:n:n], d.b[n:]
			if r.version >= formatV6 {
				d := decoder{b: vals}
				n := d.uvarint()
				if d.err != nil || n > uint64(len(d.b)) {
					return bad("skip index: metadata values' index length out of range")
				}
				vprefix = vals[:len(vals)-len(d.b)]
				vals, filters = d.b[:n:n], d.b[n:]
			}
		}
		g, err := parseGrams(lines, len(r.blocks))
		if err != nil {
			return bad("skip index: %v", err)
		}
		crc := crc32.Checksum(skip[:prefix], castagnoli)
		crc = crc32.Update(crc, castagnoli, lines[:len(lines)-len(g.area)])
		var vg *gramIndex
		if r.version >= formatV5 {
			crc = crc32.Update(crc, castagnoli, vprefix)
			if vg, err = parseGrams(vals, len(r.blocks)); err != nil {
				return bad("skip index of metadata values: %v", err)
			}
			crc = crc32.Update(crc, castagnoli, vals[:len(vals)-len(vg.area)])
		}
		var vf *valueFilters
		if r.version >= formatV6 {
			var head int
			if vf, head, err = parseValueFilters(filters, len(r.blocks)); err != nil {
				return bad("skip index: metadata value filters: %v", err)
			}
			crc = crc32.Update(crc, castagnoli, filters[:head])
		}
		if crc != binary.LittleEndian.Uint32(ft[40:]) {
			return bad("skip index checksum mismatch")
		}
		r.grams, r.vgrams, r.vfilters = g, vg, vf
	}
	return nil
}

// minBlockLen is the shortest possible block of a format version: two
// codec bytes and five one-byte uvarints (from version 4 three codec
// bytes and seven uvarints), and the CRC.
func minBlockLen(version uint32) int {
	if version >= formatV4 {
		return 3 + 7 + 4
	}
	return 2 + 5 + 4
}

// Path returns the path the segment was opened with.
func (r *Reader) Path() string { return r.path }

// MetaIndexed reports whether the skip index also covers the entries'
// structured metadata values (format versions 5 to 7), so that
// MayContainValue false means that no value holds the literal. Older
// segments index lines only: a caller must not skip one of their blocks
// for a value its metadata may hold (MayContainValue says "maybe").
//
// A version 5 segment whose writer gave the values' index up (its budget:
// high-cardinality values that are not hex) lists every block as
// unindexed: it is not MetaIndexed either.
func (r *Reader) MetaIndexed() bool { return r.vgrams != nil && !r.vgrams.allUnindexed() }

// Info returns the segment's summary.
func (r *Reader) Info() Info { return r.info }

// NumBlocks returns the number of blocks.
func (r *Reader) NumBlocks() int { return len(r.blocks) }

// BlockMeta returns block i's index entry. It panics if i is out of range,
// like a slice index.
func (r *Reader) BlockMeta(i int) BlockMeta { return r.blocks[i] }

// BlockCodec returns the codec of block i's data section, read from the
// block's first header byte without decoding it (Open checked that every
// block has its header): for tools and tests that report how a store is
// laid out. A damaged byte is returned as is; ReadBlock is what checks it.
func (r *Reader) BlockCodec(i int) Codec {
	return Codec(r.data[r.blocks[i].offset])
}

var errClosed = errors.New("segment: reader is closed")

// ReadBlock decodes block i into dst, reusing dst's buffers. It verifies the
// block's checksum and structure and returns a *CorruptError naming the
// file and block on any damage; dst's contents are then unspecified.
func (r *Reader) ReadBlock(i int, dst *Block) error {
	return r.readBlock(i, dst, true)
}

// ReadBlockLines is ReadBlock without the structured metadata: the attrs
// section is neither decompressed nor validated, and dst.AttrData and
// dst.AttrOffsets are left empty. The checksum still covers the whole
// block and the header, with the section sizes, is checked as in
// ReadBlock, so damage anywhere in the block is still reported; only a
// CRC-valid attrs section that fails to decode or validate goes
// unnoticed, as it does not affect the lines, times and streams. It is
// for searches that never look at metadata (a count, a text listing):
// with OTel-like metadata on every entry the section doubles the bytes
// decompressed and attrs.Validate costs as much again.
func (r *Reader) ReadBlockLines(i int, dst *Block) error {
	return r.readBlock(i, dst, false)
}

func (r *Reader) readBlock(i int, dst *Block, withAttrs bool) error {
	if r.closed.Load() {
		return errClosed
	}
	if i < 0 || i >= len(r.blocks) {
		return fmt.Errorf("segment %s: block %d out of range [0, %d)", r.path, i, len(r.blocks))
	}
	m := &r.blocks[i]
	if r.file != nil {
		return r.readBlockFile(i, m, dst, withAttrs)
	}
	err := decodeBlockOpt(r.data[m.offset:m.offset+m.length], m, dst, r.version, withAttrs)
	r.release(int(m.offset), int(m.length))
	if err != nil {
		return &CorruptError{File: r.path, Block: i, Reason: err.Error()}
	}
	return nil
}

// Verify decodes every block and returns the errors.Join of a
// *CorruptError per damaged block, or nil. In a version-3 segment it
// first checks and decodes the whole skip index (Open checks only its
// head; lookups check the groups they read), and a damaged or malformed
// one is a *CorruptError with Block -1, as is the damage Open found in
// a skip index's head (IndexDamage).
func (r *Reader) Verify() error {
	b := GetBlock()
	defer PutBlock(b)
	var errs []error
	if r.skipDamage != nil {
		errs = append(errs, r.skipDamage)
	}
	if r.grams != nil && !r.closed.Load() {
		// Open checked the skip index's head; the postings are
		// checksummed and decoded lazily, per group, so check them all.
		if err := r.grams.check(); err != nil {
			errs = append(errs, &CorruptError{File: r.path, Block: -1, Reason: err.Error()})
		}
	}
	if r.vgrams != nil && !r.closed.Load() {
		if err := r.vgrams.check(); err != nil {
			errs = append(errs, &CorruptError{File: r.path, Block: -1, Reason: "metadata values: " + err.Error()})
		}
	}
	if r.vfilters != nil && !r.closed.Load() {
		if err := r.vfilters.check(); err != nil {
			errs = append(errs, &CorruptError{File: r.path, Block: -1, Reason: "metadata values: " + err.Error()})
		}
	}
	for i := range r.blocks {
		if err := r.ReadBlock(i, b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// IndexDamage returns a *CorruptError (Block -1) for a skip index that
// Open found damaged (its head, which Open checks: the segment then has
// no skip index at all), else for the first damaged or malformed group
// of the version-3 skip index that a lookup has met, or nil. A group's
// checksum is checked when a lookup first decodes it, and a bad group
// makes MayContain answer "maybe" for every block (results stay exact,
// the search just scans more). The same holds for the metadata values'
// index (version 5) and a block's value filter (version 6), whose damage
// makes MayHaveValue answer "maybe" for that block. Verify checks every
// group and filter.
func (r *Reader) IndexDamage() error {
	if r.skipDamage != nil {
		return r.skipDamage
	}
	if r.grams == nil {
		return nil
	}
	if e := r.grams.damage.Load(); e != nil {
		return &CorruptError{File: r.path, Block: -1, Reason: e.Error()}
	}
	if r.vgrams != nil {
		if e := r.vgrams.damage.Load(); e != nil {
			return &CorruptError{File: r.path, Block: -1, Reason: "metadata values: " + e.Error()}
		}
	}
	if r.vfilters != nil {
		if e := r.vfilters.damage.Load(); e != nil {
			return &CorruptError{File: r.path, Block: -1, Reason: "metadata values: " + e.Error()}
		}
	}
	return nil
}

// Close unmaps the segment and closes its descriptor. Blocks already
// decoded stay valid: they never point into the mapping.
func (r *Reader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	ferr := r.closeFile()
	if !r.mapped {
		r.data = nil
		return ferr
	}
	r.forgetReleases()
	if err := unix.Munmap(r.data); err != nil {
		return fmt.Errorf("segment: munmap %s: %w", r.path, err)
	}
	r.data = nil
	return ferr
}

// decoder reads varints from b with sticky errors.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(reason string) {
	if d.err == nil {
		d.err = errors.New(reason)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad or truncated varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad or truncated varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}
