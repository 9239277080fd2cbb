package segment

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"

	"haystack/internal/attrs"
	"haystack/internal/dirfs"
)

// Entry is one log entry.
type Entry struct {
	Time   int64  // unix nanoseconds
	Stream uint32 // store-wide stream id
	Line   []byte // entry bytes; may contain any byte including '\n'
	Attrs  []byte // structured metadata (package attrs' encoding); empty for none
}

// cost is what e counts toward a block's size: its line, its metadata
// and one byte (the line's newline in the text). Counting the metadata
// bounds a block's attrs section as its data section is bounded.
func (e *Entry) cost() int { return len(e.Line) + len(e.Attrs) + 1 }

// Defaults and limits.
const (
	// DefaultBlockSize is the target raw bytes per block when
	// Options.BlockSize is 0. Measured (docs/BENCHMARKS.md, "Store and
	// search (issue 4)", 2026-11-30): on generated logs with template
	// messages, 256 KiB blocks store 3.5x (zstd fastest) to 3.8x (zstd
	// better), missing 4x; 1 MiB blocks with zstd's default level store
	// 4.1x with a smaller skip index share (6% against 11%), and scan
	// fastest of the settings that meet both 4x and ingest's 100 MB/s a
	// core. 256 KiB blocks prune rare needles finer (a third of the
	// bytes decoded for an incident burst).
	DefaultBlockSize = 1 << 20

	// MaxBlockSize is the largest Options.BlockSize accepted. It also
	// bounds what a reader allocates for a block's entries (at most
	// MaxBlockSize of them; see maxBlockEntries).
	MaxBlockSize = 4 << 20

	// MaxEntryBytes is the longest Entry.Line that Add accepts. Callers
	// that may see longer lines must split or truncate them.
	MaxEntryBytes = 64 << 20

	// MaxBlockRawBytes bounds a block's decoded data: a block holds either
	// entries adding up to at most MaxBlockSize bytes or one entry of at most
	// MaxEntryBytes. Readers reject larger sizes as corrupt.
	MaxBlockRawBytes = MaxBlockSize + MaxEntryBytes
)

// maxBlockEntries bounds entries per block: the writer counts every entry
// as at least one byte (its newline in the text), so a block never has more
// than MaxBlockSize entries. A reader rejects more.
const maxBlockEntries = MaxBlockSize

// maxMetaPerEntry bounds the meta section: per entry a length (<= 5 bytes
// as the uvarint of a uint32), a time delta (<= 10) and a stream index
// (<= 5), plus the time scale byte once.
const maxMetaPerEntry = 20

// maxAttrsRaw bounds a block's decoded attrs section (see the package
// doc): each entry's metadata is at most attrs.MaxBytes, with a length of
// at most 3 uvarint bytes; and a block of several entries holds at most
// MaxBlockSize bytes counting each entry's metadata and one byte per
// entry, so its metadata and their lengths (a length of L > 0 bytes
// takes at most L bytes, and 1 for L = 0) take at most twice that. The
// writer checks it before writing; a reader rejects a larger size.
func maxAttrsRaw(entries uint64) uint64 {
	return min(entries*(attrs.MaxBytes+3), 2*MaxBlockSize)
}

// maxTimeScale is the largest time scale exponent: 10^18 < 2^63.
const maxTimeScale = 18

