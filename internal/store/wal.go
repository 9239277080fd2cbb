package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"

	"haystack/internal/attrs"
)

// WAL file and record format.
//
// A WAL file starts with a header and holds records. The header (versions
// 2 and 3) is 24 bytes:
//
//	magic "HAYWAL3\n" | prev (u64) | crc (u32) | zero (u32)
//
// prev is the length file seq-1 had when this one was started (0 when it
// did not exist), crc the CRC-32C of the magic and prev. Files are made in
// order, each after its predecessor was fsynced whole, so prev tells a
// reader whether that predecessor is still whole: a cut exactly at a
// record boundary, or a deleted file, would otherwise read as a clean end
// (checkWALLink). Then the records:
//
//	+-----------+-----------+-----------------+
//	| len (u32) | crc (u32) | payload (len B) |
//	+-----------+-----------+-----------------+
//
// Both integers are little-endian. crc is CRC-32C (Castagnoli) over the four
// length bytes followed by the payload, so a flipped length bit is caught as
// surely as a flipped payload bit. A record with len 0 or len > maxRecord is
// invalid: zero-filled blocks left by a crash never parse as records.
//
// The payload is one batch, the unit of atomicity of ingest:
//
//	kind            byte = 1, or 2 (entries with structured metadata)
//	nStreams        uvarint, then per stream: id uvarint, len uvarint, labels
//	nSources        uvarint, then per source: len uvarint, key, offset uvarint, check uvarint
//	nEntries        uvarint, then per entry:  dtime varint (from the previous
//	                entry's time, the first from 0), stream uvarint, len uvarint, line
//	                and, in kind 2 only: alen uvarint, attrs (alen bytes)
//
// Streams are the stream definitions first used by this batch; sources are
// the input positions reached once this batch is durable (see Source).
// attrs is the entry's structured metadata in package attrs' encoding
// (alen 0: none), checked with attrs.Validate when read: a record whose
// metadata does not validate is a bad record, handled as any other
// (damage, or a crash's torn tail when it is the last thing written).
// A batch none of whose entries has metadata is written as kind 1, so a
// store without metadata pays nothing for it.
//
// # Versions
//
// Version 1 files (the 8-byte magic "HAYWAL1\n" alone, no prev) and
// version 2 files ("HAYWAL2\n", the header above) hold kind 1 records
// only; both are still read. Version 3 added record kind 2, and every
// new file is version 3, whether or not its records carry metadata. A
// binary from before version 3 reads a version 3 file's magic as
// damage, not as a crash's tail, when a record follows the header, so
// it refuses to open the store ("bad wal magic ... damaged", and hay
// verify reports the file), rather than drop the entries and their
// metadata silently; its hay verify --repair would move the file to
// lost+found, where it is kept whole. (A version 3 file of a header
// alone, as the last file, it starts again as its own: there is nothing
// in it to lose.) A kind 2 record in a version 1 or 2 file is a bad
// record: no writer puts one there.

