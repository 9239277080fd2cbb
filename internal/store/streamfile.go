package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"haystack/internal/dirfs"
)

// The stream table file, STREAMS: the manifest used to carry the whole
// stream table and was rewritten (and fsynced) at every flush, 16 MB at
// 200,000 streams for a flush of a few entries (E9). Stream definitions
// never change and ids only grow, so the table is appended to instead:
//
//	STREAMS = "HAYSTACK-STREAMS 1\n" record*
//	record  = payload length (uint32 LE) · CRC-32C of payload (uint32 LE) · payload
//	payload = first id (uvarint) · count (uvarint) · count × (label length (uvarint) · labels)
//
// A manifest that uses it (header version 2) holds StreamsBytes, the
// file's length as of that manifest, and StreamsCount, the streams in that
// prefix; readers read exactly that prefix. A flush appends the new
// definitions as one record after StreamsBytes (cutting off whatever a
// failed or crashed earlier flush left there), fsyncs the file, then
// writes the manifest: a crash in between leaves bytes no manifest
// references (the definitions are still in the WAL, which is replayed),
// and Open cuts them off. Damage inside the referenced prefix fails Open
// and snapshots, naming the file, as a damaged manifest does.
const (
	streamsName  = "STREAMS"
	streamsMagic = "HAYSTACK-STREAMS 1\n"
)

// streamsError is damage in STREAMS (as opposed to MANIFEST).
type streamsError struct{ err error }

func (e *streamsError) Error() string { return streamsName + ": " + e.err.Error() }
func (e *streamsError) Unwrap() error { return e.err }

// readStreams reads the stream table prefix m names: m.StreamsBytes of
// dir/STREAMS holding m.StreamsCount definitions, ids 0 up.
func readStreams(dir string, m *Manifest) ([]StreamDef, error) {
	return readStreamsIn(dirfs.At(dir), m)
}

// readStreamsIn is readStreams in d, as readManifestIn.
func readStreamsIn(d *dirfs.Dir, m *Manifest) ([]StreamDef, error) {
	bad := func(format string, args ...any) error {
		return &streamsError{fmt.Errorf(format, args...)}
	}
	if m.StreamsBytes < int64(len(streamsMagic)) || m.StreamsCount < 0 {
		return nil, fmt.Errorf("manifest: bad stream file length %d (count %d)", m.StreamsBytes, m.StreamsCount)
	}
	f, err := d.Open(streamsName)
	if err != nil {
		return nil, &streamsError{err}
	}
	defer f.Close()
	// The file's size bounds what is allocated, not the manifest's
	// numbers (decodeManifest holds the count to the length).
	if fi, err := f.Stat(); err != nil {
		return nil, &streamsError{err}
	} else if fi.Size() < m.StreamsBytes {
		return nil, bad("%d bytes, shorter than the %d bytes the manifest names", fi.Size(), m.StreamsBytes)
	}
	data := make([]byte, m.StreamsBytes)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, bad("shorter than the %d bytes the manifest names: %w", m.StreamsBytes, err)
	}
	if string(data[:len(streamsMagic)]) != streamsMagic {
		return nil, bad("bad magic")
	}
	defs := make([]StreamDef, 0, min(int64(m.StreamsCount), m.StreamsBytes))
	for off := len(streamsMagic); off < len(data); {
		if len(data)-off < 8 {
			return nil, bad("record header cut at byte %d", off)
		}
		n := int(binary.LittleEndian.Uint32(data[off:]))
		crc := binary.LittleEndian.Uint32(data[off+4:])
		off += 8
		if n > len(data)-off {
			return nil, bad("record at byte %d: %d bytes, past the length the manifest names", off-8, n)
		}
		p := data[off : off+n]
		if crc32.Checksum(p, castagnoli) != crc {
			return nil, bad("record at byte %d: checksum mismatch", off-8)
		}
		var err error
		if defs, err = decodeStreamRecord(p, defs); err != nil {
			return nil, bad("record at byte %d: %w", off-8, err)
		}
		off += n
	}
	if len(defs) != m.StreamsCount {
		return nil, bad("%d streams, the manifest says %d", len(defs), m.StreamsCount)
	}
	return defs, nil
}