// pow10[k] is 10^k for the time scales.
var pow10 = func() (p [maxTimeScale + 1]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// timeScale returns the largest k <= maxTimeScale such that 10^k divides
// every difference between consecutive times (as wrapping int64
// differences). A block of one entry has scale 0.
func timeScale(times []int64) int {
	if len(times) < 2 {
		return 0
	}
	k := maxTimeScale
	for i := 1; i < len(times) && k > 0; i++ {
		d := int64(uint64(times[i]) - uint64(times[i-1]))
		for k > 0 && d%pow10[k] != 0 {
			k--
		}
	}
	return k
}

// Options tune a Writer. The zero value selects the measured defaults.
type Options struct {
	// BlockSize is the target raw bytes per block, counting each entry as
	// its length plus its metadata's length plus one (its newline in the
	// text). 0 means DefaultBlockSize. An entry longer than BlockSize gets
	// a block of its own.
	BlockSize int

	// Codec compresses the blocks. CodecDefault (0), chosen by
	// measurement, stores each block with LZ4 when LZ4 shrinks its data at
	// least AutoMinRatio times (fast to decode), and with zstd otherwise
	// (LZ4 would miss the storage target); see AutoMinRatio.
	Codec Codec

	// Level is the codec's effort; it changes speed and size, never the
	// format. zstd: 1 fastest, 2 default (also 0, the measured default),
	// 3 better, 4 best. LZ4: 0 fast, 1..9 the high-compression (HC)
	// compressor with search depth 2^(8+Level).
	Level int

	// Version is the format version to write: 0 for the current one (7),
	// or 6 (no escape grams), 5 (no value filters) or 4 (whose skip index
	// leaves the metadata values out), which builds before version 7, 6
	// or 5 can still read (and which tests of readers use as older
	// segments). Other values are refused.
	Version int
}

// Info summarises a segment.
type Info struct {
	Entries          int64 // number of entries
	Blocks           int   // number of blocks
	MinTime, MaxTime int64 // time range of the entries (0, 0 when empty)
	RawBytes         int64 // sum of the entries' lengths
	FileBytes        int64 // size of the segment file
	SkipBytes        int64 // size of the skip index in the file (0 in version 1)
}

// Header and footer sizes and the magic at both ends of a file.
const (
	headerSize    = 16
	footerSize    = 72
	formatVersion = 7 // what the Writer writes: escape grams in the lines' index
	formatV6      = 6 // value filters of metadata values; still read and written
	formatV5      = 5 // a skip index of metadata values' grams too; still read and written
	formatV4      = 4 // blocks with an attrs section, index of lines only; still read
	formatV3      = 3 // exact postings skip index, no attrs section; still read
	formatV2      = 2 // bloom-filter skip index; still read
	formatV1      = 1 // no skip index; still read
	magic         = "HAYSTSEG"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Writer writes one segment. It is not safe for concurrent use.
type Writer struct {
	final, tmp string     // names inside dir
	dir        *dirfs.Dir // where the segment is written; errors name its files in full
	f          *os.File
	bw         *bufio.Writer
	blockSize  int
	comp       *compressor
	off        int64 // bytes written so far
	info       Info
	index      []byte      // encoded block index entries
	version    uint32      // formatVersion, formatV6, formatV5 or formatV4; formatV2 or formatV3 in tests
	skip       skipBuilder // version 2
	grams      gramBuilder // versions 3 to 7: the lines' grams (and from 7 their escapes')
	vgrams     gramBuilder // versions 5 to 7: the metadata values' grams
	vfTable    []byte      // version 6: the value filters' table (u32 end, u32 CRC a block)
	vfArea     []byte      // version 6: the value filters
	vfValues   bool        // version 6: some block has a metadata value
	err        error       // sticky I/O error
	done       bool        // committed or aborted

	// The block being filled.
	data    []byte
	lens    []uint32
	times   []int64
	streams []uint32
	attrs   []byte   // the entries' metadata concatenated
	alens   []uint32 // each entry's metadata length
	fill    int      // sum of Entry.cost over the block's entries

	// Scratch for flushBlock.
	sorted                []uint32
	metaBuf, attrBuf, blk []byte
	valBuf                []byte   // version 5: the block's metadata values, for the grams
	vlens                 []uint32 // their lengths
	vhashes               []uint64 // version 6: the block's values' hashes
}

// Create starts a segment that Commit will publish at finalPath. It writes
// to "<finalPath>.tmp" in the same directory, truncating a stale temp file
// left by a crash.
func Create(finalPath string, opts Options) (*Writer, error) {
	return CreateIn(byPath, finalPath, opts)
}

// byPath takes names as paths (dirfs.At("")): Create and Open are CreateIn
// and OpenIn with it. It is never changed.
var byPath = dirfs.At("")

// CreateIn is Create with the segment at name inside dir: the temp file
// is created, renamed and removed, and the directory fsynced, through
// dir, so that with a dir from dirfs.Open they stay in that directory even
// if it is renamed or replaced meanwhile. Errors name the files by their
// full path.
func CreateIn(dir *dirfs.Dir, name string, opts Options) (*Writer, error) {
	switch opts.Version {
	case 0, formatVersion:
		return createIn(dir, name, opts, formatVersion)
	case formatV6, formatV5, formatV4:
		return createIn(dir, name, opts, uint32(opts.Version))
	}
	return nil, fmt.Errorf("segment: cannot write format version %d (only %d to %d)", opts.Version, formatV4, formatVersion)
}

// create is Create writing format version (formatVersion, or formatV2 to
// formatV4 so that tests can still produce the older layouts to read).
func create(finalPath string, opts Options, version uint32) (*Writer, error) {
	return createIn(byPath, finalPath, opts, version)
}

// createIn is create inside dir (see CreateIn).
func createIn(dir *dirfs.Dir, name string, opts Options, version uint32) (*Writer, error) {
	bs := opts.BlockSize
	if bs == 0 {
		bs = DefaultBlockSize
	}
	if bs < 1 || bs > MaxBlockSize {
		return nil, fmt.Errorf("segment: block size %d out of range 1..%d", opts.BlockSize, MaxBlockSize)
	}
	comp, err := newCompressor(opts.Codec, opts.Level)
	if err != nil {
		return nil, fmt.Errorf("segment: %w", err)
	}
	tmp := name + ".tmp"
	f, err := dir.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("segment: create: %w", err)
	}
	w := &Writer{
		final: name, tmp: tmp, dir: dir, f: f,
		bw:        bufio.NewWriterSize(f, 256<<10),
		blockSize: bs,
		comp:      comp,
		version:   version,
	}
	w.grams.escapes = version >= formatVersion
	var h [headerSize]byte
	copy(h[:], magic)
	binary.LittleEndian.PutUint32(h[8:], version)
	w.write(h[:])
	if w.err != nil {
		err := w.err
		w.Abort()
		return nil, err
	}
	return w, nil
}

func (w *Writer) write(p []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.bw.Write(p); err != nil {
		// The file's error names it in full ("write DIR/x.seg.tmp: no
		// space left on device").
		w.err = fmt.Errorf("segment: %w", err)
		return
	}
	w.off += int64(len(p))
}

var errFinished = errors.New("segment: writer already committed or aborted")

// BlockHasRoom reports whether a non-empty block of fill bytes (each
// entry counted as its line's length plus its metadata's length plus one)
// takes one more entry of lineLen bytes (its line's length plus its
// metadata's length) under blockSize; otherwise that entry starts the
// next block. It is the writer's rule, shared by whoever cuts blocks for
// AddBlock (the store's head) so that both cut alike.
func BlockHasRoom(fill, lineLen, blockSize int) bool {
	return fill+lineLen+1 <= blockSize
}

// Add appends e to the segment. It copies e.Line and e.Attrs, so the
// caller may reuse them. Lines longer than MaxEntryBytes are rejected, and
// so is metadata that attrs.Validate rejects.
func (w *Writer) Add(e Entry) error {
	if w.done {
		return errFinished
	}
	if w.err != nil {
		return w.err
	}
	if len(e.Line) > MaxEntryBytes {
		return fmt.Errorf("segment: entry of %d bytes exceeds the %d-byte limit", len(e.Line), MaxEntryBytes)
	}
	if err := w.checkAttrs(e.Attrs); err != nil {
		return err
	}
	if len(w.lens) > 0 && !BlockHasRoom(w.fill, len(e.Line)+len(e.Attrs), w.blockSize) {
		w.flushBlock()
	}
	w.data = append(w.data, e.Line...)
	w.lens = append(w.lens, uint32(len(e.Line)))
	w.times = append(w.times, e.Time)
	w.streams = append(w.streams, e.Stream)
	w.attrs = append(w.attrs, e.Attrs...)
	w.alens = append(w.alens, uint32(len(e.Attrs)))
	w.fill += e.cost()
	if w.fill >= w.blockSize {
		w.flushBlock()
	}
	return w.err
}

// checkAttrs returns an error for metadata the writer must not store: an
// invalid encoding, or any metadata in a format older than version 4.
func (w *Writer) checkAttrs(a []byte) error {
	if len(a) == 0 {
		return nil
	}
	if w.version < formatV4 {
		return fmt.Errorf("segment: format version %d cannot store structured metadata", w.version)
	}
	if err := attrs.Validate(a); err != nil {
		return fmt.Errorf("segment: %w", err)
	}
	return nil
}

// AddBlock appends the entries of b, which it does not retain, as a
// block of their own: it ends the pending block first, and the next
// entry starts a new block. When b's entries fit in one block (as Add
// would cut them), that block is written from b's buffers without
// copying; otherwise they are added one by one and cut as Add cuts them.
// A caller whose blocks end where Add would end them (the store's head
// cuts its blocks by the same rule) gets the same segment as from Add.
func (w *Writer) AddBlock(b *Block) error {
	if w.done {
		return errFinished
	}
	w.flushBlock()
	n := len(b.Times)
	if n == 0 || w.err != nil {
		return w.err
	}
	if !w.isOneBlock(b) {
		for k := range n {
			if err := w.Add(b.Entry(k)); err != nil {
				return err
			}
		}
		w.flushBlock()
		return w.err
	}
	lens := w.lens[:0]
	for k := range n {
		lens = append(lens, b.Offsets[k+1]-b.Offsets[k])
	}
	alens := w.alens[:0]
	var ad []byte
	if len(b.AttrOffsets) > 0 {
		for k := range n {
			alens = append(alens, b.AttrOffsets[k+1]-b.AttrOffsets[k])
		}
		ad = b.AttrData[b.AttrOffsets[0]:b.AttrOffsets[n]]
	} else {
		for range n {
			alens = append(alens, 0)
		}
	}
	// The pending block is b's for the time of flushBlock; the writer's
	// own buffers come back afterwards.
	data, times, streams, ab := w.data, w.times, w.streams, w.attrs
	w.data, w.lens, w.times, w.streams, w.attrs, w.alens = b.Data[b.Offsets[0]:b.Offsets[n]], lens, b.Times, b.Streams, ad, alens
	w.flushBlock()
	w.data, w.times, w.streams, w.attrs = data[:0], times[:0], streams[:0], ab[:0]
	return w.err
}

// isOneBlock reports whether Add, starting with no pending block, would
// put all of b's entries in one block (the last one may fill it), and
// whether b is well formed, its metadata included: otherwise Add, entry
// by entry, checks each entry (and panics on offsets out of range, as
// Block.Entry does).
func (w *Writer) isOneBlock(b *Block) bool {
	fill := 0
	n := len(b.Times)
	if len(b.Streams) != n || len(b.Offsets) != n+1 {
		return false
	}
	hasAttrs := len(b.AttrOffsets) > 0
	if hasAttrs && (len(b.AttrOffsets) != n+1 || int(b.AttrOffsets[n]) > len(b.AttrData) || b.AttrOffsets[0] > b.AttrOffsets[n]) {
		return false
	}
	for k := range n {
		l := int(b.Offsets[k+1]) - int(b.Offsets[k])
		if l < 0 || l > MaxEntryBytes {
			return false
		}
		if hasAttrs {
			a := int(b.AttrOffsets[k+1]) - int(b.AttrOffsets[k])
			if a < 0 || int(b.AttrOffsets[k+1]) > len(b.AttrData) || w.checkAttrs(b.AttrData[b.AttrOffsets[k]:b.AttrOffsets[k+1]]) != nil {
				return false
			}
			l += a
		}
		if k > 0 && !BlockHasRoom(fill, l, w.blockSize) {
			return false
		}
		fill += l + 1
		if fill >= w.blockSize && k < n-1 {
			return false
		}
	}
	return true
}

// flushBlock encodes, compresses and writes the pending block and records
// it in the index.
func (w *Writer) flushBlock() {
	n := len(w.lens)
	if n == 0 || w.err != nil {
		return
	}
	// Block stream list (the index's) first: the meta section refers to it.
	st := append(w.sorted[:0], w.streams...)
	slices.Sort(st)
	st = slices.Compact(st)
	w.sorted = st

	// Meta section.
	m := w.metaBuf[:0]
	for _, l := range w.lens {
		m = binary.AppendUvarint(m, uint64(l))
	}
	minT, maxT := w.times[0], w.times[0]
	for _, t := range w.times {
		minT = min(minT, t)
		maxT = max(maxT, t)
	}
	// Log times are often whole milliseconds or seconds: dividing the
	// deltas by the largest power of ten that divides them all shrinks
	// them from 5 varint bytes to 2 for millisecond logs.
	scale := timeScale(w.times)
	m = append(m, byte(scale))
	m = binary.AppendVarint(m, w.times[0])
	for i := 1; i < n; i++ {
		m = binary.AppendVarint(m, int64(uint64(w.times[i])-uint64(w.times[i-1]))/pow10[scale])
	}
	if len(st) > 1 {
		for _, s := range w.streams {
			k, _ := slices.BinarySearch(st, s)
			m = binary.AppendUvarint(m, uint64(k))
		}
	}
	w.metaBuf = m

	// Compress each section on its own and store it raw when the codec
	// does not shrink it: a meta section of random nanosecond deltas may
	// not shrink while the data shrinks several times. The meta section
	// follows the data section's codec.
	out, dataCodec, err := w.comp.compressBlock(w.blk[:0], w.data)
	if err != nil {
		w.err = fmt.Errorf("segment: %w", err)
		return
	}
	split := len(out)
	metaCodec := dataCodec
	if dataCodec == CodecNone {
		metaCodec = w.comp.codec
		if metaCodec == CodecDefault {
			metaCodec = CodecZstd
		}
	}
	out, metaCodec, err = w.comp.compressAs(out, m, metaCodec)
	if err != nil {
		w.err = fmt.Errorf("segment: %w", err)
		return
	}
	// Attrs section (version 4): empty when no entry has metadata, so a
	// store without metadata pays only its three header bytes a block.
	var a []byte
	attrsCodec := CodecNone
	split2 := len(out)
	if len(w.attrs) > 0 {
		a = w.attrBuf[:0]
		for _, l := range w.alens {
			a = binary.AppendUvarint(a, uint64(l))
		}
		a = append(a, w.attrs...)
		w.attrBuf = a
		if uint64(len(a)) > maxAttrsRaw(uint64(n)) {
			// Unreachable: Add and AddBlock bound each entry's metadata
			// and count it toward the block size.
			w.err = fmt.Errorf("segment: attrs section of %d bytes for %d entries exceeds the reader's limit", len(a), n)
			return
		}
		// Compressed on its own with the writer's codec (the default's
		// per-section choice): random trace ids shrink only with zstd's
		// entropy coding, repeated names and values with LZ4 too.
		out, attrsCodec, err = w.comp.compressBlock(out, a)
		if err != nil {
			w.err = fmt.Errorf("segment: %w", err)
			return
		}
	}
	w.blk = out
	dataC, metaC, attrsC := w.data, m, a
	if dataCodec != CodecNone {
		dataC = out[:split]
	}
	if metaCodec != CodecNone {
		metaC = out[split:split2]
	}
	if attrsCodec != CodecNone {
		attrsC = out[split2:]
	}

	var hdr [3 + 7*binary.MaxVarintLen64]byte
	h := append(hdr[:0], byte(dataCodec), byte(metaCodec))
	if w.version >= formatV4 {
		h = append(h, byte(attrsCodec))
	}
	h = binary.AppendUvarint(h, uint64(n))
	h = binary.AppendUvarint(h, uint64(len(w.data)))
	h = binary.AppendUvarint(h, uint64(len(dataC)))
	h = binary.AppendUvarint(h, uint64(len(m)))
	h = binary.AppendUvarint(h, uint64(len(metaC)))
	if w.version >= formatV4 {
		h = binary.AppendUvarint(h, uint64(len(a)))
		h = binary.AppendUvarint(h, uint64(len(attrsC)))
	}
	crc := crc32.Update(0, castagnoli, h)
	crc = crc32.Update(crc, castagnoli, dataC)
	crc = crc32.Update(crc, castagnoli, metaC)
	crc = crc32.Update(crc, castagnoli, attrsC)
	var c [4]byte
	binary.LittleEndian.PutUint32(c[:], crc)
	start := w.off
	w.write(h)
	w.write(dataC)
	w.write(metaC)
	w.write(attrsC)
	w.write(c[:])
	length := w.off - start

	if w.version == formatV2 {
		w.skip.add(w.data, w.lens)
	} else {
		w.grams.add(w.data, w.lens, gramCandLimit(len(w.data)))
	}
	if w.version >= formatV5 {
		// Version 5: the metadata values' grams, in an index of their
		// own (each value on its own: a gram never spans two values), so
		// that a label filter needing a value can skip the block
		// (Reader.MayContainValue) while line filters keep an index of
		// lines alone. Every block is added, with or without values.
		vals, vlens, hs := w.valBuf[:0], w.vlens[:0], w.vhashes[:0]
		each := func(_, value []byte) bool {
			if w.version >= formatV6 {
				hs = append(hs, valueHash(value))
			}
			if len(value) >= SkipGram {
				vals = append(vals, value...)
				vlens = append(vlens, uint32(len(value)))
			}
			return true
		}
		off := 0
		for _, l := range w.alens {
			attrs.Each(w.attrs[off:off+int(l)], each)
			off += int(l)
		}
		w.valBuf, w.vlens = vals, vlens
		if w.version >= formatV6 {
			// Version 6: the block's filter of whole values.
			start := len(w.vfArea)
			w.vfArea, w.vhashes = appendValueFilter(w.vfArea, hs, length)
			w.vfValues = w.vfValues || len(hs) > 0
			if uint64(len(w.vfArea)) > math.MaxUint32 {
				w.vfArea = w.vfArea[:start] // the table's offsets are u32: no filter
			}
			w.vfTable = binary.LittleEndian.AppendUint32(w.vfTable, uint32(len(w.vfArea)))
			w.vfTable = binary.LittleEndian.AppendUint32(w.vfTable, crc32.Checksum(w.vfArea[start:], castagnoli))
		}
		if w.vgrams.dropped {
			w.vgrams.addUnindexed()
		} else {
			w.vgrams.add(vals, vlens, valueCandLimit(len(vals)))
			// The values' budget (see maxValueEntries): the index is
			// given up rather than left with some blocks unindexed,
			// which every posting would have to list.
			if len(w.vgrams.unindexed) > 0 || w.vgrams.entries > maxValueEntries ||
				int64(w.vgrams.entries)*valueEntryBytes > valueIndexBudget(w.off) {
				w.vgrams.dropIndex()
			}
		}
	}

	// Index entry.
	x := w.index
	x = binary.AppendUvarint(x, uint64(length))
	x = binary.AppendVarint(x, minT)
	x = binary.AppendUvarint(x, uint64(maxT)-uint64(minT))
	x = binary.AppendUvarint(x, uint64(n))
	x = binary.AppendUvarint(x, uint64(len(w.data)))
	x = binary.AppendUvarint(x, uint64(len(st)))
	for i, s := range st {
		if i == 0 {
			x = binary.AppendUvarint(x, uint64(s))
		} else {
			x = binary.AppendUvarint(x, uint64(s-st[i-1]))
		}
	}
	w.index = x

	if w.info.Blocks == 0 {
		w.info.MinTime, w.info.MaxTime = minT, maxT
	} else {
		w.info.MinTime = min(w.info.MinTime, minT)
		w.info.MaxTime = max(w.info.MaxTime, maxT)
	}
	w.info.Blocks++
	w.info.Entries += int64(n)
	w.info.RawBytes += int64(len(w.data))

	w.data, w.lens, w.times, w.streams, w.fill = w.data[:0], w.lens[:0], w.times[:0], w.streams[:0], 0
	w.attrs, w.alens = w.attrs[:0], w.alens[:0]
	// Do not pin the buffer of a huge entry for the rest of the segment.
	if cap(w.data) > 2*w.blockSize+(1<<20) {
		w.data = nil
		w.blk = nil
	}
}

// Commit writes the pending block, the block index and the footer, fsyncs
// the file, renames it to its final path and fsyncs the directory. On error
// the temp file is removed (unless the rename already happened) and the
// segment does not exist.
func (w *Writer) Commit() (Info, error) {
	if w.done {
		return Info{}, errFinished
	}
	w.flushBlock()
	indexOff := w.off
	idx := binary.AppendUvarint(nil, uint64(w.info.Blocks))
	idx = append(idx, w.index...)
	w.write(idx)
	if uint64(w.info.Blocks) > math.MaxUint32 {
		w.err = errors.New("segment: too many blocks")
	}
	skipOff := w.off
	var skip []byte
	var covered int // the leading bytes of skip that skipCRC covers
	if w.version == formatV2 {
		skip = binary.AppendUvarint(nil, uint64(w.skip.n))
		skip = append(skip, w.skip.out...)
		covered = len(skip)
	} else {
		// Version 3: the head; each group of postings has its own CRC.
		skip, covered = w.grams.encode()
	}
	skipCRC := crc32.Checksum(skip[:covered], castagnoli)
	if w.version >= formatV5 {
		// Version 5: the lines' index, framed by its length, then the
		// values' index; skipCRC covers the length and both heads.
		// Version 6 frames the values' index too and adds the value
		// filters, whose count and table skipCRC covers as well.
		lines := skip
		vals, vcovered := w.vgrams.encode()
		if int64(len(vals)) > valueIndexBudget(skipOff) {
			w.vgrams.dropIndex()
			vals, vcovered = w.vgrams.encode()
		}
		skip = binary.AppendUvarint(nil, uint64(len(lines)))
		skipCRC = crc32.Checksum(skip, castagnoli)
		skipCRC = crc32.Update(skipCRC, castagnoli, lines[:covered])
		skip = append(skip, lines...)
		if w.version >= formatV6 {
			n := len(skip)
			skip = binary.AppendUvarint(skip, uint64(len(vals)))
			skipCRC = crc32.Update(skipCRC, castagnoli, skip[n:])
		}
		skipCRC = crc32.Update(skipCRC, castagnoli, vals[:vcovered])
		skip = append(skip, vals...)
		if w.version >= formatV6 && w.vfValues {
			// Without any metadata value the section stays empty (it
			// then says that no block holds a value).
			n := len(skip)
			skip = binary.AppendUvarint(skip, uint64(w.info.Blocks))
			skip = append(skip, w.vfTable...)
			skipCRC = crc32.Update(skipCRC, castagnoli, skip[n:])
			skip = append(skip, w.vfArea...)
		}
		w.vfTable, w.vfArea = nil, nil
	}
	w.write(skip)
	skipLen := w.off - skipOff
	w.info.SkipBytes = skipLen
	w.skip = skipBuilder{}
	w.grams.release()
	w.vgrams.release()
	size := w.off + footerSize
	var ft [footerSize]byte
	binary.LittleEndian.PutUint64(ft[0:], uint64(indexOff))
	binary.LittleEndian.PutUint64(ft[8:], uint64(len(idx)))
	binary.LittleEndian.PutUint32(ft[16:], crc32.Checksum(idx, castagnoli))
	binary.LittleEndian.PutUint32(ft[20:], uint32(w.info.Blocks))
	binary.LittleEndian.PutUint64(ft[24:], uint64(skipOff))
	binary.LittleEndian.PutUint64(ft[32:], uint64(skipLen))
	binary.LittleEndian.PutUint32(ft[40:], skipCRC)
	binary.LittleEndian.PutUint32(ft[44:], w.version)
	binary.LittleEndian.PutUint64(ft[48:], uint64(size))
	// 56: flags 0.
	binary.LittleEndian.PutUint32(ft[60:], crc32.Checksum(ft[:60], castagnoli))
	copy(ft[64:], magic)
	w.write(ft[:])
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.err = fmt.Errorf("segment: %w", err) // names the file, as in write
		}
	}
	if w.err == nil {
		if err := w.f.Sync(); err != nil {
			w.err = fmt.Errorf("segment: %w", err) // "sync DIR/x.seg.tmp: ..."
		}
	}
	if w.err != nil {
		err := w.err
		w.Abort()
		return Info{}, err
	}
	w.done = true
	if err := w.f.Close(); err != nil {
		w.dir.Remove(w.tmp)
		return Info{}, fmt.Errorf("segment: close %s: %w", w.dir.Path(w.tmp), err)
	}
	if err := w.dir.Rename(w.tmp, w.final); err != nil {
		w.dir.Remove(w.tmp)
		return Info{}, fmt.Errorf("segment: %w", err)
	}
	if err := w.dir.SyncDir(filepath.Dir(w.final)); err != nil {
		return Info{}, fmt.Errorf("segment: commit %s: %w", w.dir.Path(w.final), err)
	}
	w.info.FileBytes = size
	return w.info, nil
}

// Abort discards the segment and removes the temp file. It is a no-op after
// Commit or a previous Abort.
func (w *Writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	cerr := w.f.Close()
	rerr := w.dir.Remove(w.tmp)
	if rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		return fmt.Errorf("segment: abort: %w", rerr)
	}
	if cerr != nil && !errors.Is(cerr, os.ErrClosed) {
		return fmt.Errorf("segment: abort: %w", cerr)
	}
	return nil
}