const (
	walMagic    = "HAYWAL3\n" // what new files get
	walMagicV2  = "HAYWAL2\n"
	walMagicV1  = "HAYWAL1\n"
	walHeader   = len(walMagic) + 16
	recHeader   = 8
	maxRecord   = 256 << 20
	walFileMode = 0o644

	kindBatch      = 1 // a batch without structured metadata
	kindBatchAttrs = 2 // a batch whose entries carry their metadata (version 3)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errTorn reports a record that is incomplete or fails its checksum: the
// end of the valid prefix of a WAL.
var errTorn = errors.New("torn or corrupt wal record")

// StreamDef binds a stream id to its canonical label string.
type StreamDef struct {
	ID     uint32 `json:"id"`
	Labels string `json:"labels"`
}

// Source is how far one input has been durably ingested: Offset bytes of
// the input named Key, with Check a CRC-32C of its first min(Offset,
// CheckLen) bytes followed by the CheckLen bytes before Offset (those past
// the first CheckLen; hay ingest's sourceCheck; sources recorded by older
// versions cover the first bytes only). hay ingest records a file under
// two keys, its identity "inode:DEV:INO" (decimal st_dev and st_ino,
// symlinks followed) and its absolute path with symlinks resolved; older
// versions recorded the absolute path as given only. A re-run of ingest
// on the same file (by identity or path) resumes at Offset when the file
// is at least Offset bytes long and those bytes still match Check;
// otherwise the file is new content and is ingested from the start. The
// store keeps Key and Check as given.
type Source struct {
	Key    string `json:"key"`
	Offset int64  `json:"offset"`
	Check  uint32 `json:"check"`
}

// CheckLen is how many leading bytes, and how many before the offset, of
// an input Source.Check covers.
const CheckLen = 1024

// Entry is one log entry: time in Unix nanoseconds, stream id, line bytes.
type Entry struct {
	Time   int64
	Stream uint32
	Line   []byte
	Attrs  []byte // structured metadata, package attrs' encoding; empty for none
}

// Batch is what one WAL record holds. Entries' Line and Attrs slices may
// alias the decoded payload.
type Batch struct {
	Streams []StreamDef
	Sources []Source
	Entries []Entry
}

// appendBatch appends the payload encoding of b to dst: kind 2 when an
// entry has metadata, else kind 1.
func appendBatch(dst []byte, b *Batch) []byte {
	// Kind 1 first, started over as kind 2 at the first entry with
	// metadata: a batch without any then pays one length test an entry,
	// not a scan of the batch before encoding it (+19% on encoding).
	start := len(dst)
	if out, ok := appendBatchKind(dst, b, kindBatch); ok {
		return out
	}
	out, _ := appendBatchKind(dst[:start], b, kindBatchAttrs)
	return out
}

// appendBatchKind appends b as a record of kind (kindBatch or
// kindBatchAttrs); false when kind is kindBatch and an entry has
// metadata, which kind 1 cannot hold.
func appendBatchKind(dst []byte, b *Batch, kind byte) ([]byte, bool) {
	dst = append(dst, kind)
	dst = binary.AppendUvarint(dst, uint64(len(b.Streams)))
	for _, s := range b.Streams {
		dst = binary.AppendUvarint(dst, uint64(s.ID))
		dst = binary.AppendUvarint(dst, uint64(len(s.Labels)))
		dst = append(dst, s.Labels...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Sources)))
	for _, s := range b.Sources {
		dst = binary.AppendUvarint(dst, uint64(len(s.Key)))
		dst = append(dst, s.Key...)
		dst = binary.AppendUvarint(dst, uint64(s.Offset))
		dst = binary.AppendUvarint(dst, uint64(s.Check))
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Entries)))
	var prev int64
	if kind == kindBatch {
		// A loop of its own: with the kind 2 branch in it, encoding a
		// batch without metadata took 8-15% longer (3.7% now).
		for _, e := range b.Entries {
			if len(e.Attrs) > 0 {
				return dst, false
			}
			dst = binary.AppendVarint(dst, e.Time-prev)
			prev = e.Time
			dst = binary.AppendUvarint(dst, uint64(e.Stream))
			dst = binary.AppendUvarint(dst, uint64(len(e.Line)))
			dst = append(dst, e.Line...)
		}
		return dst, true
	}
	for _, e := range b.Entries {
		dst = binary.AppendVarint(dst, e.Time-prev)
		prev = e.Time
		dst = binary.AppendUvarint(dst, uint64(e.Stream))
		dst = binary.AppendUvarint(dst, uint64(len(e.Line)))
		dst = append(dst, e.Line...)
		dst = binary.AppendUvarint(dst, uint64(len(e.Attrs)))
		dst = append(dst, e.Attrs...)
	}
	return dst, true
}

// payloadReader decodes a payload; the first error sticks.
type payloadReader struct {
	p   []byte
	err error
}

func (r *payloadReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.p)
	if n <= 0 {
		r.err = errors.New("bad uvarint")
		return 0
	}
	r.p = r.p[n:]
	return v
}

