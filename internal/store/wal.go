package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// WAL file and record format.
//
// A WAL file starts with the 8-byte magic "HAYWAL1\n" and holds records:
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
//	kind            byte = 1
//	nStreams        uvarint, then per stream: id uvarint, len uvarint, labels
//	nSources        uvarint, then per source: len uvarint, key, offset uvarint, check uvarint
//	nEntries        uvarint, then per entry:  dtime varint (from the previous
//	                entry's time, the first from 0), stream uvarint, len uvarint, line
//
// Streams are the stream definitions first used by this batch; sources are
// the input positions reached once this batch is durable (see Source).

const (
	walMagic    = "HAYWAL1\n"
	recHeader   = 8
	maxRecord   = 256 << 20
	kindBatch   = 1
	walFileMode = 0o644
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
// versions cover the first bytes only). A re-run of ingest on the same
// path resumes at Offset when the file is at least Offset bytes long and
// those bytes still match Check; otherwise the file is new content and is
// ingested from the start. The store keeps Check as given.
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
}

// Batch is what one WAL record holds. Entries' Line slices may alias the
// decoded payload.
type Batch struct {
	Streams []StreamDef
	Sources []Source
	Entries []Entry
}

// appendBatch appends the payload encoding of b to dst.
func appendBatch(dst []byte, b *Batch) []byte {
	dst = append(dst, kindBatch)
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
	for _, e := range b.Entries {
		dst = binary.AppendVarint(dst, e.Time-prev)
		prev = e.Time
		dst = binary.AppendUvarint(dst, uint64(e.Stream))
		dst = binary.AppendUvarint(dst, uint64(len(e.Line)))
		dst = append(dst, e.Line...)
	}
	return dst
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

// decodeBatch decodes a payload. Line and label bytes alias p.
func decodeBatch(p []byte) (*Batch, error) {
	if len(p) == 0 || p[0] != kindBatch {
		return nil, errors.New("unknown record kind")
	}
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
}

// NewWALReader returns a reader over the contents of a WAL file. A file
// shorter than the magic (a crash right after creating it) reads as empty
// with Valid 0; a file with wrong magic is an error from Next.
func NewWALReader(file []byte) *WALReader {
	r := &WALReader{buf: file}
	switch {
	case len(file) < len(walMagic):
		if string(file) != walMagic[:len(file)] {
			r.err = errors.New("bad wal magic")
		} else {
			r.err = io.EOF
		}
	case string(file[:len(walMagic)]) != walMagic:
		r.err = errors.New("bad wal magic")
	default:
		r.off = len(walMagic)
		r.Valid = int64(r.off)
	}
	return r
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
	if len(rest) < recHeader {
		return nil, r.fail("short record header")
	}
	n := binary.LittleEndian.Uint32(rest[0:4])
	if n == 0 || n > maxRecord {
		return nil, r.fail(fmt.Sprintf("bad record length %d", n))
	}
	if uint64(len(rest)-recHeader) < uint64(n) {
		return nil, r.fail("record past end of file")
	}
	payload := rest[recHeader : recHeader+int(n)]
	crc := crc32.Update(0, castagnoli, rest[0:4])
	crc = crc32.Update(crc, castagnoli, payload)
	if crc != binary.LittleEndian.Uint32(rest[4:8]) {
		return nil, r.fail("checksum mismatch")
	}
	b, err := decodeBatch(payload)
	if err != nil {
		// A record whose checksum holds but does not decode was written
		// by a different (buggy or newer) writer: stop here as well.
		return nil, r.fail("bad payload: " + err.Error())
	}
	r.off += recHeader + int(n)
	r.Valid = int64(r.off)
	return b, nil
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