// decodeStreamRecord appends the definitions of one record's payload to
// defs; they must continue its ids.
func decodeStreamRecord(p []byte, defs []StreamDef) ([]StreamDef, error) {
	uv := func() (uint64, bool) {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return 0, false
		}
		p = p[k:]
		return v, true
	}
	first, ok1 := uv()
	count, ok2 := uv()
	if !ok1 || !ok2 {
		return nil, errors.New("bad header")
	}
	if first != uint64(len(defs)) {
		return nil, fmt.Errorf("first id %d, want %d", first, len(defs))
	}
	if count > uint64(len(p)) || first+count > 1<<32 {
		return nil, fmt.Errorf("%d streams in %d bytes", count, len(p))
	}
	for i := range count {
		n, ok := uv()
		if !ok || n > uint64(len(p)) {
			return nil, fmt.Errorf("stream %d: bad length", first+i)
		}
		defs = append(defs, StreamDef{ID: uint32(first + i), Labels: string(p[:n])})
		p = p[n:]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%d bytes after the last stream", len(p))
	}
	return defs, nil
}

// encodeStreamRecord is one record of defs, whose ids are first, first+1...
func encodeStreamRecord(first int, defs []StreamDef) []byte {
	size := 8 + 2*binary.MaxVarintLen64
	for _, d := range defs {
		size += binary.MaxVarintLen64 + len(d.Labels)
	}
	b := make([]byte, 8, size)
	b = binary.AppendUvarint(b, uint64(first))
	b = binary.AppendUvarint(b, uint64(len(defs)))
	for _, d := range defs {
		b = binary.AppendUvarint(b, uint64(len(d.Labels)))
		b = append(b, d.Labels...)
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)-8))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[8:], castagnoli))
	return b
}

// appendStreams writes the definitions of m.Streams that the file does
// not hold yet (those from m.StreamsCount on) as one record after
// m.StreamsBytes, fsyncs the file, and updates m's StreamsBytes and
// StreamsCount. Bytes past m.StreamsBytes, which no manifest references,
// are cut off first. A store whose manifest still carries its streams
// (version 1) moves them all into a new file.
func appendStreams(dir string, m *Manifest) error {
	root, err := dirfs.Open(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return appendStreamsIn(root, m)
}

// appendStreamsIn is appendStreams in the directory root is open on, which
// it follows even when that is renamed or replaced (see writeManifest).
func appendStreamsIn(root *dirfs.Dir, m *Manifest) error {
	if len(m.Streams) <= m.StreamsCount {
		return nil
	}
	f, err := root.OpenFile(streamsName, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	fresh := m.StreamsBytes == 0
	if fresh {
		m.StreamsCount = 0 // a new file holds every stream, from id 0
	}
	rec := encodeStreamRecord(m.StreamsCount, m.Streams[m.StreamsCount:])
	if fresh {
		rec = append([]byte(streamsMagic), rec...)
	}
	if err := f.Truncate(m.StreamsBytes); err != nil {
		return fmt.Errorf("%s: %w", streamsName, err)
	}
	if _, err := f.WriteAt(rec, m.StreamsBytes); err != nil {
		return fmt.Errorf("write %s: %w", streamsName, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", streamsName, err)
	}
	if fresh {
		// The manifest about to name the file must not survive a power
		// loss that the file's directory entry does not.
		if err := root.SyncDir("."); err != nil {
			return err
		}
	}
	m.StreamsBytes += int64(len(rec))
	m.StreamsCount = len(m.Streams)
	return nil
}

// trimStreams cuts STREAMS in the directory root is open on to the length
// m references (removing it when m references none): what a flush that
// died between the append and the manifest left. Only a writer, holding
// the lock, calls it.
func trimStreams(root *dirfs.Dir, m *Manifest) error {
	if m.StreamsBytes == 0 {
		if err := root.Remove(streamsName); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	fi, err := root.Stat(streamsName)
	if err != nil {
		return err
	}
	if fi.Size() > m.StreamsBytes {
		return truncateSync(root, streamsName, m.StreamsBytes)
	}
	return nil
}