func (r *payloadReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.p)
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.p = r.p[n:]
	return v
}

func (r *payloadReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.p)) {
		r.err = errors.New("length past end of record")
		return nil
	}
	b := r.p[:n:n]
	r.p = r.p[n:]
	return b
}

// count reads an element count and rejects one that cannot fit in the rest
// of the payload (each element takes at least minSize bytes), so a forged
// count never makes decode allocate more than the record's size.
func (r *payloadReader) count(minSize int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.p)/minSize) {
		r.err = errors.New("count past end of record")
		return 0
	}
	return int(n)
}

// decodeBatch decodes a payload of either kind. Line, attrs and label
// bytes alias p. Each entry's metadata is validated.
func decodeBatch(p []byte) (*Batch, error) {
	if len(p) == 0 || p[0] != kindBatch && p[0] != kindBatchAttrs {
		return nil, errors.New("unknown record kind")
	}
	withAttrs := p[0] == kindBatchAttrs
	r := payloadReader{p: p[1:]}
	b := new(Batch)
	if n := r.count(3); n > 0 {
		b.Streams = make([]StreamDef, n)
		for i := range b.Streams {
			id := r.uvarint()
			if id > 1<<32-1 {
				r.err = errors.New("stream id out of range")
			}
			b.Streams[i] = StreamDef{ID: uint32(id), Labels: string(r.bytes())}
		}
	}
	if n := r.count(3); n > 0 {
		b.Sources = make([]Source, n)
		for i := range b.Sources {
			key := string(r.bytes())
			off := r.uvarint()
			chk := r.uvarint()
			if off > 1<<63-1 || chk > 1<<32-1 {
				r.err = errors.New("source field out of range")
			}
			b.Sources[i] = Source{Key: key, Offset: int64(off), Check: uint32(chk)}
		}
	}
	if n := r.count(3); n > 0 {
		b.Entries = make([]Entry, n)
		var t int64
		for i := range b.Entries {
			t += r.varint()
			s := r.uvarint()
			if s > 1<<32-1 {
				r.err = errors.New("stream id out of range")
			}
			b.Entries[i] = Entry{Time: t, Stream: uint32(s), Line: r.bytes()}
			if withAttrs {
				a := r.bytes()
				if len(a) > 0 && r.err == nil {
					if err := attrs.Validate(a); err != nil {
						r.err = fmt.Errorf("entry %d: %w", i, err)
					}
					b.Entries[i].Attrs = a
				}
			}
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.p) != 0 {
		return nil, errors.New("trailing bytes in record")
	}
	return b, nil
}

// appendRecord frames payload as a WAL record appended to dst.
func appendRecord(dst, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recHeader)...)
	dst = append(dst, payload...)
	sealRecord(dst[start:])
	return dst
}

// sealRecord fills in the header of rec, which is recHeader placeholder
// bytes followed by the payload.
func sealRecord(rec []byte) {
	payload := rec[recHeader:]
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(payload)))
	crc := crc32.Update(0, castagnoli, rec[0:4])
	crc = crc32.Update(crc, castagnoli, payload)
	binary.LittleEndian.PutUint32(rec[4:8], crc)
}

// WALReader reads the records of one WAL file held in memory. It stops at
// the first record that is incomplete or fails its checksum: everything
// before it is the valid prefix, whose length is Valid.
type WALReader struct {
	buf   []byte
	off   int
	err   error
	Valid int64 // bytes of the file that are a whole, checked prefix
	// Short says the file ends inside its header: a crash right after
	// creating it (only possible for the last file). It reads as empty.
	Short bool
	// Prev is the length the previous WAL file had when this one was
	// started, from the header; -1 for a version 1 file, which has none.
	Prev int64
	// Version is the file's format version (1, 2 or 3) once its header
	// was read; 0 when it was not.
	Version int
}

// NewWALReader returns a reader over the contents of a WAL file. A file
// that is a prefix of a header reads as empty with Short set and Valid 0;
// a file with a wrong magic or header checksum is an error from Next.
func NewWALReader(file []byte) *WALReader {
	r := &WALReader{buf: file, Prev: -1}
	magic := string(file[:min(len(file), len(walMagic))])
	isPrefix := func(m string) bool { return magic == m[:len(magic)] }
	switch {
	case (isPrefix(walMagic) || isPrefix(walMagicV2)) && len(file) < walHeader:
		r.Short, r.err = true, io.EOF
	case magic == walMagic || magic == walMagicV2:
		h := file[:walHeader]
		crc := crc32.Checksum(h[:len(walMagic)+8], castagnoli)
		prev := binary.LittleEndian.Uint64(h[len(walMagic):])
		if crc != binary.LittleEndian.Uint32(h[len(walMagic)+8:]) || binary.LittleEndian.Uint32(h[len(walMagic)+12:]) != 0 || prev > math.MaxInt64 {
			r.err = fmt.Errorf("%w at offset 0: bad wal header", errTorn)
			return r
		}
		r.Prev = int64(prev)
		r.off = walHeader
		r.Valid = int64(r.off)
		r.Version = 3
		if magic == walMagicV2 {
			r.Version = 2
		}
	case isPrefix(walMagicV1) && len(file) < len(walMagicV1):
		r.Short, r.err = true, io.EOF
	case magic == walMagicV1:
		r.off = len(walMagicV1)
		r.Valid = int64(r.off)
		r.Version = 1
	default:
		r.err = fmt.Errorf("%w at offset 0: bad wal magic", errTorn)
	}
	return r
}

// walHeaderFor is the header of a new WAL file whose predecessor is prev
// bytes long (0: none).
func walHeaderFor(prev int64) []byte { return walHeaderV(walMagic, prev) }

// walHeaderV is walHeaderFor with the magic of version 2 or 3.
func walHeaderV(magic string, prev int64) []byte {
	h := make([]byte, walHeader)
	copy(h, magic)
	binary.LittleEndian.PutUint64(h[len(walMagic):], uint64(prev))
	binary.LittleEndian.PutUint32(h[len(walMagic)+8:], crc32.Checksum(h[:len(walMagic)+8], castagnoli))
	return h
}

// checkWALLink checks WAL file seq's record of its predecessor (prev,
// from its header; -1: none recorded) against that predecessor as found.
// lastSeq and lastLen are the file read before seq and its length
// (lastLen -1: none); unless lastSeq is seq-1, the predecessor is not
// there. A predecessor below start (the manifest's WALStart) is covered
// by segments and may be gone. The error names what is wrong with the
// predecessor, file seq-1.
func checkWALLink(seq uint64, prev int64, lastSeq uint64, lastLen int64, start uint64) error {
	if prev < 0 || seq == 0 || seq-1 < start {
		return nil
	}
	prevLen := lenBefore(seq, lastSeq, lastLen)
	switch {
	case prevLen < 0 && prev == 0:
		return nil
	case prevLen < 0:
		return fmt.Errorf("missing: it held %d bytes when the next WAL file was started", prev)
	case prevLen != prev:
		return fmt.Errorf("%d bytes, but %d when the next WAL file was started", prevLen, prev)
	}
	return nil
}

// Next returns the next record's decoded batch. At the clean end of the
// file it returns io.EOF; at a torn or corrupt record an error wrapping
// errTorn (the caller decides whether that is damage or a crash's tail).
// The batch's byte slices alias the file contents.
func (r *WALReader) Next() (*Batch, error) {
	if r.err != nil {
		return nil, r.err
	}
	rest := r.buf[r.off:]
	if len(rest) == 0 {
		r.err = io.EOF
		return nil, r.err
	}
	payload, why := checkRecord(rest)
	if why == whyBadLength {
		why = fmt.Sprintf("%s %d", why, binary.LittleEndian.Uint32(rest[0:4]))
	}
	if why != "" {
		return nil, r.fail(why)
	}
	if payload[0] == kindBatchAttrs && r.Version < 3 {
		return nil, r.fail(fmt.Sprintf("bad payload: a record with structured metadata in a version %d file", r.Version))
	}
	b, err := decodeBatch(payload)
	if err != nil {
		// A record whose checksum holds but does not decode was written
		// by a different (buggy or newer) writer: stop here as well.
		return nil, r.fail("bad payload: " + err.Error())
	}
	r.off += recHeader + len(payload)
	r.Valid = int64(r.off)
	return b, nil
}

const whyBadLength = "bad record length"

// checkRecord checks the record at the start of rest, its length and
// CRC-32C, and returns its payload, or why it is not a whole record (a
// constant string: walDamaged calls it at every offset of a file).
func checkRecord(rest []byte) (payload []byte, why string) {
	if len(rest) < recHeader {
		return nil, "short record header"
	}
	n := binary.LittleEndian.Uint32(rest[0:4])
	if n == 0 || n > maxRecord {
		return nil, whyBadLength
	}
	if uint64(len(rest)-recHeader) < uint64(n) {
		return nil, "record past end of file"
	}
	payload = rest[recHeader : recHeader+int(n)]
	crc := crc32.Update(0, castagnoli, rest[0:4])
	crc = crc32.Update(crc, castagnoli, payload)
	if crc != binary.LittleEndian.Uint32(rest[4:8]) {
		return nil, "checksum mismatch"
	}
	return payload, ""
}

func (r *WALReader) fail(why string) error {
	r.err = fmt.Errorf("%w at offset %d: %s", errTorn, r.off, why)
	return r.err
}

// walWriter appends records to the current WAL file and fsyncs it on a
// byte or time budget.
type walWriter struct {
	f        *os.File
	seq      uint64
	size     int64
	unsynced int64
	buf      []byte
}

func (w *walWriter) write(b *Batch) (int, error) {
	w.buf = w.buf[:0]
	w.buf = append(w.buf, make([]byte, recHeader)...) // sealed below
	w.buf = appendBatch(w.buf, b)
	if len(w.buf)-recHeader > maxRecord {
		return 0, fmt.Errorf("wal record of %d bytes exceeds the limit %d", len(w.buf)-recHeader, maxRecord)
	}
	sealRecord(w.buf)
	// One write call per record: a kill can leave at most this record
	// torn, and recovery cuts it off.
	n, err := w.f.Write(w.buf)
	w.size += int64(n)
	w.unsynced += int64(n)
	if err != nil {
		return n, fmt.Errorf("write wal: %w", err)
	}
	return n, nil
}

// truncate cuts the file back to size after a failed write.
func (w *walWriter) truncate(size int64) error {
	if err := w.f.Truncate(size); err != nil {
		return fmt.Errorf("cut a partial wal record: %w", err)
	}
	if _, err := w.f.Seek(size, io.SeekStart); err != nil {
		return err
	}
	w.unsynced -= w.size - size
	w.size = size
	return nil
}

func (w *walWriter) sync() error {
	if w.unsynced == 0 {
		return nil
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("fsync wal: %w", err)
	}
	w.unsynced = 0
	return nil
}

// lenBefore is the length of WAL file seq-1 as found, given the file read
// before seq and its length (lastLen -1: none): -1 when seq-1 is not
// there.
func lenBefore(seq, lastSeq uint64, lastLen int64) int64 {
	if lastSeq+1 == seq {
		return lastLen
	}
	return -1
}

// walDamaged reports whether the WAL file data, whose reader r stopped at
// a bad record, is damaged rather than cut by a crash. A crash (or a
// writer still appending, seen by a reader) leaves a partial record only
// at the end of the last file: records are appended in order, and a file
// is fsynced before the next one is made. So it is damage when the file
// is not the last, or when a whole record (length and CRC-32C right)
// starts after the bad one: the search for one is byte by byte, and runs
// only on this error path.
func walDamaged(data []byte, r *WALReader, last bool) bool {
	if !last {
		return true
	}
	for off := r.off + 1; off+recHeader <= len(data); off++ {
		if _, why := checkRecord(data[off:]); why == "" {
			return true
		}
	}
	return false
}
